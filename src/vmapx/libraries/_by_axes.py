"""Adapters that call a library function once on the whole batch, where the function
takes the axes it works along (`axis=`, `axes=`): the batch is one more leading axis it
leaves alone. Used for `scipy.fft` and `scipy.ndimage`.

These are not differentiated: under `grad` (or given values another transform traces)
the library function itself runs, one example at a time, as it did before.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from ._adapter import Unsupported, adapts, batch_by_axis


def _no_lowering(*args: Any, **kwargs: Any) -> Any:
    raise Unsupported


def shifted(axis: Any) -> Any:
    """A per-example axis (an int) as the axis of the batch (its axis 0 in front)."""
    if type(axis) is not int:  # (bool, NumPy integers, ...: the library's own call)
        raise Unsupported
    return axis + 1 if axis >= 0 else axis


def batched_input(in_batched: list[Any], x: Any, rest: dict[str, Any]) -> None:
    """Raise `Unsupported` unless only `x` is batched, is a NumPy array of at least one
    axis per example, and the call writes into nothing (`output=`, `overwrite_x=`)."""
    if not in_batched[0] or any(in_batched[1:]) or type(x) is not np.ndarray or x.ndim < 2:
        raise Unsupported
    if rest.get("output") is not None or rest.get("overwrite_x") or rest.get("plan") is not None:
        raise Unsupported


def adapt_by_axes(module: str, name: str, call: Callable[..., Any]) -> None:
    """Adapt `module.name` (first parameter: the array), batched by `call(fun, x,
    options) -> result` where `fun` is the library function and `x` the batch."""
    fun = getattr(importlib.import_module(module), name)
    signature = inspect.signature(fun)
    first = next(iter(signature.parameters))

    def library_call(in_batched: list[Any], x: Any, **options: Any) -> Any:
        batched_input(in_batched, x, options)
        return call(fun, x, options)

    def lowering(*args: Any, **kwargs: Any) -> Any:
        raise Unsupported  # (not differentiated: the library function, per example)

    lowering.__signature__ = signature  # type: ignore[attr-defined]  # (the library's own)
    lowering.__name__ = name
    adapts(module, name, (first,), batch=batch_by_axis(library_call, _no_lowering))(lowering)
