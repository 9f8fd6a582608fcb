"""`vmapx.jit`: record the NumPy calls of a transformed function once, replay them.

vmapx interprets every NumPy call in Python: a few microseconds each, which is most of
the time when the arrays are tiny (per-example gradients of a small model, Jacobians
of a short function). `jit(f)` removes that cost for repeated calls. The first call
for a given signature (the shapes, dtypes and strides of the array arguments, the
values of the other arguments, which arguments are the same object) runs `f` with
every array argument wrapped in a `RecordTracer`, at the bottom of the interpreter
stack: whatever `vmap`, `grad`, ... do on top, the NumPy calls that finally compute
on arrays come here and are recorded as a straight list of steps (values that depend
on shapes only, such as `np.ones_like(x)`, become constants). The steps are compiled
into one Python function, a local variable per array and a line per NumPy call; later
calls with that signature run it: the same NumPy calls on the new arrays, with none of
the tracing, less the calls whose arrays no result needs (the value of a loss under
`grad`).

A recording is used only if replaying it is the same as running `f`. Python code that
looks at a value (`bool(x)`, `float(x)`, `x.item()`, `np.asarray(x)`, a NumPy
function returning a Python number such as `np.array_equal`) could take another path
for other values: the recording is then not replayable and every call runs `f` (the
call that recorded already ran `f` itself, so its result is right). The same for a
NumPy call that raised (code may have caught it) or that returned None (it wrote into
an argument), for random generator arguments (a replay would repeat the numbers), and
for draws from generators `f` reaches otherwise: NumPy's legacy functions
(`np.random.normal`), a closure's or a global's generator (as far as `vmap` looks for
them, `vmapx._legacy_random`), one made batch-aware inside a `vmap` (`vmapx.random`).
A shape Python reads is fixed by the signature, except that of a value whose size
depends on the data (`np.extract(x > 0, x).size`) or on a value computed from the
arrays that sets a NumPy call's parameter (`np.reshape(x, (k, -1))`): each replay
checks that shape and runs `f` where it differs. Under an error state that raises
(`np.errstate(divide="raise")`, or calls a function), a call whose replay leaves steps
out runs `f` (a left-out step could raise).

What `jit` cannot see is Python state outside the arguments: a global, a closure, an
attribute read by `f` is frozen at its value during the recording, as in `jax.jit` (a
writable array a NumPy call used is kept as a copy of the values that call saw).
Number arguments are part of the signature by default. With `trace_numbers=True`
(`vmapx._jit_api`) they (Python and NumPy numbers, not bools) are traced inputs of the
recording (`ScalarTracer`): a learning rate that changes on every call replays one
recording. (Not by default: a traced number is no Python number, and Python has ways to
look at one that nothing here sees: `n is DEFAULT`, a `match` class pattern, a `try`
around `table[n]`, a type check in a function NumPy calls back.) Where Python code
reads such a number (`range(n)`, `if lr > 0`, `str(n)`),
or where it sets a shape, an axis or another parameter of a NumPy call rather than
being an operand (`x.reshape(n, -1)`, `x.sum(axis=n)`: `_parameters`), the
next call records it as a constant (part of the signature), as are other non-array
arguments (strings, bools, ...) and those marked static (`vmapx._jit_api`). A traced
number is no int or float to `type(n)`, `isinstance`, `hasattr`, `np.isscalar`: where
the user's code that `f` runs can look at a type (`_TypeWatch`), the recording is
dropped, that call runs `f`, and every number argument is a constant from then on (a
function whose code inspects types records once per value of its numbers, replaying
for repeated values). Results are new arrays on every call (copies where a result
would be an argument's memory or a value kept in the recording, or a view of one). A
replay writes an elementwise result into an operand that no later step reads
(`vmapx._replay_memory`), so it allocates about as little as NumPy's own temporary
elision would. A recording that makes arrays of intermediates of `LARGE_BYTES` or
more, larger than its results (`vmap` runs such calls in cache-sized chunks,
`vmapx._autochunk`), is not kept: a later call records again, when the `vmap` inside
runs in chunks, and its replay is the chunks' calls one after the other (a chunk's
intermediates at a time: the memory of the chunked call); where after `RECORD_AGAIN`
calls the recording still holds such arrays, calls run `f`, with a
`PerformanceWarning` (once) that says so. Large results alone are replayed. Replayed
results can differ from `f`'s in the last bits: under recording some rules take their
general path, not a fast path that needs a plain array (the same NumPy calls, in
another order).
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import gc
import importlib.util
import keyword
import math
import operator
import os
import re
import sys
import sysconfig
import types
from collections.abc import Callable
from typing import Any, cast

import numpy as np

from . import _autochunk, _core, _legacy_random, _payload, _replay_memory
from . import _pytree as optree  # optree in vmapx.config.pytree_namespace
from ._api import fresh_arrays
from ._compat import NUMPY2, astype
from ._core import Trace, Tracer, pop_trace, push_trace
from ._plain import PLAIN_ARRAYS
from ._registry import Primitive

# A recording whose intermediates are this large (and larger than its results) is not
# replayed as it is: `vmap` runs such calls in cache-sized chunks, much faster than a
# whole-batch replay; a later call records again (up to RECORD_AGAIN times), in chunks.
LARGE_BYTES = _autochunk.LARGE_BYTES
RECORD_AGAIN = 4
# a replay deletes its arrays of this size or more after their last use (smaller ones
# live until it returns, as Python's locals do: a `del` line costs more than they hold)
FREE_BYTES = 256 << 10

# NumPy functions whose non-array results depend on shapes and dtypes only (NumPy 1.26
# decides `result_type`/`can_cast` of 0-d arrays by their values)
_STATIC_RESULTS = frozenset(
    (np.shape, np.ndim, np.size, np.iscomplexobj, np.isrealobj)
    + ((np.result_type, np.can_cast) if NUMPY2 else ())
)


class NotRecordable(BaseException):  # noqa: N818 (a signal, not an error)
    """Raised inside a recording that cannot continue (e.g. a write into a view)."""


class RecordTracer(Tracer):
    """A concrete array, and where the recording keeps it (`slot`)."""

    __slots__ = ("value", "slot", "sources", "shaped_by")
    _trace: RecordTrace

    def __init__(
        self, trace: RecordTrace, value: Any, slot: int, sources: frozenset[Any] | None = None,
        shaped_by: frozenset[Any] = frozenset(),
    ) -> None:  # fmt: skip
        self._trace = trace
        self._view = None
        self._version = 0
        self.value = value
        self.slot = slot
        # the number arguments this value depends on, if it depends on no array argument
        self.sources = sources
        # the slots whose shapes, with the signature's, fix this value's shape
        self.shaped_by = shaped_by

    @property  # type: ignore[misc]
    def __class__(self) -> type:  # noqa: D105
        return _core.posed_class(self, type(self.value), exact=True)  # (the value's own class)

    @property
    def shape(self) -> tuple[int, ...]:
        self._trace.shapes_read |= self.shaped_by  # (replays check them: `_ShapeGuard`)
        return np.shape(self.value)

    @property
    def ndim(self) -> int:
        return np.ndim(self.value)

    @property
    def dtype(self) -> np.dtype:
        return cast("np.dtype[Any]", self.value.dtype)

    @property
    def size(self) -> int:
        self._trace.shapes_read |= self.shaped_by
        return np.size(self.value)

    @property
    def read_only(self) -> bool:
        """Whether NumPy would refuse a write into this array (writes are recorded as
        functional updates, which never fail: `vmapx._numpy._tracer_api` asks)."""
        return type(self.value) is np.ndarray and not self.value.flags.writeable

    def read_only_view(self) -> RecordTracer:
        """This value, read-only (an unmapped argument of `vmap`, as it makes plain ones)."""
        view = self.value.view() if type(self.value) is np.ndarray else self.value
        if type(view) is np.ndarray:
            view.flags.writeable = False
        return type(self)(self._trace, view, self.slot, self.sources, self.shaped_by)

    def _become(self, other: Tracer) -> None:
        self.value = cast(RecordTracer, other).value
        self.slot = cast(RecordTracer, other).slot
        self.shaped_by = cast(RecordTracer, other).shaped_by
        self._version += 1

    # Python looks at the value: right now, but another value could go another way
    def _read(self, convert: Callable[..., Any]) -> Any:
        trace = self._trace
        if self.sources:  # a value of number arguments only: record them as constants
            trace.static_needed |= self.sources
        elif trace.replayable:
            trace.replayable = False
            trace.why = f"Python reads a value at {_core.user_frame_location()}"
        return convert(self.value)

    def _leave_trace(
        self, how: str, convert: Callable[..., Any] | None, args: tuple[Any, ...] = ()
    ) -> Any:
        if how == "array":
            dtype = args[0]
            return self._read(lambda v: np.asarray(v, dtype=dtype))
        return self._read(cast("Callable[..., Any]", convert))


PLAIN_ARRAYS.add(RecordTracer)  # rules' fast paths record their NumPy calls


_payload.INNER[RecordTracer] = lambda t: t.value


class ScalarTracer(RecordTracer):
    """A number argument (`lr=0.1`) of a recording: a value of the replay, not part of
    the signature. Python arithmetic among numbers is recorded as Python arithmetic
    (`operator.mul`, `divmod`, `round`: Python's own results, weak in NumPy 2's
    promotion); with arrays it is NumPy's (which sees the Python number itself). What
    else Python does with a Python number (`str(n)`, `n.conjugate()`, `math.floor(n)`)
    reads it: the next call records it as a constant."""

    __slots__ = ()

    @property
    def dtype(self) -> np.dtype:
        return np.result_type(self.value)

    def __repr__(self) -> str:
        return cast(str, self._read(repr))

    def __str__(self) -> str:
        return cast(str, self._read(str))

    def __round__(self, ndigits: Any = None) -> Any:
        args = (self,) if ndigits is None else (self, ndigits)
        return self._trace.process(_python_primitive(round), args, {})

    def __floor__(self) -> int:
        return cast(int, self._read(math.floor))  # (not through float(): ints are exact)

    def __ceil__(self) -> int:
        return cast(int, self._read(math.ceil))

    def __trunc__(self) -> int:
        return cast(int, self._read(math.trunc))


def _number_operator(op: Callable[..., Any], reflected: bool) -> Callable[..., Any]:
    fallback = op.__name__

    def method(self: ScalarTracer, other: Any) -> Any:
        trace = self._trace
        if type(other) in _NUMBERS or (type(other) is ScalarTracer and other._trace is trace):
            args = (other, self) if reflected else (self, other)
            return trace.process(_python_primitive(op), args, {})
        name = f"__r{fallback.strip('_')}__" if reflected else f"__{fallback.strip('_')}__"
        return getattr(Tracer, name)(self, other)

    return method


def _number_unary(op: Callable[..., Any]) -> Callable[..., Any]:
    def method(self: ScalarTracer) -> Any:
        return self._trace.process(_python_primitive(op), (self,), {})

    return method


def _number_attribute(name: str) -> property:
    """`n.real`, `n.conjugate`, ...: of a Python number, its own (read: `np.real` would
    give a NumPy scalar, strong in NumPy 2's promotion); of a NumPy scalar, NumPy's."""

    def get(self: ScalarTracer) -> Any:
        if type(self.value) not in _NUMBERS:
            return getattr(Tracer, name).__get__(self)  # (installed by `vmapx._numpy`)
        return self._read(lambda v: getattr(v, name))

    return property(get)


_NUMBERS = (int, float, complex, bool)
_op: Callable[..., Any]
for _op in (operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv,
            operator.mod, operator.pow, operator.and_, operator.or_, operator.xor,
            operator.lshift, operator.rshift, divmod):  # fmt: skip
    _name = _op.__name__.strip("_")
    setattr(ScalarTracer, f"__{_name}__", _number_operator(_op, False))
    setattr(ScalarTracer, f"__r{_name}__", _number_operator(_op, True))
for _op in (operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne):
    setattr(ScalarTracer, f"__{_op.__name__.strip('_')}__", _number_operator(_op, False))
for _op in (operator.neg, operator.pos, operator.abs, operator.invert):
    setattr(ScalarTracer, f"__{_op.__name__.strip('_')}__", _number_unary(_op))
for _name in ("real", "imag", "conjugate"):
    setattr(ScalarTracer, _name, _number_attribute(_name))

# Python's own functions of numbers, recorded as they are (besides `operator`'s)
_PYTHON_BUILTINS = (divmod, round)


@functools.cache
def _python_primitive(op: Callable[..., Any]) -> Primitive:
    builtin = any(op is b for b in _PYTHON_BUILTINS)
    return Primitive(op.__name__ if builtin else f"operator.{op.__name__}", op)


def _is_python_op(impl: Callable[..., Any]) -> bool:
    return getattr(impl, "__module__", None) in ("_operator", "operator") or any(
        impl is b for b in _PYTHON_BUILTINS
    )


class _Slot:
    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index


class RecordTrace(Trace):
    """Runs each NumPy call on the concrete arrays and records it as a step."""

    __slots__ = ("steps", "slots", "replayable", "owners", "layouts", "largest", "why",
                 "static_needed", "shapes_read", "errstate", "inspected", "calling")  # fmt: skip

    def __init__(self, n_inputs: int) -> None:
        super().__init__("jit")
        self.steps: list[_Step] = []
        self.slots = n_inputs
        self.replayable = True
        self.why = ""  # why not, in words
        self.static_needed: set[int] = set()  # number arguments Python read
        # slots whose shapes Python read, where the shape can depend on the values
        self.shapes_read: set[int] = set()
        self.owners = _replay_memory.Owners()
        self.layouts: list[Any] = []  # per slot (inputs: set by `_record`; never written)
        self.largest = 0  # bytes of the largest array a step made
        self.errstate = cast("dict[str, str]", np.geterr())  # (the caller's: replays run under it)
        self.inspected = ""  # where Python code may look at a traced number's type (`_TypeWatch`)
        self.calling = False  # in a NumPy call on plain values (no code there sees a tracer)

    def process(self, prim: Primitive, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        values = _replace(self, args, _value)
        kw_values = {k: _replace(self, v, _value) for k, v in kwargs.items()} if kwargs else {}
        impl = prim.impl
        owner = getattr(impl, "__self__", None)
        if type(owner) is np.ufunc and impl.__name__ == "at":
            impl = _functional_at(owner)  # (the trace's callers expect the new value)
        if self.replayable and np.geterr() != self.errstate:
            self._check_errstate(prim)
        calling, self.calling = self.calling, True
        try:
            out = impl(*values, **kw_values)
        except BaseException:
            self.replayable = False  # code may catch it and take another path
            self.why = self.why or f"`{prim.name}` raised"
            raise
        finally:
            self.calling = calling
        if self.replayable and any(getattr(t, "aware", None) for t in _core._state.stack):
            # a `vmap` above holds batch-aware generators (`vmapx.random`): its draws are
            # made on plain arrays, constants of the recording that a replay would repeat
            self.replayable = False
            self.why = "it draws from a random generator (made batch-aware inside it)"
        sources = _sources(self, (args, kwargs))
        if prim.impl is np.shape or prim.impl is np.size:  # (as `.shape` does)
            for t in _tracers_in(self, args[:1]):
                self.shapes_read |= t.shaped_by
        python_op = _is_python_op(impl)
        if prim.impl in _SHAPE_ONLY and not _has_tracer(self, (args[1:], kwargs)):
            # depends on the shape and dtype only: a constant of the recording, checked by
            # each replay where that shape can depend on the values (`x[x > 0]`)
            for t in _tracers_in(self, args[:1]):
                self.shapes_read |= t.shaped_by
            return out
        leaves, treedef = optree.tree_flatten(out, none_is_leaf=True)
        operands = {id(v) for v in _arrays_in((values, kw_values))}
        parameters = _parameters(self, prim, args, kwargs)
        for t in parameters:  # a number sets a shape, an axis, an index: a constant
            if t.sources:
                self.static_needed |= t.sources
        shaped_by = _shaped_by(self, prim, args, kwargs, parameters)
        outs: list[Any] = []
        wrapped: list[Any] = []
        for leaf in leaves:
            if python_op and type(leaf) in _NUMBERS:  # (arithmetic of number arguments)
                outs.append(self.slots)
                wrapped.append(ScalarTracer(self, leaf, self.slots, sources))
                self.layouts.append(_replay_memory.Layout(False, None, np.asarray(leaf)))
                self.slots += 1
            elif isinstance(leaf, np.ndarray | np.generic):
                outs.append(self.slots)
                own = frozenset((self.slots,)) if shaped_by is None else shaped_by
                wrapped.append(RecordTracer(self, leaf, self.slots, sources, own))
                # (an operand returned as it is, `np.real(x)` of a real `x`: not new memory)
                fresh = id(leaf) not in operands
                self.layouts.append(self.owners.layout(leaf, self.slots, fresh))
                self.slots += 1
                self.largest = max(self.largest, leaf.nbytes)
            else:
                if leaf is None or prim.impl not in _STATIC_RESULTS:
                    if sources:
                        self.static_needed |= sources
                    elif self.replayable:  # a Python value computed from the arrays
                        self.replayable = False
                        self.why = f"`{prim.name}` returned {type(leaf).__name__}"
                outs.append(None)
                wrapped.append(leaf)
        step = _Step(impl, _replace(self, args, _slot, _snapshot), kwargs and {
            k: _replace(self, v, _slot, _snapshot) for k, v in kwargs.items()
        }, outs, treedef)  # fmt: skip
        if values and type(values[0]) is np.ndarray:
            step.method = _as_method(prim.impl, len(values), kwargs)
            if prim.impl is np.broadcast_to and values[0].shape == np.shape(out):
                step.method = ""  # to its own shape: the array itself (only ever read)
        self.steps.append(step)
        return optree.tree_unflatten(treedef, wrapped)

    def concretization(self, what: str, fix: str) -> BaseException:
        return NotRecordable(what)

    def _check_errstate(self, prim: Primitive) -> None:
        """A call under an `np.errstate` of `f`'s own that raises (or calls a function)
        where the caller's does not: a replay, under the caller's, would go on where `f`
        raises (and may catch it). Other differences change warnings only."""
        state = cast("dict[str, str]", np.geterr())
        if any(v in ("raise", "call") and v != self.errstate[k] for k, v in state.items()):
            self.replayable = False
            self.why = self.why or f"`{prim.name}` ran under an `np.errstate` that raises"

    def record_effect(self, fn: Callable[..., Any], args: list[Any]) -> None:
        """Record `fn(*args)`, a call made for what it does (no result): every replay
        makes it (`vmapx.debug.print`)."""
        step = _Step(fn, _replace(self, tuple(args), _slot, _snapshot), {}, [], _NO_RESULT)
        step.effect = True
        self.steps.append(step)


_NO_RESULT = optree.tree_structure(None)

# NumPy functions whose result depends on the shape and dtype of their first argument
_SHAPE_ONLY: frozenset[Any] = frozenset((np.empty_like, np.zeros_like, np.ones_like))


# NumPy functions whose result shapes follow from their operands' shapes and the other
# arguments (never from the values): a shape read from such a result needs no check at
# replay beyond those of its operands. Any other call's result shape that Python reads is
# checked by each replay (`np.extract(x > 0, x).size`: another size on other data).
_SHAPE_STABLE = frozenset((
    np.reshape, np.transpose, np.moveaxis, np.swapaxes, np.broadcast_to, np.expand_dims,
    np.squeeze, np.sum, np.mean, np.prod, np.max, np.min, np.any, np.all, np.matmul, np.dot,
    np.einsum, np.tensordot, np.concatenate, np.stack, np.real, np.imag, np.copy, np.conj,
    np.ravel, np.take_along_axis, np.zeros_like, np.ones_like, np.empty_like, np.full_like,
    np.cumsum, np.cumprod, np.flip, np.roll, np.sort, np.argsort, np.abs, np.atleast_1d,
    np.atleast_2d, np.broadcast_arrays, np.take, np.argmax, np.argmin, np.std, np.var,
    np.diag, np.diagonal, np.trace, np.clip, np.linalg.inv, np.linalg.solve, np.linalg.norm,
    astype,
))  # fmt: skip
_SHAPE_STABLE_NAMES = frozenset(("ndarray.__setitem__",))


def _shaped_by(
    trace: RecordTrace, prim: Primitive, args: tuple[Any, ...], kwargs: dict[Any, Any],
    parameters: list[Any],
) -> frozenset[Any] | None:  # fmt: skip
    """The slots whose shapes fix the shapes of `prim`'s results on these arguments, if
    its result shapes follow from its operands' (else None: the results' own). A value
    computed from the arrays that sets a parameter (`np.reshape(x, (n, -1))` with
    `n = x.sum()`) makes them the results' own too."""
    impl = prim.impl
    if impl is operator.getitem:  # (a boolean mask: as many elements as it has True)
        stable = not any(t.value.dtype == bool for t in _tracers_in(trace, args[1:]))
    elif impl is np.where:  # (np.where(condition) is np.nonzero)
        stable = len(args) == 3
    else:
        owner = getattr(impl, "__self__", None)
        stable = (impl in _SHAPE_STABLE or type(impl) is np.ufunc or type(owner) is np.ufunc
                  or _is_python_op(impl) or prim.name in _SHAPE_STABLE_NAMES)  # fmt: skip
    if not stable or any(not t.sources for t in parameters):
        return None
    found: frozenset[Any] = frozenset()
    for t in _tracers_in(trace, (args, kwargs)):
        found |= t.shaped_by
    return found


