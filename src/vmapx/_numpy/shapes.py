"""Shape family: functions of one array whose axis arguments are per-example axes.

Most are "shift every axis argument by one and prepend the batch axis to shapes".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .._batching import BatchTrace, example_ndim, unwrap
from .._core import Tracer
from ._dispatch import defbatch, get_arg, set_arg
from .ufuncs import _shift_axis, _shift_one


def _value_rule(func: Callable) -> Callable:
    """Elementwise-like functions of one array with no axis: apply as they are."""

    def rule(trace: BatchTrace, args: tuple, kwargs: dict) -> Any:
        v = unwrap(trace, args[0])[0]
        return trace.wrap(func(v, *args[1:], **kwargs))

    return rule


def _meta_rule(attr: str) -> Callable:
    """`np.shape/np.ndim/np.size`: answered from the per-example view, not batched."""

    def factory(func: Callable) -> Callable:
        def rule(trace: BatchTrace, args: tuple, kwargs: dict) -> Any:
            x = args[0]
            axis = get_arg(args, kwargs, 1, "axis")
            if attr == "size" and axis is not None:
                return x.shape[axis]
            return getattr(x, attr)

        return rule

    return factory


defbatch(np.shape, _meta_rule("shape"))
defbatch(np.ndim, _meta_rule("ndim"))
defbatch(np.size, _meta_rule("size"))
defbatch([np.copy, np.astype, np.real_if_close], _value_rule)
defbatch([np.real, np.imag], _value_rule, may_view=True)


def _reshape_rule(func: Callable) -> Callable:
    def rule(trace: BatchTrace, args: tuple, kwargs: dict) -> Any:
        v = unwrap(trace, args[0])[0]
        shape = get_arg(args, kwargs, 1, "shape")
        if shape is None:
            shape = kwargs.get("newshape")
        shape = resolve_shape(v.shape[1:], shape)
        order = get_arg(args, kwargs, 2, "order", "C")
        return trace.wrap(np.reshape(v, (v.shape[0], *shape), order=order))

    return rule


def _ravel_rule(func: Callable) -> Callable:
    def rule(trace: BatchTrace, args: tuple, kwargs: dict) -> Any:
        v = unwrap(trace, args[0])[0]
        order = get_arg(args, kwargs, 1, "order", "C")
        return trace.wrap(np.reshape(v, flat_shape(v), order=order))

    return rule


def flat_shape(v: Any) -> tuple[int, int]:
    """`(B, size of one example)`, valid for a zero-size batch too."""
    return (v.shape[0], int(np.prod(v.shape[1:], dtype=np.int64)))


def _broadcast_to_rule(func: Callable) -> Callable:
    def rule(trace: BatchTrace, args: tuple, kwargs: dict) -> Any:
        v = unwrap(trace, args[0])[0]
        shape = resolve_shape((), get_arg(args, kwargs, 1, "shape"))
        v = v.reshape(v.shape[:1] + (1,) * (len(shape) - v.ndim + 1) + v.shape[1:])
        return trace.wrap(np.broadcast_to(v, (v.shape[0], *shape)))

    return rule


def resolve_shape(example_shape: tuple, shape: Any) -> tuple[int, ...]:
    """A reshape target with its `-1` resolved from one example's size (so that a
    zero-size batch reshapes too)."""
    shape = (shape,) if isinstance(shape, int | np.integer) else tuple(shape)
    if -1 in shape:
        known = int(np.prod([d for d in shape if d != -1], dtype=np.int64))
        size = int(np.prod(example_shape, dtype=np.int64))
        shape = tuple(size // known if known and d == -1 else d for d in shape)
    return shape


def _squeeze_rule(func: Callable) -> Callable:
    def rule(trace: BatchTrace, args: tuple, kwargs: dict) -> Any:
        v = unwrap(trace, args[0])[0]
        axis = get_arg(args, kwargs, 1, "axis")
        nd = v.ndim - 1
        if axis is None:  # never the batch axis, even when the batch has size 1
            axis = tuple(i for i, d in enumerate(v.shape[1:]) if d == 1)
        return trace.wrap(np.squeeze(v, _shift_axis(axis, nd)))

    return rule


def _transpose_rule(func: Callable) -> Callable:
    def rule(trace: BatchTrace, args: tuple, kwargs: dict) -> Any:
        v = unwrap(trace, args[0])[0]
        nd = v.ndim - 1
        axes = get_arg(args, kwargs, 1, "axes")
        axes = range(nd - 1, -1, -1) if axes is None else axes
        return trace.wrap(np.transpose(v, (0, *(_shift_one(a, nd) for a in axes))))

    return rule


def _axes_rule(*positions: int, names: tuple[str, ...]) -> Callable:
    """Functions whose arguments at `positions` (or keywords `names`) are axes of `a`,
    all counted in the input's rank."""

    def factory(func: Callable) -> Callable:
        def rule(trace: BatchTrace, args: tuple, kwargs: dict) -> Any:
            x = args[0]
            v = unwrap(trace, x)[0]
            nd = example_ndim(trace, x)
            args = (v, *args[1:])
            for pos, name in zip(positions, names, strict=True):
                axis = get_arg(args, kwargs, pos, name)
                if axis is not None:
                    new = _shift_axis(tuple(axis) if isinstance(axis, list) else axis, nd)
                    args, kwargs = set_arg(args, kwargs, pos, name, new)
            return trace.wrap(func(*args, **kwargs))

        return rule

    return factory


def _expand_dims_rule(func: Callable) -> Callable:
    def rule(trace: BatchTrace, args: tuple, kwargs: dict) -> Any:
        v = unwrap(trace, args[0])[0]
        axis = get_arg(args, kwargs, 1, "axis")
        axes = tuple(axis) if isinstance(axis, tuple | list) else (axis,)
        out_nd = v.ndim - 1 + len(axes)
        return trace.wrap(np.expand_dims(v, tuple(_shift_one(a, out_nd) for a in axes)))

    return rule


defbatch(np.reshape, _reshape_rule, may_view=True)
defbatch(np.ravel, _ravel_rule, may_view=True)
defbatch([np.transpose, np.permute_dims] if hasattr(np, "permute_dims") else np.transpose,
         _transpose_rule, may_view=True)  # fmt: skip
defbatch(np.moveaxis, _axes_rule(1, 2, names=("source", "destination")), may_view=True)
defbatch(np.swapaxes, _axes_rule(1, 2, names=("axis1", "axis2")), may_view=True)
defbatch(np.squeeze, _squeeze_rule, may_view=True)
defbatch(np.expand_dims, _expand_dims_rule, may_view=True)
defbatch(np.broadcast_to, _broadcast_to_rule, may_view=True)


def _dtype_rule(func: Callable) -> Callable:
    """Functions of dtypes only (`result_type`, `can_cast`, ...): answered unbatched,
    with each traced argument standing in as an empty array of its dtype."""

    def stand_in(x: Any) -> Any:
        return np.empty(0, dtype=x.dtype) if isinstance(x, Tracer) else x

    def rule(trace: BatchTrace, args: tuple, kwargs: dict) -> Any:
        return func(*map(stand_in, args), **{k: stand_in(v) for k, v in kwargs.items()})

    return rule


defbatch([np.result_type, np.can_cast, np.common_type, np.iscomplexobj, np.isrealobj],
         _dtype_rule)  # fmt: skip
