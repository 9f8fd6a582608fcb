"""Adapters for `numpy.polynomial`'s power-series functions, written with NumPy
functions vmapx batches (`as_series` on entry leaves NumPy's dispatch)."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _adapter
from ._adapter import Unsupported, adapts


@adapts("numpy.polynomial.polynomial", "polyval", ("x", "c"))
def polyval(x: Any, c: Any, tensor: Any = True) -> Any:
    if np.ndim(c) != 1:
        raise Unsupported
    c = c * 1.0  # NumPy's coefficients are floats (or complex)
    out = np.zeros_like(x * c[-1]) + c[-1]
    for k in range(len(c) - 2, -1, -1):
        out = out * x + c[k]
    return out


def _polyder_rule(axis_size: int, in_batched: list[Any], c: Any, m: Any = 1, scl: Any = 1,
                  axis: Any = 0) -> Any:  # fmt: skip
    """`polyder`'s batch rule: NumPy's steps (floats first, scaled by `scl`, then the
    `j * c[j]` of each power, in the coefficients' dtype) on every example at once;
    calls it does not cover take the lowering under `vmap`."""
    if (axis_size == 0 or type(c) is not np.ndarray or c.ndim != 2 or type(m) is not int
            or m < 0 or type(scl) not in (int, float) or type(axis) is not int
            or axis not in (0, -1)):  # fmt: skip
        from .. import vmap

        return vmap(lambda c: polyder(c, m, scl, axis))(c), True
    if c.dtype.char in "?bBhHiIlLqQpP":  # (NumPy's integral and boolean codes)
        c = c + 0.0
    if c.dtype.kind not in "fc":
        raise Unsupported
    if m == 0:
        return c.copy(), True
    n = c.shape[1]
    if m >= n:
        return c[:, :1] * 0, True
    for _ in range(m):
        n -= 1
        c = c * scl
        c = c[:, 1:] * np.arange(1, n + 1).astype(c.dtype)
    return c, True


@adapts("numpy.polynomial.polynomial", "polyder", ("c",), batch=_polyder_rule)
def polyder(c: Any, m: Any = 1, scl: Any = 1, axis: Any = 0) -> Any:
    if np.ndim(c) != 1 or axis != 0 or m < 0:
        raise Unsupported
    if np.result_type(c).kind in "biu":  # NumPy's: floats first (no integer overflow)
        c = c + 0.0
    dtype = np.result_type(c)
    for _ in range(m):
        if len(c) <= 1:
            return np.zeros_like(c[:1], dtype=dtype)
        c = c[1:] * np.arange(1, len(c)) * scl
    return c.astype(dtype)


@adapts("numpy.polynomial.polynomial", "polyfit", ("x", "y", "w"))
def polyfit(x: Any, y: Any, deg: Any, rcond: Any = None, full: Any = False, w: Any = None) -> Any:
    if full or not isinstance(deg, int) or np.ndim(x) != 1 or np.ndim(y) != 1:
        raise Unsupported
    dtype = np.result_type(x * 1.0, y * 1.0, *([] if w is None else [w * 1.0]))  # NumPy's
    v = x[:, None] ** np.arange(deg + 1)
    if w is not None:
        v, y = v * w[:, None], y * w
    scale = np.sqrt(np.sum(v * v, axis=0))  # NumPy scales the columns the same way
    scale = np.where(scale == 0, 1.0, scale)
    coef = np.linalg.lstsq(v / scale, y, rcond=rcond)[0]
    return (coef / scale).astype(dtype)


def install() -> None:
    _adapter.install("numpy.polynomial.polynomial")