# The operands of NumPy functions (the arrays they compute on): `(positions, keywords)`,
# positions None for all. A traced value anywhere else sets a parameter of the call (a
# shape, an axis, `k`, `repeats`): a number there is recorded as a constant (`process`).
# A function not listed has no operands known: each number it takes is a constant.
_Operands = tuple[tuple[int, ...] | None, frozenset[str]]
_FIRST: _Operands = ((0,), frozenset(("out", "where", "initial")))
_TWO: _Operands = ((0, 1), frozenset(("out",)))
_ALL: _Operands = (None, frozenset(("out",)))
_OPERANDS: dict[Any, _Operands] = {
    **dict.fromkeys((
        np.reshape, np.transpose, np.moveaxis, np.swapaxes, np.broadcast_to, np.expand_dims,
        np.squeeze, np.sum, np.mean, np.prod, np.max, np.min, np.any, np.all, np.std, np.var,
        np.real, np.imag, np.copy, np.conj, np.ravel, np.zeros_like, np.ones_like,
        np.empty_like, np.cumsum, np.cumprod, np.flip, np.roll, np.sort, np.argsort, np.argmax,
        np.argmin, np.diag, np.diagonal, np.trace, np.linalg.inv, np.linalg.norm, astype,
        np.repeat, np.tile, np.round, np.nan_to_num,
    ), _FIRST),
    **dict.fromkeys((
        np.dot, np.tensordot, np.take, np.take_along_axis, np.linalg.solve, np.full_like,
    ), _TWO),
    **dict.fromkeys((
        np.concatenate, np.stack, np.atleast_1d, np.atleast_2d, np.atleast_3d,
        np.broadcast_arrays, np.where, np.result_type, np.can_cast, np.shape, np.ndim,
        np.size, np.iscomplexobj, np.isrealobj,
    ), _ALL),
    np.clip: ((0, 1, 2), frozenset(("a_min", "a_max", "min", "max", "out"))),
    np.full: ((1,), frozenset(("fill_value",))),
}  # fmt: skip
_UFUNC_OPERANDS: dict[str, _Operands] = {
    "__call__": (None, frozenset(("out", "where"))),
    "reduce": _FIRST, "accumulate": _FIRST, "reduceat": _FIRST,
    "outer": (None, frozenset(("out",))), "at": (None, frozenset()),
}  # fmt: skip
_NONE: _Operands = ((), frozenset())


