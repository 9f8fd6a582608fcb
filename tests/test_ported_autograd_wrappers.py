"""Ported from HIPS autograd's `tests/test_wrappers.py` (MIT license,
https://github.com/HIPS/autograd): its wrappers written with vmapx's transforms
(`elementwise_grad` is `vmap(grad)`, `make_hvp` is `jvp` of `grad`,
`tensor_jacobian_product` is `vjp`, `grad_and_aux` is `grad(has_aux=True)`, primitives
with their own VJP are `custom_vjp`), each also under `vmap` against the loop.

Not ported: `checkpoint` (vmapx has no rematerialisation wrapper) and autograd's own
`np.where` wrapper (vmapx uses NumPy's).
"""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest

import vmapx
from autograd_port import check_vmap_and_grad, loop
from harness import assert_same
from vmapx import grad, hessian, jacfwd, jacrev, jvp, value_and_grad, vjp, vmap

RS = np.random.default_rng(6)


def randn(*shape: int) -> np.ndarray:
    return RS.standard_normal(shape)


def close(a, b) -> None:
    np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_return_both():
    fun = lambda x: 3.0 * x**3.2  # noqa: E731
    f, d = value_and_grad(fun)(1.7)
    assert f == fun(1.7)
    assert d == grad(fun)(1.7)


def test_value_and_grad():
    fun = lambda x: np.sum(np.sin(x) ** 2)  # noqa: E731
    x = randn(5)
    value, derivative = value_and_grad(fun)(x)
    assert type(value) in (float, np.float64, np.ndarray)
    close(value, fun(x))
    close(derivative, grad(fun)(x))
    vmapx.check_grads(lambda x: value_and_grad(fun)(x)[0], (x,))
    check_vmap_and_grad(lambda x: value_and_grad(fun)(x), [x])


def test_hessian_of_a_quadratic():
    h = randn(5, 5)
    fun = lambda x: np.dot(np.dot(x, h), x)  # noqa: E731
    close(hessian(fun)(randn(5)), h + h.T)
    xs = randn(3, 5)
    assert_same(vmap(hessian(fun))(xs), loop(hessian(fun), [xs], [0]), rtol=1e-10, atol=1e-12)


def _complicated(a, b, c, d, e, f=1.1, g=9.0):
    return a + np.sin(b) + np.cosh(c) + np.cos(d) + np.tan(e) + f + g


ARGS = (0.5, -0.3, 0.2, -1.1, 0.7)
KW = {"f": 0.6, "g": -0.1}


def test_multigrad():
    a, b, c, d, e = ARGS
    wrapped = grad(_complicated, argnums=(3, 1))(*ARGS, **KW)
    explicit = grad(lambda db: _complicated(a, db[1], c, db[0], e, **KW))((d, b))
    close(wrapped, explicit)
    value, both = value_and_grad(_complicated, argnums=(3, 1))(*ARGS, **KW)
    close(value, _complicated(*ARGS, **KW))
    close(both, wrapped)


def test_multigrad_under_vmap_with_keywords():
    batched = [np.linspace(-0.5, 0.5, 4) + x for x in ARGS]
    fun = partial(grad(_complicated, argnums=(3, 1)), **KW)
    assert_same(vmap(fun)(*batched), loop(fun, batched, [0] * 5), rtol=1e-10, atol=1e-12)


def test_multigrad_onearg():
    fun = lambda x, y: np.sum(x + np.sin(y))  # noqa: E731
    packed = lambda xy: np.sum(xy[0] + np.sin(xy[1]))  # noqa: E731
    a, b = randn(3), randn(3)
    got = grad(fun, argnums=(0,))(a, b)
    assert isinstance(got, tuple) and len(got) == 1
    close(got[0], grad(packed)((a, b))[0])


def test_elementwise_grad():
    def simple(a):
        return a + np.sin(a) + np.cosh(a)

    a = randn(10)
    explicit = np.array([grad(simple)(a[i]) for i in range(len(a))])
    close(vmap(grad(simple))(a), explicit)
    close(grad(lambda a: np.sum(simple(a)))(a), explicit)


def test_elementwise_grad_multiple_args():
    def simple(a, b):
        return a + np.sin(a) + np.cosh(b)

    b = randn(10)
    explicit = np.array([grad(simple, 1)(0.9, b[i]) for i in range(len(b))])
    close(vmap(grad(simple, 1), in_axes=(None, 0))(0.9, b), explicit)


def _hvp(fun, a, v):
    return jvp(grad(fun), (a,), (v,))[1]


