"""`vmapx.checkpoint`: rematerialisation (as `jax.checkpoint`, `torch.utils.checkpoint`).

Reverse mode keeps every intermediate value a function computes until the backward pass
needs it. A checkpointed function is one step to reverse mode instead: its forward pass
runs without recording, and keeps only its inputs; the backward pass runs it again,
recording, and pulls the cotangent back through that fresh record. Memory drops to the
inputs and outputs of the checkpointed parts; the price is one more forward pass.

It is a `vmapx.extend` primitive with a VJP rule (so `vmap`, `jit` and nested `grad`
compose with it as with any rule) whose batch rule is the function itself (its NumPy
calls batch). Forward mode needs no intermediates kept: its JVP rule is the function's
own `jvp`.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar, cast

from . import _pytree as optree  # optree in vmapx.config.pytree_namespace
from ._ad_api import jvp, vjp
from ._autodiff import is_float
from .extend import primitive, register_jvp, register_vjp

__all__ = ["checkpoint"]

P = ParamSpec("P")
R = TypeVar("R")


def checkpoint(f: Callable[P, R]) -> Callable[P, R]:
    """`f`, recomputed in the backward pass instead of storing its intermediates.

    Under `grad`, `vjp`, `jacrev` (in any composition with `vmap` and `jit`), the values
    `f` computes inside are not kept for the backward pass: `f` runs again when its
    cotangents are needed. Use it on the blocks of a deep computation (layers, steps of
    a simulation) to trade one more forward pass for the memory of their intermediates.
    The values and derivatives are those of `f`.

    **Arguments:**

    - `f`: a function written with NumPy. Its positional arguments (arrays or pytrees
      of arrays) are differentiated where they are float; keyword arguments are
      constants (hashable: numbers, strings). It returns an array or a pytree of arrays.

    **Returns:** a function with `f`'s parameters and results.

    **Example:**

    ```python
    >>> import numpy as np, vmapx
    >>> @vmapx.checkpoint
    ... def block(x, w):
    ...     return np.tanh(np.tanh(x * w) * w)
    >>> x = np.array([0.5, -1.0])
    >>> g = vmapx.grad(lambda x: np.sum(block(block(x, 2.0), 3.0)))(x)
    >>> plain = vmapx.grad(lambda x: np.sum(np.tanh(np.tanh(np.tanh(np.tanh(x * 2.0) * 2.0)
    ...                                  * 3.0) * 3.0)))(x)
    >>> np.allclose(g, plain)
    True

    ```
    """
    if not callable(f):
        raise TypeError(f"checkpoint: `f` must be callable, got {type(f).__name__}")
    structure = threading.local()  # the output's pytree structure of this thread's call
    steps: dict[
        tuple[Any, ...], Callable[..., Any]
    ] = {}  # one primitive per set of keyword arguments
    lock = threading.Lock()

    def step_for(kwargs: dict[Any, Any]) -> Callable[..., Any]:
        key = tuple(sorted(kwargs.items()))
        try:
            hash(key)
        except TypeError:
            raise TypeError(
                f"checkpoint({_name(f)}): keyword arguments are constants and must be "
                "hashable (numbers, strings, tuples); pass arrays positionally"
            ) from None
        with lock:
            if key not in steps:
                steps[key] = _remat_step(f, kwargs, structure)
            return steps[key]

    @functools.wraps(f)
    def wrapped(*args: P.args, **kwargs: P.kwargs) -> R:
        out = step_for(kwargs)(*args)
        leaves = list(out) if isinstance(out, tuple | list) else [out]
        return optree.tree_unflatten(structure.treedef, leaves)  # type: ignore[no-any-return]

    return wrapped


def _name(f: Callable[..., Any]) -> str:
    return getattr(f, "__name__", type(f).__name__)


def _remat_step(
    f: Callable[..., Any], kwargs: dict[Any, Any], structure: threading.local
) -> Callable[..., Any]:
    """`f` with `kwargs` bound, as one step to the transforms: a primitive of flat
    outputs whose reverse-mode rule keeps only the inputs and runs `f` again."""

    def flat(*args: Any) -> tuple[Any, ...]:
        leaves, structure.treedef = optree.tree_flatten(f(*args, **kwargs))
        return tuple(leaves)

    prim = primitive(flat, name=f"checkpoint({_name(f)})")

    def fwd(*args: Any) -> tuple[Any, ...]:
        return None, args  # (the output is the primitive's own; the inputs are kept)

    def bwd(args: tuple[Any, ...], g: Any) -> tuple[Any, ...]:
        return _pull_again(flat, args, g)

    def tangents(primals: tuple[Any, ...], tans: tuple[Any, ...]) -> tuple[Any, ...]:
        return _push(flat, primals, tans)

    register_vjp(prim, fwd, bwd)
    register_jvp(prim, tangents)
    return cast("Callable[..., Any]", prim)


def _float_positions(args: tuple[Any, ...]) -> list[int]:
    """The positional arguments that are differentiated: those whose leaves are all float
    or complex (the others are constants, with no cotangent)."""
    return [
        i for i, a in enumerate(args)
        if optree.tree_leaves(a) and all(is_float(x) for x in optree.tree_leaves(a))
    ]  # fmt: skip


def _with(args: tuple[Any, ...], positions: list[int], values: tuple[Any, ...]) -> tuple[Any, ...]:
    new = list(args)
    for i, v in zip(positions, values, strict=True):
        new[i] = v
    return tuple(new)


def _pull_again(flat: Callable[..., Any], args: tuple[Any, ...], g: Any) -> tuple[Any, ...]:
    """The cotangents of the arguments: `flat` runs again, recorded, and `g` is pulled
    back through that record."""
    where = _float_positions(args)

    def of_diff(*diff: Any) -> tuple[Any, ...]:
        return cast("tuple[Any, ...]", flat(*_with(args, where, diff)))

    _, pull = vjp(of_diff, *(args[i] for i in where))
    cts = pull(tuple(g) if isinstance(g, tuple | list) else (g,))
    out: list[Any] = [None] * len(args)
    for i, ct in zip(where, cts, strict=True):
        out[i] = ct
    return tuple(out)


def _push(
    flat: Callable[..., Any], primals: tuple[Any, ...], tans: tuple[Any, ...]
) -> tuple[Any, ...]:
    """`(out, tangent_out)` by forward mode through `flat` (no intermediates kept)."""
    where = [i for i in _float_positions(primals) if tans[i] is not None]

    def of_diff(*diff: Any) -> tuple[Any, ...]:
        return cast("tuple[Any, ...]", flat(*_with(primals, where, diff)))

    out, tan = jvp(of_diff, tuple(primals[i] for i in where), tuple(tans[i] for i in where))
    return out, tan
