"""Chunk outputs written into one array per output (`vmapx._chunk_outputs`)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import vmapx
from harness import assert_same, loop_reference, peak_bytes
from vmapx import _api, _autochunk, _chunk_outputs, vmap
from vmapx._compat import NUMPY2

RNG = np.random.default_rng(11)
# (NumPy 1's value-based promotion: a ufunc's result dtype is not known before it runs,
# so nothing computes into the slices there; the results are copied, and the same)
needs_numpy2 = pytest.mark.skipif(not NUMPY2, reason="in place with NumPy 2's promotion")
X = RNG.standard_normal((24, 4, 4))


@pytest.fixture(autouse=True)
def _offer_small_results(monkeypatch):
    """Every chunk is offered its slices (the examples here are small)."""
    monkeypatch.setattr(_chunk_outputs, "OFFER_BYTES", 0)


@pytest.fixture
def claims(monkeypatch):
    """The ufuncs that computed into an offered slice, by name."""
    names: list[str] = []
    real = _chunk_outputs.ufunc_destination

    def spy(trace, ufunc, vals):
        out = real(trace, ufunc, vals)
        if out is not None:
            names.append(ufunc.__name__)
        return out

    monkeypatch.setattr(_chunk_outputs, "ufunc_destination", spy)
    import vmapx._numpy.ufuncs as ufuncs

    monkeypatch.setattr(ufuncs, "ufunc_destination", spy)
    return names


def _check(f, args, in_axes=0, out_axes=0, chunk=5, workers=2, leaf_axes=None):
    got = vmap(f, in_axes=in_axes, out_axes=out_axes, chunk_size=chunk, workers=workers)(*args)
    expected = loop_reference(f, args, in_axes, out_axes if leaf_axes is None else leaf_axes)
    assert_same(got, expected, rtol=0, atol=0)
    return got


@needs_numpy2
@pytest.mark.parametrize("workers", [1, 2])
def test_elementwise_results_are_computed_in_their_slices(claims, workers):
    got = _check(np.sqrt, [np.abs(X)], workers=workers)
    assert got.base is None and got.flags.c_contiguous  # (the whole-batch array itself)
    assert 1 <= len(claims) <= 5  # (chunks after the first joined: in place)


@needs_numpy2
def test_outer_products_are_computed_in_their_slices(claims):
    _check(lambda a: np.tensordot(a, a, 0), [X], workers=1)
    assert claims == ["multiply"] * 4


def test_other_out_axes_are_copied_by_the_chunks(claims):
    _check(lambda a: np.exp(a) + 1, [X], out_axes=1)
    _check(
        lambda a: {"e": np.exp(a), "s": a.sum()}, [X], out_axes={"e": -1, "s": 0}, leaf_axes=(-1, 0)
    )
    assert not claims  # (offered only where the slice is contiguous: out_axes=0)


def test_pytrees_whose_values_take_each_others_slices():
    def f(x):
        doubled = x * 2  # (made first: it takes the first slice of its shape, "a"'s)
        return {"a": x + 1, "b": doubled, "c": (np.sin(x), x.sum())}

    _check(f, [X], workers=1)
    _check(f, [X], workers=2)


@pytest.mark.parametrize(
    "f",
    [
        lambda x: np.sqrt(np.abs(x)).T,  # a transposed view of the claimed slice
        lambda x: np.exp(x)[::-1],
        lambda x: (np.exp(x), np.exp(x).T),
        lambda x: (np.cos(x).T, np.cos(x) * 1),
    ],
)
def test_views_of_claimed_slices_are_copied_first(f):
    _check(f, [X], workers=1)
    _check(f, [X], workers=2)


def test_values_kept_by_the_function_stay_out_of_the_slices():
    kept: list = []

    def f(x):
        y = np.exp(x)  # (claims the slice, then is returned plus one)
        kept.append(y)
        return y + 1

    got = vmap(f, chunk_size=6, workers=1)(X)
    assert_same(got, np.exp(X) + 1, rtol=1e-15, atol=0)


def test_chunks_of_another_dtype_are_concatenated_to_the_loops_dtype():
    kinds = [np.int8, np.uint8, np.float16, np.float16, np.int8, np.int8]
    x = (np.arange(6.0)[:, None] * np.ones((6, 2))) % 6
    f = lambda v: (v + 1).astype(kinds[int(v[0])])  # noqa: E731
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", vmapx.PerformanceWarning)
        for workers in (1, 2):
            for chunk in (1, 2, 4):
                got = vmap(f, chunk_size=chunk, workers=workers)(x)
                assert_same(got, loop_reference(f, [x], 0), rtol=0, atol=0)


def test_an_earlier_calls_outputs_that_no_longer_fit():
    """Outputs allocated from an earlier call's (`spec`) that this call's chunks do not
    match (another dtype, shape or structure) are not used: the result is the loop's."""
    options = _options()
    x = np.abs(X)
    cases = [
        (np.sqrt, ((x.shape, np.dtype(np.float32)),)),
        (np.sqrt, (((24, 4, 5), np.dtype(float)),)),
        (lambda v: (np.sqrt(v), v * 2), ((x.shape, np.dtype(float)),)),
    ]
    for f, leaves in cases:
        spec = (_chunk_outputs.spec_of(np.zeros(3))[0], list(leaves))
        for workers in (1, 2):
            got = _api._chunked(f, options, [x], None, [0], {}, 24, 5, workers, None, spec)
            assert_same(got, loop_reference(f, [x], 0), rtol=0, atol=0)


