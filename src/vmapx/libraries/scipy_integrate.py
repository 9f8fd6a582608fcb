"""Adapters for `scipy.integrate`'s sample-based rules, written with NumPy."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _adapter
from ._adapter import Unsupported, adapts


def _spacing(y: Any, x: Any, dx: Any, axis: Any) -> Any:
    if x is None:
        return dx
    if np.ndim(x) != 1:
        raise Unsupported
    shape = [1] * np.ndim(y)
    shape[axis] = -1
    return np.reshape(np.diff(x), shape)


def _pairs(y: Any, axis: Any) -> Any:
    y = np.moveaxis(y, axis, -1)
    return np.moveaxis(y[..., 1:], -1, axis), np.moveaxis(y[..., :-1], -1, axis)


@adapts("scipy.integrate", "trapezoid", ("y", "x"))
def trapezoid(y: Any, x: Any = None, dx: Any = 1.0, axis: Any = -1) -> Any:
    hi, lo = _pairs(y, axis)
    return np.sum(_spacing(y, x, dx, axis) * (hi + lo) / 2.0, axis=axis)


@adapts("scipy.integrate", "cumulative_trapezoid", ("y", "x"))
def cumulative_trapezoid(
    y: Any, x: Any = None, dx: Any = 1.0, axis: Any = -1, initial: Any = None
) -> Any:
    hi, lo = _pairs(y, axis)
    out = np.cumsum(_spacing(y, x, dx, axis) * (hi + lo) / 2.0, axis=axis)
    if initial is None:
        return out
    if initial != 0:
        raise Unsupported
    pad = [(0, 0)] * np.ndim(out)
    pad[axis] = (1, 0)
    return np.pad(out, pad)


def install() -> None:
    _adapter.install("scipy.integrate")
