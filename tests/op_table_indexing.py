"""Op-table rows for gather/scatter, sorting and set functions (see `op_table.py`).

Functions whose output size depends on the data (`nonzero`, `unique`, `union1d`, ...)
get inputs whose results have the same size in every example and in an example of
ones (what a zero-size batch is given); `test_indexing_*.py` test them on
data where examples disagree.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from np_compat import np2
from op_spec import Op


def _ops(*rows: tuple) -> list[Op]:
    """Rows written as tuples `(name, fn, shapes[, options])`."""
    return [Op(name, fn, shapes, **(opts[0] if opts else {})) for name, fn, shapes, *opts in rows]


def _make(*parts: Callable) -> Callable:
    """An input maker from one maker per argument: `part(rng) -> array`."""
    return lambda rng: [p(rng) for p in parts]


def _normal(shape: tuple) -> Callable:
    return lambda rng: rng.normal(size=shape)


def _ints(lo: int, hi: int, shape: tuple) -> Callable:
    return lambda rng: rng.integers(lo, hi + 1, size=shape)


def _bools(shape: tuple) -> Callable:
    return lambda rng: rng.random(shape) < 0.5


def _sorted(shape: tuple, decreasing: bool = False) -> Callable:
    def make(rng: np.random.Generator) -> np.ndarray:
        x = np.sort(rng.integers(-3, 4, size=shape).astype(float))  # ties included
        return x[::-1] if decreasing else x

    return make


def _nonzero(shape: tuple) -> Callable:
    """No zeros: the nonzero count is the size, as for an example of ones."""
    return lambda rng: rng.uniform(0.5, 2.0, shape) * rng.choice([-1, 1], shape)


def _constant(shape: tuple) -> Callable:
    """One nonzero value repeated: one distinct value per example, as in ones."""
    return lambda rng: np.full(shape, rng.integers(1, 5) * rng.choice([-1.0, 1.0]))


def _in_place(func: Callable) -> Callable:
    """`func(x, ...)` writes into `x`: the row writes into a copy and returns it."""

    def f(x: Any, *rest: Any) -> Any:
        x = x.copy()
        func(x, *rest)
        return x

    return f


def _partition_summary(func: Callable, kth: int) -> Callable:
    """The arrangement `partition` leaves is NumPy's choice: compare what it guarantees
    (the kth value, and each side's values as a set)."""

    def f(x: Any) -> Any:
        p = func(x)
        p = np.take_along_axis(x, p, axis=-1) if p.dtype.kind == "i" else p
        return p[..., kth], np.sort(p[..., :kth], axis=-1), np.sort(p[..., kth + 1 :], axis=-1)

    return f


_COND = np.array([True, False, True, True])
_MASK = np.array([[True, False, True, False], [False, False, True, True], [True] * 4])

_GATHER = _ops(
    ("take.flat", lambda x, i: np.take(x, i), ((3, 4), (2,)),
     {"covers": (np.take,), "make": _make(_normal((3, 4)), _ints(-12, 11, (2,))),
      "needs_batched": (0,)}),
    ("take.axis", lambda x, i: np.take(x, i, axis=1), ((3, 4), (2, 2)),
     {"make": _make(_normal((3, 4)), _ints(-4, 3, (2, 2))), "needs_batched": (0,)}),
    ("take.wrap", lambda x, i: np.take(x, i, axis=0, mode="wrap"), ((3, 4), (3,)),
     {"make": _make(_normal((3, 4)), _ints(-7, 7, (3,))), "needs_batched": (0,)}),
    ("take.clip", lambda x, i: np.take(x, i, axis=-1, mode="clip"), ((3, 4), ()),
     {"make": _make(_normal((3, 4)), _ints(-7, 7, ())), "needs_batched": (0,)}),
    ("take.method", lambda x: x.take([2, -1], axis=1), ((3, 4),)),
    ("take_along_axis", lambda x, i: np.take_along_axis(x, i, axis=1), ((3, 4), (3, 2)),
     {"covers": (np.take_along_axis,), "make": _make(_normal((3, 4)), _ints(-4, 3, (3, 2)))}),
    ("take_along_axis.none", lambda x, i: np.take_along_axis(x, i, axis=None), ((3, 4), (5,)),
     {"make": _make(_normal((3, 4)), _ints(0, 11, (5,)))}),
    ("take_along_axis.broadcast", lambda x, i: np.take_along_axis(x, i, axis=0),
     ((3, 4), (2, 1)), {"make": _make(_normal((3, 4)), _ints(0, 2, (2, 1)))}),
    ("choose", lambda a, c: np.choose(a, c), ((4,), (3, 4)),
     {"covers": (np.choose,), "make": _make(_ints(0, 2, (4,)), _normal((3, 4)))}),
    ("choose.list", lambda a, c0, c1: np.choose(a, [c0, c1, 7.0]), ((2, 3), (3,), (2, 3)),
     {"make": _make(_ints(0, 2, (2, 3)), _normal((3,)), _normal((2, 3)))}),
    ("choose.wrap", lambda a, c: np.choose(a, c, mode="wrap"), ((4,), (2, 4)),
     {"make": _make(_ints(-3, 5, (4,)), _normal((2, 4)))}),
    # `ndarray.choose` of a plain index array converts the choices without dispatching:
    # a traced `c` cannot pass through it (`np.choose(a, c)` differentiates)
    ("choose.method", lambda a, c: a.choose(c, mode="clip"), ((2, 3), (3,)),
     {"make": _make(_ints(-1, 3, (2, 3)), _normal((3,))), "needs_batched": (0,),
      "diff": False}),
    ("select", lambda x: np.select([x > 0.5, x < -0.5], [x, 2 * x], default=-1.0), ((4,),),
     {"covers": (np.select,)}),
    # NumPy does not dispatch on `default`: with only it mapped, the loop runs
    ("select.batched_default", lambda x, y, d: np.select([x > 0, y > 0], [x, y], d),
     ((2, 3), (3,), ()), {"needs_batched": (0,)}),
    ("compress", lambda x: np.compress(_COND, x, axis=1), ((3, 4),), {"covers": (np.compress,)}),
    ("compress.flat", lambda x: np.compress(_COND, x), ((2, 3),)),
    ("compress.method", lambda x: x.compress(_COND[:3], axis=0), ((3, 2),)),
    ("extract", lambda x: np.extract(_MASK, x), ((3, 4),), {"covers": (np.extract,)}),
    ("put", _in_place(np.put), ((3, 4), (3,), (3,)),
     {"covers": (np.put,), "make": _make(_normal((3, 4)), _ints(-12, 11, (3,)), _normal((3,))),
      "needs_batched": (0,)}),
    ("put.repeat_wrap", _in_place(lambda x, i, v: np.put(x, i, v, mode="wrap")),
     ((4,), (2, 3), (2,)),
     {"make": _make(_normal((4,)), _ints(-9, 9, (2, 3)), _normal((2,))),
      "needs_batched": (0,)}),
    ("put.clip_scalar", _in_place(lambda x, i, v: np.put(x, i, v, mode="clip")),
     ((2, 3), (), ()),
     {"make": _make(_normal((2, 3)), _ints(-9, 9, ()), _normal(())), "needs_batched": (0,)}),
    ("put_along_axis", _in_place(lambda x, i, v: np.put_along_axis(x, i, v, axis=1)),
     ((3, 4), (3, 2), (3, 2)),
     {"covers": (np.put_along_axis,),
      "make": _make(_normal((3, 4)), _ints(0, 3, (3, 2)), _normal((3, 2))),
      "needs_batched": (0,)}),
    ("put_along_axis.scalar", _in_place(lambda x, i, v: np.put_along_axis(x, i, v, axis=0)),
     ((3, 4), (1, 4), ()),
     {"make": _make(_normal((3, 4)), _ints(-3, 2, (1, 4)), _normal(())),
      "needs_batched": (0,)}),
    ("put_along_axis.none", _in_place(lambda x, i, v: np.put_along_axis(x, i, v, None)),
     ((2, 3), (2,), (2,)),
     {"make": _make(_normal((2, 3)), _ints(0, 5, (2,)), _normal((2,))), "needs_batched": (0,)}),
    ("place", _in_place(np.place), ((2, 3), (2, 3), (2,)),
     {"covers": (np.place,), "make": _make(_normal((2, 3)), _bools((2, 3)), _normal((2,))),
      "needs_batched": (0,)}),
    ("putmask", _in_place(np.putmask), ((2, 3), (2, 3), (4,)),
     {"covers": (np.putmask,), "make": _make(_normal((2, 3)), _bools((2, 3)), _normal((4,))),
      "needs_batched": (0,)}),
    ("putmask.int_target", _in_place(np.putmask), ((5,), (5,), (2,)),
     {"dtypes": ("int64", "bool", "int8"), "domain": (-9, 9), "diff": False,
      "needs_batched": (0,)}),
)  # fmt: skip

_INDEX_HELPERS = _ops(
    ("nonzero", np.nonzero, ((3, 4),),
     {"covers": (np.nonzero,), "make": _make(_nonzero((3, 4))), "diff": False}),
    ("nonzero.method", lambda x: x.nonzero(), ((5,),),
     {"make": _make(_nonzero((5,))), "diff": False}),
    ("where", np.where, ((3,), (2, 3), ()),
     {"covers": (np.where,), "dtypes": ("bool", "float64", "float64")}),
    ("where.one_argument", lambda x: np.where(x), ((2, 3),),
     {"make": _make(_nonzero((2, 3))), "diff": False}),
    ("argwhere", np.argwhere, ((2, 3),),
     {"covers": (np.argwhere,), "make": _make(_nonzero((2, 3))), "diff": False}),
    ("argwhere.0d", np.argwhere, ((),), {"make": _make(_nonzero(())), "diff": False}),
    ("flatnonzero", np.flatnonzero, ((2, 3),),
     {"covers": (np.flatnonzero,), "make": _make(_nonzero((2, 3))), "diff": False}),
    ("unravel_index", lambda i: np.unravel_index(i, (3, 4)), ((5,),),
     {"covers": (np.unravel_index,), "make": _make(_ints(0, 11, (5,))), "diff": False}),
    ("unravel_index.fortran", lambda i: np.unravel_index(i, (2, 3, 2), order="F"), ((),),
     {"make": _make(_ints(0, 11, ())), "diff": False}),
    ("ravel_multi_index", lambda i, j: np.ravel_multi_index((i, j), (3, 4)), ((5,), ()),
     {"covers": (np.ravel_multi_index,), "make": _make(_ints(0, 2, (5,)), _ints(0, 3, ())),
      "diff": False}),
    ("ravel_multi_index.array_wrap",
     lambda m: np.ravel_multi_index(m, (3, 4), mode="wrap", order="F"), ((2, 3),),
     {"make": _make(_ints(-5, 9, (2, 3))), "diff": False}),
    ("diag_indices_from", lambda x: x[np.diag_indices_from(x)], ((3, 3),),
     {"covers": (np.diag_indices_from,)}),
    ("tril_indices_from", lambda x: x[np.tril_indices_from(x, -1)], ((3, 4),),
     {"covers": (np.tril_indices_from,)}),
    ("triu_indices_from", lambda x: x[np.triu_indices_from(x, k=1)], ((3, 3),),
     {"covers": (np.triu_indices_from,)}),
    ("ix_", np.ix_, ((2,), (3,)),
     {"covers": (np.ix_,), "make": _make(_ints(0, 2, (2,)), _ints(0, 3, (3,))), "diff": False}),
    ("ix_.gather", lambda x, i, j: x[np.ix_(i, j)], ((3, 4), (2,), (3,)),
     {"make": _make(_normal((3, 4)), _ints(0, 2, (2,)), _ints(-4, 3, (3,))),
      "needs_batched": (0,)}),
    ("ix_.bool", lambda m, j: np.ix_(m, j), ((4,), (2,)),
     {"make": _make(lambda rng: np.ones(4, bool), _ints(0, 3, (2,))), "diff": False}),
    ("bincount", lambda x: np.bincount(x, minlength=5), ((6,),),
     {"covers": (np.bincount,), "dtypes": ("int64",), "domain": (0, 4), "diff": False}),
    ("bincount.weights", lambda x, w: np.bincount(x, w, minlength=5), ((6,), (6,)),
     {"make": _make(_ints(0, 4, (6,)), _normal((6,)))}),
    ("trim_zeros", np.trim_zeros, ((5,),),
     {"covers": (np.trim_zeros,), "make": _make(_nonzero((5,)))}),
    ("trim_zeros.axis", lambda x: np.trim_zeros(x, "b", axis=1), ((2, 3),),
     {"make": _make(_nonzero((2, 3))), "numpy2": "trim_zeros(axis=)"}),
)  # fmt: skip

_SORTING = _ops(
    ("sort", np.sort, ((3, 4),), {"covers": (np.sort,)}),
    ("sort.axis0_stable", lambda x: np.sort(x, axis=0, kind="stable"), ((3, 4),),
     {"dtypes": ("int64",), "diff": False}),
    ("sort.none", lambda x: np.sort(x, axis=None), ((2, 3),)),
    ("sort.method_in_place", _in_place(lambda x: x.sort(axis=0)), ((3, 2),),
     {"needs_batched": (0,)}),
    ("argsort", lambda x: np.argsort(x, kind="stable"), ((3, 4),),
     {"covers": (np.argsort,), "dtypes": ("int64",), "diff": False}),
    ("argsort.axis0", lambda x: np.argsort(x, axis=0, stable=True), ((3, 4),),
     {"dtypes": ("int64",), "diff": False, "numpy2": "argsort(stable=)"}),
    ("argsort.none_method", lambda x: x.argsort(axis=None, kind="stable"), ((2, 3),),
     {"dtypes": ("int64",), "diff": False}),
    ("partition", _partition_summary(lambda x: np.partition(x, 2), 2), ((5,),),
     {"covers": (np.partition,)}),
    ("partition.axis0_method", lambda x: _partition_summary(
        lambda y: np.partition(y, 1, axis=0).T, 1)(x.T), ((3, 2),)),
    ("argpartition", _partition_summary(lambda x: np.argpartition(x, 3), 3), ((2, 5),),
     {"covers": (np.argpartition,)}),
    ("lexsort", lambda a, b: np.lexsort((a, b)), ((6,), (6,)),
     {"covers": (np.lexsort,), "dtypes": ("int64", "float64"), "domain": (0, 2),
      "diff": False}),
    ("lexsort.array_axis", lambda k: np.lexsort(k, axis=0), ((2, 4, 3),),
     {"dtypes": ("int64",), "domain": (0, 2), "diff": False}),
    ("sort_complex", np.sort_complex, ((5,),),
     {"covers": (np.sort_complex,), "dtypes": ("complex128",), "diff": False}),
    ("searchsorted", np.searchsorted, ((6,), (4,)),
     {"covers": (np.searchsorted,), "make": _make(_sorted((6,)), _ints(-4, 4, (4,))),
      "diff": False}),
    ("searchsorted.right", lambda a, v: np.searchsorted(a, v, side="right"), ((6,), (2, 2)),
     {"make": _make(_sorted((6,)), lambda rng: rng.integers(-4, 4, (2, 2)) / 2),
      "diff": False}),
    ("searchsorted.sorter", lambda a, v: np.searchsorted(a, v, sorter=np.argsort(a)),
     ((6,), ()), {"make": _make(_normal((6,)), _normal(())), "diff": False}),
    ("searchsorted.method_scalar", lambda a: a.searchsorted(0.25), ((5,),),
     {"make": _make(_sorted((5,))), "diff": False}),
    ("digitize", np.digitize, ((5,), (4,)),
     {"covers": (np.digitize,), "make": _make(_normal((5,)), _sorted((4,))), "diff": False}),
    ("digitize.decreasing_right", lambda x, b: np.digitize(x, b, right=True), ((5,), (4,)),
     {"make": _make(_ints(-3, 3, (5,)), _sorted((4,), decreasing=True)), "diff": False}),
)  # fmt: skip

_SETS = _ops(
    ("isin", np.isin, ((4,), (3,)),
     {"covers": (np.isin,), "dtypes": ("int64",), "domain": (0, 4), "diff": False}),
    ("isin.invert_float", lambda e, t: np.isin(e, t, invert=True), ((2, 3), (4,)),
     {"make": _make(lambda rng: rng.integers(0, 4, (2, 3)) / 2, _ints(0, 2, (4,))),
      "diff": False}),
    ("unique", np.unique, ((5,),),
     {"covers": (np.unique,), "make": _make(_constant((5,))), "diff": False}),
    ("unique.all_outputs", lambda x: np.unique(
        x, return_index=True, return_inverse=True, return_counts=True), ((2, 3),),
     {"make": _make(_constant((2, 3))), "diff": False}),
    ("unique_all", lambda x: tuple(np2.unique_all(x)), ((4,),),
     {"covers": (np2.unique_all,), "make": _make(_constant((4,))), "diff": False}),
    ("unique_counts", lambda x: tuple(np2.unique_counts(x)), ((4,),),
     {"covers": (np2.unique_counts,), "make": _make(_constant((4,))), "diff": False}),
    ("unique_inverse", lambda x: tuple(np2.unique_inverse(x)), ((2, 2),),
     {"covers": (np2.unique_inverse,), "make": _make(_constant((2, 2))), "diff": False}),
    # a zero-size batch gives each function examples of ones (equal sets): the rows'
    # sets are equal too, so that the sizes agree
    ("union1d", lambda a: np.union1d(a, 2 * a / 2), ((3,),),
     {"covers": (np.union1d,), "make": _make(_constant((3,))), "diff": False}),
    ("intersect1d", lambda a: np.intersect1d(a, a[::-1]), ((3,),),
     {"covers": (np.intersect1d,), "make": _make(_constant((3,))), "diff": False}),
    ("intersect1d.assume_unique", lambda a: np.intersect1d(a[:1], a[1:2], True), ((3,),),
     {"make": _make(_constant((3,))), "diff": False}),
    ("setdiff1d", lambda a: np.setdiff1d(a, a[::-1]), ((3,),),
     {"covers": (np.setdiff1d,), "make": _make(_constant((3,))), "diff": False}),
    ("setxor1d", lambda a: np.setxor1d(a, a + 0), ((3,),),
     {"covers": (np.setxor1d,), "make": _make(_constant((3,))), "diff": False}),
)  # fmt: skip

OPS: list[Op] = [*_GATHER, *_INDEX_HELPERS, *_SORTING, *_SETS]
