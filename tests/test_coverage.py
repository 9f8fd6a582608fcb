"""`vmapx.coverage()` against NumPy's own lists, and every claim it makes proved."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from numpy.testing.overrides import (
    get_overridable_numpy_array_functions,
    get_overridable_numpy_ufuncs,
)

import vmapx
from np_compat import NUMPY2, np2
from op_table import OPS
from vmapx import errors
from vmapx._coverage import UFUNCS_NEEDING_OUT, dispatched_as


def test_every_overridable_callable_is_reported() -> None:
    report = vmapx.coverage()
    assert set(report) == set(get_overridable_numpy_array_functions()) | set(
        get_overridable_numpy_ufuncs()
    )
    assert set(report.values()) <= {"native", "fallback", "refused"}


def test_every_ufunc_is_native_but_two_refused_with_reason() -> None:
    report = vmapx.coverage()
    refused = {u.__name__ for u in get_overridable_numpy_ufuncs() if report[u] != "native"}
    assert refused == (UFUNCS_NEEDING_OUT if NUMPY2 else set())  # string ufuncs: NumPy 2
    assert all(
        report[u] == "refused" for u in get_overridable_numpy_ufuncs() if u.__name__ in refused
    )


def test_string_ufunc_needing_out_is_refused_and_its_function_batches() -> None:
    x = np.array([["ab", "cd"], ["ef", "gh"]])
    with pytest.raises(errors.UnsupportedError, match="np.strings.partition"):
        vmapx.vmap(lambda a: np2._core.umath._partition_index(a, np.array("b"), np.int64(1)))(x)
    got = vmapx.vmap(lambda a: np2.strings.partition(a, "b"))(x)
    assert [g.tolist() for g in got] == [r.tolist() for r in np2.strings.partition(x, "b")]


def test_refused_functions_raise_with_the_reason(tmp_path) -> None:
    x = np.ones((2, 3))
    report = vmapx.coverage()
    assert {f.__name__ for f, s in report.items() if s == "refused"} >= {
        "save", "savez", "savez_compressed", "savetxt", "loadtxt", "genfromtxt",
        *(["fromfile"] if NUMPY2 else []),  # NumPy 1.26 does not let libraries override it
    }  # fmt: skip
    with pytest.raises(errors.UnsupportedError, match="writes a file.*outside the vmapped"):
        vmapx.vmap(lambda v: np.save(tmp_path / "x.npy", v))(x)
    with pytest.raises(errors.UnsupportedError, match="writes a file"):
        vmapx.vmap(lambda v: np.savetxt(tmp_path / "x.txt", v))(x)
    assert not list(tmp_path.iterdir())


def test_fallback_functions_give_the_loop_answer_with_a_warning() -> None:
    x = np.array([[1.5, 2.0], [3.0, 4.25]])
    for f in (np.array2string, np.array_repr, np.array_str):
        with pytest.warns(vmapx.PerformanceWarning, match=f.__name__):
            got = vmapx.vmap(f)(x)
        assert got.tolist() == [f(v) for v in x]


def test_emath_gives_complex_when_some_example_needs_it() -> None:
    from numpy.lib import scimath

    x = np.array([[4.0, 9.0], [-4.0, 1.0]])
    with pytest.warns(vmapx.PerformanceWarning, match="complex result for some examples"):
        got = vmapx.vmap(scimath.sqrt)(x)  # (each example's own type: the loop)
    expected = np.stack([scimath.sqrt(v) for v in x])
    assert got.dtype == expected.dtype == np.complex128
    np.testing.assert_array_equal(got, expected)
    assert vmapx.vmap(scimath.sqrt)(-x[:1]).dtype == np.complex128  # all complex: batched


def test_at_least_250_array_functions_are_native() -> None:
    report = vmapx.coverage()
    native = [f for f in get_overridable_numpy_array_functions() if report[f] == "native"]
    # NumPy 1.26 lacks NumPy 2's array-API functions; its `np.char` functions loop
    assert len(native) >= (250 if NUMPY2 else 240), len(native)
    modules = {f.__module__ for f in native}
    assert (
        "numpy.linalg" in modules
        and "numpy.fft" in modules
        or any("fft" in getattr(f, "__module__", "") for f in vmapx._registry.FUNCTIONS)
    )


def test_every_native_claim_is_covered_by_an_op_table_row() -> None:
    """`test_ops.py` runs every row with warnings as errors, so a covered function
    that secretly looped would fail there: this is the proof of "native"."""
    covered = {f for op in OPS for f in op.covers}
    report = vmapx.coverage()
    uncovered = sorted(
        f"{getattr(f, '__module__', '')}.{f.__name__}"
        for f, status in report.items()
        if status == "native" and f not in covered and dispatched_as(f) not in covered
    )
    assert not uncovered, f"native without an op-table row: {uncovered}"


def test_coverage_command_prints_totals() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "vmapx", "coverage"], capture_output=True, text=True, check=True
    ).stdout
    assert "numpy.sum " in out and "totals: native" in out


def test_rules_report_has_derivative_columns_and_sources() -> None:
    from vmapx._coverage import coverage_table, rules_report

    report = rules_report()
    assert report[np.sin]["jvp"] == report[np.sin]["vjp"] == "rule"
    assert report[np.floor]["jvp"] == "zero"
    assert report[np.linalg.inv]["vjp"] in ("rule", "transposed")
    assert "batch=vmapx/_numpy/ufuncs.py:" in report[np.sin]["where"]
    assert report[np.array2string]["batch"] == "fallback"
    table = coverage_table(rules=True, where=True)
    assert "jvp:" in table.splitlines()[-2] and "vjp:" in table.splitlines()[-1]
    row = next(r for r in table.splitlines() if r.startswith("np.matmul "))
    assert "native" in row and "contractions.py" in row


def test_cli_coverage_flags() -> None:
    import subprocess
    import sys

    run = [sys.executable, "-m", "vmapx", "coverage", "--rules", "--where"]
    out = subprocess.run(run, capture_output=True, text=True, check=True).stdout
    assert "np.matmul" in out and "vjp:" in out
    # a fresh process sees every rule (the lazy `import vmapx` loads none by itself)
    from vmapx._coverage import coverage_table

    # (NumPy lists the overridable functions of the submodules imported so far: compare
    # the rows both processes have)
    fresh = {row.split()[0]: row for row in out.splitlines()[1:] if row and ":" not in row[:45]}
    here = coverage_table(rules=True, where=True).splitlines()[1:]
    common = [row for row in here if row and row.split()[0] in fresh]
    assert len(common) > 400
    assert [fresh[row.split()[0]] for row in common] == common
    bad = subprocess.run([sys.executable, "-m", "vmapx", "nope"], capture_output=True, text=True)
    assert bad.returncode == 2 and "usage" in bad.stderr
