"""vmapx: vectorizing map and composable function transforms for plain NumPy code."""

from . import (
    _numpy,  # noqa: F401  (registers the NumPy surface and its rules)
    errors,
)
from ._api import vectorized_map, vmap
from ._config import config
from ._coverage import coverage
from .errors import PerformanceWarning

__all__ = [
    "PerformanceWarning",
    "config",
    "coverage",
    "errors",
    "vectorized_map",
    "vmap",
]
__version__ = "0.1.0"
