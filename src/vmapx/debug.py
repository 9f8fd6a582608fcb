"""Seeing values inside transformed functions: `vmapx.debug.print`, and what `print(x)`
shows for a traced value `x`.

A traced value holds real arrays: under `vmap` the whole batch (axis 0 of the value one
level down), under `grad`/`jvp` its primal, under `jit` the array being recorded.
`repr(x)` and `str(x)` show those values with the batch axes labelled, without reading
them as Python would (`bool(x)`, `float(x)`): printing never makes `vmap` fall back to
its loop, nor a `jit` recording unreplayable.
"""

from __future__ import annotations

import builtins
import itertools
from typing import Any

import numpy as np

from . import _pytree as optree  # optree in vmapx.config.pytree_namespace
from ._autodiff import ADTracer
from ._batching import BatchTracer
from ._core import Tracer
from ._jit import RecordTracer

__all__ = ["print"]


def _bottom(x: Any) -> tuple[Any, list[Any], bool]:
    """`(value, batch, differentiated)`: the array under the tracer `x` (a `RecordTracer`
    under `jit`), the `BatchTrace`s whose batch axes lead it (outermost first), and
    whether an autodiff tracer was passed on the way (the value is a primal)."""
    if type(x) is BatchTracer:
        value, batch, ad = _bottom(x.val)
        return value, [*batch, x._trace], ad
    if isinstance(x, ADTracer):
        value, batch, _ = _bottom(x.primal)
        return value, batch, True
    return x, [], False


def _concrete(value: Any) -> Any:
    return value.value if isinstance(value, RecordTracer) else value


def _label(traces: list[Any]) -> str:
    axes = ", ".join(str(i) for i in range(len(traces)))
    what = ", ".join(
        f"vmap of {t.axis_size}" + (f" {t.axis_name!r}" if t.axis_name is not None else "")
        for t in traces
    )  # fmt: skip
    return f"batch axis {axes}: {what}" if len(traces) == 1 else f"batch axes {axes}: {what}"


def tracer_repr(x: Tracer) -> str:
    """What `repr(x)` and `str(x)` show for a traced value: its kind, per-example dtype
    and shape, and its values (the batch, labelled, where it is batched).

    **Example:**

    ```python
    >>> import numpy as np, vmapx
    >>> _ = vmapx.vmap(lambda x: print(x) or x)(np.arange(4.0).reshape(2, 2))
    BatchTracer(float64[2], batch axis 0: vmap of 2,
    [[0. 1.]
     [2. 3.]])

    ```
    """
    value, batch, ad = _bottom(x)
    shape = ",".join(str(n) for n in x.shape)
    head = f"{type(x).__name__}({x.dtype}[{shape}]"
    if ad:
        head += ", primal"
    if batch:
        head += f", {_label(batch)}"
    return f"{head},\n{np.array2string(np.asarray(_concrete(value)))})"


def print(fmt: str, *args: Any, **kwargs: Any) -> None:  # noqa: A001 (as `jax.debug.print`)
    """Print `fmt.format(*args, **kwargs)` once per example, from inside any transform.

    Under `vmap` each example's line shows that example's values (nested vmaps: every
    combination, outer index first); under `grad`, `jvp`, ... the values are the
    primals; under `jit` the line is printed on every call, replays included (a
    `print()` inside `f` runs only when `f` runs). Printing changes nothing in the
    computation. Outside any transform it is `print(fmt.format(*args, **kwargs))`.

    **Arguments:**

    - `fmt`: a `str.format` string (`"x={}"`, `"loss={loss:.3f}"`).
    - `args`, `kwargs`: the values (pytrees of arrays, tracers, anything).

    **Returns:** None.

    **Example:**

    ```python
    >>> import numpy as np, vmapx
    >>> def f(x):
    ...     vmapx.debug.print("x = {}, sum = {}", x, x.sum())
    ...     return x * 2
    >>> _ = vmapx.vmap(f)(np.arange(4.0).reshape(2, 2))
    x = [0. 1.], sum = 1.0
    x = [2. 3.], sum = 5.0

    ```
    """
    leaves, treedef = optree.tree_flatten((args, kwargs), none_is_leaf=True)
    parts = [_bottom(x) if isinstance(x, Tracer) else (x, [], False) for x in leaves]
    traces: list[Any] = []
    for _, batch, _ in parts:
        traces += [t for t in batch if t not in traces]
    traces.sort(key=lambda t: t.level)
    printer = _Printer(fmt, treedef, [batch for _, batch, _ in parts], traces)
    values = [value for value, _, _ in parts]
    recorded = [v for v in values if isinstance(v, RecordTracer)]
    if recorded:  # under `jit`: every replay prints too
        recorded[0]._trace.record_effect(printer, values)
    printer(*[_concrete(v) for v in values])


class _Printer:
    """Prints one line per example from the arrays under the arguments' tracers."""

    __slots__ = ("fmt", "treedef", "batches", "sizes", "traces", "__name__")

    def __init__(self, fmt: str, treedef: Any, batches: list[Any], traces: list[Any]) -> None:
        self.fmt = fmt
        self.treedef = treedef
        self.batches = batches  # per leaf: the traces whose batch axes lead its value
        self.traces = traces  # every batch trace, outermost first
        self.sizes = [t.axis_size for t in traces]
        self.__name__ = "debug_print"

    def __repr__(self) -> str:
        return f"vmapx.debug.print({self.fmt!r})"

    def __call__(self, *values: Any) -> None:
        for index in itertools.product(*(range(n) for n in self.sizes)):
            at = dict(zip(self.traces, index, strict=True))
            example = [
                v[tuple(at[t] for t in batch)] if batch else v
                for v, batch in zip(values, self.batches, strict=True)
            ]  # fmt: skip
            args, kwargs = optree.tree_unflatten(self.treedef, example)
            builtins.print(self.fmt.format(*args, **kwargs))


Tracer.__repr__ = Tracer.__str__ = tracer_repr  # type: ignore[method-assign,assignment]