def _parameters(
    trace: RecordTrace, prim: Primitive, args: tuple[Any, ...], kwargs: dict[Any, Any]
) -> list[Any]:
    """This trace's tracers in `prim`'s arguments that are not its operands (`_OPERANDS`).
    Indices are operands (`x[n]`, `x[idx]`: their shapes set the result's, a mask's is
    checked by `_shaped_by`; a number in a slice, `x[:n]`, is read)."""
    impl = prim.impl
    owner = getattr(impl, "__self__", None)
    if type(impl) is np.ufunc:
        operands = _UFUNC_OPERANDS["__call__"]
    elif type(owner) is np.ufunc:
        operands = _UFUNC_OPERANDS.get(impl.__name__, _NONE)
    elif _is_python_op(impl) or prim.name == "ndarray.__setitem__":
        return []  # (an index's shape sets the result's, not its value; a slice is read)
    elif impl is np.einsum:  # (subscripts as lists of ints between the operands)
        return [t for a in args if not _is_tracer(trace, a) for t in _tracers_in(trace, a)]
    else:
        operands = _OPERANDS.get(impl, _NONE)
    positions, keywords = operands
    found = []
    for i, a in enumerate(args):
        if positions is not None and i not in positions:
            found += _tracers_in(trace, a)
    for k, v in kwargs.items():
        if k not in keywords:
            found += _tracers_in(trace, v)
    return found


