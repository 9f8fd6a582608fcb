"""Ported from HIPS autograd's `tests/test_systematic.py` and `tests/numpy_utils.py`
(MIT license, https://github.com/HIPS/autograd): every op of its table, each argument
and keyword combination checked as `autograd_port.Case` describes (derivatives against
finite differences, vmap against the loop, vmap of grad against the loop of grad).
"""

from __future__ import annotations

import operator as op

import numpy as np
import pytest

from autograd_port import C, R, combo

RAND = np.random.default_rng(2)


def rand(*shape: int) -> np.ndarray:
    return RAND.random(shape)


def transform(lims: tuple, x: np.ndarray | float) -> np.ndarray | float:
    return x * (lims[1] - lims[0]) + lims[0]


def stat(name: str, fun, test_complex: bool = True) -> list:
    """autograd's `stat_check`: reductions over scalars, vectors and matrices."""
    x, a, b, c, d = 3.5, R(), R(3), R(2, 3), R(1, 3)
    cases = combo(f"{name}-s", fun, [0], [x, a])
    cases += combo(f"{name}-v", fun, [0], [b, c, d], axis=[None, 0], keepdims=[True, False])
    cases += combo(f"{name}-m", fun, [0], [c, d], axis=[None, 0, 1], keepdims=[True, False])
    if test_complex:
        cs, e = R() + 0.1j * R(), R(2, 3) + 0.1j * R(2, 3)
        cases += combo(f"{name}-cs", fun, [0], [x, cs, a])
        cases += combo(f"{name}-cv", fun, [0], [b, c, d, e], axis=[None, 0],
                       keepdims=[True, False])  # fmt: skip
    return cases


def unary(name: str, fun, lims=(-2, 2), test_complex: bool = True, **opts) -> list:
    """autograd's `unary_ufunc_check`: inputs in `lims`, complex ones near the real line."""
    t = lambda x: transform(lims, x)  # noqa: E731
    cases = combo(name, fun, [0], [t(0.4), t(rand(2)), t(rand(3, 2)), t(rand(1, 2))], **opts)
    if test_complex:
        comp = t(0.4) + 0.1j * t(0.3)
        matc = t(rand(3, 2)) + 0.1j * rand(3, 2)
        cases += combo(f"{name}-c", fun, [0], [comp, matc], **opts)
    return cases


def binary(name, fun, lims_a=(-2, 2), lims_b=(-2, 2), test_complex=True, same=True) -> list:
    """autograd's `binary_ufunc_check` (`same=False`: `..._no_same_args`, whose two
    operands are never the same array)."""
    ta = lambda x: transform(lims_a, x)  # noqa: E731
    tb = lambda x: transform(lims_b, x)  # noqa: E731
    if same:
        s, v, m, m2 = 0.6, rand(2), rand(3, 2), rand(1, 2)
        a, b = [s, v, m, m2], [s, v, m, m2]
    else:
        a = [0.6, rand(2), rand(3, 2), rand(1, 2)]
        b = [0.7, rand(2), rand(3, 2), rand(1, 2)]
    cases = combo(name, fun, [0, 1], [ta(x) for x in a], [tb(x) for x in b])
    if test_complex:
        ca = [a[0], 0.6 + 0.3j, a[1], rand(3, 2) + 0.1j * rand(3, 2), a[3]]
        cb = [b[0], 0.6 + 0.3j if same else 0.1 + 0.2j, b[1],
              rand(3, 2) + 0.1j * rand(3, 2), b[3]]  # fmt: skip
        cases += combo(f"{name}-c", fun, [0, 1], [ta(x) for x in ca], [tb(x) for x in cb])
    return cases


STATS = [
    *stat("max", np.max), *stat("mean", np.mean), *stat("min", np.min),
    *stat("sum", np.sum), *stat("prod", np.prod), *stat("var", np.var), *stat("std", np.std),
]  # fmt: skip

