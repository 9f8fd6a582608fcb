"""Ported from HIPS autograd's `tests/test_tests.py` (MIT license,
https://github.com/HIPS/autograd): the checks the ported suite relies on must fail when a
rule is wrong, at first and at second order; and so must the vmap-against-loop check of
`autograd_port` when a batch rule is wrong.
"""

from __future__ import annotations

import numpy as np
import pytest

import vmapx
from autograd_port import Case
from vmapx import extend


def _primitive_with_vjp(scale_of_g):
    foo = extend.primitive(lambda x: x * 2.0, name="foo")
    extend.register_vjp(foo, lambda x: (foo(x), None), lambda _, g: (scale_of_g(g),))
    return foo


def test_first_order_vjp_error_is_caught():
    foo = _primitive_with_vjp(lambda g: g * 2.001)
    with pytest.raises(AssertionError, match="VJP"):
        vmapx.check_grads(foo, (1.0,), modes=("rev",))


def test_second_order_vjp_error_is_caught():
    bar = extend.primitive(lambda x: x * 1.0, name="bar")
    extend.register_vjp(bar, lambda x: (bar(x), None), lambda _, g: (g * 1.001,))
    foo = _primitive_with_vjp(lambda g: bar(g) * 2)
    vmapx.check_grads(foo, (1.0,), modes=("rev",), order=1)
    with pytest.raises(AssertionError, match=r"VJP \(order 1\)"):
        vmapx.check_grads(foo, (1.0,), modes=("rev",), order=2)


def test_wrong_batch_rule_is_caught():
    double = extend.primitive(lambda x: x * 2.0, name="double")
    extend.register_batch_rule(double, lambda size, batched, x: (x[::-1] * 2.0, True))
    extend.register_jvp(double, lambda p, t: (double(p[0]), t[0] * 2.0))
    with pytest.raises(AssertionError):
        Case(double, (np.array([0.5, 1.5]),)).check()
