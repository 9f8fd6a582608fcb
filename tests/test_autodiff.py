"""grad / vjp / jvp / jacrev / jacfwd / hessian: values, compositions, pytrees, errors."""

from __future__ import annotations

import contextlib
import doctest
import threading

import numpy as np
import pytest

import vmapx
from harness import peak_bytes
from vmapx import grad, hessian, jacfwd, jacrev, jvp, value_and_grad, vjp, vmap
from vmapx.errors import ConcretizationError, DifferentiationError

RNG = np.random.default_rng(0)


def _close(a, b, rtol=1e-10, atol=1e-12):
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


# -- the seed examples -------------------------------------------------------------------


def _dense_loss(params, x, y):
    w, b = params["w"], params["b"]
    pred = x @ w + b
    return 0.5 * np.sum((y - pred) ** 2)


def test_per_example_gradients_of_a_dense_layer():
    bsz = 7
    params = {"w": RNG.standard_normal((32, 1)), "b": RNG.standard_normal(1)}
    x, y = RNG.standard_normal((bsz, 32)), RNG.standard_normal((bsz, 1))
    g = vmap(grad(_dense_loss), in_axes=(None, 0, 0))(params, x, y)
    assert g["w"].shape == (bsz, 32, 1) and g["b"].shape == (bsz, 1)
    r = x @ params["w"] + params["b"] - y  # hand-written backprop
    _close(g["w"], x[:, :, None] * r[:, None, :])
    _close(g["b"], r)
    loop = [grad(_dense_loss)(params, x[i], y[i]) for i in range(bsz)]
    _close(g["w"], np.stack([d["w"] for d in loop]))


def test_per_example_gradients_with_argnums_tuple():
    w, b = RNG.standard_normal((32, 1)), RNG.standard_normal(1)
    x, y = RNG.standard_normal((4, 32)), RNG.standard_normal((4, 1))

    def loss(w, b, x, y):
        return 0.5 * np.sum((y - (x @ w + b)) ** 2)

    gw, gb = vmap(grad(loss, argnums=(0, 1)), in_axes=(None, None, 0, 0))(w, b, x, y)
    assert gw.shape == (4, 32, 1) and gb.shape == (4, 1)


def _f(x):
    return np.tanh(x) * x[::-1] + np.sin(x[0]) * x


def test_vmap_of_vjp_over_the_identity_is_the_jacobian():
    x = RNG.standard_normal(5)
    out, vjp_fn = vjp(_f, x)
    rows = vmap(vjp_fn)(np.eye(5))[0]
    _close(rows, np.stack([vjp_fn(e)[0] for e in np.eye(5)]))
    _close(rows, jacrev(_f)(x))
    _close(jacfwd(_f)(x), jacrev(_f)(x))
    _close(out, _f(x))


def test_jacobian_by_finite_differences():
    x = RNG.standard_normal(4)
    eps = 1e-6
    fd = np.stack([(_f(x + eps * e) - _f(x - eps * e)) / (2 * eps) for e in np.eye(4)], -1)
    _close(jacrev(_f)(x), fd, rtol=1e-6, atol=1e-8)


def test_hessian_of_a_quadratic_is_the_symmetric_part():
    a = RNG.standard_normal((4, 4))
    x = RNG.standard_normal(4)
    h = hessian(lambda x: x @ a @ x)(x)
    _close(h, a + a.T)
    _close(jacrev(jacrev(lambda x: x @ a @ x))(x), a + a.T)
    _close(jacfwd(jacfwd(lambda x: x @ a @ x))(x), a + a.T)


def _mlp_loss(params, x, y):
    h = np.tanh(x @ params["w1"] + params["b1"])
    z = h @ params["w2"] + params["b2"]
    z = z - np.max(z)
    return np.log(np.sum(np.exp(z))) - np.sum(y * z)


def _mlp_params(rng, n_in=5, n_hidden=4, n_out=3):
    return {
        "w1": rng.standard_normal((n_in, n_hidden)) / 2,
        "b1": rng.standard_normal(n_hidden) / 3,
        "w2": rng.standard_normal((n_hidden, n_out)) / 2,
        "b2": rng.standard_normal(n_out) / 3,
    }