@pytest.mark.parametrize("shape", [(5,), (5, 4), (5, 4, 3)], ids=["vector", "matrix", "3d"])
def test_hessian_tensor_product(shape):
    fun = lambda a: np.sum(np.sin(a))  # noqa: E731
    a, v = randn(*shape), randn(*shape)
    h = hessian(fun)(a)
    close(_hvp(fun, a, v), np.tensordot(h, v, axes=v.ndim))
    # the reverse-over-reverse form, and the batch of products against the loop
    close(vjp(grad(fun), a)[1](v)[0], np.tensordot(h, v, axes=v.ndim))
    vs = randn(3, *shape)
    hvp = lambda v: _hvp(fun, a, v)  # noqa: E731
    assert_same(vmap(hvp)(vs), loop(hvp, [vs], [0]), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("shapes", [((5,), (5,)), ((5, 4), (5, 4)), ((5, 4, 3), (5, 4))],
                         ids=["vector", "matrix", "3d"])  # fmt: skip
def test_tensor_jacobian_product(shapes):
    fun = lambda a: np.roll(np.sin(a), 1)  # an asymmetric Jacobian  # noqa: E731
    a, v = randn(*shapes[0]), randn(*shapes[1])
    if len(shapes[0]) != len(shapes[1]):  # autograd contracts the leading axes
        fun = lambda a: np.roll(np.sin(a), 1)[..., 0]  # noqa: E731
    j = jacrev(fun)(a)
    close(vjp(fun, a)[1](v)[0], np.tensordot(v, j, axes=v.ndim))
    close(jacfwd(fun)(a), j)
    vs = randn(3, *v.shape)
    tjp = lambda v: vjp(fun, a)[1](v)[0]  # noqa: E731
    assert_same(vmap(tjp)(vs), loop(tjp, [vs], [0]), rtol=1e-10, atol=1e-12)


def test_make_jvp():
    a, x, v = randn(3, 5), randn(5), randn(5)
    fun = lambda x: np.tanh(np.dot(a, x))  # noqa: E731
    close(jvp(fun, (x,), (v,))[1], np.dot(jacfwd(fun)(x), v))


def _ggnvp(f, g, x, v):
    """The generalised Gauss-Newton product `J' H J v` by forward then reverse mode."""
    y, jv = jvp(f, (x,), (v,))
    hjv = jvp(grad(g), (y,), (jv,))[1]
    return vjp(f, x)[1](hjv)[0]


def _explicit_ggnvp(f, g, x, v):
    j, h = jacrev(f)(x), hessian(g)(f(x))
    return j.T @ (h @ (j @ v))


@pytest.mark.parametrize("g", [lambda y: 0.5 * np.dot(y, y), lambda y: np.sum(2.0 * y**2 + y**4)],
                         ids=["default_g", "nondefault_g"])  # fmt: skip
def test_make_ggnvp(g):
    a, x, v = randn(5, 4), randn(4), randn(4)
    for f in (lambda x: np.dot(a, x), lambda x: np.tanh(np.dot(a, x))):
        close(_ggnvp(f, g, x, v), _explicit_ggnvp(f, g, x, v))
        vs = randn(3, 4)
        prod = lambda v, f=f: _ggnvp(f, g, x, v)  # noqa: E731
        assert_same(vmap(prod)(vs), loop(prod, [vs], [0]), rtol=1e-10, atol=1e-12)


def test_grad_and_aux():
    a, x = randn(5, 4), randn(4)
    f = lambda x: (np.sum(np.dot(a, x)), x**2)  # noqa: E731
    g = lambda x: np.sum(np.dot(a, x))  # noqa: E731
    result = grad(f, has_aux=True)(x)
    assert len(result) == 2
    close(result[0], grad(g)(x))
    close(result[1], x**2)


def _new_mul():
    """autograd's `primitive` with `defvjp`, as a `custom_vjp`."""

    @vmapx.custom_vjp
    def new_mul(x, y):
        return x * y

    new_mul.defvjp(lambda x, y: (x * y, (x, y)), lambda res, g: (res[1] * g, res[0] * g))
    return new_mul


def test_custom_vjp_primitive():
    new_mul = _new_mul()
    m1, m2 = randn(2, 2), randn(2, 2)
    vmapx.check_grads(new_mul, (m1, m2), modes=("rev",))
    check_vmap_and_grad(new_mul, [m1, m2])


def test_custom_vjp_is_zero():
    @vmapx.custom_vjp
    def zero_mul(x, y):
        return 0 * x * y

    zero_mul.defvjp(lambda x, y: (0 * x * y, None), lambda res, g: (None, None))
    m1, m2 = randn(2, 2), randn(2, 2)
    vmapx.check_grads(zero_mul, (m1, m2), modes=("rev",))
    close(grad(lambda x: np.sum(zero_mul(x, m2)))(m1), np.zeros((2, 2)))


def test_quick_grad_check():
    vmapx.check_grads(lambda x, y: x**2 + y, (1.0, 2.0))


def test_partial():
    def f(x, y):
        return x

    assert grad(partial(f, y=1))(2.0) == 1.0


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_gradient_keeps_the_input_dtype(dtype):
    fun = lambda x: np.real(np.sum(x**2))  # noqa: E731
    y = randn(10, 10).astype(dtype)
    assert grad(fun)(y).dtype == dtype
    assert vmap(grad(fun))(y).dtype == dtype


@pytest.mark.parametrize("dtype", [np.longdouble, np.clongdouble])
def test_gradient_of_extended_precision(dtype):
    fun = lambda x: np.real(np.sum(x**2))  # noqa: E731
    y = (randn(10, 10) + (1j * randn(10, 10) if dtype is np.clongdouble else 0)).astype(dtype)
    got = grad(fun)(y)
    assert got.dtype == dtype
    close(np.real(got).astype(float), 2 * np.real(y).astype(float))
