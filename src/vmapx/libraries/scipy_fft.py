"""Adapters for `scipy.fft`: one transform of the whole batch along the example's
axis (`axis=`, `axes=`), the batch a leading axis the transform leaves alone."""

from __future__ import annotations

from typing import Any

from . import _adapter
from ._by_axes import adapt_by_axes, shifted

_ONE_AXIS = ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "dct", "idct", "dst", "idst")


def _along_axis(fun: Any, x: Any, options: dict[str, Any]) -> Any:
    axis, nd = options.get("axis", -1), x.ndim - 1
    if type(axis) is not int or not -nd <= axis < nd:
        raise _adapter.Unsupported  # (out of range per example: the library says so)
    return fun(x, **{**options, "axis": shifted(axis)})


for _name in _ONE_AXIS:
    adapt_by_axes("scipy.fft", _name, _along_axis)


def install() -> None:
    _adapter.install("scipy.fft")
