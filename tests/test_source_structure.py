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


# An op's rules (batch, JVP, VJP, composite, ...) are registered in one file within this
# many lines of each other: its batch rule, then its derivatives and their helpers.
RULES_SPAN = 70


def _rule_sites() -> dict[str, dict[str, tuple[str, int]]]:
    """primitive name -> kind -> (file, line) of every rule vmapx registers for it. Family
    defaults (the batch rules of every ufunc method, registered once in `ufuncs.py` for
    all ufuncs) belong to no op and are left out."""
    import vmapx._control_ad  # noqa: F401  (every rule loaded)
    import vmapx._numpy  # noqa: F401
    from vmapx import _registry

    sites = {}
    for _, prim in _registry.registered():
        rules = prim.rules
        own = {}
        for kind, source in rules.sources.items():
            filename, line = source.rsplit(":", 1)
            if kind not in rules.defaults and filename.startswith("vmapx/"):
                own[kind] = (filename, int(line))
        if len(own) > 1:
            sites[prim.name] = own
    return sites


def test_an_ops_rules_are_registered_together_in_one_file():
    sites = _rule_sites()
    assert len(sites) > 200  # (the ops with more than one kind of rule)
    apart = {}
    for name, own in sites.items():
        files = {f for f, _ in own.values()}
        lines = [n for _, n in own.values()]
        if len(files) > 1 or max(lines) - min(lines) > RULES_SPAN:
            apart[name] = {kind: f"{f}:{n}" for kind, (f, n) in own.items()}
    assert apart == {}


LEAVING = ("__bool__", "__float__", "__int__", "__complex__", "__index__", "__format__",
           "item", "tolist", "__array__", "__len__", "__iter__")  # fmt: skip


def test_the_tracers_share_one_protocol_for_values_leaving_the_trace():
    """The conversions are defined once, on the tracer base; each kind of tracer only
    sets its trace's policy (`_leave_trace`)."""
    from vmapx._autodiff import JVPTracer, VJPTracer
    from vmapx._batching import BatchTracer
    from vmapx._core import Tracer
    from vmapx._jit import RecordTracer, ScalarTracer

    for cls in (BatchTracer, JVPTracer, VJPTracer, RecordTracer, ScalarTracer):
        below = [c for c in cls.__mro__ if issubclass(c, Tracer) and c is not Tracer]
        assert [(c.__name__, n) for c in below for n in LEAVING if n in vars(c)] == []
        assert any("_leave_trace" in vars(c) for c in below)


def test_optree_is_reached_through_the_namespace_aware_wrappers():
    """`vmapx._pytree` passes `config.pytree_namespace` to every optree call; a module that
    imported optree itself would not see the user's registered classes."""
    direct = []
    for path in _modules():
        if path.name == "_pytree.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import) and any(
                a.name.split(".")[0] == "optree" for a in node.names
            ):
                direct.append(f"{path.name}:{node.lineno}")
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "optree":
                direct.append(f"{path.name}:{node.lineno}")
    assert direct == []
