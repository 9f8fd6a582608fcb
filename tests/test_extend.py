"""The public extension API (`vmapx.extend`, `custom_jvp`, `custom_vjp`): rules given by
users compose with every transform; checked against the loop and finite differences."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import vmapx
from harness import check_vmap
from vmapx import extend, grad, hessian, jacfwd, jacrev, jit, vmap
from vmapx.errors import OutputError, PerformanceWarning, RegistrationError


def _py_softplus(x):
    """Elementwise in Python's `math`: NumPy (and vmapx) cannot see into it."""
    flat = [math.log1p(math.exp(v)) for v in np.ravel(np.asarray(x, dtype=float))]
    return np.array(flat).reshape(np.shape(x))


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _softplus_with_rules():
    sp = extend.primitive(_py_softplus, name="softplus")
    extend.register_batch_rule(sp, lambda n, batched, x: (_py_softplus(x), True))
    extend.register_jvp(sp, lambda p, t: (sp(p[0]), t[0] * _sigmoid(p[0])))
    return sp


X = np.array([[0.0, 1.0, -2.0], [2.0, -1.0, 0.5]])


def _loss(sp):
    return lambda v: np.sum(sp(v) * np.arange(1.0, 4.0))


def test_primitive_without_a_transform_is_the_function():
    sp = extend.primitive(_py_softplus)
    np.testing.assert_array_equal(sp(X), _py_softplus(X))
    assert sp.__name__ == "_py_softplus"


def test_registered_rules_under_vmap_and_derivatives():
    sp = _softplus_with_rules()
    check_vmap(sp, (X,))
    loss = _loss(sp)
    vmapx.check_grads(loss, (X[0],), order=2)  # JVP, and VJP by transposition
    expected = np.stack([grad(loss)(x) for x in X])
    np.testing.assert_allclose(vmap(grad(loss))(X), expected)
    np.testing.assert_allclose(grad(lambda m: np.sum(vmap(loss)(m)))(X), expected)
    np.testing.assert_allclose(jacfwd(sp)(X[0]), jacrev(sp)(X[0]))
    np.testing.assert_allclose(jacfwd(sp)(X[0]), np.diag(_sigmoid(X[0])))
    h = hessian(loss)(X[0])
    np.testing.assert_allclose(h, np.diag(np.arange(1.0, 4.0) * _sigmoid(X[0]) * _sigmoid(-X[0])))
    np.testing.assert_allclose(vmap(hessian(loss))(X), np.stack([hessian(loss)(x) for x in X]))


def test_registered_rules_under_jit():
    sp = _softplus_with_rules()
    per_example = jit(vmap(grad(_loss(sp))))
    for data in (X, X[::-1] * 2.0):  # records, then replays on new data
        expected = np.stack([grad(_loss(sp))(x) for x in data])
        np.testing.assert_allclose(per_example(data), expected)


def test_primitive_without_rules_traces_through():
    """No rules: `fun`'s own NumPy calls batch and differentiate."""
    poly = extend.primitive(lambda x, w: np.sum(w * x**3))
    w = np.array([1.0, 2.0, 3.0])
    check_vmap(poly, (X, w), in_axes=(0, None))
    vmapx.check_grads(lambda x: poly(x, w), (X[0],), order=2)


def test_primitive_with_math_and_no_batch_rule_loops_with_a_warning():
    sp = extend.primitive(_py_softplus)
    extend.register_jvp(sp, lambda p, t: (sp(p[0]), t[0] * _sigmoid(p[0])))
    with pytest.warns(PerformanceWarning):
        got = vmap(sp)(X)
    np.testing.assert_allclose(got, _py_softplus(X))


def test_custom_jvp_composes():
    @vmapx.custom_jvp
    def f(x, y):
        return np.sin(x) * y

    @f.defjvp
    def f_jvp(primals, tangents):
        (x, y), (tx, ty) = primals, tangents
        return f(x, y), np.cos(x) * tx * y + np.sin(x) * ty

    y = np.array([0.5, -1.0, 2.0])
    vmapx.check_grads(lambda x, y: np.sum(f(x, y)), (X[0], y), order=2)
    check_vmap(f, (X, y), in_axes=(0, None))
    per = vmap(grad(lambda x, y: np.sum(f(x, y)), argnums=(0, 1)), in_axes=(0, None))(X, y)
    loop = [grad(lambda x, y: np.sum(f(x, y)), argnums=(0, 1))(x, y) for x in X]
    np.testing.assert_allclose(per[0], np.stack([g[0] for g in loop]))
    np.testing.assert_allclose(per[1], np.stack([g[1] for g in loop]))
    np.testing.assert_allclose(vmap(jacfwd(f), in_axes=(0, None))(X, y),
                               np.stack([jacfwd(f)(x, y) for x in X]))  # fmt: skip


