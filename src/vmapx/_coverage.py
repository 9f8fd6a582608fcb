"""`vmapx.coverage()`: which NumPy functions and ufuncs batch natively."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import numpy as np

from ._numpy._dispatch import FUNCTIONS, REFUSED, has_batch_rule


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
    # (imported here: `numpy.testing` costs more to import than the rest of vmapx)
    from numpy.testing.overrides import (
        get_overridable_numpy_array_functions,
        get_overridable_numpy_ufuncs,
    )

    report: dict[Callable, str] = {}
    for ufunc in sorted(get_overridable_numpy_ufuncs(), key=lambda u: u.__name__):
        report[ufunc] = "refused" if ufunc.__name__ in UFUNCS_NEEDING_OUT else "native"
    for func in sorted(get_overridable_numpy_array_functions(), key=_qualname):
        dispatched = dispatched_as(func)
        if dispatched in REFUSED:
            report[func] = "refused"
        else:
            report[func] = "native" if has_batch_rule(dispatched) else "fallback"
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


def _name(func: Callable) -> str:
    return f"np.{func.__name__}" if isinstance(func, np.ufunc) else _qualname(func)


def coverage_table() -> str:
    """The coverage report as a text table with totals (`python -m vmapx coverage`)."""
    # NumPy lists a `like=` creator twice (its twin is dispatched as the public one, so
    # both have one status): one row, one count per name
    report = {_name(func): status for func, status in coverage().items()}
    rows = [f"{'function':<45} status"]
    rows += [f"{name:<45} {status}" for name, status in report.items()]
    counts = Counter(report.values())
    rows.append("")
    rows.append(
        "totals: "
        + ", ".join(f"{k} {counts.get(k, 0)}" for k in ("native", "fallback", "refused"))
        + f" (of {len(report)})"
    )
    return "\n".join(rows)
