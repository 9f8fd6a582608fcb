"""Joins and splits: functions of a sequence of arrays, and their inverses.

Unbatched members of a join are broadcast to the batch (a zero-stride view; the join
copies anyway), because the result is batched as a whole. Splits return views.
Positions (`indices_or_sections`, the `obj` of `insert`/`delete`) must be unbatched:
batched ones give shapes that differ between examples, so those calls loop.

Derivatives (see `vmapx._autodiff`): joins are linear in their arrays; the VJP of item j
is its slice of the cotangent.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import numpy as np

from .. import _pytree as optree  # optree in vmapx.config.pytree_namespace
from .._autodiff import defcomposite, deflinear, defvjp, defvjp_argnum
from .._batching import (
    BatchTrace,
    bcast_batch,
    defbatch,
    example_ndim,
    is_batched,
    unwrap,
    wrap_tree,
)
from .._compat import present
from .._core import Tracer
from .._payload import moved
from .._registry import get_arg, set_arg
from .._rule_helpers import example_shape, flat_shape, per_example, shift_one, value_and_axis
from .shapes import atleast_shape, raise_like_numpy
from .structural import defstructural, operands


def join(trace: BatchTrace, arrays: list[Any], axis: int, nd: int, **kwargs: Any) -> Any:
    """`np.concatenate(arrays, axis)` of batched and unbatched arrays of one example
    rank `nd` (the unbatched ones broadcast to the batch: the result holds them)."""
    vals = [moved(bcast_batch(trace, a), *arrays) for a in arrays]
    return trace.wrap(np.concatenate(vals, axis=shift_one(axis, nd), **kwargs))


def _join_rule(*, new_axis: bool) -> Callable[..., Any]:
    def factory(func: Callable[..., Any]) -> Callable[..., Any]:
        def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
            arrays = list(get_arg(args, kwargs, 0, "arrays"))
            axis = get_arg(args, kwargs, 1, "axis", 0)
            ndims = [example_ndim(trace, a) for a in arrays]
            if not new_axis and axis is not None and (0 in ndims or len(set(ndims)) > 1):
                func([np.zeros((1,) * n) for n in ndims], axis=axis)  # NumPy's own error
            nd = max(ndims) + (1 if new_axis else 0)
            vals = [bcast_batch(trace, a) for a in arrays]
            if axis is None:  # concatenate(axis=None) flattens each example first
                vals, axis = [v.reshape(flat_shape(v)) for v in vals], 0
                nd = 1
            args, kwargs = set_arg(args, kwargs, 0, "arrays", vals)
            args, kwargs = set_arg(args, kwargs, 1, "axis", shift_one(axis, nd))
            return trace.wrap(func(*args, **kwargs))

        return rule

    return factory


defbatch(np.concatenate, _join_rule(new_axis=False))


def _join_vjp(stack: bool) -> Callable[..., Any]:
    def maker(
        argnum: Any, ans: Any, args: tuple[Any, ...], kwargs: dict[Any, Any]
    ) -> Callable[..., Any]:
        arrays = get_arg(args, kwargs, 0, "arrays")
        axis = get_arg(args, kwargs, 1, "axis", 0)
        j = argnum[-1]
        x = arrays[j]
        if stack:
            index = (slice(None),) * (axis % ans.ndim) + (j,)
            return lambda g: g[index]
        if axis is None:
            start = sum(int(np.size(a)) for a in arrays[:j])
            return lambda g: np.reshape(g[start : start + int(np.size(x))], np.shape(x))
        ax = axis % ans.ndim
        start = sum(np.shape(a)[ax] for a in arrays[:j])
        index = (slice(None),) * ax + (slice(start, start + np.shape(x)[ax]),)
        return lambda g: g[index]

    return maker


defvjp_argnum(np.concatenate, _join_vjp(stack=False))
defbatch(np.stack, _join_rule(new_axis=True))


deflinear([np.concatenate, np.stack], argnums=((0, "*"),))
defvjp_argnum(np.stack, _join_vjp(stack=True))


# -- hstack, vstack, dstack, column_stack: promote each example, then concatenate --------


def promote(trace: BatchTrace, x: Any, shape: tuple[Any, ...]) -> Any:
    """`x` reshaped to the per-example `shape` (a view), batched or not."""
    v, b = unwrap(trace, x)
    return trace.wrap(v.reshape((v.shape[0], *shape))) if b else np.reshape(x, shape)


def _column_shape(shape: tuple[Any, ...]) -> tuple[Any, ...]:
    """`np.column_stack` turns 0-d and 1-d examples into columns."""
    return {0: (1, 1), 1: (*shape, 1)}.get(len(shape), shape)


_STACKERS: dict[Callable[..., Any], Callable[[tuple[Any, ...]], tuple[Any, ...]]] = {
    np.hstack: lambda s: atleast_shape(s, 1),
    np.vstack: lambda s: atleast_shape(s, 2),
    np.dstack: lambda s: atleast_shape(s, 3),
    np.column_stack: _column_shape,
}


def _stacker_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    shape_of = _STACKERS[func]

    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        arrays = get_arg(args, kwargs, 0, "tup")
        kwargs = {k: w for k, w in kwargs.items() if k != "tup"}
        arrays = [promote(trace, a, shape_of(example_shape(trace, a))) for a in arrays]
        nd = example_ndim(trace, arrays[0])
        axis = {np.vstack: 0, np.dstack: 2, np.column_stack: 1}.get(func, 0 if nd == 1 else 1)
        return join(trace, arrays, axis, nd, **kwargs)

    return rule


defbatch(list(_STACKERS), _stacker_rule)


# The stackers, `append` and `block` are computed as reshapes and concatenations (whose
# VJPs are views of the cotangent); a split's VJP joins the cotangents of its pieces;
# `insert` and `delete` are structural (derivatives from labels, see `defstructural`).
def _stacker_impl(func: Callable[..., Any]) -> Callable[..., Any]:
    shape_of = _STACKERS[func]

    def impl(tup: Any, **kwargs: Any) -> Any:
        arrays = [np.reshape(a, shape_of(np.shape(a))) for a in tup]
        nd = np.ndim(arrays[0]) if arrays else 1
        axis = {np.vstack: 0, np.dstack: 2, np.column_stack: 1}.get(func, 0 if nd == 1 else 1)
        return np.concatenate(arrays, axis=axis, **kwargs)

    return impl


for _func in _STACKERS:
    defcomposite(_func, _stacker_impl(_func))


# -- block -------------------------------------------------------------------------------


def _block_depth(x: Any) -> int:
    if type(x) is list:
        depths = {_block_depth(p) for p in x}
        if len(depths) != 1:  # an empty list, or mismatched depths: NumPy's own error
            np.block(_skeleton(x))
        return depths.pop() + 1
    if type(x) is tuple:
        np.block(_skeleton(x))
    return 0


def _skeleton(x: Any) -> Any:
    """The nesting of `x` with a plain 0 for every array (to get NumPy's error)."""
    return type(x)(_skeleton(p) for p in x) if type(x) in (list, tuple) else 0


def _block_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    """Every block promoted to the result's rank (axes put after the batch axis), then
    one `np.block`: it joins along the last axes, never the batch axis."""

    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        arrays = get_arg(args, kwargs, 0, "arrays")
        depth = _block_depth(arrays)
        nd = max(depth, _max_ndim(trace, arrays))
        return trace.wrap(np.block(_promoted(trace, arrays, nd)))

    return rule


def _max_ndim(trace: BatchTrace, x: Any) -> int:
    if type(x) is list:
        return max(_max_ndim(trace, p) for p in x)
    return example_ndim(trace, x)


def _promoted(trace: BatchTrace, x: Any, nd: int) -> Any:
    """The nested blocks, each batched and promoted to `nd` axes per example."""
    if type(x) is list:
        return [_promoted(trace, p, nd) for p in x]
    shape = example_shape(trace, x)
    return bcast_batch(trace, promote(trace, x, (1,) * (nd - len(shape)) + tuple(shape)))


defbatch(np.block, _block_rule)


def _block_impl(arrays: Any) -> Any:
    """Blocks promoted to the result's rank, joined along the last axes (innermost
    lists along the last axis)."""
    depth = _block_depth(arrays)
    nd = max(depth, _max_block_ndim(arrays))

    def build(x: Any, level: int) -> Any:
        if type(x) is list:
            return np.concatenate([build(p, level - 1) for p in x], axis=-level)
        shape = np.shape(x)
        return np.reshape(x, (1,) * (nd - len(shape)) + shape)

    return build(arrays, depth)


def _max_block_ndim(x: Any) -> int:
    return max(map(_max_block_ndim, x)) if type(x) is list else np.ndim(x)


defcomposite(np.block, _block_impl)


# -- unstack and splits: views of one array ------------------------------------------------


def _unstack_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        v, nd = unwrap(trace, args[0])[0], example_ndim(trace, args[0])
        if nd == 0:
            raise_like_numpy(func, 0)
        axis = shift_one(get_arg(args, kwargs, 1, "axis", 0), nd)
        return wrap_tree(trace, np.unstack(v, axis=axis))

    return rule


# per split function: (fewest axes of one example, the axis it splits (None: `axis=`))
_SPLITS: dict[Callable[..., Any], tuple[int, int | None]] = {
    np.split: (0, None),
    np.array_split: (0, None),
    np.hsplit: (1, 1),
    np.vsplit: (2, 0),
    np.dsplit: (3, 2),
}


def _split_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    least, fixed = _SPLITS[func]

    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        x, sections = args[0], get_arg(args, kwargs, 1, "indices_or_sections")
        if is_batched(trace, sections) or not is_batched(trace, x):
            return per_example(trace, func, args, kwargs, "with batched `indices_or_sections`")
        v, nd = unwrap(trace, x)[0], example_ndim(trace, x)
        if nd < least:
            raise_like_numpy(func, nd, sections)
        if fixed is None:
            axis = get_arg(args, kwargs, 2, "axis", 0)
        else:  # hsplit splits a 1-d example along its only axis
            axis = 0 if func is np.hsplit and nd == 1 else fixed
        split = np.array_split if func is np.array_split else np.split
        return wrap_tree(trace, split(v, sections, axis=shift_one(axis, nd)))

    return rule


defbatch(present(np, "unstack"), _unstack_rule, may_view=True)


if hasattr(np, "unstack"):  # NumPy 2
    deflinear(np.unstack)
    defvjp(np.unstack, lambda ans, x, *, axis=0: lambda g: np.stack(list(g), axis=axis))
defbatch(list(_SPLITS), _split_rule, may_view=True)


def _split_axis(
    func: Callable[..., Any], x: Any, args: tuple[Any, ...], kwargs: dict[Any, Any]
) -> int:
    fixed = _SPLITS[func][1]
    if fixed is None:
        return cast(int, get_arg(args, kwargs, 2, "axis", 0))
    return 0 if func is np.hsplit and np.ndim(x) == 1 else fixed


def _split_vjp(func: Callable[..., Any]) -> Callable[..., Any]:
    def maker(
        argnum: Any, ans: Any, args: tuple[Any, ...], kwargs: dict[Any, Any]
    ) -> Callable[..., Any]:
        axis = _split_axis(func, args[0], args, kwargs)
        return lambda g: np.concatenate(list(g), axis=axis)

    return maker


deflinear(list(_SPLITS))
for _func in _SPLITS:
    defvjp_argnum(_func, _split_vjp(_func))


# -- append, insert, delete ------------------------------------------------------------


def traced_sequence(x: Any) -> Any:
    """A list or tuple holding traced values as the array `np.asarray` makes of it (by
    `np.stack`, which traces); anything else as it is."""
    if type(x) in (list, tuple) and x and any(isinstance(e, Tracer) for e in optree.tree_leaves(x)):
        return np.stack([traced_sequence(e) for e in x])
    return x


def _append_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        arr, values = get_arg(args, kwargs, 0, "arr"), get_arg(args, kwargs, 1, "values")
        arr, values = traced_sequence(arr), traced_sequence(values)
        axis = get_arg(args, kwargs, 2, "axis")
        if axis is None:  # both are flattened first
            arrays = [
                promote(trace, a, (int(np.prod(example_shape(trace, a))),)) for a in (arr, values)
            ]
            return join(trace, arrays, 0, 1)
        return join(trace, [arr, values], axis, example_ndim(trace, arr))

    return rule


def _insert_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    """`np.insert` by one gather: NumPy inserts the labels of `values`' elements into
    the labels of `arr`'s (one example's worth of integers), which says where every
    element of the result comes from under NumPy's own rules."""

    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        arr, obj = get_arg(args, kwargs, 0, "arr"), get_arg(args, kwargs, 1, "obj")
        values, axis = get_arg(args, kwargs, 2, "values"), get_arg(args, kwargs, 3, "axis")
        if is_batched(trace, obj):
            return per_example(trace, func, args, kwargs, "with batched indices `obj`")
        shape, vshape = example_shape(trace, arr), example_shape(trace, values)
        size, vsize = int(np.prod(shape, dtype=np.intp)), int(np.prod(vshape, dtype=np.intp))
        labels = np.insert(
            np.arange(size).reshape(shape),
            obj,
            np.arange(size, size + vsize).reshape(vshape),
            axis=axis,
        )
        dtype = arr.dtype if hasattr(arr, "dtype") else np.asarray(arr).dtype
        flat = [promote(trace, a, (n,)) for a, n in ((arr, size), (values, vsize))]
        source = join(trace, flat, 0, 1, dtype=dtype, casting="unsafe").val
        return trace.wrap(
            source[:, moved(labels, source).reshape(-1)].reshape((source.shape[0], *labels.shape))
        )

    return rule


def _delete_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        arr, obj = get_arg(args, kwargs, 0, "arr"), get_arg(args, kwargs, 1, "obj")
        axis = get_arg(args, kwargs, 2, "axis")
        if is_batched(trace, obj) or not is_batched(trace, arr):
            return per_example(trace, func, args, kwargs, "with batched indices `obj`")
        v, ax = value_and_axis(trace, arr, axis)
        return trace.wrap(np.delete(v, obj, axis=ax))

    return rule


defbatch(np.append, _append_rule)


def _append_impl(arr: Any, values: Any, axis: Any = None) -> Any:
    arr, values = traced_sequence(arr), traced_sequence(values)
    if axis is None:
        arr, values, axis = np.ravel(arr), np.ravel(values), 0
    return np.concatenate((arr, values), axis=axis)


defcomposite(np.append, _append_impl)
defbatch(np.insert, _insert_rule)


defstructural(np.insert, operands((0, "arr"), (2, "values")))
defbatch(np.delete, _delete_rule)


defstructural(np.delete, operands((0, "arr")))
