"""Global settings. Read once from the environment, changeable at run time."""

from __future__ import annotations

import contextvars
import os
from dataclasses import dataclass

from .errors import ArgumentError

FALLBACK_MODES = ("warn", "silent", "error")
RANDOMNESS_MODES = ("error", "different", "same")


def check_workers(workers: object, where: str) -> None:
    """Raise a clear error for a `workers` setting that is not None or a positive int."""
    if workers is not None and (
        not isinstance(workers, int) or isinstance(workers, bool) or workers < 1
    ):
        raise ArgumentError(f"{where}: `workers` must be a positive int or None, got {workers!r}")


def _workers_from_environment() -> int | None:
    """`VMAPX_WORKERS` as an int (unset or empty: None)."""
    text = os.environ.get("VMAPX_WORKERS", "")
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        raise ValueError(
            f"vmapx: the environment variable VMAPX_WORKERS must be a positive int, got {text!r}"
        ) from None


@dataclass
class Config:
    """vmapx's global settings.

    **Attributes:**

    - `fallback`: what a `vmap` does when it must run something per example:
      `"warn"` (loop and emit a `vmapx.PerformanceWarning`), `"silent"` (loop quietly)
      or `"error"` (raise a `vmapx.errors` error). A `vmap(..., fallback=...)` argument
      overrides it for one call.
    - `checks`: validate batch-axis invariants on every batched operation (slow; for
      debugging). Set by the environment variable `VMAPX_CHECKS=1`.
    - `elide`: let a binary operator on a batched temporary (`(a - b) ** 2`) compute
      into the temporary's memory, as NumPy does for plain arrays (see
      `vmapx._elision`). On by default; `VMAPX_ELIDE=0` turns it off.
    - `workers`: threads that run the chunks of a chunked `vmap` call at once (see
      `vmapx._parallel`); None (the default): the cores this process may use; 1: one
      chunk after the other. Set by `VMAPX_WORKERS`; `vmap(..., workers=)` overrides it.
    - `pytree_namespace`: the optree namespace whose registered classes the transforms
      treat as containers, besides optree's global ones (a library that registers its
      classes with `optree.register_pytree_node(..., namespace="mylib")`: set it to
      `"mylib"`). `""` (the default): the global registry only. Set by
      `VMAPX_PYTREE_NAMESPACE`.
    """

    fallback: str = os.environ.get("VMAPX_FALLBACK", "warn")
    checks: bool = os.environ.get("VMAPX_CHECKS", "") not in ("", "0")
    elide: bool = os.environ.get("VMAPX_ELIDE", "1") not in ("", "0")
    workers: int | None = _workers_from_environment()
    pytree_namespace: str = os.environ.get("VMAPX_PYTREE_NAMESPACE", "")

    def __setattr__(self, name: str, value: object) -> None:
        if name == "fallback" and value not in FALLBACK_MODES:
            raise ValueError(
                f"vmapx.config.fallback must be one of {FALLBACK_MODES}, got {value!r}"
            )
        if name == "workers":
            check_workers(value, "vmapx.config")
        if name == "pytree_namespace" and not isinstance(value, str):
            raise ArgumentError(
                f'vmapx.config.pytree_namespace must be a str (an optree namespace, "" for '
                f"the global one), got {value!r}"
            )
        super().__setattr__(name, value)


config = Config()

# True while `vmapx.eval_shape` runs a function on an empty batch: there are no values,
# so Python code that reads one (`if x.sum() > 0`) must raise instead of reading zeros
shapes_only: contextvars.ContextVar[bool] = contextvars.ContextVar("shapes_only", default=False)
