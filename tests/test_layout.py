"""Broadcasts that would loop over a short last axis are computed in a moved layout."""

from __future__ import annotations

import numpy as np
import pytest

from harness import check_vmap
from np_compat import NUMPY2
from vmapx import jit, vmap

RNG = np.random.default_rng(5)
YS = RNG.standard_normal((300, 3))

CASES = {
    "difference": (lambda x, ys: ys - x, np.float64),
    "reflected": (lambda x, ys: x * ys, np.float64),
    "then squared and summed": (lambda x, ys: np.sqrt(((ys - x) ** 2).sum(-1)), np.float64),
    "integers": (lambda x, ys: (ys * 10).astype(np.int64) // (x + 5), np.int64),
    "complex": (lambda x, ys: (ys + 1j) / (x - 2j), np.complex128),
    "last axis 2": (lambda x, ys: ys[:, :2] - x[:2], np.float64),
    "comparison": (lambda x, ys: ys < x, np.float64),
    "two batched": (lambda x, ys: x[None, :] + np.sin(x)[:, None, None] * ys, np.float64),
}


@pytest.mark.parametrize("case", list(CASES))
def test_short_last_axis_broadcasts_equal_the_loop(case):
    f, dtype = CASES[case]
    x = RNG.integers(1, 9, (250, 3)) if dtype == np.int64 else RNG.standard_normal((250, 3))
    check_vmap(f, (x, YS), in_axes=(0, None))


def test_the_moved_layout_is_bit_identical_and_reads_as_usual():
    x = RNG.standard_normal((256, 3))
    d = vmap(lambda x, ys: ys - x, in_axes=(0, None))(x, YS)
    np.testing.assert_array_equal(d, YS[None] - x[:, None])  # same bits as plain NumPy
    assert d.shape == (256, 300, 3)
    assert d.reshape(256, -1).shape == (256, 900)  # any layout reads the same


def _var_ddof(r: np.ndarray, axis: int | None = None, keepdims: bool = False) -> np.ndarray:
    return np.var(r, axis=axis, keepdims=keepdims, ddof=1)


def _norm_keepdims(r: np.ndarray, axis: int | None = None, keepdims: bool = False) -> np.ndarray:
    return np.linalg.norm(r, axis=-1 if axis is None else axis, keepdims=keepdims)


@pytest.mark.parametrize("dtype", ["f2", "f4", "f8", "c8", "c16"])
@pytest.mark.parametrize("n", [2, 3, 5, 7])
def test_sums_over_a_short_last_axis_have_the_loops_bits(dtype, n):
    """float32/float64 rows are added column by column (NumPy's order; a mean divides
    that sum by the count, a variance, standard deviation and norm take NumPy's steps
    with such sums); float16 (NumPy sums it in float32) and complex rows keep NumPy's own
    path."""
    x = (RNG.standard_normal((400, n)) * 10.0 ** RNG.integers(-4, 5, (400, n))).astype(dtype)
    if dtype.startswith("c"):
        x = x + 1j * x[::-1]
    numpy1_complex = not NUMPY2 and dtype.startswith("c")  # (its batched mean rounds apart)
    spreads = (np.var, np.std, _var_ddof, _norm_keepdims)
    for reduce in (np.sum,) if numpy1_complex else (np.sum, np.mean, *spreads):
        if dtype == "f2" and reduce in spreads:
            continue  # (its squares overflow)
        got = vmap(lambda r, reduce=reduce: reduce(r))(x)  # noqa: B023
        np.testing.assert_array_equal(got, np.stack([reduce(r) for r in x]))
        assert got.dtype == np.stack([reduce(r) for r in x]).dtype
        got = vmap(lambda r, reduce=reduce: reduce(r, axis=-1, keepdims=True))(x)
        np.testing.assert_array_equal(got, reduce(x, axis=-1, keepdims=True))


# -- the batch axis last: a small batched operand broadcast against a larger shape -------

POINTS = RNG.standard_normal((64, 8))  # shared points: (B, 64, 8) results for B >= 32

BATCH_LAST_CASES = {
    "difference to shared points": lambda x, c: c - x,
    "squared distances": lambda x, c: ((c - x) ** 2).sum(-1),
    "nearest": lambda x, c: (np.argmin(((c - x) ** 2).sum(-1)), np.min(((c - x) ** 2).sum(-1))),
    "mean over the short axis": lambda x, c: np.abs(c - x).mean(-1),
    "outer product then matmul": lambda x, c: (x[:, None] * x[None, :]) @ c[:8],
    "outer product, reshaped": lambda x, c: np.outer(x, x).reshape(-1) + 1.0,
    "sorted along the short axis": lambda x, c: np.sort(c * x, axis=-1),
    "cumulative over rows": lambda x, c: np.cumsum(c - x, axis=0)[-1],
    "indexed and written": lambda x, c: _write_rows(c - x),
    "copied and transposed": lambda x, c: (c - x).copy().T[::2],
    "integers": lambda x, c: (c * 10).astype(np.int64) - np.round(x).astype(np.int64),
    "booleans": lambda x, c: (c < x).sum(-1),
    "float32": lambda x, c: ((c.astype(np.float32) - x.astype(np.float32)) ** 2).sum(-1),
    "complex": lambda x, c: ((c + 1j) * (x - 2j)).sum(-1),
    "sum over both axes": lambda x, c: (c - x).sum(),
}


def _write_rows(d: np.ndarray) -> np.ndarray:
    d[3] = d[3] + 1.0
    d[:, 1] = d[:, 1] * 2.0
    d *= 0.5
    return d


@pytest.mark.parametrize("case", list(BATCH_LAST_CASES))
@pytest.mark.parametrize("batch", [1, 300])
def test_broadcasts_computed_with_the_batch_axis_last_equal_the_loop(case: str, batch: int):
    x = RNG.standard_normal((batch, 8))
    check_vmap(BATCH_LAST_CASES[case], (x, POINTS), in_axes=(0, None), rtol=1e-12)
    check_vmap(BATCH_LAST_CASES[case], (x.T.copy(), POINTS), in_axes=(1, None), rtol=1e-12)


@pytest.mark.parametrize("dtype", ["f4", "f8"])
@pytest.mark.parametrize("n", [8, 9, 15, 16, 17, 31, 64, 100, 128, 129, 136, 300, 1024, 1025])
def test_sums_over_the_last_axis_of_a_batch_last_result_have_the_loops_bits(dtype, n):
    """NumPy sums a contiguous row pairwise; the batch-last result is summed in that order."""
    c = (RNG.standard_normal((40, n)) * 10.0 ** RNG.integers(-4, 5, (40, n))).astype(dtype)
    x = RNG.standard_normal((500, n)).astype(dtype)
    f = lambda x, c: (c - x).sum(-1)  # noqa: E731
    got = vmap(f, in_axes=(0, None))(x, c)
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, np.stack([f(e, c) for e in x]))
    # a batch mapped along the last axis is batch-last too (each example a strided row)
    rows = x.T.copy()
    got = vmap(np.sum, in_axes=1)(rows)
    np.testing.assert_array_equal(got, np.stack([rows[:, i].copy().sum() for i in range(500)]))


