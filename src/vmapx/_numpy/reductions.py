"""Reductions and scans along axes: `axis=` names a per-example axis, so it shifts by one.

`axis=None` means "all of one example's axes": for reductions that accept a tuple it
becomes the tuple of axes 1..n; for those that flatten (`argmax`, `cumsum`, ...) the
batched value is reshaped to `(B, -1)` first.

Derivatives (see `vmapx._autodiff`): a reduction's derivative is a weight per element:
`d ans / d x` (the where-mask for `sum`, `1/n` for `mean`, the tie-split argmax mask for
`max`, the product of the other elements for `prod`). JVP: `sum(t * w)`; VJP: `g`
broadcast back, times `w`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, cast

import numpy as np

from .._autodiff import NoRule, defcomposite, defjvp_argnum, deflinear, defvjp, defvjp_argnum
from .._batching import (
    BatchTrace,
    aligned_operands,
    bcast_batch,
    defbatch,
    example_ndim,
    is_batched,
    unwrap,
)
from .._compat import astype, present
from .._plain import PLAIN_ARRAYS
from .._registry import builder, get_arg, set_arg
from .._rule_helpers import (
    batch_axis_fastest,
    flat_shape,
    in_example_order,
    scalar_axis,
    shift_axis,
    shift_one,
)


def _axis_rule(*, axis_pos: int, flatten_none: bool, operand_kw: tuple[str, ...] = ()) -> Any:
    """Factory of rules for `func(a, ..., axis=..., ...)` with the array first.

    `operand_kw` names keyword operands shaped like `a` (`where=`, `weights=`) that may
    be batched too.
    """

    def factory(func: Callable[..., Any]) -> Callable[..., Any]:
        def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
            x = args[0]
            nd = example_ndim(trace, x)
            extra = {k: kwargs[k] for k in operand_kw if kwargs.get(k) is not None}
            if any(is_batched(trace, v) for v in extra.values()):
                v, *others = aligned_operands(trace, (x, *extra.values()))
                if not is_batched(trace, x):
                    v = bcast_batch(trace, x)
                kwargs = {**kwargs, **dict(zip(extra, others, strict=True))}
            else:
                v = unwrap(trace, x)[0]
            axis = get_arg(args, kwargs, axis_pos, "axis")
            if flatten_none and (axis is None or scalar_axis(axis, nd)):
                # (axis 0 or -1 of a 0-d example: NumPy's one-element 1-d view of it)
                v = v.reshape(flat_shape(v))
                axis = 1
                if kwargs.get("keepdims"):
                    return _keepdims_flat(trace, func, v, args, kwargs, axis_pos, nd)
            elif _reduces_no_axis(func, v, axis, nd):
                axis = ()
            elif flatten_none and not _masks_nan_first(func, v):
                axis = shift_one(axis, nd)  # (an int only: a tuple is NumPy's TypeError)
            elif isinstance(axis, tuple | list):
                axis = shift_axis(tuple(axis), nd)
            else:
                axis = shift_axis(axis, nd)
            if func in (np.sum, np.mean) and _short_last_axis(v, axis, args, kwargs):
                total = sum_of_short_rows(v, kwargs.get("keepdims", False))
                # (NumPy's mean is that sum divided by the count, in the same dtype)
                return trace.wrap(total if func is np.sum else total / v.shape[-1])
            if func in (np.sum, np.mean) and _short_inner_rows(v, axis, args, kwargs):
                along = axis[0] if type(axis) is tuple else axis
                total = _sum_of_slices(v, along, kwargs.get("keepdims", False))
                return trace.wrap(total if func is np.sum else total / v.shape[along])
            if func is np.sum and _last_axis_across_batch(v, axis, args, kwargs):
                return trace.wrap(_sum_pairwise_columns(v, kwargs.get("keepdims", False)))
            if func in (np.var, np.std) and _short_rows_spread(v, axis, args, kwargs):
                return trace.wrap(_spread_of_columns(func, v, kwargs))
            if func is np.cumsum and _short_last_axis(v, axis, args, kwargs):
                return trace.wrap(_cumsum_of_columns(v))
            extreme = _EXTREMES.get(func)
            if extreme is not None and _short_rows(v, axis, args, kwargs):
                return trace.wrap(_fold_columns(extreme, v, kwargs.get("keepdims", False)))
            if func in _ADDING and _covers_last_axis(v, axis):
                v = in_example_order(v)  # (the loop's pairwise order, not the batch's)
            args, kwargs = set_arg((v, *args[1:]), kwargs, axis_pos, "axis", axis)
            return trace.wrap(func(*args, **kwargs))

        return rule

    return factory


# NumPy's reductions whose axis 0 or -1 of a 0-d example reduces no axis (`scalar_axis`):
# ufunc reductions, and the nan* means and spreads through their NaN-masked sums, which
# they take for inexact (and object) dtypes only: other dtypes go to `np.mean`/`np.var`,
# which count the elements along the axis (NumPy's AxisError, as for `np.mean` itself).
_COUNTING = frozenset((np.mean, np.var, np.std))
_NAN_COUNTING = frozenset((np.nanmean, np.nanvar, np.nanstd))


def _reduces_no_axis(func: Callable[..., Any], v: Any, axis: Any, nd: int) -> bool:
    """Whether NumPy's `func` reduces no axis of `v`'s 0-d examples for `axis`."""
    if not scalar_axis(axis, nd) or func in _COUNTING:
        return False
    return func not in _NAN_COUNTING or np.dtype(v.dtype).kind in "fcO"


def _masks_nan_first(func: Callable[..., Any], v: Any) -> bool:
    """Whether NumPy's `func` reduces the NaN mask of `v` along `axis` before its
    `argmax`/`argmin` (the nan* forms, for inexact dtypes): a tuple axis passes there,
    or fails as a reduction's does (AxisError for a 0-d example), not as a TypeError."""
    return func in (np.nanargmax, np.nanargmin) and np.dtype(v.dtype).kind in "fcO"


