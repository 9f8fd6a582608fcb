"""Ported from HIPS autograd's `tests/test_dict.py`, `test_list.py`, `test_tuple.py`,
`test_complex.py`, `test_logic.py`, `test_builtins.py` and `test_core.py` (MIT license,
https://github.com/HIPS/autograd): derivatives of functions of dicts, lists and tuples
(vmapx's pytrees), of complex values, and through Python logic.

Deliberate differences, each tested as vmapx's behaviour:

- autograd's containers (`ag_dict`, `ag_list`, `ag_tuple`, `ag_isinstance`) are plain
  Python containers here: vmapx's tracers live inside ordinary pytrees.
- The derivative of a comparison (`x < y`) is refused with a TypeError (autograd returns
  zero with a warning): a bool has no derivative, as in JAX.
- A primitive without derivative rules is differentiated through its own NumPy calls
  (autograd raises NotImplementedError); one whose body NumPy cannot see warns that the
  derivative is dropped there.
"""

from __future__ import annotations

import math
import operator

import numpy as np
import pytest

import vmapx
from autograd_port import single
from vmapx import grad
from vmapx.errors import DroppedDerivativeWarning

RS = np.random.default_rng(7)


def randn(*shape: int) -> np.ndarray:
    return RS.standard_normal(shape)


def _three(kind):
    arrays = [randn(5, 6), randn(4, 3), randn(2, 4)]
    if kind is dict:
        return dict(zip(["item_1", "item_2", "item_X"], arrays, strict=True))
    return kind(arrays)


KEYS = {dict: ("item_1", "item_2", "item_X"), list: (0, 1, 2), tuple: (0, 1, 2)}
KINDS = [dict, list, tuple]


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.__name__)
def test_getter(kind):
    k1, k2, kx = KEYS[kind]

    def fun(c):
        return np.sum(c[k1]) + np.sum(c[k2]) + np.sum(c[k2])

    result = grad(fun)(_three(kind))
    assert type(result) is kind
    np.testing.assert_array_equal(result[k1], np.ones((5, 6)))
    np.testing.assert_array_equal(result[k2], 2 * np.ones((4, 3)))
    np.testing.assert_array_equal(result[kx], np.zeros((2, 4)))


def _container_funs(kind):
    k1, k2, _ = KEYS[kind]

    def fun(c):
        return np.sum(np.sin(c[k1])) + np.sum(np.cos(c[k2]))

    def d_fun(c):
        g = grad(fun)(c)
        return np.sum(g[k1]) + np.sum(np.sin(g[k1])) + np.sum(np.sin(g[k2]))

    return fun, d_fun


def _dict_iter(d):
    a, b = 0.0, 0.0
    for i, k in enumerate(sorted(d)):
        a = a + np.sum(np.sin(d[k])) * (i + 1.0)
        b = b + np.sum(np.cos(d[k]))
    return a + b


def _dict_items_values_keys(d):
    a, b = 0.0, 0.0
    for i, (_, v) in enumerate(sorted(d.items(), key=operator.itemgetter(0))):
        a = a + np.sum(np.sin(v)) * (i + 1.0)
        b = b + np.sum(np.cos(v))
    for v in d.values():
        a = a + np.sum(np.sin(v))
    for k in sorted(d.keys()):
        a = a + np.sum(np.cos(d[k]))
    return a + b


def _of_grad(fun):
    def d_fun(d):
        g = grad(fun)(d)
        return np.sum(g["item_1"]) + np.sum(np.sin(g["item_1"])) + np.sum(np.sin(g["item_2"]))

    return d_fun


def _get(d, x):
    return d.get("item_1", x) ** 2


def _inner_product_grad(x):
    g = grad(lambda y: y[0] * y[1])((x, x))
    return np.sum(np.sin(np.stack(g)))  # autograd: np.array(g)


