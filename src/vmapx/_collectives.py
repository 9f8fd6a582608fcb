"""Collectives over named vmap axes: `psum`, `pmean`, `pmax`, `pmin`, `all_gather`,
`axis_index`.

`vmap(f, axis_name="batch")` names its batch axis; inside `f`, `psum(x, "batch")` sums
`x` over every example of that vmap. The result is the same for every example, so it is
returned unbatched at that level (no copy per example). A name refers to the innermost
enclosing vmap of that name; a tuple of names reduces over all of them.

Each collective is a primitive carrying the vmap traces it reduces over. The batch rule
of a trace reduces over its own batch axis and passes the other traces on to the level
below; a trace whose batch `x` does not depend on reduces `x` as a value repeated over
its batch (so `psum` of an unbatched value is `axis_size` times it). The rules are
NumPy calls on the values one level down, so `grad(vmap(f))` differentiates them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from . import _pytree as optree  # optree in vmapx.config.pytree_namespace
from ._batching import BatchTrace, unwrap
from ._core import _state, bind
from ._registry import Primitive, register
from .control_flow import branch_axis_index, suspended_names
from .errors import AxisNameError, ControlFlowError

__all__ = ["all_gather", "axis_index", "pmax", "pmean", "pmin", "psum"]


def _lookup(name: Any, what: str) -> BatchTrace:
    """The innermost enclosing vmap named `name`."""
    for t in reversed(_state.stack):
        if name in suspended_names(t):
            raise ControlFlowError(
                f"{what}: axis {name!r} is used inside a `cond`/`switch`/`while_loop` branch "
                "that only some of its examples take; a collective needs every example. "
                "Compute it before the branch and pass the result in as an operand."
            )
        if type(t) is BatchTrace and t.axis_name is not None and t.axis_name == name:
            return t
    names = [t.axis_name for t in _state.stack if type(t) is BatchTrace and not suspended_names(t)]
    names = [n for n in names if n is not None]
    raise AxisNameError(
        f"{what}: no enclosing vmap has axis_name={name!r} (names in scope: {names}). Name "
        f"the axis with `vmap(f, axis_name={name!r})`. A vmap that runs its function once "
        "per example (after a construct that cannot stay batched) cannot compute "
        "collectives either: keep the function batched (`fallback='error'` shows why not)."
    )


def _traces(axis_name: Any, what: str) -> tuple[BatchTrace, ...]:
    names = axis_name if isinstance(axis_name, tuple) else (axis_name,)
    traces: list[BatchTrace] = []
    for name in names:
        t = _lookup(name, what)
        if not any(t is u for u in traces):
            traces.append(t)
    return tuple(traces)


def _collective(name: str, reduce: Callable[[Any], Any], gathers: bool = False) -> Primitive:
    """A collective primitive; `reduce(v)` reduces a batch-front value over axis 0
    (`gathers`: keeps it, as a new leading axis of each example's value)."""

    def impl(x: Any, axes: tuple[Any, ...]) -> Any:  # `x` is repeated over every remaining batch
        for t in axes:
            x = reduce(np.broadcast_to(x, (t.axis_size, *np.shape(x))))
        return x

    prim = Primitive(f"vmapx.{name}", impl)

    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        v, batched = unwrap(trace, args[0])
        axes = kwargs["axes"]
        rest = tuple(t for t in axes if t is not trace)
        if rest:
            v = bind(prim, (v,), {"axes": rest})
            if gathers and batched:  # the outer gathers came in front of our batch axis
                v = np.moveaxis(v, len(rest), 0)
        if len(rest) < len(axes):
            return reduce(v) if batched else impl(v, (trace,))
        return trace.wrap(v) if batched else v

    register(prim, "batch", rule)
    return prim


PSUM = _collective("psum", lambda v: np.sum(v, axis=0))
PMEAN = _collective("pmean", lambda v: np.mean(v, axis=0))
PMAX = _collective("pmax", lambda v: np.max(v, axis=0))
PMIN = _collective("pmin", lambda v: np.min(v, axis=0))
ALL_GATHER = _collective("all_gather", lambda v: v, gathers=True)


def _psum_scatter_impl(x: Any, axes: tuple[Any, ...]) -> Any:
    (t,) = axes  # `x` is repeated over the batch: each example gets B times its row
    return x * t.axis_size


# the transpose of `all_gather`: example `i` gets the sum over examples of their row `i`
PSUM_SCATTER = Primitive("vmapx.psum_scatter", _psum_scatter_impl)


def _psum_scatter_rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
    (t,) = kwargs["axes"]
    v, _ = unwrap(trace, args[0])
    if t is not trace:
        return trace.wrap(bind(PSUM_SCATTER, (v,), kwargs))
    return trace.wrap(np.sum(v, axis=0))


register(PSUM_SCATTER, "batch", _psum_scatter_rule)


def _apply(prim: Primitive, x: Any, axis_name: Any, what: str) -> Any:
    axes = _traces(axis_name, what)
    return optree.tree_map(lambda leaf: bind(prim, (leaf,), {"axes": axes}), x)


def psum(x: Any, axis_name: Any) -> Any:
    """The sum of `x` over every example of the vmap named `axis_name`.

    **Arguments:**

    - `x`: an array (or a pytree of arrays).
    - `axis_name`: the name given to `vmap(..., axis_name=...)`, or a tuple of names.

    **Returns:** the sum, the same for every example.

    **Example:**

    ```python
    >>> import numpy as np, vmapx
    >>> share = lambda x: x / vmapx.psum(x, "batch")
    >>> vmapx.vmap(share, axis_name="batch")(np.array([1.0, 3.0, 4.0]))
    array([0.125, 0.375, 0.5  ])

    ```
    """
    return _apply(PSUM, x, axis_name, "psum")


def pmean(x: Any, axis_name: Any) -> Any:
    """The mean of `x` over every example of the vmap named `axis_name` (see `psum`).

    **Example:** batch normalization inside a vmapped function.

    ```python
    >>> import numpy as np, vmapx
    >>> def normalize(x):
    ...     mean = vmapx.pmean(x, "batch")
    ...     return (x - mean) / np.sqrt(vmapx.pmean((x - mean) ** 2, "batch"))
    >>> vmapx.vmap(normalize, axis_name="batch")(np.array([[1.0], [3.0]]))
    array([[-1.],
           [ 1.]])

    ```
    """
    return _apply(PMEAN, x, axis_name, "pmean")


def pmax(x: Any, axis_name: Any) -> Any:
    """The elementwise maximum of `x` over the examples of the vmap `axis_name`.

    **Example:**

    ```python
    >>> import numpy as np, vmapx
    >>> vmapx.vmap(lambda x: x - vmapx.pmax(x, "i"), axis_name="i")(np.array([1, 5, 2]))
    array([-4,  0, -3])

    ```
    """
    return _apply(PMAX, x, axis_name, "pmax")


def pmin(x: Any, axis_name: Any) -> Any:
    """The elementwise minimum of `x` over the examples of the vmap `axis_name`.

    **Example:**

    ```python
    >>> import numpy as np, vmapx
    >>> vmapx.vmap(lambda x: x - vmapx.pmin(x, "i"), axis_name="i")(np.array([1, 5, 2]))
    array([0, 4, 1])

    ```
    """
    return _apply(PMIN, x, axis_name, "pmin")


def all_gather(x: Any, axis_name: Any) -> Any:
    """Every example's `x`, stacked along a new leading axis (the same for every example).

    **Arguments:**

    - `x`: an array (or a pytree of arrays).
    - `axis_name`: the name of one vmap.

    **Example:**

    ```python
    >>> import numpy as np, vmapx
    >>> rank = lambda x: np.sum(vmapx.all_gather(x, "i") < x)
    >>> vmapx.vmap(rank, axis_name="i")(np.array([0.3, 0.1, 0.2]))
    array([2, 0, 1])

    ```
    """
    if isinstance(axis_name, tuple) and len(axis_name) != 1:
        raise ValueError("all_gather: give one axis name (gather over several axes in turn)")
    return _apply(ALL_GATHER, x, axis_name, "all_gather")


def axis_index(axis_name: Any) -> Any:
    """The number of the current example (0, 1, ...) along the vmap named `axis_name`;
    for a tuple of names, the row-major number over those axes (the first varies slowest).

    **Example:**

    ```python
    >>> import numpy as np, vmapx
    >>> vmapx.vmap(lambda x: x * vmapx.axis_index("i"), axis_name="i")(np.ones(3))
    array([0., 1., 2.])

    ```
    """
    in_branch = branch_axis_index(axis_name if isinstance(axis_name, tuple) else (axis_name,))
    if in_branch is not None:
        return in_branch
    index: Any = 0
    for t in _traces(axis_name, "axis_index"):
        index = index * t.axis_size + t.wrap(np.arange(t.axis_size, like=t.like))
    return index