def test_hessian_of_an_mlp_loss_is_symmetric_and_matches_finite_differences():
    params = _mlp_params(RNG)
    x, y = RNG.standard_normal(5), np.eye(3)[1]

    def loss_w2(w2):
        return _mlp_loss({**params, "w2": w2}, x, y)

    h = hessian(loss_w2)(params["w2"])
    assert h.shape == (4, 3, 4, 3)
    flat = h.reshape(12, 12)
    _close(flat, flat.T, atol=1e-12)
    g = grad(loss_w2)
    eps = 1e-6
    fd = np.stack(
        [
            ((g(params["w2"] + eps * e.reshape(4, 3)) - g(params["w2"] - eps * e.reshape(4, 3)))
             / (2 * eps)).ravel()
            for e in np.eye(12)
        ],
        -1,
    )  # fmt: skip
    _close(flat, fd, rtol=1e-6, atol=1e-7)
    h_dict = hessian(_mlp_loss)(params, x, y)
    _close(h_dict["w2"]["w2"], h)
    # closed form for the output layer: h_i h_j (diag(p) - p p^T)_ab, p = softmax(z)
    hid = np.tanh(x @ params["w1"] + params["b1"])
    z = hid @ params["w2"] + params["b2"]
    p = np.exp(z - z.max()) / np.sum(np.exp(z - z.max()))
    closed = np.einsum("i,j,ab->iajb", hid, hid, np.diag(p) - np.outer(p, p))
    _close(h, closed, atol=1e-12)


def test_per_example_mlp_gradients_equal_hand_written_backprop():
    params = _mlp_params(RNG, 6, 5, 4)
    x = RNG.standard_normal((8, 6))
    y = np.eye(4)[RNG.integers(0, 4, 8)]
    g = vmap(grad(_mlp_loss), in_axes=(None, 0, 0))(params, x, y)
    h = np.tanh(x @ params["w1"] + params["b1"])
    z = h @ params["w2"] + params["b2"]
    e = np.exp(z - z.max(axis=1, keepdims=True))
    dz = e / e.sum(axis=1, keepdims=True) - y
    dh = (dz @ params["w2"].T) * (1 - h**2)
    _close(g["w1"], x[:, :, None] * dh[:, None, :])
    _close(g["b1"], dh)
    _close(g["w2"], h[:, :, None] * dz[:, None, :])
    _close(g["b2"], dz)


# -- compositions ------------------------------------------------------------------------


def _h(x):
    return np.sum(np.sin(x) ** 2 * x[0]) + np.prod(x[:2])


@pytest.mark.parametrize(
    "name",
    ["vmap(grad)", "grad(vmap)", "vmap(vmap(grad))", "jacrev(jacrev)", "jacfwd(jacrev)",
     "vmap(jacrev)", "grad(grad)", "jvp(grad)", "grad(jvp)", "vmap(hessian)",
     "jacrev(vmap)", "jacfwd(vmap)"],
)  # fmt: skip
def test_compositions_equal_loops(name):
    xs = RNG.standard_normal((3, 4))
    x = xs[0]
    hess = np.stack([jacfwd(grad(_h))(x)])[0]
    if name == "vmap(grad)":
        _close(vmap(grad(_h))(xs), np.stack([grad(_h)(r) for r in xs]))
    elif name == "grad(vmap)":
        _close(grad(lambda xs: np.sum(vmap(_h)(xs)))(xs), np.stack([grad(_h)(r) for r in xs]))
    elif name == "vmap(vmap(grad))":
        xss = RNG.standard_normal((2, 3, 4))
        want = np.stack([np.stack([grad(_h)(r) for r in rows]) for rows in xss])
        _close(vmap(vmap(grad(_h)))(xss), want)
    elif name == "jacrev(jacrev)":
        _close(jacrev(jacrev(_h))(x), hess)
    elif name == "jacfwd(jacrev)":
        _close(jacfwd(jacrev(_h))(x), hess)
        _close(hessian(_h)(x), hess)
    elif name == "vmap(jacrev)":
        _close(vmap(jacrev(_f))(xs), np.stack([jacrev(_f)(r) for r in xs]))
    elif name == "grad(grad)":
        g2 = grad(grad(lambda t: np.sin(t) * t))(0.5)
        _close(g2, 2 * np.cos(0.5) - 0.5 * np.sin(0.5))
        _close(grad(lambda x: np.sum(grad(_h)(x) * x))(x), hess @ x + grad(_h)(x))
    elif name == "jvp(grad)":
        t = RNG.standard_normal(4)
        _close(jvp(grad(_h), (x,), (t,))[1], hess @ t)
    elif name == "grad(jvp)":
        t = RNG.standard_normal(4)
        _close(grad(lambda x: jvp(_h, (x,), (t,))[1])(x), hess @ t)
    elif name == "vmap(hessian)":
        _close(vmap(hessian(_h))(xs), np.stack([hessian(_h)(r) for r in xs]))
    elif name == "jacrev(vmap)":
        _close(jacrev(vmap(_h))(xs).reshape(3, 12), _block_diag_grads(xs))
    elif name == "jacfwd(vmap)":
        _close(jacfwd(vmap(_h))(xs).reshape(3, 12), _block_diag_grads(xs))


