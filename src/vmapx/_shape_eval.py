"""`vmapx.eval_shape`: the shapes and dtypes of a function's outputs, without computing
them (as `jax.eval_shape`).

vmapx runs NumPy code eagerly, so there is no program to read shapes from; instead the
function runs under `vmap` on an **empty batch**: every array argument becomes an array
of zero examples of its shape and dtype (no memory, no arithmetic), and the outputs'
shapes, less the batch axis, are the answer. NumPy's own shape and dtype rules decide
them, so they are exactly what a call would give. Python code that reads a value
(`if x.sum() > 0`, `float(x)`) raises a `ConcretizationError`: there are no values; so
do shapes that depend on the data (`x[x > 0]`).
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _config
from . import _pytree as optree  # optree in vmapx.config.pytree_namespace
from ._api import vmap
from ._core import Tracer
from .errors import AxisSizeError, ConcretizationError, FallbackError

__all__ = ["ShapeDtypeStruct", "eval_shape"]


@dataclass(frozen=True)
class ShapeDtypeStruct:
    """An array's shape and dtype, without its values (as `jax.ShapeDtypeStruct`).

    `eval_shape` returns these, and takes them as arguments in place of arrays.

    **Example:**

    ```python
    >>> import numpy as np, vmapx
    >>> s = vmapx.ShapeDtypeStruct((3, 2), np.float32)
    >>> s.shape, s.dtype, s.ndim, s.size
    ((3, 2), dtype('float32'), 2, 6)

    ```
    """

    shape: tuple[int, ...]
    dtype: np.dtype

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(int(n) for n in self.shape))
        object.__setattr__(self, "dtype", np.dtype(self.dtype))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))


def _is_array_like(x: Any) -> bool:
    return isinstance(x, np.ndarray | np.generic | ShapeDtypeStruct | Tracer)


def _empty_batch(x: Any) -> Any:
    """No examples of `x`'s shape and dtype."""
    return np.empty((0, *tuple(x.shape)), dtype=x.dtype)


def eval_shape(f: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """The shapes and dtypes of `f(*args, **kwargs)`, computed without computing it.

    **Arguments:**

    - `f`: a function written with NumPy (any transform of one: `grad(f)`, `vmap(f)`).
    - `*args`: its positional arguments, each an array, a `ShapeDtypeStruct` (anything
      with `.shape` and `.dtype` is read as one), a Python number or any pytree of them.
      Numbers and other non-array leaves are passed as they are.
    - `**kwargs`: keyword arguments, passed as they are (give arrays positionally).

    **Returns:** the output's pytree with a `ShapeDtypeStruct` in place of every array.

    `f` runs under `vmap` on a batch of zero examples (see the module's notes): no
    memory is used and no arithmetic done for the arrays. Python code in `f` that reads
    a value (`if x.sum() > 0`, `float(x)`) and shapes that depend on values raise
    `vmapx.errors.ConcretizationError`.

    **Example:**

    ```python
    >>> import numpy as np, vmapx
    >>> def layer(w, x):
    ...     return np.tanh(x @ w), (x @ w).sum()
    >>> w = vmapx.ShapeDtypeStruct((512, 256), np.float32)
    >>> x = vmapx.ShapeDtypeStruct((1024, 512), np.float32)
    >>> vmapx.eval_shape(layer, w, x)
    (ShapeDtypeStruct(shape=(1024, 256), dtype=dtype('float32')), \
ShapeDtypeStruct(shape=(), dtype=dtype('float32')))

    ```
    """
    if not callable(f):
        raise TypeError(f"eval_shape: `f` must be callable, got {type(f).__name__}")
    leaves, treedef = optree.tree_flatten(args, is_leaf=_is_shaped)
    # (a traced number of an outer transform is mapped: `Tracer.__class__` says `float`)
    mapped = [
        _is_shaped(x) and (isinstance(x, Tracer) or not isinstance(x, numbers.Number))
        for x in leaves
    ]
    stand_ins = [_empty_batch(x) if m else x for x, m in zip(leaves, mapped, strict=True)]
    in_axes: Any = treedef.unflatten([0 if m else None for m in mapped])
    if not any(mapped):  # nothing to map: an empty batch of one dummy argument
        stand_ins, in_axes = [*stand_ins, np.empty(0)], (*in_axes, 0)
        g = _drop_last(f)
        args_tree = optree.tree_structure((*args, 0), is_leaf=_is_shaped)
    else:
        g, args_tree = f, treedef
    batched = vmap(g, in_axes=tuple(in_axes), chunk_size=None, fallback="error", workers=1)
    token = _config.shapes_only.set(True)
    try:
        out = batched(*args_tree.unflatten(stand_ins), **kwargs)
    except (FallbackError, AxisSizeError) as e:
        raise ConcretizationError(
            f"eval_shape: the output's shape depends on values, which eval_shape does not "
            f"have ({e}). Call the function to learn its shapes."
        ) from None
    finally:
        _config.shapes_only.reset(token)
    return optree.tree_map(lambda o: ShapeDtypeStruct(np.shape(o)[1:], o.dtype), out)


def _is_shaped(x: Any) -> bool:
    """A leaf with a shape and a dtype (an array, a NumPy scalar, a `ShapeDtypeStruct` or
    a look-alike such as `jax.ShapeDtypeStruct`)."""
    return _is_array_like(x) or (hasattr(x, "shape") and hasattr(x, "dtype"))


def _drop_last(f: Callable[..., Any]) -> Callable[..., Any]:
    def g(*args: Any, **kwargs: Any) -> Any:
        return f(*args[:-1], **kwargs)

    return g
