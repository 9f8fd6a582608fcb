"""Adapters for `scipy.ndimage`: one filter of the whole batch over the example's axes
(`axes=`), the batch a leading axis the filter leaves alone. Filters without `axes=`
(`sobel`, which smooths along every other axis) stay per example. So would
`gaussian_gradient_magnitude`, which smooths along every axis whatever its `axes=`:
it is given a `sigma` of 0 for the batch (see `_gradient_magnitude`)."""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np
import scipy.ndimage as nd

from .._core import Tracer
from . import _adapter
from ._by_axes import adapt_by_axes, shifted

_FILTERS = ("gaussian_filter", "uniform_filter", "median_filter", "maximum_filter",
            "minimum_filter", "laplace", "gaussian_laplace")  # fmt: skip


def _over_axes(fun: Any, x: Any, options: dict[str, Any]) -> Any:
    axes = options.get("axes")
    nd = x.ndim - 1
    if axes is None:
        axes = tuple(range(1, nd + 1))
    else:
        axes = (axes,) if type(axes) is int else tuple(axes)
        if not all(type(a) is int and -nd <= a < nd for a in axes):
            raise _adapter.Unsupported  # (the library's own message, per example)
        axes = tuple(shifted(a) for a in axes)
    return fun(x, **{**options, "axes": axes})


def _gradient_magnitude(fun: Any, x: Any, options: dict[str, Any]) -> Any:
    """`gaussian_gradient_magnitude` of the batch: its derivatives smooth along every
    axis of the input (not only `axes`), so the batch's axis gets a `sigma` of 0 (no
    smoothing across examples); a `radius=` (per axis of the input) stays per example."""
    sigma, nd = options.get("sigma"), x.ndim - 1
    if options.get("radius") is not None:
        raise _adapter.Unsupported
    if not isinstance(sigma, Tracer) and (
        isinstance(sigma, int | float | np.integer | np.floating) and not isinstance(sigma, bool)
    ):
        sigma = [sigma] * nd
    elif not isinstance(sigma, list | tuple) or len(sigma) != nd:
        raise _adapter.Unsupported  # (an array, a wrong length: the library's own call)
    return _over_axes(fun, x, {**options, "sigma": [0, *sigma]})


for _name in _FILTERS:
    if "axes" in inspect.signature(getattr(nd, _name)).parameters:  # (SciPy >= 1.11)
        adapt_by_axes("scipy.ndimage", _name, _over_axes)


if "axes" in inspect.signature(nd.gaussian_gradient_magnitude).parameters:
    adapt_by_axes("scipy.ndimage", "gaussian_gradient_magnitude", _gradient_magnitude)


def install() -> None:
    _adapter.install("scipy.ndimage")
