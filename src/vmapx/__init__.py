"""vmapx: vectorizing map and composable function transforms for plain NumPy code.

`import vmapx` is cheap: the transforms and the NumPy rules they need (and optree,
`numpy.random`) are imported on the first use of a public name (`vmapx.vmap`, or
`from vmapx import vmap`), by `__getattr__` below (PEP 562).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what type checkers and IDEs see: the names themselves
    from . import debug, errors, random
    from ._public import (
        PerformanceWarning,
        all_gather,
        axis_index,
        check_grads,
        cond,
        config,
        coverage,
        custom_vmap,
        fori_loop,
        grad,
        hessian,
        jacfwd,
        jacrev,
        jit,
        jvp,
        linearize,
        pmax,
        pmean,
        pmin,
        psum,
        scan,
        stop_gradient,
        switch,
        value_and_grad,
        vectorized_map,
        vjp,
        vmap,
        while_loop,
    )

__all__ = [
    "PerformanceWarning",
    "all_gather",
    "axis_index",
    "check_grads",
    "cond",
    "config",
    "coverage",
    "custom_vmap",
    "debug",
    "errors",
    "fori_loop",
    "grad",
    "hessian",
    "jacfwd",
    "jacrev",
    "jit",
    "jvp",
    "linearize",
    "pmax",
    "pmean",
    "pmin",
    "psum",
    "random",
    "scan",
    "stop_gradient",
    "switch",
    "value_and_grad",
    "vectorized_map",
    "vjp",
    "vmap",
    "while_loop",
]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'vmapx' has no attribute {name!r}")
    public = importlib.import_module("._public", __name__)
    value = getattr(public, name)
    globals()[name] = value  # (the next lookup is a plain attribute)
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
