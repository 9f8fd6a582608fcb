"""Indexing family: `x[idx]`, `x[idx] = v` (functional), gather and scatter.

The heart is `batched_index`: it turns one example's index into an index of the
batched value, and says how to permute the result so the batch axis is at the front
and the other axes are where NumPy puts them for one example (NumPy moves advanced
index dimensions to the front when the advanced indices are not adjacent).

Derivatives (see `vmapx._autodiff`): indexing is linear. The VJP of a gather `x[idx]`
scatters the cotangent back: with index assignment when the index cannot repeat an
element (ints, slices, masks), else with `SCATTER_ADD` (a functional `np.add.at`).
`x[idx] = v` sends `g[idx]` to `v` and `g` with `g[idx] = 0` to `x`; where an index
repeats an element, only the element of `v` that NumPy wrote last receives its
cotangent.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import _core
from .._autodiff import (
    defcomposite,
    deflinear,
    defvjp,
    defvjp_argnum,
    defzero,
    stop_gradient_leaf,
)
from .._batching import (
    BatchTrace,
    BatchTracer,
    align_rank,
    aligned_operands,
    bcast_batch,
    defbatch,
    example_ndim,
    is_batched,
    unwrap,
)
from .._core import Tracer, bind, is_ndarray
from .._payload import is_array, like
from .._registry import GETITEM, Primitive, register, register_ufunc_defaults
from .._rule_helpers import example_shape
from ..errors import DifferentiationError
from ._tracer_api import SETITEM
from .ufuncs import at_rule


def _is_array(c: Any) -> bool:
    return isinstance(c, Tracer) or is_array(c)


def _is_int(c: Any) -> bool:
    if isinstance(c, Tracer):
        return False
    return isinstance(c, int | np.integer) and not isinstance(c, bool | np.bool_)


def _is_bool_array(c: Any) -> bool:
    return _is_array(c) and c.dtype == np.bool_


def _has_tracer(seq: list[Any]) -> bool:
    return any(isinstance(e, Tracer) or (isinstance(e, list) and _has_tracer(e)) for e in seq)


def _list_index(c: list[Any]) -> Any:
    """A list in an index is an array (NumPy's rule); one holding tracers is stacked."""
    if _has_tracer(c):
        return np.stack([_list_index(e) if isinstance(e, list) else e for e in c])
    return np.asarray(c, dtype=np.intp) if len(c) == 0 else np.asarray(c)


def _as_component(c: Any) -> Any:
    if isinstance(c, list):
        return _list_index(c)
    if not isinstance(c, Tracer) and isinstance(c, bool | np.bool_):  # a 0-d boolean index
        return np.asarray(c)
    return c


def _consumes(c: Any) -> int:
    """How many axes of the indexed array a component consumes."""
    if c is None or c is Ellipsis:
        return 0
    return c.ndim if _is_bool_array(c) else 1


def _components(trace: BatchTrace, ndim: int, idx: Any) -> list[Any]:
    """One example's index as a list of components: lists become arrays, Ellipsis and
    the implicit trailing `:` become explicit slices (so positions can be counted)."""
    comps = [_as_component(c) for c in (idx if isinstance(idx, tuple) else (idx,))]
    free = ndim - sum(_consumes(c) for c in comps)
    if sum(c is Ellipsis for c in comps) != 1:
        return comps + [slice(None)] * max(free, 0)
    at = next(i for i, c in enumerate(comps) if c is Ellipsis)
    # an Ellipsis standing for no axis stays: it still separates advanced indices
    fill = [slice(None)] * free if free > 0 else [Ellipsis]
    return [*comps[:at], *fill, *comps[at + 1 :]]


def _result_dims(c: Any) -> int:
    """How many result axes a basic component makes (a slice or `None`: one)."""
    return 1 if isinstance(c, slice) or c is None else 0


def _adv_rank(trace: BatchTrace, c: Any) -> int:
    """Rank an advanced component adds to the broadcast index shape: a boolean mask
    counts as its `nonzero()` (one axis), an integer as none."""
    if _is_bool_array(c):
        return 1
    return example_ndim(trace, c) if _is_array(c) else 0


def _plan(
    trace: BatchTrace, ndim: int, idx: Any
) -> tuple[tuple[Any, ...], tuple[Any, ...] | None, int]:
    """`(index, perm, region_rank)`: index the batched value with `index`, then
    transpose by `perm` (when not None) to get the batch-front per-example layout of
    a result with `region_rank` axes per example.

    Advanced indices broadcast per example; NumPy puts their axes where the first one
    is when they are adjacent, else first. A batched index array gets the batch axis
    in front and is paired with `arange(B)` on the batch axis, so the batch axis of
    the result is an advanced axis too: `perm` moves the axes back where one example's
    indexing puts them.
    """
    comps = _components(trace, ndim, idx)
    if any(is_batched(trace, c) and c.dtype == np.bool_ for c in comps):
        raise trace.concretization(
            "indexing with a batched boolean mask (the result's shape depends on the data)",
            "use `np.where(mask, x, fill)` to keep the shape, or `np.compress`/`np.nonzero` "
            "outside the vmapped function",
        )
    adv, rank = _advanced(trace, comps)
    adjacent = not adv or adv[-1] - adv[0] + 1 == len(adv)
    basic = sum(_result_dims(c) for c in comps)
    region_rank = rank + basic
    if not any(is_batched(trace, c) for c in comps):
        if adv and not adjacent:  # NumPy put the advanced dims before the batch
            perm = (rank, *range(rank), *range(rank + 1, region_rank + 1))
            return (slice(None), *comps), perm, region_rank
        return (slice(None), *comps), None, region_rank
    arange = np.arange(trace.axis_size, like=like(*comps)).reshape((-1,) + (1,) * rank)
    _align_advanced(trace, comps, adv, rank)
    index = (arange, *comps)
    if not adjacent or adv[0] == 0:
        return index, None, region_rank
    before = sum(_result_dims(c) for c in comps[: adv[0]])
    perm = (
        0,
        *range(1 + rank, 1 + rank + before),
        *range(1, 1 + rank),
        *range(1 + rank + before, 1 + region_rank),
    )
    return index, perm, region_rank


def _advanced(trace: BatchTrace, comps: list[Any]) -> tuple[list[int], int]:
    """The positions of the advanced components (index arrays, and the integers beside
    them, which NumPy broadcasts with them) and the rank they broadcast to per example."""
    has_arrays = any(_is_array(c) for c in comps)
    adv = [i for i, c in enumerate(comps) if _is_array(c) or (has_arrays and _is_int(c))]
    return adv, max((_adv_rank(trace, comps[i]) for i in adv), default=0)


def _align_advanced(trace: BatchTrace, comps: list[Any], adv: list[int], rank: int) -> None:
    """Each batched advanced component as its batch-front value, (B, 1.., its shape) to
    `rank`; the unbatched ones broadcast against it from the right as they are."""
    for i in adv:
        v, b = unwrap(trace, comps[i])
        comps[i] = align_rank(v, example_ndim(trace, comps[i]), rank) if b else v


def batched_index(
    trace: BatchTrace, ndim: int, idx: Any
) -> tuple[tuple[Any, ...], tuple[Any, ...] | None]:
    """`(index, perm)`: index the batched value with `index`, then transpose the
    result by `perm` (when not None) to get the batch-front per-example layout."""
    index, perm, _ = _plan(trace, ndim, idx)
    return index, perm


_NO_VALUE = object()


def _at(trace: BatchTrace, tree: Any, i: int) -> Any:
    """Example `i` of every value of this trace in `tree` (index tuples, lists)."""
    if is_batched(trace, tree):
        return tree.val[i]
    if isinstance(tree, tuple | list):
        return type(tree)(_at(trace, t, i) for t in tree)
    return tree


def _example_error(trace: BatchTrace, x: Any, idx: Any, value: Any) -> BaseException | None:
    """NumPy's own error for the first example whose indexing fails (its message names
    the example's axes, not the batched value's)."""
    batched = any(is_batched(trace, t) for t in (idx if isinstance(idx, tuple) else (idx,)))
    batched = batched or is_batched(trace, value)
    shape = x.shape if isinstance(x, Tracer) else np.shape(x)
    for i in range(trace.axis_size if batched else 1):
        example = np.zeros(shape, dtype=np.result_type(x), like=like(x))
        try:
            if value is _NO_VALUE:
                example[_at(trace, idx, i)]
            else:
                example[_at(trace, idx, i)] = _at(trace, value, i)
        except (IndexError, ValueError, TypeError) as e:
            return e
    return None


def _checked(trace: BatchTrace, run: Any, x: Any, idx: Any, value: Any = _NO_VALUE) -> Any:
    """Run the batched indexing; an error is re-raised as one example raises it."""
    try:
        return run()
    except (IndexError, ValueError):
        err = _example_error(trace, x, idx, value)
        if err is None:
            raise
        raise err from None


_BASIC = (int, slice, type(None), type(Ellipsis))


def _field_names(idx: Any) -> bool:
    """`x["a"]`, `x[["a", "b"]]`: fields of a structured array (every example's)."""
    if type(idx) is str:
        return True
    return type(idx) is list and bool(idx) and all(type(c) is str for c in idx)


def _only_ints_and_slices(idx: Any) -> bool:
    """Ints, slices, `None` and `...` only: then the index applies to the batched value
    as it is, behind one `slice(None)` for the batch axis (the common, fast case)."""
    if type(idx) is tuple:
        return all(type(c) in _BASIC for c in idx)
    return type(idx) in _BASIC


def getitem_rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
    x, idx = args
    if _field_names(idx) and is_batched(trace, x):  # a structured value's fields
        return trace.wrap(x.val[idx])
    if _only_ints_and_slices(idx) and type(x) is BatchTracer and x._trace is trace:
        try:
            return trace.wrap(
                x.val[(slice(None), *idx) if type(idx) is tuple else (slice(None), idx)]
            )
        except IndexError:
            pass  # the general path raises NumPy's own message, with per-example axes
    if not is_batched(trace, x):
        gathered = _gather_from_unbatched(trace, x, idx)
        if gathered is not None:
            return gathered
    index, perm, _ = _plan(trace, example_ndim(trace, x), idx)
    # bind, not `[]`: the index may hold tracers of an outer vmap
    out = _checked(trace, lambda: bind(GETITEM, (bcast_batch(trace, x), index), {}), x, idx)
    return trace.wrap(out if perm is None else out.transpose(perm))


def _gather_from_unbatched(trace: BatchTrace, x: Any, idx: Any) -> Any:
    """`x[idx]` for an `x` shared by the batch (a table: `E[token]`, `E[:, i]`) and an
    index whose batched components are integer arrays, or None where that does not
    apply. Each batched component holds every example's indices (batch axis in front),
    so indexing `x` itself gives every example's gather at once, with the batch axis
    where NumPy puts the advanced axes; the general path would index `x` broadcast to
    the batch, paired with `arange(B)`: 1.5-5 times slower. A gather of whole rows runs
    as `np.take(x, i, axis=0)`, which copies rows (measured against `x[i]`: 106 against
    548 us for (4096, 8) rows of 16, 593 against 934 for (1024, 32) rows of 64)."""
    comps = _components(trace, np.ndim(x), idx)
    if any(_is_bool_array(c) for c in comps):
        return None  # (a mask's axes: the general path)
    adv, rank = _advanced(trace, comps)
    if not any(is_batched(trace, comps[i]) for i in adv):
        return None
    _align_advanced(trace, comps, adv, rank)
    plain_rows = (
        adv == [0] and type(x) is np.ndarray and type(comps[0]) is np.ndarray
        and comps[0].dtype.kind == "i"  # (NumPy 1's take refuses uint64 indices)
        and all(type(c) is slice and c == slice(None) for c in comps[1:])
    )  # fmt: skip
    if plain_rows:
        out = _checked(trace, lambda: np.take(x, comps[0], axis=0), x, idx)
        return trace.wrap(out)
    out = _checked(trace, lambda: bind(GETITEM, (x, tuple(comps)), {}), x, idx)
    if adv[-1] - adv[0] + 1 == len(adv) and adv[0] > 0:  # adjacent: NumPy kept them there
        before = sum(_result_dims(c) for c in comps[: adv[0]])
        out = np.moveaxis(out, before, 0)
    return trace.wrap(out)


def setitem_rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
    x, idx, value = args
    nd = example_ndim(trace, x)
    _check_mask_value(trace, nd, idx, value)
    masked = _batched_mask_write(trace, x, nd, idx, value)
    if masked is not None:
        return masked
    index, perm, region_rank = _plan(trace, nd, idx)
    base = bcast_batch(trace, x)

    def run() -> Any:
        v = value_layout(trace, value, region_rank, perm)
        return bind(SETITEM, (base, index, v), {})

    return trace.wrap(_checked(trace, run, x, idx, value))


def value_layout(trace: BatchTrace, value: Any, rank: int, perm: tuple[Any, ...] | None) -> Any:
    """The value to write, laid out to broadcast against the batched region: its
    per-example axes aligned to the region's `rank` and transposed like the region."""
    v, vb = unwrap(trace, value)
    shape = tuple(v.shape[1:]) if vb else np.shape(v)
    extra = len(shape) - rank
    if extra > 0 and all(d == 1 for d in shape[:extra]):  # NumPy drops leading 1s
        shape = shape[extra:]
    if len(shape) > rank:  # the caller reports the example's own error
        raise ValueError("value has more dimensions than the indexed region")
    if not vb and perm is None:
        return v
    lead = (v.shape[0],) if vb else (1,)
    v = np.reshape(v, (*lead, *(1,) * (rank - len(shape)), *shape))
    return v if perm is None else v.transpose(np.argsort(perm))


def _check_mask_value(trace: BatchTrace, nd: int, idx: Any, value: Any) -> None:
    """NumPy's rule for `x[mask] = v` with one mask over all axes: `v` is 0-d or 1-d."""
    comps = idx if isinstance(idx, tuple) else (idx,)
    vnd = example_ndim(trace, value)
    if len(comps) == 1 and _is_bool_array(comps[0]) and comps[0].ndim == nd and vnd > 1:
        raise TypeError(
            "NumPy boolean array indexing assignment requires a 0 or 1-dimensional input, "
            f"input has {vnd} dimensions"
        )


def _is_full(c: Any) -> bool:
    return c is Ellipsis or (isinstance(c, slice) and c == slice(None))


def _batched_mask_write(trace: BatchTrace, x: Any, nd: int, idx: Any, value: Any) -> Any:
    """`x[mask] = value` with a batched boolean `mask` (after full slices or `...`) and
    one value: a boolean write into the batched value. None when no mask is batched."""
    comps = [_as_component(c) for c in (idx if isinstance(idx, tuple) else (idx,))]
    masks = [i for i, c in enumerate(comps) if is_batched(trace, c) and c.dtype == np.bool_]
    if not masks:
        return None
    at = masks[0]
    others = comps[:at] + comps[at + 1 :]
    if len(masks) > 1 or np.size(value) != 1 or not all(_is_full(c) for c in others):
        raise trace.concretization(
            "index assignment through a batched boolean mask combined with other indices, "
            "or of more than one value (how many values are taken depends on the data)",
            "use `x = np.where(mask, values, x)` with `values` shaped like `x`",
        )
    mask = comps[at].val
    mshape = mask.shape[1:]
    after = comps[at + 1 :]
    k = nd - len(mshape) - len(after) if any(c is Ellipsis for c in comps[:at]) else at
    shape = example_shape(trace, x)
    full_mask = np.broadcast_to(
        mask.reshape((mask.shape[0],) + (1,) * k + mshape), (mask.shape[0], *shape[:k], *mshape)
    )
    v, vb = unwrap(trace, value)
    if vb:  # one value per example: gather the value of each selected element
        v = np.broadcast_to(v.reshape((v.shape[0],) + (1,) * (k + len(mshape))), full_mask.shape)
        v = v[full_mask].reshape((-1,) + (1,) * (nd - k - len(mshape)))
    base = bcast_batch(trace, x)
    out = _checked(trace, lambda: bind(SETITEM, (base, full_mask, v), {}), x, idx, value)
    return trace.wrap(out)


register(GETITEM, "batch", getitem_rule)
register(SETITEM, "batch", setitem_rule)


def _where_rule(func: Any) -> Any:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        if len(args) == 1:  # np.where(cond) is np.nonzero(cond)
            return np.nonzero(args[0])
        return trace.wrap(np.where(*aligned_operands(trace, args)))

    return rule


defbatch(np.where, _where_rule)


deflinear(np.where, argnums=(1, 2))
defzero(np.where, argnums=(0,))
defvjp(
    np.where,
    None,
    lambda ans, c, x, y: lambda g: np.where(c, g, 0),
    lambda ans, c, x, y: lambda g: np.where(c, 0, g),
)


def _scatter_add_impl(x: Any, idx: Any, v: Any) -> Any:
    out = x.copy()
    np.add.at(out, idx, v)
    return out


SCATTER_ADD = Primitive("scatter_add", _scatter_add_impl)
register(SCATTER_ADD, "batch", at_rule(np.add))


def _is_basic(idx: Any) -> bool:
    """An index that selects each element at most once (no integer arrays)."""
    comps = idx if isinstance(idx, tuple) else (idx,)
    for c in comps:
        if isinstance(c, Tracer):
            return False
        if c is None or c is Ellipsis or isinstance(c, slice | int | np.integer):
            continue
        if is_ndarray(c) and c.dtype == np.bool_:
            continue
        return False
    return True


def _covers_all(idx: Any) -> bool:
    comps = idx if isinstance(idx, tuple) else (idx,)
    return all(c is Ellipsis or (isinstance(c, slice) and c == slice(None)) for c in comps)


def _gather_vjp(ans: Any, x: Any, idx: Any) -> Any:
    prim = SETITEM if _is_basic(idx) else SCATTER_ADD
    return lambda g: _core.bind(prim, (np.zeros_like(x), idx, g), {})


def _setitem_vjp(argnum: Any, ans: Any, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
    x, idx, v = args
    if argnum == 0:
        if _covers_all(idx):
            return lambda g: None
        return lambda g: _core.bind(SETITEM, (g, idx, 0), {})
    if _is_basic(idx):
        return lambda g: _core.bind(GETITEM, (g, idx), {})
    won = last_writes(x.shape, idx)
    return lambda g: _core.bind(GETITEM, (g, idx), {}) * won


def last_writes(shape: tuple[Any, ...], idx: Any) -> Any:
    """Which elements of the region `x[idx]` NumPy's `x[idx] = v` leaves in `x` (with a
    repeated index the last write wins), found by writing their positions."""
    probe = np.broadcast_to(np.zeros((), dtype=np.int64, like=like(idx)), shape)
    region = _core.bind(GETITEM, (probe, idx), {})
    ids = np.arange(int(np.prod(region.shape, dtype=np.int64)), like=like(idx))
    ids = ids.reshape(region.shape)
    written = _core.bind(SETITEM, (np.full(shape, -1, like=like(idx)), idx, ids), {})
    return _core.bind(GETITEM, (written, idx), {}) == ids


deflinear(GETITEM)
defvjp(GETITEM, _gather_vjp)
deflinear(SETITEM, argnums=(0, 2))
defvjp_argnum(SETITEM, _setitem_vjp)
deflinear(SCATTER_ADD, argnums=(0, 2))
defvjp_argnum(
    SCATTER_ADD,
    lambda argnum, ans, args, kwargs: (lambda g: g) if argnum == 0
    else (lambda g: _core.bind(GETITEM, (g, args[1]), {})),
)  # fmt: skip


def _at_composite(ufunc: np.ufunc) -> Any:
    """`ufunc.at(x, idx, v)` under differentiation, as a functional update."""

    def impl(x: Any, idx: Any, *rest: Any) -> Any:
        if ufunc in (np.add, np.subtract) and rest:
            v = rest[0] if ufunc is np.add else -rest[0]
            return _core.bind(SCATTER_ADD, (x, idx, v), {})
        traced = [a for a in (x, *rest) if _has_derivative(a)]
        if traced:
            raise DifferentiationError(
                f"{traced[0]._trace.transform}: `np.{ufunc.__name__}.at` cannot be "
                f"differentiated (at {_core.user_frame_location()}); only `np.add.at` and "
                "`np.subtract.at` can. Write the update with index assignment or `np.where`."
            )
        out = np.copy(stop_gradient_leaf(x))
        ufunc.at(out, idx, *(stop_gradient_leaf(a) for a in rest))
        return out

    return impl


def _has_derivative(x: Any) -> bool:
    return stop_gradient_leaf(x) is not x and (
        getattr(x, "tangent", None) is not None or getattr(x, "node", None) is not None
    )


def _at_hook(prim: Any, ufunc: np.ufunc, method: str) -> None:
    if method == "at":
        defcomposite(prim, _at_composite(ufunc))


register_ufunc_defaults(_at_hook)
