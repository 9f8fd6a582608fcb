"""`chunk_size="auto"`: large intermediates run in cache-sized chunks from the 2nd call."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import vmapx
from harness import assert_same, loop_reference, peak_bytes
from vmapx import _autochunk, vmap

RNG = np.random.default_rng(11)
XS, YS = RNG.standard_normal((2048, 3)), RNG.standard_normal((512, 3))  # 24 MiB inside


@pytest.fixture(autouse=True)
def _one_thread(monkeypatch):
    """The rules of one thread (several threads split long calls: see test_parallel.py)."""
    monkeypatch.setattr(vmapx.config, "workers", 1)


def _counting(f):
    calls = []

    def counted(*args):
        calls.append(1)
        return f(*args)

    return counted, calls


def _distances(x, ys):
    return np.sqrt(((ys - x) ** 2).sum(-1))


def test_large_intermediates_run_in_chunks_after_warm_whole_calls():
    f, calls = _counting(_distances)
    batched = vmap(f, in_axes=(0, None))
    first = batched(XS, YS)
    assert len(calls) == 1  # the first call runs whole and measures
    for _ in range(_autochunk.WARM_WHOLES):  # (then whole calls with warm caches, the
        batched(XS, YS)  # times the chunks must beat: the first ones flatter them)
    assert len(calls) == 1 + _autochunk.WARM_WHOLES
    second = batched(XS, YS)
    assert len(calls) > 5 + _autochunk.WARM_WHOLES  # then in chunks
    assert_same(second, first, rtol=0, atol=0)  # the same bits
    assert_same(second, loop_reference(_distances, [XS, YS], (0, None)))
    assert second.flags.c_contiguous and second.flags.owndata


def test_chunks_bound_peak_memory_below_the_intermediates():
    batched = vmap(_distances, in_axes=(0, None))
    for _ in range(_autochunk.WARM_WHOLES):  # (whole calls: the times chunks must beat)
        batched(XS, YS)
    whole = peak_bytes(lambda: vmap(_distances, in_axes=(0, None), chunk_size=None)(XS, YS))
    chunked = peak_bytes(lambda: batched(XS, YS))  # (the warm-up call measures)
    result = XS.shape[0] * YS.shape[0] * 8
    assert chunked < 2 * result < whole, (chunked, result, whole)  # whole: 3-6x the result


@pytest.mark.parametrize(
    "case",
    ["results as large as the intermediates", "chunk_size=None", "axis_name", "small"],
)
def test_when_it_does_not_chunk(case):
    f, calls = _counting(_distances)
    args, kw = (XS, YS), {"in_axes": (0, None)}
    if case == "results as large as the intermediates":
        f, calls = _counting(lambda x, ys: (ys - x) * 2.0)
    elif case == "chunk_size=None":
        kw["chunk_size"] = None
    elif case == "axis_name":
        kw["axis_name"] = "i"
    else:
        args = (XS[:100], YS)
    batched = vmap(f, **kw)
    batched(*args)
    batched(*args)
    assert len(calls) == 2


def test_each_dtype_is_decided_on_its_own(monkeypatch):
    """A float32 batch of the same shapes (12 MiB inside: no chunks) does not decide for
    the float64 one (24 MiB: chunks)."""
    monkeypatch.setattr(_autochunk, "resource", None)  # (the cache rule only: no faults)
    f, calls = _counting(_distances)
    batched = vmap(f, in_axes=(0, None))
    for x, chunked in ((XS.astype(np.float32), False), (XS, True)):
        for _ in range(2 + _autochunk.WARM_WHOLES):
            calls.clear()
            batched(x, YS.astype(x.dtype))
        assert (len(calls) > 1) is chunked, (x.dtype, len(calls))


def test_a_random_generator_argument_keeps_the_whole_batch():
    """Chunks would change which numbers an example draws when it draws twice."""
    f, calls = _counting(lambda x, ys, rng: _distances(x, ys) + rng.normal() + rng.normal())
    batched = vmap(f, in_axes=(0, None, None), randomness="different")
    one = batched(XS, YS, np.random.default_rng(0))
    two = batched(XS, YS, np.random.default_rng(0))
    assert len(calls) == 2
    assert_same(one, two, rtol=0, atol=0)


class _Made:
    """What `AutoChunk` reads of a batch trace: bytes of the largest value, of all."""

    def __init__(self, largest: int, made: int) -> None:
        self.largest, self.made = largest, made


_MIB = 1 << 20
_KEY = ("signature",)


def test_a_chunked_call_slower_than_the_whole_batch_switches_chunking_off():
    auto = _autochunk.AutoChunk()
    for seconds in (0.015, *[0.010] * _autochunk.WARM_WHOLES):  # (a cold first call)
        assert auto.chunk_for(_KEY) is None
        auto.observe_whole(_KEY, 2048, _Made(24 * _MIB, 64 * _MIB), [np.empty(_MIB)], seconds)
    assert auto.chunk_for(_KEY) == 2048 * _autochunk.CHUNK_BYTES // (24 * _MIB)
    auto.observe_chunked(_KEY, seconds=0.030)  # the first may pay for memory: not judged
    for seconds in (0.012, 0.020):  # (judged by the best of three: one says little)
        auto.observe_chunked(_KEY, seconds)
        assert auto.chunk_for(_KEY) is not None
    auto.observe_chunked(_KEY, seconds=0.013)
    assert auto.chunk_for(_KEY) is None


def _faulting_calls(faulted: list) -> _autochunk.AutoChunk:
    """An AutoChunk after a first call making 10 MiB temporaries of a 10 MiB result,
    whole-batch calls after it faulting in `faulted` bytes each."""
    auto = _autochunk.AutoChunk()
    result = [np.empty(10 * _MIB // 8)]
    auto.observe_whole(_KEY, 100, _Made(10 * _MIB, 20 * _MIB), result, 0.008)
    for f in faulted:
        assert auto.chunk_for(_KEY) is None
        assert auto.counts_faults(_KEY) is (_autochunk.resource is not None)
        auto.observe_whole(_KEY, 100, _Made(10 * _MIB, 20 * _MIB), result, 0.008, f)
    return auto


@pytest.mark.skipif(_autochunk.resource is None, reason="no page-fault counts here")
def test_whole_batch_calls_that_page_fault_run_in_chunks_after_the_checks():
    auto = _faulting_calls([5 * _MIB] * _autochunk.FAULT_CHECKS)
    assert auto.chunk_for(_KEY) == 100 * _autochunk.CHUNK_BYTES // (10 * _MIB)
    assert not auto.counts_faults(_KEY)  # decided: no more checks


@pytest.mark.skipif(_autochunk.resource is None, reason="no page-fault counts here")
def test_a_call_without_page_faults_keeps_the_whole_batch():
    auto = _faulting_calls([5 * _MIB, 0])
    assert auto.chunk_for(_KEY) is None
    assert not auto.counts_faults(_KEY)


@pytest.mark.skipif(_autochunk.resource is None, reason="no page-fault counts here")
def test_faults_of_huge_pages_count(monkeypatch):
    """Where one fault maps a transparent huge page (512 pages), 10 MiB of temporaries
    faulted in are 5 faults: 20 KiB counted by pages."""
    monkeypatch.setattr(_autochunk, "PAGES_PER_FAULT", 512)
    auto = _faulting_calls([5 * _autochunk.PAGE] * _autochunk.FAULT_CHECKS)
    assert auto.chunk_for(_KEY) == 100 * _autochunk.CHUNK_BYTES // (10 * _MIB)
    assert _faulting_calls([0]).chunk_for(_KEY) is None  # (none: the memory was kept)


def test_small_temporaries_or_results_as_large_are_not_checked():
    auto = _autochunk.AutoChunk()
    result = [np.empty(10 * _MIB // 8)]
    auto.observe_whole(_KEY, 100, _Made(10 * _MIB, 15 * _MIB), result, 0.008)  # 5 MiB more
    assert not auto.counts_faults(_KEY) and auto.chunk_for(_KEY) is None


_A_FRESH_PROCESS = """
import json, resource, numpy as np, vmapx
calls = []
def f(img):
    calls.append(1)
    return (img - img.mean()) / (img.std() + 1e-6)
