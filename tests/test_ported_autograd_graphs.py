"""Ported from HIPS autograd's `tests/test_graphs.py`, `test_jacobian.py` and
`test_direct.py` (MIT license, https://github.com/HIPS/autograd): fan-out, closures over
traced values, higher derivatives, singleton outputs and Jacobians (autograd's
`jacobian` is `jacrev` here; its `np.array` of traced values is `np.stack`, see
`test_ported_autograd_numpy`).

Deliberate difference: autograd refuses an in-place write into a traced array
(`A[1] = b`, TypeError); in vmapx it is a functional update of that array, so its
derivative is checked instead.

Not ported: `test_misc.py` (autograd's `flatten` and `const_graph` have no vmapx
counterpart; pytrees are optree's).
"""

from __future__ import annotations

import numpy as np
import pytest

import vmapx
from autograd_port import single
from vmapx import grad, jacfwd, jacrev

RS = np.random.default_rng(8)


def randn(*shape: int):
    return float(RS.standard_normal()) if not shape else RS.standard_normal(shape)


def rand() -> float:
    return float(RS.random())


def _fanout(x):
    return np.sin(np.sin(x) + np.sin(x))


def _two(x, y):
    return np.sin(np.sin(x) + np.sin(y))


RANDV = randn(10)


def _hvp_fun(x):
    return np.sin(np.dot(x, RANDV))


def _vector_product(x, v):
    return np.sin(np.dot(v, grad(_hvp_fun)(x)))


def _enclosing(x):
    return x * grad(lambda y: x * y)(2.0)


def _enclosing2(x):
    return x * grad(lambda y: y * x)(2.0)


def _mutating_outgrad(a):
    b = a + 1.0
    c = b + 1.5
    return (a + b) + c


def _mutating_outgrad_from_indexing(a):
    b = a + 1.0
    c = b[0] + 1.5
    return (a + b) + c


def _complex_mutating(a):
    b = a + 1.0j
    c = b[0] + 1.5
    return np.sum(np.sin(np.real((a + b) + c)))


def _complex_separate(a):
    r, i = np.real(a), np.imag(a)
    return np.sum(np.sin(np.abs(r) ** 1.4 + np.abs(i) ** 1.3))


def _assign(a, b):
    a[1] = b
    return a


def _jac_fun(x):
    return np.sin(np.outer(x, x)) + np.cos(np.dot(x, x))


SINGLETONS = {
    "singleton_keepdims": (lambda x: np.sum(np.sin(x), keepdims=True), (3, 3)),
    "singleton_axis0": (lambda x: np.sum(np.sin(x), axis=0, keepdims=False), (3, 1)),
    "singleton_axis1": (lambda x: np.sum(np.sin(x), axis=1, keepdims=False), (1, 3)),
    "singleton_axis0_keepdims": (lambda x: np.sum(np.sin(x), axis=0, keepdims=True), (3, 1)),
    "singleton_axis1_keepdims": (lambda x: np.sum(np.sin(x), axis=1, keepdims=True), (1, 3)),
}

CASES = [
    single("grad_fanout", _fanout, randn()),
    single("grad_fanout-grad", grad(_fanout), rand()),
    single("third_derivative-grad2", grad(grad(_fanout)), rand()),
    single("third_derivative-grad3", grad(grad(grad(_fanout))), rand(), order=1),
    *[single(f"other_args-{name}", f, randn(), randn(), argnums=(0, 1)) for name, f in [
        ("fun", _two), ("grad0", grad(_two)), ("grad1", grad(_two, 1)),
        ("grad0_grad1", grad(grad(_two, 1))), ("grad1_grad0", grad(grad(_two), 1))]],
    single("hess_vector_prod-fun", _hvp_fun, randn(10)),
    single("hess_vector_prod", _vector_product, randn(10), randn(10), argnums=(0, 1)),
    single("enclosing_scope_ref", _enclosing, 1.0),
    single("enclosing_scope_ref_2", _enclosing2, 1.0),
    single("mutating_outgrad", _mutating_outgrad, randn(5)),
    single("mutating_outgrad_from_indexing", _mutating_outgrad_from_indexing, randn(5)),
    single("complex_mutating_outgrad_from_indexing", _complex_mutating, randn(5)),
    single("complex_mutating_outgrad_from_indexing-grad", grad(_complex_mutating), randn(5)),
    single("complex_separate_real_and_imaginary", _complex_separate,
           randn(5, 3) + 0.1j * randn(5, 3)),
    single("complex_separate_real_and_imaginary-grad", grad(_complex_separate),
           randn(5, 3) + 0.1j * randn(5, 3)),
    *[single(name, f, randn(*shape)) for name, (f, shape) in SINGLETONS.items()],
    *[single(f"{name}-grad", lambda x, f=f: np.sum(grad(lambda y: np.sum(f(y)))(x)),
             randn(*shape)) for name, (f, shape) in SINGLETONS.items()],
    single("assignment_is_a_functional_update", _assign, randn(5), 3.0, argnums=(0, 1)),
    single("jacobian_higher_order", lambda x: np.sum(np.sin(jacrev(_jac_fun)(x))), randn(2)),
    single("jacobian_higher_order2",
           lambda x: np.sum(np.sin(jacrev(jacrev(_jac_fun))(x))), randn(2)),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES)
