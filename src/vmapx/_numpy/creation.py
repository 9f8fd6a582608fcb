"""Creation family: `*_like` constructors and functions called with `like=`.

`np.zeros_like(x)` of a batched `x` gives a batched value whose batch axis is a
zero-stride broadcast (no memory per example): it must stay a tracer so that later
index assignments into it (`out[i] = ...`, the common way to fill a result) are
traced, yet nothing is copied until one happens.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .._batching import BatchTrace, unwrap
from ._dispatch import defbatch, get_arg


def _like_rule(func: Callable) -> Callable:
    def rule(trace: BatchTrace, args: tuple, kwargs: dict) -> Any:
        x = args[0]
        v, batched = unwrap(trace, x)
        if not batched:  # only `fill_value` is batched (full_like)
            return _full_like_batched_fill(trace, args, kwargs)
        shape = kwargs.pop("shape", None)
        shape = v.shape[1:] if shape is None else _as_shape(shape)
        fill_value, batched_fill = unwrap(trace, get_arg(args, kwargs, 1, "fill_value"))
        example = np.empty_like(v, shape=shape, dtype=kwargs.get("dtype"))
        if func is np.full_like:
            if batched_fill:
                out = np.empty_like(v, shape=(v.shape[0], *shape), dtype=kwargs.get("dtype"))
                out[...] = fill_value.reshape(fill_value.shape[:1] + (1,) * len(shape))
                return trace.wrap(out)
            example = np.full_like(example, fill_value)
        elif func is not np.empty_like:
            example = func(example)
        return trace.wrap(np.broadcast_to(example, (v.shape[0], *shape)))

    return rule


def _as_shape(shape: Any) -> tuple[int, ...]:
    return (int(shape),) if isinstance(shape, int | np.integer) else tuple(shape)


def _full_like_batched_fill(trace: BatchTrace, args: tuple, kwargs: dict) -> Any:
    x, fill = args[0], unwrap(trace, get_arg(args, kwargs, 1, "fill_value"))[0]
    shape = _as_shape(kwargs.get("shape", np.shape(x)))
    dtype = kwargs.get("dtype") or np.result_type(x)
    out = np.empty_like(fill, shape=(fill.shape[0], *shape), dtype=dtype)
    out[...] = fill.reshape(fill.shape[:1] + (1,) * len(shape))
    return trace.wrap(out)


def _like_kwarg_rule(func: Callable) -> Callable:
    """`np.zeros(..., like=x)` and friends: the result does not depend on `x`'s values."""

    def rule(trace: BatchTrace, args: tuple, kwargs: dict) -> Any:
        kwargs = {**kwargs, "like": unwrap(trace, kwargs["like"])[0]}
        return func(*args, **kwargs)

    return rule


defbatch([np.zeros_like, np.ones_like, np.empty_like, np.full_like], _like_rule)
defbatch(
    [np.zeros, np.ones, np.empty, np.full, np.eye, np.identity, np.arange, np.linspace,
     np.logspace, np.geomspace, np.tri, np.fromfunction, np.frombuffer, np.fromiter,
     np.fromstring],
    _like_kwarg_rule,
)  # fmt: skip