def test_custom_jvp_rule_is_what_runs():
    """The registered rule, not the function's own calls, gives the derivative."""

    @vmapx.custom_jvp
    def f(x):
        return x * 1.0

    f.defjvp(lambda p, t: (f(p[0]), 2.0 * t[0]))
    np.testing.assert_allclose(grad(lambda x: np.sum(f(x)))(np.ones(3)), [2.0, 2.0, 2.0])
    np.testing.assert_allclose(jacfwd(f)(np.ones(2)), 2.0 * np.eye(2))
    # and under vmap in both orders: the batched function keeps the rule
    np.testing.assert_allclose(vmap(grad(lambda x: np.sum(f(x))))(X), 2.0 * np.ones_like(X))
    np.testing.assert_allclose(grad(lambda m: np.sum(vmap(f)(m)))(X), 2.0 * np.ones_like(X))


def test_custom_vjp_composes():
    @vmapx.custom_vjp
    def f(x, params):
        return np.tanh(x * params["a"]) + params["b"]

    def fwd(x, params):
        out = f(x, params)
        return out, (x, params["a"], out - params["b"])

    def bwd(res, g):
        x, a, t = res
        d = g * (1 - t**2)
        return d * a, {"a": np.sum(d * x), "b": np.sum(g)}

    f.defvjp(fwd, bwd)
    params = {"a": np.array(0.7), "b": np.array(0.1)}

    def loss(x, params):
        return np.sum(f(x, params) ** 2)

    vmapx.check_grads(loss, (X[0], params), order=1, modes=("rev",))
    vmapx.check_grads(loss, (X[0], params), order=1, modes=("fwd",))
    g = vmap(grad(loss, argnums=1), in_axes=(0, None))(X, params)
    loop = [grad(loss, argnums=1)(x, params) for x in X]
    for k in params:
        np.testing.assert_allclose(g[k], np.stack([d[k] for d in loop]))
    batched_params = {"a": np.array([0.7, 0.2]), "b": np.array([0.1, -0.3])}
    total = lambda m, p: np.sum(vmap(loss)(m, p))  # noqa: E731
    got = grad(total, argnums=1)(X, batched_params)
    for k in params:
        want = [grad(loss, argnums=1)(x, {j: v[i] for j, v in batched_params.items()})[k]
                for i, x in enumerate(X)]  # fmt: skip
        np.testing.assert_allclose(got[k], want)


def test_custom_vjp_under_jit():
    @vmapx.custom_vjp
    def clip_gradient(x):
        return x

    clip_gradient.defvjp(lambda x: (x, None), lambda _, g: (np.clip(g, -1.0, 1.0),))
    g = jit(vmap(grad(lambda x: np.sum(3.0 * clip_gradient(x)))))
    for data in (X, X + 1.0):
        np.testing.assert_array_equal(g(data), np.ones_like(data))


def test_register_on_a_numpy_function_refuses_to_replace():
    with pytest.raises(RegistrationError, match=r"`np.sin` already has a jvp rule, registered at "
                       r"vmapx/_numpy/ufuncs.py:\d+"):  # fmt: skip
        extend.register_jvp(np.sin, lambda p, t: (np.sin(p[0]), t[0]))
    with pytest.raises(RegistrationError, match="already has a batch rule"):
        extend.register_batch_rule(np.sum, lambda n, b, x: (np.sum(x), False))


def test_errors():
    with pytest.raises(TypeError, match="must be callable"):
        extend.primitive(3)
    sp = extend.primitive(_py_softplus)
    with pytest.raises(TypeError, match="must be callable"):
        extend.register_jvp(sp, None)
    extend.register_batch_rule(sp, lambda n, b, x: _py_softplus(x))
    with pytest.raises(OutputError, match="must return a pair"):
        vmap(sp)(X)
    with pytest.raises(RegistrationError, match="already has a batch rule"):
        extend.register_batch_rule(sp, lambda n, b, x: (_py_softplus(x), True))
    bad = extend.primitive(np.sin)
    extend.register_jvp(bad, lambda p, t: np.cos(p[0]) * t[0])
    with pytest.raises(OutputError, match="must return a pair"):
        grad(lambda x: np.sum(bad(x)))(np.ones(2))
    bad_vjp = vmapx.custom_vjp(np.sin)
    bad_vjp.defvjp(lambda x: (np.sin(x), x), lambda x, g: np.cos(x) * g)
    with pytest.raises(OutputError, match="one cotangent per positional argument"):
        grad(lambda x: np.sum(bad_vjp(x)))(np.ones(2))
    kw = extend.primitive(lambda x, scale=1.0: x * scale)
    with pytest.raises(TypeError, match="batched keyword argument"):
        vmap(lambda x: kw(x, scale=x))(X)


def test_a_registered_rule_says_where_it_was_registered():
    sp = _softplus_with_rules()
    sources = sp.prim.rules.sources
    assert sources["batch"].startswith(__file__) or "test_extend.py" in sources["batch"]
    assert "test_extend.py" in sources["jvp"]


def test_no_warning_from_plain_calls():
    sp = _softplus_with_rules()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sp(X)
