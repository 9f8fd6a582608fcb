"""Op-table rows for shapes, joins, splits, creation and elementwise helpers (see
`op_table.py`)."""

from __future__ import annotations

import copy
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


def _uniform(shape: tuple, lo: float = -2.0, hi: float = 2.0) -> Callable:
    return lambda rng: rng.uniform(lo, hi, shape)


def _with_specials(shape: tuple) -> Callable:
    """Floats with NaN, +inf and -inf at random places."""

    def make(rng: np.random.Generator) -> np.ndarray:
        x = rng.uniform(-2, 2, shape)
        pick = rng.integers(0, 4, shape)
        return np.select([pick == 1, pick == 2, pick == 3], [np.nan, np.inf, -np.inf], x)

    return make


def _maybe_equal(shape: tuple, nan: bool = False) -> Callable:
    """Pairs that are equal, close or different depending on the example."""

    def make(rng: np.random.Generator) -> list:
        x = rng.uniform(-2, 2, shape)
        if nan:
            x[..., 0] = np.nan
        kind = rng.integers(0, 3)
        y = x.copy() if kind == 0 else x + (1e-9 if kind == 1 else 0.5)
        return [x, y]

    return make


def _complex(shape: tuple, tiny: bool = False) -> Callable:
    """Complex values; with `tiny`, some examples have a negligible imaginary part."""

    def make(rng: np.random.Generator) -> np.ndarray:
        imag = rng.uniform(-1, 1, shape) * (1e-17 if tiny and rng.random() < 0.5 else 1)
        imag[..., 0] = 0.0
        return rng.uniform(-2, 2, shape) + 1j * imag

    return make


def _copied(f: Callable) -> Callable:
    """`f(x, ...)` writes into `x`: give it a copy (the in-place functions)."""

    def g(x: Any, *rest: Any) -> Any:
        x = x.copy()
        f(x, *rest)
        return x

    return g


def _fill_diagonal(wrap: bool = False) -> Callable:
    return _copied(lambda a, v: np.fill_diagonal(a, v, wrap=wrap))


def _nan_to_num_in_place(x: Any) -> Any:
    y = x * 1.0
    np.nan_to_num(y, copy=False, nan=-1.0)
    return y


def _dtype_queries(x: Any) -> Any:
    flags = np.can_cast(x, np.float32) + np.iscomplexobj(x) + 2 * np.isrealobj(x)
    return x * flags + np.zeros((), np.result_type(x, np.float32)) + np.zeros((), np.common_type(x))


def _like_creators(x: Any) -> Any:
    """NumPy drops `like=` before dispatching: these see no traced argument at all."""
    return (
        x[0]
        + np.zeros(3, like=x)
        + np.ones(3, like=x)
        + np.empty(3, like=x).size
        + np.eye(3, like=x)[0]
        + np.identity(3, like=x)[1]
        + np.arange(3, like=x)
        + np.tri(3, like=x)[2]
        + np.fromfunction(lambda i: i, (3,), like=x)
        + np.frombuffer(b"\x01\x02\x03", np.uint8, like=x)
        + np.fromiter(range(3), float, like=x)
        + np.fromstring("1 2 3", sep=" ", like=x)
    )


def _two_negatives(rng: np.random.Generator) -> list:
    """Every example has exactly two negative elements (piecewise selects as many)."""
    return [rng.permutation(np.array([-2.0, -1.0, 1.0, 2.0])) * rng.uniform(0.5, 1.5)]


def _piecewise(x: Any) -> Any:
    return np.piecewise(x, [x < 0, x >= 0], [lambda v: -v, lambda v: v**2 + v.sum()])