def _block_diag_grads(xs):
    out = np.zeros((3, 12))
    for i, r in enumerate(xs):
        out[i, 4 * i : 4 * i + 4] = grad(_h)(r)
    return out


def test_unbatched_weight_used_with_batched_input_keeps_its_shape():
    w = RNG.standard_normal(3)
    xs = RNG.standard_normal((5, 3))
    g = vmap(grad(lambda w, x: np.sum(w * x + w)), in_axes=(None, 0))(w, xs)
    _close(g, xs + 1)


def test_python_control_flow_on_values_works_under_grad():
    def f(x):
        if x > 0:  # the tape is eager: the value decides
            return x**2
        return -x

    assert grad(f)(3.0) == 6.0
    assert grad(f)(-3.0) == -1.0
    assert float(vmapx.stop_gradient(np.float64(2.0))) == 2.0


def test_control_flow_where_examples_disagree_loops_under_vmap_of_grad():
    def f(x):
        return x**2 if x > 0 else -x

    xs = np.array([2.0, -1.0, 3.0])
    with pytest.warns(vmapx.PerformanceWarning):
        got = vmap(grad(f))(xs)
    _close(got, [4.0, -1.0, 6.0])


def test_index_assignment_into_zeros_like_is_traced():
    def f(x):
        out = np.zeros_like(x)
        out[0] = x[1] * 2
        out[1:] = x[:-1] ** 2
        return np.sum(out)

    x = np.array([1.0, 2.0, 3.0])
    _close(grad(f)(x), [2.0, 2.0 + 4.0, 0.0])
    _close(vmap(grad(f))(np.stack([x, 2 * x])), np.stack([grad(f)(x), grad(f)(2 * x)]))
    vmapx.check_grads(lambda x: (lambda o: o)(f(x)), (x,), order=2)


def test_gather_with_repeated_indices_scatters_and_adds():
    idx = np.array([0, 2, 0])
    x = np.array([1.0, 2.0, 3.0])
    _close(grad(lambda x: np.sum(x[idx] ** 2))(x), [4.0, 0.0, 6.0])
    xs = RNG.standard_normal((4, 3))
    ids = RNG.integers(0, 3, (4, 2))
    gather = grad(lambda x, i: np.sum(x[i] ** 2))
    got = vmap(gather)(xs, ids)
    _close(got, np.stack([gather(x, i) for x, i in zip(xs, ids, strict=True)]))
    table = RNG.standard_normal((5, 3))  # an unbatched embedding table, batched lookups
    got = vmap(gather, in_axes=(None, 0))(table, ids)
    _close(got, np.stack([gather(table, i) for i in ids]))


def test_add_at_is_differentiable():
    def f(x, v):
        y = x.copy()
        np.add.at(y, np.array([0, 2, 0]), v)
        return np.sum(y**2)

    x, v = np.array([1.0, 2.0, 3.0]), np.array([0.5, 1.0, 2.0])
    vmapx.check_grads(f, (x, v), order=2)
    xs, vs = RNG.standard_normal((4, 3)), RNG.standard_normal((4, 3))
    got = vmap(grad(f, argnums=(0, 1)))(xs, vs)
    loop = [grad(f, argnums=(0, 1))(x, v) for x, v in zip(xs, vs, strict=True)]
    _close(got[1], np.stack([g[1] for g in loop]))

    def g(x):
        y = x.copy()
        np.multiply.at(y, np.array([0]), 2.0)
        return np.sum(y)

    with pytest.raises(DifferentiationError, match=r"grad: `np.multiply.at` cannot be diff"):
        grad(g)(x)