def _is_tracer(trace: RecordTrace, x: Any) -> bool:
    return type(x) in (RecordTracer, ScalarTracer) and x._trace is trace


@functools.cache
def _functional_at(ufunc: np.ufunc) -> Callable[..., Any]:
    """`ufunc.at` on a copy of its target, returning it (NumPy's writes in place)."""

    def at(target: Any, *args: Any, **kwargs: Any) -> Any:
        out = np.array(target, copy=True)
        ufunc.at(out, *args, **kwargs)
        return out

    at.__name__ = f"{ufunc.__name__}_at"
    return at


def _sources(trace: RecordTrace, x: Any) -> frozenset[Any] | None:
    """The number arguments the tracers in `x` depend on, if they depend on no array
    argument (else None)."""
    found: set[Any] = set()
    for t in _tracers_in(trace, x):
        if not t.sources:
            return None
        found |= t.sources
    return frozenset(found) if found else None


def _tracers_in(trace: RecordTrace, x: Any) -> list[Any]:
    if type(x) in (RecordTracer, ScalarTracer) and x._trace is trace:
        return [x]
    if type(x) in (list, tuple):
        return [t for v in x for t in _tracers_in(trace, v)]
    if type(x) is dict:
        return [t for v in x.values() for t in _tracers_in(trace, v)]
    return []