UNARY = [
    *unary("sin", np.sin), *unary("abs", np.abs, lims=(0.1, 4.0)),
    *unary("absolute", np.absolute, lims=(0.1, 4.0)), *unary("arccosh", np.arccosh, (1.1, 4.0)),
    *unary("arcsinh", np.arcsinh, (-0.9, 0.9)), *unary("arctanh", np.arctanh, (-0.9, 0.9)),
    *unary("ceil", np.ceil, (-1.5, 1.5), test_complex=False), *unary("cos", np.cos),
    *unary("cosh", np.cosh), *unary("deg2rad", np.deg2rad, test_complex=False),
    *unary("degrees", lambda x: np.degrees(x) / 50.0, test_complex=False),
    *unary("exp", np.exp), *unary("exp2", np.exp2), *unary("expm1", np.expm1),
    *unary("fabs", np.fabs, test_complex=False),
    *unary("floor", np.floor, (-1.5, 1.5), test_complex=False),
    *unary("log", np.log, (0.2, 2.0)), *unary("log10", np.log10, (0.2, 2.0)),
    *unary("log1p", np.log1p, (0.2, 2.0)), *unary("log2", np.log2, (0.2, 2.0)),
    *unary("rad2deg", lambda x: np.rad2deg(x) / 50.0, test_complex=False),
    *unary("radians", np.radians, test_complex=False),
    *unary("sign", np.sign, test_complex=False), *unary("sinh", np.sinh),
    *unary("sqrt", np.sqrt, (1.0, 3.0)), *unary("square", np.square, test_complex=False),
    *unary("tan", np.tan, (-1.1, 1.1)), *unary("tanh", np.tanh), *unary("real", np.real),
    *unary("real_if_close", np.real_if_close), *unary("imag", np.imag),
    *unary("conj", np.conj), *unary("conjugate", np.conjugate), *unary("angle", np.angle),
]  # fmt: skip

BINARY = [
    *binary("add", np.add),
    *binary("logaddexp", np.logaddexp, test_complex=False),
    *binary("logaddexp2", np.logaddexp2, test_complex=False),
    *binary("remainder", np.remainder, (-0.9, 0.9), (0.7, 1.9), test_complex=False, same=False),
    *binary("true_divide", np.true_divide, lims_b=(0.8, 1.2), test_complex=False),
    *binary("mod", np.mod, lims_b=(0.8, 2.1), test_complex=False, same=False),
    *binary("true_divide_neg", np.true_divide, lims_b=(-0.3, -2.0), test_complex=False),
    *binary("mod_neg", np.mod, lims_b=(-0.3, -2.0), test_complex=False, same=False),
    *binary("op_mul", op.mul), *binary("op_add", op.add), *binary("op_sub", op.sub),
    *binary("op_mod", op.mod, lims_b=(0.3, 2.0), test_complex=False, same=False),
    *binary("op_mod_neg", op.mod, lims_b=(-0.3, -2.0), test_complex=False, same=False),
]  # fmt: skip


# -- shapes, contractions, joins and splits ----------------------------------------------

TRANSPOSE_AXES = [None, [0, 1, 2], [0, 2, 1], [2, 0, 1], [2, 1, 0], [1, 0, 2], [1, 2, 0]]

