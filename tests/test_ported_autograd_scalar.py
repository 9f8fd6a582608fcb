"""Ported from HIPS autograd's `tests/test_scalar_ops.py` and `tests/test_binary_ops.py`
(MIT license, https://github.com/HIPS/autograd): scalar functions and the binary operators
over every pair of scalar / vector / matrix / broadcast matrix, each checked as
`autograd_port.Case` describes.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import vmapx
from autograd_port import single

RS = np.random.default_rng(1)


def randn() -> float:
    return float(RS.standard_normal())


def rand() -> float:
    return float(RS.random())


def _scalar_cases() -> list:
    three = {
        "sin": np.sin, "exp": np.exp, "cos": np.cos, "tan": np.tan, "cosh": np.cosh,
        "sinh": np.sinh, "tanh": np.tanh, "arcsinh": np.arcsinh, "neg": np.negative,
    }  # fmt: skip
    cases = [single(n, lambda x, f=f: 3.0 * f(x), randn()) for n, f in three.items()]
    positive = {
        "log": np.log, "log2": np.log2, "log10": np.log10, "log1p": np.log1p,
        "expm1": np.expm1, "exp2": np.exp2,
    }  # fmt: skip
    cases += [single(n, lambda x, f=f: 3.0 * f(x), abs(randn())) for n, f in positive.items()]
    at = {"arccos": (np.arccos, 0.1), "arcsin": (np.arcsin, 0.1), "arctan": (np.arctan, 0.2),
          "arctanh": (np.arctanh, 0.2), "arccosh": (np.arccosh, randn() ** 2 + 1.2),
          "sqrt": (np.sqrt, 10.0 * rand())}  # fmt: skip
    cases += [single(n, lambda x, f=f: 3.0 * f(x), x) for n, (f, x) in at.items()]
    for name, f in [("abs", np.abs), ("absolute", np.absolute), ("sign", np.sign)]:
        cases += [single(f"{name}-{x}", lambda x, f=f: 3.0 * f(x), x) for x in (1.1, -1.1)]
    for name, f in [("abs", np.abs), ("absolute", np.absolute)]:
        cases.append(single(f"{name}-0", lambda x, f=f: 3.0 * f(x), 0.0, order=1, vmap=False))
    ten = {"rad2deg": np.rad2deg, "deg2rad": np.deg2rad, "radians": np.radians,
           "degrees": np.degrees, "sinc": np.sinc}  # fmt: skip
    cases += [single(n, lambda x, f=f: 3.0 * f(x), 10.0 * rand()) for n, f in ten.items()]
    cases += [single("reciprocal", np.reciprocal, rand()), single("negative", np.negative, rand())]
    y = randn() ** 2 + 1.0
    cases.append(single("power_arg0", lambda x: np.power(x, y), rand() ** 2 + 1.0))
    x = randn() ** 2
    cases.append(single("power_arg1", lambda y: np.power(x, y), rand() ** 2))
    cases.append(single("power_arg1_zero", lambda y: np.power(0.0, y), rand() ** 2))
    for name, f in [("mod", np.mod), ("divide", np.divide), ("multiply", np.multiply),
                    ("true_divide", np.true_divide)]:  # fmt: skip
        for k in (0, 1):
            cases.append(single(f"{name}_arg{k}", f, rand(), rand(), argnums=(k,)))
    return cases


@pytest.mark.parametrize("case", _scalar_cases())
def test_scalar_op(case):
    case.check()


def test_power_zero_exponent_at_zero():
    """autograd #116: `x ** 0.0` has derivative 0 at 0, to every order (not NaN)."""
    fun = lambda x: np.power(x, 0.0)  # noqa: E731
    assert vmapx.grad(fun)(0.0) == 0.0
    assert vmapx.grad(vmapx.grad(fun))(0.0) == 0.0
    xs = np.array([0.0, 1.0, 2.0])
    np.testing.assert_array_equal(vmapx.vmap(vmapx.grad(fun))(xs), np.zeros(3))


# -- test_binary_ops ----------------------------------------------------------------------

_ARGS = [2.0, RS.standard_normal(4), RS.standard_normal((3, 4)), RS.standard_normal((1, 4))]
PAIRS = list(itertools.product(range(4), range(4)))


def gap(x):
    return np.sqrt(np.square(x) + 0.5)


def _binary_cases() -> list:
    cases = []
    for i, j in PAIRS:
        a, b = _ARGS[i], _ARGS[j]
        both = (0, 1)
        cases += [
            single(f"mul-{i}{j}", lambda x, y: x * y, a, b, argnums=both),
            single(f"add-{i}{j}", lambda x, y: x + y, a, b, argnums=both),
            single(f"sub-{i}{j}", lambda x, y: x - y, a, b, argnums=both),
            single(f"div-{i}{j}", lambda x, y: x / y, gap(a), gap(b), argnums=both),
            single(f"pow-{i}{j}", lambda x, y: x**y, np.abs(a) + 1.1, b, argnums=both),
            single(f"arctan2-{i}{j}", np.arctan2, a, b, argnums=both),
            single(f"hypot-{i}{j}", np.hypot, a, b, argnums=both, modes=("rev",)),
        ]
        if i != j:  # the derivative is undefined where x == y
            cases.append(single(f"mod-{i}{j}", lambda x, y: x % y, gap(a), gap(b), argnums=both))
    return cases


@pytest.mark.parametrize("case", _binary_cases())
def test_binary_op(case):
    case.check()


COMPARISONS = [
    lambda x, y: np.sum(x < y) + 0.0,
    lambda x, y: np.sum(x <= y) + 0.0,
    lambda x, y: np.sum(x > y) + 0.0,
    lambda x, y: np.sum(x >= y) + 0.0,
    lambda x, y: np.sum(x == y) + 0.0,
    lambda x, y: np.sum(x != y) + 0.0,
]


@pytest.mark.parametrize("pair", PAIRS, ids=[f"{i}{j}" for i, j in PAIRS])
def test_comparison_grads_are_zero(pair):
    a, b = (_ARGS[k] for k in pair)
    zeros = (a + b) * 0
    for fun in COMPARISONS:
        for argnums in (0, 1):
            got = vmapx.grad(fun, argnums=argnums)(a, b)
            np.testing.assert_array_equal(got, np.zeros_like(_ARGS[pair[argnums]]))
        np.testing.assert_array_equal(vmapx.grad(lambda x, f=fun: f(x, x))(a + b), zeros)


@pytest.mark.parametrize("pair", PAIRS, ids=[f"{i}{j}" for i, j in PAIRS])
def test_comparison_values(pair):
    a, b = (_ARGS[k] for k in pair)
    for fun in COMPARISONS:
        value, _ = vmapx.value_and_grad(fun, argnums=(0, 1))(a, b)
        assert value == fun(a, b)
