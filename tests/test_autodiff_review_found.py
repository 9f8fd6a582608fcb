"""Defects found by a review of the derivative rules, each with the case that showed it:
vmap must equal the per-example loop (values, shape, dtype), derivatives must match
central finite differences."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import vmapx
from harness import assert_same, loop_reference

RNG = np.random.default_rng(11)
X = RNG.standard_normal((4, 2, 3))


def central_grad(f, x, eps=1e-6):
    """The gradient of scalar `f` at `x` by central differences, each step taken in the
    layout of `x` (a function that reads memory order sees the layout it is given)."""
    g = np.zeros(x.shape)
    for i in np.ndindex(x.shape):
        step = np.zeros(x.shape)
        step[i] = eps
        up, down = np.empty_like(x), np.empty_like(x)  # (the layout of `x`)
        up[...], down[...] = x + step, x - step
        g[i] = (f(up) - f(down)) / (2 * eps)
    return g


def central_jacobian(f, x, eps=1e-6):
    return np.stack(
        [central_grad(lambda v, k=k: f(v)[k], x, eps) for k in np.ndindex(f(x).shape)]
    ).reshape(f(x).shape + x.shape)


def central_hessian(f, x):
    return central_jacobian(lambda v: central_grad(f, v, 1e-4), x, 1e-4)


# -- ravel/reshape/flatten with order 'A' or 'K' read each example's memory ---------------

LAYOUT_CASES = {
    "ravel A of a transpose": lambda m: np.ravel(m.T, order="A"),
    "ravel a (lower case)": lambda m: np.ravel(m.T, order="a"),
    "ravel K of a transpose": lambda m: np.ravel(m.T, order="K"),
    "ravel K of a C array": lambda m: np.ravel(m, order="K"),
    "ravel K, negative strides": lambda m: np.ravel(m.T[::-1], order="K"),
    "ravel K, permuted axes": lambda m: np.ravel(
        np.stack([m, 2 * m]).transpose(2, 0, 1), order="K"
    ),
    "ravel K, broadcast axis": lambda m: np.ravel(
        np.broadcast_to(m[:, None], (2, 4, 3)).transpose(2, 1, 0), order="K"
    ),
    "reshape A": lambda m: np.reshape(m.T, (2, 3), order="A"),
    "x.reshape A": lambda m: m.T.reshape(6, order="A"),
    "x.flatten A": lambda m: m.T.flatten("A"),
    "x.flatten K": lambda m: m.T.flatten(order="K"),
    "x.ravel K": lambda m: m.T.ravel("K"),
    "copy F, ravel A": lambda m: np.copy(m, order="F").ravel("A"),
    "copy F, ravel K": lambda m: np.copy(m, order="F").ravel("K"),
}
# every order reads these alike: they stay batched
ALIKE_CASES = {
    "ravel K of a reversed 1-d": lambda m: np.ravel(m[0][::-1], order="K"),
}


# ("copy F, ravel A" read the loop's order before: its whole batch is in F order)
@pytest.mark.parametrize("case", [c for c in LAYOUT_CASES if c != "copy F, ravel A"])
def test_memory_orders_under_vmap_equal_the_loop(case):
    # the batched buffer's layout is not the example's: vmap read it (wrong values), or
    # gave NumPy's "order 'K' is not permitted for reshaping"; now the loop runs
    f = LAYOUT_CASES[case]
    with pytest.warns(vmapx.PerformanceWarning, match="order"):
        got = vmapx.vmap(f)(X)
    assert_same(got, loop_reference(f, (X,), 0))


@pytest.mark.parametrize("case", list(ALIKE_CASES))
def test_memory_orders_that_read_alike_stay_batched(case):
    f = ALIKE_CASES[case]
    assert_same(vmapx.vmap(f)(X), loop_reference(f, (X,), 0))


def test_memory_order_under_vmap_without_the_loop_is_an_error():
    with pytest.raises(vmapx.errors.ConcretizationError, match=r"order='A'.*order='C'"):
        vmapx.vmap(lambda m: np.ravel(m.T, order="A"), fallback="error")(X)


@pytest.mark.parametrize("case", [*LAYOUT_CASES, "ravel f (lower case)"])
def test_memory_order_derivatives_read_as_the_forward(case):
    # the JVP and VJP took 'A'/'K' (and lower-case 'f') for 'C'
    f = LAYOUT_CASES.get(case, lambda m: np.ravel(m.T, order="f"))
    w = RNG.standard_normal(f(X[0]).shape)

    def loss(m):
        return np.sum(f(m) * w)

    for x in (X[0], np.asfortranarray(X[0])):  # (the example's own layout counts)
        expected = central_grad(loss, x)
        np.testing.assert_allclose(vmapx.grad(loss)(x), expected, atol=1e-6)
        np.testing.assert_allclose(vmapx.jacfwd(loss)(x), expected, atol=1e-6)
        np.testing.assert_allclose(vmapx.jacrev(f)(x), central_jacobian(f, x), atol=1e-6)


@pytest.mark.parametrize("case", ["ravel A of a transpose", "ravel K, permuted axes"])
def test_memory_order_derivatives_under_vmap_equal_the_loop(case):
    f = LAYOUT_CASES[case]
    w = RNG.standard_normal(f(X[0]).shape)

    def loss(m):
        return np.sum(f(m) ** 3 * w)

    expected = np.stack([central_grad(loss, x) for x in X])
    with pytest.warns(vmapx.PerformanceWarning, match="order"):
        got = vmapx.vmap(vmapx.grad(loss))(X)
    np.testing.assert_allclose(got, expected, atol=1e-5)
    with pytest.warns(vmapx.PerformanceWarning, match="order"):
        got = vmapx.grad(lambda xs: np.sum(vmapx.vmap(loss)(xs)))(X)
    np.testing.assert_allclose(got, expected, atol=1e-5)
    hess = vmapx.hessian(loss)(X[0])
    np.testing.assert_allclose(hess, central_hessian(loss, X[0]), atol=1e-5)


# -- prod's `initial` is one more factor -------------------------------------------------

PROD_CASES = {
    "prod": lambda v: np.prod(v, initial=5.0),
    "nanprod": lambda v: np.nanprod(v, initial=5.0),
    "multiply.reduce": lambda v: np.multiply.reduce(v, initial=5.0),
    "x.prod": lambda v: v.prod(initial=5.0),
    "prod where": lambda v: np.prod(v, initial=5.0, where=np.array([True, False, True])),
    "nanprod where": lambda v: np.nanprod(v, initial=-2.0, where=np.array([True, True, False])),
    "prod axis keepdims": lambda v: np.prod(v.reshape(1, 3), axis=1, initial=2.0, keepdims=True),
}


@pytest.mark.parametrize("case", list(PROD_CASES))
def test_prod_initial_scales_the_derivative(case):
    # the derivative left `initial` out: grad(np.prod(v, initial=5)) at [2, 3] was [3, 2]
    f = PROD_CASES[case]
    x = np.array([2.0, 3.0, -0.5])

    def loss(v):
        return np.sum(f(v))

    expected = central_grad(loss, x)
    np.testing.assert_allclose(vmapx.grad(loss)(x), expected, atol=1e-6)
    np.testing.assert_allclose(vmapx.jacfwd(loss)(x), expected, atol=1e-6)
    xs = np.stack([x, 2 * x, x - 1])
    got = vmapx.vmap(vmapx.grad(loss))(xs)
    np.testing.assert_allclose(got, np.stack([central_grad(loss, v) for v in xs]), atol=1e-5)
    hess = vmapx.hessian(loss)(x)
    np.testing.assert_allclose(hess, central_hessian(loss, x), atol=1e-5)


# -- an extreme's `initial` tying with it takes its share --------------------------------

EXTREME_CASES = {
    "max": (lambda v: np.max(v, initial=3.0), [1.0, 3.0, 2.0]),
    "min": (lambda v: np.min(v, initial=-1.0), [-1.0, 3.0, 2.0]),
    "maximum.reduce": (lambda v: np.maximum.reduce(v, initial=3.0), [1.0, 3.0, 2.0]),
    "nanmax": (lambda v: np.nanmax(v, initial=3.0), [np.nan, 3.0, 2.0]),
    "max where": (
        lambda v: np.max(v, initial=2.0, where=np.array([1, 0, 1], bool)),
        [2.0, 5.0, 1.0],
    ),
}


@pytest.mark.parametrize("case", list(EXTREME_CASES))
def test_extreme_tied_with_initial_shares_the_derivative(case):
    # ties share the derivative equally; a tie with `initial` took none: [0, 1] for
    # grad(np.max(v, initial=3)) at [1, 3], where central differences give [0, 0.5]
    f, x = EXTREME_CASES[case]
    x = np.array(x)
    expected = central_grad(f, x)
    np.testing.assert_allclose(vmapx.grad(f)(x), expected, atol=1e-6)
    np.testing.assert_allclose(vmapx.jacfwd(f)(x), expected, atol=1e-6)
    got = vmapx.vmap(vmapx.grad(f))(np.stack([x, x + 5]))
    np.testing.assert_allclose(got, np.stack([expected, central_grad(f, x + 5)]), atol=1e-6)


def test_extreme_tied_twice_with_initial_shares_in_thirds():
    # (central differences along one element see a tie of two; JAX gives thirds too)
    got = vmapx.grad(lambda v: np.max(v, initial=3.0))(np.array([3.0, 3.0, 2.0]))
    np.testing.assert_allclose(got, [1 / 3, 1 / 3, 0.0])


# -- forward mode with a Python list next to a traced array ------------------------------

LIST_CASES = {
    "concatenate": lambda v: np.concatenate([[0.0], v]),
    "concatenate, int list": lambda v: np.concatenate([[1, 2], v]),
    "stack": lambda v: np.stack([[1.0, 2.0], v]),
    "cubed": lambda v: np.concatenate([[0.5], v]) ** 3,
}


@pytest.mark.parametrize("case", list(LIST_CASES))
def test_forward_mode_with_a_list_operand(case):
    # the zero tangent of the list was `0.0 * [0.0]`: "can't multiply sequence by non-int"
    f = LIST_CASES[case]
    x = np.array([1.0, 2.0])
    expected = central_jacobian(f, x)
    np.testing.assert_allclose(vmapx.jacfwd(f)(x), expected, atol=1e-6)
    t = np.array([0.3, -1.0])
    out, tangent = vmapx.jvp(f, (x,), (t,))
    assert_same(out, f(x))
    np.testing.assert_allclose(tangent, expected @ t, atol=1e-6)
    xs = np.stack([x, 2 * x, -x])
    got = vmapx.vmap(vmapx.jacfwd(f))(xs)
    np.testing.assert_allclose(got, np.stack([central_jacobian(f, v) for v in xs]), atol=1e-5)

    def loss(v):
        return np.sum(f(v) ** 2)

    hess = vmapx.hessian(loss)(x)
    np.testing.assert_allclose(hess, central_hessian(loss, x), atol=1e-5)


def test_layout_asked_of_a_converter_is_not_read_from_the_traced_value():
    # `np.asfortranarray(x)` passes a traced `x` through as it is (vmap's scope): a later
    # order='K' read must not take its layout for the F order asked for (never a wrong
    # Jacobian: the loop's error or its value)
    import vmapx

    m = np.arange(6.0).reshape(2, 3)
    f = lambda m: np.asfortranarray(2 * m).ravel("K")  # noqa: E731
    want = 2 * np.eye(6)[[0, 3, 1, 4, 2, 5]].reshape(6, 2, 3)
    for jac in (lambda: vmapx.jacfwd(f)(m), lambda: vmapx.vmap(vmapx.jacfwd(f))(m[None])[0]):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", vmapx.PerformanceWarning)  # (the loop)
                got = jac()
        except vmapx.errors.ConcretizationError:
            continue
        np.testing.assert_array_equal(got, want)