def _arrays_in(x: Any) -> list[Any]:
    """The NumPy arrays in `x` (an argument: lists, tuples and dicts walked)."""
    if type(x) is np.ndarray:
        return [x]
    if type(x) in (list, tuple):
        return [a for v in x for a in _arrays_in(v)]
    if type(x) is dict:
        return [a for v in x.values() for a in _arrays_in(v)]
    return []


def _has_tracer(trace: RecordTrace, x: Any) -> bool:
    if type(x) in (RecordTracer, ScalarTracer) and x._trace is trace:
        return True
    if type(x) in (list, tuple):
        return any(_has_tracer(trace, v) for v in x)
    if type(x) is dict:
        return any(_has_tracer(trace, v) for v in x.values())
    return False


def _replace(
    trace: RecordTrace, x: Any, by: Callable[[RecordTracer], Any],
    array: Callable[..., Any] | None = None,
) -> Any:  # fmt: skip
    """`x` (an argument, lists and tuples walked) with this trace's tracers `t` replaced
    by `by(t)` (their values to compute, their slots to record) and, if `array` is
    given, its other arrays `a` by `array(a)`."""
    if type(x) in (RecordTracer, ScalarTracer) and x._trace is trace:
        return by(x)
    if type(x) in (list, tuple):
        return type(x)(_replace(trace, v, by, array) for v in x)
    if array is not None and type(x) is np.ndarray:
        return array(x)
    return x


def _value(t: RecordTracer) -> Any:
    return t.value


def _slot(t: RecordTracer) -> _Slot:
    return _Slot(t.slot)


def _snapshot(a: np.ndarray) -> np.ndarray:
    """An array a step keeps: one `f` could still write into (its own `acc`, a
    closure's buffer, memory behind an object that is no array) is copied, with the
    values this call used."""
    root = _replay_memory.memory_root(a)
    return a.copy(order="K") if type(root) is not np.ndarray or root.flags.writeable else a


def _slots_in(x: Any) -> list[int]:
    if type(x) is _Slot:
        return [x.index]
    if type(x) in (list, tuple):
        return [i for v in x for i in _slots_in(v)]
    return []


class _Step:
    """One recorded NumPy call: `impl(*args, **kwargs)`, where the templates `args`
    and `kwargs` hold `_Slot`s for recorded arrays; its array results go to the slots
    `outs` (None for a static result), `single` when it is one array."""

    __slots__ = ("impl", "args", "kwargs", "outs", "treedef", "single", "reads", "positional",
                 "into", "method", "effect")  # fmt: skip

    def __init__(
        self,
        impl: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[Any, Any],
        outs: list[Any],
        treedef: Any,
    ) -> None:
        self.impl = impl
        self.args = args
        self.kwargs = kwargs or None
        self.reads = _slots_in(args) + _slots_in(list(kwargs.values()) if kwargs else [])
        self.positional = [a.index for a in args if type(a) is _Slot]
        self.into: int | None = None  # an operand's slot whose array takes the result
        # the same call as a method of the first argument ("": the first argument itself)
        self.method: str | None = None
        self.outs = outs
        self.treedef = treedef
        self.single = outs[0] if treedef.num_leaves == 1 and treedef.num_nodes == 1 else None
        self.effect = False  # a call made for what it does (`vmapx.debug.print`), no result


class GeneratedProgram:
    """The steps of one recording, as one generated Python function (straight-line
    code: a local variable per slot, one line per NumPy call), and where the results
    are. `pruned`: it leaves out steps whose values no result needs (`_live`)."""

    __slots__ = ("replay", "out_tree", "copy", "checked", "text", "pruned")

    def __init__(
        self, steps: list[Any], n_inputs: int, outputs: list[Any], out_tree: Any, fresh: list[bool],
        large: frozenset[Any] = frozenset(), guards: dict[int, tuple[Any, ...]] | None = None,
        copy: list[bool] | None = None, pruned: bool = False,
    ) -> None:  # fmt: skip
        self.replay, self.text = _compile(steps, n_inputs, outputs, large, guards or {})
        self.out_tree = out_tree
        # results copied on every call: constants, and arrays in memory the program does
        # not make anew (a view of a constant it holds, of an argument)
        self.copy = copy if copy is not None else [type(o) is not _Slot for o in outputs]
        # outputs the replay always makes as new arrays of their own need no check
        self.checked = not all(fresh)
        self.pruned = pruned

    def run(self, arrays: list[Any]) -> Any:
        results = self.replay(*arrays)
        if self.checked:
            results = fresh_arrays(results, arrays, self.copy)
        return optree.tree_unflatten(self.out_tree, results)


# NumPy functions that, on an ndarray, are its method with the same positional
# arguments and these keywords (the function's Python wrapper costs a few microseconds)
_METHODS = {
    np.sum: ("sum", {"axis", "dtype", "keepdims"}),
    np.reshape: ("reshape", {"order"}),
    np.transpose: ("transpose", set()),
}


def _as_method(impl: Callable[..., Any], n_args: int, kwargs: dict[Any, Any]) -> str | None:
    entry = _METHODS.get(impl)
    if entry is None or (impl is not np.sum and n_args > 2):
        return None
    name, keywords = entry
    return name if kwargs.keys() <= keywords else None


def _is_name(key: Any) -> bool:
    return isinstance(key, str) and key.isidentifier() and not keyword.iskeyword(key)


