"""The notice that `vmap` does not map keyword arguments (`vmap(f)(X, y=Y)` passes the
whole `Y` to every example, as `torch.func.vmap` does; `jax.vmap` would map it)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from . import _pytree as optree  # optree in vmapx.config.pytree_namespace
from .errors import KeywordArgumentWarning


def looks_mapped(kwargs: dict[Any, Any], size: int) -> list[str]:
    """The names of keyword arguments with an array leaf whose leading axis has the
    batch `size` (for a batch of 2 or more: a batch of 1 matches too much)."""
    if size < 2:
        return []
    return [
        name for name, value in kwargs.items()
        if any(_leading(leaf) == size for leaf in optree.tree_leaves(value))
    ]  # fmt: skip


def _leading(leaf: Any) -> int | None:
    shape = getattr(leaf, "shape", None)
    return shape[0] if type(shape) is tuple and shape else None


def notice(f: Callable[..., Any], kwargs: dict[Any, Any], size: int, stacklevel: int) -> bool:
    """Warn (`KeywordArgumentWarning`) where a keyword argument looks like a batch;
    whether it warned."""
    names = looks_mapped(kwargs, size)
    if not names:
        return False
    listed = ", ".join(f"`{n}`" for n in names)
    fname = getattr(f, "__name__", type(f).__name__)
    warnings.warn(
        f"vmap({fname}): keyword argument {listed} has a leading axis of the batch size "
        f"({size}) but is passed whole to every example: vmap maps positional arguments "
        "only (as torch.func.vmap; jax.vmap maps keyword arguments). To map it, pass it "
        "positionally (its `in_axes` entry 0); if it is meant whole, pass it "
        "positionally with `in_axes` None, or filter vmapx.errors.KeywordArgumentWarning. "
        "(Said once per vmapped function.)",
        KeywordArgumentWarning,
        stacklevel=stacklevel,
    )
    return True
