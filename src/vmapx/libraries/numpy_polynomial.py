"""Adapters for `numpy.polynomial`'s power-series functions, written with NumPy
functions vmapx batches (`as_series` on entry leaves NumPy's dispatch)."""

from __future__ import annotations

import operator
import warnings
from typing import Any

import numpy as np

from .._batching import user_stacklevel
from .._compat import RankWarning
from .._core import Tracer
from . import _adapter
from ._adapter import Unsupported, adapts


def _numeric(*arrays: Any) -> bool:
    """Whether every array (or nested list of them) holds numbers, not objects."""
    return all(
        _numeric(*x) if type(x) in (list, tuple) else np.result_type(x).kind in "biufc"
        for x in arrays
    )


def _per_example(*arrays: Any) -> None:
    """Have `vmap` run the call one example at a time: NumPy gives an object array's
    own scalars per example (a Python float: a float64 result), which neither a lowering
    nor the library on the whole batch (an object array of them) gives."""
    for x in arrays:
        np.asarray(x)  # (a batched value: the signal for the per-example loop)
    raise Unsupported


@adapts("numpy.polynomial.polynomial", "polyval", ("x", "c"))
def polyval(x: Any, c: Any, tensor: Any = True) -> Any:
    if not _numeric(x, c):
        _per_example(x, c)
    if np.ndim(c) != 1:
        raise Unsupported
    c = c * 1.0  # NumPy's coefficients are floats (or complex)
    out = np.zeros_like(x * c[-1]) + c[-1]
    for k in range(len(c) - 2, -1, -1):
        out = out * x + c[k]
    return out


def _integral(n: Any) -> bool:
    """Whether NumPy takes `n` as an integer (`operator.index`: not a float)."""
    try:
        operator.index(n)
    except TypeError:
        return False
    return True


def _scales_in_place(dtype: Any, scl: Any) -> None:
    """NumPy's `c *= scl` on coefficients of `dtype`: where it cannot cast the product back
    (a complex `scl`, real coefficients) it raises, and so does the library, per example."""
    if np.ndim(scl) != 0:
        raise Unsupported
    try:
        probe = np.ones(1, dtype=dtype)
        probe *= scl
    except Exception as error:
        raise Unsupported from error


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
    if not _integral(m) or not _integral(axis) or np.ndim(c) != 1 or axis != 0 or m < 0:
        raise Unsupported  # (and NumPy's errors: the library's, per example)
    if not _numeric(c):
        raise Unsupported
    if np.result_type(c).kind in "biu":  # NumPy's: floats first (no integer overflow)
        c = c + 0.0
    dtype = np.result_type(c)
    if m >= len(c):  # (NumPy's zero, unscaled: a NaN stays NaN)
        return c[:1] * 0
    if m > 0:
        _scales_in_place(dtype, scl)
    for _ in range(m):
        c = c[1:] * np.arange(1, len(c)) * scl
    return c.astype(dtype)


def _fits(x: Any, y: Any, deg: Any, w: Any) -> bool:
    """Whether `polyfit` takes these arguments as NumPy's `polyutils._fit` checks them (a
    degree of at least 0, nonempty 1-D `x`, `y` and `w` of its length) and the lowering
    covers them (one degree, one column, numbers); the library raises its own errors."""
    if isinstance(deg, Tracer) or not isinstance(deg, int | np.integer) or isinstance(deg, bool):
        return False
    if deg < 0:
        return False
    arrays = (x, y) if w is None else (x, y, w)
    if not _numeric(*arrays) or any(np.ndim(a) != 1 for a in arrays):
        return False
    if any(np.result_type(a).char in "egG" for a in arrays):  # (NumPy's lstsq refuses them)
        return False
    # (as many coefficients as points at most: NumPy warns of a rank-deficient fit)
    return int(deg) < len(x) and all(len(a) == len(x) for a in arrays)


@adapts("numpy.polynomial.polynomial", "polyfit", ("x", "y", "w"))
def polyfit(x: Any, y: Any, deg: Any, rcond: Any = None, full: Any = False, w: Any = None) -> Any:
    if full or not _fits(x, y, deg, w):
        raise Unsupported
    dtype = np.result_type(x * 1.0, y * 1.0, *([] if w is None else [w * 1.0]))  # NumPy's
    if rcond is None:  # NumPy's default: the points' precision, not lstsq's
        rcond = len(x) * np.finfo(np.result_type(np.result_type(x), 0.0)).eps
    v = x[:, None] ** np.arange(int(deg) + 1)
    if w is not None:
        v, y = v * w[:, None], y * w
    # NumPy scales the columns the same way (by their norms)
    squares = np.real(v) ** 2 + np.imag(v) ** 2 if np.iscomplexobj(v) else v * v
    scale = np.sqrt(np.sum(squares, axis=0))
    scale = np.where(scale == 0, 1.0, scale)
    coef, _, rank, _ = np.linalg.lstsq(v / scale, y, rcond=rcond)
    if bool(np.any(rank != deg + 1)):  # (examples that differ here: the loop, which warns)
        # (the class `polyutils` warns with: its own on NumPy 1.26, NumPy's on NumPy 2)
        category = getattr(np.polynomial.polyutils, "RankWarning", RankWarning)
        warnings.warn("The fit may be poorly conditioned", category,
                      stacklevel=user_stacklevel())  # fmt: skip
    return (coef / scale).astype(dtype)


def install() -> None:
    _adapter.install("numpy.polynomial.polynomial")