def _live(steps: list[Any], results: list[int], layouts: list[Any], guarded: Any = ()) -> list[Any]:
    """The steps to replay, in order: those whose arrays the results need, and those
    that could raise for other values. The others made values that `f` computed and
    dropped (the value of a loss under `grad`, the primal output of a `vjp` whose
    pullback alone is used): a recorded step only makes arrays (writes were recorded
    functionally, calls returning None are not replayable), so leaving it out changes
    no result. (Floating-point warnings of a dropped elementwise step are not repeated.)
    Steps making a `guarded` slot (one whose shape each replay checks) stay."""
    needed = set(results) | set(guarded)
    live = []
    for step in reversed(steps):
        if any(o in needed for o in step.outs if o is not None) or not _droppable(step, layouts):
            live.append(step)
            needed.update(step.reads)
    live.reverse()
    return live


# NumPy functions whose only errors depend on shapes and dtypes (fixed by the signature:
# the recording would have raised); ufuncs on numbers only warn about values
_DROPPABLE = frozenset((np.sum, np.mean, np.reshape, np.transpose, np.broadcast_to, np.real,
                        np.imag, np.squeeze, np.expand_dims, np.moveaxis, np.swapaxes))  # fmt: skip


def _droppable(step: _Step, layouts: list[Any]) -> bool:
    """Whether leaving `step` out can change nothing but its result (NumPy calls that
    can raise for some values, such as indexing by a computed array, `np.linalg.inv`
    or a `np.frompyfunc` ufunc of Python objects, stay)."""
    impl = step.impl
    if type(impl) is np.ufunc:
        return all(layouts[o].dtype != object for o in step.outs if o is not None) and not any(
            type(layouts[r]) is NumberLayout for r in step.reads
        )
    if impl is operator.getitem:  # indices fixed by the recording: errors are too
        return not _slots_in(step.args[1:])
    return impl in _DROPPABLE


class ShapeChanged(Exception):  # noqa: N818 (a signal, not an error)
    """A replay met a value whose shape differs from the recording's, where Python code
    read that shape (`np.extract(x > 0, x).size`): `f` runs instead."""


def _compile(
    steps: list[Any], n_inputs: int, outputs: list[Any], large: frozenset[Any] = frozenset(),
    guards: dict[int, tuple[Any, ...]] | None = None,
) -> tuple[Callable[..., Any], str]:  # fmt: skip
    """`replay(*inputs) -> results`: the steps as Python source, compiled once; and the
    source as a person reads it (NumPy's functions by name, other constants listed).
    The `large` slots are deleted after their last use (`_freed_after`). After a step
    making a slot of `guards`, the replay checks that slot's shape."""
    names: dict[str, Any] = {"ShapeChanged": ShapeChanged}
    freed = _freed_after(steps, outputs, large)
    guards = guards or {}

    def const(value: Any) -> str:
        name = f"c{len(names)}"
        names[name] = value
        return name

    def expr(template: Any) -> str:
        if type(template) is _Slot:
            return f"v{template.index}"
        if type(template) in (list, tuple) and _slots_in(template):
            items = ", ".join(expr(t) for t in template)
            return f"[{items}]" if type(template) is list else f"({items},)"
        return const(template)

    lines = [f"def replay({', '.join(f'v{i}' for i in range(n_inputs))}):"]
    # (keyword names come from NumPy calls: identifiers, checked by `_record`)
    for i, step in enumerate(steps):
        call_args = [expr(a) for a in step.args]
        call_args += [f"{k}={expr(v)}" for k, v in (step.kwargs or {}).items()]
        if step.into is not None:  # (see `_replay_memory`)
            call_args.append(f"out=v{step.into}")
        if step.method == "":  # the first argument itself
            call = call_args[0]
        elif step.method is not None:  # `a.sum(...)`: the same, without NumPy's wrapper
            call = f"{call_args[0]}.{step.method}({', '.join(call_args[1:])})"
        else:
            call = f"{const(step.impl)}({', '.join(call_args)})"
        if step.effect:
            lines.append(f"    {call}")
        elif step.single is not None:
            lines.append(f"    v{step.single} = {call}")
        else:
            targets = "".join(f"v{o}, " if o is not None else "_, " for o in step.outs)
            lines.append(f"    {targets}= {const(step.treedef)}.flatten_up_to({call})")
        for o in step.outs:
            if o in guards:
                lines.append(f"    if v{o}.shape != {guards[o]!r}: raise ShapeChanged")
        if i in freed:
            lines.append(f"    del {', '.join(f'v{s}' for s in freed[i])}")
    results = ", ".join(f"v{o.index}" if type(o) is _Slot else const(o) for o in outputs)
    lines.append(f"    return [{results}]")
    source = "\n".join(lines)
    exec(source, names)  # noqa: S102 (our own generated source)
    return names["replay"], _readable(source, names)


def _freed_after(
    steps: list[Any], outputs: list[Any], large: frozenset[Any]
) -> dict[int, list[int]]:
    """Per step, the `large` slots (not results) that no later step reads: a replay
    deletes them there, so that the memory of a chunk's intermediates is reused by the
    next chunk's (the locals of a function live until it returns)."""
    if not large:
        return {}
    last: dict[int, int] = {}
    for i, step in enumerate(steps):
        for s in step.outs:
            if s in large:
                last.setdefault(s, i)
        for s in step.reads:
            if s in large:
                last[s] = i
    for o in outputs:
        if type(o) is _Slot:
            last.pop(o.index, None)
    freed: dict[int, list[int]] = {}
    for s, i in sorted(last.items()):
        freed.setdefault(i, []).append(s)
    return freed


def _readable(source: str, names: dict[Any, Any]) -> str:
    """`source` with NumPy's functions and small constants written out; the other
    constants (arrays, pytree structures) keep their names and are listed below it."""
    listed: list[str] = []

    def show(match: re.Match[str]) -> str:
        name = match.group(0)
        value = names[name]
        spelled = _spelled(value)
        if spelled is None:
            listed.append(f"#   {name} = {_described(value)}")
            return name
        return spelled

    text = re.sub(r"\bc\d+\b", show, source)
    return text + ("\n# where\n" + "\n".join(dict.fromkeys(listed)) if listed else "")


