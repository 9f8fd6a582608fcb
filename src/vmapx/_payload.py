"""Array payloads: the values at the bottom of a tracer chain, where they live.

A payload is a `numpy.ndarray` or a duck array that speaks NumPy's dispatch protocols
(`__array_ufunc__`, `__array_function__`: CuPy's GPU arrays, for one). vmapx keeps a
payload where it lives: it never calls `np.asarray` on one, and an array vmapx makes
itself (an index, a constant, a buffer) is made like the payload it meets
(`np.arange(n, like=like(x))`), so that a GPU computation stays on the GPU.

Tracer modules register how to reach the value one level down (`INNER`), so that
`innermost` finds the payload under any stack of transforms.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ._core import Tracer, is_ndarray

INNER: dict[type, Callable[[Any], Any]] = {}
"""Per tracer type: its value one level down (registered by each tracer's module)."""


def is_array(v: Any) -> bool:
    """Whether `v` is an array payload: an ndarray, or a duck array with NumPy's
    dispatch protocols (not a tracer)."""
    t = type(v)
    if t is np.ndarray:
        return True
    return (
        hasattr(t, "__array_function__")
        and not issubclass(t, Tracer)
        and hasattr(v, "shape")
        and hasattr(v, "dtype")
    )


def is_duck(v: Any) -> bool:
    """Whether `v` is a payload that is not a NumPy array (it must not meet host arrays)."""
    return not is_ndarray(v) and is_array(v)


def innermost(x: Any) -> Any:
    """The payload under `x`'s tracers (`x` itself when it is not a tracer)."""
    while isinstance(x, Tracer):
        x = next(INNER[c] for c in type(x).__mro__ if c in INNER)(x)
    return x


def like(*values: Any) -> Any:
    """The first duck payload under `values`, for `like=` (None when all live in NumPy,
    which is what `like=` means by default)."""
    for v in values:
        p = like(*v) if type(v) in (tuple, list) else innermost(v)  # (an index: a tuple)
        if p is not None and is_duck(p):
            return p
    return None


def moved(x: Any, *values: Any) -> Any:
    """`x` (a host array or a number made by vmapx) moved to the array type of the
    payloads under `values`; unchanged when they live in NumPy or `x` is not host."""
    ref = like(*values)
    if ref is None or isinstance(x, Tracer):
        return x
    if not isinstance(x, np.ndarray | np.generic | bool | int | float | complex):
        return x
    return np.asarray(x, like=ref)


def listed(x: Any) -> Any:
    """A host parameter array vmapx computed (pad widths, ...) as Python lists, which
    every array type reads; anything else unchanged."""
    return x.tolist() if is_ndarray(x) else x


def onto(args: Any, ref: Any) -> Any:
    """`args` (a call's arguments: a tuple, list or dict, one level of nested lists and
    tuples walked, as in an index) with every host ndarray moved to `ref`'s array type:
    the constants a rule or the user's function made in NumPy meet the payloads where
    those live."""
    if isinstance(args, dict):
        return {k: _onto_one(v, ref) for k, v in args.items()}
    return type(args)(_onto_one(a, ref) for a in args)


def _onto_one(a: Any, ref: Any) -> Any:
    if is_ndarray(a):
        return np.asarray(a, like=ref)
    if type(a) in (list, tuple) and any(is_ndarray(c) for c in a):
        return type(a)(np.asarray(c, like=ref) if is_ndarray(c) else c for c in a)
    return a


def concrete(v: Any) -> np.ndarray:
    """The host values of `v` that vmapx must read (a branch's predicate per example):
    a duck payload through its own `.tolist()`, anything else through `np.asarray` (a
    tracer of a lower level asks its own trace)."""
    if is_duck(v):
        return np.array(v.tolist(), dtype=v.dtype)
    return np.asarray(v)
