"""Sorting and searching: `sort`, `argsort`, `partition`, `argpartition`, `lexsort`,
`sort_complex`, `searchsorted`, `digitize`.

Sorts run along a per-example axis (shifted by one): each example is sorted by the
same NumPy routine as alone, so results equal the loop bit for bit. `searchsorted`
with a batched sorted array has no NumPy counterpart: `search_rows` is a binary search
over all rows at once (a gather per halving step) in NumPy's sort order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .._autodiff import defjvp, defvjp
from .._batching import (
    BatchTrace,
    bcast_batch,
    defbatch,
    example_ndim,
    is_batched,
    loop_apply,
    loop_rule,
    unwrap,
    warn_fallback,
)
from .._compat import NUMPY2, normalize_axis_index
from .._core import Tracer, bind
from .._payload import like, moved
from .._registry import GETITEM, builder, get_arg, primitive, set_arg
from .._rule_helpers import flat_shape, shift_one, value_and_axis
from .._scalars import is_scalar
from .gather import along_axis_index, replay_errors, replaying, scatter

# -- sort, argsort, partition, argpartition --------------------------------------------


def _sort_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    """`func(a, axis=-1, ...)`; `axis=None` sorts each flattened example."""

    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        axis = get_arg(args, kwargs, 1, "axis", -1)  # (`np.argsort` views 0-d as 1-d)
        v, axis = value_and_axis(trace, args[0], axis, as_1d=func is np.argsort)
        args, kwargs = set_arg((v, *args[1:]), kwargs, 1, "axis", axis)
        return trace.wrap(func(*args, **kwargs))

    return rule


def _partition_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    """`func(a, kth, axis=-1, ...)`; a batched `kth` differs per example: loop."""

    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        if is_batched(trace, get_arg(args, kwargs, 1, "kth")):
            return loop_rule(trace, primitive(func), args, kwargs)
        x, axis = args[0], get_arg(args, kwargs, 2, "axis", -1)
        v, axis = value_and_axis(trace, x, axis, as_1d=func is np.argpartition)
        args, kwargs = set_arg((v, *args[1:]), kwargs, 2, "axis", axis)
        out = replaying(trace, func, args, kwargs, lambda: func(*args, **kwargs))
        return trace.wrap(out[:, 0] if _scalar_argpartition(trace, func, x) else out)

    return rule


def _scalar_argpartition(trace: BatchTrace, func: Callable[..., Any], x: Any) -> bool:
    """Whether NumPy 1's `np.argpartition` of a NumPy scalar example gives a scalar: its
    scalars have no `argpartition` method, and NumPy 1 wraps the array's one-element
    result back into a scalar (NumPy 2: the array)."""
    return (
        not NUMPY2
        and func is np.argpartition
        and isinstance(x, Tracer)
        and example_ndim(trace, x) == 0
        and is_scalar(x)
    )


def _lexsort_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    """`np.lexsort(keys, axis=-1)`: keys are a sequence of arrays (or one array whose
    first axis enumerates them), each shaped like one example's keys."""

    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        keys = get_arg(args, kwargs, 0, "keys")
        axis = get_arg(args, kwargs, 1, "axis", -1)
        if is_batched(trace, keys):  # (B, k, ...) -> (k, B, ...)
            stacked, nd = np.moveaxis(keys.val, 1, 0), keys.ndim - 1
        else:
            stacked = tuple(bcast_batch(trace, k) for k in keys)  # a tuple: NumPy dispatches
            nd = max((example_ndim(trace, k) for k in keys), default=0)
        run = lambda: np.lexsort(stacked, axis=shift_one(axis, nd))  # noqa: E731
        return trace.wrap(replaying(trace, func, args, kwargs, run))

    return rule


def _sort_complex_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        if example_ndim(trace, args[0]) == 0:  # NumPy sorts along axis -1: none here
            replay_errors(trace, func, args, kwargs)
        return trace.wrap(func(unwrap(trace, args[0])[0]))

    return rule


defbatch([np.sort, np.argsort], _sort_rule)


# -- derivatives: a sort moves elements. With `perm` the source of each output position
# (`ans == take_along_axis(a, perm)`), the JVP gathers the tangent and the VJP writes the
# cotangent back (a permutation: no position twice). Ties follow the stable order.


def _sort_perm(ans: Any, a: Any, axis: Any = -1, *args: Any, **kwargs: Any) -> Any:
    return np.argsort(a, axis=axis, kind="stable")


def _write_back(g: Any, perm: Any, shape: tuple[Any, ...], axis: Any) -> Any:
    """`out` of `shape` with `take_along_axis(out, perm, axis) == g` (`perm` a permutation)."""
    if axis is None:
        size = int(np.prod(shape, dtype=np.intp))
        return np.reshape(scatter(np.reshape(g, (-1,)), (size,), (perm,), add=False), shape)
    axis = normalize_axis_index(axis, len(shape))
    return scatter(g, shape, along_axis_index(shape, perm, axis), add=False)