def test_the_batch_last_layout_is_taken_and_reads_as_usual():
    x = RNG.standard_normal((300, 8))
    d = vmap(lambda x, c: c - x, in_axes=(0, None))(x, POINTS)
    assert d.strides[0] == d.itemsize  # (the batch axis last in memory)
    np.testing.assert_array_equal(d, POINTS[None] - x[:, None])  # same bits as plain NumPy
    np.testing.assert_array_equal(d.reshape(300, -1), (POINTS[None] - x[:, None]).reshape(300, -1))


GRADIENT_CASES = {
    "distance": lambda x, s: np.log(((POINTS - x) ** 2).sum(-1) + s).sum(),
    "scaled": lambda x, s: np.sum(np.sin(POINTS - x * s)),
    "mean": lambda x, s: np.mean(np.tanh((POINTS - x) * s)),
    "outer": lambda x, s: np.sum(np.outer(x, x) * s + np.outer(x, x) ** 2),
}


@pytest.mark.parametrize("case", list(GRADIENT_CASES))
@pytest.mark.parametrize("argnum", [0, 1])
def test_gradients_through_a_batch_last_result_have_the_loops_bits(case: str, argnum: int):
    from vmapx import check_grads, grad

    f = GRADIENT_CASES[case]
    x = RNG.standard_normal((300, 8))
    got = vmap(grad(f, argnums=argnum), in_axes=(0, None))(x, 0.7)
    np.testing.assert_array_equal(got, np.stack([grad(f, argnums=argnum)(e, 0.7) for e in x]))
    check_grads(f, (x[0], 0.7), order=1)


def test_a_batch_last_result_in_chunks_equals_the_loop():
    x = RNG.standard_normal((300, 8))
    f = BATCH_LAST_CASES["nearest"]
    got = vmap(f, in_axes=(0, None), chunk_size=64)(x, POINTS)
    want = [np.stack(r) for r in zip(*[f(e, POINTS) for e in x], strict=True)]
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


