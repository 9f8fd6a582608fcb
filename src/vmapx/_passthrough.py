"""Tracers through `np.asarray` & co. in library code, while a vmap runs on this thread.

Many libraries convert their inputs on entry (`np.asarray(x)`, `np.array(x, copy=True)`,
`from numpy import asarray`), and NumPy offers no dispatch for these: its converters
call `__array__`, which must return a plain `ndarray`. A batched value cannot be one
(`BatchTracer.__array__` signals the per-example loop). This module lets tracers pass
through such calls, under four rules:

- **Scoped.** While a batched run of a vmap that needs it is on a thread, the names a
  library module holds for NumPy (`np`, bound to a view of NumPy whose converters are
  wrappers) and for its converters (`from numpy import asarray`, `_asarray =
  np.asanyarray`) are bound to wrappers that pass that thread's tracers through and call
  NumPy for everything else. They are bound while at least one such run is on any
  thread and restored after the last one ends (normally or by an exception); other
  threads see NumPy's behaviour throughout. NumPy's own module is never changed, and when
  no vmap needs it the names are NumPy's own (no cost at all).
- **Learned.** A converter reached through a name that is not bound yet ends in
  `__array__`; there `learn_caller` notes the module globals of the calling line that
  hold a converter, and the vmap re-runs its batched run once with those bound too
  (`retry`). A conversion that no name reaches (a local alias, C code) still loops.
- **Never a wrong answer.** A batched run in which a tracer passed a converter and which
  then raised cannot be trusted: the outermost vmap on the thread re-runs the function
  per example (`check_untrusted`), whose answer, or exception, is the loop's.
- **Copies stay copies.** `np.array(x)` of a tracer is a new tracer (writes into it do
  not reach `x`); `np.asarray(x)` is `x` itself, as for an ndarray.
"""

from __future__ import annotations

import inspect
import sys
import threading
import types
from collections.abc import Callable
from typing import Any

import numpy as np

from . import _scalars
from ._core import ConcretizationSignal, Trace, Tracer
from ._frames import location, package_dir

# the converters and their default `copy` (True: always; None: only where needed)
_CONVERTERS = {"array": True, "asarray": None, "asanyarray": None,
               "ascontiguousarray": None, "asfortranarray": None}  # fmt: skip
# NumPy's filling constructors: `np.full(n, traced)` writes the value into a plain
# array NumPy made (its `copyto` dispatches on the value, but the array is NumPy's)
_FILLERS = ("full", "full_like")
_ORIGINALS = {getattr(np, name): name for name in (*_CONVERTERS, *_FILLERS)}
_CONVERTER_TYPES = {type(original) for original in _ORIGINALS}
_FILLER_CODES = {
    inspect.unwrap(getattr(f, "_implementation", f)).__code__
    for f in (getattr(np, name) for name in _FILLERS)
}  # (`full_like` is NumPy's dispatcher of its Python function)
_VMAPX = package_dir("vmapx")
# ascontiguousarray/asfortranarray of a 0-d array: NumPy versions differ
_MIN_NDIM = {name: getattr(np, name)(np.zeros(())).ndim for name in _CONVERTERS}


class _Local(threading.local):
    def __init__(self) -> None:
        self.outer: Trace | None = None  # the outermost vmap run in scope on this thread
        self.depth = 0
        self.passed: str | None = None  # the first library line a tracer passed
        self.learned = False  # `learn_caller` bound a new name since the last `retry`
        self.function: Any = None  # the outermost vmapped function (its key)


_local = _Local()
_lock = threading.Lock()
_running = 0  # scoped runs on all threads
_bindings: dict[tuple[int, str], tuple[dict[Any, Any], str, Any]] = {}  # (dict id, name) -> binding
_wanted: set[Any] = set()  # functions (their code objects) that need the scope
# functions whose batched run with the scope could not be trusted: they are left to the
# loop from then on (a retry would fail the same way, after more work)
_untrusted: set[Any] = set()


