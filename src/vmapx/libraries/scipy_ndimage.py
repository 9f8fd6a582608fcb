"""Adapters for `scipy.ndimage`: one filter of the whole batch over the example's axes
(`axes=`), the batch a leading axis the filter leaves alone. Filters without `axes=`
(`sobel`, which smooths along every other axis) stay per example."""

from __future__ import annotations

import inspect
from typing import Any

import scipy.ndimage as nd

from . import _adapter
from ._by_axes import adapt_by_axes, shifted

_FILTERS = ("gaussian_filter", "uniform_filter", "median_filter", "maximum_filter",
            "minimum_filter", "laplace", "gaussian_laplace",
            "gaussian_gradient_magnitude")  # fmt: skip


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


for _name in _FILTERS:
    if "axes" in inspect.signature(getattr(nd, _name)).parameters:  # (SciPy >= 1.11)
        adapt_by_axes("scipy.ndimage", _name, _over_axes)


def install() -> None:
    _adapter.install("scipy.ndimage")
