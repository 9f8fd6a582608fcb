"""Tests of functions only NumPy 2 has: on NumPy 1.26 they are skipped, with the reason.

`np2` is `numpy` for the names NumPy 1.26 lacks (`np2.vecdot`, `np2.linalg.outer`,
`np2.strings.upper`): on NumPy 2 it gives NumPy's own objects; on NumPy 1.26 a missing
name gives a `Missing` stand-in whose call skips the running test ("needs NumPy 2:
np.vecdot"). So an op-table row or a parametrized case that uses one is built on every
NumPy and reported as skipped on 1.26, never dropped. A name used through plain `np.`
fails loudly on 1.26 instead: use `np2.` for it. `requires_numpy2` marks whole tests
that depend on NumPy 2 behaviour rather than on one function; `numpy1_only` marks tests
of the NumPy 1.26 behaviour vmapx follows there.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np
import pytest

NUMPY2 = np.lib.NumpyVersion(np.__version__) >= "2.0.0"


def requires_numpy2(what: str) -> pytest.MarkDecorator:
    """Skip on NumPy 1.26: the test needs `what` (a keyword, a behaviour) of NumPy 2."""
    return pytest.mark.skipif(not NUMPY2, reason=f"needs NumPy 2: {what}")


def numpy1_only(what: str) -> pytest.MarkDecorator:
    """Skip on NumPy 2: the test checks NumPy 1.26's `what`, which NumPy 2 changed."""
    return pytest.mark.skipif(NUMPY2, reason=f"NumPy 1.26 behaviour: {what}")


class Missing:
    """A NumPy 2 function (or module) on NumPy 1.26: calling it skips the test."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.__name__ = name.rsplit(".", 1)[-1]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        pytest.skip(f"needs NumPy 2: np.{self.name} (have NumPy {np.__version__})")

    def __getattr__(self, attr: str) -> Missing:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return Missing(f"{self.name}.{attr}")

    def __repr__(self) -> str:
        return f"<np.{self.name}: needs NumPy 2>"


class _Namespace:
    """`module`'s attributes, with `Missing` stand-ins for the ones it lacks."""

    def __init__(self, module: ModuleType, prefix: str = "") -> None:
        self._module, self._prefix = module, prefix

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._module, name, None)
        if value is None:
            return Missing(self._prefix + name)
        if isinstance(value, ModuleType):
            return _Namespace(value, f"{self._prefix}{name}.")
        return value


np2: Any = _Namespace(np)
