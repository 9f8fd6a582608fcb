"""Defects of `np.interp` and `np.linalg` derivatives, each with the case that showed it:
`interp`'s derivative on its sample points (it was zero), its traced `left`/`right` (NumPy
made Python numbers of them), `det` of a singular matrix (its derivative inverted the
matrix) and reverse mode of a `qr` whose factors are not determined (an internal
exception). Derivatives are checked against finite differences (one-sided at a kink, the
side JAX takes) and per-example loops."""

from __future__ import annotations

import numpy as np
import pytest

import vmapx
from harness import assert_same

XP = np.array([0.0, 1.0, 2.5, 4.0])
FP = np.array([1.0, 3.0, 2.0, 5.0])
H = 1e-7


def _interp(x):
    return np.interp(x, XP, FP)


def _one_sided(f, x, side):
    """`(f(x + h) - f(x)) / h` on the right side (`side=1`) or the left (`side=-1`)."""
    return side * (f(x + side * H) - f(x)) / H


# -- interp on its sample points ------------------------------------------------------


@pytest.mark.parametrize("k", range(len(XP)))
def test_interp_derivative_on_a_sample_point_is_a_one_sided_slope(k):
    side = -1 if k == len(XP) - 1 else 1  # the interval to the right, but at the last point
    want = _one_sided(_interp, XP[k], side)
    assert vmapx.grad(_interp)(XP[k]) == pytest.approx(want, rel=1e-6)
    assert vmapx.jvp(_interp, (XP[k],), (1.0,))[1] == pytest.approx(want, rel=1e-6)


def test_interp_derivative_on_sample_points_under_vmap_matches_the_loop():
    x = np.array([0.0, 0.5, 1.0, 1.75, 2.5, 4.0])
    got = vmapx.vmap(vmapx.grad(_interp))(x)
    loop = np.array([vmapx.grad(_interp)(v) for v in x])
    want = [_one_sided(_interp, v, -1 if v == XP[-1] else 1) for v in x]
    np.testing.assert_array_equal(got, loop)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_interp_derivative_on_a_sample_point_wrt_xp_and_fp():
    """With respect to the sample points too: batched `xp` and `fp` take vmapx's own
    formulas, whose value on a sample point must stay NumPy's, bit for bit (-0.0 too)."""
    fp = np.array([1.0, -0.0, 2.0, 5.0])

    def f(xp, fp):
        return np.interp(np.array([1.0, 4.0]), xp, fp)

    got = vmapx.jacrev(f, argnums=(0, 1))(XP, fp)
    for arg, jac in enumerate(got):
        for i in range(4):
            # the side that keeps each x in its interval: moving xp[1] (x = 1 starts its
            # interval) to the left, xp[3] (x = 4 ends the last one) to the right
            side = -1 if (arg, i) == (0, 1) else 1

            def moved(s, arg=arg, i=i):
                args = [XP, fp]
                args[arg] = args[arg] + s * np.eye(4)[i]
                return f(*args)

            np.testing.assert_allclose(jac[:, i], _one_sided(moved, 0.0, side), atol=1e-6)
    xps, fps = np.stack([XP, XP + 0.5]), np.stack([fp, fp])
    out, tangent = vmapx.jvp(
        vmapx.vmap(lambda xp, fp: np.interp(xp, xp, fp)), (xps, fps), (np.ones((2, 4)),) * 2
    )
    assert np.array_equal(np.signbit(out), np.signbit(fps)) and np.array_equal(out, fps)
    np.testing.assert_allclose(tangent, np.ones((2, 4)))  # x and xp move together


# -- interp's traced left and right ---------------------------------------------------