# -- the wrappers ------------------------------------------------------------------


def converted_in() -> Trace | None:
    """The vmap in scope on this thread where a converter passed a tracer through in
    its run (`np.asfortranarray(x)` gave `x` itself: the memory layout it asked for is
    not the traced value's), else None."""
    return _local.outer if _local.depth and _local.passed is not None else None


def has_tracer(obj: Any) -> bool:
    """Whether `obj` is a tracer or a (nested) list or tuple holding one."""
    if isinstance(obj, Tracer):
        return True
    return type(obj) in (list, tuple) and any(has_tracer(o) for o in obj)


_COPY_MODES = {np._CopyMode.ALWAYS: True, np._CopyMode.IF_NEEDED: None, np._CopyMode.NEVER: False}


def convert(name: str, obj: Any, dtype: Any, copy: Any, ndmin: int) -> Any:
    """What `np.<name>(obj, dtype=dtype, copy=copy, ndmin=ndmin)` gives when `obj` holds
    tracers (a tracer): `obj` itself where NumPy would not copy."""
    copy = _COPY_MODES.get(copy, copy) if isinstance(copy, np._CopyMode) else copy
    same = isinstance(obj, Tracer) and (dtype is None or np.dtype(dtype) == obj.dtype)
    out: Any
    if same and _scalars.is_scalar(obj):
        out = _array_not_scalar(np.copy(obj))  # (a NumPy scalar converts to a 0-d array)
    elif same:
        out = np.copy(obj) if copy else obj
    elif copy is False:
        raise ValueError("Unable to avoid copy while creating an array as requested.")
    elif isinstance(obj, Tracer):
        out = _array_not_scalar(obj.astype(dtype))  # (an array, whatever `obj` was)
    else:  # a (nested) list of tracers and values: NumPy stacks them
        out = np.stack([convert("asarray", o, None, None, 0) if has_tracer(o) else o for o in obj])
        out = out if dtype is None else out.astype(dtype)
    ndmin = max(ndmin, _MIN_NDIM[name])
    if out.ndim < ndmin:
        out = np.reshape(out, (1,) * (ndmin - out.ndim) + out.shape)
    return out


def _array_not_scalar(out: Any) -> Any:
    """`out` marked as an array (not a NumPy scalar). A transform's tracer may give a
    plain array: an integer cast of a derivative's tracer whose value is not batched."""
    if isinstance(out, Tracer):
        out._scalar = False
    return out


