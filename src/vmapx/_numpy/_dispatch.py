"""The primitive table: every NumPy callable vmapx knows, and the registrars.

`FUNCTIONS` maps a NumPy function (as `__array_function__` receives it) to its
`Primitive`; ufunc methods get theirs from `ufunc_primitive`. A function that is
not in the table still works: it gets a primitive with no rules, so `vmap` runs it
per example (the loop fallback) and the derivative transforms refuse it clearly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from .._batching import BatchRule, batch_rules
from .._core import Primitive
from ..errors import UnsupportedError

FUNCTIONS: dict[Callable, Primitive] = {}
_UFUNC_PRIMS: dict[tuple[np.ufunc, str], Primitive] = {}
# ufunc method -> factory(ufunc) giving its batch rule; filled by ufuncs.py
UFUNC_BATCH_RULES: dict[str, Callable[[np.ufunc], BatchRule]] = {}
# ufunc method -> hook(prim, ufunc) run when a ufunc primitive is created (autodiff)
UFUNC_PRIM_HOOKS: list[Callable[[Primitive, np.ufunc, str], None]] = []
REFUSED: dict[Callable, str] = {}


def _name(func: Callable) -> str:
    module = getattr(func, "__module__", None) or "numpy"
    module = "np" if module == "numpy" else module.replace("numpy.", "np.")
    return f"{module}.{getattr(func, '__name__', repr(func))}"


def primitive(func: Callable, *, may_view: bool = False) -> Primitive:
    """The primitive of a NumPy function, created on first use."""
    prim = FUNCTIONS.get(func)
    if prim is None:
        prim = FUNCTIONS[func] = Primitive(_name(func), func, may_view=may_view)
    elif may_view:
        prim.may_view = True
    return prim


def ufunc_primitive(ufunc: np.ufunc, method: str) -> Primitive:
    """The primitive of `ufunc.method` (`__call__`, `reduce`, `accumulate`, ...)."""
    key = (ufunc, method)
    prim = _UFUNC_PRIMS.get(key)
    if prim is None:
        impl = ufunc if method == "__call__" else getattr(ufunc, method)
        name = f"np.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
        prim = _UFUNC_PRIMS[key] = Primitive(name, impl)
        factory = UFUNC_BATCH_RULES.get(method)
        if factory is not None:
            batch_rules[prim] = factory(ufunc)
        for hook in UFUNC_PRIM_HOOKS:
            hook(prim, ufunc, method)
    return prim


def def_ufunc_rules(factories: dict[str, Callable[[np.ufunc], BatchRule]]) -> None:
    """Register batch-rule factories per ufunc method, for existing and future ufuncs."""
    UFUNC_BATCH_RULES.update(factories)
    for (ufunc, method), prim in _UFUNC_PRIMS.items():
        if method in factories:
            batch_rules[prim] = factories[method](ufunc)


def add_ufunc_hook(hook: Callable[[Primitive, np.ufunc, str], None]) -> None:
    """Run `hook(prim, ufunc, method)` for every ufunc primitive, existing and future."""
    UFUNC_PRIM_HOOKS.append(hook)
    for (ufunc, method), prim in list(_UFUNC_PRIMS.items()):
        hook(prim, ufunc, method)


def defbatch(funcs: Callable | Iterable[Callable], rule: Callable, *, may_view: bool = False):
    """Register `rule(func)` as the batch rule of each NumPy function in `funcs`.

    `rule` is a factory: it receives the NumPy function and returns the
    `rule(trace, args, kwargs)` callable, so one family helper serves many functions.
    """
    for func in [funcs] if callable(funcs) else funcs:
        batch_rules[primitive(func, may_view=may_view)] = rule(func)


def refuse(func: Callable, why: str) -> None:
    """Mark a NumPy function as impossible on traced values, with the reason."""
    REFUSED[func] = why

    def rule(trace: Any, args: tuple, kwargs: dict) -> Any:
        raise UnsupportedError(f"vmap: `{_name(func)}` cannot be used on batched values: {why}")

    batch_rules[primitive(func)] = rule


def has_batch_rule(func: Callable) -> bool:
    prim = FUNCTIONS.get(func)
    return prim is not None and prim in batch_rules and func not in REFUSED


def get_arg(args: tuple, kwargs: dict, index: int, name: str, default: Any = None) -> Any:
    """A NumPy call's argument given positionally (at `index`) or by keyword."""
    if len(args) > index:
        return args[index]
    return kwargs.get(name, default)


def set_arg(args: tuple, kwargs: dict, index: int, name: str, value: Any) -> tuple[tuple, dict]:
    """The call's `(args, kwargs)` with one argument replaced (positional or keyword)."""
    if len(args) > index:
        return (*args[:index], value, *args[index + 1 :]), kwargs
    return args, {**kwargs, name: value}