imgs = np.random.default_rng(0).uniform(size=(100, 64, 64, 3))
g = vmapx.vmap(f)
first, report = g(imgs), []
for _ in range(6):
    calls.clear()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    out = g(imgs)
    report.append((len(calls), resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before))
    assert np.array_equal(out, first)
print(json.dumps(report))
"""


@pytest.mark.skipif(_autochunk.resource is None, reason="no page-fault counts here")
def test_in_a_process_whose_allocator_gives_memory_back_calls_run_in_chunks():
    """End to end in a fresh Python process. glibc usually gives the 9.4 MiB
    temporaries of this function back to the system after each call, so each call
    faults their pages in again; after the fault checks vmapx runs it in chunks."""
    out = subprocess.run(
        [sys.executable, "-c", _A_FRESH_PROCESS],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "VMAPX_WORKERS": "1"},
    )
    report = json.loads(out.stdout)  # (calls of f, pages faulted) per call
    temporaries = 100 * 64 * 64 * 3 * 8
    checks = report[: _autochunk.FAULT_CHECKS]
    share = _autochunk.FAULT_SHARE / _autochunk.PAGES_PER_FAULT  # (huge pages: fewer faults)
    if any(pages * _autochunk.PAGE < share * temporaries for _, pages in checks):
        pytest.skip(f"this process's allocator kept its freed memory: {report}")
    assert report[0][0] == report[1][0] == 1, report  # the fault checks: whole batch
    assert report[-1][0] > 1, report  # then chunks: f runs once per chunk


def test_an_unmapped_output_must_agree_across_chunks():
    def f(x):  # the loop runs (per-example branch); the 2nd output differs by example
        return x, (np.float64(1.0) if x[0] > 0 else np.float64(2.0))

    x = np.array([[1.0], [1.0], [-1.0], [-1.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", vmapx.PerformanceWarning)
        for chunk in (None, 2):
            with pytest.raises(vmapx.errors.InAxesError, match="differs between examples"):
                vmap(f, out_axes=(0, None), chunk_size=chunk)(x)
        same = vmap(lambda x: (x, np.full(2, np.nan)), out_axes=(0, None), chunk_size=2)(x)
    assert np.isnan(same[1]).all()  # (NaN agrees with NaN)


_KINDS = [np.int8, np.uint8, np.float16, np.float16]
_DTYPE_CASES = {
    # float32 examples then float64 ones
    "promoted like the loop": (
        lambda x: x.astype(np.float32) if x[0] > 0 else x,
        np.array([[1.0, 2.0], [3.0, 4.0], [-1.0, 2.0], [-3.0, 1.0]]),
        np.float64,
    ),
    # NumPy's promotion is not associative: int8, uint8, float16, float16 examples stack
    # to float16, where chunks of two would give int16 and float16, then float32
    "promoted over all examples at once": (
        lambda x: x.astype(_KINDS[int(x[0])]),
        np.arange(4.0)[:, None] * np.ones((4, 2)),
        np.float16,
    ),
}


@pytest.mark.parametrize("case", list(_DTYPE_CASES))
def test_chunks_whose_examples_differ_in_dtype_take_the_loops_dtype(case):
    f, x, dtype = _DTYPE_CASES[case]  # (decided per example: the loop runs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", vmapx.PerformanceWarning)
        got = vmap(f, chunk_size=2)(x)
    expected = loop_reference(f, [x], 0)
    assert got.dtype == expected.dtype == dtype
    assert_same(got, expected, rtol=0, atol=0)


def test_bad_chunk_size_names_the_choices():
    with pytest.raises(ValueError, match="'auto' or None"):
        vmap(lambda x: x, chunk_size="always")


def test_chunks_under_an_outer_transform():
    """Chunk results that are tracers of an outer transform are joined by NumPy."""
    x = RNG.standard_normal((5, 3))
    f = lambda v: np.sin(v) * 2.0  # noqa: E731
    g = vmapx.grad(lambda x: vmap(f, chunk_size=2)(x).sum())(x)
    assert_same(g, 2.0 * np.cos(x))
    _, t = vmapx.jvp(lambda x: vmap(f, chunk_size=2)(x), (x,), (np.ones_like(x),))
    assert_same(t, 2.0 * np.cos(x))
    outer = vmap(lambda xs: vmap(f, chunk_size=2)(xs))(np.stack([x, -x]))
    assert_same(outer, np.stack([f(x), f(-x)]))
