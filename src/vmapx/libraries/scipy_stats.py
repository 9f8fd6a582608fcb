"""Adapters for `scipy.stats`' location-scale distributions on the whole real line
(`norm`, `logistic`, `laplace`, `cauchy`, `gumbel_r`, `gumbel_l`): their density and
distribution methods with per-example `x`, `loc` and `scale`.

SciPy's generic methods validate and place values into plain arrays; the distribution's
own formulas (`_logpdf`, `_cdf`, ...) are NumPy and `scipy.special` code, which vmapx
batches and differentiates. The lowering is SciPy's generic method without the plain
arrays: `f((x - loc) / scale)`, rescaled, NaN where `scale <= 0`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.stats

from . import _adapter
from ._adapter import adapts

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


def _method(dist: Any, formula: str, rescale: Any) -> Any:
    def lowering(x, loc=0, scale=1):
        safe_scale = np.where(scale > 0, scale, 1.0)
        value = rescale(getattr(dist, formula)((x - loc) / safe_scale), safe_scale)
        return np.where(scale > 0, value, np.nan) * 1.0

    return lowering


for _dist_name in DISTRIBUTIONS:
    _dist = getattr(scipy.stats, _dist_name)
    for _method_name, (_formula, _rescale) in METHODS.items():
        adapts("scipy.stats", f"{_dist_name}.{_method_name}", ("x", "loc", "scale"))(
            _method(_dist, _formula, _rescale)
        )


def install() -> None:
    _adapter.install("scipy.stats")
