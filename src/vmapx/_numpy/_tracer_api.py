"""The NumPy surface of every tracer: the dispatch protocols, operators, methods.

Installed on `vmapx._core.Tracer`, so batching and autodiff tracers share one
implementation: each entry turns a NumPy-style call into `bind(primitive, ...)`.
"""

from __future__ import annotations

import builtins
import math
import operator
import sys
from typing import Any, cast

import numpy as np

from .. import _elision, _passthrough, _payload, _scalars
from .._batching import BatchTracer, defbatch
from .._compat import NUMPY2, astype
from .._core import Tracer, bind, find_top_trace, is_ndarray, is_numpy_scalar
from .._registry import (
    FUNCTIONS,
    GETITEM,
    UFUNC_PRIMITIVES,
    Primitive,
    primitive,
    ufunc_primitive,
)
from . import _masked

# Primitives for ndarray behaviour that has no NumPy function of its own (and GETITEM,
# from the registry).


def _setitem_impl(x: Any, idx: Any, v: Any) -> Any:
    out = x.copy()
    out[idx] = v
    return out


SETITEM = Primitive("ndarray.__setitem__", _setitem_impl)


def _array_ufunc(self: Tracer, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
    out = kwargs.pop("out", None)
    if method == "at":
        target, *rest = inputs
        if is_ndarray(target) and not target.flags.writeable:
            # NumPy's error for a read-only target (an unmapped argument): not the loop,
            # whose `ufunc.at` would write the caller's memory through the read-only
            # view (NumPy's `at` does not check the flag)
            raise ValueError("assignment destination is read-only")
        new = bind(ufunc_primitive(ufunc, "at"), (target, *rest), kwargs)
        assign(target, new)
        return None
    prim = UFUNC_PRIMITIVES.get((ufunc, method)) or ufunc_primitive(ufunc, method)
    if _scalars.SEEN.weak and _scalars.any_weak(inputs):
        inputs = _scalars.strengthen(inputs)[0]
    if out is None or all(o is None for o in out):
        return _scalars.mark(bind(prim, inputs, kwargs))
    _check_out_arrays(out)
    where = kwargs.get("where", True)
    if method == "__call__" and where is not True:
        # `out` keeps its values off the mask: computed everywhere (NumPy's masked-off
        # places would be uninitialized memory), then merged; the off-mask values may be
        # invalid, and warn for nothing
        kwargs = {k: v for k, v in kwargs.items() if k != "where"}
        with np.errstate(all="ignore"):
            result = bind(prim, inputs, kwargs)
        results = result if ufunc.nout > 1 else (result,)
        results = [
            r if o is None else np.where(where, r, o) for r, o in zip(results, out, strict=True)
        ]
    else:
        result = bind(prim, inputs, kwargs)
        results = result if ufunc.nout > 1 and method == "__call__" else (result,)
    operand = method == "__call__" and ufunc.signature is None  # (gufuncs: their own rules)
    if operand:
        _check_out_casting(ufunc, inputs, out, kwargs)
    elif method != "__call__" and any(
        o is not None and np.shape(o) != np.shape(r) for o, r in zip(out, results, strict=True)
    ):  # (`reduce`, `accumulate`, `outer`, `reduceat`: NumPy's own rule for out=)
        _numpy_on_stand_ins(getattr(ufunc, method), inputs, {**kwargs, "out": out})
    if len(out) == 1:
        return assign(out[0], results[0], operand)
    return tuple(
        r if o is None else assign(o, r, operand) for o, r in zip(out, results, strict=True)
    )


def _check_out_arrays(out: Any, function: bool = False) -> None:
    """NumPy's error for a NumPy scalar given as an output (immutable: no array);
    `function`: to a NumPy function's `out=` (NumPy 1.26 words it its own way)."""
    for o in out if type(out) is tuple else (out,):
        if isinstance(o, Tracer) and _scalars.is_scalar(o):
            old_words = function and not NUMPY2
            raise TypeError(
                "output must be an array" if old_words else "return arrays must be of ArrayType"
            )


def _check_out_casting(
    ufunc: np.ufunc, inputs: tuple[Any, ...], out: tuple[Any, ...], kwargs: dict[Any, Any]
) -> None:
    """NumPy's error where the results may not be cast to the outputs' dtypes (`casting=`,
    "same_kind" by default: `np.add(ints, floats, out=ints)`): the ufunc run on 0-d
    stand-ins with the operands' dtypes raises it (a write would truncate silently)."""

    def stand_in(x: Any) -> Any:
        if isinstance(x, Tracer) or type(x) is np.ndarray or isinstance(x, np.generic):
            return np.zeros((), x.dtype)
        return x  # (Python numbers: NumPy's weak promotion decides)

    probe_out = tuple(None if o is None else np.zeros((), o.dtype) for o in out)
    probe_kwargs = {k: v for k, v in kwargs.items() if k in ("casting", "dtype", "signature")}
    with np.errstate(all="ignore"):
        ufunc(*map(stand_in, inputs), out=probe_out, **probe_kwargs)


def _array_result(func: Any, kwargs: dict[Any, Any]) -> bool:
    """Whether a function that gives NumPy scalars gives a 0-d array for these options:
    `np.einsum(..., optimize=...)` contracts through `tensordot`, whose 0-d result it
    returns as it is."""
    return func is np.einsum and bool(kwargs.get("optimize", False))


def _copyto(dst: Any, src: Any, casting: str = "same_kind", where: Any = True) -> None:
    """`np.copyto` writes into `dst`: functionally when `dst` is traced."""
    if isinstance(dst, Tracer):  # NumPy's casting check (and error) on a stand-in
        number = type(src) in (int, float, complex, bool)  # (weak in NumPy 2: `copyto(u8, 1)`)
        probe = src if number else np.zeros((), np.result_type(src))
        np.copyto(np.zeros((), dst.dtype), probe, casting=casting)  # type: ignore[arg-type]  # (NumPy checks it)
    if where is not True:
        src = np.where(where, src, dst)
    assign(dst, src)


# NumPy functions that write into their first argument: handled as functional writes
IN_PLACE: dict[Any, Any] = {np.copyto: _copyto}
# a traced `dst` never reaches the primitive; one traced only through `src` does
defbatch(np.copyto, lambda func: lambda trace, args, kwargs: _copyto(*args, **kwargs))


def _array_function(
    self: Tracer, func: Any, types: Any, args: tuple[Any, ...], kwargs: dict[Any, Any]
) -> Any:
    in_place = IN_PLACE.get(func)
    if in_place is not None:
        return in_place(*args, **kwargs)
    if func is _NP_ASTYPE and self is not None and args and isinstance(args[0], Tracer):
        return _np_astype(*args, **kwargs)  # (not from `_astype`'s `_call`: self is None)
    if (
        (not args or args[0] is not self)  # (the common case: no scan of the arguments)
        and all(a is not self for a in args)
        and find_top_trace(args, kwargs) is None
    ):
        # reached through `like=self` alone: create where the traced values live
        if _payload.like(self) is not None:
            return func(*args, like=_payload.like(self), **kwargs)
    prim = FUNCTIONS.get(func) or primitive(func)
    out = kwargs.get("out")
    if _scalars.SEEN.weak and func in _PARTS and _scalars.any_weak(args[:1]):
        return _part_of_python_number(prim, args[0])
    if out is None:
        if (func in _scalars.SCALAR_FUNCTIONS and not _array_result(func, kwargs)) or (
            func in _scalars.SCALAR_PRESERVING and args and isinstance(args[0], Tracer)
            and _scalars.is_scalar(args[0])
        ):  # fmt: skip
            return _scalars.mark(bind(prim, args, kwargs))
        return bind(prim, args, kwargs)
    _check_out_arrays(out, function=True)
    kwargs = {k: v for k, v in kwargs.items() if k != "out"}
    result = bind(prim, args, kwargs)
    if np.shape(result) != np.shape(out):  # (each function's own rule: NumPy raises or not)
        _numpy_on_stand_ins(func, args, {**kwargs, "out": out})
    return assign(out, result)


def _numpy_on_stand_ins(func: Any, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> None:
    """`func` run on zero-filled plain stand-ins of one example's traced values, for
    NumPy's own error where it has one: whether an `out=` of another shape than the
    result is taken is each function's rule (the ufunc-based ones broadcast into it,
    `np.sum` or `np.take` require its exact shape)."""

    def stand_in(x: Any, out: bool = False) -> Any:
        if isinstance(x, Tracer) or (out and isinstance(x, np.ndarray)):
            return np.zeros(x.shape, x.dtype)  # (never a write into the caller's array)
        return x

    def walk(x: Any, out: bool = False) -> Any:
        if type(x) in (list, tuple):
            return type(x)(walk(v, out) for v in x)
        return stand_in(x, out)

    with np.errstate(all="ignore"):
        func(*walk(args), **{k: walk(v, k == "out") for k, v in kwargs.items()})


_PARTS = (np.real, np.imag)
_NP_ASTYPE = getattr(np, "astype", None)  # (NumPy 2)


def _np_astype(x: Tracer, dtype: Any, /, *, copy: bool = True, device: Any = None) -> Any:
    """`np.astype` is the method: `copy=False` with the same dtype gives `x` itself (a
    write into the result is a write into `x`), a NumPy scalar's conversion a scalar."""
    if device is not None:  # (NumPy's own check and error)
        astype(np.zeros(0, x.dtype), dtype, device=device)
    return _astype(x, dtype, copy=copy)


def _part_of_python_number(prim: Primitive, x: Any) -> Any:
    """`np.real`/`np.imag` of a Python number per example: NumPy returns its `.real` or
    `.imag`, a Python int for a bool or an int (`True.imag` is 0), else a float."""
    if x.dtype == np.bool_:
        x = astype(x, np.result_type(0))
    return _scalars.mark_weak(bind(prim, (x,), {}))


def assign(target: Any, value: Any, operand: bool = False) -> Any:
    """Write `value` into all of `target` (`out=`), functionally where it is traced.
    `operand`: `target` is a ufunc's output operand (`out=`, `a += b`), which NumPy
    broadcasts the inputs to but never drops dimensions from (as `target[...] = value`
    drops leading ones)."""
    if operand and np.ndim(value) > np.ndim(target):
        raise ValueError(
            f"non-broadcastable output operand with shape {np.shape(target)} doesn't match "
            f"the broadcast shape {np.shape(value)}"
        )
    if isinstance(target, Tracer):
        _check_writeable(target)
        if (
            type(value) is type(target) and value._trace is target._trace
            and not target._aliased and value.shape == target.shape
            and value.dtype == target.dtype
        ):  # fmt: skip
            target._become(value)  # the whole value, as it is: no copy to write into
        else:
            setitem(target, Ellipsis, value)
        return target
    if isinstance(value, Tracer):
        raise _leave_error(value)
    target[...] = value
    return target


def _leave_error(value: Tracer) -> BaseException:
    _passthrough.learn_filler_caller(sys._getframe(1))  # (`np.full(n, traced)`: a retry fills)
    return value._trace.concretization(
        "a traced value was written into a plain NumPy array (`out=` or index assignment)",
        "create the array from the traced value, e.g. `buf = np.zeros_like(x, shape=(n,))`, "
        "so that it is traced too, or build the result with `np.stack`/`np.concatenate`",
    )


def _check_writeable(target: Tracer) -> None:
    """NumPy's error for a write into a read-only array (a tracer of a plain array that
    says `read_only`: `jit`'s recording of an unmapped `vmap` argument)."""
    if getattr(target, "read_only", False):
        raise ValueError("assignment destination is read-only")


def _sequence_into_element(target: Tracer, idx: Any, value: Any) -> bool:
    """Whether `target[idx] = value` writes an array of one or more dimensions, or a
    list, into one element (integer indices, one per axis), which NumPy 2 refuses."""
    items = idx if type(idx) is tuple else (idx,)
    if len(items) != target.ndim or not all(
        isinstance(i, int | np.integer) and not isinstance(i, bool | np.bool_) for i in items
    ):
        return False
    if type(value) in (list, tuple):
        return True
    return (value.ndim if isinstance(value, Tracer) else np.ndim(value)) > 0


def _element_of_sequence(target: Tracer, value: Any) -> Any:
    """The one element NumPy 2 writes for `target[i, j, ...] = value` with a sequence
    `value`, or its error. A boolean array takes the sequence's truth: a list's as
    Python's (`[0]` is true), an array's of one element as that element's; every other
    dtype refuses (NumPy converts the value to a scalar of the array's type)."""
    if target.dtype != np.bool_:
        raise ValueError("setting an array element with a sequence.")
    if type(value) in (list, tuple):
        return bool(value)
    if math.prod(value.shape if isinstance(value, Tracer) else np.shape(value)) != 1:
        raise ValueError("setting an array element with a sequence.")
    return np.reshape(value, ())


def setitem(target: Tracer, idx: Any, value: Any) -> None:
    """`target[idx] = value` as a functional update: `target` takes the new value."""
    _check_writeable(target)
    if NUMPY2 and _sequence_into_element(target, idx, value):  # (NumPy 1.26 warns)
        value = _element_of_sequence(target, value)
    if _masked._pending.stand_ins:
        whole = _masked.written_back(target, idx, value)
        if whole is not None:
            idx, value = Ellipsis, whole
    new = bind(SETITEM, (target, idx, value), {})
    trace = target._trace
    if not (isinstance(new, Tracer) and new._trace is trace):
        raise new._trace.concretization(
            "a value that depends on an inner transform was written into an array of an outer one",
            "return the value from the inner function instead of writing it into an outer array",
        )
    if target._aliased:
        raise trace.concretization(
            "an in-place write into an array that may share memory with another (a view "
            "from slicing, reshape, transpose, ...)",
            "copy before writing: `x = x.copy()`, or build the value with `np.where`",
        )
    target._become(new)


def _getitem(self: Tracer, idx: Any) -> Any:
    if type(idx) is BatchTracer:
        t = _masked.stand_in(self, idx, sys._getframe(1))
        if t is not None:
            return t  # `y[mask] op= v`: see `_masked`
    out = bind(GETITEM, (self, idx), {})
    if not isinstance(out, Tracer):
        return out
    element = _scalars.picks_element(idx) and out.ndim == 0
    if element or _copies(idx):
        out._view = None  # NumPy copies (advanced indexing, or a scalar): no memory shared
    elif out._view is not None and _masked.augmented_read(sys._getframe(1)):
        # `y[1:3] += v`: the view is written back into `y[1:3]` right after `+=` computes
        # it, so `+=` need not write through it (and writing into `y` is allowed)
        out._view = None
    return _scalars.mark(out) if element else out


def _copies(idx: Any) -> bool:
    """Whether `x[idx]` is a copy in NumPy (advanced indexing: a list, a boolean, an
    index array of one or more axes)."""
    for i in idx if type(idx) is tuple else (idx,):
        if type(i) is list or isinstance(i, bool | np.bool_) or getattr(i, "ndim", 0) > 0:
            return True
    return False


def _setitem(self: Tracer, idx: Any, value: Any) -> None:
    if _scalars.is_scalar(self):  # (NumPy scalars are immutable)
        name = self.dtype.type.__name__
        raise TypeError(f"'numpy.{name}' object does not support item assignment")
    setitem(self, idx, value)


def _len(self: Tracer) -> int:
    shape = self.shape
    if not shape:
        raise TypeError("len() of unsized object")
    return shape[0]


def _iter(self: Tracer) -> Any:
    if not self.shape:
        raise TypeError("iteration over a 0-d array")
    return (self[i] for i in range(self.shape[0]))


def _contains(self: Tracer, value: Any) -> bool:
    return bool(np.any(self == value))


# -- operators ---------------------------------------------------------------------


# NumPy's `array ** exponent` calls these ufuncs for these exponents of a float or
# complex array (other bits than `np.power` for complex numbers, and on NumPy 1.26 for
# floats: `(-inf) ** 0.5` is nan, not inf): the exponent a Python number, or on NumPy
# 1.26 any scalar or 0-d array too
_POWERS = {2.0: np.square, 0.5: np.sqrt, -1.0: np.reciprocal, 1.0: np.positive}


def _power_ufunc(base: Tracer, exponent: Any) -> Any:
    """The ufunc NumPy's `**` would use for `base ** exponent`, or None (np.power)."""
    if base.dtype.kind not in "fc":
        return None
    if not NUMPY2 and _scalars.is_scalar(base):
        return None  # a NumPy 1.26 scalar's `**` is np.power, promoting by value
    if type(exponent) in (int, float) or (not NUMPY2 and (
        (is_numpy_scalar(exponent) and isinstance(exponent, np.floating | np.integer))
        or (type(exponent) is np.ndarray and exponent.ndim == 0 and exponent.dtype.kind in "iuf")
    )):  # fmt: skip
        return _POWERS.get(float(exponent))
    return None


_SEQUENCES = (list, tuple, str, bytes)


def _repeated(sequence: Any, count: Tracer) -> Any:
    """`sequence * count` for the example's NumPy scalar `count`: Python repeats the
    sequence `count` times where that is an integer (NumPy's scalars leave it to the
    sequence; a 0-d array multiplies elementwise), and refuses any other number."""
    if count.dtype.kind not in "iu":  # NumPy's scalar of that type decides: a float's
        # TypeError; a bool's too on NumPy 2, NumPy 1.26's DeprecationWarning and its 0 or 1
        sequence[:0] * count.dtype.type(0)
    return sequence * operator.index(count)  # (a Python int: the trace decides how)


def _binary(ufunc: np.ufunc) -> tuple[Any, ...]:
    prim = ufunc_primitive(ufunc, "__call__")
    elidable = ufunc in _elision.ELIDABLE
    power = ufunc is np.power
    complex_first = ufunc in (np.add, np.subtract, np.multiply, np.true_divide, np.power)
    python_int_of_bools = complex_first or ufunc in (np.floor_divide, np.remainder)
    repeats = ufunc is np.multiply  # (`[0.0] * n`: see `_repeated`)

    def weak_op(a: Any, b: Any) -> Any:
        if python_int_of_bools:  # (True + True is 2: Python's bools are ints)
            a, b = _scalars.bools_as_ints((a, b))
        (a, b), python = _scalars.strengthen((a, b))
        out = bind(prim, (a, b), {})
        return _scalars.mark_weak(out) if python else _scalars.mark(out)

    # `sys.getrefcount(self)` must be taken right here, as `_elision` measured it
    def op(self: Tracer, other: Any) -> Any:
        if repeats and issubclass(type(other), _SEQUENCES) and _scalars.is_scalar(self):
            return _repeated(other, self)
        if _scalars.SEEN.weak and _scalars.any_weak((self, other)):
            return weak_op(self, other)
        fast = _power_ufunc(self, other) if power else None
        if fast is not None and fast is not np.square:  # (elision squares in place)
            return fast(self)
        if elidable and type(self) is BatchTracer and sys.getrefcount(self) == _elision.TEMP_REFS:
            out = _elision.into_temporary(ufunc, self, other, sys._getframe(1), left=True)
            if out is not None:
                return _scalars.mark(out)
        if fast is not None:
            return fast(self)
        return _scalars.mark(bind(prim, (self, other), {}))

    def rop(self: Tracer, other: Any) -> Any:
        if repeats and issubclass(type(other), _SEQUENCES) and _scalars.is_scalar(self):
            return _repeated(other, self)
        if type(other) is complex and complex_first and _scalars.is_float64_scalar(self):
            # np.float64 is a Python float: `1j * x` is Python's complex arithmetic
            return _scalars.mark_weak(bind(prim, (other, self), {}))
        if _scalars.SEEN.weak and _scalars.any_weak((self, other)):
            return weak_op(other, self)
        if elidable and type(self) is BatchTracer and sys.getrefcount(self) == _elision.TEMP_REFS:
            out = _elision.into_temporary(ufunc, self, other, sys._getframe(1), left=False)
            if out is not None:
                return _scalars.mark(out)
        return _scalars.mark(bind(prim, (other, self), {}))

    def iop(self: Tracer, other: Any) -> Tracer:
        if _scalars.is_scalar(self):  # a NumPy scalar is immutable: `s += y` rebinds `s`
            return cast(Tracer, op(self, other))
        if _masked._pending.stand_ins:
            _masked.check_operand(self, other)
        if _scalars.SEEN.weak and _scalars.any_weak((other,)):
            other = _scalars.strengthen((self, other))[0][1]
        if power and (fast := _power_ufunc(self, other)) is not None:
            return cast(Tracer, assign(self, fast(self)))
        result = bind(prim, (self, other), {})
        if result.dtype != self.dtype and not np.can_cast(result.dtype, self.dtype, "same_kind"):
            _check_out_casting(ufunc, (self, other), (self,), {})  # (`int_array *= 1.5`)
        return cast(Tracer, assign(self, result, operand=ufunc is not np.matmul))

    return op, rop, iop


def _unary(ufunc: np.ufunc) -> Any:
    prim = ufunc_primitive(ufunc, "__call__")

    def op(self: Tracer) -> Any:
        if _scalars.SEEN.weak:  # (~True is -2: Python's bools are ints)
            (self,) = _scalars.bools_as_ints((self,))
        out = bind(prim, (self,), {})
        weak = _scalars.SEEN.weak and _scalars.any_weak((self,))
        return _scalars.mark_weak(out) if weak else _scalars.mark(out)

    return op


_BINARY_OPS = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "truediv": np.true_divide,
    "floordiv": np.floor_divide,
    "mod": np.remainder,
    "pow": np.power,
    "matmul": np.matmul,
    "and": np.bitwise_and,
    "or": np.bitwise_or,
    "xor": np.bitwise_xor,
    "lshift": np.left_shift,
    "rshift": np.right_shift,
}
_COMPARISONS = {
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
}
_UNARY_OPS = {"neg": np.negative, "pos": np.positive, "abs": np.absolute, "invert": np.invert}


def _divmod(self: Tracer, other: Any) -> Any:
    return _python_numbers(np.divmod(self, other), self, other)


def _rdivmod(self: Tracer, other: Any) -> Any:
    return _python_numbers(np.divmod(other, self), self, other)


def _python_numbers(out: Any, *operands: Any) -> Any:
    """`out` (a result or a tuple) as Python numbers where every operand is one for each
    example (a weakly typed draw, `vmapx._scalars`): Python's own arithmetic gives
    Python numbers (`divmod(r, 0.3)`, `round(r, 2)`, `r.conjugate()`)."""
    if _scalars.SEEN.weak and all(_scalars.weak_type(x) is not None for x in operands):
        for o in out if isinstance(out, tuple) else (out,):
            _scalars.mark_weak(o)
    return out


# -- methods: each forwards to the NumPy function, which dispatches back here -----


def _call(func: Any, *args: Any, **kwargs: Any) -> Any:
    """`func(*args, **kwargs)` for a NumPy function of a tracer, dispatched directly."""
    return _array_function(None, func, None, args, kwargs)  # type: ignore[arg-type]  # (no tracer)


def _forward(func: Any) -> Any:
    # straight to our `__array_function__`: what NumPy's dispatch would end up calling,
    # without its search for overriding arguments (a good part of a method's cost)
    def method(self: Tracer, *args: Any, **kwargs: Any) -> Any:
        return _array_function(self, func, None, (self, *args), kwargs)

    method.__name__ = func.__name__
    method.__doc__ = f"`ndarray.{func.__name__}`: same as `np.{func.__name__}(x, ...)`."
    return method


_FORWARDED = [
    np.all, np.any, np.argmax, np.argmin, np.argpartition, np.argsort, np.choose,
    np.cumprod, np.cumsum, np.diagonal, np.dot, np.max, np.mean,
    np.min, np.nonzero, np.prod, np.ptp, np.repeat, np.round, np.searchsorted, np.std,
    np.sum, np.swapaxes, np.take, np.trace, np.var,
]  # fmt: skip


def _clip(self: Tracer, min: Any = None, max: Any = None, out: Any = None, **kwargs: Any) -> Any:
    # `x.clip(1)`: the method's bounds are both optional, `np.clip`'s are not (NumPy 1.26
    # refuses neither bound, as the method does there)
    if min is None and max is None and not NUMPY2:
        raise ValueError("One of max or min must be given")
    return _array_function(self, np.clip, None, (self, min, max), {"out": out, **kwargs})


def _compress(self: Tracer, condition: Any, axis: Any = None, out: Any = None) -> Any:
    # `x.compress(condition)` is `np.compress(condition, x)`: the array comes second
    return _call(np.compress, condition, self, axis=axis, out=out)


def _shape_args(args: tuple[Any, ...]) -> Any:
    """`x.reshape(2, 3)` and `x.reshape((2, 3))` mean the same."""
    return args[0] if len(args) == 1 else args


def _reshape(self: Tracer, *shape: Any, order: str = "C", copy: Any = None) -> Any:
    return _call(np.reshape, self, _shape_args(shape), order=order)


def _transpose(self: Tracer, *axes: Any) -> Any:
    return _call(np.transpose, self, _shape_args(axes) if axes else None)


def _astype(self: Tracer, dtype: Any, order: str = "K", casting: str = "unsafe",
            subok: bool = True, copy: bool = True) -> Any:  # fmt: skip
    if casting != "unsafe":  # (by dtypes alone: NumPy's own error, from an empty array)
        np.zeros(0, self.dtype).astype(dtype, casting=cast(Any, casting))
    if not copy and np.dtype(dtype) == self.dtype:
        return self
    out = _call(astype, self, dtype, copy=True)
    return _scalars.mark(out) if _scalars.is_scalar(self) else out  # (as `_copy`)


def _copy(self: Tracer, order: str = "C") -> Any:
    out = np.copy(self, order=order)  # type: ignore[call-overload]  # (ndarray.copy's order is "C"; np.copy's is "K")
    return _scalars.mark(out) if _scalars.is_scalar(self) else out  # (a scalar's copy: one)


def _flatten(self: Tracer, order: str = "C") -> Any:
    return np.copy(np.ravel(self, order=order))  # type: ignore[call-overload]  # (a tracer)


def _ravel(self: Tracer, order: str = "C") -> Any:
    return _call(np.ravel, self, order=order)


def _squeeze(self: Tracer, axis: Any = None) -> Any:
    return _call(np.squeeze, self, axis=axis)


def _conj(self: Tracer) -> Any:
    return _python_numbers(np.conjugate(self), self)


def _fill(self: Tracer, value: Any) -> None:
    setitem(self, Ellipsis, value)


def _sort(self: Tracer, axis: int = -1, kind: Any = None, order: Any = None) -> None:
    assign(self, np.sort(self, axis=axis, kind=kind))


def _partition(self: Tracer, kth: Any, axis: int = -1, kind: str = "introselect") -> None:
    assign(self, np.partition(self, kth, axis=axis, kind=kind))  # type: ignore[call-overload]


def _view(self: Tracer, dtype: Any = None, type: Any = None) -> Any:
    subclass = type if type is not None else dtype  # (`x.view(np.matrix)`: a class as dtype)
    if isinstance(subclass, builtins.type) and issubclass(subclass, np.ndarray):
        if subclass is not np.ndarray:  # (`np.asmatrix(x)`: a matrix keeps rows 2-d)
            raise self._trace.concretization(
                f"`x.view({subclass.__name__})` of a traced value (an ndarray subclass "
                "has its own behaviour, which a traced value does not keep)",
                "compute with plain arrays (`np.asarray`), or call it outside the function",
            )
        dtype = None if type is None else dtype
    if dtype is None or np.dtype(dtype) == self.dtype:
        return self
    if isinstance(self, BatchTracer) and np.dtype(dtype).itemsize == self.dtype.itemsize:
        out = self._trace.wrap(self.val.view(dtype))  # (element by element: batched)
        if _scalars.is_scalar(self):  # (a NumPy scalar's view is a scalar: `s.view(np.int64)`)
            return _scalars.mark(out)
        out._view = (self, self._version)
        return out
    raise self._trace.concretization(
        "`x.view(dtype)` of a traced value (another dtype reinterprets the array's memory)",
        "use `.astype` to convert values",
    )


def _put(self: Tracer, indices: Any, values: Any, mode: str = "raise") -> None:
    np.put(self, indices, values, mode=mode)  # type: ignore[arg-type]  # (a tracer; NumPy checks the mode)


# ndarray attributes about memory (or writing it in place in ways a tracer cannot
# follow): a traced value has none; reading one takes the value out of the trace
# (under `vmap`, the loop runs)
_MEMORY_ATTRIBUTES = ("flat", "flags", "strides", "base", "ctypes", "data", "resize",
                      "tobytes", "tofile", "dump", "dumps", "byteswap", "getfield",
                      "setfield", "setflags")  # fmt: skip


def _memory_attribute(name: str) -> property:
    def getter(self: Tracer) -> Any:
        raise self._trace.concretization(
            f"`x.{name}` (the memory of an array) of a traced value",
            "use NumPy functions on the value instead (`x.ravel()[i]` for `x.flat[i]`, "
            "`np.resize` for `x.resize`, ...)",
        )

    return property(getter)


def _round(self: Tracer, ndigits: Any = None) -> Any:
    """`round(x, ndigits)` as of a NumPy scalar: `np.round`, or a Python int without
    `ndigits` (a value that leaves the trace, as `int(x)`); an array of more than 0
    dimensions has no `round`, as an ndarray."""
    if self.ndim:
        raise TypeError(f"type {type(self).__name__} doesn't define __round__ method")
    if ndigits is None:
        return int(np.round(self))
    return _python_numbers(np.round(self, ndigits), self)


def _trunc(self: Tracer) -> int:
    """`math.trunc(x)` as of a NumPy scalar: `int(x)` (a value that leaves the trace)."""
    if self.ndim:
        raise TypeError(f"type {type(self).__name__} doesn't define __trunc__ method")
    return int(self)


def _copy_dunder(self: Tracer) -> Any:
    # (a NumPy scalar's copy is a scalar: `np.copy` would give a 0-d array)
    return self if _scalars.is_scalar(self) else np.copy(self)


def _deepcopy(self: Tracer, memo: Any) -> Any:
    return _copy_dunder(self)


def _reduce_ex(self: Tracer, protocol: Any) -> Any:
    raise self._trace.concretization(
        "a traced value was pickled (`pickle`, `multiprocessing`: its bytes are the value's)",
        "pickle the results of the transformed function, outside it",
    )


def _part_setter(name: str) -> Any:
    """`z.real = v` / `z.imag = v`: NumPy writes that part in place, as `z.real[...] = v`
    (a view of `z`, written through: vmapx's view writes; a real `z`'s `imag` is NumPy's
    read-only zeros, so the write raises as NumPy's)."""

    def setter(self: Tracer, value: Any) -> None:
        if name == "imag" and self.dtype.kind != "c":
            raise TypeError("array does not have imaginary part to set")
        part = getattr(self, name)
        part[...] = value

    return setter


_PART_SETTERS = {"real": _part_setter("real"), "imag": _part_setter("imag")}

_PROPERTIES = {
    "T": lambda self: _call(np.transpose, self),
    "mT": lambda self: _call(np.swapaxes, self, -1, -2),
    "real": lambda self: np.real(self),
    "imag": lambda self: np.imag(self),
    "itemsize": lambda self: self.dtype.itemsize,
    "nbytes": lambda self: self.size * self.dtype.itemsize,
}

_METHODS = {
    "__array_ufunc__": _array_ufunc,
    "__array_function__": _array_function,
    "__getitem__": _getitem,
    "__setitem__": _setitem,
    "__len__": _len,
    "__iter__": _iter,
    "__contains__": _contains,
    "compress": _compress,
    "clip": _clip,
    "__divmod__": _divmod,
    "__rdivmod__": _rdivmod,
    "__round__": _round,
    "__trunc__": _trunc,
    "__copy__": _copy_dunder,
    "__deepcopy__": _deepcopy,
    "__reduce_ex__": _reduce_ex,
    "reshape": _reshape,
    "transpose": _transpose,
    "astype": _astype,
    "copy": _copy,
    "flatten": _flatten,
    "ravel": _ravel,
    "squeeze": _squeeze,
    "conj": _conj,
    "conjugate": _conj,
    "fill": _fill,
    "sort": _sort,
    "partition": _partition,
    "view": _view,
    "put": _put,
}


def install(cls: type) -> None:
    """Give `cls` (the tracer base class) NumPy's array interface."""
    for name, ufunc in _BINARY_OPS.items():
        op, rop, iop = _binary(ufunc)
        setattr(cls, f"__{name}__", op)
        setattr(cls, f"__r{name}__", rop)
        setattr(cls, f"__i{name}__", iop)
    for name, ufunc in _COMPARISONS.items():
        setattr(cls, f"__{name}__", _binary(ufunc)[0])
    for name, ufunc in _UNARY_OPS.items():
        setattr(cls, f"__{name}__", _unary(ufunc))
    for func in _FORWARDED:
        setattr(cls, func.__name__, _forward(func))
    for name, method in _METHODS.items():
        setattr(cls, name, method)
    for name, getter in _PROPERTIES.items():
        setattr(cls, name, property(getter, _PART_SETTERS.get(name)))
    for name in _MEMORY_ATTRIBUTES:
        setattr(cls, name, _memory_attribute(name))


install(Tracer)
