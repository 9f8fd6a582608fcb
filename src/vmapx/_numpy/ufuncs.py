"""Elementwise family: every ufunc and each of its methods, and generalized ufuncs.

One rule per ufunc method serves all ufuncs (NumPy's and any library's, such as
`scipy.special`): batched operands get the batch axis at the front of the broadcast
shape, unbatched ones are left alone and broadcast by NumPy (never copied).
"""

from __future__ import annotations

import math
import re
from functools import cache
from typing import Any, cast

import numpy as np

from .. import _chunk_outputs
from .._autodiff import (
    NoRule,
    defcomposite,
    defelementwise,
    defjvp,
    defjvp_argnum,
    defvjp,
    defvjp_argnum,
    defzero,
    partial_value,
    stop_gradient_leaf,
)
from .._batching import (
    BatchTrace,
    BatchTracer,
    align_rank,
    aligned_operands,
    bcast_batch,
    example_ndim,
    is_batched,
    unwrap,
    wrap_tree,
)
from .._chunk_outputs import ufunc_destination
from .._compat import NUMPY2, astype, umath_ufuncs
from .._core import Tracer
from .._payload import like, moved
from .._plain import PLAIN_ARRAYS
from .._registry import register, register_ufunc_defaults, ufunc_primitive
from .._rule_helpers import reduced_axes, scalar_axis, shift_one


def _wrap(trace: BatchTrace, out: Any) -> Any:
    return tuple(trace.wrap(o) for o in out) if type(out) is tuple else trace.wrap(out)


def call_rule(ufunc: np.ufunc) -> Any:
    if ufunc.signature is not None:
        return gufunc_rule(ufunc)

    unary = ufunc.nin == 1 and ufunc.nout == 1 and NUMPY2

    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        if unary and not kwargs and len(args) == 1:  # the common case, without the helpers
            x = args[0]
            if type(x) is BatchTracer and x._trace is trace:
                if _chunk_outputs.active:  # (a chunk's output slice to compute into)
                    out = ufunc_destination(trace, ufunc, (x.val,))
                    if out is not None:
                        return trace.wrap(ufunc(x.val, out=out))
                return trace.wrap(ufunc(x.val))
        where = kwargs.get("where", True)
        if where is not True:
            *vals, where = aligned_operands(trace, (*args, where))
            kwargs = {**kwargs, "where": where}
        else:
            vals = aligned_operands(trace, args)
        if not NUMPY2 and "dtype" not in kwargs and "signature" not in kwargs:
            vals = numpy1_promotion(trace, ufunc, args, vals)
        if (
            not kwargs and len(vals) == 2 and ufunc.nout == 1
            # (what each of the layouts below needs first: arrays, one of 3+ dimensions)
            and type(vals[0]) in PLAIN_ARRAYS and type(vals[1]) in PLAIN_ARRAYS
            and (vals[0].ndim >= 3 or vals[1].ndim >= 3)
        ):  # fmt: skip
            columns = _outer_columns(vals[0], vals[1])  # (0: not an outer product)
            if columns and columns <= _outer_limit():
                out = _by_columns(trace, ufunc, vals[0], vals[1], columns)
            else:
                out = _with_short_last_axis_moved(ufunc, vals)
                if out is None and not _chunk_outputs.active:
                    out = _with_batch_axis_last(trace, ufunc, args, vals)
                if out is None and columns:  # (where the batch axis cannot be last)
                    out = _by_columns(trace, ufunc, vals[0], vals[1], columns)
            if out is not None:
                return trace.wrap(out)
        if _chunk_outputs.active and not kwargs:  # (a chunk's output slice to compute into)
            out = ufunc_destination(trace, ufunc, vals)
            if out is not None:
                return trace.wrap(ufunc(*vals, out=out))
        out = ufunc(*vals, **kwargs)
        return trace.wrap(out) if type(out) is not tuple else _wrap(trace, out)

    return rule


_OUTER_MIN_SIZE = 1 << 14  # elements of the result...
_OUTER_COLUMNS = 3  # ...of at most this many columns...
_OUTER_MOST_COLUMNS = 8  # ...or this many where the batch axis cannot be last
_OUTER_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def outer_by_columns(trace: BatchTrace | None, ufunc: np.ufunc, a: Any, b: Any) -> Any:
    """`ufunc(a, b)` of an outer product over the last two axes, `a` (..., I, 1) and `b`
    (..., 1, J) with the same leading axes (a weight's per-example gradient:
    `g[:, :, None] * x[:, None, :]`, `np.outer`, the matmul rule's cotangents), computed
    column by column: NumPy's broadcast loop runs J elements at a time, where each column
    is one call over I elements. Measured under `vmap` (B, I) = (2048, 32): J=2 130
    against 568 us, J=3 188 against 610; from J=4 on, computing with the batch axis last
    (`_with_batch_axis_last`) is faster (J=4: 211 against 259) where it applies; where
    it does not, and in a chunk, whose results go into the whole batch's outputs in C
    order (`_chunk_outputs`), columns win up to J=8 (chunks of 512: J=4 913 against
    1561, J=6 1129 against 1981). So up to `_OUTER_COLUMNS` columns come here first
    (`_OUTER_MOST_COLUMNS` in a chunk); the ufunc rule sends the others here where the
    batch axis cannot be last.

    Real float32 and float64 only (int8's broadcast loop is fast; complex sums of NaNs
    keep another NaN's sign in a strided loop), with at least twice as many rows as
    columns. Same values: each element is the ufunc of the same two numbers (einsum's
    product would be, but for the sign of a zero: it adds the product to 0); a NaN's
    sign bit may be the other operand's. `trace`: the batch trace of the operands (None:
    the only one on this thread's stack, see `ufunc_destination`)."""
    columns = _outer_columns(a, b)
    return _by_columns(trace, ufunc, a, b, columns) if 0 < columns <= _outer_limit() else None


