"""`vmapx.coverage()`: which NumPy functions and ufuncs batch natively."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np

# the report reads the registry: every module that registers rules must be loaded
# (`import vmapx` is lazy, and `python -m vmapx coverage` comes here directly)
from . import _control_ad, _numpy  # noqa: F401
from ._registry import ALL, FUNCTIONS, Rules, prim_of, rules_of


def coverage() -> dict[Callable[..., Any], str]:
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

    report: dict[Callable[..., Any], str] = {}
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


def dispatched_as(func: Callable[..., Any]) -> Callable[..., Any]:
    """The function NumPy hands to `__array_function__` for `func`: NumPy lists some
    `like=` creators twice (the public function and an internal twin whose calls are
    dispatched as the public one)."""
    if func.__name__.startswith("_") or func in FUNCTIONS:
        return func
    public = getattr(np, func.__name__, None)
    return public if public is not None and public is not func else func


def _qualname(func: Callable[..., Any]) -> str:
    return f"{getattr(func, '__module__', '')}.{getattr(func, '__name__', '')}"


def _name(func: Callable[..., Any]) -> str:
    return f"np.{func.__name__}" if isinstance(func, np.ufunc) else _qualname(func)


def derivative_status(rules: Rules | None, mode: str) -> str:
    """How a function is differentiated in `mode` (`"jvp"` or `"vjp"`): `"rule"` (its
    own), `"transposed"` (from the other mode's rule), `"composite"` (computed with
    other differentiable functions), `"zero"` (no derivative), or `"-"` (none: the
    transforms raise a `DifferentiationError` naming it)."""
    if rules is None:
        return "-"
    other = "vjp" if mode == "jvp" else "jvp"
    if rules.zero is ALL:
        return "zero"
    if getattr(rules, mode) is not None:
        return "rule"
    if getattr(rules, other) is not None and not (mode == "vjp" and rules.linear):
        return "transposed"
    if rules.composite is not None:
        return "composite"
    return "-"


def rules_report() -> dict[Callable[..., Any], dict[str, str]]:
    """Per overridable NumPy function and ufunc: `batch` (as `coverage()`), `jvp` and
    `vjp` (see `derivative_status`), and `where`: each registered rule kind with the
    `file:line` that registered it."""
    report = {}
    for func, status in coverage().items():
        # (a ufunc's primitive is made on first use: make it, so the report never depends
        # on what ran before)
        rules = prim_of(func).rules if isinstance(func, np.ufunc) else rules_of(dispatched_as(func))
        report[func] = {
            "batch": status,
            "jvp": derivative_status(rules, "jvp"),
            "vjp": derivative_status(rules, "vjp"),
            "where": ""
            if rules is None
            else " ".join(f"{k}={v}" for k, v in rules.sources.items()),  # fmt: skip
        }
    return report


def coverage_table(*, rules: bool = False, where: bool = False) -> str:
    """The coverage report as a text table with totals (`python -m vmapx coverage`);
    `rules` adds the derivative columns, `where` the registration sites."""
    # NumPy lists a `like=` creator twice (its twin is dispatched as the public one, so
    # both have one status): one row, one count per name
    report = {_name(func): entry for func, entry in rules_report().items()}
    header = f"{'function':<45} {'batch':<9}"
    if rules:
        header += f" {'jvp':<11} {'vjp':<11}"
    rows = [header + (" where" if where else "")]
    for name, entry in report.items():
        row = f"{name:<45} {entry['batch']:<9}"
        if rules:
            row += f" {entry['jvp']:<11} {entry['vjp']:<11}"
        rows.append((row + (" " + entry["where"] if where else "")).rstrip())
    counts = Counter(e["batch"] for e in report.values())
    rows.append("")
    rows.append(
        "totals: "
        + ", ".join(f"{k} {counts.get(k, 0)}" for k in ("native", "fallback", "refused"))
        + f" (of {len(report)})"
    )
    if rules:
        for mode in ("jvp", "vjp"):
            c = Counter(e[mode] for e in report.values())
            rows.append(f"{mode}: " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())))
    return "\n".join(rows)
