"""Derivative paths that form fewer arrays: reductions' JVPs as one contraction (no
tangent-sized product), negated cotangents summed before they are negated and subtracted
where they meet another, and elementwise JVPs with a partial of -1 as one subtraction.

Each is checked against central differences (`vmapx.check_grads`), against the formula
it replaces, and under vmap, jacfwd, hessian and jit against the per-example loop."""

import numpy as np
import pytest

import vmapx
from vmapx._autodiff import NoRule
from vmapx._inplace import accumulate_into
from vmapx._numpy.reductions import weighted_sum
from vmapx._registry import rules_of

RNG = np.random.default_rng(7)

REDUCTIONS = [np.max, np.min, np.amax, np.nanmax, np.nanmin, np.prod, np.nanprod]
AXES = [None, 0, -1, (0, 2), (1,), (-1, 0)]


def _loop(f, *xs):
    return np.stack([f(*x) for x in zip(*xs, strict=True)])


@pytest.mark.parametrize("func", REDUCTIONS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("axis", AXES, ids=str)
@pytest.mark.parametrize("keepdims", [False, True])
def test_reduction_jvp_is_the_weighted_sum_it_replaces(func, axis, keepdims):
    x = RNG.uniform(0.5, 1.5, (3, 4, 2))
    t = RNG.standard_normal(x.shape)

    def f(v):
        return func(v, axis=axis, keepdims=keepdims)

    _, tangent = vmapx.jvp(f, (x,), (t,))
    # the old rule: the tangent times the derivative weights, summed
    ans = f(x)
    _, weights = vmapx.vjp(f, x)
    w = weights(np.ones_like(ans))[0]
    expected = np.sum(t * w, axis=axis, keepdims=keepdims)
    np.testing.assert_allclose(tangent, expected, rtol=1e-13, atol=1e-14)
    assert np.shape(tangent) == np.shape(ans) and np.asarray(tangent).dtype == ans.dtype
    vmapx.check_grads(f, (x,), order=2, modes=("fwd",))


@pytest.mark.parametrize("func", [np.max, np.prod], ids=lambda f: f.__name__)
def test_reduction_jvp_ties_and_zeros(func):
    x = np.array([[1.0, 3.0, 3.0], [0.0, 2.0, 0.0]])  # ties of the max, zeros of the product
    t = RNG.standard_normal(x.shape)
    _, tangent = vmapx.jvp(lambda v: func(v, axis=1), (x,), (t,))
    if func is np.max:
        expected = np.array([(t[0, 1] + t[0, 2]) / 2, t[1, 1]])
    else:
        expected = np.array(
            [t[0, 0] * 9 + t[0, 1] * 3 + t[0, 2] * 3, t[1, 0] * 0 + t[1, 1] * 0 + t[1, 2] * 0]
        )
    np.testing.assert_allclose(tangent, expected, rtol=1e-14)


def test_reduction_jvp_of_complex_and_float32_values():
    z = RNG.standard_normal((3, 4)) + 1j * RNG.standard_normal((3, 4))
    tz = RNG.standard_normal((3, 4)) + 1j * RNG.standard_normal((3, 4))
    _, tangent = vmapx.jvp(lambda v: np.prod(v, axis=0), (z,), (tz,))
    np.testing.assert_allclose(tangent, np.sum(tz * _others(z), axis=0), rtol=1e-12)
    vmapx.check_grads(lambda v: np.prod(v, axis=1), (z,), order=1, modes=("fwd",))
    x = RNG.uniform(0.5, 1.5, (5, 3)).astype(np.float32)
    t = RNG.standard_normal(x.shape).astype(np.float32)
    out, tangent = vmapx.jvp(lambda v: np.max(v, axis=1), (x,), (t,))
    assert tangent.dtype == np.float32 and out.dtype == np.float32
    np.testing.assert_allclose(tangent, t[np.arange(5), np.argmax(x, axis=1)], rtol=1e-6)


def _others(z):
    return np.stack([np.prod(np.delete(z, i, axis=0), axis=0) for i in range(z.shape[0])])


def test_weighted_sum_equals_the_product_and_sum():
    t, w = RNG.standard_normal((4, 3, 5)), RNG.standard_normal((4, 3, 5))
    for axes, kept in [((0, 1, 2), None), ((2,), None), ((0, 2), (1, 3, 1))]:
        expected = np.sum(t * w, axis=axes, keepdims=kept is not None)
        np.testing.assert_allclose(weighted_sum(t, w, axes, kept), expected, rtol=1e-13)


def _lse(x, c):
    m = np.max(x)
    return np.log(np.sum(np.exp(x - m))) + m + 0.5 * np.sum(c * x * x)


@pytest.mark.parametrize("d", [1, 3, 9])
def test_vmap_hessian_of_max_and_subtraction_matches_the_loop_and_the_formula(d):
    xs, c = RNG.standard_normal((6, d)), RNG.uniform(0.5, 1.5, d)
    got = vmapx.vmap(vmapx.hessian(_lse), in_axes=(0, None))(xs, c)
    loop = _loop(lambda x: vmapx.hessian(_lse)(x, c), xs)
    np.testing.assert_allclose(got, loop, rtol=1e-12, atol=1e-14)
    p = np.exp(xs - xs.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    formula = p[:, :, None] * np.eye(d) - p[:, :, None] * p[:, None, :] + c * np.eye(d)
    np.testing.assert_allclose(got, formula, rtol=1e-10, atol=1e-12)
    jitted = vmapx.jit(vmapx.vmap(vmapx.hessian(_lse), in_axes=(0, None)))
    np.testing.assert_allclose(jitted(xs, c), got, rtol=1e-12, atol=1e-14)
    vmapx.check_grads(lambda x: _lse(x, c), (xs[0],), order=2)


def _pytree_loss(p, x):
    z = p["w"] @ x - np.max(p["w"] @ x, axis=0) - p["b"][0]
    return np.sum(np.prod(np.tanh(z) + 2.0, axis=-1)) - np.sum(p["b"] * x[:2])


def test_jacfwd_and_grad_over_pytrees_and_in_out_axes():
    p = {"w": RNG.standard_normal((3, 2)), "b": RNG.standard_normal(2)}
    xs = RNG.standard_normal((2, 5))  # batched on axis 1
    gf = vmapx.vmap(vmapx.grad(_pytree_loss), in_axes=(None, 1), out_axes=1)(p, xs)
    loop = [vmapx.grad(_pytree_loss)(p, xs[:, i]) for i in range(5)]
    for k in p:
        np.testing.assert_allclose(gf[k], np.stack([g[k] for g in loop], axis=1), rtol=1e-12)
    jf = vmapx.vmap(vmapx.jacfwd(_pytree_loss), in_axes=(None, 1))(p, xs)
    for k in p:
        np.testing.assert_allclose(jf[k], np.stack([g[k] for g in loop]), rtol=1e-12)
    vmapx.check_grads(lambda w: _pytree_loss({"w": w, "b": p["b"]}, xs[:, 0]), (p["w"],))


def test_negated_cotangents_summed_over_broadcast_axes_and_accumulated():
    def f(x, y, s):
        # `y` and `s` are subtracted from larger values (summed before negation), and
        # `x` receives a negated cotangent beside a plain one (accumulated by subtraction)
        return np.sum(np.sin(x - y[:, None] - s) * (x - np.cos(x)) - x)

    x, y, s = RNG.standard_normal((3, 4)), RNG.standard_normal(3), np.float64(0.3)
    vmapx.check_grads(f, (x, y, s), order=2)
    xs, ys = RNG.standard_normal((5, 3, 4)), RNG.standard_normal((5, 3))
    g = vmapx.vmap(vmapx.grad(f, argnums=(0, 1, 2)), in_axes=(0, 0, None))(xs, ys, s)
    loop = [vmapx.grad(f, argnums=(0, 1, 2))(a, b, s) for a, b in zip(xs, ys, strict=True)]
    for k in range(3):
        np.testing.assert_array_equal(g[k], np.stack([r[k] for r in loop]))
    # the exact cotangents: -sum(...) for y and s
    gy = -np.sum(np.cos(x - y[:, None] - s) * (x - np.cos(x)), axis=1)
    np.testing.assert_allclose(vmapx.grad(f, argnums=1)(x, y, s), gy, rtol=1e-13)


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_a_negated_cotangent_meets_a_plain_one(dtype):
    def f(x, y):
        a = np.sin(x)
        b = a * y - a  # `a` gets `g * y` and `-g`: accumulated as one subtraction
        return np.sum(np.real(b * np.conj(b)))

    xs = RNG.standard_normal((4, 3)).astype(dtype)
    if dtype is np.complex128:
        xs = xs + 1j * RNG.standard_normal((4, 3))
    ys = RNG.standard_normal((4, 3))
    got = vmapx.vmap(vmapx.grad(f))(xs, ys)
    loop = np.stack([vmapx.grad(f)(a, b) for a, b in zip(xs, ys, strict=True)])
    np.testing.assert_array_equal(got, loop)
    vmapx.check_grads(f, (xs[0], ys[0]), order=2)
    rows = vmapx.jacrev(lambda x: np.sin(x) * ys[0] - np.sin(x))(xs[0].real)
    np.testing.assert_allclose(rows, np.diag(np.cos(xs[0].real) * (ys[0] - 1)), atol=1e-15)


def test_negation_before_and_after_a_sum_gives_the_same_bits():
    # a sum of negated terms is the negated sum: the cotangent of a broadcast subtrahend
    x, y = RNG.standard_normal((50, 7)), RNG.standard_normal(7)
    (gy,) = vmapx.vjp(lambda b: x - b, y)[1](x * 3.7)
    np.testing.assert_array_equal(gy, np.sum(-(x * 3.7), axis=0))


def test_subtraction_jvp_is_one_subtraction_with_the_same_bits():
    x, y = RNG.standard_normal((4, 3)), RNG.standard_normal(3)
    tx, ty = RNG.standard_normal((4, 3)), RNG.standard_normal(3)
    _, t = vmapx.jvp(np.subtract, (x, y), (tx, ty))
    np.testing.assert_array_equal(t, tx + (-ty))
    _, t = vmapx.jvp(lambda a: 2.0 - a, (x,), (tx,))
    np.testing.assert_array_equal(t, -tx)
    _, t = vmapx.jvp(lambda a, b: np.subtract(a, b, where=True), (x, y), (tx, ty))
    np.testing.assert_array_equal(t, tx - ty)


def test_integer_operands_and_nested_transforms():
    def f(x, n):
        return np.sum(np.max(x * n - n, axis=0) - x[0])

    x, n = RNG.standard_normal((3, 2)), np.arange(1, 3)
    g = vmapx.grad(f, argnums=(0, 1), allow_int=True)(x, n)
    vmapx.check_grads(lambda v: f(v, n), (x,), order=2)
    assert g[1].dtype.names == ("float0",)
    xs = RNG.standard_normal((4, 3, 2))
    got = vmapx.vmap(vmapx.vmap(vmapx.grad(f), in_axes=(0, None)), in_axes=(0, None))(
        xs[:, None], n
    )
    loop = np.stack([vmapx.grad(f)(a, n) for a in xs])[:, None]
    np.testing.assert_array_equal(got, loop)
    hess = vmapx.jacfwd(vmapx.jacrev(lambda v: f(v, n)))(x)
    np.testing.assert_allclose(hess, vmapx.jacrev(vmapx.jacfwd(lambda v: f(v, n)))(x), atol=1e-12)


def test_the_subtraction_rule_alone_and_with_one_traced_operand():
    rule = rules_of(np.subtract).jvp
    x, y = RNG.standard_normal(3), RNG.standard_normal(3)
    tx, ty = RNG.standard_normal(3), RNG.standard_normal(3)
    np.testing.assert_array_equal(rule((x, y), {}, x - y, {0: tx, 1: ty}), tx - ty)
    np.testing.assert_array_equal(rule((x, y), {}, x - y, {1: ty}), -ty)
    np.testing.assert_array_equal(rule((x, y), {}, x - y, {0: tx}), tx)
    with pytest.raises(NoRule):
        rule((x, y), {"where": x > 0}, x - y, {0: tx, 1: ty})


@pytest.mark.parametrize(
    "f",
    [
        lambda x: x * x,
        lambda x: np.tanh(x @ W) + x * x,
        lambda x: x / x + x,
        lambda x: np.power(x, x),
        lambda x: np.hypot(x, x) - x,
        lambda x: x - x + np.sin(x),
    ],
    ids=["square", "layer", "ratio", "power", "hypot", "difference"],
)
def test_binary_functions_of_one_value_in_forward_mode(f):
    # both operands share one tangent: `t * (d0 + d1)` replaces `t * d0 + t * d1`
    x = RNG.uniform(0.5, 1.5, 3)
    vmapx.check_grads(f, (x,), order=2, modes=("fwd", "rev"))
    xs = RNG.uniform(0.5, 1.5, (5, 3))
    got = vmapx.vmap(vmapx.jacfwd(f))(xs)
    loop = _loop(vmapx.jacfwd(f), xs)
    np.testing.assert_allclose(got, loop, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(got, vmapx.vmap(vmapx.jacrev(f))(xs), rtol=1e-12, atol=1e-13)
    hess = vmapx.vmap(vmapx.hessian(lambda v: np.sum(f(v))))(xs)
    np.testing.assert_allclose(hess, _loop(vmapx.hessian(lambda v: np.sum(f(v))), xs), 1e-13)
    jitted = vmapx.jit(vmapx.vmap(vmapx.jacfwd(f)))
    np.testing.assert_allclose(jitted(xs), got, rtol=1e-14, atol=1e-15)


W = RNG.standard_normal((3, 3))


def test_a_square_tangent_is_twice_the_product():
    x, t = RNG.standard_normal((4, 3)), RNG.standard_normal((4, 3))
    _, tangent = vmapx.jvp(lambda v: v * v, (x,), (t,))
    np.testing.assert_array_equal(tangent, t * x + x * t)
    z = x + 1j * RNG.standard_normal((4, 3))
    _, tangent = vmapx.jvp(lambda v: v * v, (z,), (t + 0j,))
    np.testing.assert_allclose(tangent, 2 * z * t, rtol=1e-15)
    i = np.arange(3)
    out, tangent = vmapx.jvp(lambda v: v * i, (x[0],), (t[0],))  # (one traced operand)
    np.testing.assert_array_equal(tangent, t[0] * i)


def test_accumulate_into_writes_only_a_held_array_of_the_same_layout():
    a, b = RNG.standard_normal((4, 3)), RNG.standard_normal((4, 3))
    expected = a + b
    own = a.copy()
    assert accumulate_into(np.add, own, b) is own
    np.testing.assert_array_equal(own, expected)
    view = a.copy()[:, :2]  # a view: declined
    assert accumulate_into(np.add, view, b[:, :2]) is None
    assert accumulate_into(np.add, a.copy(), b[0]) is None  # broadcasting
    assert accumulate_into(np.add, a.astype(np.float32), b.astype(np.float32)) is not None
    assert accumulate_into(np.add, a.copy(), b.astype(np.float32)) is None  # dtypes
    assert accumulate_into(np.add, a.astype(int), b.astype(int)) is None  # integers
    same = a.copy()
    assert accumulate_into(np.add, same, same) is None
    frozen = a.copy()
    frozen.flags.writeable = False
    assert accumulate_into(np.subtract, frozen, b) is None


def test_accumulate_into_under_vmap_matches_the_operator():
    seen = {}

    def f(x, y, z):
        own = x * 2.0
        seen["same"] = accumulate_into(np.subtract, own, y)
        seen["unbatched"] = accumulate_into(np.add, x * 2.0, z)  # z is not batched
        return own

    x, y, z = RNG.standard_normal((5, 3)), RNG.standard_normal((5, 3)), RNG.standard_normal(3)
    out = vmapx.vmap(f, in_axes=(0, 0, None))(x, y, z)
    np.testing.assert_array_equal(out, x * 2.0 - y)
    assert seen["same"] is not None and seen["unbatched"] is None


def test_products_summed_in_place_keep_every_input_intact():
    def f(x, y):
        return np.sum(np.sin(x) * np.cos(y) / (1.5 + y) + x * y)

    xs, ys = RNG.standard_normal((6, 4)), RNG.standard_normal((6, 4))
    x0, y0 = xs.copy(), ys.copy()
    hess = vmapx.vmap(vmapx.hessian(f, argnums=(0, 1)))(xs, ys)
    loop = [vmapx.hessian(f, argnums=(0, 1))(a, b) for a, b in zip(xs, ys, strict=True)]
    for i in range(2):
        for j in range(2):
            np.testing.assert_allclose(hess[i][j], np.stack([h[i][j] for h in loop]), 1e-13)
    np.testing.assert_array_equal(xs, x0)
    np.testing.assert_array_equal(ys, y0)
    vmapx.check_grads(f, (xs[0], ys[0]), order=2)
    t = RNG.standard_normal(4)
    _, tangent = vmapx.jvp(lambda v: np.sin(v) * np.cos(v), (xs[0],), (t,))
    x = xs[0]
    np.testing.assert_array_equal(tangent, t * np.cos(x) * np.cos(x) + t * -np.sin(x) * np.sin(x))