def _outer_limit() -> int:
    return _OUTER_MOST_COLUMNS if _chunk_outputs.in_chunk() else _OUTER_COLUMNS


def _outer_columns(a: Any, b: Any) -> int:
    """J where `outer_by_columns` applies to `a` and `b` with up to `_OUTER_MOST_COLUMNS`
    columns, else 0 (cheap tests first: this runs for every binary ufunc call)."""
    if (
        type(a) is not np.ndarray  # (not a `vmapx.jit` recording's values: `out=` below)
        or type(b) is not np.ndarray
        or a.ndim < 3
        or a.ndim != b.ndim
        or a.shape[-1] != 1
        or b.shape[-2] != 1
    ):
        return 0
    rows, columns = a.shape[-2], b.shape[-1]
    if not 2 <= columns <= _OUTER_MOST_COLUMNS or rows < 2 * columns:
        return 0
    if a.shape[:-2] != b.shape[:-2] or math.prod(a.shape[:-1]) * columns < _OUTER_MIN_SIZE:
        return 0
    return columns if a.dtype in _OUTER_DTYPES and b.dtype in _OUTER_DTYPES else 0


def _by_columns(trace: BatchTrace | None, ufunc: np.ufunc, a: Any, b: Any, columns: int) -> Any:
    """`ufunc(a, b)` column by column (see `outer_by_columns`)."""
    left = a[..., 0]
    first = ufunc(left, b[..., 0, :1])  # (its dtype is the result's)
    out = ufunc_destination(trace, ufunc, (a, b)) if _chunk_outputs.active else None
    if out is None or out.dtype != first.dtype:
        out = np.empty((*left.shape, columns), dtype=first.dtype)
    out[..., 0] = first
    for j in range(1, columns):
        ufunc(left, b[..., 0, j : j + 1], out=out[..., j])
    return out


_SHORT_AXIS = 4  # a last axis this short makes NumPy's inner loop short...
_LONG_AXIS = 64  # ...and the one before it this long makes the better inner loop
_MOVE_MIN_SIZE = 1 << 16


def _with_short_last_axis_moved(ufunc: np.ufunc, vals: list[Any]) -> Any:
    """`ufunc(a, b)` computed with the last axis moved to the front, where broadcasting
    would make NumPy loop over a short last axis (`ys - x` for `ys` (512, 3) and a
    batched `x` (3,): 3 elements per inner loop). The result is the same values in a
    transposed layout (a view), ~4x faster to make; later elementwise operations follow
    its memory order and a sum over the short axis reads contiguous slices (a sum over
    the long axis runs pairwise there, in another order than the loop's: equal up to
    rounding, as is usual for batched reductions). None where
    the trick does not apply (NumPy's own loop is fine, or an operand is large enough
    that copying it would cost what it saves)."""
    a, b = vals
    # cheap tests first: this runs for every binary ufunc call
    if (
        type(a) not in PLAIN_ARRAYS
        or type(b) not in PLAIN_ARRAYS
        or (a.size * b.size < _MOVE_MIN_SIZE)
    ):
        return None  # (a number operand: NumPy's loop is contiguous where the array is)
    if max(a.ndim, b.ndim) < 3 or max(a.shape[-1:] + b.shape[-1:]) > _SHORT_AXIS:
        return None
    shape = np.broadcast_shapes(a.shape, b.shape)
    size = math.prod(shape)
    if shape[-2] < _LONG_AXIS or size < _MOVE_MIN_SIZE or 8 * max(a.size, b.size) > size:
        return None
    if not (_spread_along_last_only(a, shape) or _spread_along_last_only(b, shape)):
        return None  # both span the last two axes alike: NumPy joins them into one loop
    rank = len(shape)
    front = (0, rank - 1, *range(1, rank - 1))  # the last axis moved to position 1
    moved = [
        v.reshape((1,) * (rank - v.ndim) + v.shape).transpose(front).copy()  # (C order)
        for v in vals
    ]
    return ufunc(*moved).transpose(0, *range(2, rank), 1)


def _spread_along_last_only(v: np.ndarray, shape: tuple[Any, ...]) -> bool:
    """Whether `v` varies along the (short) last axis but is broadcast along the one
    before: NumPy's innermost loop is then the short axis."""
    return v.ndim >= 1 and v.shape[-1] == shape[-1] > 1 and (v.ndim < 2 or v.shape[-2] == 1)


_BATCH_LAST_MIN_SIZE = 1 << 14  # elements of the result...
_BATCH_LAST_SHORT_AXIS = 16  # ...whose last axis is at most this long...
_BATCH_LAST_SPREAD = 4  # ...and at least this many times larger than a batched operand


