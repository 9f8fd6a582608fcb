"""Every public name of vmapx, imported (`vmapx/__init__.py` loads this module on the
first use of one of them, and its `__all__` lists them)."""

# ruff: noqa: F401  (the names are re-exported by `vmapx/__init__.py`)

from . import (
    _numpy,  # (registers the NumPy surface and its rules)
    debug,  # (also: what `print` shows of a traced value)
    errors,
    extend,
    random,
)
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

# isort: split
from . import _control_ad  # (derivatives of control flow and collectives)
