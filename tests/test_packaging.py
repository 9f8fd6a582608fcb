"""What a new user meets first: the import, the command line, the package's files."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import vmapx
from vmapx.__main__ import main
from vmapx.libraries import ADAPTERS

ROOT = Path(__file__).resolve().parent.parent


def _python(code: str) -> str:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    ).stdout


def test_import_is_lazy_and_every_public_name_resolves():
    loaded = _python("import sys, vmapx; print(sorted(m for m in sys.modules if 'vmapx' in m))")
    assert "vmapx._numpy" not in loaded  # the rules load on first use
    assert "numpy.testing" not in _python(
        "import sys, vmapx; vmapx.vmap; print(sorted(sys.modules))"
    )
    for name in vmapx.__all__:
        assert getattr(vmapx, name) is not None
    assert set(vmapx.__all__) <= set(dir(vmapx))


def test_a_library_imported_before_vmapx_is_adapted_on_first_use():
    """numpy.polynomial imported first (NumPy 1.26 imports it itself): `import vmapx`
    stays light, and the first use of a transform installs its adapters."""
    out = _python(
        "import sys\n"
        "import numpy.polynomial.polynomial as P\n"
        "import vmapx\n"
        "print('vmapx._numpy' in sys.modules, type(P.polyval).__name__)\n"
        "vmapx.vmap\n"
        "print(type(P.polyval).__name__)\n"
    )
    assert out.split() == ["False", "function", "LibraryFunction"]


def _script(imported: list[str], *lines: str) -> str:
    """A program that imports the modules `imported`, then runs `lines`."""
    return "".join(f"import {module}\n" for module in imported) + "".join(
        f"{line}\n" for line in lines
    )


def _outputs_by_seed(code: str, seeds: int) -> list[str]:
    """What `code` prints, run under each hash seed below `seeds` (each run succeeds)."""
    outputs = []
    for seed in range(seeds):
        proc = _python_seeded(code, seed)
        assert proc.returncode == 0, (seed, proc.stderr[-2000:])
        outputs.append(proc.stdout)
    return outputs


def _python_seeded(code: str, seed: int) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONHASHSEED": str(seed)}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env
    )


@pytest.mark.parametrize("first_name", ["vmap", "errors", "extend", "random"])
def test_every_library_imported_before_vmapx_loads_whatever_the_hash_seed(first_name):
    """All the adapted libraries imported first (as Dask or scikit-learn do): the first
    use of vmapx loads every adapter. (Loading one adapter module imports vmapx's public
    modules, which once re-entered the deferred loading and, for some hash seeds, found
    an adapter module half initialised.)"""
    libraries = sorted(ADAPTERS)
    code = _script(
        libraries,
        "import vmapx",
        f"from vmapx import {first_name}",
        "import scipy.linalg, numpy.polynomial.polynomial as P",
        "print(vmapx.libraries.installed())",
        "print(type(scipy.linalg.solve).__name__, type(P.polyval).__name__)",
    )
    for seed, out in enumerate(_outputs_by_seed(code, 4)):
        installed, kinds = out.splitlines()
        assert installed == repr(libraries), seed
        assert kinds == "LibraryFunction LibraryFunction", seed


def test_coverage_command_lists_each_function_once(capsys):
    assert main(["coverage"]) == 0
    rows = capsys.readouterr().out.splitlines()
    names = [r.split()[0] for r in rows[1:] if r and not r.startswith("totals")]
    assert len(names) == len(set(names)) and "numpy.loadtxt" in names


def test_a_closed_pipe_ends_the_command_quietly():
    proc = subprocess.run(
        f"{sys.executable} -m vmapx coverage | head -1",
        shell=True, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.stdout.startswith("function")
    assert proc.stderr == ""


def test_help_version_and_usage_errors(capsys):
    proc = subprocess.run(
        [sys.executable, "-m", "vmapx", "--help"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0 and "coverage" in proc.stdout
    assert main(["--version"]) == 0 and capsys.readouterr().out.strip() == vmapx.__version__
    assert main([]) == 2 and "usage:" in capsys.readouterr().err


def test_license_and_supported_pythons_agree():
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'requires-python = ">=3.11"' in pyproject
    assert "Python 3.11 to 3.13" in (ROOT / "README.md").read_text()


@pytest.mark.parametrize(
    "before",
    [["scipy.special", "scipy.linalg"], ["numpy.polynomial.polynomial", "scipy.integrate"]],
)
def test_a_library_imported_after_vmapx_loads_beside_deferred_ones(before):
    """Some adapted libraries imported before vmapx (deferred), then one imported after
    it whose import loads its adapters: the adapter machinery, imported for the first
    time there, must not load the deferred adapters while it is half initialised."""
    code = _script(
        before,
        "from scipy.linalg import solve",
        "import vmapx",
        "import scipy.stats",
        "print(vmapx.libraries.installed())",
    )
    for out in _outputs_by_seed(code, 2):
        assert set(before) <= set(eval(out)), out
        assert "scipy.stats" in out


@pytest.mark.parametrize(
    "module", ["vmapx.libraries.scipy_signal", "vmapx.libraries._adapter", "vmapx.extend"]
)
def test_a_vmapx_module_imported_first_with_libraries_deferred(module):
    """The adapted libraries imported before vmapx, then a vmapx module by its name: the
    adapter machinery it imports must not load the deferred adapters half initialised."""
    code = _script(
        sorted(ADAPTERS),
        f"import {module}",
        "import vmapx",
        "vmapx.vmap",
        "print(vmapx.libraries.installed())",
    )
    (out,) = _outputs_by_seed(code, 1)
    assert out.strip() == repr(sorted(ADAPTERS))