def _with_batch_axis_last(
    trace: BatchTrace, ufunc: np.ufunc, args: tuple[Any, ...], vals: list[Any]
) -> Any:
    """`ufunc(a, b)` computed with the batch axis last in memory, where a batched operand
    is broadcast against a larger shape with a short last axis: `c - x` for shared points
    `c` (64, 8) and a batched `x` (8,) makes (B, 64, 8), and NumPy's inner loop is then
    8 elements long (~10 ns an element, against ~1 for a long one) because `x` does not
    vary along the middle axis. With the batch axis last the inner loop runs over the
    batch: each batched operand is copied with its batch axis last (it is at most a
    quarter of the result), the result is a view with the batch axis in front. Same
    values; later elementwise calls keep its memory order (NumPy's order 'K'), and a
    reduction over its example axes reads rows of the batch (`np.sum` over the last
    axis adds columns in NumPy's pairwise order: the loop's bits, see `reductions`).
    None where it does not apply."""
    a, b = vals
    # cheap tests first: this runs for every binary ufunc call (the product of the sizes
    # bounds the result's; equal shapes broadcast nothing)
    if (
        type(a) not in PLAIN_ARRAYS
        or type(b) not in PLAIN_ARRAYS
        or max(a.ndim, b.ndim) < 3
        or a.shape == b.shape
        or a.size * b.size < _BATCH_LAST_MIN_SIZE
        or max(a.shape[-1:] + b.shape[-1:]) > _BATCH_LAST_SHORT_AXIS
    ):
        return None  # (a number operand: NumPy's loop runs over the whole batched array)
    shape = np.broadcast_shapes(a.shape, b.shape)
    size = math.prod(shape)
    if size < _BATCH_LAST_MIN_SIZE or shape[-1] > _BATCH_LAST_SHORT_AXIS:
        return None
    moved = []
    for arg, v in zip(args, vals, strict=True):
        if type(arg) is BatchTracer and arg._trace is trace:
            if v.size * _BATCH_LAST_SPREAD > size or v.dtype.hasobject:
                return None  # (as large as the result: NumPy joins its axes into one loop)
            moved.append(np.moveaxis(v, 0, -1).copy())
        else:
            moved.append(v[..., None])
    return np.moveaxis(ufunc(*moved), -1, 0)


_CATEGORY = {"b": 0, "u": 1, "i": 1, "f": 2, "c": 2}  # NumPy 1.26's kinds for promotion


def numpy1_promotion(
    trace: BatchTrace, ufunc: np.ufunc, args: tuple[Any, ...], vals: list[Any]
) -> list[Any]:
    """NumPy 1.26 promotes a 0-d operand next to arrays by its value (`int32_array +
    np.int64(1)` stays int32) and 0-d operands among themselves by type. An example's
    0-d values form an array in the batch, which NumPy would promote by type: give it the
    dtype its values promote as; where every operand is 0-d per example, make the
    unbatched ones arrays too."""
    zero_d = [example_ndim(trace, x) == 0 for x in args]
    batched = [is_batched(trace, x) for x in args]
    if not any(z and b for z, b in zip(zero_d, batched, strict=True)):
        return vals
    if all(zero_d):
        return [
            v if b else moved(np.reshape(v, (1,)), *vals)
            for v, b in zip(vals, batched, strict=True)
        ]
    dtypes = [
        v.dtype if hasattr(v, "dtype")
        else np.asarray(v).dtype if isinstance(v, list | tuple)  # (`[1.0, 2.0] * x`)
        else np.result_type(v)
        for v in vals
    ]  # fmt: skip
    arrays = [d for d, z in zip(dtypes, zero_d, strict=True) if not z]
    scalars = [d for d, z in zip(dtypes, zero_d, strict=True) if z]
    if max(_CATEGORY.get(d.kind, 3) for d in scalars) > max(
        _CATEGORY.get(d.kind, 3) for d in arrays
    ):
        return vals  # a scalar of a higher kind: NumPy 1.26 promotes by type
    out = list(vals)
    for i, (v, z, b) in enumerate(zip(vals, zero_d, batched, strict=True)):
        if z and b and v.dtype.kind in _CATEGORY:
            dtype = _value_dtype(v, arrays, ufunc)
            if dtype is None:
                raise trace.concretization(
                    f"`np.{ufunc.__name__}` of arrays and one 0-d value per example, whose "
                    "values give different dtypes for different examples (NumPy 1.26 "
                    "promotes a 0-d value by its value)",
                    "give the 0-d value one dtype for all, e.g. `a + x.astype(a.dtype)`",
                )
            out[i] = astype(v, dtype, copy=False)
    return out


def _value_dtype(v: Any, arrays: list[Any], ufunc: np.ufunc) -> np.dtype | None:
    """The dtype NumPy 1.26 gives the 0-d values in `v` next to arrays of `arrays` (the
    same for all their examples, else None). A ufunc with mixed-type loops (`ldexp`)
    keeps integers as they are."""
    dtype = _type_decides(tuple(arrays), v.dtype)
    if dtype is None:  # (a dtype is falsy: no `or` here)
        dtype = _by_values(v, arrays)
    if dtype is None or _CATEGORY.get(dtype.kind) == _CATEGORY[v.dtype.kind]:
        return dtype
    return dtype if _homogeneous(ufunc) else v.dtype


def _by_values(v: Any, arrays: list[Any]) -> np.dtype | None:
    """What the examples' values promote to next to `arrays`, if the same for all: the
    largest and smallest magnitudes of either sign are the ones to check."""
    data = v
    while isinstance(data, Tracer):  # the values under any transform (all their examples)
        data = getattr(data, "val", getattr(data, "primal", None))
    if data is None:
        return cast("np.dtype[Any] | None", v.dtype)
    data = np.ravel(data)
    kind = v.dtype.kind
    if kind in "biu":
        data = data.astype(np.int64) if kind == "b" else data
        neg, pos = data[data < 0], data[data >= 0]
        extremes = [f(part) for part in (neg, pos) if part.size for f in (np.min, np.max)]
    else:
        parts = (data.real, data.imag) if kind == "c" else (data,)
        mags = np.max([np.where(np.isfinite(p), np.abs(p), 0) for p in parts], axis=0)
        extremes = [f(mags) for f in (np.min, np.max)] if mags.size else []
        extremes = [complex(m, m) if kind == "c" else m for m in extremes]
    values = [np.asarray(x).astype(v.dtype) for x in extremes or [0]]  # 0-d: by value
    found = {np.result_type(*arrays, x) for x in values}
    return found.pop() if len(found) == 1 else None