CASES = [
    *[single(f"grads-{k.__name__}", _container_funs(k)[0], _three(k)) for k in KINDS],
    *[single(f"grad_of_grads-{k.__name__}", _container_funs(k)[1], _three(k)) for k in KINDS],
    single("dict_iter", _dict_iter, _three(dict)),
    single("dict_iter-of_grad", _of_grad(_dict_iter), _three(dict)),
    single("dict_items_values_keys", _dict_items_values_keys, _three(dict)),
    single("dict_items_values_keys-of_grad", _of_grad(_dict_items_values_keys), _three(dict)),
    single("dict_get-present", _get, {"item_1": 3.0}, 2.0, argnums=(0, 1)),
    single("dict_get-other", _get, {"item_2": 4.0}, 2.0, argnums=(0, 1)),
    single("dict_get-empty", _get, {}, 2.0, argnums=(0, 1)),
    single("make_dict", lambda x: dict([("a", x)], b=x), 1.0),
    single("make_dict-from_dict", lambda x: dict({"a": x}), 1.0),
    single("make_list", lambda x: list((x, x)), 1.0),
    single("nested_list", lambda x: x[1:][0], [[1.0], 2.0, 1.5]),
    single("list_slice", lambda x: x[slice(None, -1, None)][0], [1.0, 2.0, 3.0]),
    single("list_slice2", lambda x: x[1:3][0], [1.0, 2.0, 3.0]),
    single("nested_higher_order", _inner_product_grad, 5.0),
    single("nested_higher_order-grad", grad(_inner_product_grad), 10.0),
    single("nested_higher_order-grad2", grad(grad(_inner_product_grad)), 10.0),
    # test_complex
    single("angle_real", np.angle, float(RS.random())),
    single("angle_real-grad", grad(np.angle), float(RS.random())),
    single("angle_complex", np.angle, complex(RS.random(), RS.random())),
    single("angle_complex-grad", grad(np.angle), complex(RS.random(), RS.random())),
    single("abs_real", np.abs, 1.1),
    single("abs_real-grad", grad(np.abs), 2.1),
    single("abs_complex", np.abs, 1.1 + 1.2j),
    single("abs_complex-grad", grad(np.abs), 1.1 + 1.3j),
    # test_logic
    single("falseyness-real", lambda x: np.real(x**2 if np.iscomplex(x) else np.sum(x)), 2.0),
    single("falseyness-complex", lambda x: np.real(x**2 if np.iscomplex(x) else np.sum(x)),
           2.0 + 1j),  # fmt: skip
    single("assert_allclose", lambda x: _asserting_sum(x), np.array([1.0, 2.0, 3.0])),
    # test_core and test_truediv: the binary operators of Python numbers
    *[single(f"core_{name}", f, 0.7, 1.8, argnums=(0, 1)) for name, f in (
        ("add", operator.add), ("sub", operator.sub), ("div", operator.truediv),
        ("mul", operator.mul), ("pow", operator.pow), ("mod", operator.mod))],
]  # fmt: skip


def _asserting_sum(x):
    assert np.allclose(x, (x * 3.0) / 3.0)  # autograd #43: logic on traced values
    return np.sum(x)


@pytest.mark.parametrize("case", CASES)
def test_container_and_logic(case):
    case.check()


@pytest.mark.parametrize("kind", [list, tuple])
def test_containers_are_plain_python(kind):
    def fun(x):
        assert isinstance(x, kind)
        return x[0]

    assert fun(kind([1.0, 2.0, 3.0])) == 1.0
    assert type(grad(fun)(kind([1.0, 2.0, 3.0]))) is kind


def test_isinstance_of_arguments():
    """autograd's test_builtins: what the function sees under `grad` is what it was given
    (containers stay containers; arrays are seen as traced arrays)."""

    def checker(ex, type_, truthval):
        assert isinstance(ex, type_) == truthval
        return 1.0

    for type_, positive, negative in [
        (list, [[]], [()]),
        ((tuple, list), [[], ()], [np.zeros(1)]),
    ]:
        for ex in positive:
            checker(ex, type_, True)
        for ex in negative:
            checker(ex, type_, False)
    g = grad(lambda x, c: 0.0 * np.sum(x) + checker(c, (tuple, list), True), argnums=0)
    np.testing.assert_array_equal(g(np.zeros(1), []), np.zeros(1))


def test_real_type():
    df = grad(lambda x: np.sum(np.real(x)))
    assert np.isrealobj(df(2.0))
    assert np.iscomplexobj(df(1.0j))


@pytest.mark.parametrize("cmp", [operator.eq, operator.ne, operator.le, operator.ge,
                                 operator.lt, operator.gt])  # fmt: skip
def test_comparison_has_no_derivative(cmp):
    with pytest.raises(TypeError, match="bool"):
        grad(cmp)(0.7, 1.8)
    with pytest.raises(TypeError, match="bool"):
        grad(cmp, argnums=1)(0.7, 1.8)
    # a float made of the comparison has derivative zero (autograd's result)
    assert grad(lambda x, y: cmp(x, y) + 0.0)(0.7, 1.8) == 0.0


def test_gradient_of_a_bool_result_is_refused():
    with pytest.raises(TypeError):
        grad(lambda x: np.allclose(x, (x * 3.0) / 3.0))(np.array([1.0, 2.0, 3.0]))


def test_primitive_without_rules_is_differentiated_through_its_body():
    twice = vmapx.extend.primitive(lambda x: 2.0 * x)
    assert grad(twice)(1.0) == 2.0
    assert vmapx.jvp(twice, (1.0,), (1.0,))[1] == 2.0


def test_primitive_without_rules_whose_body_numpy_cannot_see():
    opaque = vmapx.extend.primitive(lambda x: np.float64(math.exp(x)))
    with pytest.warns(DroppedDerivativeWarning, match="float"):
        grad(opaque)(1.0)