SHAPES = [
    *combo("transpose", np.transpose, [0], [R(2, 3, 4)], axes=TRANSPOSE_AXES),
    *combo("moveaxis", np.moveaxis, [0], [R(2, 3, 4)], source=[0, 1, 2], destination=[0, 1, 2]),
    *combo("repeat", np.repeat, [0], [R(2, 3, 4), R(3, 1)], repeats=[0, 1, 2], axis=[None, 0, 1]),
    *combo("diff", np.diff, [0], [R(5, 5), R(5, 5, 5)], n=[1, 2], axis=[0, 1]),
    *combo("diff-1", np.diff, [0], [R(1), R(1, 1)], axis=[0]),
    *combo("diff-2", np.diff, [0], [R(1, 1), R(3, 1)], axis=[1]),
    *combo("gradient", np.gradient, [0], [R(5, 5), R(5, 5, 5)], axis=[None, 0, 1, -1]),
    *combo("gradient-2", np.gradient, [0], [R(5, 5, 5)], axis=[(0, 1), (0, -1)]),
    *combo("tile", np.tile, [0], [R(2, 1, 3, 1)], reps=[(1, 4, 1, 2)]),
    *combo("tile-2", np.tile, [0], [R(1, 2)], reps=[(1, 2), (2, 3), (3, 2, 1)]),
    *combo("tile-3", np.tile, [0], [R(1)], reps=[(2,), 2]),
    *combo("sort", np.sort, [0], [R(1), R(7)]),
    *combo("partition", np.partition, [0], [R(7), R(14)], kth=[0, 3, 6]),
    *combo("atleast_1d", np.atleast_1d, [0], [1.2, R(1), R(7), R(1, 4), R(2, 4), R(2, 4, 5)]),
    *combo("atleast_2d", np.atleast_2d, [0], [1.2, R(1), R(7), R(1, 4), R(2, 4), R(2, 4, 5)]),
    *combo("atleast_3d", np.atleast_3d, [0],
           [1.2, R(1), R(7), R(1, 4), R(2, 4), R(2, 4, 5), R(2, 4, 3, 5)]),
    *combo("trace", np.trace, [0], [R(5, 5), R(4, 5), R(5, 4), R(3, 4, 5)], offset=[-1, 0, 1]),
    *combo("diag", np.diag, [0], [R(5, 5)], k=[-1, 0, 1]),
    *combo("diag_flat", np.diag, [0], [R(5)], k=[-1, 0, 1]),
    *combo("tril", np.tril, [0], [R(5, 5)], k=[-1, 0, 1]),
    *combo("triu", np.triu, [0], [R(5, 5)], k=[-1, 0, 1]),
    *combo("tril_3d", np.tril, [0], [R(5, 5, 4)], k=[-1, 0, 1]),
    *combo("triu_3d", np.triu, [0], [R(5, 5, 4)], k=[-1, 0, 1]),
    *combo("swapaxes", np.swapaxes, [0], [R(3, 4, 5)], axis1=[0, 1, 2], axis2=[0, 1, 2]),
    *combo("rollaxis", np.rollaxis, [0], [R(2, 3, 4)], axis=[0, 1, 2], start=[0, 1, 2]),
    *combo("cross", np.cross, [0, 1], [R(3, 3)], [R(3, 3)], axisa=[-1, 0, 1],
           axisb=[-1, 0, 1], axisc=[-1, 0, 1], axis=[None, -1, 0, 1]),
    *combo("pad", np.pad, [0], [R(2, 2)],
           [0, 3, (3,), (3, 2), ((3, 2),), ((1, 2), (3, 4)), ((0, 0), (0, 0))], ["constant"]),
    *combo("select", np.select, [1], [[R(3, 4, 5) > 0, R(3, 4, 5) > 0, R(3, 4, 5) > 0]],
           [[R(3, 4, 5), R(3, 4, 5), R(3, 4, 5)]], default=[0.0, 1.1]),
]  # fmt: skip

# autograd: "custom tests because gradient is undefined when arguments are identical"
MAXIMA = [
    case
    for name, fun in [("maximum", np.maximum), ("fmax", np.fmax), ("minimum", np.minimum),
                      ("fmin", np.fmin)]
    for case in combo(name, fun, [0, 1], [R(1), R(1, 4), R(3, 4)], [R(1), R(1, 4), R(3, 4)])
]  # fmt: skip

