"""What differs between NumPy 1.26 and NumPy 2, in one place.

vmapx is written for NumPy 2 and runs on NumPy 1.26 too. Two kinds of difference:

- functions NumPy 2 added (`np.vecdot`, `np.unstack`, `np.linalg.matrix_norm`,
  `np.strings`, ...) cannot be called on 1.26, so their rules are registered only where
  they exist: registration lists go through `present`;
- rules that call such a function internally call the stand-in here instead, which is
  NumPy's own function on NumPy 2 and the same computation from older functions on 1.26.
  Stand-ins use only dispatching NumPy calls, so they work on tracers of an outer
  transform as NumPy's functions do.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np

NUMPY2: bool = np.lib.NumpyVersion(np.__version__) >= "2.0.0"


def present(module: ModuleType | None, *names: str) -> list[Callable[..., Any]]:
    """The functions `module.<name>` that the installed NumPy has, for registration lists.

    Names that only NumPy 2 has are left out on NumPy 1.26, and names NumPy 2 removed
    (`np.trapz`, `np.in1d`) are left out there.

    >>> present(np, "sum", "no_such_function") == [np.sum]
    True
    """
    if module is None:  # a module NumPy 1.26 lacks (`np.strings`)
        return []
    return [f for f in (getattr(module, n, None) for n in names) if f is not None]


def umath_ufuncs() -> dict[str, np.ufunc]:
    """Every ufunc of NumPy's `umath` module by name, the private ones too (`_ones_like`):
    what `numpy.testing.overrides.get_overridable_numpy_ufuncs()` lists, without importing
    `numpy.testing` (a third of NumPy's own import time)."""
    umath = np._core.umath if NUMPY2 else np.core.umath  # type: ignore[attr-defined]  # (NumPy 1)
    return {u.__name__: u for u in vars(umath).values() if isinstance(u, np.ufunc)}


def signature(func: Callable[..., Any]) -> inspect.Signature:
    """`inspect.signature(func)`, also for NumPy 1.26's Cython methods (`Generator.normal`),
    which state their signature only in their docstring's first line(s).

    >>> list(signature(np.random.Generator.normal).parameters)
    ['self', 'loc', 'scale', 'size']
    """
    try:
        return inspect.signature(func)
    except ValueError:
        doc = inspect.cleandoc(func.__doc__ or "")  # "normal(loc=0.0, scale=1.0, size=None)"
        params = doc[doc.index("(") + 1 : doc.index(")")]
        # NumPy's own text, e.g. `dtype=np.float64`: defaults are evaluated with `np` in scope
        return inspect.signature(eval(f"(lambda self, {params}: None)", {"np": np}))


def put(a: Any, ind: Any, v: Any, mode: str = "raise") -> None:
    """`np.put`, with NumPy 2's error for indices into an empty `a` (NumPy 1.26 loops
    forever there with `mode="wrap"` and writes out of bounds with `mode="clip"`)."""
    if not NUMPY2 and np.size(a) == 0 and np.size(ind) != 0:
        raise IndexError("cannot replace elements of an empty array")
    np.put(a, ind, v, mode=mode)  # type: ignore[arg-type]  # (NumPy checks the mode)


if NUMPY2:
    from numpy.exceptions import RankWarning
    from numpy.lib.array_utils import normalize_axis_index, normalize_axis_tuple

    astype = np.astype
    numpy_core: ModuleType = np._core
    trapezoid = np.trapezoid
    vecdot = np.vecdot
else:
    from numpy import RankWarning  # type: ignore[attr-defined, no-redef]
    from numpy.core.multiarray import normalize_axis_index  # type: ignore[no-redef]
    from numpy.core.numeric import normalize_axis_tuple  # type: ignore[no-redef]

    numpy_core = np.core  # renamed `np._core` in NumPy 2
    trapezoid = np.trapz  # type: ignore[attr-defined]  # the same function under its NumPy 1 name

    def astype(x: Any, dtype: Any, /, *, copy: bool = True, device: Any = None) -> Any:
        """`np.astype` of NumPy 2: `x.astype(dtype, copy=copy)` (tracers have it too)."""
        return x.astype(dtype, copy=copy)

    def vecdot(x1: Any, x2: Any, /, *, axis: int = -1) -> Any:  # type: ignore[misc]
        """`np.vecdot` of NumPy 2: `sum(conj(x1) * x2)` along `axis`, as stacked
        vector products (one matmul over the broadcast leading axes)."""
        if np.iscomplexobj(x1):
            x1 = np.conjugate(x1)
        a, b = np.moveaxis(x1, axis, -1), np.moveaxis(x2, axis, -1)
        return np.matmul(a[..., None, :], b[..., :, None])[..., 0, 0]


__all__ = [
    "NUMPY2",
    "RankWarning",
    "astype",
    "normalize_axis_index",
    "normalize_axis_tuple",
    "numpy_core",
    "present",
    "put",
    "signature",
    "trapezoid",
    "vecdot",
]
