"""The registry: every primitive vmapx knows, and every rule of every primitive.

A `Primitive` is a callable the transforms see (a NumPy function, a ufunc method, an
ndarray operation, a control-flow construct, a user's function). Its `rules` record
holds one entry per kind of rule, and where each was registered:

| kind        | what it is                                                             |
|-------------|------------------------------------------------------------------------|
| `batch`     | `rule(trace, args, kwargs)`: the call on a batch (see `_batching`)    |
| `jvp`       | `rule(args, kwargs, ans, tangents)`: forward mode (see `_autodiff`)   |
| `vjp`       | `rule(argnums, ans, args, kwargs) -> pullback`: reverse mode          |
| `composite` | `impl(*args, **kwargs)`: computed with other primitives when differentiated |
| `zero`      | the operands whose derivative is zero (`ALL`: every operand)          |
| `linear`    | `True`: linear in its traced operands (no VJP by transposing the JVP) |
| `partials`  | an elementwise function's partial derivatives (read by scans)        |
| `refused`   | why the operation can never work on traced values                    |

Every rule goes through `register`, which refuses to replace a rule unless told so
(`replace=True`, with the reason beside the call), so no rule is ever lost to import
order. Rules for a whole family of ufunc methods (every `ufunc.reduce`, ...) are
*defaults* (`register_ufunc_defaults`): they apply to every ufunc primitive that has no
rule of its own of that kind, whichever is registered first.

This module imports only the core. The transforms read the records; the NumPy families
and the public extension API (`vmapx.extend`) write them, through the same `register`.
"""

from __future__ import annotations

import operator
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import CodeType, FrameType
from typing import Any, cast

import numpy as np

from .errors import RegistrationError

KINDS = ("batch", "jvp", "vjp", "composite", "zero", "linear", "partials", "refused")
ALL = "all"  # the `zero` entry of a primitive whose every operand has zero derivative


class Rules:
    """The rules of one primitive, one attribute per kind (`None`: no rule), and
    `sources`: kind -> the `file:line` that registered it."""

    __slots__ = (*KINDS, "sources", "defaults")
    batch: Callable[..., Any] | None
    jvp: Callable[..., Any] | None
    vjp: Callable[..., Any] | None
    composite: Callable[..., Any] | None
    zero: Any
    linear: Any
    partials: Any
    refused: Any

    def __init__(self) -> None:
        for kind in KINDS:
            setattr(self, kind, None)
        self.sources: dict[str, str] = {}
        self.defaults: set[str] = set()  # kinds whose rule is a family default

    def __repr__(self) -> str:
        kinds = [k for k in KINDS if getattr(self, k) is not None]
        return f"Rules({', '.join(kinds) or 'none'})"


# whether a call `(args, kwargs)` of a primitive gives a view of an input (`may_view`)
ViewTest = Callable[[tuple[Any, ...], dict[Any, Any]], bool]


class Primitive:
    """A callable seen by the transforms.

    `impl` runs the operation on plain values; `name` is what messages show;
    `may_view` marks operations whose NumPy result can be a view of an input, so that
    an in-place write through either one can be detected (True, or a predicate of the
    call's `(args, kwargs)` where only some calls give a view); `rules` is its record.
    """

    __slots__ = ("name", "impl", "may_view", "rules", "__weakref__")

    def __init__(
        self, name: str, impl: Callable[..., Any], *, may_view: bool | ViewTest = False
    ) -> None:
        self.name = name
        self.impl = impl
        self.may_view = may_view
        self.rules = Rules()

    def __repr__(self) -> str:
        return f"Primitive({self.name})"


# -- the primitive table -------------------------------------------------------------

# a function (as `__array_function__` receives it, or registered by `vmapx.extend`)
# -> its primitive; ufunc methods are keyed by `(ufunc, method)`
FUNCTIONS: dict[Callable[..., Any], Primitive] = {}
UFUNC_PRIMITIVES: dict[tuple[np.ufunc, str], Primitive] = {}
# hooks `hook(prim, ufunc, method)` that register family defaults on ufunc primitives
_UFUNC_DEFAULTS: list[tuple[Callable[[Primitive, np.ufunc, str], None], str]] = []
# `x[index]`, which has no NumPy function of its own (its rules: `vmapx._numpy.indexing`;
# here for the arrays that index by traced values, `vmapx._unmapped`)
GETITEM = Primitive("ndarray.__getitem__", operator.getitem, may_view=True)