# the reductions that add along their axes (NumPy's pairwise order: see in_example_order)
_ADDING = frozenset((np.sum, np.mean, np.nansum, np.nanmean, np.std, np.var, np.nanstd, np.nanvar))


def _covers_last_axis(v: Any, axis: Any) -> bool:
    last = v.ndim - 1
    return axis is None or axis == last or (isinstance(axis, tuple) and last in axis)


# NumPy reduces a short contiguous last axis one row at a time (a C call per row: slow
# for a big batch of short rows, w7/w8 of the benchmarks); for fewer than 8 float32 or
# float64 entries its pairwise sum is sequential from 0.0, so adding the columns in
# order gives the same bits, but for the sign of a zero whose terms are all -0.0
# (-0.0 here, 0.0 there; an extra pass over the result would cost w7 and w8 ~10%).
# float16 (summed in float32) and complex rows take NumPy's own path.
_SHORT_AXIS = 7
_SHORT_AXIS_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _short_last_axis(v: Any, axis: Any, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> bool:
    return (
        type(v) in PLAIN_ARRAYS
        and axis in (v.ndim - 1, (v.ndim - 1,))
        and 1 < v.shape[-1] <= _SHORT_AXIS
        and v.dtype in _SHORT_AXIS_DTYPES
        and len(args) <= 2
        and kwargs.keys() <= {"axis", "keepdims"}
    )


def sum_of_short_rows(v: np.ndarray, keepdims: bool) -> np.ndarray:
    """`np.sum(v, axis=-1, keepdims=keepdims)` of a short last axis (see above and
    `has_short_rows`), column by column."""
    return _fold_columns(np.add, v, keepdims)


def _fold_columns(ufunc: np.ufunc, v: np.ndarray, keepdims: bool) -> np.ndarray:
    """`ufunc` over the columns of `v`'s last axis in turn, into the first result."""
    out = ufunc(v[..., 0], v[..., 1])
    for j in range(2, v.shape[-1]):
        if type(out) is np.ndarray:
            ufunc(out, v[..., j], out=out)
        else:  # under `vmapx.jit`'s recording (`out=` would be a copy and a write)
            out = ufunc(out, v[..., j])
    return cast("np.ndarray[Any, Any]", out[..., None] if keepdims else out)


# A sum over an axis that is not the last (the tokens of `E[tokens].mean(axis=0)`, (B, L,
# D) summed over L) runs NumPy's loop over the trailing D elements for each (b, l): for a
# short D that loop is mostly overhead (D=16: 1.07 ms for (4096, 8, 16)). Adding the L
# slices (B, D) in turn is 2-3.5x faster up to D=16, and slower from D=64 on. Same bits:
# NumPy adds along such an axis of a C-contiguous array in order, one slice after the
# other (its pairwise sum is for the contiguous last axis only), for the batch as for the
# loop's (L, D) example, starting from 0.0. Not for D=1 (the axis is contiguous: pairwise).
_INNER_ROWS = 16  # trailing elements per slice, at most...
_INNER_SLICES = 64  # ...and slices to add, at most...
_INNER_MIN_SIZE = 1 << 14  # ...in an array of at least this many elements


def _short_inner_rows(v: Any, axis: Any, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> bool:
    if type(axis) is tuple:
        if len(axis) != 1:
            return False
        axis = axis[0]
    return (
        type(v) is np.ndarray  # (its layout is read: not under `vmapx.jit`'s recording)
        and type(axis) is int
        and 0 < axis < v.ndim - 1
        and 2 <= v.shape[axis] <= _INNER_SLICES
        and 2 <= math.prod(v.shape[axis + 1 :]) <= _INNER_ROWS
        and v.size >= _INNER_MIN_SIZE
        and v.dtype in _SHORT_AXIS_DTYPES
        and v.flags.c_contiguous
        and len(args) <= 2
        and kwargs.keys() <= {"axis", "keepdims"}
    )


def _sum_of_slices(v: np.ndarray, axis: int, keepdims: bool) -> np.ndarray:
    """`np.sum(v, axis=axis, keepdims=keepdims)` as the slices along `axis` added in
    order (see above)."""
    index: list[Any] = [slice(None)] * v.ndim
    index[axis] = 0
    out = v[tuple(index)] + 0.0  # (NumPy adds from 0.0: a sum of -0.0s is 0.0)
    for k in range(1, v.shape[axis]):
        index[axis] = k
        out += v[tuple(index)]
    return np.expand_dims(out, axis) if keepdims else out


# An array whose batch axis is last in memory (`ufuncs._with_batch_axis_last` makes them,
# and a batch mapped along an example's last axis is one) is summed over its last axis by
# NumPy one batch row at a time, in order; the loop's example has that axis contiguous and
# NumPy sums it pairwise (eight running sums combined as a tree), which rounds differently
# from 8 entries on. Up to 16 entries the columns are added in that order (each addition
# over a whole row of the batch); longer rows are copied to C order and summed by NumPy.
# Either way: the loop's bits.
_PAIRWISE_COLUMNS = 16


def _last_axis_across_batch(
    v: Any, axis: Any, args: tuple[Any, ...], kwargs: dict[Any, Any]
) -> bool:
    return (
        type(v) is np.ndarray  # (its strides are read: not under `vmapx.jit`'s recording)
        and axis in (v.ndim - 1, (v.ndim - 1,))
        and v.shape[-1] >= 8
        and batch_axis_fastest(v)
        and v.dtype in _SHORT_AXIS_DTYPES
        and len(args) <= 2
        and kwargs.keys() <= {"axis", "keepdims"}
    )


def _sum_pairwise_columns(v: np.ndarray, keepdims: bool) -> np.ndarray:
    n = v.shape[-1]
    if n > _PAIRWISE_COLUMNS:
        return cast("np.ndarray[Any, Any]", np.ascontiguousarray(v).sum(-1, keepdims=keepdims))
    col = [v[..., j] for j in range(n)]
    p = [col[j] + col[j + 8] if j + 8 < n and n == 16 else col[j] for j in range(8)]
    total = ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]))
    for j in range(16 if n == 16 else 8, n):
        total += col[j]
    return cast("np.ndarray[Any, Any]", total[..., None] if keepdims else total)


