"""Sums and means over an example axis that is not the last, with a short trailing
size (`reductions._sum_of_slices`): the loop's bits, for every shape around the limits."""

from __future__ import annotations

import numpy as np
import pytest

import vmapx

RNG = np.random.default_rng(11)


def loop(f, x):
    return np.stack([f(e) for e in x])


SHAPES = [
    (2048, 8, 16),
    (4096, 3, 2),
    (1024, 64, 4),
    (512, 5, 3, 5),
    (2048, 2, 2, 2, 2),
    (4096, 65, 4),
]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("func", [np.sum, np.mean])
def test_middle_axis_reductions_give_the_loops_bits(shape, dtype, func):
    x = (RNG.standard_normal(shape) * 10.0 ** RNG.integers(-3, 4, shape)).astype(dtype)
    for f in (
        lambda e: func(e, axis=0),
        lambda e: func(e, axis=(0,), keepdims=True),
        lambda e: func(e, axis=-3) if e.ndim >= 3 else func(e, axis=0),
    ):
        got, want = vmapx.vmap(f)(x), loop(f, x)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def test_special_values_keep_their_bits():
    x = RNG.choice(np.array([-0.0, 0.0, np.nan, np.inf, -np.inf, 1.5]), size=(4096, 4, 8))
    x[:10] = -0.0
    with np.errstate(invalid="ignore"):  # (inf + -inf)
        got = vmapx.vmap(lambda e: e.sum(axis=0))(x)
        want = loop(lambda e: e.sum(axis=0), x)
    np.testing.assert_array_equal(got, want)
    numbers = ~np.isnan(want)  # (a NaN's sign bit may differ, as NumPy's own do by version)
    assert np.array_equal(np.signbit(got[numbers]), np.signbit(want[numbers]))


def test_views_and_other_layouts():
    x = RNG.standard_normal((16, 4096, 8))
    f = lambda e: e.sum(axis=0)  # noqa: E731
    np.testing.assert_array_equal(vmapx.vmap(f, in_axes=1)(x), loop(f, np.moveaxis(x, 1, 0)))
    y = RNG.standard_normal((4096, 8, 16))[:, ::2]
    np.testing.assert_array_equal(vmapx.vmap(f)(y), loop(f, y))
    z = RNG.standard_normal((4096, 16, 8)).transpose(0, 2, 1)
    np.testing.assert_array_equal(vmapx.vmap(f)(z), loop(f, z))