def test_max_ties_share_the_derivative_equally():
    x = np.array([1.0, 3.0, 3.0, 2.0])
    _close(grad(np.max)(x), [0.0, 0.5, 0.5, 0.0])
    _close(grad(lambda x: np.sum(np.maximum(x, 2.0)))(np.array([2.0, 1.0, 3.0])), [0.5, 0, 1])


def test_prod_and_cumprod_with_zeros():
    x = np.array([2.0, 0.0, 3.0, 4.0])
    _close(grad(np.prod)(x), [0.0, 24.0, 0.0, 0.0])
    want = jacrev(lambda x: np.cumprod(x))(x)
    eps = 1e-6
    fd = np.stack([(np.cumprod(x + eps * e) - np.cumprod(x - eps * e)) / (2 * eps)
                   for e in np.eye(4)], -1)  # fmt: skip
    _close(want, fd, rtol=1e-6, atol=1e-8)


def test_integer_and_boolean_results_are_not_traced():
    def f(x):
        i = np.argmax(x)
        mask = x > 0
        return np.sum(np.where(mask, x, 0.0)) * i

    x = np.array([-1.0, 2.0, 0.5])
    _close(grad(f)(x), [0.0, 1.0, 1.0])


def test_value_and_grad_and_has_aux():
    f = lambda x: (np.sum(x**2), {"norm": np.sqrt(np.sum(x**2))})  # noqa: E731
    x = np.array([3.0, 4.0])
    (value, aux), g = value_and_grad(f, has_aux=True)(x)
    assert value == 25.0 and aux["norm"] == 5.0
    _close(g, [6.0, 8.0])
    g2, aux2 = grad(f, has_aux=True)(x)
    _close(g2, g)
    assert aux2["norm"] == 5.0
    out, vjp_fn, aux3 = vjp(f, x, has_aux=True)
    assert aux3["norm"] == 5.0
    out, tan, aux4 = jvp(f, (x,), (np.ones(2),), has_aux=True)
    assert tan == 14.0 and aux4["norm"] == 5.0
    jac, aux5 = jacrev(f, has_aux=True)(x)
    _close(jac, g)
    jac, aux6 = jacfwd(f, has_aux=True)(x)
    _close(jac, g)


def test_pytree_jacobians():
    def f(p):
        return {"a": p["x"] * p["y"][0], "b": np.sum(p["x"])}

    p = {"x": np.array([1.0, 2.0]), "y": np.array([3.0, 4.0, 5.0])}
    jr, jf = jacrev(f)(p), jacfwd(f)(p)
    for out in ("a", "b"):
        for inp in ("x", "y"):
            _close(jr[out][inp], jf[out][inp])
    assert jr["a"]["y"].shape == (2, 3) and jr["b"]["x"].shape == (2,)
    _close(jr["a"]["x"], 3 * np.eye(2))


def test_jvp_and_linearize():
    x, t = np.array([0.0, 1.0]), np.array([1.0, 2.0])
    out, tan = jvp(np.exp, (x,), (t,))
    _close(tan, np.exp(x) * t)
    out2, f_jvp = vmapx.linearize(np.exp, x)
    _close(f_jvp(t), tan)
    _close(vmap(lambda t: jvp(np.exp, (x,), (t,))[1])(np.eye(2)), np.diag(np.exp(x)))


def test_float32_stays_float32():
    x = np.array([1.0, 2.0], dtype=np.float32)
    g = grad(lambda x: np.sum(x**2 * 0.5))(x)
    assert g.dtype == np.float32
    assert jacrev(lambda x: x * 2.0)(x).dtype == np.float32


def test_complex_follows_jax_conventions():
    z = np.array(3.0 + 4.0j)
    # grad of a real function of z is df/dx - i df/dy; |z|^2 -> 2 conj(z)
    _close(grad(lambda z: np.abs(z) ** 2)(z), 6.0 - 8.0j)
    _close(grad(lambda z: np.real(z * np.conj(z)))(z), 6.0 - 8.0j)
    # holomorphic: f'(z)
    _close(grad(lambda z: z**2, holomorphic=True)(z), 2 * z)
    _, tan = jvp(lambda z: z**2, (z,), (np.array(1.0 + 0j),))
    _close(tan, 2 * z)
    zs = np.array([1.0 + 2.0j, -0.5 + 0.3j])
    vmapx.check_grads(lambda z: np.abs(z) ** 2 + np.real(z * z), (zs,), order=2)
    vmapx.check_grads(lambda z: np.sin(z) * np.conj(z), (zs,), order=2)