def test_graph(case):
    case.check()


def test_gradient_of_a_constant_and_of_the_identity():
    assert grad(lambda x: 1.0)(2.0) == 0.0
    assert grad(lambda x: x)(2.0) == 1.0
    assert grad(grad(lambda x: x))(2.0) == 0.0


def test_assignment_leaves_the_caller_array_alone():
    a = randn(5)
    before = a.copy()
    g = grad(lambda a, b: np.sum(_assign(a, b) ** 2), argnums=(0, 1))(a, 3.0)
    np.testing.assert_array_equal(a, before)
    np.testing.assert_allclose(g[0], np.where(np.arange(5) == 1, 0.0, 2 * a))
    assert g[1] == 6.0


def test_jacobian_against_grad():
    fun = lambda x: np.sum(np.sin(x), axis=1, keepdims=True)  # noqa: E731
    a = randn(1, 3)
    np.testing.assert_allclose(grad(lambda x: np.sum(fun(x)))(a), jacrev(fun)(a)[0, 0])
    np.testing.assert_allclose(jacfwd(fun)(a), jacrev(fun)(a))


def test_jacobian_scalar_to_vector():
    val = randn()
    jac = jacrev(lambda x: np.stack([x, x**2, x**3]))(val)
    np.testing.assert_allclose(jac, [1.0, 2 * val, 3 * val**2])


def test_jacobian_against_stacked_grads():
    scalar_funs = [
        lambda x: np.sum(x**3),
        lambda x: np.prod(np.sin(x) + np.sin(x)),
        lambda x: grad(lambda y: np.exp(y) * np.tanh(x[0]))(x[1]),
    ]
    x = randn(5)
    vector_fun = lambda x: np.stack([f(x) for f in scalar_funs])  # noqa: E731
    grads = np.vstack([grad(f)(x) for f in scalar_funs])
    np.testing.assert_allclose(jacrev(vector_fun)(x), grads, rtol=1e-12)
    np.testing.assert_allclose(jacfwd(vector_fun)(x), grads, rtol=1e-12)


def test_jacobian_shapes():
    assert jacrev(_jac_fun)(randn(2)).shape == (2, 2, 2)
    assert jacrev(jacrev(_jac_fun))(randn(2)).shape == (2, 2, 2, 2)
    assert jacfwd(jacrev(jacfwd(_jac_fun)))(randn(2)).shape == (2, 2, 2, 2, 2)


def test_direct_values():
    fun = lambda x: (x + np.sin(x**2)) * x  # noqa: E731
    assert abs(grad(fun)(1.3) - 3.190948746871) < 1e-6
    assert abs(vmapx.jvp(fun, (1.3,), (1.0,))[1] - 3.190948746871) < 1e-6


def test_complex_output_needs_holomorphic():
    fun = lambda x: x * (1.0 + 0.2j)  # noqa: E731
    with pytest.raises(TypeError):
        grad(fun)(1.0)
    g = grad(fun, holomorphic=True)(1.0 + 0.0j)
    assert abs(g - (1.0 + 0.2j)) < 1e-12
