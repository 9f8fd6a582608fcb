"""The Python array API standard for traced values: the namespace and the tracer's part.

A tracer answers `x.__array_namespace__()` with this module, and has `.device`,
`.to_device`, `.mT` (NumPy's), so that libraries written against the standard (SciPy
with `SCIPY_ARRAY_API=1`, scikit-learn with `array_api_dispatch=True`, array-api-extra,
...) call functions that batch and differentiate. Every function here is NumPy's own
(NumPy 2 implements the standard in its main namespace), so it dispatches to vmapx's
rules; `asarray` passes tracers through (as `np.asarray` of an ndarray gives the array
itself), and the few names NumPy 1.26 lacks are spelled with its older functions.

**Example**

>>> import numpy as np
>>> import vmapx
>>> def normalize(x):
...     xp = x.__array_namespace__()
...     return x / xp.linalg.vector_norm(x)
>>> vmapx.vmap(normalize)(np.array([[3.0, 4.0], [0.0, 2.0]]))
array([[0.6, 0.8],
       [0. , 1. ]])
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from .. import _passthrough
from .._core import Tracer

__array_api_version__ = "2024.12"
_VERSIONS = (None, "2021.12", "2022.12", "2023.12", "2024.12")

# the standard's names that NumPy's main namespace holds (NumPy >= 2.0)
_NAMES = """
abs acos acosh add all any argmax argmin asin asinh astype atan atan2 atanh
bitwise_and bitwise_invert bitwise_left_shift bitwise_or bitwise_right_shift bitwise_xor
broadcast_arrays broadcast_to can_cast ceil clip concat conj copysign cos cosh
count_nonzero cumulative_prod cumulative_sum diff divide empty empty_like equal exp
expand_dims expm1 eye finfo flip floor floor_divide from_dlpack full full_like greater
greater_equal hypot iinfo imag isdtype isfinite isinf isnan less less_equal linspace log
log10 log1p log2 logaddexp logical_and logical_not logical_or logical_xor matmul
matrix_transpose max maximum mean meshgrid min minimum moveaxis multiply negative
nextafter nonzero not_equal ones ones_like permute_dims positive pow prod real reciprocal
remainder repeat reshape result_type roll round searchsorted sign signbit sin sinh
sqrt square squeeze stack std subtract sum take take_along_axis tan tanh tensordot tile
tril triu trunc unique_all unique_counts unique_inverse unique_values unstack var vecdot
where zeros zeros_like arange
bool int8 int16 int32 int64 uint8 uint16 uint32 uint64 float32 float64 complex64
complex128 e inf nan pi newaxis linalg fft broadcast_shapes isin
""".split()

# the same functions under the names NumPy 1.26 gives them
_OLD_NAMES = {"acos": "arccos", "acosh": "arccosh", "asin": "arcsin", "asinh": "arcsinh",
              "atan": "arctan", "atan2": "arctan2", "atanh": "arctanh", "bool": "bool_",
              "bitwise_invert": "invert", "bitwise_left_shift": "left_shift",
              "bitwise_right_shift": "right_shift", "concat": "concatenate",
              "permute_dims": "transpose", "pow": "power"}  # fmt: skip


def _names() -> dict[str, Any]:
    numpy2 = int(np.__version__.split(".")[0]) >= 2
    found = {}
    for name in _NAMES:
        numpys = name if numpy2 or name not in _OLD_NAMES else _OLD_NAMES[name]
        if hasattr(np, numpys):  # (NumPy 1.26 lacks some: they are left out)
            found[name] = getattr(np, numpys)
    return found


globals().update(_names())


def asarray(obj: Any, /, *, dtype: Any = None, device: Any = None, copy: bool | None = None) -> Any:
    """The standard's `asarray`: a traced value (or a list holding some) stays traced;
    anything else becomes a NumPy array."""
    _check_device(device)
    if _passthrough.has_tracer(obj):
        return _passthrough.convert("asarray", obj, dtype, copy, 0)
    if copy:
        return np.array(obj, dtype=dtype, copy=True)
    return np.asarray(obj, dtype=dtype) if copy is None else np.asarray(obj, dtype, copy=copy)


def sort(x: Any, /, *, axis: int = -1, descending: bool = False, stable: bool = True) -> Any:
    """The standard's `sort` (NumPy's has no `descending`)."""
    kind = "stable" if stable else None
    if descending:
        return np.flip(np.sort(np.flip(x, axis=axis), axis=axis, kind=kind), axis=axis)  # type: ignore[arg-type]
    return np.sort(x, axis=axis, kind=kind)  # type: ignore[arg-type]  # (NumPy checks the kind)


def argsort(x: Any, /, *, axis: int = -1, descending: bool = False, stable: bool = True) -> Any:
    """The standard's `argsort`: descending keeps equal values in their order."""
    kind = "stable" if stable else None
    if not descending:
        return np.argsort(x, axis=axis, kind=kind)  # type: ignore[arg-type]  # (NumPy checks the kind)
    flipped = np.argsort(np.flip(x, axis=axis), axis=axis, kind=kind)  # type: ignore[arg-type]
    return (x.shape[axis] - 1) - np.flip(flipped, axis=axis)


def __array_namespace_info__() -> Any:  # noqa: N807 (the standard's name)
    return np.__array_namespace_info__()


def _check_device(device: Any) -> None:
    if device not in (None, "cpu"):
        raise ValueError(f"vmapx.array_api: device {device!r} is not available; use 'cpu'")


# -- the tracer's part -------------------------------------------------------------


def _array_namespace(self: Tracer, /, *, api_version: str | None = None) -> Any:
    if api_version not in _VERSIONS:
        raise ValueError(
            f"__array_namespace__: api_version={api_version!r} is not supported; "
            f"vmapx implements {', '.join(v for v in _VERSIONS if v)}"
        )
    _passthrough.note("`__array_namespace__`")  # (library code that then raises: the loop)
    return sys.modules[__name__]


def _device(self: Tracer) -> Any:
    """The payload's device (a batched value's array; NumPy's is "cpu")."""
    return getattr(getattr(self, "val", None), "device", "cpu")


def _to_device(self: Tracer, device: Any, /, *, stream: Any = None) -> Tracer:
    if device != _device(self):
        _check_device(device)
    return self


def install(cls: type) -> None:
    """Give `cls` (the tracer base class) the array API standard's members."""
    cls.__array_namespace__ = _array_namespace  # type: ignore[attr-defined]
    cls.device = property(_device)  # type: ignore[attr-defined]
    cls.to_device = _to_device  # type: ignore[attr-defined]


install(Tracer)