def test_grad_of_a_real_function_of_real_input_drops_complex_intermediates():
    x = np.array([0.3, 0.7])
    g = grad(lambda x: np.sum(np.abs(np.exp(1j * x) + 1) ** 2))(x)
    assert g.dtype == np.float64
    _close(g, -2 * np.sin(x))


def test_stop_gradient():
    g = grad(lambda x: np.sum(x * vmapx.stop_gradient(x)))(np.array([1.0, 2.0]))
    _close(g, [1.0, 2.0])
    # at every level: the inner tracer of jvp(grad) is stopped too
    h = jvp(grad(lambda x: x * vmapx.stop_gradient(x) ** 2), (2.0,), (1.0,))[1]
    _close(h, 0.0)


def test_gradient_is_zero_for_unused_inputs_and_writable():
    g = grad(lambda x, y: np.sum(x), argnums=(0, 1))(np.ones(3), np.ones(2))
    _close(g[1], np.zeros(2))
    g0 = grad(np.sum)(np.ones(3))
    g0 += 1  # a real array, not a broadcast view
    _close(g0, 2 * np.ones(3))


def test_threads_do_not_see_each_other():
    errors = []

    def work(seed):
        try:
            rng = np.random.default_rng(seed)
            x = rng.standard_normal(4)
            for _ in range(20):
                _close(grad(_h)(x), jacrev(_h)(x))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


# -- errors ------------------------------------------------------------------------------


def test_error_for_integer_input():
    with pytest.raises(DifferentiationError, match=r"grad: argument `x` is int64\[3\].*astype"):
        grad(lambda x: np.sum(x * 1.0))(np.arange(3))
    with pytest.raises(DifferentiationError, match=r"argument `p`\['k'\]"):
        grad(lambda p: np.sum(p["k"] * 1.0))({"k": np.arange(3)})
    with pytest.raises(DifferentiationError, match="not float or complex"):
        grad(lambda x: x * 1.0)(3)


def test_error_for_non_scalar_output():
    with pytest.raises(DifferentiationError, match=r"grad: .*scalar.*shape \(3,\).*jacrev"):
        grad(lambda x: x * 2)(np.ones(3))
    with pytest.raises(DifferentiationError, match="has_aux=True"):
        grad(lambda x: (np.sum(x), x))(np.ones(3))
    with pytest.raises(DifferentiationError, match="complex.*holomorphic=True"):
        grad(lambda z: z**2)(np.array(1.0 + 1.0j))


def test_error_for_bad_argnums():
    with pytest.raises(DifferentiationError, match=r"argnums=2 refers to positional argument 2"):
        grad(lambda x, y: np.sum(x * y), argnums=2)(np.ones(2), np.ones(2))
    with pytest.raises(DifferentiationError, match="`argnums` must be an int or"):
        grad(np.sum, argnums="x")
    with pytest.raises(DifferentiationError, match="`argnums` must be an int or"):
        jacrev(np.sum, argnums=(0, 1.5))
    with pytest.raises(DifferentiationError, match="names an argument twice"):
        grad(lambda x: np.sum(x), argnums=(0, -1))(np.ones(2))


def test_error_for_has_aux_not_a_pair():
    with pytest.raises(
        DifferentiationError, match=r"has_aux=True.*pair.*returned a tuple of length 3"
    ):
        grad(lambda x: (np.sum(x), 1, 2), has_aux=True)(np.ones(2))
    with pytest.raises(
        DifferentiationError, match=r"has_aux=True.*returned an array \(float64\[\]\)"
    ):
        value_and_grad(lambda x: np.sum(x), has_aux=True)(np.ones(2))


def test_error_for_a_function_without_derivative_rule():
    def f(x):
        return np.sum(np.emath.sqrt(x))

    with pytest.raises(DifferentiationError, match=r"grad: `np.lib.scimath.sqrt` has no .*VJP"):
        grad(f)(np.ones(2))
    with pytest.raises(DifferentiationError, match=r"jvp: `np.lib.scimath.sqrt` has no"):
        jvp(f, (np.ones(2),), (np.ones(2),))
    # no derivative flows through it: no error
    assert grad(lambda x: np.sum(x) + np.sum(np.emath.sqrt(vmapx.stop_gradient(x))))(
        np.ones(2)
    ).tolist() == [1.0, 1.0]


