"""Broadcasts that would loop over a short last axis are computed in a moved layout."""

from __future__ import annotations

import numpy as np
import pytest

from harness import check_vmap
from vmapx import vmap

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


@pytest.mark.parametrize("dtype", ["f2", "f4", "f8", "c8", "c16"])
@pytest.mark.parametrize("n", [2, 3, 5, 7])
def test_sums_over_a_short_last_axis_have_the_loops_bits(dtype, n):
    """float32/float64 rows are added column by column (NumPy's order); float16 (NumPy
    sums it in float32) and complex rows keep NumPy's own path."""
    x = (RNG.standard_normal((400, n)) * 10.0 ** RNG.integers(-4, 5, (400, n))).astype(dtype)
    if dtype.startswith("c"):
        x = x + 1j * x[::-1]
    got = vmap(lambda r: r.sum())(x)
    np.testing.assert_array_equal(got, np.stack([r.sum() for r in x]))
    assert got.dtype == x.dtype


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


def test_gradients_through_a_batch_last_result_equal_the_loop():
    from vmapx import grad

    f = lambda x, c: np.log(((c - x) ** 2).sum(-1)).sum()  # noqa: E731
    x = RNG.standard_normal((300, 8))
    check_vmap(grad(f), (x, POINTS), in_axes=(0, None), rtol=1e-10)
    check_vmap(grad(f, argnums=1), (x, POINTS), in_axes=(0, None), rtol=1e-10)


def test_a_batch_last_result_in_chunks_equals_the_loop():
    x = RNG.standard_normal((300, 8))
    f = BATCH_LAST_CASES["nearest"]
    got = vmap(f, in_axes=(0, None), chunk_size=64)(x, POINTS)
    want = [np.stack(r) for r in zip(*[f(e, POINTS) for e in x], strict=True)]
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)
