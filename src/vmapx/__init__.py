"""vmapx: vectorizing map and composable function transforms for plain NumPy code.

`import vmapx` is cheap: the transforms and the NumPy rules they need (and optree,
`numpy.random`) are imported on the first use of a public name (`vmapx.vmap`, or
`from vmapx import vmap`), by `__getattr__` below (PEP 562).
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what type checkers and IDEs see: the names themselves
    from . import debug, errors, extend, random
    from ._ad_api import (
        grad,
        hessian,
        jacfwd,
        jacrev,
        jvp,
        linearize,
        stop_gradient,
        value_and_grad,
        vjp,
    )
    from ._api import vectorized_map, vmap
    from ._checkpoint import checkpoint
    from ._collectives import all_gather, axis_index, pmax, pmean, pmin, psum
    from ._config import config
    from ._coverage import coverage
    from ._custom import custom_jvp, custom_vjp, custom_vmap
    from ._jit_api import jit
    from ._ragged import map  # noqa: A004  (vmapx.map, like Python's map)
    from ._shape_eval import ShapeDtypeStruct, eval_shape
    from ._vectorize import vectorize
    from .control_flow import cond, fori_loop, scan, switch, while_loop
    from .errors import PerformanceWarning
    from .testing import check_grads

__all__ = [
    "PerformanceWarning",
    "ShapeDtypeStruct",
    "all_gather",
    "axis_index",
    "check_grads",
    "checkpoint",
    "cond",
    "config",
    "coverage",
    "custom_jvp",
    "custom_vjp",
    "custom_vmap",
    "debug",
    "errors",
    "eval_shape",
    "extend",
    "fori_loop",
    "grad",
    "hessian",
    "jacfwd",
    "jacrev",
    "jit",
    "jvp",
    "linearize",
    "map",
    "pmax",
    "pmean",
    "pmin",
    "psum",
    "random",
    "scan",
    "stop_gradient",
    "switch",
    "value_and_grad",
    "vectorize",
    "vectorized_map",
    "vjp",
    "vmap",
    "while_loop",
]
__version__ = "0.1.0"

# library adapters (SciPy, numpy.polynomial): loaded as each library is imported, if it is
# installed; `VMAPX_LIBRARIES=0` leaves libraries untouched (see `vmapx.libraries`)
if os.environ.get("VMAPX_LIBRARIES", "1") != "0":
    from . import libraries as _libraries

    _libraries.install(defer_imported=True)


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'vmapx' has no attribute {name!r}")
    public = importlib.import_module("._public", __name__)
    if "_libraries" in globals():
        _libraries.load_deferred()
    value = getattr(public, name)
    globals()[name] = value  # (the next lookup is a plain attribute)
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