# NumPy's max/min over a short last axis also run one C call per row (w15's batch of
# (4096 * 64) rows of 8: ~35 ns a row); the columns' `np.maximum`/`np.minimum` in turn
# give the same values, NaNs and signed zeros (checked against every row of -0.0, 0.0,
# nan, +-inf, +-1 up to 5 entries, and the integer and boolean dtypes).
_EXTREMES: dict[Any, np.ufunc] = {
    np.max: np.maximum,
    np.amax: np.maximum,
    np.min: np.minimum,
    np.amin: np.minimum,
}
_EXTREME_AXIS = 16
_EXTREME_MIN_ROWS = 256  # (fewer rows: NumPy's one call costs less than a call per column)


def _short_rows(v: Any, axis: Any, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> bool:
    return (
        type(v) in PLAIN_ARRAYS
        and axis in (v.ndim - 1, (v.ndim - 1,))
        and 1 < v.shape[-1] <= _EXTREME_AXIS
        and v.dtype.kind in "biuf"
        and v.size >= _EXTREME_MIN_ROWS * v.shape[-1]
        and len(args) <= 2
        and kwargs.keys() <= {"axis", "keepdims"}
    )


def _short_rows_spread(v: Any, axis: Any, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> bool:
    """Whether `np.var`/`np.std` here is NumPy's steps on a short last axis of float32 or
    float64 rows (no `dtype`, `where`, `mean`, a number `ddof` below the count)."""
    ddof = kwargs.get("ddof", 0)
    return (
        type(ddof) in (int, float)
        and ddof < v.shape[-1]
        and _short_last_axis(v, axis, args, {k: w for k, w in kwargs.items() if k != "ddof"})
    )


def _spread_of_columns(func: Any, v: np.ndarray, kwargs: dict[Any, Any]) -> np.ndarray:
    """NumPy's `_var` (and `_std`'s square root of it) with its sums by columns: the mean
    as the sum divided by the count, the squared deviations summed, divided by the
    count less `ddof`: the same operations in the same order, the loop's bits."""
    n = v.shape[-1]
    deviation = v - sum_of_short_rows(v, True) / n
    var = sum_of_short_rows(deviation * deviation, kwargs.get("keepdims", False))
    var = var / (n - kwargs.get("ddof", 0))
    return cast("np.ndarray[Any, Any]", np.sqrt(var) if func is np.std else var)


def _cumsum_of_columns(v: np.ndarray) -> np.ndarray:
    """`np.cumsum` over a short last axis column by column: NumPy accumulates a row in
    order too (the loop's bits), but one C call per row."""
    out = np.empty_like(v, subok=False) if type(v) is np.ndarray else None
    if out is None:  # (under `vmapx.jit`'s recording: the same additions, joined)
        columns = [v[..., 0]]
        for j in range(1, v.shape[-1]):
            columns.append(columns[-1] + v[..., j])
        return cast("np.ndarray[Any, Any]", np.stack(columns, axis=-1))
    out[..., 0] = v[..., 0]
    for j in range(1, v.shape[-1]):
        np.add(out[..., j - 1], v[..., j], out=out[..., j])
    return out


def has_short_rows(v: Any, axis: Any) -> bool:
    """Whether `axis` is a short last axis of float32 or float64 rows of `v`, which
    `sum_of_short_rows` sums with NumPy's bits (faster than NumPy for many rows)."""
    return _short_last_axis(v, axis, (v,), {})


def sum_last_axis(x: np.ndarray) -> np.ndarray:
    """`np.sum(x, axis=-1)` of a plain array as the batching rule of `np.sum` computes it
    (a short last axis added column by column: see `sum_of_short_rows`)."""
    if _short_last_axis(x, x.ndim - 1, (x,), {}):
        return sum_of_short_rows(x, False)
    return cast("np.ndarray[Any, Any]", np.sum(x, axis=-1))


def _keepdims_flat(
    trace: Any, func: Any, v: Any, args: Any, kwargs: Any, axis_pos: Any, nd: Any
) -> Any:  # noqa: ANN001, ANN202
    args, kwargs = set_arg((v, *args[1:]), kwargs, axis_pos, "axis", 1)
    out = func(*args, **kwargs)
    return trace.wrap(out.reshape((out.shape[0],) + (1,) * nd))


def _params(
    args: tuple[Any, ...], kwargs: dict[Any, Any], names: tuple[str, ...]
) -> dict[Any, Any]:
    params = dict(zip(names, args[1:], strict=False))
    params.update(kwargs)
    return params


def _axes(ndim: int, axis: Any, scalar_ok: bool = True) -> tuple[int, ...]:
    """The example's axes a reduction reduces (none for axis 0 or -1 of a 0-d example,
    as NumPy's ufunc reductions, unless not `scalar_ok`: see `scalar_axis`)."""
    if axis is None:
        return tuple(range(ndim))
    if scalar_ok and scalar_axis(axis, ndim):
        return ()
    axis = tuple(axis) if isinstance(axis, tuple | list) else (axis,)
    return tuple(sorted(shift_one(a, ndim) - 1 for a in axis))


def _kept_shape(shape: tuple[Any, ...], axes: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(1 if i in axes else d for i, d in enumerate(shape))


def _count(x: Any, axes: tuple[Any, ...], mask: Any) -> Any:
    if mask is True:
        return int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    return np.sum(np.broadcast_to(mask, x.shape), axis=axes, keepdims=True)


def others_product(x: Any, axes: tuple[Any, ...]) -> Any:
    """For each element, the product of the others along `axes` (exact with zeros)."""
    rest = [a for a in range(x.ndim) if a not in axes]
    perm = (*rest, *axes)
    lead = tuple(x.shape[a] for a in rest)
    n = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    if n == 0:  # an empty reduction: no element to weigh
        return np.zeros_like(x)
    xm = np.reshape(np.transpose(x, perm), (*lead, n))
    ones = np.ones_like(xm, shape=(*lead, 1))
    left = np.cumprod(np.concatenate([ones, xm[..., :-1]], axis=-1), axis=-1)
    right = np.cumprod(np.concatenate([ones, xm[..., :0:-1]], axis=-1), axis=-1)[..., ::-1]
    w = np.reshape(left * right, tuple(x.shape[a] for a in perm))
    return np.transpose(w, tuple(np.argsort(perm)))


def _w_sum(x: Any, ans: Any, axes: tuple[Any, ...], where: Any, initial: Any) -> Any:
    return None if where is True else where


def _w_nansum(x: Any, ans: Any, axes: tuple[Any, ...], where: Any, initial: Any) -> Any:
    return ~np.isnan(x) & where


def _w_mean(x: Any, ans: Any, axes: tuple[Any, ...], where: Any, initial: Any) -> Any:
    n = _count(x, axes, where)
    if where is True:
        return 1 / n if n else 0.0  # (an empty mean: no element to weigh)
    return where / n


def _w_nanmean(x: Any, ans: Any, axes: tuple[Any, ...], where: Any, initial: Any) -> Any:
    mask = ~np.isnan(x) & where
    return mask / np.sum(mask, axis=axes, keepdims=True)


def _w_extreme(x: Any, ans: Any, axes: tuple[Any, ...], where: Any, initial: Any) -> Any:
    """Ties share the derivative equally (the mask of the extreme, over its count); an
    `initial` equal to the extreme is one of the tied (its share goes nowhere)."""
    mask = x == ans
    if where is not True:
        mask = mask & where
    mask = astype(mask, x.dtype)
    count = np.sum(mask, axis=axes, keepdims=True)
    if initial is not None:
        count = count + (ans == initial)
    return mask / np.maximum(count, 1)


def _w_prod(x: Any, ans: Any, axes: tuple[Any, ...], where: Any, initial: Any) -> Any:
    if where is True:
        w = others_product(x, axes)
    else:
        w = others_product(np.where(where, x, 1), axes) * where
    return w if initial is None else w * initial  # (`initial` is one more factor)


def _w_nanprod(x: Any, ans: Any, axes: tuple[Any, ...], where: Any, initial: Any) -> Any:
    keep = ~np.isnan(x) & where
    w = others_product(np.where(keep, x, 1), axes) * keep
    return w if initial is None else w * initial


def _contractible(t: Any, w: Any, x: Any) -> bool:
    """Whether `sum(t * w)` may be one contraction: a weight of the operand's own shape
    (the extremes' tie-split mask, the products of the others), a float or complex tangent
    and few enough axes for einsum's labels."""
    return (
        getattr(w, "shape", None) == x.shape
        and getattr(t, "shape", None) == x.shape
        and 0 < x.ndim <= _MAX_LABELS
        and np.dtype(t.dtype).kind in "fc"
        and np.dtype(w.dtype).kind in "fc"
    )


_MAX_LABELS = 24  # (of einsum's 52, half for vmap's batch letters on the way down)
_LABEL_CHARS = "abcdefghijklmnopqrstuvwx"


def weighted_sum(t: Any, w: Any, axes: tuple[int, ...], kept: tuple[int, ...] | None) -> Any:
    """`np.sum(t * w, axis=axes)` (shaped `kept` if given) as one `np.einsum` contraction:
    the tangent-sized product `t * w` is never formed. Under `vmap` of a Jacobian the
    tangent carries the basis as well (`jacfwd`, `hessian`), and the contraction is one
    matrix product instead of a basis-sized product and a sum over a short axis. Only the
    order of the additions differs from the product and the sum (rounding)."""
    labels = _LABEL_CHARS[: t.ndim]
    out = "".join(c for i, c in enumerate(labels) if i not in axes)
    total = np.einsum(f"{labels},{labels}->{out}", t, w)
    return total if kept is None else np.reshape(total, kept)


@builder
def _reduction_rules(
    funcs: list[Any], names: tuple[str, ...], weights: Callable[..., Any], nan: bool = False
) -> None:
    """JVP and VJP of `funcs` from their `weights`; `nan`: NaN elements are left out, so
    are their tangents (a NaN tangent times a zero weight would be NaN) and cotangents."""

    def setup(args: tuple[Any, ...], kwargs: dict[Any, Any], ans: Any) -> tuple[Any, ...]:
        p = _params(args, kwargs, names)
        x = args[0]
        axes = _axes(x.ndim, p.get("axis"))
        keepdims = bool(p.get("keepdims", False))
        kept = _kept_shape(x.shape, axes)
        ans_kept = ans if keepdims else np.reshape(ans, kept)
        initial = p.get("initial")
        initial = None if initial is np._NoValue else initial  # (NumPy's "not given")
        return x, axes, keepdims, kept, weights(x, ans_kept, axes, p.get("where", True), initial)

    def jvp(argnum: Any, t: Any, ans: Any, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        if argnum != 0:
            raise NoRule(argnum, "jvp")
        x, axes, keepdims, kept, w = setup(args, kwargs, ans)
        if nan:
            t = np.where(np.isnan(x), 0, t)
        if w is not None and _contractible(t, w, x):
            return weighted_sum(t, w, axes, kept if keepdims else None)
        return np.sum(t if w is None else t * w, axis=axes, keepdims=keepdims)

    def vjp(
        argnum: Any, ans: Any, args: tuple[Any, ...], kwargs: dict[Any, Any]
    ) -> Callable[..., Any]:
        if argnum != 0:
            raise NoRule(argnum, "vjp")
        x, axes, keepdims, kept, w = setup(args, kwargs, ans)
        if w is None:
            return lambda g: np.reshape(g, kept)
        if nan:  # (so the pullback's own derivatives leave the NaN elements out too)
            return lambda g: np.where(np.isnan(x), 0, np.reshape(g, kept) * w)
        return lambda g: np.reshape(g, kept) * w

    defjvp_argnum(funcs, jvp)
    defvjp_argnum(funcs, vjp)


# func(a, axis=None, ..., where=...) reducing over a tuple of axes
defbatch(
    [np.sum, np.prod, np.max, np.min, np.amax, np.amin, np.all, np.any, np.mean,
     np.nansum, np.nanprod, np.nanmax, np.nanmin, np.nanmean],
    _axis_rule(axis_pos=1, flatten_none=False, operand_kw=("where",)),
)  # fmt: skip
_SUM_ARGS = ("axis", "dtype", "out", "keepdims", "initial", "where")
_MAX_ARGS = ("axis", "out", "keepdims", "initial", "where")
_reduction_rules([np.sum], _SUM_ARGS, _w_sum)
_reduction_rules([np.nansum], _SUM_ARGS, _w_nansum, nan=True)
_reduction_rules([np.mean], _SUM_ARGS[:4], _w_mean)
_reduction_rules([np.nanmean], _SUM_ARGS[:4], _w_nanmean, nan=True)
_reduction_rules([np.prod], _SUM_ARGS, _w_prod)
_reduction_rules([np.nanprod], _SUM_ARGS, _w_nanprod, nan=True)
_reduction_rules([np.max, np.min, np.amax, np.amin], _MAX_ARGS, _w_extreme)
_reduction_rules([np.nanmax, np.nanmin], _MAX_ARGS, _w_extreme, nan=True)
defbatch(
    [np.std, np.var, np.nanstd, np.nanvar],
    _axis_rule(axis_pos=1, flatten_none=False, operand_kw=("where", "mean")),
)


def _variance(nan: bool, root: bool) -> Callable[..., Any]:
    """`np.var`/`np.std` (and the nan* forms) in differentiable NumPy calls."""

    def impl(x: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: Any = 0,
             keepdims: bool = False, *, where: Any = True, mean: Any = None,
             correction: Any = None) -> Any:  # fmt: skip
        if out is not None or mean is not None:
            return NotImplemented
        if correction is not None:
            ddof = correction
        # (NumPy's nan* forms reduce no axis for axis 0 of a 0-d example; var and std
        # count the elements along it: AxisError. See `_reduces_no_axis`)
        axes = _axes(x.ndim, axis, scalar_ok=nan and np.dtype(x.dtype).kind in "fcO")
        mask = (~np.isnan(x) & where) if nan else where
        if mask is True:
            n = _count(x, axes, True)
            d = x - np.mean(x, axis=axes, dtype=dtype, keepdims=True)
        else:
            n = np.sum(np.broadcast_to(mask, x.shape), axis=axes, keepdims=True)
            xz = np.where(mask, x, 0)
            d = np.where(mask, x - np.sum(xz, axis=axes, dtype=dtype, keepdims=True) / n, 0)
            if not keepdims:
                n = np.reshape(n, tuple(s for i, s in enumerate(n.shape) if i not in axes))
        sq = np.real(d * np.conjugate(d)) if d.dtype.kind == "c" else d * d
        dof = n - ddof
        if type(dof) is int and dof <= 0:  # NumPy's nan or inf, not Python's ZeroDivisionError
            dof = np.float64(dof)
        var = np.sum(sq, axis=axes, keepdims=keepdims) / dof
        if root and mask is True and math.prod(x.shape[a] for a in axes) == 1:
            return var  # identically 0 (its square root has no derivative there)
        return np.sqrt(var) if root else var

    return impl


defcomposite(np.var, _variance(nan=False, root=False))
defcomposite(np.std, _variance(nan=False, root=True))
defcomposite(np.nanvar, _variance(nan=True, root=False))
defcomposite(np.nanstd, _variance(nan=True, root=True))
defbatch([np.ptp, np.count_nonzero], _axis_rule(axis_pos=1, flatten_none=False))


defcomposite(
    np.ptp,
    lambda x, axis=None, out=None, keepdims=False: (
        np.max(x, axis=axis, keepdims=keepdims) - np.min(x, axis=axis, keepdims=keepdims)
    ),
)
# func(a, axis=None, ...) where None flattens the example first
defbatch(
    [np.argmax, np.argmin, np.nanargmax, np.nanargmin, np.cumsum, np.cumprod,
     np.nancumsum, np.nancumprod],
    _axis_rule(axis_pos=1, flatten_none=True),
)  # fmt: skip


# scans: cumsum is linear (its transpose sums from the end); cumprod is the scan of
# `np.multiply`, whose derivative `np.multiply.accumulate` has (see ufuncs.py)
def _reversed_along(x: Any, axis: int) -> Any:
    return x[(slice(None),) * axis + (slice(None, None, -1),)]


def _cumsum_vjp(
    ans: Any, x: Any, axis: Any = None, *args: Any, **kwargs: Any
) -> Callable[..., Any]:
    def pull(g: Any) -> Any:
        if axis is None or scalar_axis(axis, x.ndim):  # (0-d: its one-element view)
            return np.reshape(np.cumsum(g[::-1])[::-1], x.shape)
        ax = shift_one(axis, x.ndim) - 1
        return _reversed_along(np.cumsum(_reversed_along(g, ax), axis=ax), ax)

    return pull


deflinear(np.cumsum)
defvjp(np.cumsum, _cumsum_vjp)


def _cumprod(x: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> Any:
    if out is not None:
        return NotImplemented
    if axis is None or scalar_axis(axis, x.ndim):  # (0-d: its one-element view)
        x, axis = np.ravel(x), 0
    return np.multiply.accumulate(x, axis=axis, dtype=dtype)


def _nan_scan(func: Callable[..., Any], fill: float) -> Callable[..., Any]:
    def impl(x: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> Any:
        if out is not None:
            return NotImplemented
        return func(np.where(np.isnan(x), fill, x), axis=axis, dtype=dtype)

    return impl


defcomposite(np.cumprod, _cumprod)
defcomposite(np.nancumsum, _nan_scan(np.cumsum, 0.0))
defcomposite(np.nancumprod, _nan_scan(np.cumprod, 1.0))


def _cumulative_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    """`np.cumulative_sum(x, axis=None, ..., include_initial=False)`: axis is optional
    only for 1-d examples."""

    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        v = unwrap(trace, args[0])[0]
        axis = get_arg(args, kwargs, 1, "axis")
        nd = example_ndim(trace, args[0])
        if nd == 0:  # (NumPy's `atleast_1d` of the example: one element)
            v, nd = v.reshape(flat_shape(v)), 1
        if axis is None:
            if nd != 1:
                raise ValueError(f"axis must be given for a {nd}-d array in {func.__name__}")
            axis = 0
        # (`shift_axis`: NumPy takes a one-axis tuple too)
        args, kwargs = set_arg((v, *args[1:]), kwargs, 1, "axis", shift_axis(axis, nd))
        return trace.wrap(func(*args, **kwargs))

    return rule


defbatch(present(np, "cumulative_sum", "cumulative_prod"), _cumulative_rule)


def _cumulative(func: Callable[..., Any], fill: float) -> Callable[..., Any]:
    def impl(x: Any, /, *, axis: Any = None, dtype: Any = None, out: Any = None,
             include_initial: bool = False) -> Any:  # fmt: skip
        if out is not None:
            return NotImplemented
        if x.ndim == 0:  # (NumPy's `atleast_1d` of the example)
            x = np.reshape(x, (1,))
        if axis is None:
            if x.ndim != 1:
                return NotImplemented
            axis = 0
        c = func(x, axis=axis, dtype=dtype)
        if not include_initial:
            return c
        ax = shift_one(axis, x.ndim) - 1
        first = np.full_like(c, fill, shape=c.shape[:ax] + (1,) + c.shape[ax + 1 :])
        return np.concatenate([first, c], axis=ax)

    return impl


defcomposite(present(np, "cumulative_sum"), _cumulative(np.cumsum, 0.0))
defcomposite(present(np, "cumulative_prod"), _cumulative(np.cumprod, 1.0))
