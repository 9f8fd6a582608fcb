"""The package's source keeps its structure: names shared between modules are public, the
NumPy family files import at the top, and an op's rules sit together in one file."""

from __future__ import annotations

import ast
from pathlib import Path

import vmapx

PACKAGE = Path(vmapx.__file__).parent

# the core's internals other modules may import (documented in `vmapx._core`)
SHARED_INTERNALS = {"vmapx._core._state", "vmapx._core._is_library_file"}


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _module_name(path: Path) -> list[str]:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return parts[:-1] if parts[-1] == "__init__" else parts


def _imported_from(path: Path, node: ast.ImportFrom) -> list[str]:
    """The absolute module path of a `from ... import` (relative ones resolved)."""
    if not node.level:
        return (node.module or "").split(".")
    package = _module_name(path)
    if path.name != "__init__.py":
        package = package[:-1]
    base = package[: len(package) - node.level + 1]
    return base + (node.module.split(".") if node.module else [])


def _private_imports() -> list[str]:
    found = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            module = _imported_from(path, node)
            if module[:1] != ["vmapx"]:
                continue
            for alias in node.names:
                name = alias.name
                if not name.startswith("_") or name.startswith("__"):
                    continue
                target = PACKAGE.parent.joinpath(*module, name)
                if target.with_suffix(".py").exists() or target.is_dir():
                    continue  # a private module: the package's modules are all private
                full = ".".join([*module, name])
                if full not in SHARED_INTERNALS:
                    found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {full}")
    return found


def test_no_private_name_is_imported_from_another_module():
    assert _private_imports() == []


def _is_import(node: ast.stmt) -> bool:
    if isinstance(node, ast.Import | ast.ImportFrom):
        return True
    if isinstance(node, ast.Try):  # an import with a fallback for older NumPy
        blocks = [node.body, *(h.body for h in node.handlers)]
        return all(isinstance(s, ast.Import | ast.ImportFrom) for b in blocks for s in b)
    return False


def _late_imports(path: Path) -> list[int]:
    body = ast.parse(path.read_text()).body
    i = 1 if body and isinstance(body[0], ast.Expr) else 0  # the docstring
    while i < len(body) and _is_import(body[i]):
        i += 1
    return [node.lineno for node in body[i:] if _is_import(node)]


def test_family_files_import_at_the_top():
    late = {
        str(path.relative_to(PACKAGE)): lines
        for path in sorted((PACKAGE / "_numpy").glob("*.py"))
        if (lines := _late_imports(path))
    }
    assert late == {}
