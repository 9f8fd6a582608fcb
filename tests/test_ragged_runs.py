"""`vmapx.map`'s padded mode where many examples share a length: the padded stacks
written one run of equal lengths at a time equal those written example by example, and
the map equals the loop on such batches (plain arrays, pytrees, mixed dtypes, 0-length
and 0-d leaves, under grad and jit); "auto" buckets weigh large buckets."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import vmapx
from test_ragged import assert_loop
from vmapx import _padding


def one_by_one(leaves: list, axis: int, size: int, pad_value: Any) -> np.ndarray:
    """The padded stack, written example by example (what the runs must equal)."""
    shape = list(leaves[0].shape)
    shape[axis] = size
    out = np.full((len(leaves), *shape), pad_value, dtype=leaves[0].dtype)
    for i, x in enumerate(leaves):
        out[(i, *(slice(None),) * axis, slice(0, x.shape[axis]))] = x
    return out


def runs_of_lengths(rng: np.random.Generator, count: int, top: int) -> np.ndarray:
    """Lengths with repeats next to each other (runs of 1 to 6) and a few lone ones."""
    lengths = np.repeat(rng.integers(0, top + 1, count), rng.integers(1, 7, count))
    return lengths[: max(count, 1)]


@pytest.mark.parametrize("seed", range(12))
def test_runs_stack_as_the_examples_one_by_one(seed: int) -> None:
    rng = np.random.default_rng(seed)
    ndim = int(rng.integers(1, 4))
    axis = int(rng.integers(0, ndim))
    other = rng.integers(1, 4, ndim).tolist()
    dtype = rng.choice([np.float64, np.int32, np.bool_, np.complex64])
    lengths = runs_of_lengths(rng, int(rng.integers(1, 30)), 9)
    if rng.random() < 0.5:
        lengths = np.sort(lengths)  # (the plain path's order: by length)
    size = int(lengths.max()) + int(rng.integers(0, 3))
    leaves = []
    for n in lengths.tolist():
        shape = list(other)
        shape[axis] = n
        leaves.append(rng.normal(size=shape).astype(dtype))
    pad_value = [0, 1, -3][seed % 3]
    got = _padding.stack_padded(leaves, axis, size, pad_value, lengths)
    want = one_by_one(leaves, axis, size, pad_value)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_runs_of_views_and_non_contiguous_examples() -> None:
    rng = np.random.default_rng(0)
    base = rng.normal(size=(6, 40))
    leaves = [base[:, 1:7:2], base[:, 10:16:2], base[::2, 20:26:2], base[1::2, 30:36:2]]
    leaves = [x[:3] for x in leaves]  # (3, 3) each: one run, none of them contiguous
    got = _padding.stack_padded(leaves, 1, 5, 0, np.array([3, 3, 3, 3]))
    np.testing.assert_array_equal(got, one_by_one(leaves, 1, 5, 0))


def masked_summary(x: np.ndarray, n: Any) -> np.ndarray:
    mask = np.arange(x.shape[-1]) < n
    total = np.where(mask, x, 0.0).sum(axis=-1)
    peak = np.where(mask, x, -np.inf).max(axis=-1)
    return np.concatenate([total / np.maximum(n, 1), peak])


def summary(x: np.ndarray) -> np.ndarray:
    return masked_summary(x, x.shape[-1])


@pytest.mark.parametrize("buckets", ["auto", 3, [4, 9, 30]])
@pytest.mark.parametrize("seed", range(4))
def test_map_over_runs_of_lengths_equals_the_loop(seed: int, buckets: Any) -> None:
    rng = np.random.default_rng(seed)
    lengths = runs_of_lengths(rng, 60, 25)
    lengths = np.maximum(lengths, 1)  # (a max over no steps: the loop raises)
    rng.shuffle(lengths)
    xs = [rng.normal(size=(3, n)) for n in lengths.tolist()]
    got = vmapx.map(masked_summary, xs, pad_axes=1, buckets=buckets, check=True)
    assert_loop(got, [summary(x) for x in xs], rtol=1e-12)


def test_map_over_runs_of_pytrees_with_mixed_dtypes() -> None:
    """The general path (examples that are pytrees): runs within each padded group."""
    rng = np.random.default_rng(1)
    lengths = np.maximum(runs_of_lengths(rng, 40, 12), 1)
    xs = [
        {"x": rng.normal(size=(n, 2)), "k": rng.integers(0, 9, size=n).astype(np.int32)}
        for n in lengths.tolist()
    ]

    def f(ex: dict, n: Any) -> dict:
        mask = np.arange(ex["x"].shape[0]) < n
        return {
            "s": np.where(mask[:, None], ex["x"], 0.0).sum(0),
            "c": np.where(mask, ex["k"], 0).sum(),
            "y": ex["x"] * 2,
        }

    got = vmapx.map(f, xs, pad_axes=0, out_pad_axes={"s": None, "c": None, "y": 0})
    assert_loop(got, [f(ex, ex["x"].shape[0]) for ex in xs], rtol=1e-12)


def test_map_over_runs_with_zero_length_and_0d_leaves() -> None:
    rng = np.random.default_rng(2)
    lengths = [0, 0, 0, 2, 2, 2, 2, 0, 5, 5, 5]
    xs = [rng.normal(size=(n,)) for n in lengths]
    scales = [np.float64(s) for s in rng.normal(size=len(lengths))]

    def f(x: np.ndarray, s: Any, n: Any) -> Any:
        return np.where(np.arange(x.shape[0]) < n, x * s, 0.0).sum()

    got = vmapx.map(f, xs, scales, pad_axes=(0, None))
    assert_loop(got, [f(x, s, x.shape[0]) for x, s in zip(xs, scales, strict=True)])


def test_grad_and_jit_of_a_padded_map_over_runs() -> None:
    rng = np.random.default_rng(3)
    xs = [rng.normal(size=(n, 3)) for n in [4] * 5 + [7] * 6 + [2] * 4]
    w = rng.normal(size=3)

    def masked(w: np.ndarray, x: np.ndarray, n: Any) -> Any:
        return np.sum(np.where((np.arange(x.shape[0]) < n)[:, None], np.tanh(x * w), 0.0))

    def total(w: np.ndarray) -> Any:
        return sum(vmapx.map(masked, w, xs, in_axes=(None, 0), pad_axes=(None, 0)))

    want = sum(vmapx.grad(lambda w, x: np.sum(np.tanh(x * w)))(w, x) for x in xs)
    np.testing.assert_allclose(vmapx.grad(total)(w), want, rtol=1e-10)
    vmapx.check_grads(total, (w,), order=1)
    jitted = vmapx.jit(total)
    for _ in range(2):  # (the recording, then its replay)
        np.testing.assert_allclose(jitted(w), sum(np.sum(np.tanh(x * w)) for x in xs))


def test_auto_buckets_weigh_large_buckets() -> None:
    """Past `CACHE_ELEMENTS` a bucket's elements weigh more, so "auto" splits a batch
    into more, smaller buckets than the padded size alone would."""
    lengths = np.clip(np.round(np.random.default_rng(0).lognormal(3, 0.9, 4096)), 1, 512)
    weights = np.full(len(lengths), 4.0)
    sizes = _padding.bucket_sizes(lengths, "auto", weights)
    tops = np.unique(sizes)
    largest = max(top * weights[sizes == top].sum() for top in tops)
    assert largest <= 1.25 * _padding.CACHE_ELEMENTS
    assert _padding.auto_cost(_padding.CACHE_ELEMENTS) == _padding.CACHE_ELEMENTS
    over = _padding.auto_cost(_padding.CACHE_ELEMENTS + 100.0)
    assert over == _padding.CACHE_ELEMENTS + 100.0 * (1 + _padding.OVER_CACHE)


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_runs_are_written_straight_into_the_padded_stack(axis: int, monkeypatch: Any) -> None:
    rng = np.random.default_rng(axis)
    shapes = [[2, 3, 4] for _ in range(5)]
    for shape, n in zip(shapes, [1, 3, 3, 3, 0], strict=True):
        shape[axis] = n
    leaves = [rng.normal(size=shape) for shape in shapes]
    lengths = np.array([x.shape[axis] for x in leaves])
    stacked: list = []  # (np.stack: the way for axis 0, where rows cannot merge)
    real_stack = np.stack
    monkeypatch.setattr(np, "stack", lambda *a, **k: stacked.append(1) or real_stack(*a, **k))
    got = _padding.stack_padded(leaves, axis, 6, -1, lengths)
    np.testing.assert_array_equal(got, one_by_one(leaves, axis, 6, -1))
    assert len(stacked) == (axis == 0)
