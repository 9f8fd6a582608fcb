"""`vmapx.coverage()` against NumPy's own lists, and every claim it makes proved."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
from numpy.testing.overrides import (
    get_overridable_numpy_array_functions,
    get_overridable_numpy_ufuncs,
)
from op_table import OPS

import vmapx


def test_every_overridable_callable_is_reported() -> None:
    report = vmapx.coverage()
    assert set(report) == set(get_overridable_numpy_array_functions()) | set(
        get_overridable_numpy_ufuncs()
    )
    assert set(report.values()) <= {"native", "fallback", "refused"}


def test_every_ufunc_is_native() -> None:
    report = vmapx.coverage()
    assert all(report[u] == "native" for u in get_overridable_numpy_ufuncs())


def test_at_least_250_array_functions_are_native() -> None:
    report = vmapx.coverage()
    native = [f for f in get_overridable_numpy_array_functions() if report[f] == "native"]
    assert len(native) >= 250, len(native)
    modules = {f.__module__ for f in native}
    assert "numpy.linalg" in modules and "numpy.fft" in modules or any(
        "fft" in getattr(f, "__module__", "") for f in vmapx._numpy._dispatch.FUNCTIONS
    )


def test_every_native_claim_is_covered_by_an_op_table_row() -> None:
    """`test_ops.py` runs every row with warnings as errors, so a covered function
    that secretly looped would fail there: this is the proof of "native"."""
    covered = {f for op in OPS for f in op.covers}
    report = vmapx.coverage()
    uncovered = sorted(
        f"{getattr(f, '__module__', '')}.{f.__name__}"
        for f, status in report.items()
        if status == "native" and f not in covered
    )
    assert not uncovered, f"native without an op-table row: {uncovered}"


def test_coverage_command_prints_totals() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "vmapx", "coverage"], capture_output=True, text=True, check=True
    ).stdout
    assert "np.sum" in out and "totals: native" in out
