"""How one library function is adapted: a stand-in that is the library function on plain
values and a vmapx primitive on traced ones.

An adapter is a NumPy formulation of the library function for ONE example (its
*lowering*), written with functions vmapx batches and differentiates, and with the
library's own signature. `adapts` makes it a `vmapx.extend.primitive` named as the
library names it, optionally with a batch rule that calls the library once on the whole
batch (`batch_by_axis`), and records it so that `install` puts a `LibraryFunction` in
the library's module. A lowering raises `Unsupported` for an option it does not cover: the
call then goes to the library function itself, which gives the loop's answer.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import pydoc
import threading
import types
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np

from .. import _pytree as optree  # optree in vmapx.config.pytree_namespace
from .._batching import BatchTracer, error_marks
from .._core import Tracer, current_level, find_top_trace

# (not through vmapx's namespace: its first use loads the deferred adapters, which need
# this module whole)
from ..extend import primitive, register_batch_rule, wrap_batched

__all__ = ["LibraryFunction", "Unsupported", "adapts", "batch_by_axis", "restore_all"]


class Unsupported(Exception):  # noqa: N818 (a signal: use the library function instead)
    """Raised by a lowering for a call it does not cover."""


class LibraryFunction:
    """A library function that becomes a vmapx primitive when given traced values."""

    def __init__(
        self,
        original: Callable[..., Any],
        lowering: Callable[..., Any],
        prim: Any,
        arrays: tuple[Any, ...],
    ) -> None:
        functools.update_wrapper(self, original)
        self.original = original
        self.lowering = lowering
        self.primitive = prim
        self.arrays = arrays
        self.signature = inspect.signature(lowering)
        self._names = _plain_parameters(self.signature)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if current_level() == 0:  # no transform runs in this thread: the library itself
            return self.original(*args, **kwargs)
        return self._traced(args, kwargs)

    def __repr__(self) -> str:
        return f"<vmapx adapter of {self.primitive.prim.name}>"

    def __reduce__(self) -> Any:  # pickled as the library function is: by its name
        if hasattr(self.original, "__self__"):
            return self.original.__reduce__()
        return pydoc.locate, (f"{self.original.__module__}.{self.original.__qualname__}",)

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        """Bound as the library function is when set on a class (a method)."""
        if instance is None or not inspect.isfunction(self.original):
            return self
        return types.MethodType(self, instance)

    def _traced(self, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        if not _traced(args) and not _traced(kwargs):  # (a library calling its own)
            return self.original(*args, **kwargs)
        named = self._bind(args, kwargs)
        if named is None:  # an argument the lowering does not take
            return self.original(*args, **kwargs)
        arrays = [named.pop(p) if p in named else self._default(p) for p in self.arrays]
        if _traced(named) or not _traced(arrays):
            return self.original(*args, **kwargs)
        marks = error_marks()
        try:
            out = _batch_directly(self.primitive, arrays, named)
            return self.primitive(*arrays, **named) if out is _NOT_DIRECT else out
        except Exception:  # (Unsupported, or the lowering failed on traced values: the
            for trace, raised in marks:  # library gives the loop's answer)
                trace.raised = raised
            return self.original(*args, **kwargs)

    def _default(self, name: str) -> Any:
        return self.signature.parameters[name].default

    def _bind(self, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> dict[str, Any] | None:
        """The arguments given, by parameter name (`Signature.bind(...).arguments`), or
        None where the lowering does not take them."""
        names = self._names
        if names is not None:  # (plain parameters: what `bind` does, without its cost)
            positional, keywords = names
            if len(args) <= len(positional):
                named = dict(zip(positional, args, strict=False))
                if all(k in keywords and k not in named for k in kwargs):
                    named.update(kwargs)
                    return named
                return None
        try:
            return dict(self.signature.bind(*args, **kwargs).arguments)
        except TypeError:
            return None


_NOT_DIRECT = object()


def _batch_directly(prim: Any, arrays: list[Any], named: dict[str, Any]) -> Any:
    """`prim(*arrays, **named)` where only one `vmap` traces the arrays (no pytrees, no
    other transform, NumPy payloads): its batch rule called as `bind` would call it,
    without the steps that find that out. `_NOT_DIRECT` for any other call."""
    rule = prim.vmap_rule
    if rule is None:
        return _NOT_DIRECT
    trace, values, flags = None, [], []
    for x in arrays:
        if type(x) is BatchTracer:
            if trace is None:
                trace = x._trace
            if x._trace is not trace or x._view is not None or type(x.val) is not np.ndarray:
                return _NOT_DIRECT  # (several traces, a view to check, a nested vmap)
            values.append(x.val)
            flags.append(True)
        elif type(x) in _UNTRACED:
            values.append(x)
            flags.append(False)
        else:
            return _NOT_DIRECT
    if trace is None or trace.like is not None or find_top_trace(tuple(arrays)) is not trace:
        return _NOT_DIRECT
    result = rule(trace.axis_size, flags, *values, **named)
    if type(result) is not tuple or len(result) != 2:
        return _NOT_DIRECT  # (the way through `bind` says what is wrong)
    return wrap_batched(trace, *result, prim.prim.name)


def any_batched(flags: Any) -> bool:
    """Whether any leaf of a batch rule's `in_batched` entry is batched."""
    return any(optree.tree_leaves(flags))


def _traced(tree: Any) -> bool:
    if type(tree) is dict:
        tree = tree.values()
    walk = False
    for x in tree:  # (the usual arguments: arrays, options, tracers; no tree to walk)
        if type(x) in _UNTRACED:
            continue
        if isinstance(x, Tracer):
            return True
        walk = True
    return walk and any(
        isinstance(x, Tracer) for x in optree.tree_leaves(list(tree), none_is_leaf=True)
    )