def function_name(func: Callable[..., Any]) -> str:
    """How messages name a function: `np.sum`, `np.linalg.inv`, `scipy.special.erf`."""
    if isinstance(func, np.ufunc):
        module = _ufunc_module(func)
    else:
        module = getattr(func, "__module__", None) or "numpy"
    module = "np" if module == "numpy" else module.replace("numpy.", "np.")
    return f"{module}.{getattr(func, '__name__', repr(func))}"


def _ufunc_module(ufunc: np.ufunc) -> str:
    """NumPy's ufuncs live in `numpy`; others (SciPy's) say where in their `__module__`
    only on newer NumPy, so fall back to looking them up by name."""
    module = getattr(ufunc, "__module__", None)
    if module and module != "numpy":
        return cast(str, module)
    if getattr(np, ufunc.__name__, None) is ufunc:
        return "numpy"
    special = sys.modules.get("scipy.special")
    if special is not None and getattr(special, ufunc.__name__, None) is ufunc:
        return "scipy.special"
    return "numpy"


def primitive(func: Callable[..., Any], *, may_view: bool = False) -> Primitive:
    """The primitive of a function, created on first use."""
    prim = FUNCTIONS.get(func)
    if prim is None:
        prim = FUNCTIONS[func] = Primitive(function_name(func), func, may_view=may_view)
    elif may_view:
        prim.may_view = True
    return prim


def ufunc_primitive(ufunc: np.ufunc, method: str) -> Primitive:
    """The primitive of `ufunc.method` (`__call__`, `reduce`, `accumulate`, ...), with
    the family defaults of its method registered on creation."""
    key = (ufunc, method)
    prim = UFUNC_PRIMITIVES.get(key)
    if prim is None:
        impl = ufunc if method == "__call__" else getattr(ufunc, method)
        name = function_name(ufunc) + ("" if method == "__call__" else f".{method}")
        prim = UFUNC_PRIMITIVES[key] = Primitive(name, impl)
        for hook, source in _UFUNC_DEFAULTS:
            with _as_default(source):
                hook(prim, ufunc, method)
    return prim


def prim_of(func: Any) -> Primitive:
    """The primitive of a function, a ufunc (its call), a ufunc method or a `Primitive`."""
    if isinstance(func, Primitive):
        return func
    if isinstance(func, np.ufunc):
        return ufunc_primitive(func, "__call__")
    owner = getattr(func, "__self__", None)
    if isinstance(owner, np.ufunc):
        return ufunc_primitive(owner, func.__name__)
    return primitive(func)


def rules_of(func: Any) -> Rules | None:
    """The rules of `func` if vmapx has a primitive for it (creates none)."""
    if isinstance(func, Primitive):
        return func.rules
    if isinstance(func, np.ufunc):
        prim = UFUNC_PRIMITIVES.get((func, "__call__"))
    else:
        owner = getattr(func, "__self__", None)
        if isinstance(owner, np.ufunc):
            prim = UFUNC_PRIMITIVES.get((owner, func.__name__))
        else:
            prim = FUNCTIONS.get(func)
    return None if prim is None else prim.rules


# -- registration --------------------------------------------------------------------

_state: dict[str, str | None] = {"default_source": None}