@cache
def _type_decides(arrays: tuple[Any, ...], dtype: np.dtype) -> np.dtype | None:
    """The dtype NumPy 1.26 gives 0-d values of `dtype` next to `arrays` when their values
    cannot change it (the smallest values give what `dtype` itself gives), else None."""
    smallest = [0, -1] if dtype.kind == "i" else [0]
    found = {np.result_type(*arrays, np.asarray(x).astype(dtype)) for x in smallest}
    found.add(np.result_type(*arrays, dtype))
    return found.pop() if len(found) == 1 else None


@cache
def _homogeneous(ufunc: np.ufunc) -> bool:
    """Whether every numeric loop of `ufunc` takes its inputs in one type (`add`, not
    `ldexp`; datetime and object loops aside)."""
    loops = [t.split("->")[0] for t in ufunc.types]
    return all(len(set(t)) == 1 for t in loops if not set(t) & set("OMm"))


# -- generalized ufuncs (matmul, vecdot, matvec, ...) --------------------------------


@cache
def _parse_signature(signature: str) -> tuple[list[list[tuple[str, bool]]], list[Any]]:
    """`"(n?,k),(k,m?)->(n?,m?)"` -> per operand and per output: [(dim, optional)]."""
    ins, outs = signature.replace(" ", "").split("->")

    def groups(s: str) -> list[list[tuple[str, bool]]]:
        return [
            [(d.rstrip("?"), d.endswith("?")) for d in g.split(",") if d]
            for g in re.findall(r"\(([^)]*)\)", s)
        ]

    return groups(ins), groups(outs)


def gufunc_rule(ufunc: np.ufunc) -> Any:
    in_core, out_core = _parse_signature(ufunc.signature)

    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        if kwargs.get("axes") is not None or kwargs.get("axis") is not None:
            return _gufunc_with_axes(trace, ufunc, args, kwargs)
        expanded: set[str] = set()  # optional dims we added (to squeeze afterwards)
        absent: set[str] = set()  # optional dims NumPy drops itself (unbatched operands)
        loop_ranks, vals = [], []
        for x, core in zip(args, in_core, strict=True):
            v, b = unwrap(trace, x)
            nd = example_ndim(trace, x)
            ncore = len(core)
            if nd < ncore:  # optional core dims missing (a 1-d operand of matmul)
                gone = [i for i, (_, opt) in enumerate(core) if opt][: ncore - nd]
                if b and len(gone) < ncore - nd:  # else the batch axis would be a core one
                    raise gufunc_example_error(ufunc, args, kwargs) or ValueError(
                        f"{ufunc.__name__}: an example has too few axes"
                    )
                names = {core[i][0] for i in gone}
                if b:
                    for i in gone:
                        v = np.expand_dims(v, v.ndim - ncore + i + 1)
                    expanded |= names
                    nd = ncore
                else:
                    absent |= names
                    ncore = nd
            vals.append((v, b, nd - ncore))
            loop_ranks.append(nd - ncore)
        rank = max(loop_ranks)
        ready = [align_rank(v, r, rank) if b else v for v, b, r in vals]
        out = ufunc(*ready, **kwargs)
        outs = out if isinstance(out, tuple) else (out,)
        fixed = []
        for o, core in zip(outs, out_core, strict=True):
            present = [name for name, _ in core if name not in absent]
            drop = [i for i, name in enumerate(present) if name in expanded]
            axes = tuple(o.ndim - len(present) + i for i in drop)
            fixed.append(np.squeeze(o, axis=axes) if axes else o)
        return _wrap(trace, tuple(fixed) if isinstance(out, tuple) else fixed[0])

    return rule


def _gufunc_with_axes(
    trace: BatchTrace, ufunc: np.ufunc, args: tuple[Any, ...], kwargs: dict[Any, Any]
) -> Any:
    """`axes=`/`axis=` name per-example axes: make them absolute, then shift past the
    batch axis and the loop axes padded in after it."""
    in_core, out_core = _parse_signature(ufunc.signature)
    ranks = [example_ndim(trace, x) for x in args]
    call = dict(kwargs)
    if call.get("axis") is not None:
        axis = call.pop("axis")
        call["axes"] = [(axis,) if core else () for core in in_core + out_core]
    axes = call.pop("axes")
    out_rank = max(r - len(c) for r, c in zip(ranks, in_core, strict=True))
    vals, shifted = [], []
    try:
        for x, ax, r, core in zip(args, axes, ranks, in_core, strict=False):
            v, b = unwrap(trace, x)
            ax = (ax,) if isinstance(ax, int) else tuple(ax)
            if b:  # loop axes line up from the right: pad this operand's to `out_rank`
                pad = out_rank - (r - len(core))
                v = align_rank(v, r, r + pad)
                ax = tuple(a % r + 1 + pad if a < 0 else a + 1 + pad for a in ax)
            vals.append(v)
            shifted.append(ax)
        for ax, c in zip(axes[len(args) :], out_core, strict=False):
            ax = (ax,) if isinstance(ax, int) else tuple(ax)
            r = out_rank + len(c)
            shifted.append(tuple(a % r + 1 if a < 0 else a + 1 for a in ax))
        return _wrap(trace, ufunc(*vals, axes=shifted, **call))
    except (ValueError, TypeError, IndexError, ZeroDivisionError) as e:  # (`a % 0`: 0-d)
        raise (gufunc_example_error(ufunc, args, kwargs) or e) from None


def gufunc_example_error(
    ufunc: np.ufunc, args: tuple[Any, ...], kwargs: dict[Any, Any]
) -> Exception | None:
    """NumPy's own error for one example, if it raises: zeros of each operand's example
    shape and dtype (these errors come from shapes and types, never values)."""

    def example(x: Any) -> Any:
        if not isinstance(x, Tracer):
            return x
        return np.zeros(x.shape, dtype=np.result_type(x), like=like(x))

    try:
        ufunc(*map(example, args), **{k: v for k, v in kwargs.items() if k != "out"})
    except (ValueError, TypeError, IndexError) as e:
        return e
    return None


