"""Helpers that batch rules of every family share: an example's axes as axes of the
batch, an example's shape, the per-example loop of a rule's rare cases.

A batched value holds its batch axis at axis 0 (see `_batching`), so a per-example
axis `a` of an `ndim`-d example is axis `a % ndim + 1` of the batch.
"""

from __future__ import annotations

import operator
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from ._batching import (
    BatchTrace,
    bcast_batch,
    example_ndim,
    loop_apply,
    loop_rule,
    unwrap,
    warn_fallback,
)
from ._differentiate_rule import NotByRule, own_impl
from ._registry import function_name, primitive


def in_example_order(v: Any) -> Any:
    """`v` copied into C order where its batch axis varies fastest in memory (a batch-last
    layout: `ufuncs._with_batch_axis_last` makes them, and a batch mapped along an
    example's last axis is one), else `v` itself. NumPy adds pairwise only along the
    inner loop of its iteration, which is an example's last axis in the loop and in C
    order, but the batch axis in a batch-last layout: sums over an example's axes (means,
    variances, norms, contractions) then round as the loop's do. (Under `vmapx.jit`'s
    recording the layout is not read, as the replay's may differ: its sums may differ in
    the last bits, as its docs say.)"""
    if type(v) is np.ndarray and v.strides[:1] != (0,) and batch_axis_fastest(v):
        return np.ascontiguousarray(v)  # (not a batch broadcast from one example: a copy)
    return v


def batch_axis_fastest(v: np.ndarray) -> bool:
    """Whether the batch axis of plain array `v` (its axis 0) varies faster in memory than
    an example's last axis: a batch-last layout (see `in_example_order`)."""
    return v.ndim > 1 and abs(v.strides[0]) < abs(v.strides[-1])


def shift_axis(axis: Any, ndim: int) -> Any:
    """A per-example axis (or tuple, or None = all) as an axis of the batched value."""
    if axis is None:
        return tuple(range(1, ndim + 1))
    if isinstance(axis, tuple):
        return tuple(shift_one(a, ndim) for a in axis)
    return shift_one(axis, ndim)


def shift_one(axis: int, ndim: int) -> int:
    """One per-example axis of an `ndim`-d example as an axis of the batched value
    (NumPy's `AxisError` when it is out of range)."""
    axis = operator.index(axis)
    if not -ndim <= axis < ndim:
        raise np.exceptions.AxisError(axis, ndim)
    return axis % ndim + 1


def scalar_axis(axis: Any, ndim: int) -> bool:
    """Whether `axis` is one NumPy lets through on a 0-d example (`ndim == 0`): a single
    integer 0 or -1, not in a tuple. NumPy keeps it for backwards compatibility with
    scalars (`np.sum(np.float64(2), axis=0)` is 2.0): its ufunc reductions then reduce no
    axis (`reduced_axes`), and its functions that view a 0-d array as 1-d (`argmax`,
    `cumsum`, `argsort`, `take`, `repeat`, ...) take axis 0 of that one-element view
    (`value_and_axis` with `as_1d`). Others (`mean`, `sort`, `flip`, ...) raise."""
    if ndim != 0 or axis is None or isinstance(axis, tuple | list | bool | np.bool_):
        return False
    try:
        return operator.index(axis) in (0, -1)
    except TypeError:  # (not an axis: the rule's own checks raise NumPy's error)
        return False


def reduced_axes(axis: Any, ndim: int) -> Any:
    """`shift_axis` for a ufunc reduction (`np.sum`, `np.add.reduce`, ...), where axis 0
    or -1 of a 0-d example reduces no axis, as NumPy's does (see `scalar_axis`)."""
    return () if scalar_axis(axis, ndim) else shift_axis(axis, ndim)


def example_shape(trace: BatchTrace, x: Any) -> tuple[int, ...]:
    """The shape of `x` as one example sees it."""
    v, batched = unwrap(trace, x)
    return tuple(v.shape[1:]) if batched else np.shape(x)


def flat_shape(v: Any) -> tuple[int, int]:
    """`(B, size of one example)`, valid for a zero-size batch too."""
    return (v.shape[0], int(np.prod(v.shape[1:], dtype=np.int64)))


def value_and_axis(trace: BatchTrace, x: Any, axis: Any, *, as_1d: bool = False) -> tuple[Any, int]:
    """The batched value of `x` and the batched axis for its per-example `axis`
    (`axis=None` flattens each example, as NumPy's `axis=None` does). With `as_1d`, for a
    function that views a 0-d array as 1-d (`argsort`, `take`, `repeat`, ...), axis 0 or
    -1 of a 0-d example is its one-element flattened view too (see `scalar_axis`)."""
    v = bcast_batch(trace, x)
    if axis is None or (as_1d and scalar_axis(axis, example_ndim(trace, x))):
        return v.reshape(flat_shape(v)), 1
    return v, shift_one(axis, example_ndim(trace, x))


def per_example(
    trace: BatchTrace,
    func: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[Any, Any],
    why: str,
) -> Any:
    """Run `func` once per example (with a `PerformanceWarning` that says `why`)."""
    name = f"`{function_name(func)}`"
    warn_fallback(trace, f"{name} {why}")
    return loop_apply(trace, func, args, kwargs, name)


def loop(
    trace: BatchTrace, func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[Any, Any]
) -> Any:
    """The per-example loop (with its warning), for a case a rule does not batch."""
    if own_impl(trace):  # the loop would call `func` itself, which dispatches back here
        raise NotByRule(func)
    return loop_rule(trace, primitive(func), args, kwargs)


def zero_batch(
    trace: BatchTrace,
    func: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[Any, Any],
    *,
    quiet: bool = False,
) -> Any:
    """A data-dependent result for a zero-size batch: one dummy example (ones) gives
    the results' shapes and dtypes. With `quiet`, its warnings (a zero variance, ...),
    which say nothing about the empty batch, are dropped."""
    name = getattr(func, "__name__", "f")
    if not quiet:
        return loop_apply(trace, func, args, kwargs, name)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return loop_apply(trace, func, args, kwargs, name)
