"""Which traced 0-d values are NumPy scalars for the example, not 0-d arrays.

NumPy returns a scalar (`np.float64`, ...) where a ufunc or a reduction has a 0-d
result, and where an integer index picks one element. A scalar is immutable: `s += y`
rebinds `s` to `s + y` (which may promote the dtype or broadcast to a larger shape),
while a 0-d array (`np.array(1.0)`, `x[...]`, `np.where(...)`) is written in place.
Tracers made by these operations are marked (`_scalar`), so that an in-place operator
on one of them rebinds like NumPy's scalar instead of writing into the traced value.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._core import Tracer

# NumPy functions that return a scalar where their result is 0-d (the ufunc-based and
# reducing ones); every other function gives a 0-d array (the default: written in place)
SCALAR_FUNCTIONS = frozenset(
    f
    for f in (
        np.sum, np.prod, np.mean, np.std, np.var, np.max, np.min, np.ptp, np.any, np.all,
        np.argmax, np.argmin, np.median, np.average, np.quantile, np.percentile,
        np.nansum, np.nanprod, np.nanmean, np.nanstd, np.nanvar, np.nanmax, np.nanmin,
        np.nanargmax, np.nanargmin, np.nanmedian, np.nanquantile, np.nanpercentile,
        np.count_nonzero, np.dot, np.vdot, np.inner, np.einsum, np.trace, np.clip,
        np.round, np.around, np.interp, getattr(np, "amax", None), getattr(np, "amin", None),
        getattr(np, "trapezoid", None), getattr(np, "trapz", None),
        np.nan_to_num, np.angle, np.sinc, np.fix, np.isreal, np.iscomplex, np.isneginf,
        np.isposinf, np.polyval, np.corrcoef, np.searchsorted, np.linalg.cond,
        np.linalg.matrix_rank, np.linalg.slogdet, getattr(np.linalg, "trace", None),
        np.linalg.det, np.linalg.norm, getattr(np.linalg, "vector_norm", None),
        getattr(np.linalg, "matrix_norm", None), getattr(np.linalg, "vecdot", None),
        np.take, np.digitize, np.linalg.multi_dot, np.isclose, np.kron, np.choose,
        np.emath.sqrt, np.emath.log, np.emath.log2, np.emath.log10, np.emath.logn,
        np.emath.power, np.emath.arccos, np.emath.arcsin, np.emath.arctanh,
    )
    if f is not None
)  # fmt: skip


# NumPy functions that give a scalar for a scalar (they call its methods: `x.real`) and a
# 0-d array for a 0-d array
SCALAR_PRESERVING = frozenset(
    (np.real, np.imag, np.squeeze, np.transpose, np.flip, np.reshape, np.moveaxis)
)  # (`np.astype` is the method, which keeps the mark: `_tracer_api._np_astype`)


def mark(out: Any) -> Any:
    """Mark the tracers in `out` (one result or a tuple of them) as NumPy scalars where
    they are 0-d; return `out`."""
    if isinstance(out, Tracer):
        out._scalar = True
    elif isinstance(out, tuple):  # (also NumPy's named results: slogdet's)
        for o in out:
            if isinstance(o, Tracer):
                o._scalar = True
    return out


def is_scalar(x: Tracer) -> bool:
    """Whether the example's value of `x` is a NumPy scalar (immutable)."""
    return x.ndim == 0 and getattr(x, "_scalar", False)


def is_float64_scalar(x: Tracer) -> bool:
    """Whether the example's value of `x` is an `np.float64` (a subclass of Python's
    float: `1j * x` is Python's complex arithmetic, a Python complex)."""
    return getattr(x, "_scalar", False) is True and x.ndim == 0 and x.dtype == np.float64


def picks_element(idx: Any) -> bool:
    """Whether `x[idx]` with a 0-d result is a scalar: no Ellipsis (`x[...]` is a 0-d
    array), and no boolean index."""
    items = idx if type(idx) is tuple else (idx,)
    return not any(i is Ellipsis or i is None or isinstance(i, bool) for i in items)


# -- Python numbers per example (weakly typed) --------------------------------------
# A random draw of one number gives the loop a Python `float`/`int`, which NumPy
# promotes weakly (`float32_array * 1.5` is float32). Such tracers carry the Python
# type in `_scalar`; before a ufunc meets stronger operands they are cast to the dtype
# NumPy gives that Python type among them. Python arithmetic keeps a Python number.

_PYTHON = {"b": bool, "i": int, "u": int, "f": float, "c": complex}
_PY_TYPES = (bool, int, float, complex)


class _Seen:
    weak = False  # whether a weak tracer was ever made (keeps the common path fast)


SEEN = _Seen()


def mark_weak(out: Any) -> Any:
    """Mark a 0-d tracer whose example value is a Python number; return it."""
    if isinstance(out, Tracer) and out.ndim == 0:
        out._scalar = _PYTHON[out.dtype.kind]
        SEEN.weak = True
    return out


def weak_type(x: Any) -> type | None:
    if type(x) in _PY_TYPES:
        return type(x)
    if isinstance(x, Tracer):
        t = getattr(x, "_scalar", None)
        if t.__class__ is type:
            return t
    return None


def any_weak(operands: tuple[Any, ...]) -> bool:
    """Whether a weakly typed tracer is among `operands`."""
    return any(isinstance(x, Tracer) and weak_type(x) is not None for x in operands)


def bools_as_ints(operands: tuple[Any, ...]) -> tuple[Any, ...]:
    """Where every operand is a Python bool (one traced at least), the traced ones as
    Python ints: Python's arithmetic on bools is on ints (`~True` is -2, `True + True`
    is 2, where NumPy's bools give False and True)."""
    weak = [weak_type(x) for x in operands]
    if not all(w is bool for w in weak):
        return operands
    return tuple(
        mark_weak(x.astype(np.result_type(0))) if isinstance(x, Tracer) else int(x)
        for x in operands
    )


def strengthen(operands: tuple[Any, ...]) -> tuple[tuple[Any, ...], bool]:
    """`operands` with weak tracers cast to the dtype NumPy gives their Python type among
    the other operands, and whether all are Python numbers (then the result is one)."""
    weak = [weak_type(x) for x in operands]
    strong = [np.result_type(x) for x, w in zip(operands, weak, strict=True) if w is None]
    if not strong:
        return operands, True
    cast = tuple(
        x if w is None or not isinstance(x, Tracer) else x.astype(np.result_type(*strong, w(0)))
        for x, w in zip(operands, weak, strict=True)
    )
    return cast, False


def stacked_dtype(x: Any) -> np.dtype | None:
    """The dtype `np.stack` gives the examples' values of `x` where they are Python
    numbers (float64 for floats: a float32 draw's `float`), else None."""
    if not SEEN.weak:
        return None
    w = weak_type(x)
    return None if w is None else np.result_type(w(0))