def _passes(obj: Any, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> bool:
    """Whether a converter call may pass `obj` through: it holds tracers, asks for a
    numeric dtype on the CPU, and comes from outside vmapx (whose own calls mean to
    reach `__array__`)."""
    if len(args) > 2 or not has_tracer(obj):
        return False
    if kwargs.get("like") is not None or kwargs.get("device") not in (None, "cpu"):
        return False
    dtype = args[0] if args else kwargs.get("dtype")
    if dtype is not None and np.dtype(dtype).kind not in "biufc":
        return False
    return not sys._getframe(2).f_code.co_filename.startswith(_VMAPX)


def _named(
    wrapper: Callable[..., Any], original: Callable[..., Any], name: str
) -> Callable[..., Any]:
    """`wrapper`, named and documented as NumPy's `original` that it stands in for."""
    wrapper.__name__ = wrapper.__qualname__ = name
    wrapper.__doc__ = original.__doc__
    wrapper.__wrapped__ = original  # type: ignore[attr-defined]
    return wrapper


def _wrapper(original: Callable[..., Any], name: str) -> Callable[..., Any]:
    def converter(obj: Any, *args: Any, **kwargs: Any) -> Any:
        if _local.depth and _passes(obj, args, kwargs):
            dtype = args[0] if args else kwargs.get("dtype")
            copy = kwargs.get("copy", _CONVERTERS[name])
            out = convert(name, obj, dtype, copy, kwargs.get("ndmin", 0))
            if _local.passed is None:
                _local.passed = f"`np.{name}` at {location()}"
            return out
        return original(obj, *args, **kwargs)

    return _named(converter, original, name)


def _filled(value: Any, dtype: Any, shape: Any) -> Any:
    """A traced array of `shape` (and `dtype`, default the value's) holding `value`
    broadcast, as `np.full` fills its array (`casting="unsafe"`)."""
    value = convert("asarray", value, None, None, 0)
    out = np.zeros_like(value, dtype=value.dtype if dtype is None else dtype, shape=shape)
    np.copyto(out, value, casting="unsafe")  # (NumPy's error where it does not broadcast)
    return out


def _on_host(kwargs: dict[Any, Any]) -> bool:
    return kwargs.get("like") is None and kwargs.get("device") in (None, "cpu")


def _full_wrapper(original: Callable[..., Any]) -> Callable[..., Any]:
    def full(
        shape: Any, fill_value: Any, dtype: Any = None, order: Any = "C", **kwargs: Any
    ) -> Any:
        if _local.depth and has_tracer(fill_value) and _on_host(kwargs):
            return _filled(fill_value, dtype, shape)
        return original(shape, fill_value, dtype, order, **kwargs)

    return _named(full, original, "full")


def _full_like_wrapper(original: Callable[..., Any]) -> Callable[..., Any]:
    def full_like(a: Any, fill_value: Any, dtype: Any = None, *args: Any, **kwargs: Any) -> Any:
        plain = type(a) is np.ndarray  # (a subclass keeps NumPy's `subok` ways: the loop)
        if _local.depth and plain and has_tracer(fill_value) and _on_host(kwargs):
            shape = args[2] if len(args) > 2 else kwargs.get("shape")
            dtype = a.dtype if dtype is None else dtype
            return _filled(fill_value, dtype, a.shape if shape is None else shape)
        return original(a, fill_value, dtype, *args, **kwargs)

    return _named(full_like, original, "full_like")


_WRAPPERS = {original: _wrapper(original, name) for original, name in _ORIGINALS.items()
             if name in _CONVERTERS}  # fmt: skip
_WRAPPERS[np.full] = _full_wrapper(np.full)
_WRAPPERS[np.full_like] = _full_like_wrapper(np.full_like)


class _NumpyView(types.ModuleType):
    """What a library module's `np` is while a vmap runs: NumPy's namespace with the
    converters passing tracers. NumPy's own module is never changed: NumPy looks its
    functions up there by name (`like=` dispatch hands them to duck arrays), and other
    code must keep finding NumPy's."""

    def __getattr__(self, name: str) -> Any:  # names NumPy makes on first use
        return getattr(np, name)


_NUMPY_VIEW = _NumpyView(np.__name__, np.__doc__)  # (filled by `_install`)


def _replacement(original: Any) -> Any:
    return _NUMPY_VIEW if original is np else _WRAPPERS[original]


# -- binding names -----------------------------------------------------------------


def _bind(namespace: dict[Any, Any], name: str, original: Any) -> None:
    _bindings[(id(namespace), name)] = (namespace, name, original)
    if _running:
        namespace[name] = _replacement(original)


def _install() -> None:
    _NUMPY_VIEW.__dict__.update(vars(np))  # (NumPy as it is now, monkeypatches included)
    _NUMPY_VIEW.__dict__.update(
        {name: _WRAPPERS[getattr(np, name)] for name in (*_CONVERTERS, *_FILLERS)}
    )
    for namespace, name, original in _bindings.values():
        if namespace.get(name) is original:
            namespace[name] = _replacement(original)


def _restore() -> None:
    for namespace, name, original in _bindings.values():
        if namespace.get(name) is _replacement(original):
            namespace[name] = original


def _is_numpy_name(value: Any) -> bool:
    """Whether a module global is NumPy or one of its converters."""
    return value is np or (type(value) in _CONVERTER_TYPES and value in _ORIGINALS)


def learn_filler_caller(frame: Any) -> None:
    """Where `frame` (a write of a traced value into a plain array) runs inside NumPy's
    `np.full`/`np.full_like`, learn the line that called it (`learn_caller`): a run
    again fills a traced array there."""
    for _ in range(8):
        if frame is None:
            return
        if frame.f_code in _FILLER_CODES:
            if frame.f_back is not None:
                learn_caller(frame.f_back)
            return
        frame = frame.f_back


def learn_caller(frame: Any) -> None:
    """Bind the converters (and NumPy itself, as `np.asarray` reaches them) held by the
    module globals of `frame`, the line that asked a tracer for a plain array, so that a
    run again passes tracers there."""
    namespace = frame.f_globals
    if frame.f_code.co_filename.startswith(_VMAPX):
        return
    with _lock:
        known = any(key[0] == id(namespace) for key in _bindings)
        if _local.depth == 0 and known:
            _local.learned = True  # (bound for other functions; this one runs out of scope)
        for name, value in list(namespace.items()):
            if _is_numpy_name(value) and (id(namespace), name) not in _bindings:
                _bind(namespace, name, value)
                _local.learned = True


# -- the scope of one batched run --------------------------------------------------


def _key(f: Callable[..., Any]) -> Any:
    return getattr(f, "__code__", f)


def call(trace: Trace, f: Callable[..., Any], args: Any, kwargs: dict[Any, Any]) -> Any:
    """`f(*args, **kwargs)`, in scope when `f` (or an enclosing vmap) needs it."""
    if _local.depth == 0:
        key = _key(f)
        _local.outer, _local.passed, _local.learned, _local.function = trace, None, False, key
        if key not in _wanted:
            return f(*args, **kwargs)
    _enter()
    try:
        return f(*args, **kwargs)
    finally:
        _leave()


def _enter() -> None:
    global _running
    if _local.depth == 0:
        with _lock:
            if _running == 0:
                _install()
            _running += 1
    _local.depth += 1


def _leave() -> None:
    global _running
    _local.depth -= 1
    if _local.depth == 0:
        with _lock:
            _running -= 1
            if _running == 0:
                _restore()


def retry(f: Callable[..., Any]) -> bool:
    """Whether the batched run of `f` that just signalled the loop should run again
    (with the scope, now that new converter names are bound)."""
    if not _local.learned or _key(f) in _untrusted:
        return False
    _local.learned = False
    _wanted.add(_key(f))
    return True


def untrusted(f: Callable[..., Any]) -> bool:
    """Whether `f` is left to the loop, its batched run with the scope not trusted."""
    return _key(f) in _untrusted


def check_untrusted(trace: Trace, error: Exception) -> None:
    """After `error` ended a batched run: if a tracer passed a converter in it, have
    the outermost vmap on this thread re-run the function per example."""
    outer, passed = _local.outer, _local.passed
    if outer is None or passed is None:
        return
    if not outer.alive:
        return  # (a record of a vmap that has ended: an inner one that ran its loop)
    _untrusted.add(_local.function)
    _wanted.discard(_local.function)
    signal = outer.concretization(
        f"a traced value passed {passed} and the batched run then raised "
        f"{type(error).__name__}: {_first_line(error)}",
        "give the library function a batching rule with `vmapx.extend`, or call it "
        "on plain arrays outside the vmap",
    )
    if outer is not trace or not isinstance(signal, ConcretizationSignal):
        raise signal from error


def note(what: str) -> None:
    """Record that library code took a traced value in through `what` (the array API's
    `__array_namespace__`): if the run then raises, it cannot be trusted either."""
    if _local.passed is None:
        _local.passed = f"{what} at {location()}"


def _first_line(error: Exception) -> str:
    line = str(error).split("\n", 1)[0]
    return line if len(line) <= 120 else line[:117] + "..."


def active() -> bool:
    """Whether tracers pass NumPy's converters on this thread now."""
    return _local.depth > 0
