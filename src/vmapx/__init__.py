"""vmapx: vectorizing map and composable function transforms for plain NumPy code."""

from . import (
    _numpy,  # noqa: F401  (registers the NumPy surface and its rules)
    errors,
    random,
)
from ._api import vectorized_map, vmap
from ._collectives import all_gather, axis_index, pmax, pmean, pmin, psum
from ._config import config
from ._coverage import coverage
from ._custom import custom_vmap
from .control_flow import cond, fori_loop, scan, switch, while_loop
from .errors import PerformanceWarning

# isort: split
from . import _control_ad  # noqa: F401  (derivatives of control flow and collectives)

__all__ = [
    "PerformanceWarning",
    "all_gather",
    "axis_index",
    "cond",
    "custom_vmap",
    "fori_loop",
    "pmax",
    "pmean",
    "pmin",
    "psum",
    "random",
    "scan",
    "switch",
    "while_loop",
    "config",
    "coverage",
    "errors",
    "vectorized_map",
    "vmap",
]
__version__ = "0.1.0"