@builder
def defpermutation(func: Callable[..., Any], perm_of: Callable[..., Any], axis_at: int) -> None:
    """Derivatives of `func(a, ...)`, which rearranges `a` along its `axis` (argument
    `axis_at`; None flattens): `perm_of(ans, a, ...)` finds where each output came from."""

    def axis_of(args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        return get_arg(args, kwargs, axis_at - 1, "axis", -1)

    def jvp(t: Any, ans: Any, a: Any, *args: Any, **kwargs: Any) -> Any:
        return np.take_along_axis(t, perm_of(ans, a, *args, **kwargs), axis_of(args, kwargs))

    def vjp(ans: Any, a: Any, *args: Any, **kwargs: Any) -> Callable[..., Any]:
        perm = perm_of(ans, a, *args, **kwargs)
        axis = axis_of(args, kwargs)
        return lambda g: _write_back(g, perm, a.shape, axis)

    defjvp(func, jvp)
    defvjp(func, vjp)


defpermutation(np.sort, _sort_perm, axis_at=1)
defbatch([np.partition, np.argpartition], _partition_rule)


def _partition_perm(ans: Any, a: Any, kth: Any, axis: Any = -1, *args: Any, **kwargs: Any) -> Any:
    """NumPy's partition arranges elements its own way (`argpartition` may arrange them
    otherwise): the r-th smallest element sits at `sorted_ans[r]` and comes from
    `sorted_a[r]`, the two stable argsorts."""
    from_a = np.argsort(a, axis=axis, kind="stable")
    at = np.argsort(ans, axis=axis, kind="stable")
    return _write_back(from_a, at, ans.shape, axis)


defpermutation(np.partition, _partition_perm, axis_at=2)
defbatch(np.lexsort, _lexsort_rule)
defbatch(np.sort_complex, _sort_complex_rule)
defpermutation(np.sort_complex, _sort_perm, axis_at=1)  # (by real part, then imaginary)


# -- searchsorted, digitize ------------------------------------------------------------


def search_rows(a: Any, v: Any, side: str = "left", *, check: bool = True) -> Any:
    """`np.searchsorted(a[b], v[b], side)` for every row `b` of the 2-d `a` and the 2-d
    queries `v`, in NumPy's sort order (NaN, NaT last): one branch-free binary search
    for all rows, its `log2(n)` halving steps the same for every query (a gather each).

    NumPy's answer for a row that is not sorted depends on its search's inner order:
    then (with `check`) the answer is None and the caller asks NumPy per example.
    """
    dtype = np.result_type(a, v)  # NumPy compares in the common type
    if dtype.kind not in _ORDERED:
        return None
    a, v = a.astype(dtype, copy=False), v.astype(dtype, copy=False)
    b, n = a.shape
    if check and n > 1 and _unsorted_rows(a):
        return None
    if n == 0:
        return np.zeros(v.shape, dtype=np.intp, like=like(v))
    before = _before(dtype.kind, side)
    found = _bisect(a, v.shape, lambda x: before(x, v))
    missing = _missing(dtype.kind)
    if missing is None:
        return found
    # plain comparisons with NaN are False, which is NumPy's order for a data NaN; a
    # NaN query goes after the numbers ("left") or after everything ("right")
    numbers = n if side == "right" else _bisect(a, (b, 1), lambda x: ~missing(x))
    return np.where(missing(v), numbers, found)


def _bisect(a: Any, shape: tuple[Any, ...], before: Callable[..., Any]) -> Any:
    """For each row of `a` (`(B, n)`, `n > 0`) and each query of `shape` (`(B, m)`), how
    many leading entries `x` of the row have `before(x)` (true, then false, along the
    row): a branch-free binary search whose halving steps are the same for every query."""
    b, n = a.shape
    flat = a.reshape(b * n)
    row = np.arange(b, dtype=np.intp, like=like(a)).reshape(b, 1) * n
    base = np.zeros(shape, dtype=np.intp, like=like(a))
    size = n
    while size > 1:  # `base + half` stays in the row
        half = size // 2
        base = base + half * before(_gather(flat, row + (base + half)))
        size -= half
    return base + before(_gather(flat, row + base))


def _gather(flat: Any, idx: Any) -> Any:
    # `flat[idx]` dispatched: the indices may be traced by an outer vmap
    return bind(GETITEM, (flat, idx), {})


_ORDERED = "biufcmMUS"  # dtype kinds with an order `search_rows` knows


def _missing(kind: str) -> Callable[..., Any] | None:
    return np.isnan if kind == "f" else np.isnat if kind in "mM" else None


def _before(kind: str, side: str) -> Callable[..., Any]:
    """Whether data `x` goes before query `y`: `x < y` ("left") or `x <= y` ("right")."""
    if kind == "c":
        return _complex_less if side == "left" else lambda x, y: ~_complex_less(y, x)
    return np.less if side == "left" else np.less_equal


def _unsorted_rows(a: Any) -> bool:
    """Whether some row is out of NumPy's sort order (NaN and NaT after everything)."""
    left, right = a[:, :-1], a[:, 1:]
    if a.dtype.kind == "c":
        return bool(np.any(_complex_less(right, left)))
    if bool(np.all(left <= right)):  # the common case, in one pass
        return False
    missing = _missing(a.dtype.kind)
    if missing is None:
        return True
    # `<=` is False next to a NaN too: out of order is a number after a larger value
    # or after a NaN
    return bool(np.any(~(left <= right) & ~missing(right)))


def _complex_less(x: Any, y: Any) -> Any:
    """NumPy's order of complex numbers (lexicographic, NaN parts last)."""
    xr, xi, yr, yi = np.real(x), np.imag(x), np.real(y), np.imag(y)
    xi_nan, yi_nan = np.isnan(xi), np.isnan(yi)
    same_real = (xr == yr) | (np.isnan(xr) & np.isnan(yr))
    return np.where(
        xr < yr,
        ~xi_nan | yi_nan,
        np.where(
            xr > yr,
            yi_nan & ~xi_nan,
            np.where(same_real, (xi < yi) | (yi_nan & ~xi_nan), np.isnan(yr)),
        ),
    )


def _unsorted(
    trace: BatchTrace, func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[Any, Any]
) -> Any:
    """NumPy's own search per example, for arrays that are not sorted (or not ordered)."""
    warn_fallback(trace, f"`np.{func.__name__}` of an array that is not sorted")
    return loop_apply(trace, func, args, kwargs, f"np.{func.__name__}")


def _rows(trace: BatchTrace, x: Any) -> tuple[Any, tuple[Any, ...]]:
    """`(B, size)` queries and the per-example shape to give the answer back."""
    v = np.asarray(x) if not hasattr(x, "dtype") else x  # NumPy's own scalar conversion
    v = bcast_batch(trace, v)
    return v.reshape(flat_shape(v)), v.shape[1:]


def _searchsorted_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        a, v = args[0], get_arg(args, kwargs, 1, "v")
        side = get_arg(args, kwargs, 2, "side", "left")
        sorter = get_arg(args, kwargs, 3, "sorter")
        if not (is_batched(trace, a) or is_batched(trace, sorter)):  # NumPy's own search
            vv = unwrap(trace, v)[0]
            return trace.wrap(np.searchsorted(a, vv, side=side, sorter=sorter))
        if example_ndim(trace, a) != 1 or side not in ("left", "right"):
            replay_errors(trace, func, args, kwargs)
        rows = bcast_batch(trace, a)
        if sorter is not None:
            rows = replaying(
                trace, func, args, kwargs,
                lambda: np.take_along_axis(rows, bcast_batch(trace, sorter), axis=1),
            )  # fmt: skip
        queries, shape = _rows(trace, v)
        found = search_rows(rows, moved(queries, rows), side)
        if found is None:
            return _unsorted(trace, func, args, kwargs)
        return trace.wrap(found.reshape(len(queries), *shape))

    return rule


def _digitize_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    """`np.digitize` is a search in `bins`, which may increase or decrease: batched bins
    are checked and searched per example (decreasing ones reversed)."""

    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        x, bins = args[0], get_arg(args, kwargs, 1, "bins")
        right = get_arg(args, kwargs, 2, "right", False)
        if not is_batched(trace, bins):
            return trace.wrap(np.digitize(unwrap(trace, x)[0], bins, right=right))
        if example_ndim(trace, bins) != 1 or np.result_type(x).kind == "c":
            replay_errors(trace, func, args, kwargs)
        rows = bins.val
        order = _monotonicity(rows)
        if not bool(np.all(order != 0)):
            replay_errors(trace, func, args, kwargs)
        down = (order == -1).reshape(-1, 1)
        rows = np.where(down, rows[:, ::-1], rows)
        queries, shape = _rows(trace, x)
        found = search_rows(rows, queries, "left" if right else "right")
        if found is None:
            return _unsorted(trace, func, args, kwargs)
        found = np.where(down, rows.shape[1] - found, found)
        return trace.wrap(found.reshape(len(queries), *shape))

    return rule


def _monotonicity(bins: Any) -> Any:
    """NumPy's check of `digitize` bins per row (in float64, as NumPy does): 1 for
    non-decreasing, -1 for non-increasing, 0 for neither. The direction is set by the
    first value that differs from the first bin."""
    b = bins.astype(np.float64)
    if b.shape[1] < 2:
        return np.ones(b.shape[0], dtype=np.intp, like=like(b))
    differs = b[:, 1:] != b[:, :1]
    first = np.argmax(differs, axis=1) + 1
    up = b[:, 0] < np.take_along_axis(b, first.reshape(-1, 1), axis=1)[:, 0]
    up_ok = ~np.any(b[:, :-1] > b[:, 1:], axis=1)
    down_ok = ~np.any(b[:, :-1] < b[:, 1:], axis=1)
    order = np.where(up, np.where(up_ok, 1, 0), np.where(down_ok, -1, 0))
    return np.where(np.any(differs, axis=1), order, 1)


defbatch(np.searchsorted, _searchsorted_rule)
defbatch(np.digitize, _digitize_rule)