def test_error_for_traced_value_written_into_a_plain_array():
    def f(x):
        buf = np.zeros(3)
        buf[0] = x[0]
        return np.sum(buf)

    # NumPy reports a failed element write as a ValueError caused by ours
    with pytest.raises((ConcretizationError, ValueError)) as info:
        grad(f)(np.ones(3))
    err = info.value
    if not isinstance(err, ConcretizationError):
        err = err.__cause__ or err.__context__
    assert isinstance(err, ConcretizationError)
    assert "plain NumPy array" in str(err) and "zeros_like" in str(err)

    def g(x):
        buf = np.zeros(3)
        buf[:2] = x[:2]
        return np.sum(buf)

    with pytest.raises(ConcretizationError, match=r"grad: .*plain NumPy array"):
        grad(g)(np.ones(3))
    with pytest.raises(ConcretizationError, match="grad"):
        grad(lambda x: np.sum(np.asarray(x)))(np.ones(3))


def test_error_for_escaped_tracer():
    leaked = []

    def f(x):
        leaked.append(x)
        return np.sum(x)

    grad(f)(np.ones(2))
    with pytest.raises(vmapx.errors.EscapedTracerError):
        np.sin(leaked[0])


def test_error_for_wrong_cotangent_and_tangent():
    out, vjp_fn = vjp(lambda x: x * 2, np.ones(3))
    with pytest.raises(DifferentiationError, match=r"cotangent for output 0 has shape \(2,\)"):
        vjp_fn(np.ones(2))
    with pytest.raises(DifferentiationError, match=r"tangent 0 has shape \(2,\)"):
        jvp(np.sin, (np.ones(3),), (np.ones(2),))
    with pytest.raises(DifferentiationError, match="`primals` must be a tuple"):
        jvp(np.sin, np.ones(3), np.ones(3))
    with pytest.raises(DifferentiationError, match="jacrev: output 0 is complex"):
        jacrev(lambda x: x * 1j)(np.ones(2))


@contextlib.contextmanager
def _rules_restored(func):
    """Put back the rules of `func`'s primitive after the block (tests that swap rules)."""
    from vmapx._registry import KINDS, prim_of

    rules = prim_of(func).rules
    saved = {k: getattr(rules, k) for k in KINDS}, dict(rules.sources), set(rules.defaults)
    try:
        yield rules
    finally:
        for k, v in saved[0].items():
            setattr(rules, k, v)
        rules.sources, rules.defaults = saved[1], saved[2]


def test_check_grads_detects_a_wrong_rule():
    from vmapx import _autodiff

    with _rules_restored(np.cbrt):
        wrong = lambda ans, x: 1 / (2 * ans * ans)  # noqa: E731
        _autodiff.defelementwise(np.cbrt, wrong, replace=True)  # a test of a wrong rule
        with pytest.raises(AssertionError, match="JVP"):
            vmapx.check_grads(np.cbrt, (np.array([1.0, 2.0]),), order=1, modes=("fwd",))
        with pytest.raises(AssertionError, match="VJP"):
            vmapx.check_grads(np.cbrt, (np.array([1.0, 2.0]),), order=1, modes=("rev",))


def test_derived_modes_by_transposition():
    """A primitive with only a VJP rule gets its JVP by transposing it, and vice versa."""
    with _rules_restored(np.cbrt) as rules:
        vjp_rule = rules.vjp
        rules.vjp = None
        vmapx.check_grads(np.cbrt, (np.array([1.0, 2.0]),), order=2)
        rules.vjp, rules.jvp = vjp_rule, None
        vmapx.check_grads(np.cbrt, (np.array([1.0, 2.0]),), order=2)


def test_docstring_examples():
    from vmapx import _ad_api, testing

    for module in (_ad_api, testing):
        result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
        assert result.failed == 0, module.__name__
        assert result.attempted > 0


# -- in-place writes -------------------------------------------------------------------------


def test_recurrence_written_in_place_is_differentiable():
    def f(x):
        h = np.zeros_like(x)
        h[0] = x[0]
        for i in range(1, 3):
            h[i] = h[i - 1] * 0.5 + x[i]  # reads a view of `h`, then writes `h`
        return np.sum(h)

    x = np.ones(3)
    _close(grad(f)(x), [1.75, 1.5, 1.0])
    _close(jacfwd(f)(x), [1.75, 1.5, 1.0])
    _close(vmap(grad(f))(np.ones((2, 3))), np.ones((2, 3)) * [1.75, 1.5, 1.0])


