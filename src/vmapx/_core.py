"""The interpreter core: primitives, tracers, traces, levels and `bind`.

Every transform call pushes a `Trace` onto a thread-local stack; its level is its
position there (1 = outermost). A `Tracer` belongs to one trace. `bind` finds the
highest-level trace among the arguments and lets it process the primitive; values
of lower levels are constants to that trace. This module knows nothing of NumPy's
API: the NumPy surface is attached to `Tracer` by `vmapx._numpy`.

Internals the transforms read (the only private names other modules import):
`_state`, this thread's trace stack and its flags, and `_is_library_file`, whether a
frame's file is vmapx's or NumPy's (for the stack level of a warning).
"""

from __future__ import annotations

import importlib.util
import operator
import os
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

import numpy as np

from .errors import EscapedTracerError, TraceMixError

if TYPE_CHECKING:
    from types import FrameType

    from ._registry import Primitive


T = TypeVar("T", bound="Trace")


class Trace:
    """One active transform. Subclasses implement `process`."""

    __slots__ = ("level", "alive", "transform", "__weakref__")

    def __init__(self, transform: str) -> None:
        self.level = 0
        self.alive = True
        self.transform = transform

    def process(self, prim: Primitive, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        raise NotImplementedError

    def concretization(self, what: str, fix: str) -> BaseException:
        """The exception for a traced value that must become concrete (`bool(x)`,
        `np.asarray(x)`, ...). `vmap` overrides it to fall back to a loop."""
        from .errors import ConcretizationError

        if not self.alive:
            _check_trace(self)  # an escaped tracer: say so

        return ConcretizationError(
            f"{self.transform}: {what} at {user_frame_location()}. Fix: {fix}."
        )


class Tracer:
    """A value that belongs to a trace. Subclasses hold the payload.

    Writes into tracers are functional (`_become` swaps the payload), so NumPy's view
    semantics are kept, or the write fails, by tracking views for every kind of tracer:
    a tracer made by an operation that may return a view (`x[1:]`, reshape, ...)
    records its base and the base's `_version` in `_view`. Writing into such a view is
    refused (`_aliased`); writing into the base is fine (the common `h[i] = f(h[i-1])`)
    and bumps its version, and using a view made before that write raises
    (`_check_fresh`): NumPy would show the write through the view.
    """

    __slots__ = ("_trace", "_view", "_version", "_scalar")
    __array_priority__ = 1000
    __hash__ = None  # type: ignore[assignment]  # like ndarray: elementwise __eq__, so not hashable
    _trace: Trace
    _view: tuple[Tracer, int] | None  # (the base, its `_version` when this view was made)
    _version: int
    _scalar: Any

    if TYPE_CHECKING:  # the array attributes every kind of tracer defines

        @property
        def shape(self) -> tuple[int, ...]: ...
        @property
        def ndim(self) -> int: ...
        @property
        def dtype(self) -> Any: ...
        @property
        def size(self) -> int: ...

        # (and NumPy's array API, installed by `vmapx._numpy._tracer_api`)
        def __getitem__(self, key: Any) -> Any: ...
        def __neg__(self) -> Any: ...
        def astype(self, dtype: Any, *args: Any, **kwargs: Any) -> Any: ...

    # -- the example's type -------------------------------------------------------------
    # `isinstance(x, np.ndarray)` and `isinstance(x, float)` in `f` must answer as the
    # loop's value would (an `np.ndarray`, or for one number an `np.float64`, which is a
    # `float`): code branches on them, and a different answer is a silently wrong value.
    # Python's `isinstance` consults `__class__` where the real type does not match, so
    # each kind of tracer reports its example's type there (`posed_class`); `type(x)`
    # stays the tracer's class. vmapx tests its own values with `type(x)`, `is_ndarray`,
    # `is_numpy_scalar`, or `isinstance(x, Tracer)` first: `isinstance(x, np.ndarray)`
    # or a number type is true of a tracer.

    # a number's own methods (`s.is_integer()`, `n.bit_length()`), where the tracer
    # poses as a number: the loop's value has them (`_ScalarMethod`)
    as_integer_ratio: Any
    bit_count: Any
    bit_length: Any
    denominator: Any
    hex: Any
    is_integer: Any
    numerator: Any
    to_bytes: Any

    @property
    def _aliased(self) -> bool:
        return self._view is not None

    def _check_fresh(self) -> None:
        view = cast("tuple[Tracer, int]", self._view)  # (called where it is not None)
        if view[0]._version != view[1]:
            raise self._trace.concretization(
                "a view (a slice, reshape, transpose, ...) was used after the array it "
                "views was written in place, which NumPy would reflect in the view",
                "copy the view before writing (`v = x[1:].copy()`), or take it after the write",
            )

    def _become(self, other: Tracer) -> None:
        """Take over `other`'s payload: the functional form of an in-place write."""
        raise NotImplementedError

    # -- a value leaves the trace (Python control flow, conversions) -------------------
    # Every way Python or NumPy can take a plain value out of a tracer goes through one
    # hook, `_leave_trace`, where each kind of tracer applies its trace's policy: vmap
    # gives the value all examples agree on (else the loop runs), autodiff the primal
    # (saying so where a derivative is dropped), jit the value, and marks the recording
    # as one that cannot be replayed.

    def _leave_trace(
        self, how: str, convert: Callable[[Any], Any] | None, args: tuple[Any, ...] = ()
    ) -> Any:
        """`convert` applied to the value Python reads out of this tracer. `how` names
        the conversion: `bool`, `float`, `int`, `complex`, `index`, `format` (`args`:
        the spec), `item` (`args`: its arguments), `tolist`, `array` (`args`: the dtype;
        no `convert`: the trace makes the array, or refuses)."""
        raise NotImplementedError

    def __bool__(self) -> bool:
        return cast(bool, self._leave_trace("bool", bool))

    def __float__(self) -> float:
        return cast(float, self._leave_trace("float", float))

    def __int__(self) -> int:
        return cast(int, self._leave_trace("int", int))

    def __complex__(self) -> complex:
        return cast(complex, self._leave_trace("complex", complex))

    def __index__(self) -> int:
        return cast(int, self._leave_trace("index", operator.index))

    def __format__(self, spec: str) -> str:
        return cast(str, self._leave_trace("format", lambda v: format(v, spec), (spec,)))

    def item(self, *args: Any) -> Any:
        return self._leave_trace("item", lambda v: v.item(*args), args)

    def tolist(self) -> Any:
        return self._leave_trace("tolist", lambda v: v.tolist())

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        return self._leave_trace("array", None, (dtype,))


class _ScalarMethod:
    """A method or attribute of Python's and NumPy's scalars (numbers, text) that arrays lack
    (`s.is_integer()`): where the tracer poses as a scalar (`Tracer.__class__`), the
    value's own, read as the trace reads values (`_leave_trace`: under `vmap` the value
    the examples agree on, else the loop); elsewhere no such attribute, as for an
    array."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, tracer: Any, owner: Any = None) -> Any:
        if tracer is None:
            return self
        cls, name = tracer.__class__, self.name
        if cls is type(tracer) or issubclass(cls, np.ndarray) or not hasattr(cls, name):
            raise AttributeError(f"{type(tracer).__name__!r} object has no attribute {name!r}")
        return tracer._leave_trace(name, lambda v: getattr(cls(v), name))


_NUMBER_METHODS = ("as_integer_ratio", "bit_count", "bit_length", "denominator", "hex",
                   "is_integer", "numerator", "to_bytes")  # fmt: skip
# and text's (`s.upper()` of an element of a string array, an `np.str_` in the loop)
_TEXT_METHODS = tuple(n for n in dir(str) if not n.startswith("_") and not hasattr(Tracer, n))
for _name in (*_NUMBER_METHODS, *_TEXT_METHODS):
    setattr(Tracer, _name, _ScalarMethod(_name))


_PYTHON_NUMBERS = (bool, int, float, complex)
_NUMPY_CLASSES = (np.ndarray, np.generic)


def posed_class(tracer: Tracer, inner: type, exact: bool = False) -> type:
    """The class `isinstance` sees for `tracer` (its `__class__`), where `inner` is the
    class of its example's value one level down: the NumPy scalar or Python number its
    mark says (`vmapx._scalars`: the mark is set on the outermost tracer of a result),
    else `inner` where it is NumPy's (an array or scalar class) or a Python number's.
    Over a duck payload (CuPy) a tracer is itself: the library's own checks
    (`isinstance(x, numpy.ndarray)` in CuPy's `__array_ufunc__`) must not take it for a
    NumPy array, or they would not defer to vmapx. `exact`: `inner` is the class of the
    example's value itself (a plain value one level down), which no mark overrides."""
    if not (issubclass(inner, _NUMPY_CLASSES) or inner in _PYTHON_NUMBERS):
        return type(tracer)
    mark = not exact and getattr(tracer, "_scalar", False)
    if mark and tracer.ndim == 0:
        return cast(type, tracer.dtype.type if mark is True else mark)
    return inner


def is_ndarray(x: Any) -> bool:
    """Whether `x` is a NumPy array (or a subclass), not a tracer posing as one for
    `isinstance` (`Tracer.__class__`)."""
    return issubclass(type(x), np.ndarray)


def is_numpy_scalar(x: Any) -> bool:
    """Whether `x` is a NumPy scalar (`np.float64(1.0)`, ...), not a tracer posing as one."""
    return issubclass(type(x), np.generic)


class _State(threading.local):
    def __init__(self) -> None:
        self.stack: list[Trace] = []


_state = _State()


def push_trace(trace: T) -> T:
    _state.stack.append(trace)
    trace.level = len(_state.stack)
    return trace


def pop_trace(trace: Trace) -> None:
    stack = _state.stack
    assert stack and stack[-1] is trace, "trace stack corrupted"
    stack.pop()
    trace.alive = False


def current_level() -> int:
    return len(_state.stack)


def _check(t: Tracer) -> Trace:
    trace = t._trace
    _check_trace(trace)
    return trace


def _check_trace(trace: Trace) -> None:
    """Raise unless `trace` is alive and on this thread's stack at its level."""
    if trace.alive:
        stack = _state.stack
        level = trace.level
        if level <= len(stack) and stack[level - 1] is trace:
            return
        raise TraceMixError(
            f"A value traced by one `{trace.transform}` call was used inside another "
            "transform it does not belong to (for example a tracer passed between "
            "threads or stored across calls). Pass it in as an argument instead."
        )
    raise EscapedTracerError(
        f"A value traced by `{trace.transform}` was used after that "
        f"`{trace.transform}` call returned (an escaped tracer). Return the value "
        "from the transformed function instead of storing it in an outer variable."
    )


_SEQUENCES = (list, tuple)


def _top_in(seq: Any, best: Trace | None) -> Trace | None:
    # hot path: every NumPy call on a tracer comes here; each distinct trace is
    # validated once (the arguments of one call almost always share one trace)
    for a in seq:
        if isinstance(a, Tracer):
            if a._view is not None:
                a._check_fresh()
            trace = a._trace
            if trace is not best:
                stack, level = _state.stack, trace.level
                if not (trace.alive and level <= len(stack) and stack[level - 1] is trace):
                    _check_trace(trace)  # (raises: `_check_trace` inlined)
                if best is None or trace.level > best.level:
                    best = trace
        elif type(a) in _SEQUENCES:
            best = _top_in(a, best)
    return best


def find_top_trace(args: tuple[Any, ...], kwargs: dict[Any, Any] | None = None) -> Trace | None:
    """The highest-level live trace among the tracers in `args`/`kwargs`."""
    best = _top_in(args, None)
    if kwargs:
        best = _top_in(kwargs.values(), best)
    return best


def bind(prim: Primitive, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
    """Apply `prim` to `args`: the top trace handles it, or plain NumPy runs."""
    trace = _top_in(args, None)
    if kwargs:
        trace = _top_in(kwargs.values(), trace)
    if trace is None:
        return prim.impl(*args, **kwargs)
    out = trace.process(prim, args, kwargs)
    view = prim.may_view
    if view and trace.level == len(_state.stack) and (view is True or view(args, kwargs)):
        # only the user's own view operations: those a rule makes on the values one
        # level down run while this trace is still on top, with a lower level
        mark_view(trace, args, out)
    return out


def mark_view(trace: Trace, args: tuple[Any, ...], out: Any) -> None:
    """Record that the tracers in `out` may be views of the first traced operand (of
    its root base)."""
    base = next((a for a in args if isinstance(a, Tracer) and a._trace is trace), None)
    if base is None:
        return
    if base._view is not None:
        base = base._view[0]
    for o in out if type(out) in (tuple, list) or hasattr(out, "_fields") else (out,):
        if isinstance(o, Tracer) and o._trace is trace:
            o._view = (base, base._version)


def user_frame_location() -> str:
    """`file:line` of the innermost frame outside vmapx and NumPy (the user's line)."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not _is_library_file(filename):
            return f"{filename}:{frame.f_lineno}"
        frame = frame.f_back
    return "<unknown>"


def _package_dir(name: str) -> str:
    spec = importlib.util.find_spec(name)
    return os.path.dirname(os.path.abspath(cast(str, spec.origin))) + os.sep if spec else os.sep * 3


# frames in vmapx or NumPy (its Python wrappers dispatch to us) are not the user's line
_LIBRARY_DIRS = (_package_dir("vmapx"), _package_dir("numpy"))


def _is_library_file(filename: str) -> bool:
    known = _LIBRARY_FILES.get(filename)
    if known is None:  # (remembered per file: warnings walk the stack at each fallback)
        known = filename.startswith(_LIBRARY_DIRS) or filename.startswith("<__array_function__")
        if len(_LIBRARY_FILES) < 4096:
            _LIBRARY_FILES[filename] = known
    return known


_LIBRARY_FILES: dict[str, bool] = {}


class ConcretizationSignal(BaseException):  # noqa: N818 (a signal, not an error)
    """Raised inside `f` when a value must leave its trace (e.g. `bool(x)` where
    examples disagree). The transform that owns `trace` catches it and re-runs `f`
    per example. A BaseException so that a user's `except Exception` cannot hide it.
    """

    def __init__(self, trace: Trace, what: str, fix: str, location: str) -> None:
        super().__init__(what)
        self.trace = trace
        self.what = what
        self.fix = fix
        self.location = location