def test_interp_left_right_of_an_outer_transform_keep_their_derivative():
    x = np.array([-1.0, 0.5, 5.0, np.nan])

    def f(lr, period=None):
        def one(x):
            return np.interp(x, XP, FP, left=lr[0], right=lr[1], period=period)

        return vmapx.vmap(one)(x)

    lr = np.array([0.3, 1.7])
    want = np.array([[1.0, 0.0], [0.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
    np.testing.assert_array_equal(vmapx.jacrev(f)(lr), want)
    np.testing.assert_array_equal(vmapx.jacfwd(f)(lr), want)
    np.testing.assert_array_equal(f(lr), np.interp(x, XP, FP, left=0.3, right=1.7))
    periodic = vmapx.jacrev(lambda lr: f(lr, period=5.0))(lr)  # NumPy ignores left, right
    np.testing.assert_array_equal(periodic, np.zeros((4, 2)))


def test_interp_left_right_of_an_outer_vmap_stay_batched():
    lr = np.array([[0.3, 1.7], [-2.0, 9.0]])
    x = np.array([-1.0, 0.5, 5.0])

    def f(lr):
        return vmapx.vmap(lambda x: np.interp(x, XP, FP, left=lr[0], right=lr[1]))(x)

    got = vmapx.vmap(f)(lr)  # (no loop: its PerformanceWarning is an error here)
    np.testing.assert_array_equal(got, np.stack([f(v) for v in lr]))


@pytest.mark.xfail(
    strict=True,
    raises=vmapx.errors.DroppedDerivativeWarning,
    reason="NumPy dispatches np.interp on x, xp and fp only: with those constant, vmapx "
    "never sees the call, and NumPy's float(left) drops the derivative",
)
def test_interp_left_right_traced_alone():
    def f(lr):
        return np.interp(np.array([-1.0, 5.0]), XP, FP, left=lr[0], right=lr[1])

    np.testing.assert_array_equal(vmapx.jacrev(f)(np.array([0.3, 1.7])), np.eye(2))


# -- det of a singular matrix ---------------------------------------------------------


def _cofactors(a):
    n = a.shape[-1]
    c = np.empty_like(a)
    for i in range(n):
        for j in range(n):
            minor = np.delete(np.delete(a, i, 0), j, 1)
            c[i, j] = (-1) ** (i + j) * (np.linalg.det(minor) if n > 1 else 1.0)
    return c


RNG = np.random.default_rng(5)
SINGULAR = {
    "rank1_2x2": np.array([[1.0, 2.0], [2.0, 4.0]]),
    "rank2_3x3": np.array([[1.0, 2.0, 0.0], [3.0, 4.0, 0.0], [5.0, 7.0, 0.0]]),
    "rank1_3x3": np.outer([1.0, 2.0, 3.0], [4.0, 5.0, 6.0]),
    "zeros_3x3": np.zeros((3, 3)),
    "rank3_4x4": np.array([[1.0, 2, 3, 4], [2, 4, 6, 8], [0, 1, 0, 1], [1, 0, 2, 5]]),
}


@pytest.mark.parametrize("name", SINGULAR)
def test_det_derivative_of_a_singular_matrix_is_its_cofactor_matrix(name):
    a = SINGULAR[name]
    want = _cofactors(a)
    fd = np.array([(np.linalg.det(a + H * e) - np.linalg.det(a - H * e)) / (2 * H)
                   for e in np.eye(a.size).reshape(a.size, *a.shape)]).reshape(a.shape)  # fmt: skip
    np.testing.assert_allclose(want, fd, atol=1e-6)
    assert_same(vmapx.grad(np.linalg.det)(a), want, rtol=1e-9, atol=1e-12)
    assert_same(vmapx.jacfwd(np.linalg.det)(a), want, rtol=1e-9, atol=1e-12)


def test_det_derivative_under_vmap_with_one_singular_example_matches_the_loop():
    a = np.stack([RNG.normal(size=(3, 3)), SINGULAR["rank2_3x3"], RNG.normal(size=(3, 3))])
    g = vmapx.grad(np.linalg.det)
    got = vmapx.vmap(g)(a)  # (batched: a loop's PerformanceWarning is an error here)
    np.testing.assert_array_equal(got, np.stack([g(m) for m in a]))
    assert_same(got[1], _cofactors(a[1]), rtol=1e-9, atol=1e-12)
    stacked = vmapx.grad(lambda a: np.sum(np.linalg.det(a)))(a)
    np.testing.assert_array_equal(stacked, got)


def test_det_second_derivative_at_a_singular_matrix():
    a = SINGULAR["rank2_3x3"]  # (distinct singular values)
    hess = vmapx.jacfwd(vmapx.grad(np.linalg.det))(a)
    fd = np.stack([(_cofactors(a + H * e) - _cofactors(a - H * e)) / (2 * H)
                   for e in np.eye(9).reshape(9, 3, 3)])  # fmt: skip
    np.testing.assert_allclose(hess, np.moveaxis(fd.reshape(3, 3, 3, 3), (0, 1), (2, 3)),
                               atol=1e-6)  # fmt: skip


# -- qr with factors its derivative does not determine --------------------------------


TALL = np.arange(8.0).reshape(4, 2) ** 1.3


@pytest.mark.parametrize("mode", ["complete", "raw"])
@pytest.mark.parametrize("transform", ["grad", "vmap_grad", "jacrev"])
def test_qr_reverse_mode_of_undetermined_factors_raises_a_differentiation_error(mode, transform):
    def f(a):
        return np.sum(np.linalg.qr(a, mode=mode)[0])

    call = {
        "grad": lambda: vmapx.grad(f)(TALL),
        "vmap_grad": lambda: vmapx.vmap(vmapx.grad(f))(np.stack([TALL, TALL])),
        "jacrev": lambda: vmapx.jacrev(lambda a: np.linalg.qr(a, mode=mode)[0])(TALL),
    }[transform]
    with pytest.raises(vmapx.errors.DifferentiationError, match=r"`np.linalg.qr` has no rev"):
        call()