def _spelled(value: Any) -> str | None:
    """`value` as Python source, where that is short and exact; else None."""
    if isinstance(value, np.ufunc):
        return f"np.{value.__name__}"
    if callable(value) and not isinstance(value, type):
        module = getattr(value, "__module__", None) or ""
        name = getattr(value, "__name__", None)
        if module in ("_operator", "operator"):
            return f"operator.{name}"
        if module == "builtins" and name is not None and getattr(builtins, name, None) is value:
            return cast(str, name)
        for prefix, namespace in _NAMESPACES:
            if name is not None and getattr(namespace, name, None) is value:
                return f"{prefix}{name}"
        return None
    if value is None or type(value) in (bool, int, float, complex, str, slice):
        return repr(value)
    if value is Ellipsis:
        return "..."
    if type(value) in (tuple, list):
        items = [_spelled(v) for v in value]
        if all(item is not None for item in items):  # (then they are all str)
            inner = ", ".join(cast("list[str]", items)) + (
                "," if type(value) is tuple and len(items) == 1 else ""
            )
            return f"({inner})" if type(value) is tuple else f"[{inner}]"
    if isinstance(value, np.dtype):
        return f"np.dtype({value.str!r})"
    if _core.is_numpy_scalar(value) and value.ndim == 0 and value.dtype.kind in "biufc":
        return f"np.{value.dtype.name}({value.item()!r})"
    return None


def _described(value: Any) -> str:
    if _core.is_ndarray(value):
        if value.size <= 6:
            return repr(value)
        return f"<{value.dtype} array of shape {value.shape}>"
    text = repr(value)
    return text if len(text) <= 100 else text[:97] + "..."


_NAMESPACES = (("np.", np), ("np.linalg.", np.linalg), ("np.fft.", np.fft))


# Python's ways to look at what an object is, not at its value: to them a traced number
# (a `ScalarTracer`) is no int or float, so `isinstance(n, float)`, `type(n) is int`,
# `hasattr(n, "shape")` or `np.isscalar(n)` would take another branch than `f` takes
_INSPECTORS = (type, isinstance, issubclass, hasattr, getattr, vars, dir, np.isscalar)
_INSPECTOR_IDS = frozenset(id(i) for i in _INSPECTORS)
_INSPECTING_NAMES = frozenset(("type", "isinstance", "issubclass", "hasattr", "getattr", "vars",
                               "dir", "isscalar", "__class__", "__dict__"))  # fmt: skip
_LIBRARY, _TOOL, _USER = 0, 1, 2
# Python's own library, and the packages vmapx's code calls: code there runs for vmapx
# (not the user) where vmapx calls it
_OPTREE = importlib.util.find_spec("optree")
_TOOL_DIRS = tuple(
    {os.path.join(sysconfig.get_paths()[k], "") for k in ("stdlib", "platstdlib")}
) + (os.path.join(os.path.dirname(_OPTREE.origin), "") if _OPTREE and _OPTREE.origin else "<>",)
_kinds: dict[str, int] = {}


def _code_kind(filename: str) -> int:
    """Whose code a file holds: vmapx's or NumPy's (`_LIBRARY`), the Python library's or
    optree's (`_TOOL`), or the user's (`_USER`: also any other installed package,
    which may be the function `f` itself)."""
    kind = _kinds.get(filename)
    if kind is None:
        if _core._is_library_file(filename):
            kind = _LIBRARY
        elif "site-packages" in filename or "dist-packages" in filename:
            kind = _TOOL if filename.startswith(_TOOL_DIRS[-1]) else _USER
        elif filename.startswith(_TOOL_DIRS) or filename.startswith("<frozen "):
            kind = _TOOL
        else:
            kind = _USER
        if len(_kinds) < 4096:
            _kinds[filename] = kind
    return kind


class _TypeWatch:
    """While `f` records with traced numbers, whether the user's Python code it runs can
    look at a type (`_INSPECTORS`, by name, or an alias of one among its globals and
    arguments): `trace.inspected`, where. Python cannot be made to answer `type(n)` with
    the number's type, so such a recording is dropped and number arguments become
    constants of the signature (a guess from the code, on the safe side: a function
    that calls `isinstance` on anything else loses the traced numbers too).

    The code the user's code calls is watched too (`copy.copy(n)` calls `type(n)`); the
    Python library's code that vmapx itself calls (`warnings`, `contextlib`) is not,
    nor what a NumPy call runs on plain arrays (`RecordTrace.calling`). A `sys.settrace`
    function set before (a debugger, coverage) keeps getting every event."""

    def __init__(self, trace: RecordTrace) -> None:
        self.trace = trace
        self.previous: Any = None
        self.seen: dict[int, tuple[types.CodeType, bool]] = {}  # id(code) -> (code, verdict)
        # (the collector's callbacks run wherever it runs: not the user's code)
        self.skip = {id(getattr(c, "__code__", None)) for c in gc.callbacks}

    def __enter__(self) -> None:
        self.previous = sys.gettrace()
        sys.settrace(self.watch)

    def __exit__(self, *exc: object) -> None:
        sys.settrace(self.previous)

    def watch(self, frame: types.FrameType, event: str, arg: Any) -> Any:
        trace = self.trace
        if not (trace.calling or trace.inspected):
            filename = frame.f_code.co_filename
            kind = _kinds.get(filename)  # (inline: this runs for every Python call)
            if kind != _LIBRARY and (kind is not None or _code_kind(filename) != _LIBRARY):
                self._look(frame)
        previous = self.previous
        return None if previous is None else previous(frame, event, arg)

    def _look(self, frame: types.FrameType) -> None:
        code = frame.f_code
        if _code_kind(code.co_filename) == _TOOL:  # watched where the user's code called it
            caller = frame.f_back
            while caller is not None and _code_kind(caller.f_code.co_filename) == _TOOL:
                caller = caller.f_back
            if caller is None or _code_kind(caller.f_code.co_filename) != _USER:
                return
        if id(code) not in self.skip and self._inspects(frame):
            self.trace.inspected = f"{code.co_filename}:{frame.f_lineno}"

    def _inspects(self, frame: types.FrameType) -> bool:
        code = frame.f_code
        entry = self.seen.get(id(code))
        if entry is None or entry[0] is not code:
            names = code.co_names
            scope, builtin = frame.f_globals, frame.f_builtins
            verdict = not _INSPECTING_NAMES.isdisjoint(names) or any(
                id(scope.get(n, builtin.get(n))) in _INSPECTOR_IDS for n in names
            )
            entry = self.seen[id(code)] = (code, verdict)
        # (an alias among its arguments or closure cells: `def f(x, n, _type=type)`)
        return entry[1] or any(id(v) in _INSPECTOR_IDS for v in frame.f_locals.values())


