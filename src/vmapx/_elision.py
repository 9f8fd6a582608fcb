"""Temporary elision: a binary operator writes its result into a dead temporary.

In plain NumPy `(a - b) ** 2` squares the temporary `a - b` in place, because nothing
else can see it (CPython's reference count says so). Under `vmap` the temporary is a
`BatchTracer` whose array NumPy never sees, so without help every step of an
expression allocates a new batch-sized array and peak memory grows with the length of
the expression. Here a binary operator on a batched temporary does the same as NumPy:
it computes into the temporary's array.

When it is safe, all of which is checked on every call:

- the left (or, for a reflected operator, the right) operand is a `BatchTracer` held
  only by the interpreter's value stack: its reference count equals the count measured
  at import time for a temporary, and the calling Python frame is executing a binary
  operator instruction (not a call: C code such as a compiled extension may hold the
  object without a reference of its own);
- its array is held by that tracer alone (reference count again), owns its memory, is
  writable, and is neither the caller's input nor a view of another value;
- the result has the array's shape and dtype (no broadcasting up, no promotion), and
  the other operand is a plain value or a tracer of the same `vmap`.

The measurement at import time runs the same code on probe objects in each way a
value can be named (a temporary, a local, a parameter, a global, a closure cell); if a
temporary cannot be told apart from all of them on this Python, elision is off. One
case cannot be seen from Python: a tracer stored into a NumPy object array and used by
an operator on that array, whose loop holds the element without a reference. So that
this can never give a wrong value, the consumed tracer is poisoned: any later use
raises an error that names the cause and the switch (`vmapx.config.elide = False`).
"""

from __future__ import annotations

import dis
import sys
from typing import Any

import numpy as np

from . import _chunk_outputs, _config, _core
from ._batching import BatchTrace, BatchTracer, aligned_operands
from ._compat import NUMPY2

# the operators whose result has the operands' dtype for inexact operands
ELIDABLE = frozenset((np.add, np.subtract, np.multiply, np.true_divide, np.power))

_BINARY_OP = dis.opmap.get("BINARY_OP")  # Python >= 3.11 (one instruction for all)


def from_binary_op(frame: Any) -> bool:
    """Whether `frame` is executing a binary-operator instruction."""
    return bool(frame.f_code.co_code[frame.f_lasti] == _BINARY_OP)


def refs_of_val(holder: Any) -> int:
    """The reference count of `holder.val`, as seen from here."""
    val = holder.val
    return sys.getrefcount(val)


def refs_of_base(holder: Any) -> int:
    """The reference count of `holder.val.base`, as seen from here."""
    base = holder.val.base
    return sys.getrefcount(base)


class _Consumed:
    """What a tracer holds after an operator reused its array: any use raises."""

    __slots__ = ()

    def _fail(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(
            "vmapx: a batched value was used after an operator wrote its result into "
            "that value's memory (temporary elision). The value was reachable only "
            "through something CPython does not count, such as a NumPy object array "
            "holding vmapx values. Turn elision off with `vmapx.config.elide = False`, "
            "or keep the values in a list instead of an object array."
        )

    def __getattr__(self, name: str) -> Any:
        self._fail()

    __array__ = __array_ufunc__ = __array_function__ = __len__ = __getitem__ = _fail


CONSUMED = _Consumed()


def into_temporary(ufunc: np.ufunc, temp: BatchTracer, other: Any, caller: Any, left: bool) -> Any:
    """`ufunc(temp, other)` (or `ufunc(other, temp)`) computed into `temp`'s array, or
    None where that is not safe (the caller then takes the ordinary path). The operator
    has checked `temp`'s reference count; `caller` is the frame that ran the operator."""
    if not (enabled() and from_binary_op(caller)):
        return None
    trace = temp._trace
    if temp._view is not None or type(trace) is not BatchTrace:
        return None
    if _core._top_in((temp, other), None) is not trace:  # also: trace alive, fresh
        return None
    val = temp.val
    if type(val) is not np.ndarray or val.dtype.kind not in "fc" or not val.flags.writeable:
        return None
    base = val.base  # a view (a transposed layout) of an array that only it holds is fine
    if base is not None and (type(base) is not np.ndarray or base.base is not None):
        if not (_chunk_outputs.active and _chunk_outputs.is_offered(base)):
            return None  # (else: a chunk's output slice, held as a new array would be)
    del val, base  # the counts below must see only the tracer's (and the view's) reference
    if refs_of_val(temp) != _VAL_REFS:
        return None
    if temp.val.base is not None and refs_of_base(temp) != _BASE_REFS:
        return None
    if left:
        val, o = aligned_operands(trace, (temp, other))
    else:
        o, val = aligned_operands(trace, (other, temp))
    if val is not temp.val or isinstance(o, _core.Tracer):
        return None
    if type(o) is not np.ndarray and type(o) not in (float, int, bool, complex):
        if not isinstance(o, np.generic):
            return None
    if np.ndim(o) > val.ndim or np.result_type(val, o) != val.dtype:
        return None
    shape = np.shape(o)
    if shape and shape != val.shape and np.broadcast_shapes(val.shape, shape) != val.shape:
        return None
    temp.val = CONSUMED
    if left and ufunc is np.power and type(o) in (int, float) and o == 2:
        np.square(val, out=val)  # what NumPy's `x ** 2` does: faster, the same bits
    elif left:
        ufunc(val, o, out=val)
    else:
        ufunc(o, val, out=val)
    return trace.wrap(val)  # (counted as work for auto-chunking, like any result)


def enabled() -> bool:
    """Whether operators may compute into temporaries (this Python and NumPy, config)."""
    return _ENABLED and _config.config.elide


# -- calibration: how a temporary looks from inside an operator, on this Python ------


class _Probe:
    __slots__ = ("val",)

    def __init__(self) -> None:
        self.val: np.ndarray[Any, Any] = np.empty(2)

    def __mul__(self, other: Any) -> tuple[int, bool]:  # the shape of the real operator
        return sys.getrefcount(self), from_binary_op(sys._getframe(1))

    __rmul__ = __mul__


_GLOBAL_PROBE = _Probe()


def _named_counts() -> list[tuple[int, bool]]:
    local = _Probe()
    cell = _Probe()

    def from_cell() -> tuple[int, bool]:
        return cell * 1

    def from_param(p: _Probe) -> tuple[int, bool]:
        return p * 1

    kept = _Probe()
    alias = kept  # noqa: F841 (a second name)
    return [
        local * 1, 1 * local, from_param(_Probe()), _GLOBAL_PROBE * 1, from_cell(), kept * 1
    ]  # fmt: skip


def _calibrate() -> tuple[bool, int, int, int]:
    if _BINARY_OP is None or not NUMPY2:
        return False, 0, 0, 0
    temps = [_Probe() * 1, 1 * _Probe()]
    named = _named_counts()
    temp_refs = temps[0][0]
    ok = all(binop for _, binop in temps + named) and temps[1][0] == temp_refs
    ok = ok and all(count > temp_refs for count, _ in named)
    sole = _Probe()
    val_refs = refs_of_val(sole)
    shared = _Probe()
    other = shared.val  # noqa: F841 (a second reference)
    ok = ok and refs_of_val(shared) > val_refs
    view = _Probe()
    view.val = np.empty((2, 2)).T
    base_refs = refs_of_base(view)
    seen = view.val.base  # noqa: F841 (a second reference)
    ok = ok and refs_of_base(view) > base_refs
    return ok, temp_refs, val_refs, base_refs


_ENABLED, TEMP_REFS, _VAL_REFS, _BASE_REFS = _calibrate()
