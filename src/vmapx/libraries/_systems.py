"""The batch rule of a library function of linear systems, `f(a, b, **options)`: a square
matrix `a` and right-hand sides `b` (one vector, or a matrix of columns, per example),
either or both batched, solved by one call on the whole batch.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from ._adapter import batch_by_axis

__all__ = ["on_systems"]


def on_systems(body: Callable[..., Any], lowering: Callable[..., Any]) -> Callable[..., Any]:
    """A batch rule: `body(a, b, **options)` called once, `a` a matrix or a stack of them
    and `b` columns or a stack of them (a vector per example gains a last axis, which the
    result loses); the batched arguments carry the batch on axis 0, NumPy-style
    broadcasting pairs them with the unbatched one. Calls the rule does not cover (no
    examples, a 1x1 or empty system, traced values, other shapes) take `lowering` under
    `vmap`, as the primitive would without this rule."""

    def call(in_batched: list[Any], a: Any, b: Any, **options: Any) -> Any:
        vector = np.ndim(b) - in_batched[1] == 1
        out = body(a, b[..., None] if vector else b, **options)
        return out[..., 0] if vector else out

    by_axis = batch_by_axis(call, lowering)

    def rule(axis_size: int, in_batched: list[Any], *args: Any, **options: Any) -> Any:
        if axis_size == 0 or not _covered(in_batched, *args):
            from .._api import vmap

            in_axes = tuple(0 if flag else None for flag in in_batched)
            return vmap(functools.partial(lowering, **options), in_axes=in_axes)(*args), True
        return by_axis(axis_size, in_batched, *args, **options)

    return rule


def _covered(in_batched: list[Any], *args: Any) -> bool:
    """Whether `(a, b)` are plain arrays of one square system of order 2 or more per
    example with at least one right-hand side."""
    if len(args) != 2 or any(type(x) is not np.ndarray for x in args):
        return False
    if any(type(flag) is not bool for flag in in_batched):
        return False
    a, b = (x.shape[1:] if flag else x.shape for x, flag in zip(args, in_batched, strict=True))
    if len(a) != 2 or a[0] != a[1] or a[0] < 2 or len(b) not in (1, 2) or b[0] != a[0]:
        return False
    return len(b) == 1 or b[1] > 0