_NOT_REPLAYABLE = object()


def run_plainly(
    f: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[Any, Any], arrays: list[Any]
) -> Any:
    """`f`'s result where no replay runs, its arrays made new as a replay's are."""
    leaves, tree = optree.tree_flatten(f(*args, **kwargs), none_is_leaf=True)
    return optree.tree_unflatten(tree, fresh_arrays(leaves, arrays))


class NumberLayout(_replay_memory.Layout):
    """The layout of a number argument's slot (never written; a Python int can make a
    NumPy call raise, an `OverflowError`: such calls are never left out)."""


class NotReplayable:
    """A signature whose calls run `f`: `why`, in words; `static`: the positions of the
    number arguments that Python code read (they are recorded as constants next time)."""

    __slots__ = ("why", "static", "again")

    def __init__(self, why: str, static: frozenset[Any] = frozenset(), again: bool = False) -> None:
        self.why = why
        self.static = static
        self.again = again  # (a later call may record again: its `vmap` may run in chunks)


def _restore_generators(legacy: tuple[Any, ...], hidden: list[Any]) -> None:
    if _legacy_random.moved(legacy):
        _legacy_random.restore(legacy)
    _legacy_random.restore_hidden(hidden)


def _cache_bound(largest: int, results: list[Any]) -> bool:
    """Whether a call whose largest array had `largest` bytes is one that `vmap` runs in
    chunks (`_autochunk`'s rule): a whole-batch replay would stream it through memory."""
    biggest_result = max((r.nbytes for r in results if _core.is_ndarray(r)), default=0)
    return largest >= LARGE_BYTES and largest >= _autochunk.RESULT_RATIO * biggest_result


def record(
    f: Callable[..., Any], leaves: list[Any], treedef: Any, numbers: frozenset[Any]
) -> tuple[Any, Any]:
    """Run `f` recording its NumPy calls, with the array leaves and the leaves at the
    positions `numbers` traced: `(GeneratedProgram or NotReplayable, f's result)`."""
    positions = [
        i for i, x in enumerate(leaves) if type(x) is np.ndarray or i in numbers
    ]  # fmt: skip
    inputs = [leaves[i] for i in positions]
    trace = push_trace(RecordTrace(len(positions)))
    trace.layouts = [
        NumberLayout(False, None, np.asarray(x)) if i in numbers
        else _replay_memory.Layout(False, None, x)
        for i, x in zip(positions, inputs, strict=True)
    ]  # fmt: skip
    # random generators `f` reaches other than as arguments: a replay would repeat their
    # numbers (as `vmap` finds them, `vmapx._legacy_random`)
    legacy = _legacy_random.snapshot()
    hidden = _legacy_random.snapshot_hidden(_legacy_random.hidden_generators(f, leaves))
    watch = _TypeWatch(trace) if numbers else contextlib.nullcontext()
    try:
        wrapped = list(leaves)
        for slot, i in enumerate(positions):
            kind = ScalarTracer if i in numbers else RecordTracer
            wrapped[i] = kind(trace, leaves[i], slot, frozenset((slot,)) if i in numbers else None)
        args, kwargs = optree.tree_unflatten(treedef, wrapped)
        try:
            with watch:
                out = f(*args, **kwargs)
        except NotRecordable as e:
            trace.replayable = False
            trace.why = trace.why or str(e)
            out = _NOT_REPLAYABLE
        except Exception:
            if numbers:  # `Jitted._record` runs `f` again, plainly: with the same draws
                _restore_generators(legacy, hidden)
            raise
    finally:
        pop_trace(trace)
    if _legacy_random.moved(legacy) or (hidden and _legacy_random.hidden_moved(hidden)):
        trace.replayable = False
        trace.why = trace.why or "it draws from a random generator it does not take as an argument"
    static = frozenset(positions[slot] for slot in trace.static_needed)
    if trace.inspected:  # it took the other branch for a traced number: numbers are constants
        static = numbers
        trace.why = f"Python code looks at the type of a value at {trace.inspected}"
        out = _NOT_REPLAYABLE
    if out is _NOT_REPLAYABLE:  # run it again, plainly (drawing the numbers it drew)
        _restore_generators(legacy, hidden)
        args, kwargs = optree.tree_unflatten(treedef, leaves)
        return NotReplayable(trace.why, static), run_plainly(f, args, kwargs, inputs)
    out_leaves, out_tree = optree.tree_flatten(out, none_is_leaf=True)
    ours = [type(x) in (RecordTracer, ScalarTracer) and x._trace is trace for x in out_leaves]
    results = [x.value if mine else x for x, mine in zip(out_leaves, ours, strict=True)]
    if any(isinstance(x, Tracer) for x in results):
        trace.replayable = False  # a tracer of another transform came out (an error below)
        trace.why = "a traced value of another transform came out"
    constant = [not mine for mine in ours]
    result = optree.tree_unflatten(out_tree, fresh_arrays(results, inputs, constant))
    if not trace.replayable or static:
        return NotReplayable(trace.why or "Python reads a number argument", static), result
    if _cache_bound(trace.largest, results):
        why = f"it makes intermediates of {trace.largest >> 20} MiB, larger than its results"
        return NotReplayable(why, again=True), result
    outputs = [
        _Slot(x.slot) if mine else x for x, mine in zip(out_leaves, ours, strict=True)
    ]  # fmt: skip
    steps = [s for s in trace.steps if any(o is not None for o in s.outs) or s.effect]
    if any(not _is_name(k) for step in steps for k in step.kwargs or ()):
        return NotReplayable("a keyword the generated code cannot spell"), result
    slots = [o.index for o in outputs if type(o) is _Slot]
    guards = {slot: trace.layouts[slot].shape for slot in sorted(trace.shapes_read)}
    live = _live(steps, slots, trace.layouts, guards)
    fresh = _replay_memory.plan(live, trace.layouts, slots, trace.owners.unknown)
    fresh_outputs = [type(o) is _Slot and fresh[o.index] is True for o in outputs]
    copy = [type(o) is not _Slot or fresh[o.index] is None for o in outputs]
    large = frozenset(
        s for s, layout in enumerate(trace.layouts)
        if s >= len(inputs) and math.prod(layout.shape) * layout.dtype.itemsize >= FREE_BYTES
    )  # fmt: skip
    program = GeneratedProgram(
        live, len(inputs), outputs, out_tree, fresh_outputs, large, guards, copy,
        pruned=len(live) < len(steps),
    )  # fmt: skip
    return program, result
