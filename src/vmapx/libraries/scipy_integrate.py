"""Adapters for `scipy.integrate`'s sample-based rules, written with NumPy."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import scipy.integrate

from .._core import is_numpy_scalar
from . import _adapter
from ._adapter import Unsupported, adapts

# the library's own functions, taken before `install` puts the adapters in their place
_LIBRARY = {name: getattr(scipy.integrate, name) for name in ("trapezoid", "cumulative_trapezoid")}


def _library_dtype(name: str, y: Any, x: Any, dx: Any, initial: Any = None) -> Any:
    """The dtype SciPy's `name` gives for samples of `y`'s dtype at points of `x`'s (the
    samples' own floating dtype in recent SciPy: `float32` stays `float32`)."""
    x_dtype = None if x is None else np.result_type(x)
    if type(dx) in (int, float, complex) or is_numpy_scalar(dx):  # (asked once per kind)
        kind: Any = type(dx)  # (a class: hashable, whatever NumPy's stubs say)
        return _asked_dtype(name, np.result_type(y), x_dtype, kind, initial)
    return _ask_dtype(name, np.result_type(y), x_dtype, dx, initial)


def _ask_dtype(name: str, y_dtype: Any, x_dtype: Any, dx: Any, initial: Any) -> Any:
    two = np.arange(1, 3, dtype=y_dtype)
    at = None if x_dtype is None else np.arange(2, dtype=x_dtype)
    options = {} if initial is None else {"initial": initial}
    return np.result_type(_LIBRARY[name](two, at, dx=dx, **options))


@functools.lru_cache(maxsize=256)
def _asked_dtype(name: str, y_dtype: Any, x_dtype: Any, dx_type: Any, initial: Any) -> Any:
    return _ask_dtype(name, y_dtype, x_dtype, dx_type(1), initial)


def _spacing(y: Any, x: Any, dx: Any, axis: Any) -> Any:
    if x is None:
        return dx
    if np.ndim(x) != 1:
        raise Unsupported
    shape = [1] * np.ndim(y)
    shape[axis] = -1
    return np.reshape(np.diff(x), shape)


def _has_points(y: Any, x: Any, axis: Any) -> bool:
    """SciPy's checks of `cumulative_trapezoid`: a point at least along `axis` of `y`, and
    a 1-D `x` (the lowering's; other shapes go to the library) of as many points."""
    if type(axis) is not int or not -np.ndim(y) <= axis < np.ndim(y):
        return False
    n = np.shape(y)[axis]
    return n > 0 and (x is None or np.ndim(x) != 1 or len(x) == n)


def _pairs(y: Any, axis: Any) -> Any:
    y = np.moveaxis(y, axis, -1)
    return np.moveaxis(y[..., 1:], -1, axis), np.moveaxis(y[..., :-1], -1, axis)


@adapts("scipy.integrate", "trapezoid", ("y", "x"))
def trapezoid(y: Any, x: Any = None, dx: Any = 1.0, axis: Any = -1) -> Any:
    dtype = _library_dtype("trapezoid", y, x, dx)
    hi, lo = _pairs(y, axis)
    return np.sum(_spacing(y, x, dx, axis) * (hi + lo) / 2.0, axis=axis).astype(dtype)


@adapts("scipy.integrate", "cumulative_trapezoid", ("y", "x"))
def cumulative_trapezoid(
    y: Any, x: Any = None, dx: Any = 1.0, axis: Any = -1, initial: Any = None
) -> Any:
    if initial is not None and (not np.isscalar(initial) or np.iscomplexobj(initial)
                                or initial != 0):  # fmt: skip
        raise Unsupported  # (SciPy's error, or its warning casting a complex 0: the library)
    if not _has_points(y, x, axis):
        raise Unsupported  # (SciPy's ValueError: the library's, per example)
    dtype = _library_dtype("cumulative_trapezoid", y, x, dx, initial)
    hi, lo = _pairs(y, axis)
    out = np.cumsum(_spacing(y, x, dx, axis) * (hi + lo) / 2.0, axis=axis).astype(dtype)
    if initial is None:
        return out
    pad = [(0, 0)] * np.ndim(out)
    pad[axis] = (1, 0)
    return np.pad(out, pad)


def install() -> None:
    _adapter.install("scipy.integrate")
