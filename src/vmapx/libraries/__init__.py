"""Library adapters: SciPy and NumPy library functions that batch and differentiate.

Library code reaches vmapx through NumPy's dispatch only while it calls NumPy functions;
a C entry point (LAPACK, a signal filter) or `np.asarray` on entry leaves NumPy's dispatch,
and the transforms fall back to one call per example. An *adapter* gives such a library
function what the transforms need, through the public `vmapx.extend` API:

- `scipy.special`: derivatives of its ufuncs (`scipy_special`);
- `scipy.linalg`, `scipy.spatial.distance`, `scipy.signal`, `scipy.integrate`,
  `scipy.stats` (location-scale distributions),
  `numpy.polynomial` and
  `scipy.special`'s Python functions (`logsumexp`, `softmax`, ...): the library function,
  called with values a transform traces, runs as a vmapx primitive (a NumPy formulation
  that batches and differentiates, or one library call on the whole batch); called with
  plain values it is the library function itself (see `_adapter.LibraryFunction`).

Adapters are installed when `vmapx` is imported, for each supported library as it is
imported (now or later), and only if it is installed: no new dependency. Set the
environment variable `VMAPX_LIBRARIES=0` before importing vmapx to leave libraries
untouched; `uninstall()` restores them. Import vmapx before taking a library function by
name (`from scipy.linalg import solve`): a name taken before keeps the plain function,
which still gives the loop's answer under `vmap`, one example at a time. A library
imported before vmapx is adapted on vmapx's first use (`vmapx.vmap`, ...), not on
`import vmapx`: a name taken between the two keeps the plain function too.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import threading
from types import ModuleType
from typing import Any, cast

__all__ = ["ADAPTERS", "install", "installed", "load_deferred", "uninstall"]

# library module -> the vmapx module holding its adapters
ADAPTERS = {
    "scipy.special": "scipy_special scipy_special_functions",
    "scipy.linalg": "scipy_linalg",
    "scipy.spatial.distance": "scipy_spatial",
    "scipy.signal": "scipy_signal",
    "scipy.stats": "scipy_stats",
    "scipy.integrate": "scipy_integrate",
    "numpy.polynomial.polynomial": "numpy_polynomial",
}

_lock = threading.RLock()
_loaded: set[str] = set()  # library modules whose adapters are loaded
_deferred: set[str] = set()  # imported before vmapx: loaded on the first use of vmapx


def _load(library: str) -> None:
    """Load the adapters of `library` (imported already), with any deferred ones; once.

    Through `load_deferred`, never directly: loading an adapter module imports vmapx's
    public modules, whose import loads the deferred adapters, and an adapter loaded from
    there would find the adapter machinery half initialised.
    """
    with _lock:
        if library in _loaded:
            return
        _deferred.add(library)
    load_deferred()


def _load_now(library: str) -> None:
    with _lock:
        if library in _loaded:
            return
        _loaded.add(library)
        for name in ADAPTERS[library].split():
            module = importlib.import_module(f"{__name__}.{name}")
            install_module = getattr(module, "install", None)
            if install_module is not None:
                install_module()


class _Finder(importlib.abc.MetaPathFinder):
    """Loads a library's adapters right after the library module is imported."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname not in ADAPTERS or fullname in _loaded:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        spec.loader = _AfterLoad(spec.loader, fullname)
        return spec


class _AfterLoad(importlib.abc.Loader):
    def __init__(self, loader: Any, library: str) -> None:
        self.loader = loader
        self.library = library

    def create_module(self, spec: Any) -> ModuleType | None:
        return cast("ModuleType | None", self.loader.create_module(spec))

    def exec_module(self, module: ModuleType) -> None:
        self.loader.exec_module(module)
        _load(self.library)

    def __getattr__(self, name: str) -> Any:  # get_resource_reader, get_source, ...
        return getattr(self.loader, name)


_finder = _Finder()


def install(defer_imported: bool = False) -> list[str]:
    """Install the adapters of every supported library: now for those imported already
    (or, with `defer_imported`, when vmapx's transforms are first used), on import for
    the others. Idempotent.

    **Returns:** the library modules whose adapters are loaded now.

    **Example:**

    ```python
    >>> import vmapx.libraries
    >>> _ = vmapx.libraries.install()

    ```
    """
    # NumPy first, whole: NumPy 1.26 imports numpy.polynomial while it initialises, and
    # loading that library's adapters then would import vmapx's modules into a NumPy
    # without `numpy.random` yet
    importlib.import_module("numpy")
    with _lock:
        if _finder not in sys.meta_path:
            sys.meta_path.insert(0, _finder)
        imported = [library for library in ADAPTERS if library in sys.modules]
        if defer_imported:  # (`import vmapx` stays light: NumPy 1.26 imports
            _deferred.update(imported)  # numpy.polynomial itself)
        else:
            for library in imported:
                _load(library)
        return sorted(_loaded)


_loading_deferred = False


def load_deferred() -> None:
    """Load the adapters `install(defer_imported=True)` left for later.

    Not re-entered: loading an adapter module imports vmapx's public modules, whose
    import may come back here (through `vmapx.__getattr__`) while an adapter module is
    half initialised. The outer call finishes the list; the order is fixed (sorted), so
    that an import's outcome does not depend on the hash seed.
    """
    global _loading_deferred
    with _lock:
        if _loading_deferred:
            return
        _loading_deferred = True
        try:
            while _deferred:
                library = min(_deferred)
                _deferred.discard(library)
                _load_now(library)
        finally:
            _loading_deferred = False


def installed() -> list[str]:
    """The library modules whose adapters are loaded."""
    return sorted(_loaded)


def uninstall() -> None:
    """Restore every library function an adapter replaced; stop installing on import.
    (Derivative rules of `scipy.special`'s ufuncs stay registered: they change no
    result, they only make `grad` work.)"""
    from . import _adapter

    with _lock:
        if _finder in sys.meta_path:
            sys.meta_path.remove(_finder)
        _adapter.restore_all()
        _loaded.clear()
        _deferred.clear()