# -- reduce / accumulate / reduceat / outer / at ---------------------------------------


def _reduce_kwargs(
    args: tuple[Any, ...], kwargs: dict[Any, Any], names: tuple[str, ...]
) -> dict[Any, Any]:
    """Positional arguments after the array, turned into keywords."""
    kwargs = dict(kwargs)
    for name, value in zip(names, args[1:], strict=False):
        kwargs[name] = value
    return kwargs


def reduce_rule(ufunc: np.ufunc) -> Any:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        kwargs = _reduce_kwargs(args, kwargs, ("axis", "dtype", "out", "keepdims", "initial"))
        x = args[0]
        nd = example_ndim(trace, x)
        where = kwargs.get("where", True)
        if where is not True:
            v, kwargs["where"] = aligned_operands(trace, (x, where))
            if not is_batched(trace, x):  # only the mask is batched
                v = bcast_batch(trace, x)
        else:
            v = unwrap(trace, x)[0]
        axis = kwargs.get("axis", 0)
        kwargs["axis"] = reduced_axes(axis, nd)
        return trace.wrap(ufunc.reduce(v, **kwargs))

    return rule


def _scalar_error(ufunc: np.ufunc, method: str, v: Any, axis: Any, nd: int) -> None:
    """NumPy's own error of `ufunc.accumulate`/`reduceat` (`method`) for a 0-d example
    (a TypeError, "cannot accumulate on a scalar", or its AxisError for a tuple `axis`),
    raised by calling it on one: the batched value's axes would let it through."""
    if nd == 0:
        indices = ([0],) if method == "reduceat" else ()
        getattr(ufunc, method)(np.zeros((), v.dtype), *indices, axis=axis)


def accumulate_rule(ufunc: np.ufunc) -> Any:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        kwargs = _reduce_kwargs(args, kwargs, ("axis", "dtype", "out"))
        v = unwrap(trace, args[0])[0]
        nd = example_ndim(trace, args[0])
        _scalar_error(ufunc, "accumulate", v, kwargs.get("axis", 0), nd)
        kwargs["axis"] = shift_one(kwargs.get("axis", 0), nd)
        return trace.wrap(ufunc.accumulate(v, **kwargs))

    return rule


def reduceat_rule(ufunc: np.ufunc) -> Any:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        kwargs = _reduce_kwargs(args, kwargs, ("indices", "axis", "dtype", "out"))
        indices = kwargs.pop("indices")
        if is_batched(trace, indices):
            raise trace.concretization(
                f"`np.{ufunc.__name__}.reduceat` with batched indices",
                "use unbatched indices, or `np.add.at`/`np.bincount` style scatter",
            )
        v = bcast_batch(trace, args[0])
        nd = example_ndim(trace, args[0])
        _scalar_error(ufunc, "reduceat", v, kwargs.get("axis", 0), nd)
        kwargs["axis"] = shift_one(kwargs.get("axis", 0), nd)
        return trace.wrap(ufunc.reduceat(v, indices, **kwargs))

    return rule


def outer_rule(ufunc: np.ufunc) -> Any:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        a, b = args
        (va, ba), (vb, bb) = unwrap(trace, a), unwrap(trace, b)
        nb = example_ndim(trace, b)
        if ba:  # (B, *a) -> (B, *a, 1...1) so that it meets b's axes at the end
            va = va.reshape(va.shape + (1,) * nb)
        else:
            va = np.reshape(va, np.shape(va) + (1,) * nb)
        if bb:
            vb = align_rank(vb, nb, nb + example_ndim(trace, a))
        return wrap_tree(trace, ufunc(va, vb, **kwargs))

    return rule


def at_rule(ufunc: np.ufunc) -> Any:
    """`ufunc.at(a, indices, b)` in place -> the updated copy of `a` (assigned by caller)."""

    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        from .indexing import batched_index

        a, indices, *rest = args
        base = bcast_batch(trace, a).copy()
        idx, perm = batched_index(trace, example_ndim(trace, a), indices)
        extra = []
        if rest:
            b = rest[0]
            vb, bb = unwrap(trace, b)
            if bb or perm is not None:
                # the region's layout as NumPy makes it; `perm` turns it batch-front
                region = np.zeros((), dtype=np.bool_, like=like(base))
                region = np.broadcast_to(region, base.shape)[idx].shape
                desired = region if perm is None else tuple(region[p] for p in perm)
                if bb:
                    vb = align_rank(vb, example_ndim(trace, b), len(desired) - 1)
                if perm is not None:
                    vb = np.broadcast_to(vb, desired).transpose(np.argsort(perm))
            extra = [vb]
        ufunc.at(base, idx, *extra)
        return trace.wrap(base)

    return rule


_BATCH_RULES = {
    "__call__": call_rule,
    "reduce": reduce_rule,
    "accumulate": accumulate_rule,
    "reduceat": reduceat_rule,
    "outer": outer_rule,
    "at": at_rule,
}


def _batch_rule_default(prim: Any, ufunc: np.ufunc, method: str) -> None:
    factory = _BATCH_RULES.get(method)
    if factory is not None:
        register(prim, "batch", factory(ufunc))


register_ufunc_defaults(_batch_rule_default)


# -- derivatives -----------------------------------------------------------------------
# Elementwise rules are partials `d(ans, *args)` (see `vmapx._autodiff`); ufunc methods
# (`reduce`, `accumulate`, `outer`, ...) get theirs from one hook for every ufunc.