CONTRACTIONS = [
    *combo("kron", np.kron, [0, 1], [R(5, 5), R(4, 4), R(5), R(5, 1), R(1, 5), R(), C(5, 5)],
           [R(3, 3), R(2, 2), R(3), R(1, 3), R(3, 1), R(), C(3, 3)]),
    *combo("inner", np.inner, [0, 1], [1.5, R(3), R(2, 3)], [0.3, R(3), R(4, 3)]),
    *combo("dot", np.dot, [0, 1], [1.5, R(3), R(2, 3), R(2, 2, 3), C(3), C(2, 3)],
           [0.3, R(3), R(3, 4), R(2, 3, 4), C(3)], order=3),
    *combo("outer", np.outer, [0, 1], [R(3), C(3)], [R(3), C(3)], order=3),
    *combo("matmul", np.matmul, [0, 1], [R(3), R(2, 3), R(2, 2, 3), C(3), C(2, 3)],
           [R(3), R(3, 4), R(2, 3, 4), C(3), C(3, 4)]),
    *combo("matmul_broadcast", np.matmul, [0, 1], [R(1, 2, 2)], [R(3, 2, 1)]),
    *combo("tensordot_1", np.tensordot, [0, 1], [R(1, 3), R(2, 3, 2), C(1, 3)],
           [R(3), R(3, 1), R(3, 4, 2), C(3)], axes=[[(1,), (0,)]], order=3),
    *combo("tensordot_2", np.tensordot, [0, 1], [R(3), R(3, 1), R(3, 4, 2)],
           [R(1, 3), R(2, 3, 2)], axes=[[(0,), (1,)]], order=3),
    *combo("tensordot_3", np.tensordot, [0, 1], [R(2, 3), R(2, 3, 4)],
           [R(1, 2, 3), R(2, 2, 3, 4)], axes=[[(0, 1), (1, 2)], [(1, 0), (2, 1)]], order=3),
    *combo("tensordot_4", np.tensordot, [0, 1], [R(2, 2), R(4, 2, 2)], [R(2, 2), R(2, 2, 4)],
           axes=[1, 2], order=3),
    *combo("tensordot_5", np.tensordot, [0, 1], [R(4)], [R()], axes=[0], order=3),
    *combo("tensordot_6", np.tensordot, [0, 1], [R(2, 6)], [R(6, 3)], axes=[[[-1], [0]]],
           order=3),
    *combo("tensordot_7", np.tensordot, [0, 1], [R(2, 6)], [R(6, 3)], axes=[[-1, 0]], order=3),
    *combo("tensordot_8", np.tensordot, [0, 1], [R(2)], [R(2, 2)], axes=[[0, 1]], order=3),
]  # fmt: skip

EINSUM = [
    *combo("einsum_transpose", np.einsum, [1], ["ij->ji"], [R(1, 1), R(4, 4), R(3, 4)]),
    *combo("einsum_matmult", np.einsum, [1, 2], ["ij,jk->ik"], [R(2, 3), C(2, 3)],
           [R(3, 4), C(3, 4)]),
    *combo("einsum_matmult_broadcast", np.einsum, [1, 2], ["...ij,...jk->...ik"],
           [R(2, 3), R(2, 2, 3)], [R(3, 4), R(2, 3, 4)]),
    *combo("einsum_matmult_broadcast_leadzero", np.einsum, [1, 2], ["...ij,...jk->...ik"],
           [np.zeros((0, 2, 3))], [np.zeros((0, 3, 4))]),
    *combo("einsum_covsum", np.einsum, [1, 2], ["ijk,lji->lki"], [R(3, 4, 4)], [R(4, 4, 3)]),
    *combo("einsum_ellipses", np.einsum, [1, 2], ["...jk,...lj->...lk", "...,...->..."],
           [R(4, 4), R(3, 4, 4)], [R(4, 4), R(3, 4, 4)]),
    *combo("einsum_ellipses_tail", np.einsum, [1, 2], ["jk...,lj...->lk..."],
           [R(3, 2), R(3, 2, 4)], [R(2, 3), R(2, 3, 4)]),
    *combo("einsum_ellipses_center", np.einsum, [1, 2], ["j...k,lj...->lk..."],
           [R(2, 2), R(2, 2, 2)], [R(2, 2), R(2, 2, 2)]),
    *combo("einsum_three_args", np.einsum, [1, 2], ["ijk,lji,lli->lki"], [R(3, 4, 4)],
           [R(4, 4, 3)], [R(4, 4, 3)]),
    *combo("einsum2_transpose", np.einsum, [0], [R(1, 1), R(4, 4), R(3, 4)], [(0, 1)],
           [(1, 0)]),
    *combo("einsum2_matmult", np.einsum, [0, 2], [R(2, 3)], [(0, 1)], [R(3, 4)], [(1, 2)],
           [(0, 2)]),
    *combo("einsum2_matmult_broadcast", np.einsum, [0, 2], [R(2, 3), R(2, 2, 3)],
           [(Ellipsis, 0, 1)], [R(3, 4), R(2, 3, 4)], [(Ellipsis, 1, 2)], [(Ellipsis, 0, 2)]),
    *combo("einsum2_covsum", np.einsum, [0, 2], [R(3, 4, 4)], [(0, 1, 2)], [R(4, 4, 3)],
           [(3, 1, 0)], [(3, 2, 0)]),
    *combo("einsum2_three_args", np.einsum, [0, 2], [R(3, 4, 4)], [(0, 1, 2)], [R(4, 4, 3)],
           [(3, 1, 0)], [R(4, 4, 3)], [(3, 3, 0)], [(3, 2, 0)]),
    *combo("einsum_naked_sum", np.einsum, [1, 2], ["k,nk->"], [R(5)], [R(10, 5)]),
    *combo("einsum_naked_sum2", np.einsum, [1], ["abcd->bd"], [R(3, 2, 3, 2)]),
    *combo("einsum_naked_sum_ellipsis", np.einsum, [1, 2], ["...k,...nk->..."], [R(3, 5)],
           [R(3, 10, 5)]),
    *combo("einsum_no_output_indices", np.einsum, [1, 2], ["ij,k"], [R(3, 4)], [R(3)]),
]  # fmt: skip