def test_views_keep_numpy_semantics_or_raise():
    def read_view_after_write(x):
        h = x * 1.0
        v = h[0:2]
        h[0] = 5.0  # NumPy would change `v` too
        return np.sum(v)

    def write_into_view(x):
        h = x * 1.0
        v = h[0:2]
        v[0] = 5.0  # NumPy would change `h` too
        return np.sum(h)

    with pytest.raises(ConcretizationError, match="view .* used after the array it views"):
        grad(read_view_after_write)(np.ones(3))
    with pytest.raises(ConcretizationError, match="in-place write into an array that may"):
        grad(write_into_view)(np.ones(3))


def test_arrays_used_by_the_tape_cannot_change_under_it():
    def reuses_buffer(w):
        buf = np.zeros(3)
        total = 0.0
        for i in range(2):
            buf[:] = i + 1.0  # would change the first term's derivative
            total = total + np.sum(w * buf)
        return total

    with pytest.raises(ValueError, match="read-only"):
        grad(reuses_buffer)(np.ones(3))
    a = np.ones(3)
    grad(lambda w: np.sum(w * a))(np.ones(3))
    assert a.flags.writeable  # writable again once the transform returned

    def mutates_batched(w, c):
        y = np.sum(w * c)
        c[0] = 5.0  # a batched value written after use: the tape kept the old one
        return y + np.sum(w * c)

    got = vmap(grad(mutates_batched), in_axes=(None, 0))(np.ones(3), np.ones((2, 3)))
    _close(got, [[6.0, 2.0, 2.0], [6.0, 2.0, 2.0]])


# -- the ndarray surface and pytrees ------------------------------------------------------


def test_ndarray_methods_are_differentiable():
    def f(x):
        y = x.reshape(3, 4).T
        z = y.sum(axis=0) + y.mean() + y.max(axis=1).sum() + y.min() + y.std()
        w = x.cumsum()[-1] + x.prod() * 0.01 + x.flatten()[2] + x.ravel()[3] + x.copy()[0]
        v = x.astype(np.float64).conj() @ x + y.var(axis=0).sum() + x.cumprod()[3]
        return np.sum(z) + w + v

    x = RNG.standard_normal(12)
    vmapx.check_grads(f, (x,), order=2)
    _close(vmap(grad(f))(np.stack([x, x + 1])), np.stack([grad(f)(x), grad(f)(x + 1)]))


def test_hessian_with_several_argnums_nests_like_jax():
    def f(a, b):
        return np.sum(a**2 * b) + np.sum(b**3)

    a, b = np.ones(2), 2 * np.ones(2)
    (haa, hab), (hba, hbb) = hessian(f, argnums=(0, 1))(a, b)
    _close(haa, 2 * np.diag(b))
    _close(hab, 2 * np.diag(a))
    _close(hba, 2 * np.diag(a))
    _close(hbb, 6 * np.diag(b))


def test_jvp_of_pytrees_and_chunked_vmap_of_grad():
    p = {"w": np.array([1.0, 2.0]), "b": np.array(0.5)}
    t = {"w": np.array([1.0, 0.0]), "b": np.array(1.0)}
    out, tan = jvp(lambda p: {"y": p["w"] * p["b"]}, (p,), (t,))
    _close(tan["y"], [1.0 * 0.5 + 1.0, 2.0])
    xs = RNG.standard_normal((5, 4))
    _close(vmap(grad(_h), chunk_size=2)(xs), vmap(grad(_h))(xs))


# -- deferred scaling of batched cotangents through elementwise nodes ---------------------

