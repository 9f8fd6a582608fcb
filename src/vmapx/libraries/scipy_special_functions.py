"""Adapters for `scipy.special`'s Python functions (`logsumexp`, `softmax`,
`log_softmax`, `polygamma`): NumPy formulations that batch and differentiate."""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.special as sc

from . import _adapter
from ._adapter import Unsupported, adapts


def _max_for_shift(a: Any, axis: Any) -> Any:
    """The maximum used to shift exponents (not differentiated: it cancels)."""
    from .. import stop_gradient

    m = np.max(a, axis=axis, keepdims=True)
    return stop_gradient(np.where(np.isfinite(m), m, 0.0))


@adapts("scipy.special", "logsumexp", ("a", "b"))
def logsumexp(
    a: Any, axis: Any = None, b: Any = None, keepdims: Any = False, return_sign: Any = False
) -> Any:
    if return_sign or np.iscomplexobj(a):
        raise Unsupported
    m = _max_for_shift(a, axis)
    e = np.exp(a - m) if b is None else b * np.exp(a - m)
    out = np.log(np.sum(e, axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axis)


@adapts("scipy.special", "softmax", ("x",))
def softmax(x: Any, axis: Any = None) -> Any:
    from .. import stop_gradient

    e = np.exp(x - stop_gradient(np.max(x, axis=axis, keepdims=True)))  # SciPy's shift
    return e / np.sum(e, axis=axis, keepdims=True)


@adapts("scipy.special", "log_softmax", ("x",))
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
