"""Adapters for `scipy.stats`' location-scale distributions on the whole real line
(`norm`, `logistic`, `laplace`, `cauchy`, `gumbel_r`, `gumbel_l`): their density and
distribution methods with per-example `x`, `loc` and `scale`; and for `variation`.

SciPy's generic methods validate and place values into plain arrays; the distribution's
own formulas (`_logpdf`, `_cdf`, ...) are NumPy and `scipy.special` code, which vmapx
batches and differentiates. The lowering is SciPy's generic method without the plain
arrays: `f((x - loc) / scale)`, rescaled, NaN where `scale <= 0`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.stats

from .._core import Tracer
from . import _adapter
from ._adapter import Unsupported, adapts

DISTRIBUTIONS = ("norm", "logistic", "laplace", "cauchy", "gumbel_r", "gumbel_l")

# method -> (the distribution's private formula, how the scale enters the result)
METHODS = {
    "logpdf": ("_logpdf", lambda v, scale: v - np.log(scale)),
    "pdf": ("_pdf", lambda v, scale: v / scale),
    "cdf": ("_cdf", lambda v, scale: v),
    "logcdf": ("_logcdf", lambda v, scale: v),
    "sf": ("_sf", lambda v, scale: v),
    "logsf": ("_logsf", lambda v, scale: v),
}


def _split(cond: Any, z: Any, fill: float, then: Any, otherwise: Any) -> Any:
    """`then(z)` where `cond`, else `otherwise(z)`; each sees `fill` in the other's places
    (SciPy's `apply_where`, which writes into a plain array, in NumPy calls)."""
    return np.where(cond, then(np.where(cond, z, fill)), otherwise(np.where(cond, fill, z)))


def _cauchy_logpdf(z: Any) -> Any:
    """SciPy's `cauchy._logpdf`: two formulas, for |z| < 1 and beyond."""
    absz = np.abs(z)
    return _split(absz < 1, absz, 1.0, lambda a: -np.log(np.pi) - np.log1p(a**2),
                  lambda a: -np.log(np.pi) - (2 * np.log(a) + np.log1p((1 / a) ** 2)))  # fmt: skip


def _log_tail(dist: Any, formula: str) -> Any:
    """SciPy's generic `_logcdf`/`_logsf` (log of the tail below the median, log1p of
    minus the other tail above), in NumPy calls."""
    median = float(dist._ppf(0.5))
    near, far = (dist._cdf, dist._sf) if formula == "_logcdf" else (dist._sf, dist._cdf)
    below: Callable[[Any], Any] = (
        (lambda z: z < median) if formula == "_logcdf" else (lambda z: z > median)
    )
    return lambda z: _split(below(z), z, median, lambda u: np.log(near(u)),
                            lambda u: np.log1p(-far(u)))  # fmt: skip


def _standard_formula(dist: Any, formula: str) -> Any:
    """The distribution's formula for standardized values, in calls vmapx batches."""
    if getattr(type(dist), formula) is getattr(scipy.stats.rv_continuous, formula, None):
        if formula in ("_logcdf", "_logsf"):
            return _log_tail(dist, formula)
    if dist.name == "cauchy" and formula == "_logpdf":
        return _cauchy_logpdf
    return getattr(dist, formula)


def _as_dtype(v: Any, dtype: Any) -> Any:
    return v if v.dtype == dtype else v.astype(dtype)


def _method(dist: Any, formula: str, rescale: Any) -> Any:
    standard = _standard_formula(dist, formula)

    def lowering(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
        # SciPy's `asarray` of each: a Python number is as strong as an array's dtype
        x, loc, scale = (v if isinstance(v, Tracer) else np.asarray(v) for v in (x, loc, scale))
        dtype = np.promote_types(np.result_type(x), np.float64)  # SciPy's: `x`'s alone
        if dtype.kind != "f" or not all(np.can_cast(v, dtype) for v in (loc, scale)):
            raise Unsupported  # (complex values, a longer float: the library's own ways)
        safe_scale = np.where(scale > 0, scale, 1)  # (an integer scale's log: as SciPy's)
        z = _as_dtype((x - loc) / safe_scale, dtype)
        value = rescale(standard(z), safe_scale)
        return _as_dtype(np.where(scale > 0, value, np.nan), dtype)

    return lowering


for _dist_name in DISTRIBUTIONS:
    _dist = getattr(scipy.stats, _dist_name)
    for _method_name, (_formula, _rescale) in METHODS.items():
        adapts("scipy.stats", f"{_dist_name}.{_method_name}", ("x", "loc", "scale"))(
            _method(_dist, _formula, _rescale)
        )


@adapts("scipy.stats", "variation", ("a",))
def _variation(
    a: Any, axis: Any = 0, nan_policy: str = "propagate", ddof: Any = 0, *, keepdims: bool = False
) -> Any:
    """SciPy's `variation` (`std * sqrt(n / (n - ddof)) / mean`; where `ddof == n`, an
    infinity of the mean's sign, or NaN where the deviation is 0), in NumPy calls. SciPy's
    `apply_where` would write a traced fill value into a plain array."""
    if not isinstance(a, Tracer) or a.dtype not in (np.float32, np.float64):
        raise Unsupported  # (integers, complex values, lists: the library's own ways)
    if nan_policy != "propagate" or type(keepdims) is not bool or type(ddof) is not int:
        raise Unsupported
    kept = a.ndim * (1,)  # (`keepdims` of `axis=None`: every axis kept, of length 1)
    if axis is None:
        a, axis = np.reshape(a, (-1,)), 0
    if type(axis) is not int or not -a.ndim <= axis < a.ndim or a.shape[axis] == 0:
        raise Unsupported  # (SciPy's errors and its warning for an empty sample)
    n = np.asarray(a.shape[axis], dtype=a.dtype)  # (SciPy's: in the sample's dtype)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean, std = np.mean(a, axis=axis), np.std(a, axis=axis)
        result = std * (n / (n - ddof)) ** 0.5 / mean
    if ddof == a.shape[axis]:
        result = np.where(std > 0, np.copysign(np.asarray(np.inf, a.dtype), mean), np.nan)
    result = result.astype(a.dtype, copy=False)  # (NumPy 1's promotion of 0-d values)
    if keepdims:
        return np.reshape(result, kept) if a.ndim == 1 else np.expand_dims(result, axis)
    return result


def install() -> None:
    _adapter.install("scipy.stats")
