"""The public API under a type checker: `tests/typing/user_script.py` runs, and under
`mypy --strict` (`make typecheck`) the transforms keep the parameters of `f`."""

from __future__ import annotations

import runpy
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import vmapx

SCRIPT = Path(__file__).parent / "typing" / "user_script.py"


def test_the_user_script_runs_and_uses_every_public_name():
    text = SCRIPT.read_text()
    missing = [name for name in vmapx.__all__ if f"vmapx.{name}" not in text]
    assert not missing, missing
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", vmapx.PerformanceWarning)  # (custom_vmap's loop)
        runpy.run_path(str(SCRIPT), run_name="__main__")


def test_the_package_is_typed():
    assert (Path(vmapx.__file__).parent / "py.typed").exists()


@pytest.mark.skipif(
    shutil.which("mypy") is None and not Path(sys.executable).with_name("mypy").exists(),
    reason="mypy is not installed (pip install 'vmapx[lint]')",
)
def test_mypy_strict_passes_and_sees_fs_parameters():
    mypy = Path(sys.executable).with_name("mypy")
    result = subprocess.run(
        [str(mypy) if mypy.exists() else "mypy", "--strict", str(SCRIPT)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    revealed = [line for line in result.stdout.splitlines() if "Revealed type" in line]
    float_array = "numpy.ndarray[tuple[Any, ...], numpy.dtype[numpy.float64]]"
    params = f"w: {float_array}, x: {float_array}, y: {float_array}"
    assert f'"def ({params}) -> Any"' in revealed[0]  # vmap(grad(loss))
    assert f"Jitted[[{params}], Any]" in revealed[1]  # jit(loss)