# types that are never traced and hold no traced values
_UNTRACED = frozenset((np.ndarray, str, int, float, bool, complex, type(None), np.dtype))


def _plain_parameters(
    signature: inspect.Signature,
) -> tuple[tuple[str, ...], frozenset[str]] | None:
    """`(positional names, keyword names)` of a signature without `*args`, `**kwargs` or
    positional-only parameters, else None (then `Signature.bind` maps a call's arguments)."""
    positional, keywords = [], set()
    for p in signature.parameters.values():
        if p.kind is p.POSITIONAL_OR_KEYWORD:
            positional.append(p.name)
        elif p.kind is not p.KEYWORD_ONLY:
            return None
        keywords.add(p.name)
    return tuple(positional), frozenset(keywords)


# every adapter: (library module, attribute, lowering, primitive, array parameters)
_ADAPTERS: list[tuple[str, str, Callable[..., Any], Any, tuple[Any, ...]]] = []
_REPLACED: list[tuple[Any, str, Any]] = []  # (module, attribute, the library's function)
_lock = threading.Lock()


def adapts(
    module: str, attr: str, arrays: tuple[str, ...], *, batch: Callable[..., Any] | None = None
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: the function is the lowering of `module.attr`, whose parameters named
    in `arrays` may be traced (the others are static options). `batch`, if given, is its
    batch rule (see `vmapx.extend.register_batch_rule`)."""

    def decorate(lowering: Callable[..., Any]) -> Callable[..., Any]:
        def by_name(*values: Any, **options: Any) -> Any:  # traced values come positionally
            return lowering(**dict(zip(arrays, values, strict=True)), **options)

        prim = primitive(by_name, name=f"{module}.{attr}")
        if batch is not None:
            register_batch_rule(prim, batch)
        _ADAPTERS.append((module, attr, lowering, prim, arrays))
        return lowering

    return decorate


def install(module: str) -> None:
    """Put the adapters of `module` (a library module) in place of its functions."""
    library = importlib.import_module(module)
    with _lock:
        for name, attr, lowering, prim, arrays in _ADAPTERS:
            if name != module:
                continue
            *path, last = attr.split(".")  # `norm.logpdf`: a method of an object
            owner = functools.reduce(getattr, path, library)
            original = getattr(owner, last, None)
            if original is None or isinstance(original, LibraryFunction):
                continue
            setattr(owner, last, LibraryFunction(original, lowering, prim, arrays))
            _REPLACED.append((owner, last, original))


def restore_all() -> None:
    """Put every replaced library function back."""
    with _lock:
        while _REPLACED:
            owner, attr, original = _REPLACED.pop()
            if isinstance(owner, ModuleType):
                setattr(owner, attr, original)
            else:  # a method set on an object: its class's method again
                delattr(owner, attr)


def batch_by_axis(
    library_call: Callable[..., Any], lowering: Callable[..., Any], out_batched: Any = True
) -> Callable[..., Any]:
    """A batch rule that calls the library once on the whole batch.

    `library_call(*args, **kwargs)` computes the batched result from plain arrays, the
    batched ones with the batch on axis 0 and the others as they are (it raises
    `Unsupported` for what it does not cover). A callable among the arguments (a user's
    function the library applies to the data) makes the call `Unsupported`: it would be
    given the whole batch where the loop gives it one example. Values traced by another transform (a
    `grad` around the `vmap`) go through `vmap` of the lowering instead, which
    differentiates. `out_batched`: which results carry the batch (a pytree prefix).
    """

    def rule(axis_size: int, in_batched: list[Any], *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        if _traced(args):
            from .._api import vmap

            in_axes = tuple(0 if b else None for b in in_batched)
            out = vmap(functools.partial(lowering, **kwargs), in_axes=in_axes)(*args)
            return out, True
        if any(callable(v) for v in (*args, *kwargs.values())):
            # a user's function (welch's `detrend`) would see the whole batch at once
            raise Unsupported
        out = library_call(in_batched, *args, **kwargs)
        if axis_size == 0:  # (some libraries' shapes of no examples are not the loop's)
            out = _empty_like_one(library_call, in_batched, args, kwargs, out_batched)
        if type(out) is np.ndarray:
            return out, out_batched
        return optree.tree_map(np.asarray, out), out_batched

    return rule


def _empty_like_one(
    library_call: Callable[..., Any], in_batched: list[Any], args: Any, kwargs: Any, out: Any
) -> Any:
    """The results of an empty batch: those of one example of zeros, cut to no examples
    where `out` (the results' batched prefix) says they carry the batch."""
    if any(not isinstance(b, bool) and any_batched(b) for b in in_batched):
        raise Unsupported  # (a batched pytree argument)
    one = [np.zeros_like(a, shape=(1, *np.shape(a)[1:])) if b is True else a
           for a, b in zip(args, in_batched, strict=True)]  # fmt: skip
    try:
        with np.errstate(all="ignore"):
            results = library_call(in_batched, *one, **kwargs)
    except Exception as error:  # (zeros the library refuses: the loop's answer instead)
        raise Unsupported from error
    return _cut(results, out)


def _cut(results: Any, batched: Any) -> Any:
    if isinstance(batched, bool):
        return optree.tree_map(lambda r: np.asarray(r)[:0] if batched else r, results)
    return type(results)(_cut(r, b) for r, b in zip(results, batched, strict=True))
