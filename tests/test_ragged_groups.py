"""`vmapx.map`'s fast paths for batches of plain arrays: the exact groups read with array
passes equal those of a dict keyed by each example's signature, the padded groups carry
their examples' lengths, and each example's result is its own array (no two results
share memory, as no two of the loop's do)."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from typing import Any

import numpy as np
import optree
import pytest

import vmapx
from test_ragged import DTYPES, assert_loop, random_array, random_signatures
from vmapx import _exact_groups, _heap_room, _padded_groups, _padding


def groups_by_dict(columns: list) -> list:
    """The loop's grouping: a dict keyed by (shape, dtype) of each argument."""
    groups: dict = {}
    for e, example in enumerate(zip(*columns, strict=True)):
        key = tuple((x.shape, x.dtype) for x in example)
        groups.setdefault(key, []).append(e)
    return list(groups.values())


@pytest.mark.parametrize("seed", range(30))
def test_exact_groups_equal_a_dict_of_signatures(seed: int) -> None:
    rng = np.random.default_rng(seed)
    count, nargs = int(rng.integers(1, 120)), int(rng.integers(1, 4))
    columns = []
    for _ in range(nargs):
        sigs = random_signatures(rng, int(rng.integers(1, 8)))
        if seed % 2:  # (one dtype: the shapes alone decide)
            sigs = [(shape, sigs[0][1]) for shape, _ in sigs]
        columns.append([random_array(rng, *sigs[k]) for k in rng.integers(0, len(sigs), count)])
    assert _exact_groups.exact_groups(columns) == groups_by_dict(columns)


def test_exact_groups_tell_equal_shapes_of_other_dtypes_apart() -> None:
    xs = [np.ones(3, dtype) for dtype in DTYPES] * 2
    assert _exact_groups.exact_groups([xs]) == [[i, i + len(DTYPES)] for i in range(len(DTYPES))]


@pytest.mark.parametrize("seed", range(10))
def test_bucket_groups_carry_their_examples_lengths(seed: int) -> None:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 60, int(rng.integers(1, 300)))
    sizes, groups = _padded_groups.bucket_groups(
        lengths, lambda values, counts: _padding.bucket_sizes(values, 4, counts)
    )
    np.testing.assert_array_equal(sizes, _padding.bucket_sizes(lengths, 4))
    assert sorted(itertools.chain.from_iterable(g.idxs for g in groups)) == list(
        range(len(lengths))
    )
    for group in groups:
        np.testing.assert_array_equal(group.lengths, lengths[group.idxs])
        assert (sizes[group.idxs] == group.size).all()
        assert list(group.lengths) == sorted(group.lengths)  # (by length: runs stack as one)


def assert_no_shared_memory(results: list) -> None:
    leaves = [leaf for r in results for leaf in optree.tree_leaves(r)]
    arrays = [leaf for leaf in leaves if isinstance(leaf, np.ndarray)]
    for a, b in itertools.combinations(arrays, 2):
        assert not np.shares_memory(a, b)


def masked_parts(x: np.ndarray, n: Any) -> dict:
    mask = np.arange(x.shape[-1]) < n
    return {"kept": np.where(mask, x * 2, 0.0), "sum": np.where(mask, x, 0.0).sum(-1)}


@pytest.mark.parametrize("mode", ["exact", "padded", "padded, trimmed"])
def test_each_result_is_its_own_array(mode: str) -> None:
    rng = np.random.default_rng(0)
    xs = [rng.normal(size=(3, n)) for n in rng.integers(0, 9, 60)]
    if mode == "exact":
        got = vmapx.map(lambda x: {"kept": x * 2, "sum": x.sum(-1)}, xs, min_group_size=2)
    else:
        out_pad = {"kept": -1, "sum": None} if mode == "padded, trimmed" else None
        got = vmapx.map(masked_parts, xs, pad_axes=-1, out_pad_axes=out_pad, buckets=3)
        if out_pad is None:  # (untrimmed: compare the true part)
            got = [
                {"kept": g["kept"][:, : x.shape[1]], "sum": g["sum"]}
                for g, x in zip(got, xs, strict=True)
            ]
    assert_loop(got, [{"kept": x * 2, "sum": x.sum(-1)} for x in xs], rtol=1e-12)
    assert_no_shared_memory(got)


def test_array_results_are_rows_of_their_own() -> None:
    xs = [np.arange(float(n)) for n in [3, 3, 3, 5, 5, 5, 5, 5, 5, 5, 5]]
    got = vmapx.map(lambda x: x[::-1] * 1.0, xs, min_group_size=2)
    assert_loop(got, [x[::-1] * 1.0 for x in xs], rtol=0)
    assert_no_shared_memory(got)
    got[0][0] = 100.0  # (a write into one result reaches no other)
    assert all(g[0] == x[-1] for g, x in zip(got[1:], xs[1:], strict=True))


ROOM_SCRIPT = """
import resource, sys
import numpy as np
from vmapx import _heap_room
if sys.argv[1] == "room":
    _heap_room.make_room(6 * (512 << 10))  # (a run whose arrays come to 3 MiB)

def run():  # (temporaries of a batched run: six arrays of 512 KiB live at once)
    arrays = [np.ones(64 << 10) for _ in range(6)]
    del arrays

for _ in range(3):
    run()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    run()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


@pytest.mark.skipif(not _heap_room._GLIBC, reason="the thresholds are glibc's")
def test_room_in_the_heap_keeps_temporaries_from_faulting_in_again() -> None:
    # (glibc's own settings fix its thresholds, so that freeing raises none: Dask's
    # LocalCluster sets MALLOC_TRIM_THRESHOLD_ in this process's environment for its
    # workers, which the subprocess would inherit after test_dask)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}

    def faults(mode: str) -> int:
        done = subprocess.run(
            [sys.executable, "-c", ROOM_SCRIPT, mode],
            capture_output=True, text=True, check=True, env=env,
        )  # fmt: skip
        return int(done.stdout)

    pages = 10 * 6 * (512 << 10) // 4096  # (what the runs would fault in from new pages)
    without, with_room = faults("none"), faults("room")
    assert with_room < pages // 20, (with_room, without, pages)


def test_room_is_made_once_per_size_and_at_most_the_largest(monkeypatch: Any) -> None:
    monkeypatch.setattr(_heap_room, "_GLIBC", True)
    monkeypatch.setattr(_heap_room, "_made", [0])
    sizes: list = []
    real_empty = np.empty
    monkeypatch.setattr(
        _heap_room.np, "empty", lambda n, dtype: sizes.append(n) or real_empty(0, dtype)
    )
    for nbytes in [1 << 10, 1 << 20, 1 << 19, 1 << 20, 3 << 20, 1 << 30, 1 << 30]:
        _heap_room.make_room(nbytes)
    assert sizes == [_heap_room.HEADROOM << 20, 3 * _heap_room.HEADROOM << 20, _heap_room.MAX_BYTES]
    monkeypatch.setattr(_heap_room, "_GLIBC", False)
    monkeypatch.setattr(_heap_room, "_made", [0])
    _heap_room.make_room(1 << 20)
    assert len(sizes) == 3  # (not glibc: nothing)