def _share(ans: Any, x: Any, y: Any) -> Any:
    """d max(x, y)/dx: 1 where x is the result, 1/2 where both are (ties split)."""
    mx = astype(x == ans, ans.dtype)
    my = astype(y == ans, ans.dtype)
    return mx / np.maximum(mx + my, 1)


def _abs_partial(ans: Any, x: Any) -> Any:
    if x.dtype.kind == "c":  # the gradient conj(z)/|z| of a real function of z
        return np.conj(x) / np.where(ans == 0, 1, ans)
    return np.sign(x)


def _complex_sign(x: Any) -> bool:
    """Whether `np.sign(x)` is `x / |x|` (NumPy 2, complex `x`; else piecewise constant)."""
    return NUMPY2 and x.dtype.kind == "c"


def _sign_parts(ans: Any, x: Any) -> tuple[Any, ...]:
    """d sign(z) = a dz + b conj(dz) with a = 1 / 2|z|, b = -sign(z)^2 / 2|z| (0 at 0)."""
    size = np.abs(x)
    a = np.where(size == 0, 0, 0.5 / np.where(size == 0, 1, size))
    return a, -ans * ans * a


def _sign_jvp(t: Any, ans: Any, x: Any, **kwargs: Any) -> Any:
    if not _complex_sign(x):
        return None
    a, b = _sign_parts(ans, x)
    return a * t + b * np.conj(t)


def _sign_vjp(ans: Any, x: Any, **kwargs: Any) -> Any:
    if not _complex_sign(x):
        return lambda g: None
    a, b = _sign_parts(ans, x)
    return lambda g: a * g + np.conj(b * g)


def _divide_dx(ans: Any, x: Any, y: Any) -> Any:
    if type(y) in (int, float, complex, bool) and y == 0:  # (Python's 1 / 0 raises)
        return np.divide(1, y).item()  # inf (or nan), as NumPy's `x / 0`, and a warning
    return 1 / y


def _pow_dx(ans: Any, x: Any, y: Any) -> Any:
    if type(y) in (int, float):  # x ** 2 is the common case
        return 2 * x if y == 2 else y * x ** (y - 1) if y != 0 else 0
    return np.where(y == 0, 0, y * x ** np.where(y == 0, 1, y - 1))


def _pow_dy(ans: Any, x: Any, y: Any) -> Any:
    return np.where(x == 0, 0, np.log(np.where(x == 0, 1, x))) * ans


def _fpow_dx(ans: Any, x: Any, y: Any) -> Any:
    return np.where(y == 0, 0, y * np.float_power(x, np.where(y == 0, 1, y - 1)))


_LN2, _LN10 = np.log(2.0), np.log(10.0)
defelementwise(np.add, 1, 1)
defelementwise(np.subtract, 1, -1)
defelementwise(np.negative, -1)
defelementwise(np.positive, 1)
defelementwise(np.multiply, lambda ans, x, y: y, lambda ans, x, y: x)
defelementwise(np.divide, _divide_dx, lambda ans, x, y: -ans / y)
defelementwise(np.reciprocal, lambda ans, x: -ans * ans)
defelementwise(np.square, lambda ans, x: 2 * x)
defelementwise(np.sqrt, lambda ans, x: 0.5 / ans)
defelementwise(np.cbrt, lambda ans, x: 1 / (3 * ans * ans))
defelementwise(np.power, _pow_dx, _pow_dy)
defelementwise(np.float_power, _fpow_dx, _pow_dy)
defelementwise(np.exp, lambda ans, x: ans)
defelementwise(np.exp2, lambda ans, x: ans * _LN2)
defelementwise(np.expm1, lambda ans, x: ans + 1)
defelementwise(np.log, lambda ans, x: 1 / x)
defelementwise(np.log2, lambda ans, x: 1 / (x * _LN2))
defelementwise(np.log10, lambda ans, x: 1 / (x * _LN10))
defelementwise(np.log1p, lambda ans, x: 1 / (1 + x))
defelementwise(np.logaddexp, lambda ans, x, y: np.exp(x - ans), lambda ans, x, y: np.exp(y - ans))
defelementwise(
    np.logaddexp2, lambda ans, x, y: np.exp2(x - ans), lambda ans, x, y: np.exp2(y - ans)
)
defelementwise(np.sin, lambda ans, x: np.cos(x))
defelementwise(np.cos, lambda ans, x: -np.sin(x))
defelementwise(np.tan, lambda ans, x: 1 + ans * ans)
defelementwise(np.arcsin, lambda ans, x: 1 / np.sqrt(1 - x * x))
defelementwise(np.arccos, lambda ans, x: -1 / np.sqrt(1 - x * x))
defelementwise(np.arctan, lambda ans, x: 1 / (1 + x * x))
defelementwise(np.sinh, lambda ans, x: np.cosh(x))
defelementwise(np.cosh, lambda ans, x: np.sinh(x))
defelementwise(np.tanh, lambda ans, x: 1 - ans * ans)
defelementwise(np.arcsinh, lambda ans, x: 1 / np.sqrt(x * x + 1))
defelementwise(np.arccosh, lambda ans, x: 1 / (np.sqrt(x - 1) * np.sqrt(x + 1)))
defelementwise(np.arctanh, lambda ans, x: 1 / (1 - x * x))


_FLOAT = np.dtype(np.float64)  # (a Python number's kind: not cast)


def _arctan2_operands(ans: Any, y: Any, x: Any) -> tuple[Any, Any, Any]:
    """`y`, `x` with integer arrays in the result's dtype, and `x² + y²`: an integer
    operand's square or negation in its own dtype would wrap (uint8 `-4` is 252)."""
    y, x = (
        astype(v, ans.dtype, copy=False) if getattr(v, "dtype", _FLOAT).kind in "biu" else v
        for v in (y, x)
    )
    return y, x, x * x + y * y


