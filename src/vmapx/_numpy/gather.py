"""Gather and scatter functions: `take`, `take_along_axis`, `choose`, `select`,
`compress`, the in-place writers (`put`, `put_along_axis`, `place`, `putmask`), index
helpers, and the functions whose output shape depends on the data (`nonzero`,
`bincount`, `trim_zeros`, ...).

Data-dependent shapes stay batched when every example gives the same shape (checked on
the data, like the loop's stacking would); when examples disagree, the whole function
runs once per example with a `PerformanceWarning` that says why. A zero-size batch has
no data to ask: it takes the shape an example of ones gives (as the loop fallback does).

Errors are NumPy's own: when a batched call fails, the examples are replayed one by
one so that the message names the example's axes and sizes, not the batched value's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import numpy as np

from .. import _pytree as optree  # optree in vmapx.config.pytree_namespace
from .._autodiff import (
    NoRule,
    defjvp,
    defjvp_argnum,
    defjvp_argnums,
    deflinear,
    defvjp,
    defvjp_argnum,
)
from .._batching import (
    BatchTrace,
    align_rank,
    aligned_operands,
    bcast_batch,
    defbatch,
    example_ndim,
    held_as_array,
    is_batched,
    loop_apply,
    unwrap,
)
from .._compat import normalize_axis_index, normalize_axis_tuple, put
from .._core import Tracer, bind
from .._payload import like
from .._registry import GETITEM, builder, get_arg, primitive, register, set_arg
from .._rule_helpers import flat_shape, scalar_axis, shift_one, value_and_axis, zero_batch
from .._scalars import is_scalar
from ._tracer_api import IN_PLACE, SETITEM, assign
from .indexing import SCATTER_ADD, getitem_rule, last_writes, value_layout

# -- shared helpers -------------------------------------------------------------------


def example(trace: BatchTrace, tree: Any, i: int) -> Any:
    """Example `i` of every value of this trace in `tree`: a NumPy scalar where the
    example has one, else an array (a 0-d one too: NumPy's errors differ between them,
    `np.take(a, np.array(1.5))` raises where `np.take(a, np.float64(1.5))` does not)."""

    def take(x: Any) -> Any:
        if not is_batched(trace, x):
            return x
        return x.val[i] if x.ndim or is_scalar(x) else x.val[i, ...]

    return optree.tree_map(take, tree, is_leaf=lambda x: isinstance(x, Tracer), none_is_leaf=True)


def replay_errors(
    trace: BatchTrace, func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[Any, Any]
) -> None:
    """Run `func` on each example in turn: the first failing one raises NumPy's own
    error for it. Used on error paths only."""
    for i in range(trace.axis_size):
        func(*example(trace, args, i), **example(trace, kwargs, i))


def replaying(
    trace: BatchTrace,
    func: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[Any, Any],
    run: Callable[..., Any],
) -> Any:
    """`run()`, with an error re-raised as the first failing example raises it."""
    try:
        return run()
    except (IndexError, ValueError, TypeError):
        replay_errors(trace, func, args, kwargs)
        raise


def agreed_size(trace: BatchTrace, sizes: Any, what: str) -> int:
    """The size every example gives (a data-dependent output size), or the whole
    function loops: a batched value cannot hold results of different sizes."""
    first = sizes[0]
    if not bool(np.all(sizes == first)):
        raise trace.concretization(
            f"{what} gives results of different sizes for different examples",
            "keep shapes fixed (e.g. `np.where(mask, x, 0)` instead of `x[mask]`, "
            "`np.sort` instead of `np.unique`)",
        )
    return int(first)


def compact(trace: BatchTrace, vals: Any, keep: Any, what: str) -> tuple[Any, Any]:
    """`(vals[b][keep[b]] for each b, their columns)` as `(B, k)` arrays, when every
    row keeps the same number `k` of entries. `vals` and `keep` are `(B, n)`."""
    k = agreed_size(trace, np.count_nonzero(keep, axis=1), what)
    cols = np.nonzero(keep)[1].reshape(keep.shape[0], k)
    return np.take_along_axis(vals, cols, axis=1), cols


def _rows_shape(v: Any) -> tuple[int, int]:
    """`(B, size)` of a batch-front value (`flat_shape` for any array-like)."""
    return flat_shape(v if hasattr(v, "shape") else np.asarray(v))


def _flat(trace: BatchTrace, x: Any) -> Any:
    """`(B, size)`: every example flattened (unbatched values broadcast, no copy)."""
    v = bcast_batch(trace, x)
    return v.reshape(flat_shape(v))


# -- take, take_along_axis, choose, select, compress, extract -----------------------------


def _take_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        a, indices = args[0], get_arg(args, kwargs, 1, "indices")
        axis, mode = get_arg(args, kwargs, 2, "axis"), get_arg(args, kwargs, 4, "mode", "raise")
        ind, ib = unwrap(trace, indices)
        call = (func, args, kwargs)
        ind = _positions(indices, ind)
        if not ib and not isinstance(ind, Tracer):  # a per-example axis of a batched array
            v, ax = value_and_axis(trace, a, axis, as_1d=True)
            return trace.wrap(replaying(trace, *call, lambda: np.take(v, ind, axis=ax, mode=mode)))
        if not ib or not is_batched(trace, a):
            if not ib:  # indices of an outer vmap: `np.take` would not dispatch on them
                v, ax = value_and_axis(trace, a, axis, as_1d=True)
                index = (slice(None),) * ax + (_mode_index(ind, v.shape[ax], mode),)
                out = replaying(trace, *call, lambda: bind(GETITEM, (v, index), {}))
                return trace.wrap(out)
            # a gather from one array: the batch is an index axis
            flat = axis is None or scalar_axis(axis, np.ndim(a))  # (0-d: its 1-d view)
            gather_axis = None if flat else shift_one(axis, np.ndim(a)) - 1
            out = replaying(trace, *call, lambda: np.take(a, ind, axis=gather_axis, mode=mode))
            return trace.wrap(out if not gather_axis else np.moveaxis(out, gather_axis, 0))
        v, ax = value_and_axis(trace, a, axis, as_1d=True)
        index = (slice(None),) * (ax - 1) + (trace.wrap(_mode_index(ind, v.shape[ax], mode)),)
        return replaying(trace, *call, lambda: getitem_rule(trace, (trace.wrap(v), index), {}))

    return rule


def _cast_by_take(indices: Tracer) -> bool:
    """Whether `np.take` and `np.put` cast the example's traced `indices` to integers:
    booleans (True -> 1, not a mask), and a float or complex *scalar* as C does (1.7 ->
    1, -1.5 -> -1, NaN -> the least integer, with NumPy's warning). A float array raises
    (the replay of the rule's error gives NumPy's TypeError)."""
    kind = str(indices.dtype.kind)
    return kind == "b" or (kind in "fc" and is_scalar(indices))


def _positions(indices: Any, value: Any) -> Any:
    """`value` (of `indices`: this trace's values, or an outer trace's tracer) as the
    integers `np.take` and `np.put` read (see `_cast_by_take`); plain indices as they are
    (NumPy converts them: a Python float through `int()`, which raises for NaN)."""
    if not isinstance(indices, Tracer) or not _cast_by_take(indices):
        return value
    return value.astype(np.intp)


def _mode_index(ind: Any, n: int, mode: str) -> Any:
    """Indices after `np.take`'s `mode` (wrap or clip into `range(n)`; raise: as is)."""
    if mode == "wrap" and n:
        return ind % n
    if mode == "clip" and n:
        return np.minimum(np.maximum(ind, 0), n - 1)
    return ind


def _take_along_axis_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        arr, indices = args[0], get_arg(args, kwargs, 1, "indices")
        v, ax = value_and_axis(trace, arr, get_arg(args, kwargs, 2, "axis", -1))
        ind = bcast_batch(trace, indices)
        run = lambda: np.take_along_axis(v, ind, axis=ax)  # noqa: E731
        return trace.wrap(replaying(trace, func, args, kwargs, run))

    return rule


def _choose_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        a, choices = args[0], get_arg(args, kwargs, 1, "choices")
        mode = get_arg(args, kwargs, 3, "mode", "raise")
        if isinstance(choices, list | tuple):  # a sequence of arrays: align them all
            a_v, *ch = aligned_operands(trace, [a, *choices])
        else:  # one array whose first axis enumerates the choices
            c, cb = unwrap(trace, choices)
            crank = example_ndim(trace, choices) - 1
            rank = max(example_ndim(trace, a), crank)
            if cb:  # (B, n, ...) -> (n, B, 1.., ...): each choice batch-front
                c = np.moveaxis(c, 1, 0)
                c = c.reshape(c.shape[:2] + (1,) * (rank - crank) + c.shape[2:])
            av, ab = unwrap(trace, a)
            a_v, ch = (align_rank(av, example_ndim(trace, a), rank) if ab else av), c
        run = lambda: np.choose(a_v, ch, mode=mode)  # noqa: E731
        return trace.wrap(replaying(trace, func, args, kwargs, run))

    return rule


def _select_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        conds = list(get_arg(args, kwargs, 0, "condlist"))
        choices = list(get_arg(args, kwargs, 1, "choicelist"))
        default = get_arg(args, kwargs, 2, "default", 0)
        ready = aligned_operands(trace, [*conds, *choices, default])
        c, ch, d = ready[: len(conds)], ready[len(conds) : -1], ready[-1]
        return trace.wrap(replaying(trace, func, args, kwargs, lambda: np.select(c, ch, d)))

    return rule


def _compress_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        condition, a = args[0], get_arg(args, kwargs, 1, "a")
        if is_batched(trace, condition):
            raise _data_shape(trace, func)
        v, ax = value_and_axis(trace, a, get_arg(args, kwargs, 2, "axis"), as_1d=True)
        run = lambda: np.compress(condition, v, axis=ax)  # noqa: E731
        return trace.wrap(replaying(trace, func, args, kwargs, run))

    return rule


def _extract_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        condition, arr = held_as_array(args[0]), get_arg(args, kwargs, 1, "arr")
        if is_batched(trace, condition):
            raise _data_shape(trace, func)
        where = np.nonzero(np.ravel(condition))[0]
        v = _flat(trace, arr)
        # `v[:, where]` dispatched: `where` may be traced by an outer vmap
        run = lambda: bind(GETITEM, (v, (slice(None), where)), {})  # noqa: E731
        return trace.wrap(replaying(trace, func, args, kwargs, run))

    return rule


def _data_shape(trace: BatchTrace, func: Callable[..., Any]) -> BaseException:
    return trace.concretization(
        f"`np.{func.__name__}` with a batched condition (the result's shape depends on the data)",
        "keep the shape with `np.where(condition, x, fill)`, or select outside the vmapped "
        "function",
    )


defbatch(np.take, _take_rule)


def scatter(g: Any, shape: tuple[Any, ...], index: Any, add: bool = True) -> Any:
    """Zeros of `shape` with `g` added (`add`: an index may repeat) or written at `index`."""
    return bind(SCATTER_ADD if add else SETITEM, (np.zeros_like(g, shape=shape), index, g), {})


def _size(x: Any) -> int:
    return int(np.prod(x.shape, dtype=np.intp))


def _as_index(ind: Any) -> Any:
    """The integer positions `np.take` read for `ind`: it casts booleans (True -> 1, not
    a mask) and float scalars and lists (1.7 -> 1; a float array raised in the forward
    call, so none reaches here)."""
    arr = np.asarray(ind) if isinstance(ind, list | tuple) or not hasattr(ind, "dtype") else ind
    if arr.dtype.kind == "c":
        arr = np.real(arr)
    return arr.astype(np.intp) if arr.dtype.kind in "bf" else arr


def _take_vjp(ans: Any, a: Any, indices: Any, axis: Any = None, out: Any = None,
              mode: str = "raise") -> Callable[..., Any]:  # fmt: skip
    ind = _as_index(indices)
    if axis is None or scalar_axis(axis, a.ndim):  # (0-d: its one-element view)
        index = (_mode_index(ind, _size(a), mode),)
        return lambda g: np.reshape(scatter(g, (_size(a),), index), a.shape)
    ax = normalize_axis_index(axis, a.ndim)
    index = (slice(None),) * ax + (_mode_index(ind, a.shape[ax], mode),)
    return lambda g: scatter(g, a.shape, index)


defvjp(np.take, _take_vjp)
defbatch(np.take_along_axis, _take_along_axis_rule)


# -- derivatives of the gathers (see vmapx._autodiff) ---------------------------------
# A gather is linear in the array it reads: the JVP gathers the tangent (`deflinear`),
# the VJP sends the cotangent back to the positions read, added up where an index may
# repeat (`SCATTER_ADD`, a functional `np.add.at`), written where it cannot. `choose`
# and `select` are where-like: each output element comes from one operand.


def along_axis_index(shape: tuple[Any, ...], indices: Any, axis: int) -> tuple[Any, ...]:
    """The fancy index `np.take_along_axis(x, indices, axis)` reads `x` (of `shape`) with."""
    nd = len(shape)
    return tuple(
        indices if d == axis else np.arange(n).reshape((1,) * d + (-1,) + (1,) * (nd - d - 1))
        for d, n in enumerate(shape)
    )


def _take_along_axis_vjp(ans: Any, arr: Any, indices: Any, axis: Any = -1) -> Callable[..., Any]:
    if axis is None:
        return lambda g: np.reshape(scatter(g, (_size(arr),), (indices,)), arr.shape)
    ax = normalize_axis_index(axis, arr.ndim)
    return lambda g: scatter(g, arr.shape, along_axis_index(arr.shape, indices, ax))


deflinear([np.take, np.take_along_axis])
defvjp(np.take_along_axis, _take_along_axis_vjp)
defbatch(np.choose, _choose_rule)


def _choice(args: tuple[Any, ...], kwargs: dict[Any, Any]) -> tuple[Any, int]:
    """The choice `np.choose` takes for each element (after `mode`), and how many there are."""
    choices = get_arg(args, kwargs, 1, "choices")
    n = len(choices)
    return _mode_index(_as_index(args[0]), n, get_arg(args, kwargs, 3, "mode", "raise")), n


def _choose_mask(argnum: Any, ans: Any, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
    pick, n = _choice(args, kwargs)
    if argnum == 1:  # one array whose first axis enumerates the choices: a mask per choice
        return pick == np.arange(n).reshape((n,) + (1,) * ans.ndim)
    if not (isinstance(argnum, tuple) and argnum[0] == 1):
        raise NoRule(argnum, "jvp")
    return pick == argnum[1]


def _choose_jvp(
    argnum: Any, t: Any, ans: Any, args: tuple[Any, ...], kwargs: dict[Any, Any]
) -> Any:
    if argnum == 1:  # `choose` is linear in an array of choices
        return np.choose(args[0], t, mode=get_arg(args, kwargs, 3, "mode", "raise"))
    return np.where(_choose_mask(argnum, ans, args, kwargs), t, 0)


def _choose_vjp(
    argnum: Any, ans: Any, args: tuple[Any, ...], kwargs: dict[Any, Any]
) -> Callable[..., Any]:
    m = _choose_mask(argnum, ans, args, kwargs)
    if argnum != 1:
        return lambda g: np.where(m, g, 0)
    # (n, *result) -> (n, *one choice): the result's extra leading axes are summed here
    # (the engine would take the choices' axis for one of them)
    extra = tuple(range(1, 1 + ans.ndim - (np.ndim(args[1]) - 1)))
    return lambda g: np.sum(np.where(m, g, 0), axis=extra) if extra else np.where(m, g, 0)


defjvp_argnum(np.choose, _choose_jvp)
defvjp_argnum(np.choose, _choose_vjp)
defbatch(np.select, _select_rule)


@builder
def defwhere(func: Callable[..., Any], mask: Callable[..., Any]) -> None:
    """Derivatives of a where-like `func`: `mask(argnum, ans, args, kwargs)` tells which
    output elements come from that operand (broadcastable to the result)."""

    def jvp(argnum: Any, t: Any, ans: Any, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        return np.where(mask(argnum, ans, args, kwargs), t, 0)

    def vjp(
        argnum: Any, ans: Any, args: tuple[Any, ...], kwargs: dict[Any, Any]
    ) -> Callable[..., Any]:
        m = mask(argnum, ans, args, kwargs)
        return lambda g: np.where(m, g, 0)

    defjvp_argnum(func, jvp)
    defvjp_argnum(func, vjp)


def _select_mask(argnum: Any, ans: Any, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
    conds = get_arg(args, kwargs, 0, "condlist")
    n = len(conds)
    which: Any = n  # the first condition that holds; `n` for the default
    for j in range(n - 1, -1, -1):
        which = np.where(conds[j], j, which)
    if argnum in (2, "default"):
        return which == n
    if not (isinstance(argnum, tuple) and argnum[0] == 1):
        raise NoRule(argnum, "jvp")
    return which == argnum[1]


defwhere(np.select, _select_mask)
defbatch(np.compress, _compress_rule)


def _compress_vjp(
    ans: Any, condition: Any, a: Any, axis: Any = None, out: Any = None
) -> Callable[..., Any]:
    kept = np.nonzero(condition)[0]
    if axis is None or scalar_axis(axis, a.ndim):  # (0-d: its one-element view)
        return lambda g: np.reshape(scatter(g, (_size(a),), (kept,), add=False), a.shape)
    ax = normalize_axis_index(axis, a.ndim)
    return lambda g: scatter(g, a.shape, (slice(None),) * ax + (kept,), add=False)


defvjp(np.compress, _compress_vjp, argnums=(1,))
defbatch(np.extract, _extract_rule)


def _extract_vjp(ans: Any, condition: Any, arr: Any) -> Callable[..., Any]:
    kept = np.nonzero(np.ravel(condition))[0]
    return lambda g: np.reshape(scatter(g, (_size(arr),), (kept,), add=False), arr.shape)


deflinear([np.compress, np.extract], argnums=(1,))
defvjp(np.extract, _extract_vjp, argnums=(1,))


# -- in-place writers: functional updates of a traced target --------------------------


def _put_impl(a: Any, ind: Any, v: Any, mode: str = "raise") -> Any:
    out = np.copy(a)
    put(out, ind, v, mode=mode)  # NumPy 1.26 hangs on empty targets
    return out


def _put_along_axis_impl(arr: Any, indices: Any, values: Any, axis: Any) -> Any:
    out = np.copy(arr)
    np.put_along_axis(out, indices, values, axis)
    return out


def _place_impl(arr: Any, mask: Any, vals: Any) -> Any:
    out = np.copy(arr)
    np.place(out, mask, vals)
    return out


def _putmask_impl(a: Any, mask: Any, values: Any) -> Any:
    out = np.copy(a)
    np.putmask(out, mask, values)
    return out


# indices NumPy converts itself (not a tracer's, nor another array library's)
_NUMPY_INDICES = (np.ndarray, np.generic, list, tuple, int, float, complex)


def _put_rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
    a, ind, v = args[:3]
    mode = get_arg(args, kwargs, 3, "mode", "raise")
    flat = _flat(trace, a)
    n = flat.shape[1]
    vals, vb = unwrap(trace, v)
    vals = np.reshape(vals, _rows_shape(vals) if vb else (-1,))
    m = vals.shape[-1]
    idx, ib = unwrap(trace, ind)
    if not isinstance(ind, Tracer) and isinstance(ind, _NUMPY_INDICES) and n and m:
        # plain indices converted by NumPy itself, and `mode` applied: its errors too
        idx = np.take(np.arange(n), cast(Any, ind), mode=mode)
    idx = np.reshape(_positions(ind, idx), _rows_shape(idx) if ib else (-1,))
    idx = _mode_index(idx, n, mode)
    k = idx.shape[-1]
    if k and not n:
        replay_errors(trace, _put_impl, (a, ind, v, mode), {})
    if m == 0 or k == 0:  # NumPy writes nothing
        return trace.wrap(flat.reshape(bcast_batch(trace, a).shape).copy())
    vals = np.take(vals, np.arange(k, like=like(vals)) % m, axis=-1)  # NumPy repeats `v`
    rows = np.arange(flat.shape[0], like=like(flat)).reshape(-1, 1)

    def run() -> Any:
        return bind(SETITEM, (flat, (rows, idx), vals), {})

    out = replaying(trace, _put_impl, (a, ind, v, mode), {}, run)
    return trace.wrap(out.reshape(bcast_batch(trace, a).shape))


def _put_along_axis_rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
    arr, indices, values = args[:3]
    axis = get_arg(args, kwargs, 3, "axis")
    v, ax = value_and_axis(trace, arr, axis)
    ind = bcast_batch(trace, indices)

    def run() -> Any:
        vals = value_layout(trace, values, example_ndim(trace, indices), None)
        if not is_batched(trace, values):  # a leading 1: broadcast like one example
            vals = np.reshape(vals, (1, *np.shape(vals)))
        # the functional write one level down: the values may be outer tracers
        return bind(primitive(np.put_along_axis), (v, ind, vals, ax), {})

    out = replaying(trace, _put_along_axis_impl, (arr, indices, values, axis), {}, run)
    return trace.wrap(out.reshape(bcast_batch(trace, arr).shape))


def _place_rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
    """`np.place`: the k-th selected element gets `vals[k % len(vals)]`, where k counts
    the selected elements of the example (a cumulative sum, so batched masks work)."""
    arr, mask, vals = args[:3]
    return _masked_write(trace, _place_impl, args, arr, mask, vals, by_count=True)


def _putmask_rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
    """`np.putmask`: element n gets `values[n % len(values)]` where the mask is set."""
    a, mask, values = args[:3]
    return _masked_write(trace, _putmask_impl, args, a, mask, values, by_count=False)


def _masked_write(
    trace: BatchTrace,
    impl: Callable[..., Any],
    args: tuple[Any, ...],
    x: Any,
    mask: Any,
    vals: Any,
    by_count: bool,
) -> Any:
    dtype = np.result_type(x)
    base = bcast_batch(trace, x)
    flat = base.reshape(flat_shape(base))
    m = _flat(trace, mask).astype(bool, copy=False)
    if m.shape[1] != flat.shape[1]:
        replay_errors(trace, impl, args, {})
    v, vb = unwrap(trace, vals)
    if hasattr(v, "dtype"):  # arrays are cast safely, Python values converted
        if not np.can_cast(v.dtype, dtype, casting="safe"):
            replay_errors(trace, impl, args, {})
        v = v.astype(dtype, copy=False)
    else:
        v = np.array(v, dtype=dtype, like=like(base))
    v = np.reshape(v, _rows_shape(v) if vb else (-1,))
    count = v.shape[-1]
    if count == 0:
        if by_count and bool(np.any(m)):
            replay_errors(trace, impl, args, {})
        return trace.wrap(base.copy())
    pos = np.cumsum(m, axis=1) - 1 if by_count else np.arange(flat.shape[1], like=like(flat))
    pos = pos % count
    if not vb:
        chosen = bind(GETITEM, (v, pos), {})  # `v[pos]`: `pos` may be an outer tracer
    else:
        chosen = np.take_along_axis(v, pos, axis=1) if pos.ndim == 2 else np.take(v, pos, axis=1)
    return trace.wrap(np.where(m, chosen, flat).reshape(base.shape))


@builder
def _in_place(func: Callable[..., Any], impl: Callable[..., Any], rule: Callable[..., Any]) -> None:
    """Register an in-place NumPy writer: a functional primitive (its rule), and the
    `IN_PLACE` entry that writes the new value back into a traced target."""
    prim = primitive(func)
    prim.impl = impl
    register(prim, "batch", rule)

    def write(*args: Any, **kwargs: Any) -> None:
        target = args[0] if args else next(iter(kwargs.values()))
        if isinstance(target, Tracer):
            new = bind(prim, args, kwargs)
            if isinstance(new, Tracer) and new._trace is target._trace and not target._aliased:
                target._become(new)  # the new value is already a copy of the target's
            else:
                assign(target, new)  # casts, or raises what an assignment would
            return None
        tracer = next(x for x in optree.tree_leaves((args, kwargs)) if isinstance(x, Tracer))
        raise tracer._trace.concretization(
            f"`np.{func.__name__}` writes a traced value into a plain NumPy array",
            "make the target traced too (e.g. `a = np.zeros_like(x)` or `a = x.copy()`), "
            "or build the result with `np.where`",
        )

    IN_PLACE[func] = write


# -- derivatives of the writers: functional writes `out = write(target, where, values)`.
# Linear in (target, values) jointly: the JVP writes the values' tangent into the
# target's. The target's cotangent is `g` with the written positions zeroed; the values
# get `g` read where they were written (only the last of repeated writes to one position
# counts, as NumPy leaves it), summed where `values` is repeated to fill the positions.


def _write_jvp(func: Callable[..., Any], name: str) -> Callable[..., Any]:
    prim = primitive(func)

    def rule(
        args: tuple[Any, ...], kwargs: dict[Any, Any], ans: Any, tangents: dict[Any, Any]
    ) -> Any:
        t_target = tangents.get(0)
        t_values = tangents.get(2, tangents.get(name))
        if t_target is None:
            t_target = np.zeros_like(ans)
        if t_values is None:
            v = get_arg(args, kwargs, 2, name)
            t_values = np.zeros_like(v) if hasattr(v, "shape") else np.zeros(np.shape(v))
        args, kwargs = set_arg((t_target, *args[1:]), kwargs, 2, name, t_values)
        return bind(prim, args, kwargs)

    return rule


def _fold(w: Any, m: int) -> Any:
    """`out[j] = sum(w[k] for k % m == j)` for the 1-d `w`: where `values[k % m]` was used."""
    k = w.shape[0]
    r = -(-k // m)
    if r * m != k:
        w = np.concatenate([w, np.zeros_like(w, shape=(r * m - k,))])
    return w if r == 1 else np.sum(np.reshape(w, (r, m)), axis=0)


def _put_vjp(
    argnum: Any, ans: Any, args: tuple[Any, ...], kwargs: dict[Any, Any]
) -> Callable[..., Any]:
    a, v = args[0], get_arg(args, kwargs, 2, "v")
    n, m = _size(a), int(np.size(v)) if not hasattr(v, "shape") else _size(v)
    idx = np.ravel(_as_index(args[1]))
    idx = _mode_index(idx, n, get_arg(args, kwargs, 3, "mode", "raise"))
    if m == 0 or idx.shape[0] == 0:  # NumPy writes nothing
        return (lambda g: g) if argnum == 0 else (lambda g: None)
    if argnum == 0:
        return lambda g: np.reshape(bind(SETITEM, (np.reshape(g, (n,)), idx, 0), {}), a.shape)
    won = last_writes((n,), idx)
    return lambda g: np.reshape(_fold(bind(GETITEM, (np.reshape(g, (n,)), idx), {}) * won, m),
                                np.shape(v))  # fmt: skip


def _put_along_axis_vjp(
    argnum: Any, ans: Any, args: tuple[Any, ...], kwargs: dict[Any, Any]
) -> Callable[..., Any]:
    arr, indices = args[0], args[1]
    axis = get_arg(args, kwargs, 3, "axis")
    if axis is None:
        shape, index = (_size(arr),), (indices,)
    else:
        shape = arr.shape
        axis = normalize_axis_index(axis, arr.ndim)
        index = along_axis_index(shape, indices, axis)
    if argnum == 0:
        return lambda g: np.reshape(bind(SETITEM, (np.reshape(g, shape), index, 0), {}), arr.shape)
    won = last_writes(shape, index)
    return lambda g: bind(GETITEM, (np.reshape(g, shape), index), {}) * won


def _masked_write_vjp(by_count: bool, name: str) -> Callable[..., Any]:
    """`place` (`by_count`: the k-th selected element gets `vals[k % m]`) and `putmask`
    (element i gets `values[i % m]` where the mask is set)."""

    def maker(
        argnum: Any, ans: Any, args: tuple[Any, ...], kwargs: dict[Any, Any]
    ) -> Callable[..., Any]:
        x, mask = args[0], args[1]
        n = _size(x)
        keep = np.reshape(mask, (n,)) != 0
        if argnum == 0:
            return lambda g: np.where(np.reshape(keep, x.shape), 0, g)
        v = get_arg(args, kwargs, 2, name)
        m = _size(v)
        if m == 0:
            return lambda g: None
        if not by_count:
            return lambda g: np.reshape(_fold(np.where(keep, np.reshape(g, (n,)), 0), m), v.shape)
        slot = (np.cumsum(keep) - 1) % m
        return lambda g: np.reshape(
            scatter(np.where(keep, np.reshape(g, (n,)), 0), (m,), slot), v.shape
        )

    return maker


for _func, _name in ((np.put, "v"), (np.put_along_axis, "values"), (np.place, "vals"),
                     (np.putmask, "values")):  # fmt: skip
    defjvp_argnums(_func, _write_jvp(_func, _name))
defvjp_argnum(np.put, _put_vjp)
defvjp_argnum(np.put_along_axis, _put_along_axis_vjp)
defvjp_argnum(np.place, _masked_write_vjp(by_count=True, name="vals"))
defvjp_argnum(np.putmask, _masked_write_vjp(by_count=False, name="values"))


_in_place(np.put, _put_impl, _put_rule)
_in_place(np.put_along_axis, _put_along_axis_impl, _put_along_axis_rule)
_in_place(np.place, _place_impl, _place_rule)
_in_place(np.putmask, _putmask_impl, _putmask_rule)


# -- data-dependent shapes: nonzero, argwhere, flatnonzero -----------------------------


def _nonzero_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        x = args[0]
        nd = example_ndim(trace, x)
        if trace.axis_size == 0:
            return zero_batch(trace, func, args, kwargs)
        if nd == 0 and func is np.nonzero:
            replay_errors(trace, func, args, kwargs)  # NumPy refuses 0-d arrays
        v = unwrap(trace, x)[0]
        flat = v.reshape(flat_shape(v))
        k = agreed_size(trace, np.count_nonzero(flat, axis=1), f"`np.{func.__name__}`")
        b = v.shape[0]
        if func is np.flatnonzero:
            return trace.wrap(np.nonzero(flat)[1].reshape(b, k))
        if nd == 0:  # argwhere of a 0-d example: (k, 0)
            return trace.wrap(np.zeros((b, k, 0), dtype=np.intp, like=like(v)))
        where = np.nonzero(v)[1:]  # sorted by example first, like one call per example
        if func is np.argwhere:
            return trace.wrap(np.stack(where, axis=-1).reshape(b, k, nd))
        return tuple(trace.wrap(w.reshape(b, k)) for w in where)

    return rule


defbatch([np.nonzero, np.argwhere, np.flatnonzero], _nonzero_rule)


# -- index helpers ------------------------------------------------------------------


def _unravel_index_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        v = unwrap(trace, args[0])[0]
        run = lambda: np.unravel_index(v, *args[1:], **kwargs)  # noqa: E731
        return tuple(trace.wrap(o) for o in replaying(trace, func, args, kwargs, run))

    return rule


def _ravel_multi_index_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        multi = args[0]
        if is_batched(trace, multi):  # one array whose first axis enumerates the indices
            multi = [multi[j] for j in range(len(multi))]
        ready = tuple(aligned_operands(trace, list(multi)))
        run = lambda: np.ravel_multi_index(ready, *args[1:], **kwargs)  # noqa: E731
        return trace.wrap(replaying(trace, func, args, kwargs, run))

    return rule


def _shape_only_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    """Functions of an array's shape only (`diag_indices_from`, ...): the result does
    not depend on the batch; a free broadcast stands in for one example."""

    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        x = args[0]
        stand_in = np.broadcast_to(np.zeros((), dtype=x.dtype, like=like(x)), x.shape)
        return func(stand_in, *args[1:], **kwargs)

    return rule


def _ix_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    """`np.ix_`: each sequence becomes an open-mesh axis; batched ones keep the batch
    axis in front (boolean ones become their `nonzero()`, when the counts agree)."""

    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        nd = len(args)
        out = []
        for k, seq in enumerate(args):
            if not is_batched(trace, seq):
                out.append(
                    func(
                        *[
                            seq if j == k else np.zeros(1, np.intp, like=like(*args))
                            for j in range(nd)
                        ]
                    )[k]
                )
                continue
            if seq.ndim != 1:
                raise ValueError("Cross index must be 1 dimensional")
            v = seq.val
            if v.dtype == np.bool_:
                v = unwrap(trace, np.nonzero(seq)[0])[0]
            elif v.shape[1] == 0:
                v = v.astype(np.intp)
            out.append(
                trace.wrap(v.reshape((v.shape[0],) + (1,) * k + v.shape[1:] + (1,) * (nd - k - 1)))
            )
        return tuple(out)

    return rule


defbatch(np.unravel_index, _unravel_index_rule)
defbatch(np.ravel_multi_index, _ravel_multi_index_rule)
defbatch([np.diag_indices_from, np.tril_indices_from, np.triu_indices_from], _shape_only_rule)
defbatch(np.ix_, _ix_rule)


# -- bincount, trim_zeros ----------------------------------------------------------------


def _bincount_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    """One `np.bincount` over the whole batch: example b's values are offset by
    `b * length`, so each example counts into its own bins (and sums its weights in
    the same order as alone). The length depends on the data: it must agree."""

    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        x = args[0]
        weights = get_arg(args, kwargs, 1, "weights")
        minlength = get_arg(args, kwargs, 2, "minlength", 0)
        xv, xb = unwrap(trace, x)
        bad = example_ndim(trace, x) != 1 or not np.can_cast(np.result_type(x), np.intp, "safe")
        if bad or (xb and np.size(xv) and bool(np.any(xv < 0))):
            replay_errors(trace, func, args, kwargs)
        if trace.axis_size == 0:
            return zero_batch(trace, func, args, kwargs)
        # (values as NumPy's intp: `max + 1` of uint8 wraps, and uint64 + intp is float)
        if xb:
            top = (
                np.max(xv, axis=1).astype(np.intp) + 1
                if xv.shape[1]
                else np.zeros(xv.shape[0], np.intp, like=like(xv))
            )
            length = agreed_size(trace, np.maximum(top, minlength), "`np.bincount`")
        else:
            length = len(np.bincount(x, minlength=minlength))
        offsets = np.arange(trace.axis_size, dtype=np.intp, like=like(x)).reshape(-1, 1) * length
        flat = (offsets + bcast_batch(trace, x).astype(np.intp, copy=False)).ravel()
        w = None if weights is None else bcast_batch(trace, weights).ravel()
        run = lambda: np.bincount(flat, w, minlength=length * trace.axis_size)  # noqa: E731
        out = replaying(trace, func, args, kwargs, run)
        return trace.wrap(out.reshape(trace.axis_size, length))

    return rule


def _trim_zeros_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    """The bounding box of each example's nonzero entries; a batched slice when every
    example's box is the same."""

    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        filt = args[0]
        trim = get_arg(args, kwargs, 1, "trim", "fb")
        axis = get_arg(args, kwargs, 2, "axis")
        v = unwrap(trace, filt)[0]
        nd = example_ndim(trace, filt)
        if not isinstance(trim, str) or trim.lower() not in {"fb", "bf", "f", "b"}:
            replay_errors(trace, func, args, kwargs)
        if v.dtype.kind not in "biufc":
            return loop_apply(trace, func, args, kwargs, "np.trim_zeros")
        axes = range(nd) if axis is None else normalize_axis_tuple(axis, nd)
        if not axes:
            return filt
        if trace.axis_size == 0:
            return zero_batch(trace, func, args, kwargs)
        trim = trim.lower()
        nonzero = v != 0
        index = [slice(None)] * (nd + 1)
        for ax in range(nd):
            if ax not in axes:
                continue
            others = tuple(a + 1 for a in range(nd) if a != ax)
            hit = np.any(nonzero, axis=others) if others else nonzero
            n = hit.shape[1]
            empty = ~np.any(hit, axis=1)
            start = np.argmax(hit, axis=1) if "f" in trim else np.zeros_like(empty, np.intp)
            stop = (
                n - np.argmax(hit[:, ::-1], axis=1)
                if "b" in trim
                else np.full_like(empty, n, np.intp)
            )
            start = agreed_size(trace, np.where(empty, 0, start), "`np.trim_zeros`")
            stop = agreed_size(trace, np.where(empty, 0, stop), "`np.trim_zeros`")
            index[ax + 1] = slice(start, stop)
        return trace.wrap(v[tuple(index)])

    return rule


defbatch(np.bincount, _bincount_rule)


deflinear(np.bincount, argnums=(1,))
defvjp(
    np.bincount,
    lambda ans, x, weights=None, minlength=0: lambda g: bind(GETITEM, (g, x), {}),
    argnums=(1,),
)
defbatch(np.trim_zeros, _trim_zeros_rule)


# -- derivatives: `bincount` is linear in its weights (the VJP reads `g` at each value's
# bin); `trim_zeros` is a slice whose bounds the primal's zeros fix.


def _trim_slices(ans: Any, filt: Any, trim: str = "fb", axis: Any = None) -> tuple[Any, ...]:
    """The slice of `filt` that `np.trim_zeros` returned as `ans`."""
    nonzero = filt != 0
    out = []
    for ax, (n, k) in enumerate(zip(filt.shape, ans.shape, strict=True)):
        start = 0
        if k != n and "f" in trim.lower():  # the first index with a nonzero entry
            others = tuple(d for d in range(filt.ndim) if d != ax)
            start = int(np.argmax(np.any(nonzero, axis=others) if others else nonzero))
        out.append(slice(start, start + k))
    return tuple(out)


def _trim_zeros_jvp(t: Any, ans: Any, filt: Any, *args: Any, **kwargs: Any) -> Any:
    return bind(GETITEM, (t, _trim_slices(ans, filt, *args, **kwargs)), {})


def _trim_zeros_vjp(ans: Any, filt: Any, *args: Any, **kwargs: Any) -> Callable[..., Any]:
    index = _trim_slices(ans, filt, *args, **kwargs)
    return lambda g: scatter(g, filt.shape, index, add=False)


defjvp(np.trim_zeros, _trim_zeros_jvp)
defvjp(np.trim_zeros, _trim_zeros_vjp)
