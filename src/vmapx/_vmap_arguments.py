"""`vmap`'s argument checks: one function, run when `vmap(f, ...)` is called, that raises
a `vmapx.errors` class naming the argument, what it got and what it takes."""

from __future__ import annotations

import numbers
from typing import Any

from . import _config
from . import _pytree as optree  # optree in vmapx.config.pytree_namespace
from .errors import ArgumentError, InAxesError


def check_vmap_arguments(
    f: Any,
    in_axes: Any,
    out_axes: Any,
    *,
    axis_size: Any,
    axis_name: Any,
    randomness: Any,
    chunk_size: Any,
    fallback: Any,
    workers: Any,
) -> None:
    """Raise `ArgumentError` (or `InAxesError` for the axes) for the first argument of
    `vmap` that is not one it takes."""
    if not callable(f):
        raise ArgumentError(f"vmap: `f` must be callable, got {type(f).__name__}")
    check_axes_spec(in_axes, "in_axes")
    check_axes_spec(out_axes, "out_axes")
    if chunk_size is not None and chunk_size != "auto" and (
        not isinstance(chunk_size, numbers.Integral) or isinstance(chunk_size, bool)
        or chunk_size < 1
    ):  # fmt: skip
        raise ArgumentError(
            f"vmap: `chunk_size` must be a positive int, 'auto' or None, got {chunk_size!r}"
        )
    if axis_size is not None and (not isinstance(axis_size, numbers.Integral) or axis_size < 0):
        raise ArgumentError(f"vmap: `axis_size` must be a non-negative int, got {axis_size!r}")
    if randomness not in _config.RANDOMNESS_MODES:
        raise ArgumentError(
            f"vmap: `randomness` must be one of {_config.RANDOMNESS_MODES}, got {randomness!r}"
        )
    if fallback is not None and fallback not in _config.FALLBACK_MODES:
        raise ArgumentError(
            f"vmap: `fallback` must be one of {_config.FALLBACK_MODES}, got {fallback!r}"
        )
    if chunk_size not in (None, "auto") and axis_name is not None:
        raise ArgumentError(
            "vmap: `chunk_size` cannot be combined with `axis_name`: collectives (`psum`, ...) "
            "need the whole batch at once"
        )
    _config.check_workers(workers, "vmap")


def check_axes_spec(spec: Any, what: str) -> None:
    """`in_axes`/`out_axes` must be an int, None or a pytree of those."""
    if spec is None or type(spec) is int:  # (the common case, without a tree walk)
        return
    for leaf in optree.tree_leaves(spec, none_is_leaf=True):
        if leaf is not None and (not isinstance(leaf, numbers.Integral) or isinstance(leaf, bool)):
            raise InAxesError(
                f"vmap: `{what}` must be an int, None, or a pytree of those; "
                f"got {leaf!r} of type {type(leaf).__name__} in {what}={spec!r}"
            )
