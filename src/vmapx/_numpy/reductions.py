"""Reductions and scans along axes: `axis=` names a per-example axis, so it shifts by one.

`axis=None` means "all of one example's axes": for reductions that accept a tuple it
becomes the tuple of axes 1..n; for those that flatten (`argmax`, `cumsum`, ...) the
batched value is reshaped to `(B, -1)` first.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .._batching import BatchTrace, aligned_operands, bcast_batch, example_ndim, is_batched, unwrap
from ._dispatch import defbatch, get_arg, set_arg
from .shapes import flat_shape
from .ufuncs import _shift_axis, _shift_one


def _axis_rule(*, axis_pos: int, flatten_none: bool, operand_kw: tuple[str, ...] = ()) -> Any:
    """Factory of rules for `func(a, ..., axis=..., ...)` with the array first.

    `operand_kw` names keyword operands shaped like `a` (`where=`, `weights=`) that may
    be batched too.
    """

    def factory(func: Callable) -> Callable:
        def rule(trace: BatchTrace, args: tuple, kwargs: dict) -> Any:
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
            if axis is None and flatten_none:
                v = v.reshape(flat_shape(v))
                axis = 1
                if kwargs.get("keepdims"):
                    return _keepdims_flat(trace, func, v, args, kwargs, axis_pos, nd)
            elif isinstance(axis, tuple | list):
                axis = _shift_axis(tuple(axis), nd)
            else:
                axis = _shift_axis(axis, nd)
            args, kwargs = set_arg((v, *args[1:]), kwargs, axis_pos, "axis", axis)
            return trace.wrap(func(*args, **kwargs))

        return rule

    return factory


def _keepdims_flat(trace, func, v, args, kwargs, axis_pos, nd):  # noqa: ANN001, ANN202
    args, kwargs = set_arg((v, *args[1:]), kwargs, axis_pos, "axis", 1)
    out = func(*args, **kwargs)
    return trace.wrap(out.reshape((out.shape[0],) + (1,) * nd))


# func(a, axis=None, ..., where=...) reducing over a tuple of axes
defbatch(
    [np.sum, np.prod, np.max, np.min, np.amax, np.amin, np.all, np.any, np.mean,
     np.nansum, np.nanprod, np.nanmax, np.nanmin, np.nanmean],
    _axis_rule(axis_pos=1, flatten_none=False, operand_kw=("where",)),
)  # fmt: skip
defbatch(
    [np.std, np.var, np.nanstd, np.nanvar],
    _axis_rule(axis_pos=1, flatten_none=False, operand_kw=("where", "mean")),
)
defbatch([np.ptp, np.count_nonzero], _axis_rule(axis_pos=1, flatten_none=False))
# func(a, axis=None, ...) where None flattens the example first
defbatch(
    [np.argmax, np.argmin, np.nanargmax, np.nanargmin, np.cumsum, np.cumprod,
     np.nancumsum, np.nancumprod],
    _axis_rule(axis_pos=1, flatten_none=True),
)  # fmt: skip


def _cumulative_rule(func: Callable) -> Callable:
    """`np.cumulative_sum(x, axis=None, ..., include_initial=False)`: axis is optional
    only for 1-d examples."""

    def rule(trace: BatchTrace, args: tuple, kwargs: dict) -> Any:
        v = unwrap(trace, args[0])[0]
        axis = get_arg(args, kwargs, 1, "axis")
        nd = example_ndim(trace, args[0])
        if axis is None:
            if nd != 1:
                raise ValueError(f"axis must be given for a {nd}-d array in {func.__name__}")
            axis = 0
        args, kwargs = set_arg((v, *args[1:]), kwargs, 1, "axis", _shift_one(axis, nd))
        return trace.wrap(func(*args, **kwargs))

    return rule


defbatch([np.cumulative_sum, np.cumulative_prod], _cumulative_rule)
