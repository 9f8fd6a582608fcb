"""Derivatives of the elementwise helpers and the functions along an axis: values at the
points where a formula would fail (sinc and i0 at 0, clip at its bounds), derivatives
with respect to options (`period`, spacing, `prepend`), the user's function inside
`apply_along_axis`/`piecewise`, and NumPy's errors under differentiation."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.special

import vmapx
from harness import check_vmap
from np_compat import requires_numpy2
from vmapx import grad, jacfwd, vmap

RNG = np.random.default_rng(0)


def _close(a, b, rtol=1e-12, atol=1e-14):
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


def _nth(f, n):
    for _ in range(n):
        f = grad(f)
    return f


# -- sinc and i0 --------------------------------------------------------------------------


def test_sinc_derivatives_at_zero_to_order_four():
    # sinc(x) = sum (-1)^k (pi x)^2k / (2k + 1)!: derivatives at 0 are 0, -pi^2/3, 0, pi^4/5
    want = [0.0, -(np.pi**2) / 3, 0.0, np.pi**4 / 5]
    got = [_nth(np.sinc, n)(0.0) for n in range(1, 5)]
    _close(got, want)
    _close(jacfwd(jacfwd(np.sinc))(np.float64(0.0)), -(np.pi**2) / 3)


@pytest.mark.parametrize("x", [1e-9, 1e-3, 0.09, 0.1, 0.7, -2.3])
def test_sinc_derivatives_near_zero_keep_their_digits(x):
    # the closed forms in x, cos and sin lose every digit at 1e-9; the series does not
    px = np.pi * x
    d1 = (px * np.cos(px) - np.sin(px)) / (np.pi * x * x)
    d2 = -np.pi * np.sin(px) / x - 2 * d1 / x
    if abs(x) < 0.05:  # Maclaurin series of the derivatives
        d1 = -(np.pi**2) / 3 * x + np.pi**4 / 30 * x**3
        d2 = -(np.pi**2) / 3 + np.pi**4 / 10 * x**2
    _close(grad(np.sinc)(x), d1, rtol=1e-11)
    _close(_nth(np.sinc, 2)(x), d2, rtol=1e-9)


def test_sinc_float32_gradient_is_float32():
    x = np.array([0.0, 1e-4, 0.3, 2.0], dtype=np.float32)
    g = grad(lambda x: np.sum(np.sinc(x)))(x)
    assert g.dtype == np.float32
    _close(g, grad(lambda x: np.sum(np.sinc(x)))(x.astype(np.float64)), rtol=1e-5, atol=1e-6)


def test_i0_derivative_is_i1():
    x = np.concatenate([-np.geomspace(1e-8, 700, 50), [0.0], np.geomspace(1e-8, 700, 300)])
    _close(grad(lambda x: np.sum(np.i0(x)))(x), scipy.special.i1(x), rtol=5e-14, atol=0)
    # I0'' = I0 - I1/x (1/2 at 0): the rule is differentiable again
    xs = np.array([0.0, 1e-3, 0.5, 7.9, 8.0, 8.1, 30.0, -3.0])
    i1 = scipy.special.i1(xs)
    want = np.where(xs == 0, 0.5, scipy.special.i0(xs) - i1 / np.where(xs == 0, 1, xs))
    _close(vmap(_nth(np.i0, 2))(xs), want, rtol=1e-10)


def test_round_is_piecewise_constant():
    x = np.array([0.26, 1.7, -3.449])
    for f in (lambda x: np.round(x, 1) * x, lambda x: np.around(x) * x, lambda x: x.round(2) * x):
        want = f(x) / x  # the rounded values: d(round(x) * x)/dx = round(x)
        _close(grad(lambda x, f=f: np.sum(f(x)))(x), want)
        _close(np.diag(jacfwd(f)(x)), want)


# -- clip: ties at a bound share the derivative (as in JAX) ---------------------------


@pytest.mark.parametrize(
    "x, lo, hi, want",
    [
        (0.3, 0.0, 1.0, (1.0, 0.0, 0.0)),
        (-1.0, 0.0, 1.0, (0.0, 1.0, 0.0)),
        (2.0, 0.0, 1.0, (0.0, 0.0, 1.0)),
        (0.0, 0.0, 1.0, (0.5, 0.5, 0.0)),  # x at the lower bound
        (1.0, 0.0, 1.0, (0.5, 0.0, 0.5)),  # x at the upper bound
        (0.5, 0.5, 0.5, (0.25, 0.25, 0.5)),  # both bounds and x tie
        (2.0, 1.0, 0.0, (0.0, 0.0, 1.0)),  # lo > hi: NumPy gives hi
    ],
)
def test_clip_derivatives_follow_jax_at_ties(x, lo, hi, want):
    args = tuple(np.float64(v) for v in (x, lo, hi))
    _close(grad(np.clip, argnums=(0, 1, 2))(*args), want)
    _close(jacfwd(np.clip, argnums=(0, 1, 2))(*args), want)


@requires_numpy2("clip(max=) and clip(x, None, None)")
def test_clip_keywords_none_and_dtype():
    x = np.array([-2.0, 0.2, 0.7, 3.0])
    _close(grad(lambda x: np.sum(np.clip(x, max=0.5)))(x), [1.0, 1.0, 0.0, 0.0])
    _close(grad(lambda x: np.sum(np.clip(x, None, None)))(x), np.ones(4))
    g = grad(lambda x: np.sum(np.clip(x, 0.0, 1.0, dtype=np.float32)))(x)
    _close(g, [0.0, 1.0, 1.0, 0.0])
    lo = np.array([0.0, 0.5, 0.0, 0.0])
    check_vmap(grad(lambda x, lo: np.sum(np.clip(x, lo, 1.0) ** 2), argnums=(0, 1)), [x, lo])


# -- angle and unwrap --------------------------------------------------------------------


def test_angle_of_real_values_has_zero_derivative():
    _close(grad(lambda x: np.sum(np.angle(x)))(np.array([1.0, -2.0, 0.0])), np.zeros(3))


def test_unwrap_is_the_identity_in_p_and_counts_periods_in_period():
    p = np.array([0.0, 3.0, 6.5, 1.0, -2.0, 4.4])
    _close(grad(lambda p: np.sum(np.unwrap(p) * np.arange(6)))(p), np.arange(6.0))
    vmapx.check_grads(lambda p, per: np.unwrap(p, period=per), (p, np.float64(4.0)), order=2)
    vmapx.check_grads(lambda p, per: np.unwrap(p, 1.5, period=per), (p, np.float64(4.0)))
    # (traced `period` needs a traced `p`: NumPy's dispatch of `unwrap` only looks at `p`)
    periods = grad(lambda p, per: np.sum(np.unwrap(p, period=per)), argnums=(0, 1))(p, 4.0)[1]
    _close(periods, np.sum(np.unwrap(p, period=4.0) - p) / 4.0)


# -- functions along an axis -------------------------------------------------------------


def test_diff_and_ediff1d_with_traced_ends():
    x, ends = RNG.standard_normal((3, 4)), RNG.standard_normal((3, 2))
    vmapx.check_grads(lambda x, e: np.diff(x, n=2, prepend=e, append=e[:, :1]), (x, ends))
    vmapx.check_grads(lambda x, e: np.diff(x, axis=0, prepend=e[0, 0]), (x, ends))
    check_vmap(
        grad(lambda x, e: np.sum(np.diff(x, n=2, prepend=e) ** 2), argnums=(0, 1)), [x, ends]
    )
    f32 = x.astype(np.float32)
    g = grad(lambda x, b: np.sum(np.ediff1d(x, to_begin=b, to_end=2.0) ** 2), argnums=(0, 1))
    gx, gb = g(f32, ends[0])
    assert gx.dtype == np.float32 and gb.dtype == np.float64  # the ends are cast to x's type
    vmapx.check_grads(lambda x, b: np.ediff1d(x, to_begin=b), (x, ends[0]))


@pytest.mark.parametrize("edge_order", [1, 2])
def test_gradient_with_traced_coordinates(edge_order):
    f, x = RNG.standard_normal((2, 5)), np.array([0.0, 0.5, 1.7, 2.0, 3.1])
    vmapx.check_grads(lambda f, x: np.gradient(f, x, axis=1, edge_order=edge_order), (f, x))
    vmapx.check_grads(lambda f, h: np.gradient(f, h, 2.0 * h), (f, np.float64(0.3)))
    fs, xs = RNG.standard_normal((3, 2, 5)), np.sort(RNG.uniform(0, 4, (3, 5)), axis=1)
    loss = grad(lambda f, x: np.sum(np.gradient(f, x, axis=-1, edge_order=edge_order) ** 2))
    check_vmap(loss, [fs, xs])
    check_vmap(loss, [fs, x], in_axes=(0, None))


@pytest.mark.filterwarnings("ignore:Arrays of 2-dimensional vectors:DeprecationWarning")
@pytest.mark.parametrize("na, nb", [(2, 2), (2, 3), (3, 2), (3, 3)])
def test_cross_of_two_and_three_vectors(na, nb):
    a, b = RNG.standard_normal((4, na)), RNG.standard_normal((nb,))
    vmapx.check_grads(np.cross, (a, b), order=2)
    vmapx.check_grads(lambda a, b: np.cross(a.T, b, axisa=0), (a, b))
    check_vmap(
        grad(lambda a, b: np.sum(np.cross(a, b) ** 3), argnums=(0, 1)), [a, b], in_axes=(0, None)
    )


def test_vander_orders_and_complex():
    x = RNG.standard_normal(4)
    for n in (0, 1, 3, 6):
        vmapx.check_grads(lambda x, n=n: np.vander(x, n, increasing=n % 2 == 1), (x,), order=2)
    z = x + 1j * RNG.standard_normal(4)
    vmapx.check_grads(lambda z: np.vander(z, 3), (z,))


# -- functions that apply a user's function ---------------------------------------------


def test_apply_along_axis_differentiates_the_function():
    x, w = RNG.standard_normal((3, 4, 2)), RNG.standard_normal(4)

    def f(x, w):
        return np.apply_along_axis(lambda r, w: np.tanh(r @ w) * r, 1, x, w)

    vmapx.check_grads(f, (x, w), order=2)
    check_vmap(grad(lambda x, w: np.sum(f(x, w)), argnums=(0, 1)), [x, w], in_axes=(2, None))
    vmapx.check_grads(lambda x: np.apply_over_axes(np.prod, x, [0, 2]), (x,), order=2)


def test_piecewise_batched_conditions():
    def f(x):
        return np.piecewise(x, [x < 0, x >= 0], [lambda v: v**3, lambda v: np.sin(v) * v.sum()])

    same = np.array([[-1.0, 2.0, -0.5, 0.3], [0.4, -2.0, 1.5, -0.1], [-0.2, -0.3, 0.6, 0.9]])
    vmapx.check_grads(f, (same[0],), order=2)
    check_vmap(grad(lambda x: np.sum(f(x))), [same])  # two negatives each: batched
    differ = np.array([[-1.0, 2.0, 0.5, 0.3], [0.4, -2.0, -1.5, -0.1]])
    with pytest.warns(vmapx.PerformanceWarning):  # examples select differently: per example
        check_vmap(grad(lambda x: np.sum(f(x))), [differ])


# -- NumPy's errors under differentiation ------------------------------------------------


@pytest.mark.parametrize(
    "f, error, match",
    [
        (lambda x: np.diff(x, n=-1), ValueError, "order must be non-negative"),
        (lambda x: np.diff(x[0]), ValueError, "at least one dimensional"),
        (lambda x: np.diff(x, axis=2), np.exceptions.AxisError, "out of bounds"),
        (lambda x: np.cross(x[:4], x[:4]), ValueError, "incompatible dimensions"),
        (lambda x: np.gradient(x[:2], edge_order=2), ValueError, "too small"),
        (lambda x: np.gradient(x, np.arange(3.0)), ValueError, "must match the length"),
        (lambda x: np.vander(x.reshape(5, 1)), ValueError, "one-dimensional"),
        pytest.param(
            lambda x: np.clip(x, 0.0, 1.0, min=0.5),
            ValueError,
            "forbidden",
            marks=requires_numpy2("clip(min=)"),
        ),
        (lambda x: np.ediff1d(x, to_end=np.array([1j])), TypeError, "same_kind"),
    ],
)
def test_numpy_errors_under_grad(f, error, match):
    with pytest.raises(error, match=match):
        grad(lambda x: np.sum(np.real(f(x))))(np.linspace(0.1, 1.0, 5))