def _arctan2_dy(ans: Any, y: Any, x: Any) -> Any:
    y, x, squares = _arctan2_operands(ans, y, x)
    return x / squares


def _arctan2_dx(ans: Any, y: Any, x: Any) -> Any:
    y, x, squares = _arctan2_operands(ans, y, x)
    return -y / squares


defelementwise(np.arctan2, _arctan2_dy, _arctan2_dx)
defelementwise(np.hypot, lambda ans, x, y: x / ans, lambda ans, x, y: y / ans)
defelementwise([np.deg2rad, np.radians], np.pi / 180)
defelementwise([np.rad2deg, np.degrees], 180 / np.pi)
defelementwise([np.absolute, np.fabs], _abs_partial)
defelementwise(
    [np.maximum, np.minimum, np.fmax, np.fmin], _share, lambda ans, x, y: _share(ans, y, x)
)
defelementwise(np.fmod, 1, lambda ans, x, y: -np.trunc(x / y))
defelementwise(np.remainder, 1, lambda ans, x, y: -np.floor(x / y))
defelementwise(
    np.copysign, lambda ans, x, y: np.where(np.signbit(x) == np.signbit(ans), 1.0, -1.0), None
)
defelementwise(np.nextafter, 1, None)  # x1 moved by one unit in the last place
defelementwise(np.ldexp, lambda ans, x, i: np.ldexp(np.ones_like(ans), i), None)
defjvp(np.conjugate, lambda t, ans, x, **kw: np.conjugate(t))
defvjp(np.conjugate, lambda ans, x, **kw: np.conjugate)
defjvp(np.sign, _sign_jvp)
defvjp(np.sign, _sign_vjp)
# heaviside(x1, x2) is x2 where x1 == 0
defelementwise(
    np.heaviside,
    None,
    lambda ans, x1, x2: np.where(np.equal(x1, 0), np.ones_like(ans), np.zeros_like(ans)),
)
defzero([np.floor, np.ceil, np.trunc, np.rint, np.floor_divide, np.spacing])
defcomposite(np.divmod, lambda x, y, **kw: (np.floor_divide(x, y), np.remainder(x, y)))

# ufuncs NumPy does not export by name
_UMATH = umath_ufuncs()
if "_ones_like" in _UMATH:
    defzero(_UMATH["_ones_like"])
if "clip" in _UMATH:  # the result equals one operand: the derivative goes to it (x first)
    defelementwise(
        _UMATH["clip"],
        lambda ans, x, lo, hi: astype(ans == x, ans.dtype),
        lambda ans, x, lo, hi: astype((ans == lo) & (ans != x), ans.dtype),
        lambda ans, x, lo, hi: astype((ans == hi) & (ans != x) & (ans != lo), ans.dtype),
    )


def _modf(x: Any, **kwargs: Any) -> tuple[Any, ...]:
    whole = np.trunc(x)
    return x - whole, whole


def _frexp(x: Any, **kwargs: Any) -> tuple[Any, ...]:
    _, exponent = np.frexp(stop_gradient_leaf(x))
    return x * np.ldexp(np.ones_like(x), -exponent), exponent


defcomposite(np.modf, _modf)
defcomposite(np.frexp, _frexp)


# -- ufunc methods: reduce / accumulate / outer / reduceat ----------------------------


def _method_kwargs(
    args: tuple[Any, ...], kwargs: dict[Any, Any], names: tuple[str, ...]
) -> dict[Any, Any]:
    kw = _reduce_kwargs(args, kwargs, names)
    return {k: v for k, v in kw.items() if not (k == "out" and v is None)}


def _reduce_as(func: Any) -> Any:
    """`ufunc.reduce(x, axis=0, ...)` as the NumPy reduction `func(x, axis=axis, ...)`."""

    def impl(*args: Any, **kwargs: Any) -> Any:
        kw = _method_kwargs(args, kwargs, ("axis", "dtype", "out", "keepdims", "initial"))
        kw.setdefault("axis", 0)
        if func in (np.max, np.min, np.nanmax, np.nanmin):
            kw.pop("dtype", None)
        return func(args[0], **kw)

    return impl


def _logsumexp(exp: Any, log: Any) -> Any:
    """`logaddexp.reduce` (base e or 2): shifted by the maximum, which is a constant."""

    def impl(*args: Any, **kwargs: Any) -> Any:
        kw = _method_kwargs(args, kwargs, ("axis", "dtype", "out", "keepdims"))
        if set(kw) - {"axis", "dtype", "keepdims"}:
            return NotImplemented
        x, axis, keepdims = args[0], kw.get("axis", 0), kw.get("keepdims", False)
        m = np.max(stop_gradient_leaf(x), axis=axis, keepdims=True)
        m = np.where(np.isfinite(m), m, 0)
        out = log(np.sum(exp(x - m), axis=axis, keepdims=True)) + m
        return out if keepdims else np.squeeze(out, axis=_squeeze_axes(axis, x.ndim))

    return impl


def _squeeze_axes(axis: Any, ndim: int) -> tuple[Any, ...]:
    if axis is None:
        return tuple(range(ndim))
    if scalar_axis(axis, ndim):  # (0-d: no axis reduced, as NumPy's)
        return ()
    axes = axis if isinstance(axis, tuple) else (axis,)
    return tuple(a % ndim for a in axes)


def _accumulate_as(func: Any) -> Any:
    def impl(*args: Any, **kwargs: Any) -> Any:
        kw = _method_kwargs(args, kwargs, ("axis", "dtype", "out"))
        kw.setdefault("axis", 0)
        return func(args[0], **kw)

    return impl


