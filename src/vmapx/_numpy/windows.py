"""`numpy.lib.stride_tricks.sliding_window_view`: windows over per-example axes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .._batching import BatchTrace, defbatch, example_ndim, unwrap
from .._registry import get_arg
from .._rule_helpers import shift_axis


def _window_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        x = args[0]
        v, nd = unwrap(trace, x)[0], example_ndim(trace, x)
        shape = get_arg(args, kwargs, 1, "window_shape")
        shape = (shape,) if np.ndim(shape) == 0 else tuple(shape)
        axis = get_arg(args, kwargs, 2, "axis")
        if axis is None:  # every per-example axis, in order: never the batch axis
            if len(shape) != nd:
                raise ValueError(
                    f"Since axis is `None`, must provide window_shape for all dimensions "
                    f"of `x`; got {len(shape)} window_shape elements and `x.ndim` is {nd}."
                )
            axis = tuple(range(nd))
        axis = shift_axis(tuple(axis) if np.ndim(axis) else axis, nd)
        options = {k: kwargs[k] for k in ("subok", "writeable") if k in kwargs}
        return trace.wrap(func(v, shape, axis=axis, **options))

    return rule


defbatch(sliding_window_view, _window_rule, may_view=True)