def _pad_ops() -> list[Op]:
    modes = [
        ("edge", {}),
        ("linear_ramp", {"end_values": (1.0, -2.0)}),
        ("maximum", {"stat_length": 2}),
        ("mean", {}),
        ("median", {"stat_length": ((1, 2),)}),
        ("minimum", {"stat_length": ((1, 1), (2, 3))}),
        ("reflect", {}),
        ("reflect", {"reflect_type": "odd"}),
        ("symmetric", {}),
        ("wrap", {}),
    ]
    ops = [
        Op("pad", lambda x: np.pad(x, 1), ((2, 3),), covers=(np.pad,)),
        Op(
            "pad.pairs",
            lambda x: np.pad(x, ((1, 0), (0, 2)), constant_values=(5.0, 6.0)),
            ((2, 3),),
        ),
        Op(
            "pad.batched_constant",
            lambda x, c: np.pad(x, (1, 2), constant_values=c),
            ((2, 3), ()),
            needs_batched=(0,),
        ),
        Op(
            "pad.batched_constant_per_axis",
            lambda x, c: np.pad(x, ((1, 0), (2, 1)), constant_values=c),
            ((2, 3), (2, 2)),
            needs_batched=(0,),
        ),
        Op(
            "pad.batched_constant_int",
            lambda x, c: np.pad(x, 1, constant_values=c),
            ((3,), ()),
            ("int64", "float64"),
            diff=False,
            needs_batched=(0,),
        ),
        Op("pad.dict", lambda x: np.pad(x, {-1: (1, 2)}), ((2, 3),), numpy2="pad with a dict"),
        Op("pad.empty", lambda x: np.pad(x, 2, mode="empty")[2:-2, 2:-2], ((2, 3),)),
        Op("pad.3d_wrap", lambda x: np.pad(x, ((0, 1), (2, 0), (1, 1)), mode="wrap"), ((2, 2, 3),)),
    ]
    for mode, kw in modes:
        ops.append(
            Op(
                f"pad.{mode}{'.' + '_'.join(kw) if kw else ''}",
                lambda x, mode=mode, kw=kw: np.pad(x, ((1, 2), (2, 1)), mode=mode, **kw),
                ((3, 4),),
            )
        )
    return ops


