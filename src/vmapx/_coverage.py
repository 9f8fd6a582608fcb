"""`vmapx.coverage()`: which NumPy functions and ufuncs batch natively."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import numpy as np
from numpy.testing.overrides import (
    get_overridable_numpy_array_functions,
    get_overridable_numpy_ufuncs,
)

from ._registry import FUNCTIONS


def coverage() -> dict[Callable, str]:
    """How `vmap` handles every overridable NumPy function and ufunc.

    **Returns:** a dict mapping each callable to `"native"` (a batching rule),
    `"fallback"` (runs once per example, with a `PerformanceWarning`) or `"refused"`
    (raises a clear error: the operation cannot work on traced values).

    **Example:**

    ```python
    >>> import numpy as np, vmapx
    >>> vmapx.coverage()[np.sum]
    'native'

    ```
    """
    report: dict[Callable, str] = {}
    for ufunc in sorted(get_overridable_numpy_ufuncs(), key=lambda u: u.__name__):
        report[ufunc] = "refused" if ufunc.__name__ in UFUNCS_NEEDING_OUT else "native"
    for func in sorted(get_overridable_numpy_array_functions(), key=_qualname):
        dispatched = dispatched_as(func)
        prim = FUNCTIONS.get(dispatched)
        rules = None if prim is None else prim.rules
        if rules is not None and rules.refused is not None:
            report[func] = "refused"
        else:
            report[func] = "native" if rules is not None and rules.batch else "fallback"
    return report


# string ufuncs whose fixed-width loops write only into preallocated structured `out=`
# buffers (refused in `_numpy/strings.py`; `np.strings.partition` itself batches)
UFUNCS_NEEDING_OUT = {"_partition_index", "_rpartition_index"}


def dispatched_as(func: Callable) -> Callable:
    """The function NumPy hands to `__array_function__` for `func`: NumPy lists some
    `like=` creators twice (the public function and an internal twin whose calls are
    dispatched as the public one)."""
    if func.__name__.startswith("_") or func in FUNCTIONS:
        return func
    public = getattr(np, func.__name__, None)
    return public if public is not None and public is not func else func


def _qualname(func: Callable) -> str:
    return f"{getattr(func, '__module__', '')}.{getattr(func, '__name__', '')}"


def coverage_table() -> str:
    """The coverage report as a text table with totals (`python -m vmapx coverage`)."""
    report = coverage()
    rows = [f"{'function':<45} status"]
    for func, status in report.items():
        name = f"np.{func.__name__}" if isinstance(func, np.ufunc) else _qualname(func)
        rows.append(f"{name:<45} {status}")
    counts = Counter(report.values())
    rows.append("")
    rows.append(
        "totals: "
        + ", ".join(f"{k} {counts.get(k, 0)}" for k in ("native", "fallback", "refused"))
        + f" (of {len(report)})"
    )
    return "\n".join(rows)
