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