OPS: list[Op] = [
    *_ops(
        # promotions
        ("atleast_1d", np.atleast_1d, ((),), {"covers": (np.atleast_1d,)}),
        ("atleast_1d.several", lambda x, y: np.atleast_1d(x, y), ((), (3,))),
        ("atleast_2d", np.atleast_2d, ((3,),), {"covers": (np.atleast_2d,)}),
        ("atleast_2d.several", lambda x, y: np.atleast_2d(x, y), ((), (2, 3))),
        ("atleast_3d", np.atleast_3d, ((3,),), {"covers": (np.atleast_3d,)}),
        ("atleast_3d.2d", np.atleast_3d, ((2, 3),)),
        ("atleast_3d.0d", np.atleast_3d, ((),)),
        (
            "broadcast_arrays",
            lambda x, y: np.broadcast_arrays(x, y),
            ((3, 1), (4,)),
            {"covers": (np.broadcast_arrays,)},
        ),
        (
            "broadcast_to",
            lambda x: np.broadcast_to(x, (2, 3)),
            ((3,),),
            {"covers": (np.broadcast_to,)},
        ),
        # reversals, rotations, repetitions
        ("flip", np.flip, ((2, 3),), {"covers": (np.flip,)}),
        ("flip.axis", lambda x: np.flip(x, 1), ((2, 3),)),
        ("flip.axes", lambda x: np.flip(x, (0, -1)), ((2, 3, 2),)),
        ("fliplr", np.fliplr, ((2, 3),), {"covers": (np.fliplr,)}),
        ("flipud", np.flipud, ((2, 3),), {"covers": (np.flipud,)}),
        ("roll", lambda x: np.roll(x, 2), ((3, 4),), {"covers": (np.roll,)}),
        ("roll.axis", lambda x: np.roll(x, -1, axis=1), ((3, 4),)),
        ("roll.axes", lambda x: np.roll(x, (1, 2, 1), axis=(0, 1, 0)), ((3, 4),)),
        (
            "roll.batched_shift",
            lambda x, s: np.roll(x, s, axis=1),
            ((3, 4), ()),
            {"dtypes": ("float64", "int64"), "domain": (-5, 5), "needs_batched": (0,)},
        ),
        (
            "roll.batched_shift_flat",
            lambda x, s: np.roll(x, s),
            ((3, 4), ()),
            {"dtypes": ("float64", "int64"), "domain": (-5, 5), "needs_batched": (0,)},
        ),
        (
            "roll.batched_shifts",
            lambda x, s: np.roll(x, s, axis=(0, 1)),
            ((3, 4), (2,)),
            {"dtypes": ("float64", "int64"), "domain": (-5, 5), "needs_batched": (0,)},
        ),
        ("rot90", np.rot90, ((2, 3),), {"covers": (np.rot90,)}),
        ("rot90.axes", lambda x: np.rot90(x, 3, axes=(2, 0)), ((2, 3, 4),)),
        ("tile", lambda x: np.tile(x, 2), ((3,),), {"covers": (np.tile,)}),
        ("tile.promote", lambda x: np.tile(x, (2, 1, 2)), ((2, 3),)),
        ("tile.short_reps", lambda x: np.tile(x, (2,)), ((2, 3),)),
        ("repeat", lambda x: np.repeat(x, 2), ((2, 3),), {"covers": (np.repeat,)}),
        ("repeat.axis", lambda x: np.repeat(x, [1, 2, 0], axis=1), ((2, 3),)),
        ("method.repeat", lambda x: x.repeat(2, axis=0), ((2, 3),)),
        ("resize", lambda x: np.resize(x, (2, 5)), ((3,),), {"covers": (np.resize,)}),
        ("resize.shrink", lambda x: np.resize(x, 3), ((2, 2),)),
        # joins
        ("append", np.append, ((2, 3), (4,)), {"covers": (np.append,)}),
        ("append.axis", lambda x, y: np.append(x, y, axis=0), ((2, 3), (1, 3))),
        ("insert", lambda x, y: np.insert(x, 1, y), ((4,), ()), {"covers": (np.insert,)}),
        ("insert.scalar_index", lambda x, y: np.insert(x, 1, y, axis=0), ((2, 3), (3,))),
        ("insert.indices", lambda x, y: np.insert(x, [0, 2, 2], y, axis=1), ((2, 3), (3,))),
        ("insert.slice", lambda x, y: np.insert(x, slice(0, 2), y), ((3,), (2,))),
        ("insert.flat", lambda x, y: np.insert(x, -1, y), ((2, 2), (2,))),
        (
            "insert.cast",
            lambda x, y: np.insert(x, 0, y),
            ((3,), ()),
            {"dtypes": ("int64", "float64"), "diff": False},
        ),
        ("delete", lambda x: np.delete(x, 1), ((2, 3),), {"covers": (np.delete,)}),
        ("delete.axis", lambda x: np.delete(x, [0, 2], axis=1), ((2, 3),)),
        ("delete.slice", lambda x: np.delete(x, slice(0, 1), axis=-2), ((2, 3),)),
        ("hstack", lambda x, y: np.hstack([x, y]), ((3,), (2,)), {"covers": (np.hstack,)}),
        ("hstack.2d", lambda x, y: np.hstack((x, y), dtype=np.float32), ((2, 3), (2, 1))),
        ("vstack", lambda x, y: np.vstack([x, y]), ((3,), (3,)), {"covers": (np.vstack,)}),
        ("vstack.mixed", lambda x, y: np.vstack([x, y], casting="same_kind"), ((2, 3), (3,))),
        ("dstack", lambda x, y: np.dstack([x, y]), ((2, 3), (2, 3)), {"covers": (np.dstack,)}),
        ("dstack.1d", lambda x, y: np.dstack([x, y]), ((3,), (3,))),
        (
            "column_stack",
            lambda x, y: np.column_stack([x, y]),
            ((3,), (3, 2)),
            {"covers": (np.column_stack,)},
        ),
        (
            "block",
            lambda a, b, c: np.block([[a, b], [c]]),
            ((2, 2), (2, 1), (1, 3)),
            {"covers": (np.block,)},
        ),
        ("block.1d", lambda a, b: np.block([a, b]), ((2,), (3,))),
        ("block.promote", lambda a, b: np.block([[a], [b]]), ((3,), (2, 3))),
        (
            "concatenate.dtype",
            lambda x, y: np.concatenate([x, y], dtype=np.float32, casting="same_kind"),
            ((2, 3), (2, 3)),
        ),
        (
            "stack.dtype",
            lambda x, y: np.stack([x, y], axis=-1, dtype=np.complex128),
            ((2, 3), (2, 3)),
        ),
        # splits
        ("unstack", lambda x: np2.unstack(x, axis=1), ((2, 3),), {"covers": (np2.unstack,)}),
        ("split", lambda x: np.split(x, 2, axis=1), ((3, 4),), {"covers": (np.split,)}),
        ("split.indices", lambda x: np.split(x, [1, 3]), ((4, 2),)),
        ("array_split", lambda x: np.array_split(x, 3), ((5,),), {"covers": (np.array_split,)}),
        ("hsplit", lambda x: np.hsplit(x, 2), ((2, 4),), {"covers": (np.hsplit,)}),
        ("hsplit.1d", lambda x: np.hsplit(x, [1]), ((4,),)),
        ("vsplit", lambda x: np.vsplit(x, 2), ((4, 2),), {"covers": (np.vsplit,)}),
        ("dsplit", lambda x: np.dsplit(x, [1, 3]), ((2, 2, 4),), {"covers": (np.dsplit,)}),
        # matrices
        ("diag", lambda x: np.diag(x, 1), ((3,),), {"covers": (np.diag,)}),
        ("diag.2d", lambda x: np.diag(x, -1), ((3, 4),)),
        ("diagflat", lambda x: np.diagflat(x, -2), ((2, 2),), {"covers": (np.diagflat,)}),
        ("diagonal", np.diagonal, ((3, 4),), {"covers": (np.diagonal,)}),
        ("diagonal.axes", lambda x: np.diagonal(x, 1, axis1=2, axis2=0), ((3, 2, 3),)),
        ("method.diagonal", lambda x: x.diagonal(), ((3, 3),)),
        ("trace", np.trace, ((3, 3),), {"covers": (np.trace,)}),
        ("trace.axes", lambda x: np.trace(x, -1, axis1=1, axis2=2), ((2, 3, 3),)),
        ("tril", lambda x: np.tril(x, 1), ((3, 4),), {"covers": (np.tril,)}),
        ("tril.1d", np.tril, ((4,),)),
        ("triu", lambda x: np.triu(x, -1), ((2, 3, 3),), {"covers": (np.triu,)}),
        ("triu.1d", lambda x: np.triu(x, 1), ((3,),)),
        (
            "matrix_transpose",
            np2.matrix_transpose,
            ((2, 3, 4),),
            {"covers": (np2.matrix_transpose,)},
        ),
        ("rollaxis", lambda x: np.rollaxis(x, 2), ((2, 3, 4),), {"covers": (np.rollaxis,)}),
        ("rollaxis.start", lambda x: np.rollaxis(x, 0, 3), ((2, 3, 4),)),
        (
            "fill_diagonal",
            _fill_diagonal(),
            ((3, 3), ()),
            {"covers": (np.fill_diagonal,), "needs_batched": (0,)},
        ),
        ("fill_diagonal.cycle", _fill_diagonal(), ((3, 4), (2,)), {"needs_batched": (0,)}),
        ("fill_diagonal.wrap", _fill_diagonal(wrap=True), ((7, 3), ()), {"needs_batched": (0,)}),
        ("fill_diagonal.3d", _fill_diagonal(), ((2, 2, 2), ()), {"needs_batched": (0,)}),
        # creation
        ("meshgrid", lambda x, y: np.meshgrid(x, y), ((3,), (2,)), {"covers": (np.meshgrid,)}),
        (
            "meshgrid.ij_sparse",
            lambda x, y, z: np.meshgrid(x, y, z, indexing="ij", sparse=True),
            ((3,), (2, 2), (2,)),
        ),
        ("meshgrid.view", lambda x, y: np.meshgrid(x, y, copy=False), ((3,), (2,))),
        ("vander", np.vander, ((3,),), {"covers": (np.vander,)}),
        ("vander.increasing", lambda x: np.vander(x, 4, increasing=True), ((3,),)),
        ("vander.int", lambda x: np.vander(x, 2), ((3,),), {"dtypes": ("int64",), "diff": False}),
        ("linspace", lambda a, b: np.linspace(a, b, 5), ((), ()), {"covers": (np.linspace,)}),
        (
            "linspace.arrays",
            lambda a, b: np.linspace(a, b, 4, endpoint=False, axis=-1),
            ((2,), (3, 1)),
        ),
        ("linspace.retstep", lambda a, b: np.linspace(a, b, 3, retstep=True), ((2,), ())),
        (
            "logspace",
            lambda a, b, c: np.logspace(a, b, 4, base=c),
            ((), (), ()),
            {"covers": (np.logspace,), "domain": (0.5, 2.0)},
        ),
        ("logspace.axis", lambda a, b: np.logspace(a, b, 3, axis=1), ((2,), (2,))),
        (
            "geomspace",
            lambda a, b: np.geomspace(a, b, 4),
            ((), ()),
            {"covers": (np.geomspace,), "domain": (0.5, 2.0)},
        ),
        (
            "geomspace.axis",
            lambda a, b: np.geomspace(a, b, 3, endpoint=False, axis=-1),
            ((2,), (2,)),
            {"domain": (0.5, 2.0)},
        ),
        (
            "ascontiguousarray",
            lambda x: np.ascontiguousarray(x.T, like=x),
            ((2, 3),),
            {"covers": (np.ascontiguousarray,)},
        ),
        ("ascontiguousarray.0d", lambda x: np.ascontiguousarray(x[0], np.float32, like=x), ((2,),)),
        (
            "asfortranarray",
            lambda x: np.asfortranarray(x, like=x),
            ((2, 3),),
            {"covers": (np.asfortranarray,)},
        ),
        (
            "require",
            lambda x: np.require(x, np.float32, ["F", "W"], like=x),
            ((2, 3),),
            {"covers": (np.require,)},
        ),
        ("require.none", lambda x: np.require(x, like=x) * 2, ((2, 3),)),
        ("copy.order", lambda x: np.copy(x, order="F"), ((2, 3),)),
        ("method.copy", lambda x: x.copy(), ((2, 3),)),
        ("copy.copy", copy.copy, ((2, 3),)),
        ("copy.deepcopy", copy.deepcopy, ((2, 3),)),
        ("astype.complex", lambda x: np2.astype(x, np.complex64), ((3,),)),
        (
            "dtype_queries",
            _dtype_queries,
            ((3,),),
            {
                "covers": (
                    np.result_type,
                    np.can_cast,
                    np.common_type,
                    np.iscomplexobj,
                    np.isrealobj,
                )
            },
        ),
        (
            "like_creators",
            _like_creators,
            ((3,),),
            {
                "covers": (
                    np.zeros,
                    np.ones,
                    np.empty,
                    np.eye,
                    np.identity,
                    np.arange,
                    np.tri,
                    np.fromfunction,
                    np.frombuffer,
                    np.fromiter,
                    np.fromstring,
                )
            },
        ),
        ("full.like", lambda x: np.full((2, 3), x[0], like=x), ((1,),), {"covers": (np.full,)}),
        # elementwise helpers
        ("round", lambda x: np.round(x, 1), ((3,),), {"covers": (np.round,), "diff": False}),
        (
            "around",
            lambda x: np.around(x, -1),
            ((3,),),
            {"covers": (np.around,), "diff": False, "domain": (-50, 50)},
        ),
        ("method.round", lambda x: x.round(2), ((3,),), {"diff": False}),
        ("clip", np.clip, ((3, 4), (4,), ()), {"covers": (np.clip,)}),
        (
            "clip.keywords",
            lambda x, lo: np.clip(x, min=lo, max=1.0),
            ((3,), (3,)),
            {"numpy2": "clip(min=, max=)"},
        ),
        ("clip.none", lambda x, hi: np.clip(x, None, hi), ((2, 3), ())),
        (
            "nan_to_num",
            lambda x: np.nan_to_num(x, nan=-1.0, posinf=9.0),
            ((3, 4),),
            {"covers": (np.nan_to_num,), "make": _make(_with_specials((3, 4))), "diff": False},
        ),
        (
            "nan_to_num.batched_nan",
            lambda x, n: np.nan_to_num(x, nan=n),
            ((3,), ()),
            {
                "make": _make(_with_specials((3,)), _uniform(())),
                "diff": False,
                "needs_batched": (0,),
            },
        ),
        (
            "nan_to_num.in_place",
            _nan_to_num_in_place,
            ((3,),),
            {"make": _make(_with_specials((3,))), "diff": False},
        ),
        ("fix", np.fix, ((3,),), {"covers": (np.fix,), "diff": False}),
        ("angle", np.angle, ((3,),), {"covers": (np.angle,), "dtypes": ("complex128",)}),
        ("angle.deg", lambda z: np.angle(z, deg=True), ((3,),), {"dtypes": ("complex128",)}),
        ("sinc", np.sinc, ((3,),), {"covers": (np.sinc,)}),
        ("i0", np.i0, ((3,),), {"covers": (np.i0,), "domain": (-10, 10)}),
        (
            "isclose",
            np.isclose,
            ((2, 3), (3,)),
            {"covers": (np.isclose,), "make": _maybe_equal((3,)), "diff": False},
        ),
        (
            "isclose.rtol",
            lambda x, y, r: np.isclose(x, y, rtol=r),
            ((3,), (3,), ()),
            {
                "make": lambda rng: [*_maybe_equal((3,))(rng), np.asarray(rng.uniform(0, 1))],
                "diff": False,
            },
        ),
        (
            "allclose",
            np.allclose,
            ((3,), (3,)),
            {"covers": (np.allclose,), "make": _maybe_equal((3,)), "diff": False},
        ),
        (
            "allclose.nan",
            lambda x, y: np.allclose(x, y, equal_nan=True),
            ((3,), (3,)),
            {"make": _maybe_equal((3,), nan=True), "diff": False},
        ),
        (
            "array_equal",
            np.array_equal,
            ((3,), (3,)),
            {"covers": (np.array_equal,), "make": _maybe_equal((3,)), "diff": False},
        ),
        (
            "array_equal.nan",
            lambda x, y: np.array_equal(x, y, equal_nan=True),
            ((3,), (3,)),
            {"make": _maybe_equal((3,), nan=True), "diff": False},
        ),
        ("array_equal.shapes", np.array_equal, ((3,), (2, 3)), {"diff": False}),
        (
            "array_equiv",
            lambda x, y: np.array_equiv(x, y[None]),
            ((3,), (3,)),
            {"covers": (np.array_equiv,), "make": _maybe_equal((3,)), "diff": False},
        ),
        ("array_equiv.shapes", np.array_equiv, ((3,), (2,)), {"diff": False}),
        (
            "isneginf",
            np.isneginf,
            ((4,),),
            {"covers": (np.isneginf,), "make": _make(_with_specials((4,))), "diff": False},
        ),
        (
            "isposinf",
            np.isposinf,
            ((4,),),
            {"covers": (np.isposinf,), "make": _make(_with_specials((4,))), "diff": False},
        ),
        (
            "iscomplex",
            np.iscomplex,
            ((3,),),
            {"covers": (np.iscomplex,), "make": _make(_complex((3,))), "diff": False},
        ),
        ("iscomplex.real", np.iscomplex, ((3,),), {"diff": False}),
        (
            "isreal",
            np.isreal,
            ((3,),),
            {"covers": (np.isreal,), "make": _make(_complex((3,))), "diff": False},
        ),
        (
            "real_if_close",
            np.real_if_close,
            ((3,),),
            {"covers": (np.real_if_close,), "make": _make(_complex((3,))), "diff": False},
        ),
        ("real_if_close.real", np.real_if_close, ((3,),)),
        # differences along an axis
        ("diff", np.diff, ((3, 4),), {"covers": (np.diff,)}),
        ("diff.n_axis", lambda x: np.diff(x, n=2, axis=0), ((4, 3),)),
        ("diff.prepend_scalar", lambda x, p: np.diff(x, prepend=p), ((3,), ())),
        ("diff.append_array", lambda x, a: np.diff(x, axis=0, append=a), ((2, 3), (1, 3))),
        ("diff.bool", np.diff, ((4,),), {"dtypes": ("bool",), "diff": False}),
        ("ediff1d", np.ediff1d, ((2, 3),), {"covers": (np.ediff1d,)}),
        ("ediff1d.ends", lambda x, b: np.ediff1d(x, to_end=9.0, to_begin=b), ((4,), (2,))),
        ("gradient", np.gradient, ((4,),), {"covers": (np.gradient,)}),
        ("gradient.2d", np.gradient, ((3, 4),)),
        ("gradient.axis", lambda x: np.gradient(x, 2.0, axis=1, edge_order=2), ((3, 4),)),
        (
            "gradient.coords",
            lambda x: np.gradient(x, np.array([0.0, 1.0, 3.0]), axis=-1),
            ((2, 3),),
        ),
        ("cross", np.cross, ((3,), (3,)), {"covers": (np.cross,)}),
        ("cross.broadcast", np.cross, ((2, 3), (3,))),
        ("cross.axes", lambda x, y: np.cross(x, y, axisa=0, axisc=0), ((3, 2), (2, 3))),
        ("unwrap", np.unwrap, ((5,),), {"covers": (np.unwrap,), "domain": (-6, 6)}),
        ("unwrap.axis", lambda x: np.unwrap(x, axis=0, period=4.0), ((4, 3),), {"domain": (-6, 6)}),
        (
            "packbits",
            np.packbits,
            ((2, 9),),
            {"covers": (np.packbits,), "dtypes": ("bool",), "diff": False},
        ),
        (
            "packbits.axis",
            lambda x: np.packbits(x, axis=0, bitorder="little"),
            ((9, 2),),
            {"dtypes": ("uint8",), "domain": (0, 1), "diff": False},
        ),
        (
            "unpackbits",
            lambda x: np.unpackbits(x, count=10),
            ((2, 2),),
            {"covers": (np.unpackbits,), "dtypes": ("uint8",), "domain": (0, 255), "diff": False},
        ),
        (
            "unpackbits.axis",
            lambda x: np.unpackbits(x, axis=1),
            ((2, 2),),
            {"dtypes": ("uint8",), "domain": (0, 255), "diff": False},
        ),
        # functions that apply a user's function
        (
            "apply_along_axis",
            lambda x: np.apply_along_axis(np.sum, 0, x),
            ((3, 4),),
            {"covers": (np.apply_along_axis,)},
        ),
        (
            "apply_along_axis.vector",
            lambda x: np.apply_along_axis(lambda r: r[::-1] * r[0], 1, x),
            ((3, 4),),
        ),
        ("apply_along_axis.matrix", lambda x: np.apply_along_axis(np.diag, -2, x), ((2, 3, 2),)),
        (
            "apply_along_axis.extra",
            lambda x, y: np.apply_along_axis(lambda r, w: r @ w, 1, x, y),
            ((2, 3), (3,)),
            {"needs_batched": (0,)},
        ),
        (
            "apply_over_axes",
            lambda x: np.apply_over_axes(np.sum, x, [0, 2]),
            ((2, 3, 4),),
            {"covers": (np.apply_over_axes,)},
        ),
        ("apply_over_axes.one", lambda x: np.apply_over_axes(np.mean, x, -1), ((2, 3),)),
        ("piecewise", _piecewise, ((4,),), {"covers": (np.piecewise,), "make": _two_negatives}),
        (
            "piecewise.fixed_conditions",
            lambda x: np.piecewise(
                x, [np.array([True, False, True, False])], [lambda v: v * 2, 0.5]
            ),
            ((4,),),
        ),
        (
            "piecewise.batched_constant",
            lambda x, c: np.piecewise(x, [np.array([True, False, True])], [c, lambda v: -v]),
            ((3,), ()),
            {"needs_batched": (0,)},
        ),
    ),
    *_pad_ops(),
]