W3 = RNG.standard_normal((12, 3))
ADDING_OVER_A_BATCH_LAST_RESULT = {
    "sum": lambda d: d.sum(-1),
    "mean": lambda d: d.mean(-1),
    "var": lambda d: d.var(-1),
    "std": lambda d: np.std(d, axis=-1, ddof=1),
    "nansum": lambda d: np.nansum(d, axis=-1),
    "nanmean": lambda d: np.nanmean(d, axis=1),
    "sum over all": lambda d: d.sum(),
    "mean over both": lambda d: d.mean(axis=(0, 1)),
    "norm": lambda d: np.linalg.norm(d, axis=-1),
    "norm of all": lambda d: np.linalg.norm(d),
    "sum of the flattened": lambda d: d.reshape(-1).sum(),
    "einsum": lambda d: np.einsum("ij,ij->i", d, d),
    "matmul": lambda d: d @ W3,
    "average": lambda d: np.average(d, axis=-1),
    "weighted average": lambda d: np.average(d, axis=-1, weights=np.arange(1.0, 13.0)),
    "float32 mean": lambda d: d.astype(np.float32).mean(-1),
}
if hasattr(np.linalg, "vector_norm"):  # (NumPy 2)
    ADDING_OVER_A_BATCH_LAST_RESULT["vector norm of all"] = lambda d: np.linalg.vector_norm(d)


@pytest.mark.parametrize("case", list(ADDING_OVER_A_BATCH_LAST_RESULT))
def test_adding_reductions_of_a_batch_last_layout_have_the_loops_bits(case: str):
    """Sums over an example's axes follow the loop's (pairwise) order, whatever the layout."""
    reduce = ADDING_OVER_A_BATCH_LAST_RESULT[case]
    c, x = RNG.standard_normal((64, 12)), RNG.standard_normal((400, 12))
    f = lambda x, c: reduce(c - x)  # noqa: E731
    got = vmap(f, in_axes=(0, None))(x, c)
    np.testing.assert_array_equal(got, np.stack([f(e, c) for e in x]))
    rows = np.ascontiguousarray(np.moveaxis(c[None] - x[:, None], 0, -1))  # (64, 12, 400)
    got = vmap(reduce, in_axes=2)(rows)  # (the batch mapped along the last axis)
    np.testing.assert_array_equal(got, np.stack([reduce(rows[..., i].copy()) for i in range(400)]))


def test_a_batch_last_layout_replays_under_jit():
    calls = []

    def f(x: np.ndarray, c: np.ndarray) -> tuple:
        calls.append(1)
        return BATCH_LAST_CASES["nearest"](x, c)

    fast = jit(vmap(f, in_axes=(0, None), chunk_size=None))
    for _ in range(3):
        x = RNG.standard_normal((300, 8))
        index, dist = fast(x, POINTS)
        want = [BATCH_LAST_CASES["nearest"](e, POINTS) for e in x]
        np.testing.assert_array_equal(index, [w[0] for w in want])
        np.testing.assert_allclose(dist, [w[1] for w in want], rtol=1e-14)  # (see `jit`)
    assert len(calls) == 1  # one recording, then replays


# -- max/min over a short last axis: the columns in turn ---------------------------------

SPECIAL = np.array([-0.0, 0.0, np.nan, np.inf, -np.inf, 1.0, -1.0])


@pytest.mark.parametrize("reduce", [np.max, np.min, np.amax, np.amin])
@pytest.mark.parametrize("n", [2, 3, 5, 8, 16, 17])
@pytest.mark.parametrize("dtype", ["f2", "f4", "f8", "i1", "u2", "i8", "?"])
def test_max_and_min_over_a_short_last_axis_equal_the_loop(reduce, n: int, dtype: str):
    picks = RNG.integers(0, len(SPECIAL), (300, 2, n))
    x = SPECIAL[picks] if dtype.startswith("f") else RNG.integers(-50, 50, (300, 2, n))
    x = x.astype(dtype)
    for f in (lambda r: reduce(r, axis=-1), lambda r: reduce(r, -1, keepdims=True)):
        got = vmap(f)(x)
        want = np.stack([f(e) for e in x])
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))  # (signed zeros)
    batch_last = np.moveaxis(np.ascontiguousarray(np.moveaxis(x, 0, -1)), -1, 0)
    np.testing.assert_array_equal(vmap(lambda r: reduce(r, axis=-1))(batch_last), reduce(x, -1))


@pytest.mark.parametrize("dtype", ["f4", "f8", "i8", "c16"])
@pytest.mark.parametrize("n", [1, 2, 5, 7, 8])
def test_cumulative_sums_over_a_short_last_axis_have_the_loops_bits(dtype: str, n: int):
    x = (RNG.standard_normal((300, 2, n)) * 10.0 ** RNG.integers(-4, 5, (300, 2, n))).astype(dtype)
    for f in (lambda r: np.cumsum(r, -1), lambda r: r.cumsum(axis=0), lambda r: np.cumsum(r)):
        want = np.stack([f(r) for r in x])
        for batched in (vmap(f), jit(vmap(f))):
            batched(x)
            got = batched(x)
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)