def test_an_error_in_a_chunk_leaves_no_offer_behind():
    def f(x):
        if np.isnan(x).any():
            raise RuntimeError("example 13 fails")
        return np.exp(x)

    x = X.copy()
    x[13] = np.nan
    for workers in (1, 2):
        with pytest.raises(RuntimeError, match="example 13 fails"):
            vmap(f, chunk_size=4, workers=workers, fallback="silent")(x)
        assert _chunk_outputs.active == 0
        assert getattr(_chunk_outputs._local, "offer", None) is None
        assert not vmapx._core._state.stack
    _check(f, [X])


def test_random_draws_stay_the_loops_stream(claims):
    def f(x, rng):
        return np.exp(x) + rng.normal(size=x.shape)

    got = vmap(f, in_axes=(0, None), chunk_size=5, randomness="different")(
        X, np.random.default_rng(3)
    )
    rng = np.random.default_rng(3)
    assert_same(got, np.stack([f(x, rng) for x in X]), rtol=0, atol=0)


def test_zero_and_one_chunk_batches():
    for n in (1, 5):
        _check(np.exp, [X[:n]])
    empty = vmap(np.exp, chunk_size=5, workers=2)(X[:0])
    assert empty.shape == (0, 4, 4) and empty.dtype == X.dtype


@needs_numpy2
def test_vmaps_inside_the_chunks_do_not_take_the_slices(claims):
    ones = np.ones((5, 4, 4))  # (the inner vmap's exp has a slice's shape, at its level)
    _check(lambda x: vmap(np.exp)(ones)[0] + x, [X[:20]], workers=1)
    assert claims and set(claims) == {"add"}  # (the outer trace's sums only)


@needs_numpy2
def test_auto_chunks_compute_their_results_in_place(monkeypatch, claims):
    """A call bound by writing its results goes to threads (no cache-sized chunks on one
    thread first) where they can compute into the outputs, after `WARM_WHOLES` more
    whole calls; every chunk then computes into its slice."""
    monkeypatch.setattr(_autochunk, "PARALLEL_SECONDS", 0.0)
    x = RNG.standard_normal((64, 32, 32))
    batched = vmap(lambda a: np.tensordot(a, a, 0), workers=2)
    expected = x[:, :, :, None, None] * x[:, None, None, :, :]
    for _ in range(1 + _autochunk.WARM_WHOLES):
        assert_same(batched(x), expected, rtol=0, atol=0)
    assert not claims  # (whole calls)
    assert_same(batched(x), expected, rtol=0, atol=0)
    assert len(claims) >= 2 and set(claims) == {"multiply"}


@needs_numpy2
def test_operators_compute_into_a_claimed_slice():
    """`(img - mean) / std`: the difference claims the slice, and the quotient, computed
    into that temporary (`vmapx._elision`), is the chunk's output: placed, not copied."""
    placed = []
    real = _chunk_outputs.Joined.place

    def place(self, out, slices, claimed):
        placed.append(slices is not None and _chunk_outputs._same_memory(out, slices[0]))
        return real(self, out, slices, claimed)

    f = lambda img: (img - img.mean()) / (img.std() + 1e-6)  # noqa: E731
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_chunk_outputs.Joined, "place", place)
        got = vmap(f, chunk_size=6, workers=1)(X)
    assert_same(got, loop_reference(f, [X], 0), rtol=1e-15, atol=0)
    assert placed == [True, True, True]  # (the first chunk runs before the allocation)