_X5 = RNG.uniform(0.5, 1.5, 5)
_H16 = np.array([1.1, 1.3, 300, 2, 3], np.float16)  # (300 ** 3 overflows float16)
_DEFERRED_CASES = {
    "paths meet": (lambda x: x**2 + np.sin(x), _X5),
    "a chain": (lambda x: np.exp(np.tanh(x)) * 3.0 - x, _X5),
    "operand broadcast": (lambda x: np.sin(x) * np.arange(1.0, 21.0).reshape(4, 5), _X5),
    "float32 operand": (lambda x: np.cos(x.astype(np.float32)) * np.float64(2.0), _X5),
    "reduction after": (lambda x: np.log(x).cumsum() * x, _X5),
    "complex": (lambda z: np.exp(z) * z, _X5 + 0.5j * _X5[::-1]),
    # a partial after an addition (the scale 1 is no product), integer or float
    "integer partial after +": (lambda x: np.sin(x + 1.0) * np.arange(1, 6), _X5),
    "float32 partial after +": (lambda x: (x - 2.0) * np.linspace(1, 2, 5, dtype="f4"), _X5),
    # partials of narrower dtypes than the cotangent: their products must not overflow
    # or round in that dtype
    "uint8 weights, paths meet": (
        lambda x: x * np.array([200, 100, 50, 25, 5], np.uint8) * 2 + x * 3,
        _X5,
    ),
    "int8 weights twice": (lambda x: x * np.full(5, 100, np.int8) * np.full(5, 100, np.int8), _X5),
    "float16 weights": (lambda x: x * _H16 * _H16 * _H16, _X5),
    "negated uint8": (lambda x: 1.0 - x * np.arange(5, dtype=np.uint8), _X5),
}


@pytest.mark.parametrize("case", list(_DEFERRED_CASES))
def test_vmap_over_a_pullback_equals_the_loop_of_the_pullback(case):
    f, x = _DEFERRED_CASES[case]
    out, pull = vjp(f, x)
    rows = RNG.standard_normal((6, *out.shape)).astype(out.dtype)
    looped = np.stack([pull(r)[0] for r in rows])
    batched = vmap(lambda r: pull(r)[0])(rows)
    assert batched.dtype == looped.dtype
    _close(batched, looped)
    if case != "float32 operand":  # finite differences need float64 throughout
        vmapx.testing.check_grads(f, (x,), order=1, modes=("rev",))


def test_derivatives_are_new_arrays_of_their_own():
    """No derivative is the caller's (co)tangent or another derivative: writing into one
    changes nothing else (the pullback of the identity returns its cotangent; the
    gradients of `x + y` are one array)."""
    x, y, g = RNG.standard_normal(3), RNG.standard_normal(3), np.ones(3)
    results = [
        *vjp(lambda x: x, x)[1](g),
        *vjp(lambda x, y: x + y, x, y)[1](g),
        *vjp(lambda x: x.T * 1.0, x)[1](g),
        jvp(lambda x: x * 1.0, (x,), (g,))[1],
        vmapx.linearize(lambda x: x * 1.0, x)[1](g),
        *grad(lambda x, y: np.sum(np.sin(x + y)), argnums=(0, 1))(x, y),
        *vmap(grad(lambda x, y: np.sum(np.sin(x + y)), argnums=(0, 1)))(
            np.stack([x, y]), np.stack([y, x])
        ),
    ]
    for i, r in enumerate(results):
        assert r.flags.writeable
        assert not any(np.shares_memory(r, a) for a in (x, y, g))
        assert not any(np.shares_memory(r, o) for o in results[:i])


def test_pullback_rows_of_an_elementwise_chain_form_one_batch_sized_product():
    n = 400
    x, eye = RNG.standard_normal(n), np.eye(n)
    _, pull = vjp(lambda x: x**2 + np.sin(x) + np.exp(x) * x, x)
    rows = vmap(lambda r: pull(r)[0])
    _close(rows(eye), np.diag(2 * x + np.cos(x) + np.exp(x) * (x + 1)))
    peak = peak_bytes(lambda: rows(eye), warm=False)
    assert peak < 1.5 * eye.nbytes, peak / eye.nbytes  # one (n, n) array, not one per node


def test_per_example_gradients_peak_memory_is_near_hand_written_backprop():
    """`grad` runs its tape once and frees each node's saved values as it goes."""
    w, b = RNG.standard_normal((32, 1)), RNG.standard_normal(1)
    x, y = RNG.standard_normal((1024, 32)), RNG.standard_normal((1024, 1))

    def by_hand():
        r = x @ w + b - y
        return x[:, :, None] * r[:, None, :], r

    loss = lambda w, b, x, y: 0.5 * np.sum((x @ w + b - y) ** 2)  # noqa: E731
    per_example = vmap(grad(loss, (0, 1)), in_axes=(None, None, 0, 0))

    run = lambda: per_example(w, b, x, y)  # noqa: E731
    gw, gb = run()
    hw, hb = by_hand()
    _close(gw, hw)
    _close(gb, hb)
    assert peak_bytes(run) < 1.15 * peak_bytes(by_hand)