def register(
    func: Any, kind: str, rule: Any, *, replace: bool = False, default: bool = False
) -> Primitive:
    """Register `rule` as the `kind` rule of `func` (a function, ufunc, ufunc method or
    `Primitive`); returns the primitive.

    Refuses (`vmapx.errors.RegistrationError`) to replace a rule the primitive already
    has, unless `replace=True`: say why beside the call. A family default never
    replaces a primitive's own rule, and a primitive's own rule replaces a default.
    """
    if kind not in KINDS:
        raise RegistrationError(f"register: unknown rule kind {kind!r}; the kinds are {KINDS}")
    prim = prim_of(func)
    rules = prim.rules
    default_source = _state["default_source"]
    if default and default_source is None:
        default_source = registration_site()
    has = getattr(rules, kind) is not None
    if default_source is not None:  # a family default
        if has and kind not in rules.defaults:
            return prim  # the primitive's own rule stands
        if has and not replace:
            raise RegistrationError(
                f"register: two family defaults give `{prim.name}` a {kind} rule: "
                f"{rules.sources[kind]} and {default_source}"
            )
        rules.defaults.add(kind)
        source = default_source
    else:
        source = registration_site()
        if has and not replace and kind not in rules.defaults:
            raise RegistrationError(
                f"register: `{prim.name}` already has a {kind} rule, registered at "
                f"{rules.sources.get(kind, '<unknown>')}; this one is at {source}. Pass "
                "`replace=True` (and say why) to replace it."
            )
        rules.defaults.discard(kind)
    setattr(rules, kind, rule)
    rules.sources[kind] = source
    return prim


def register_ufunc_defaults(hook: Callable[[Primitive, np.ufunc, str], None]) -> None:
    """Run `hook(prim, ufunc, method)` on every ufunc primitive, existing and future;
    the rules it registers are family defaults (see `register`)."""
    source = registration_site()
    _UFUNC_DEFAULTS.append((hook, source))
    for (ufunc, method), prim in list(UFUNC_PRIMITIVES.items()):
        with _as_default(source):
            hook(prim, ufunc, method)


@contextmanager
def _as_default(source: str) -> Iterator[None]:
    previous = _state["default_source"]
    _state["default_source"] = source
    try:
        yield
    finally:
        _state["default_source"] = previous


# code objects of registration helpers (`defvjp`, `defbatch`, ...): the site of a
# registration is the first frame outside them and this module
_BUILDERS: set[CodeType] = set()


def builder(func: Callable[..., Any]) -> Callable[..., Any]:
    """Mark a registration helper, so that its callers' lines are recorded as where
    the rules it registers come from."""
    _BUILDERS.add(func.__code__)
    return func


def registration_site() -> str:
    """`file:line` of the line that asked for the current registration (inside vmapx:
    relative to the package's folder, `vmapx/_numpy/ufuncs.py:460`)."""
    frame: FrameType | None = sys._getframe(1)
    here = __file__
    while frame is not None:
        code = frame.f_code
        if code.co_filename != here and code not in _BUILDERS:
            filename = code.co_filename
            if filename.startswith(_PACKAGE_PARENT):
                filename = filename[len(_PACKAGE_PARENT) :]
            return f"{filename}:{frame.f_lineno}"
        frame = frame.f_back
    return "<unknown>"


_PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def registered() -> Iterator[tuple[Any, Primitive]]:
    """Every `(key, primitive)` of the table: functions, then `(ufunc, method)` pairs."""
    yield from list(FUNCTIONS.items())
    yield from list(UFUNC_PRIMITIVES.items())


# -- reading a call's arguments (for rules of every kind) ----------------------------


def get_arg(
    args: tuple[Any, ...], kwargs: dict[Any, Any], index: int, name: str, default: Any = None
) -> Any:
    """A call's argument given positionally (at `index`) or by keyword."""
    if len(args) > index:
        return args[index]
    return kwargs.get(name, default)


def set_arg(
    args: tuple[Any, ...], kwargs: dict[Any, Any], index: int, name: str, value: Any
) -> tuple[tuple[Any, ...], dict[Any, Any]]:
    """The call's `(args, kwargs)` with one argument replaced (positional or keyword)."""
    if len(args) > index:
        return (*args[:index], value, *args[index + 1 :]), kwargs
    return args, {**kwargs, name: value}


def each_function(funcs: Any) -> list[Any]:
    """A builder's `funcs` (one function or a list) as a list, each function once: NumPy
    has aliases that are one object (`np.permute_dims is np.transpose` on NumPy 2)."""
    items = list(funcs) if isinstance(funcs, list | tuple) else [funcs]
    return list({id(f): f for f in items}.values())