def test_a_view_of_a_claimed_temporary_keeps_it_from_elision():
    def f(x):
        y = np.exp(x)  # (claims the slice)
        view = y[::-1]  # (a view: `y` is no temporary for the operator below)
        return (y * 2) + view

    _check(f, [X], workers=1)
    _check(lambda x: np.exp(x)[::-1] * 2 + np.exp(x), [X], workers=1)
    _check(lambda x: (np.exp(x).T * 2).T - 1, [X], workers=1)


def _options(**kwargs):
    """The options of a `vmap` (from its closure), for `_api._chunked`."""
    batched = vmap(np.sqrt, **kwargs)
    return next(
        c.cell_contents for c in batched.__closure__ if type(c.cell_contents) is _api._Options
    )


@needs_numpy2
def test_peak_memory_of_results_computed_in_place():
    """Outputs known from an earlier call: every chunk computes into them, and the
    peak is the whole call's; where only the first chunk tells them, the chunks
    started before it was joined hold their own results until then."""
    x = RNG.standard_normal((64, 16, 16))
    f = lambda a: np.tensordot(a, a, 0)  # noqa: E731 (32 MiB of results)
    whole = peak_bytes(lambda: vmap(f, chunk_size=None)(x))
    spec = _chunk_outputs.spec_of(np.empty((64, 16, 16, 16, 16)))
    args = (f, _options(), [x], None, [0], {}, 64, 8, 2, None)
    in_place = peak_bytes(lambda: _api._chunked(*args, spec))
    assert in_place < 1.02 * whole, (in_place, whole)
    chunked = peak_bytes(lambda: vmap(f, chunk_size=8, workers=2)(x))
    assert chunked < 1.02 * whole + 2 * 8 * 16**4 * 8, (chunked, whole)


@pytest.mark.parametrize(("work", "kept"), [(0.060, True), (0.080, False)])
def test_threads_writing_results_must_add_no_work(work, kept):
    """Results computed in place (the outputs known): split at once in the threads'
    chunks, without the results' limit per chunk, after the best of `WARM_WHOLES` more
    whole calls; kept only where all threads take no more CPU time than the whole call
    in all the process's threads (70 ms here, BLAS's threads included)."""
    auto, key = _autochunk.AutoChunk(), ("k",)
    made = type("Made", (), {"largest": 200 << 20, "made": 210 << 20})()
    results = [np.empty(25 << 20)]  # (200 MiB: values mostly results)
    spec = _chunk_outputs.spec_of(np.empty((256, 2)))
    for _ in range(1 + _autochunk.WARM_WHOLES):
        assert auto.chunk_for(key) is None
        auto.observe_whole(key, 256, made, results, 0.036, workers=2)
        auto.remember_outputs(key, spec, 0.070)
    assert auto.chunk_for(key) == 32 and auto.threaded(key)  # (8 pieces: 4 per worker)
    for _ in range(_autochunk.UNJUDGED_SPLITS + _autochunk.TRIALS):
        auto.observe_chunked(key, 0.025, work)
    assert auto.threaded(key) is kept


@needs_numpy2
def test_small_results_are_copied_at_the_join(monkeypatch, claims):
    monkeypatch.setattr(_chunk_outputs, "OFFER_BYTES", 1 << 20)
    _check(np.exp, [X], workers=1)
    assert not claims  # (24 examples of 128 bytes: copied when joined)
    big = RNG.standard_normal((16, 128, 128))  # (2 MiB)
    _check(np.exp, [big], chunk=8, workers=1)
    assert claims == ["exp"]  # (the second chunk: 1 MiB; the first runs before allocation)


@needs_numpy2
def test_a_vmap_in_the_per_example_loop_does_not_take_the_slices():
    """A chunk that runs `f` per example (data-dependent control flow): a `vmap` inside
    `f` is then the outermost trace, but its values are no outputs of the chunk; one
    that `f` keeps must not be overwritten when the chunk's results are placed."""
    ones = np.ones((5, 4, 4))  # (the inner result has the chunk's output slice's shape)
    kept: list = []

    def f(x):
        if float(x.sum()) > 100:  # (a Python branch on the values: the loop)
            return x
        kept.append(vmap(np.exp)(ones))
        return x * 2

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", vmapx.PerformanceWarning)
        got = vmap(f, chunk_size=5, workers=1)(X)
    assert_same(got, X * 2, rtol=0, atol=0)
    assert len(kept) == len(X)
    for value in kept:
        assert_same(value, np.exp(ones), rtol=0, atol=0)
