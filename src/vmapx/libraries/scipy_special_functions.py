"""Adapters for `scipy.special`'s Python functions (`logsumexp`, `softmax`,
`log_softmax`, `polygamma`): NumPy formulations that batch and differentiate."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import scipy.special as sc

from . import _adapter
from ._adapter import Unsupported, adapts, batch_by_axis


def _max_for_shift(a: Any, axis: Any) -> Any:
    """The maximum used to shift exponents (not differentiated: it cancels)."""
    from .. import stop_gradient

    m = np.max(a, axis=axis, keepdims=True)
    return stop_gradient(np.where(np.isfinite(m), m, 0.0))


# the library's own function, taken before `install` puts the adapter in its place
_LIBRARY_LOGSUMEXP = sc.logsumexp


def _dtype_key(b: Any) -> Any:
    """What SciPy's promotion reads of `b`: a Python scalar's type (weak), else a dtype."""
    if b is None or type(b) in (bool, int, float, complex):
        return None if b is None else type(b)
    return b.dtype if hasattr(b, "dtype") else np.asarray(b).dtype


@functools.lru_cache(maxsize=64)
def _logsumexp_dtype(a_dtype: Any, b_key: Any) -> Any:
    """SciPy's result dtype: `a` promoted with `b`, to a floating dtype (asked of SciPy)."""
    b = None if b_key is None else b_key(1) if type(b_key) is type else np.ones(1, b_key)
    return np.result_type(_LIBRARY_LOGSUMEXP(np.zeros(1, a_dtype), b=b))


def _as_dtype(x: Any, dtype: Any) -> Any:
    if getattr(x, "dtype", None) == dtype:
        return x
    return x.astype(dtype) if hasattr(x, "astype") else np.asarray(x, dtype=dtype)


@adapts("scipy.special", "logsumexp", ("a", "b"))
def logsumexp(
    a: Any, axis: Any = None, b: Any = None, keepdims: Any = False, return_sign: Any = False
) -> Any:
    from .. import stop_gradient

    dtype = _logsumexp_dtype(np.result_type(a), _dtype_key(b))
    if return_sign or dtype.kind != "f":
        raise Unsupported  # (SciPy's signs and complex phases: the library)
    a = _as_dtype(a, dtype)
    if b is not None:
        a, b = np.broadcast_arrays(a, _as_dtype(b, dtype))
    if np.ndim(a) == 0:  # (SciPy's: one dimension at least, for `axis` and `keepdims`)
        a, b = np.reshape(a, (1,)), None if b is None else np.reshape(b, (1,))
    if np.size(a) == 0:
        raise Unsupported  # (SciPy's -inf of the reduced shape: the library)
    with np.errstate(all="ignore"):  # (SciPy's: the log of zero or of a negative sum)
        if b is None:  # (a finite maximum: a finite sum; else no shift, SciPy's sum too)
            m = _max_for_shift(a, axis)
            out = np.log(np.sum(np.exp(a - m), axis=axis, keepdims=True)) + m
        else:  # a zero weight drops its term (and from the shift), whatever `a` holds there
            kept = b != 0
            m = _max_for_shift(np.where(kept, a, -np.inf), axis)
            e = np.where(kept, b * np.exp(np.where(kept, a, m) - m), 0)
            out = np.log(np.sum(e, axis=axis, keepdims=True)) + m
            # where that is not finite, SciPy's answer is the unshifted sum's, every term
            # kept (a zero weight times an infinity: NaN)
            direct = np.log(np.sum(b * np.exp(a), axis=axis, keepdims=True))
            out = np.where(np.isfinite(out), out, stop_gradient(direct))
    return out if keepdims else np.squeeze(out, axis=axis)


def _example_axes(x: Any, axis: Any) -> Any:
    """The axes of a batch `x` (the batch on axis 0) that are `axis` of each example."""
    ndim = np.ndim(x) - 1
    if axis is None:
        return tuple(range(1, ndim + 1))
    axes = axis if type(axis) is tuple else (axis,)
    if not all(type(a) is int and -ndim <= a < ndim for a in axes):
        raise Unsupported  # (the library: the loop's error)
    moved = tuple(a + 1 if a >= 0 else a for a in axes)
    return moved if type(axis) is tuple else moved[0]


def _softmax_batched(in_batched: list[Any], x: Any, axis: Any = None) -> Any:
    """SciPy's `softmax`, its very NumPy calls, on the whole batch at once."""
    axes = _example_axes(x, axis)
    exp_x_shifted = np.exp(x - np.max(x, axis=axes, keepdims=True))
    return exp_x_shifted / np.sum(exp_x_shifted, axis=axes, keepdims=True)


def _log_softmax_batched(in_batched: list[Any], x: Any, axis: Any = None) -> Any:
    """SciPy's `log_softmax`, its very NumPy calls, on the whole batch at once (a maximum
    that is not finite shifts by 0, in the maximum's dtype)."""
    axes = _example_axes(x, axis)
    x_max = np.max(x, axis=axes, keepdims=True)
    x_max[~np.isfinite(x_max)] = 0
    tmp = x - x_max
    with np.errstate(divide="ignore"):  # (SciPy's: the log of zero)
        out = np.log(np.sum(np.exp(tmp), axis=axes, keepdims=True))
    return tmp - out


@adapts("scipy.special", "softmax", ("x",),
        batch=batch_by_axis(_softmax_batched, lambda x, **kw: softmax(x, **kw)))  # fmt: skip
def softmax(x: Any, axis: Any = None) -> Any:
    from .. import stop_gradient

    e = np.exp(x - stop_gradient(np.max(x, axis=axis, keepdims=True)))  # SciPy's shift
    return e / np.sum(e, axis=axis, keepdims=True)


@adapts("scipy.special", "log_softmax", ("x",),
        batch=batch_by_axis(_log_softmax_batched, lambda x, **kw: log_softmax(x, **kw)),
)  # fmt: skip
def log_softmax(x: Any, axis: Any = None) -> Any:
    shift = _max_for_shift(x, axis)
    if np.result_type(x).kind in "iu":  # SciPy shifts integers as integers (int8 then
        shift = shift.astype(np.result_type(x))  # gives float16, as NumPy's exp does)
    shifted = x - shift
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


@adapts("scipy.special", "polygamma", ("n", "x"))
def polygamma(n: Any, x: Any) -> Any:
    fac2 = (-1.0) ** (n + 1) * sc.gamma(n + 1.0) * sc.zeta(n + 1, x)
    return np.where(n == 0, sc.psi(x), fac2)


def install() -> None:
    _adapter.install("scipy.special")
