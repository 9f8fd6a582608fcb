"""`custom_vmap`: a function whose batched implementation its author gives.

The escape hatch for code vmapx cannot see into (a compiled extension, a hand-tuned
batched kernel): under `vmap`, the rule runs once on the whole batch instead of the
function running once per example.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import optree

from ._batching import BatchTrace, unwrap
from ._core import find_top_trace
from .errors import OutputError

__all__ = ["custom_vmap"]

VmapRule = Callable[..., tuple[Any, Any]]


class custom_vmap:  # noqa: N801 (a decorator, named like JAX's)
    """Give a function its own batched implementation (JAX's `custom_vmap`).

    Decorate the function, then register the rule with `@f.def_vmap`. The rule is
    called as `rule(axis_size, in_batched, *args)`: `axis_size` is the batch size,
    `in_batched` has one entry per argument (a pytree of bools shaped like it: is that
    leaf batched?) and `args` are the arguments with batched leaves holding the whole
    batch on axis 0. It returns `(out, out_batched)`: the results, with the batch on
    axis 0 of batched leaves, and a bool (or a pytree prefix of `out` of bools) saying
    which are batched. Without a transform, or outside `vmap`, the function itself runs.
    Keyword arguments are passed to both unbatched.

    Only the innermost transform sees the rule: under `vmap(grad(f))` the function
    itself runs (batched through its NumPy calls where it can be).

    **Example:**

    ```python
    >>> import numpy as np, vmapx
    >>> @vmapx.custom_vmap
    ... def norm(x):                      # imagine a compiled extension here
    ...     return float(np.sqrt(x @ x))
    >>> @norm.def_vmap
    ... def norm_rule(axis_size, in_batched, x):
    ...     return np.sqrt(np.einsum("bi,bi->b", x, x)), True
    >>> vmapx.vmap(norm)(np.array([[3.0, 4.0], [6.0, 8.0]]))
    array([ 5., 10.])

    ```
    """

    def __init__(self, fun: Callable) -> None:
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.vmap_rule: VmapRule | None = None

    def def_vmap(self, rule: VmapRule) -> VmapRule:
        """Register `rule(axis_size, in_batched, *args) -> (out, out_batched)`."""
        if not callable(rule):
            raise TypeError(f"custom_vmap: the rule must be callable, got {type(rule).__name__}")
        self.vmap_rule = rule
        return rule

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        leaves, treedef = optree.tree_flatten(args)
        trace = find_top_trace(tuple(leaves))
        if self.vmap_rule is None or type(trace) is not BatchTrace:
            return self.fun(*args, **kwargs)
        name = getattr(self.fun, "__name__", "function")
        if find_top_trace((), kwargs) is trace:
            raise TypeError(
                f"custom_vmap: `{name}` got a batched keyword argument; keyword arguments "
                "are passed to the rule unbatched, so pass batched values positionally"
            )
        pairs = [unwrap(trace, x) for x in leaves]
        in_batched = list(treedef.unflatten([b for _, b in pairs]))
        values = treedef.unflatten([v for v, _ in pairs])
        result = self.vmap_rule(trace.axis_size, in_batched, *values, **kwargs)
        if not (isinstance(result, tuple) and len(result) == 2):
            raise OutputError(
                f"custom_vmap: the rule of `{name}` must return a pair `(out, out_batched)`, "
                f"got {type(result).__name__}"
            )
        return _wrap(trace, *result, name)


def _wrap(trace: BatchTrace, out: Any, out_batched: Any, name: str) -> Any:
    try:
        flags = optree.tree_broadcast_prefix(out_batched, out)
    except ValueError as e:
        raise OutputError(
            f"custom_vmap: the rule of `{name}` returned `out_batched`={out_batched!r}, which "
            f"does not fit the structure of its output: {e}"
        ) from None

    def wrap(x: Any, batched: bool) -> Any:
        if not batched:
            return x
        if np.ndim(x) == 0 or np.shape(x)[0] != trace.axis_size:
            raise OutputError(
                f"custom_vmap: the rule of `{name}` marked an output of shape "
                f"{np.shape(x)} as batched, but batched outputs need the batch "
                f"({trace.axis_size} examples) on axis 0"
            )
        return trace.wrap(x)

    return optree.tree_map(wrap, out, flags)