JOINS = [
    *combo("vsplit_2d", np.vsplit, [0], [R(4, 8)], [4, [1, 2]]),
    *combo("vsplit_3d", np.vsplit, [0], [R(4, 4, 4)], [2, [1, 2]]),
    *combo("hsplit_2d", np.hsplit, [0], [R(4, 8)], [4, [1, 2]]),
    *combo("hsplit_3d", np.hsplit, [0], [R(4, 4, 4)], [2, [1, 2]]),
    *combo("dsplit_3d", np.dsplit, [0], [R(4, 4, 4)], [2, [1, 2]]),
    *combo("split_1d", np.split, [0], [R(1), R(7)], [1], axis=[0]),
    *combo("split_2d", np.split, [0], [R(4, 8)], [4, [1, 2]], axis=[0, 1]),
    *combo("split_3d", np.split, [0], [R(4, 4, 4)], [2, [1, 2]], axis=[0, 1, 2]),
    *combo("array_split_1d", np.array_split, [0], [R(1), R(7)], [1, 3], axis=[0]),
    *combo("array_split_2d", np.array_split, [0], [R(7, 7)], [4, [3, 5]], axis=[0, 1]),
    *combo("array_split_3d", np.array_split, [0], [R(7, 7, 7)], [4, [3, 5]], axis=[0, 1, 2]),
    *combo("concatenate_list", np.concatenate, [0], [(R(1), R(3))], axis=[0]),
    *combo("concatenate_tuple", np.concatenate, [0], [[R(1), R(3)]], axis=[0]),
    *combo("concatenate_2d", np.concatenate, [0], [(R(2, 2), R(2, 2))], axis=[0, 1]),
    *combo("concatenate_3d", np.concatenate, [0], [(R(2, 2, 2), R(2, 2, 2))], axis=[0, 1, 2]),
    *combo("vstack_1d", np.vstack, [0], [R(2), (R(2), R(2))]),
    *combo("vstack_2d", np.vstack, [0], [R(2, 3), (R(2, 4), R(1, 4))]),
    *combo("vstack_3d", np.vstack, [0], [R(2, 3, 4), (R(2, 3, 4), R(5, 3, 4))]),
    *combo("hstack_1d", np.hstack, [0], [R(2), (R(2), R(2))]),
    *combo("hstack_2d", np.hstack, [0], [R(3, 2), (R(3, 4), R(3, 5))]),
    *combo("hstack_3d", np.hstack, [0], [R(2, 3, 4), (R(2, 1, 4), R(2, 5, 4))]),
    *combo("stack_1d", np.stack, [0], [(R(2),), (R(2), R(2))], axis=[0, 1]),
    *combo("row_stack_1d", np.vstack, [0], [R(2), (R(2), R(2))]),
    *combo("row_stack_2d", np.vstack, [0], [R(2, 3), (R(2, 4), R(1, 4))]),
    *combo("column_stack_1d", np.column_stack, [0], [R(2), (R(2), R(2))]),
    *combo("column_stack_2d", np.column_stack, [0], [R(2, 2), (R(2, 2), R(2, 2))]),
]  # fmt: skip


@pytest.mark.parametrize(
    "case", [*STATS, *UNARY, *BINARY, *SHAPES, *MAXIMA, *CONTRACTIONS, *EINSUM, *JOINS]
)
def test_systematic(case):
    case.check()