def _outer(ufunc: np.ufunc) -> Any:
    def impl(a: Any, b: Any, **kwargs: Any) -> Any:
        a = np.reshape(a, np.shape(a) + (1,) * np.ndim(b))
        return ufunc(a, b, **kwargs)

    return impl


def _add_reduceat(*args: Any, **kwargs: Any) -> Any:
    """`np.add.reduceat` as a product with a constant 0/1 matrix of segments."""
    kw = _method_kwargs(args, kwargs, ("indices", "axis", "dtype", "out"))
    x, indices, axis = args[0], np.asarray(kw["indices"]), kw.get("axis", 0)
    n = x.shape[axis]
    stops = np.append(indices[1:], n)
    cols = np.arange(n)
    seg = (cols >= indices[:, None]) & (cols < np.maximum(stops, indices + 1)[:, None])
    xm = np.moveaxis(x, axis, -1)
    out = np.matmul(xm, seg.T.astype(x.dtype))
    return np.moveaxis(out, -1, axis)


_REDUCE_AS = {
    np.add: np.sum, np.multiply: np.prod, np.maximum: np.max, np.minimum: np.min,
    np.fmax: np.nanmax, np.fmin: np.nanmin,
}  # fmt: skip
_LOGSUMEXP = {np.logaddexp: (np.exp, np.log), np.logaddexp2: (np.exp2, np.log2)}


def _ufunc_method_derivatives(prim: Any, ufunc: np.ufunc, method: str) -> None:
    if method == "reduce":
        if ufunc in _REDUCE_AS:
            defcomposite(prim, _reduce_as(_REDUCE_AS[ufunc]))
        elif ufunc in _LOGSUMEXP:
            defcomposite(prim, _logsumexp(*_LOGSUMEXP[ufunc]))
    elif method == "accumulate":
        if ufunc is np.add:
            defcomposite(prim, _accumulate_as(np.cumsum))
        elif ufunc.nin == 2 and ufunc.nout == 1 and ufunc.signature is None:
            defvjp_argnum(prim, _scan_vjp(ufunc))
            defjvp_argnum(prim, _scan_jvp(ufunc))
    elif method == "outer" and ufunc.signature is None:
        defcomposite(prim, _outer(ufunc))
    elif method == "reduceat" and ufunc is np.add:
        defcomposite(prim, _add_reduceat)


# -- accumulate of any binary ufunc: the Jacobian of the scan ----------------------------


def _scan_jacobian(ufunc: np.ufunc, x: Any, out: Any) -> Any:
    """`J[..., i, j] = d out[j] / d x[i]` along the last axis of a scan
    `out[j] = ufunc(out[j-1], x[j])`: `b[i] * prod(a[i+1..j])` for `i <= j`, where
    `a`, `b` are the ufunc's partials. Built as a cumulative product over an (n, n)
    array, so it is exact when some partials are zero."""
    derivs = ufunc_primitive(ufunc, "__call__").rules.partials
    n = x.shape[-1]
    prev, cur, ans = out[..., :-1], x[..., 1:], out[..., 1:]
    a = np.broadcast_to(partial_value(derivs[0], ans, prev, cur), ans.shape)
    b = np.broadcast_to(partial_value(derivs[1], ans, prev, cur), ans.shape)
    ones = np.ones_like(out, shape=out.shape[:-1] + (1,))
    a = np.concatenate([ones, a], axis=-1)
    b = np.concatenate([ones, b], axis=-1)
    later = np.arange(n)[:, None] < np.arange(n)  # k > i
    steps = np.cumprod(np.where(later, a[..., None, :], 1), axis=-1)
    return np.where(np.arange(n)[:, None] <= np.arange(n), b[..., :, None] * steps, 0)


def _scan_args(args: tuple[Any, ...], kwargs: dict[Any, Any]) -> tuple[Any, int]:
    kw = _method_kwargs(args, kwargs, ("axis", "dtype", "out"))
    x = args[0]
    return x, kw.get("axis", 0) % max(x.ndim, 1)


def _scan_apply(ufunc: np.ufunc, x: Any, ans: Any, axis: int, v: Any, *, forward: bool) -> Any:
    """The scan's Jacobian applied to `v` (a tangent if `forward`, else a cotangent)."""
    if x.shape[axis] == 0:
        return None
    jac = _scan_jacobian(ufunc, np.moveaxis(x, axis, -1), np.moveaxis(ans, axis, -1))
    vm = np.moveaxis(v, axis, -1)
    out = np.matmul(vm[..., None, :], jac)[..., 0, :] if forward else (
        np.matmul(jac, vm[..., :, None])[..., 0])  # fmt: skip
    return np.moveaxis(out, -1, axis)


def _scan_jvp(ufunc: np.ufunc) -> Any:
    def jvp(argnum: Any, t: Any, ans: Any, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        if argnum != 0 or _scan_jacobian_missing(ufunc):
            raise NoRule(argnum, "jvp")
        x, axis = _scan_args(args, kwargs)
        return _scan_apply(ufunc, x, ans, axis, t, forward=True)

    return jvp


def _scan_vjp(ufunc: np.ufunc) -> Any:
    def maker(argnum: Any, ans: Any, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        if argnum != 0 or _scan_jacobian_missing(ufunc):
            raise NoRule(argnum, "vjp")
        x, axis = _scan_args(args, kwargs)
        return lambda g: _scan_apply(ufunc, x, ans, axis, g, forward=False)

    return maker


def _scan_jacobian_missing(ufunc: np.ufunc) -> bool:
    derivs = ufunc_primitive(ufunc, "__call__").rules.partials
    return derivs is None or len(derivs) != 2 or None in derivs


register_ufunc_defaults(_ufunc_method_derivatives)
