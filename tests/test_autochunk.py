"""`chunk_size="auto"`: large intermediates run in cache-sized chunks from the 2nd call."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import vmapx
from harness import assert_same, loop_reference, peak_bytes
from vmapx import _autochunk, vmap

RNG = np.random.default_rng(11)
XS, YS = RNG.standard_normal((2048, 3)), RNG.standard_normal((512, 3))  # 24 MiB inside


def _counting(f):
    calls = []

    def counted(*args):
        calls.append(1)
        return f(*args)

    return counted, calls


def _distances(x, ys):
    return np.sqrt(((ys - x) ** 2).sum(-1))


def test_large_intermediates_run_in_chunks_from_the_second_call():
    f, calls = _counting(_distances)
    batched = vmap(f, in_axes=(0, None))
    first = batched(XS, YS)
    assert len(calls) == 1  # the first call runs whole and measures
    second = batched(XS, YS)
    assert len(calls) > 4  # then in chunks
    assert_same(second, first, rtol=0, atol=0)  # the same bits
    assert_same(second, loop_reference(_distances, [XS, YS], (0, None)))
    assert second.flags.c_contiguous and second.flags.owndata


def test_chunks_bound_peak_memory_below_the_intermediates():
    batched = vmap(_distances, in_axes=(0, None))
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


def test_a_random_generator_argument_keeps_the_whole_batch():
    """Chunks would change which numbers an example draws when it draws twice."""
    f, calls = _counting(lambda x, ys, rng: _distances(x, ys) + rng.normal() + rng.normal())
    batched = vmap(f, in_axes=(0, None, None), randomness="different")
    one = batched(XS, YS, np.random.default_rng(0))
    two = batched(XS, YS, np.random.default_rng(0))
    assert len(calls) == 2
    assert_same(one, two, rtol=0, atol=0)


def test_a_chunked_call_slower_than_the_whole_batch_switches_chunking_off():
    auto = _autochunk.AutoChunk()
    key = _autochunk.signature(2048, [XS, YS], [0, None])
    auto.observe_whole(key, 2048, 24 << 20, 8 << 20, seconds=0.010)
    assert auto.chunk_for(key) == 2048 * _autochunk.CHUNK_BYTES // (24 << 20)
    auto.observe_chunked(key, seconds=0.009)
    assert auto.chunk_for(key) is not None
    auto.observe_chunked(key, seconds=0.020)
    assert auto.chunk_for(key) is None


def test_chunks_whose_results_differ_in_dtype_are_promoted_like_the_loop():
    def f(x):
        return x.astype(np.float32) if x[0] > 0 else x  # decided per example: loops

    x = np.array([[1.0, 2.0], [3.0, 4.0], [-1.0, 2.0], [-3.0, 1.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", vmapx.PerformanceWarning)
        got = vmap(f, chunk_size=2)(x)
    expected = loop_reference(f, [x], 0)
    assert got.dtype == expected.dtype == np.float64
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
