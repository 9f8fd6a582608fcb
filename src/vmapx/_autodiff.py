"""Forward and reverse mode: `JVPTracer`/`JVPTrace`, `VJPTracer`/`VJPTrace`, the rules.

Both traces live on the same interpreter stack as `BatchTrace`, so every composition
(`vmap(grad(f))`, `grad(vmap(f))`, `jacfwd(jacrev(f))`, ...) needs no special case.

- **Forward mode.** A `JVPTracer` carries `(primal, tangent)`. Each primitive applied to
  it computes the primal one level down and the output tangent with its JVP rule.
- **Reverse mode.** A `VJPTracer` carries `(primal, node)`: `node` indexes the tape of
  its `VJPTrace`, where each recorded primitive keeps a closure `vjp(g)` returning the
  cotangents of its traced operands (the design of HIPS autograd). The backward pass
  walks the tape once, newest first.

A tracer whose tangent/node is `None` is a *constant* of its trace (e.g. the result of
`np.zeros_like(x)`): it stays a tracer, so that writing traced values into it works,
but nothing is computed or recorded for it. Integer and boolean results are never
tracers: their derivative is zero.

## Writing derivative rules

Rules are written with `np.*` calls on the values they receive (which may be tracers of
outer transforms), so they batch under `vmap` and are differentiable again. An operand
of a NumPy call is named by its *argnum*: an `int` for a positional argument, a tuple
`(i, j)` for item `j` of a sequence argument (`np.concatenate([x, y])`: `(0, 1)` is
`y`), or a `str` for a keyword argument. Rules receive the call's own `args`/`kwargs`
with this trace's tracers replaced by their primals; `ans` is the primal result (a
tuple for functions with several results, and then `g` is a tuple too).

- `defvjp(func, *makers, argnums=None)`: `maker(ans, *args, **kwargs) -> (g -> ct)`, one
  per argnum (positional `0, 1, ...` unless `argnums` is given; `None` = zero).
- `defvjp_argnum(func, maker)`: `maker(argnum, ans, args, kwargs) -> (g -> ct)`.
- `defjvp(func, *jvps, argnums=None)`: `jvp(t, ans, *args, **kwargs)` is the output
  tangent caused by the tangent `t` of that argument (contributions are summed).
- `defjvp_argnum(func, jvp)`: `jvp(argnum, t, ans, args, kwargs)`.
- `deflinear(func, argnums=(0,))`: `func` is linear in those operands jointly; its JVP
  is `func` applied to the tangents (zeros for untraced operands). Give the VJP too.
- `defelementwise(func, *derivs)`: elementwise functions from their partial derivatives
  `deriv(ans, *args)` (broadcastable to the result; a number for a constant, `None` =
  zero). Registers both
  modes: JVP `t * deriv`, VJP `g * deriv`. For complex inputs `deriv` is `f'(z)` of a
  holomorphic function, or the JAX convention's gradient `df/dx - i df/dy` of a
  real-valued one (the engine keeps the real part of the tangent of a real result).
- `defzero(func, argnums=None)`: the result does not depend on those operands
  differentiably (`np.floor`, `np.zeros_like`, ...); `None` = all operands.
- `defcomposite(func, impl)`: under differentiation `func(*args, **kwargs)` is computed
  as `impl(*args, **kwargs)`, whose NumPy calls are differentiated in turn. `impl` may
  return `NotImplemented` to use the rules of `func` for that call.

A cotangent may come back broadcast (smaller, or larger with extra or size-1 axes) or
with another dtype: the engine sums it over broadcast axes and casts it to the operand
(keeping the real part for a real operand), so rules need not. A rule returning `None`
for an operand means zero. A primitive with a rule for only one mode gets the other
by transposition (needs the rule itself to be differentiable, so not for linear ones).
Complex numbers follow JAX: the VJP is the transpose for the pairing `Re(sum(a * b))`,
so `grad` of a real function of `z` is `df/dx - i df/dy`.
"""

from __future__ import annotations

import dis
import inspect
import sys
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from . import _config, _core, _passthrough, _payload, _scaled
from ._batching import BatchTracer, user_stacklevel
from ._compat import astype
from ._core import Trace, Tracer, bind, pop_trace, posed_class, push_trace, user_frame_location
from ._direct import direct_binary
from ._inplace import accumulate_into
from ._registry import ALL, Primitive, builder, each_function, register
from .errors import (
    ConcretizationError,
    DifferentiationError,
    DroppedDerivativeWarning,
    raise_own_cause,
)

# The rules live in each primitive's record (`vmapx._registry`): `jvp` is
# `rule(args, kwargs, ans, tangents: {argnum: tangent}) -> output tangent (or None)`,
# `vjp` is `rule(argnums, ans, args, kwargs) -> (g -> cotangents, one per argnum)`,
# `composite` is `impl(*args, **kwargs)` computing the primitive with differentiable
# NumPy calls, `zero` the argnums whose derivative is zero (`ALL` = every operand),
# `linear` marks primitives registered by `deflinear` (no VJP by transposing their JVP).
_STORE_SUBSCR = dis.opmap["STORE_SUBSCR"]


class NoRule(Exception):  # noqa: N818 (a signal to the engine, not a user error)
    """Raised by a rule for an operand it cannot differentiate; the engine turns it
    into a `DifferentiationError` naming the function, the operand and the transform."""

    def __init__(self, argnum: Any, mode: str) -> None:
        super().__init__(argnum)
        self.argnum = argnum
        self.mode = mode


# -- tracers -----------------------------------------------------------------------


class ADTracer(Tracer):
    """Common part of the autodiff tracers: a concrete `primal` one level down.
    (Views written in place are tracked by the core, see `vmapx._core.Tracer`.)"""

    __slots__ = ("primal",)
    _trace: ADTrace
    primal: Any  # the value one level down

    # (annotated locals, not `cast`: a function call on every read of these hot properties)
    @property
    def shape(self) -> tuple[int, ...]:
        shape: tuple[int, ...] = self.primal.shape
        return shape

    @property
    def ndim(self) -> int:
        ndim: int = self.primal.ndim
        return ndim

    @property
    def dtype(self) -> np.dtype:
        dtype: np.dtype = self.primal.dtype
        return dtype

    @property
    def size(self) -> int:
        size: int = self.primal.size
        return size

    @property  # type: ignore[misc]
    def __class__(self) -> type:  # noqa: D105
        primal = self.primal  # (the example's class: `Tracer`'s comment; a plain primal's own)
        if type(primal) is np.ndarray:
            return np.ndarray
        return posed_class(self, primal.__class__, exact=not isinstance(primal, Tracer))

    # The tape is eager: Python control flow and conversions use the value (the
    # derivative does not flow through a Python number; printing a loss inside `f`
    # shows its value).
    def _leave_trace(
        self, how: str, convert: Callable[..., Any] | None, args: tuple[Any, ...] = ()
    ) -> Any:
        if how == "array":
            if args[0] is not None and np.dtype(args[0]).kind in "biu":
                # `np.int64(x)`: an integer copy's derivative is zero wherever it has one
                return np.asarray(self.primal, dtype=args[0])
            _passthrough.learn_caller(sys._getframe(2))  # (under vmap, a retry passes `self`)
            raise self._leave_error()
        if how in ("float", "int", "complex"):
            self._check_not_stored(sys._getframe(2))  # the caller of `float(x)`, ...
        dropped = _DROPPED.get(how)
        if dropped is not None:
            _dropped_derivative(self, dropped)
        return cast("Callable[..., Any]", convert)(self.primal)  # (None only for "array")

    def _check_not_stored(self, frame: Any) -> None:
        """NumPy converts a value written into one element of a plain array with
        `float()`: that would silently drop the derivative, so it is an error."""
        code = frame.f_code.co_code
        if 0 <= frame.f_lasti < len(code) and code[frame.f_lasti] == _STORE_SUBSCR:
            raise self._leave_error()

    def _leave_error(self) -> BaseException:
        return self._trace.concretization(
            f"a value traced by `{self._trace.transform}` was converted to a plain NumPy "
            "array (`np.asarray`, or written into a plain array)",
            "use NumPy functions on the value (they are differentiated); to fill a new "
            "array create it from the traced value, e.g. `np.zeros_like(x, shape=...)`, or "
            "use `np.stack`; `vmapx.stop_gradient(x)` gives a constant if that is meant",
        )


# conversions that drop a derivative, as warnings name them (`int()` is not one: its
# derivative is zero wherever it has one)
_DROPPED = {"float": "float()", "complex": "complex()", "item": "`.item()`"}


_payload.INNER[ADTracer] = lambda t: t.primal


class JVPTracer(ADTracer):
    """A value of forward mode: `primal` and its `tangent` (`None`: zero)."""

    __slots__ = ("tangent",)
    _trace: JVPTrace
    tangent: Any

    def __init__(self, trace: JVPTrace, primal: Any, tangent: Any) -> None:
        self._trace = trace
        self._view = None
        self._version = 0
        self.primal = primal
        self.tangent = tangent

    def _become(self, other: Tracer) -> None:
        self.primal = cast(JVPTracer, other).primal
        self.tangent = cast(JVPTracer, other).tangent
        self._version += 1


class VJPTracer(ADTracer):
    """A value of reverse mode: `primal`, its tape `node` (`None`: a constant) and,
    for one result of a primitive with several, its index `out` (-1 otherwise)."""

    __slots__ = ("node", "out")
    _trace: VJPTrace
    node: Any
    out: int

    def __init__(self, trace: VJPTrace, primal: Any, node: int | None, out: int = -1) -> None:
        self._trace = trace
        self._view = None
        self._version = 0
        self.primal = primal
        self.node = node
        self.out = out

    def _become(self, other: Tracer) -> None:
        self.primal = cast(VJPTracer, other).primal
        self.node = cast(VJPTracer, other).node
        self.out = cast(VJPTracer, other).out
        self._version += 1


# -- shared helpers ------------------------------------------------------------------


def _dropped_derivative(x: ADTracer, what: str) -> None:
    """A differentiated value becomes a Python number, a constant: say so (warn, or raise
    with `vmapx.config.fallback="error"`; silent with "silent"). `int()` is not reported:
    its derivative is zero wherever it has one."""
    if getattr(x, "tangent", None) is None and getattr(x, "node", None) is None:
        return  # not differentiated
    if x.dtype.kind not in "fc" or _config.config.fallback == "silent":
        return
    transform = x._trace.transform
    message = (
        f"{transform}: {what} of a value traced by `{transform}` at {user_frame_location()} "
        "is a Python number, a constant: derivatives do not flow through it, so the "
        "result is missing that part. Fix: keep it an array (`x[1]` instead of "
        "`float(x[1])`); if a constant is meant, write `float(vmapx.stop_gradient(x))`"
    )
    if _config.config.fallback == "error":
        raise ConcretizationError(message + ".")
    warnings.warn(message + ".", DroppedDerivativeWarning, stacklevel=user_stacklevel())


def is_float(x: Any) -> bool:
    """Whether `x` is a differentiable value: an array (or tracer) of float/complex dtype."""
    if type(x) is BatchTracer:  # the common case, without the properties
        x = x.val
    dtype = getattr(x, "dtype", None)
    return isinstance(dtype, np.dtype) and dtype.kind in "fc" and hasattr(x, "shape")


def _is_multi(ans: Any) -> bool:
    t = type(ans)  # (not `isinstance`: a tracer's `__class__` would be asked, ~0.1 us)
    return t in (tuple, list) or (issubclass(t, tuple) and hasattr(ans, "_fields"))


def _rebuild(ans: Any, items: list[Any]) -> Any:
    if hasattr(ans, "_fields"):
        return type(ans)(*items)
    return type(ans)(items)


def _unwrap(
    trace: Trace, args: tuple[Any, ...], kwargs: dict[Any, Any]
) -> tuple[tuple[Any, ...], dict[Any, Any], list[Any], list[Any]]:
    """The call's arguments with this trace's tracers replaced by their primals, and
    the `(argnums, tracers)` of those that are not constants."""
    argnums: list[Any] = []
    tracers: list[Any] = []
    new_args = _unwrap_seq(trace, args, (), argnums, tracers)
    new_kwargs = kwargs
    if kwargs:
        new_kwargs = {}
        for k, v in kwargs.items():
            if isinstance(v, ADTracer) and v._trace is trace:
                new_kwargs[k] = v.primal
                if _derivative_payload(v) is not None:
                    argnums.append(k)
                    tracers.append(v)
            elif type(v) in (list, tuple):
                new_kwargs[k] = _unwrap_seq(trace, v, (k,), argnums, tracers)
            else:
                new_kwargs[k] = v
    return new_args, new_kwargs, argnums, tracers


def _derivative_payload(t: ADTracer) -> Any:
    return t.tangent if type(t) is JVPTracer else cast(VJPTracer, t).node


def _unwrap_seq(
    trace: Trace, seq: Any, prefix: tuple[Any, ...], argnums: list[Any], tracers: list[Any]
) -> Any:
    out = None
    for i, a in enumerate(seq):
        # (`type`: a failed `isinstance` asks a batch tracer's `__class__` property)
        if issubclass(type(a), ADTracer) and a._trace is trace:
            new = a.primal
            if (a.tangent if type(a) is JVPTracer else a.node) is not None:
                argnums.append(prefix + (i,) if prefix else i)
                tracers.append(a)
        elif type(a) in (list, tuple) and a:
            new = _unwrap_seq(trace, a, prefix + (i,) if prefix else (i,), argnums, tracers)
        else:
            continue
        if new is a:
            continue
        if out is None:
            out = list(seq)
        out[i] = new
    if out is None:
        return seq
    return tuple(out) if type(seq) is tuple else out


def _has_tracer_kwarg(trace: Trace, kwargs: dict[Any, Any]) -> bool:
    return any(
        (isinstance(v, Tracer) and v._trace is trace)
        or (type(v) in (list, tuple) and any(isinstance(a, Tracer) for a in v))
        for v in kwargs.values()
    )


_SIGNATURES: dict[Any, Any] = {}


def _to_positional(
    prim: Primitive, args: tuple[Any, ...], kwargs: dict[Any, Any]
) -> tuple[tuple[Any, ...], dict[Any, Any]]:
    """Traced keyword arguments moved to their positions (by the function's signature),
    so that rules written for positional operands apply."""
    sig = _SIGNATURES.get(prim.impl)
    if sig is None:
        try:
            sig = _SIGNATURES[prim.impl] = inspect.signature(prim.impl)
        except (TypeError, ValueError):
            return args, kwargs
    params = list(sig.parameters.values())
    args_list, kwargs = list(args), dict(kwargs)
    for p in params[len(args_list) :]:
        if p.kind is not p.POSITIONAL_OR_KEYWORD or p.name not in kwargs:
            break
        args_list.append(kwargs.pop(p.name))
    return tuple(args_list), kwargs


def fit(x: Any, shape: tuple[Any, ...], dtype: np.dtype) -> Any:
    """`x` (a tangent or cotangent) summed over broadcast axes or broadcast up to
    `shape`, and cast to `dtype` (the real part for a real dtype)."""
    xshape = getattr(x, "shape", None)
    if xshape is None:  # a Python number
        x = np.asarray(x)
        xshape = x.shape
    if xshape != shape:
        x = _fit_shape(x, xshape, shape)
    xdtype = x.dtype
    if xdtype != dtype:
        if xdtype.kind == "c" and dtype.kind != "c":
            x = np.real(x)
        x = astype(x, dtype, copy=False)
    return x


def _fit_shape(x: Any, xshape: tuple[Any, ...], shape: tuple[Any, ...]) -> Any:
    lead = len(xshape) - len(shape)
    if lead > 0 or any(d == 1 and e != 1 for d, e in zip(shape[::-1], xshape[::-1], strict=False)):
        axes = tuple(range(max(lead, 0))) + tuple(
            i for i in range(max(lead, 0), len(xshape))
            if xshape[i] != 1 and shape[i - lead] == 1
        )  # fmt: skip
        if axes:
            x = np.sum(x, axis=axes, keepdims=True)
        if lead > 0:
            x = np.reshape(x, x.shape[lead:])
    if x.shape != shape:
        x = np.broadcast_to(x, shape)
    return x


def add_any(a: Any, b: Any) -> Any:
    """Sum of two tangents, where `None` is zero (tuples for several results)."""
    if a is None:
        return b
    if b is None:
        return a
    if type(a) in (tuple, list):
        return type(a)(add_any(x, y) for x, y in zip(a, b, strict=True))
    return a + b


_SLOTS: dict[type, tuple[str, ...]] = {}


def _snapshot(t: Tracer) -> Tracer:
    """A shallow copy of a tracer: it keeps the current payload even if `t` is written
    in place later (`_become` replaces the payload of `t` only)."""
    names = _SLOTS.get(type(t))
    if names is None:
        names = tuple(
            n for c in type(t).__mro__ for n in getattr(c, "__slots__", ())
            if n != "__weakref__"
        )  # fmt: skip
        _SLOTS[type(t)] = names
    c = object.__new__(type(t))
    for n in names:
        try:
            object.__setattr__(c, n, object.__getattribute__(t, n))
        except AttributeError:
            pass
    if isinstance(c, ADTracer):
        c._view = None  # it holds its value: later writes into a base do not concern it
    return c


def _no_rule(trace: Trace, prim: Primitive, argnum: Any, mode: str) -> DifferentiationError:
    which = "" if argnum is None else f" with respect to {_argnum_name(argnum)}"
    return DifferentiationError(
        f"{trace.transform}: `{prim.name}` has no {mode} derivative rule{which} "
        f"(at {user_frame_location()}). Compute it with NumPy functions that can be "
        "differentiated, or wrap the operand in `vmapx.stop_gradient` if its derivative is "
        "not needed."
    )


def _argnum_name(argnum: Any) -> str:
    if isinstance(argnum, str):
        return f"keyword argument `{argnum}`"
    if isinstance(argnum, tuple):
        head = argnum[0]
        where = f"`{head}`" if isinstance(head, str) else f"{head}"
        return f"item {list(argnum[1:])} of argument {where}"
    return f"argument {argnum}"


def _zero_filter(
    prim: Primitive, argnums: list[Any], tracers: list[Any]
) -> tuple[list[Any], list[Any]] | None:
    """Drop operands of zero derivative; `None` when none is left."""
    zero = prim.rules.zero
    if zero is None:
        return argnums, tracers
    if zero is ALL:
        return None
    keep = [i for i, a in enumerate(argnums) if a not in zero]
    if not keep:
        return None
    if len(keep) == len(argnums):
        return argnums, tracers
    return [argnums[i] for i in keep], [tracers[i] for i in keep]


# -- forward mode --------------------------------------------------------------------


class ADTrace(Trace):
    """What forward and reverse mode share: composites, unwrapping, and skipping
    results that carry no derivative (integers, booleans)."""

    if TYPE_CHECKING:  # (each mode defines it: its tracers of `ans`, with that payload)

        def lift(self, ans: Any, payload: Any, multi: bool) -> Any: ...

    __slots__ = ()

    def process(self, prim: Primitive, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        comp = prim.rules.composite
        if comp is not None:
            out = comp(*args, **kwargs)
            if out is not NotImplemented:
                return out
        if kwargs and _has_tracer_kwarg(self, kwargs):
            args, kwargs = _to_positional(prim, args, kwargs)
        primals, pkwargs, argnums, tracers = _unwrap(self, args, kwargs)
        ans = bind(prim, primals, pkwargs)
        multi = _is_multi(ans)
        if not (any(is_float(a) for a in ans) if multi else is_float(ans)):
            return ans
        kept = _zero_filter(prim, argnums, tracers) if argnums else None
        if kept is None:  # no operand with a derivative: a constant of this trace
            out = self.lift(ans, None, multi)
        else:
            out = self._process(prim, primals, pkwargs, *kept, ans, multi)
        if multi or getattr(ans, "_scalar", False):  # (the common case: nothing to copy)
            _copy_scalar_marks(ans, out, multi)
        return out

    def _process(
        self, prim: Primitive, primals: tuple[Any, ...], pkwargs: dict[Any, Any],
        argnums: list[Any], tracers: list[Any],
        ans: Any, multi: bool,
    ) -> Any:  # fmt: skip
        """The derivative part: `argnums`/`tracers` are the operands with one."""
        raise NotImplementedError


def _copy_scalar_marks(ans: Any, out: Any, multi: bool) -> None:
    """Give the tracers in `out` the NumPy-scalar marks of the values they wrap
    (`vmapx._scalars`): a rule one level down may mark its results (`vmapx.cond`'s
    batched branches do), and the derivative's tracers of those values are scalars too
    (`s *= y` rebinds them)."""
    pairs = zip(ans, out) if multi else ((ans, out),)  # noqa: B905 (a NamedTuple too)
    for a, o in pairs:
        mark = getattr(a, "_scalar", False)
        if mark and isinstance(o, Tracer) and o is not a:
            o._scalar = mark


class JVPTrace(ADTrace):
    """The trace of one forward-mode transform (`jvp`, `jacfwd`, ...)."""

    __slots__ = ()

    def _process(
        self, prim: Primitive, primals: tuple[Any, ...], pkwargs: dict[Any, Any],
        argnums: list[Any], tracers: list[Any],
        ans: Any, multi: bool,
    ) -> Any:  # fmt: skip
        rule = prim.rules.jvp
        if rule is None:
            rule = _jvp_from_vjp(self, prim)
        tangents = {a: t.tangent for a, t in zip(argnums, tracers, strict=True)}
        try:
            tangent = rule(primals, pkwargs, ans, tangents)
        except NoRule as e:
            raise _no_rule(self, prim, e.argnum, "forward-mode (JVP)") from None
        return self.lift(ans, tangent, multi)

    def lift(self, ans: Any, tangent: Any, multi: bool) -> Any:
        if multi:
            tangents = tangent if tangent is not None else [None] * len(ans)
            return _rebuild(
                ans,
                [
                    JVPTracer(self, a, None if t is None else fit(t, a.shape, a.dtype))
                    if is_float(a) else a
                    for a, t in zip(ans, tangents, strict=True)
                ],
            )  # fmt: skip
        if tangent is not None:
            tangent = fit(tangent, ans.shape, ans.dtype)
        return JVPTracer(self, ans, tangent)


def _jvp_from_vjp(trace: Trace, prim: Primitive) -> Callable[..., Any]:
    """A JVP rule from the VJP rule: `J t` is the VJP of the linear map `g -> J^T g`."""
    rule = prim.rules.vjp
    if rule is None:
        raise _no_rule(trace, prim, None, "forward-mode (JVP) or reverse-mode (VJP)")

    def jvp(
        args: tuple[Any, ...], kwargs: dict[Any, Any], ans: Any, tangents: dict[Any, Any]
    ) -> Any:
        from ._ad_api import vjp  # the public function: levels are handled in one place

        argnums = list(tangents)
        pullback = rule(argnums, ans, args, kwargs)
        items = [arg_item(args, kwargs, a) for a in argnums]

        def linear(g: Any) -> tuple[Any, ...]:
            cts = pullback(g)
            return tuple(
                np.zeros_like(x) if c is None else fit(c, np.shape(x), _dtype_of(x))
                for c, x in zip(cts, items, strict=True)
            )

        zeros = tuple(np.zeros_like(a) for a in ans) if _is_multi(ans) else np.zeros_like(ans)
        _, pull = vjp(linear, zeros)
        (jt,) = pull(tuple(tangents[a] for a in argnums))
        return jt

    return jvp


def arg_item(args: tuple[Any, ...], kwargs: dict[Any, Any], argnum: Any) -> Any:
    """The operand named by `argnum` (a position, a keyword, or a path into a sequence)."""
    if isinstance(argnum, str):
        return kwargs[argnum]
    if isinstance(argnum, tuple):
        head, *rest = argnum
        x = kwargs[head] if isinstance(head, str) else args[head]
        for i in rest:
            x = x[i]
        return x
    return args[argnum]


def _dtype_of(x: Any) -> np.dtype:
    return x.dtype if hasattr(x, "dtype") else np.result_type(x)


# -- reverse mode --------------------------------------------------------------------


class _Node:
    """One recorded primitive: `vjp(g)` gives the cotangents of `parents`, each
    `(node, out, shape, dtype)`; `outs` holds the results of a primitive with several."""

    __slots__ = ("vjp", "parents", "outs")

    def __init__(self, vjp: Callable[..., Any] | None, parents: tuple[Any, ...], outs: Any) -> None:
        self.vjp = vjp
        self.parents = parents
        self.outs = outs


class VJPTrace(ADTrace):
    """The trace of one reverse-mode transform (`grad`, `vjp`, `jacrev`, ...).

    The tape keeps the operands of each primitive for the backward pass, so they must
    not change afterwards: tracers of other transforms are kept as shallow copies (an
    in-place write replaces a tracer's payload), and plain arrays are made read-only
    until `f` returns (writing into an array already used would change the
    derivative; NumPy then reports "assignment destination is read-only"). Results are
    reachable only through this trace's tracers (written functionally) or, by
    `stop_gradient`, as read-only views or copies of tracers.
    """

    __slots__ = ("tape", "locked")

    def __init__(self, transform: str) -> None:
        super().__init__(transform)
        self.tape: list[_Node] = []
        self.locked: list[np.ndarray] = []

    def keep(self, values: Any) -> Any:
        """`values` (a tuple/list/dict of operands) as the tape keeps them."""
        if type(values) is dict:
            return {k: self._keep_one(v) for k, v in values.items()}
        out = [self._keep_one(v) for v in values]
        return tuple(out) if type(values) is tuple else out

    def _keep_one(self, v: Any) -> Any:
        t = type(v)
        if t is np.ndarray:
            a = v
            while isinstance(a, np.ndarray) and a.flags.writeable:
                a.flags.writeable = False
                self.locked.append(a)
                a = a.base  # a view's data changes when its base is written
            return v
        if t is BatchTracer:  # the common case, without the generic slot copy
            return BatchTracer(v._trace, v.val)
        if isinstance(v, Tracer):
            return _snapshot(v)
        if t in (list, tuple):
            return self.keep(v)
        return v

    def unlock(self) -> None:
        """Make the arrays writable again (after `f` returned and this trace was popped)."""
        for a in reversed(self.locked):
            try:
                a.flags.writeable = True
            except ValueError:  # a view whose base an enclosing trace keeps read-only
                outer = next(
                    (t for t in reversed(_core._state.stack) if isinstance(t, VJPTrace)), None
                )
                if outer is not None:
                    outer.locked.insert(0, a)  # after its base, in reverse order
        self.locked.clear()

    def new_input(self, primal: Any) -> VJPTracer:
        self.tape.append(_Node(None, (), None))
        return VJPTracer(self, primal, len(self.tape) - 1)

    def _process(
        self, prim: Primitive, primals: tuple[Any, ...], pkwargs: dict[Any, Any],
        argnums: list[Any], tracers: list[Any],
        ans: Any, multi: bool,
    ) -> Any:  # fmt: skip
        rule = prim.rules.vjp
        if rule is None:
            rule = _vjp_from_jvp(self, prim)
        primals = self.keep(primals)
        if pkwargs:
            pkwargs = self.keep(pkwargs)
        try:
            pullback = rule(argnums, ans, primals, pkwargs)
        except NoRule as e:
            raise _no_rule(self, prim, e.argnum, "reverse-mode (VJP)") from None
        parents = tuple([(t.node, t.out, t.primal.shape, t.primal.dtype) for t in tracers])
        self.tape.append(_Node(pullback, parents, ans if multi else None))
        return self.lift(ans, len(self.tape) - 1, multi)

    def lift(self, ans: Any, node: int | None, multi: bool) -> Any:
        if multi:
            return _rebuild(
                ans,
                [
                    VJPTracer(self, a, node, k) if is_float(a) else a
                    for k, a in enumerate(ans)
                ],
            )  # fmt: skip
        return VJPTracer(self, ans, node)


def _vjp_from_jvp(trace: Trace, prim: Primitive) -> Callable[..., Any]:
    """A VJP rule from the JVP rule, by reverse mode through the (linear) JVP."""
    rule = prim.rules.jvp
    if rule is None or prim.rules.linear:
        raise _no_rule(trace, prim, None, "reverse-mode (VJP)")

    def vjp(
        argnums: list[Any], ans: Any, args: tuple[Any, ...], kwargs: dict[Any, Any]
    ) -> Callable[..., Any]:
        def pullback(g: Any) -> list[Any]:
            from ._ad_api import vjp as vjp_api

            zeros = [np.zeros_like(arg_item(args, kwargs, a)) for a in argnums]

            def push(*ts: Any) -> Any:
                try:
                    t = rule(args, kwargs, ans, dict(zip(argnums, ts, strict=True)))
                except NoRule as e:  # (raised here, when the pullback runs)
                    raise _no_rule(trace, prim, e.argnum, "reverse-mode (VJP)") from None
                if _is_multi(ans):
                    t = [None] * len(ans) if t is None else t
                    return tuple(
                        np.zeros_like(a) if u is None else fit(u, a.shape, a.dtype)
                        for a, u in zip(ans, t, strict=True)
                    )
                return np.zeros_like(ans) if t is None else fit(t, ans.shape, ans.dtype)

            _, pull = vjp_api(push, *zeros)
            return list(pull(g))

        return pullback

    return vjp


def backward(
    tape: list[_Node], seeds: Iterable[tuple[int, int, Any]], consume: bool = False
) -> list[Any]:
    """Run the tape backwards from `(node, out, cotangent)` seeds; the cotangents of
    every node still holding one (the inputs) are returned, indexed by node.
    Elementwise nodes may pass a cotangent on as `_scaled.Scaled` (see there).
    `consume`: drop each node once done (a tape run only once), freeing what it saved."""
    cts: list[Any] = [None] * len(tape)
    owned = [False] * len(tape)
    for node, out, ct in seeds:
        _accumulate(tape, cts, owned, node, out, ct)
    for i in range(len(tape) - 1, -1, -1):
        ct = cts[i]
        if ct is None:
            continue
        entry = tape[i]
        if entry.vjp is None:  # an input: its cotangent is the answer
            cts[i] = _scaled.materialize(ct)
            continue
        cts[i] = None
        if entry.outs is not None:
            ct = type(ct)(
                np.zeros_like(a) if c is None and is_float(a) else c
                for c, a in zip(ct, entry.outs, strict=True)
            )
        if type(entry.vjp) is _ElementwisePullback:
            parent_cts = entry.vjp.scaled(ct)
        else:
            parent_cts = entry.vjp(_scaled.materialize(ct))
        if consume:
            tape[i] = entry = _Node(None, entry.parents, entry.outs)  # (no saved values)
        for (node, out, shape, dtype), c in zip(entry.parents, parent_cts, strict=True):
            if c is None:
                continue
            if type(c) is not _scaled.Scaled or out >= 0 or not c.fits(shape, dtype):
                c = _fit_cotangent(c, shape, dtype)
            _accumulate(tape, cts, owned, node, out, c)
    return cts


def _fit_cotangent(c: Any, shape: tuple[Any, ...], dtype: np.dtype) -> Any:
    """`c` as a cotangent of an operand of `shape` and `dtype` (see `fit`). A negated
    cotangent (`_scaled.negated`) is summed, cast or broadcast first and negated after:
    the same bits (a sum of negated terms is the negated sum), on the smaller array."""
    base = _scaled.negated(c)
    if base is not None:
        return -fit(base, shape, dtype)
    return fit(_scaled.materialize(c), shape, dtype)


def _accumulate(
    tape: list[Any], cts: list[Any], owned: list[Any], node: int, out: int, ct: Any
) -> None:
    if out >= 0:  # one result of a primitive with several
        slot = cts[node]
        if slot is None:
            slot = cts[node] = [None] * len(tape[node].outs)
        slot[out] = ct if slot[out] is None else slot[out] + ct
        return
    prev = cts[node]
    if prev is None:
        cts[node] = ct
        return
    both = _scaled.combine(prev, ct)
    if both is not None:
        cts[node] = both
        return
    difference = _difference(prev, ct)
    if difference is not None:  # `a + (-b)` as `a - b`: the same bits, one array fewer
        cts[node] = difference
        owned[node] = False
        return
    prev, ct = _scaled.materialize(prev), _scaled.materialize(ct)
    if owned[node] and type(ct) is np.ndarray and ct.dtype == prev.dtype and prev.flags.writeable:
        np.add(prev, ct, out=prev)  # our own sum: safe to add into
        cts[node] = prev
    else:
        total = direct_binary(np.add, prev, ct)
        if total is None:
            total = prev + ct
        cts[node] = total
        owned[node] = type(total) is np.ndarray and total.shape == prev.shape


def _difference(prev: Any, ct: Any) -> Any:
    """`prev + ct` as one subtraction where one of them is a negated cotangent
    (`_scaled.negated`) and the other is not deferred; None otherwise."""
    if type(ct) is _scaled.Scaled and type(prev) is not _scaled.Scaled:
        prev, ct = ct, prev
    elif type(prev) is not _scaled.Scaled or type(ct) is _scaled.Scaled:
        return None
    base = _scaled.negated(prev)
    if base is None:
        return None
    total = direct_binary(np.subtract, ct, base)
    return ct - base if total is None else total


# -- running the transforms (used by the public API) --------------------------------


def jvp_flat(
    name: str, f: Callable[..., Any], primals: Sequence[Any], tangents: Sequence[Any]
) -> tuple[Callable[[Any], tuple[Any, ...]], Any]:
    """Run `f(*args)` under a new `JVPTrace`, where `args` pairs `primals` with
    `tangents`. Returns `(unpack, out)`: `unpack(leaf) -> (primal, tangent)` reads one
    output leaf (a tangent of `None` for a leaf that does not depend on the inputs)."""
    trace = push_trace(JVPTrace(name))
    try:
        tracers = [JVPTracer(trace, p, t) for p, t in zip(primals, tangents, strict=True)]
        out = f(*tracers)
    except Exception as error:
        raise_own_cause(error)
        raise
    finally:
        pop_trace(trace)

    def unpack(leaf: Any) -> tuple[Any, Any]:
        if isinstance(leaf, JVPTracer) and leaf._trace is trace:
            return strip(trace, leaf), leaf.tangent
        return leaf, None

    return unpack, out


def vjp_flat(
    name: str, f: Callable[..., Any], primals: Sequence[Any]
) -> tuple[VJPTrace, list[Any], Any]:
    """Run `f(*tracers)` under a new `VJPTrace`; returns `(trace, tracers, out)`, the
    tracers as they were passed (an in-place write in `f` does not change them)."""
    trace = push_trace(VJPTrace(name))
    try:
        tracers = [trace.new_input(p) for p in primals]
        # `f` may write into its arguments: copies of the fresh tracers (what `_snapshot`
        # makes of them, without its generic slot copy, whose unset `_scalar` raises)
        inputs = [VJPTracer(trace, t.primal, t.node, t.out) for t in tracers]
        out = f(*tracers)
    except Exception as error:
        raise_own_cause(error)
        raise
    finally:
        pop_trace(trace)
        trace.unlock()
    return trace, inputs, out


def strip(trace: Trace, x: Any) -> Any:
    """The primal of `x` if it is a tracer of `trace`, else `x`. A traced primal gets
    `x`'s NumPy-scalar mark (marks are set on the outermost tracer of a result, and the
    example's value leaving this transform is that scalar: `value_and_grad`'s value)."""
    if isinstance(x, ADTracer) and x._trace is trace:
        primal, mark = x.primal, getattr(x, "_scalar", False)
        if mark and isinstance(primal, Tracer) and primal.ndim == 0:
            primal._scalar = mark
        return primal
    return x


def stop_gradient_leaf(x: Any) -> Any:
    """`x` without any autodiff tracer layer (batching tracers are kept). The value a
    tape may hold is given as a read-only view (or a tracer's shallow copy)."""
    if not isinstance(x, ADTracer):
        return x
    while isinstance(x, ADTracer):
        x = x.primal
    if type(x) is np.ndarray:
        x = x.view()
        x.flags.writeable = False
    elif isinstance(x, Tracer):
        x = _snapshot(x)
    return x


# -- registrars ----------------------------------------------------------------------


def _argnums(argnums: Any, n: int) -> tuple[Any, ...]:
    return tuple(range(n)) if argnums is None else tuple(argnums)


@builder
def defvjp(
    func: Any,
    *makers: Callable[..., Any] | None,
    argnums: Iterable[Any] | None = None,
    replace: bool = False,
) -> None:
    """Register VJP makers, one per argnum: `maker(ans, *args, **kwargs) -> (g -> ct)`."""
    table = dict(zip(_argnums(argnums, len(makers)), makers, strict=True))

    def maker(
        argnum: Any, ans: Any, args: tuple[Any, ...], kwargs: dict[Any, Any]
    ) -> Callable[..., Any]:
        m = table.get(argnum, _MISSING)
        if m is _MISSING:
            raise NoRule(argnum, "vjp")
        if m is None:
            return _zero_pullback
        pullback: Callable[..., Any] = m(ans, *args, **kwargs)
        return pullback

    defvjp_argnum(func, maker, replace=replace)


_MISSING = object()


def _zero_pullback(g: Any) -> None:
    return None


@builder
def defvjp_argnum(func: Any, maker: Callable[..., Any], *, replace: bool = False) -> None:
    """Register `maker(argnum, ans, args, kwargs) -> (g -> ct)` for every operand."""

    def rule(
        argnums: list[Any], ans: Any, args: tuple[Any, ...], kwargs: dict[Any, Any]
    ) -> Callable[..., Any]:
        pulls = [maker(a, ans, args, kwargs) for a in argnums]
        if _all_elementwise(pulls):
            return _ElementwisePullback(pulls)
        if len(pulls) == 1:
            (pull,) = pulls
            return lambda g: (pull(g),)
        return lambda g: [p(g) for p in pulls]

    for f in each_function(func):
        register(f, "vjp", rule, replace=replace)


def _all_elementwise(pulls: list[Any]) -> bool:
    for p in pulls:  # (a loop, not `all` of a generator: this runs for every primitive)
        if type(p) is not _PartialPullback and p is not _zero_pullback:
            return False
    return True


@builder
def defvjp_argnums(func: Any, maker: Callable[..., Any], *, replace: bool = False) -> None:
    """Register `maker(argnums, ans, args, kwargs) -> (g -> cotangents)`, one call for
    all traced operands (for rules that share work between them)."""
    for f in each_function(func):
        register(f, "vjp", maker, replace=replace)


@builder
def defjvp(
    func: Any,
    *jvps: Callable[..., Any] | None,
    argnums: Iterable[Any] | None = None,
    replace: bool = False,
) -> None:
    """Register JVPs, one per argnum: `jvp(t, ans, *args, **kwargs) -> output tangent`."""
    table = dict(zip(_argnums(argnums, len(jvps)), jvps, strict=True))

    def jvp(argnum: Any, t: Any, ans: Any, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        fn = table.get(argnum, _MISSING)
        if fn is _MISSING:
            raise NoRule(argnum, "jvp")
        return None if fn is None else fn(t, ans, *args, **kwargs)

    defjvp_argnum(func, jvp, replace=replace)


@builder
def defjvp_argnum(func: Any, jvp: Callable[..., Any], *, replace: bool = False) -> None:
    """Register `jvp(argnum, t, ans, args, kwargs) -> output tangent` for every operand."""

    def rule(
        args: tuple[Any, ...], kwargs: dict[Any, Any], ans: Any, tangents: dict[Any, Any]
    ) -> Any:
        out = None
        for argnum, t in tangents.items():
            out = add_any(out, jvp(argnum, t, ans, args, kwargs))
        return out

    for f in each_function(func):
        register(f, "jvp", rule, replace=replace)


@builder
def defjvp_argnums(func: Any, rule: Callable[..., Any], *, replace: bool = False) -> None:
    """Register `rule(args, kwargs, ans, tangents: {argnum: t}) -> output tangent`."""
    for f in each_function(func):
        register(f, "jvp", rule, replace=replace)


@builder
def deflinear(func: Any, argnums: Iterable[Any] = (0,), *, replace: bool = False) -> None:
    """`func` is linear in the operands `argnums` jointly (an argnum `(i, "*")` means
    every item of sequence argument `i`): its JVP is `func` applied to the tangents."""
    argnums = tuple(argnums)
    for f in each_function(func):
        prim = register(f, "linear", True, replace=replace)

        def rule(
            args: tuple[Any, ...],
            kwargs: dict[Any, Any],
            ans: Any,
            tangents: dict[Any, Any],
            prim: Any = prim,
        ) -> Any:
            for a in tangents:
                if not _covered(a, argnums):
                    raise NoRule(a, "jvp")
            new_args = _substitute(args, argnums, tangents)
            if any(isinstance(a, str) for a in tangents):
                kwargs = {k: tangents.get(k, v) for k, v in kwargs.items()}
            return bind(prim, new_args, kwargs)

        register(prim, "jvp", rule, replace=replace)


def _covered(argnum: Any, argnums: tuple[Any, ...]) -> bool:
    if argnum in argnums:
        return True
    return isinstance(argnum, tuple) and (argnum[0], "*") in argnums


def _substitute(
    args: tuple[Any, ...], argnums: tuple[Any, ...], tangents: dict[Any, Any]
) -> tuple[Any, ...]:
    """`args` with each linear operand replaced by its tangent, or zeros if untraced."""
    out = list(args)
    for a in argnums:
        if isinstance(a, tuple):
            i = a[0]
            if i >= len(out):
                continue
            out[i] = [
                _tangent_or_zeros(tangents, (i, j), x) for j, x in enumerate(out[i])
            ]  # fmt: skip
        elif a < len(out):
            out[a] = _tangent_or_zeros(tangents, a, out[a])
    return tuple(out)


def _tangent_or_zeros(tangents: dict[Any, Any], argnum: Any, x: Any) -> Any:
    t = tangents.get(argnum)
    if t is not None:
        return t
    if hasattr(x, "shape"):
        return np.zeros_like(x)
    if isinstance(x, int | float | complex):
        return 0.0 * x  # (a Python number stays weakly typed)
    return np.zeros_like(np.asarray(x))  # a list (`np.concatenate([[0.0], x])`), ...


@builder
def defelementwise(
    func: Any, *derivs: Callable[..., Any] | float | None, argnums: Iterable[Any] | None = None,
    replace: bool = False,
) -> None:  # fmt: skip
    """Elementwise `func` from its partials `deriv(ans, *args)` (a number for a constant,
    `None` for zero): JVP `t * deriv`, VJP `g * deriv` (summed over broadcast axes by
    the engine)."""
    table = dict(zip(_argnums(argnums, len(derivs)), derivs, strict=True))

    def jvp(argnum: Any, t: Any, ans: Any, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        d = table.get(argnum, _MISSING)
        if d is _MISSING or kwargs.get("where", True) is not True:
            raise NoRule(argnum if d is _MISSING else "where", "jvp")
        return None if d is None else _scale(t, d, ans, args)

    def maker(
        argnum: Any, ans: Any, args: tuple[Any, ...], kwargs: dict[Any, Any]
    ) -> Callable[..., Any]:
        d = table.get(argnum, _MISSING)
        if d is _MISSING or kwargs.get("where", True) is not True:
            raise NoRule(argnum if d is _MISSING else "where", "vjp")
        if d is None:
            return _zero_pullback
        return _PartialPullback(d, ans, args)

    def jvp_rule(
        args: tuple[Any, ...], kwargs: dict[Any, Any], ans: Any, tangents: dict[Any, Any]
    ) -> Any:
        shared = _shared_tangent(tangents, table, kwargs)
        if shared is not None:  # `f(x, x)`: `t * (d0 + d1)`, one tangent-sized product
            d0, d1 = partial_value(table[0], ans, *args), partial_value(table[1], ans, *args)
            return _times(shared, d0 + d1)
        out, own = None, False  # (`own`: `out` is a new value only this rule holds)
        for argnum, t in tangents.items():
            if out is not None and _negates(table.get(argnum)) and type(out) not in (tuple, list):
                if kwargs.get("where", True) is not True:
                    raise NoRule("where", "jvp")
                out, own = _sum_into(np.subtract, out, own, t)  # `out + (-t)`: the same bits
                continue
            c = jvp(argnum, t, ans, args, kwargs)
            if out is None or c is None:
                own = own if c is None else c is not t  # (a partial of 1 passes `t` on)
                out = c if out is None else out
            elif type(out) in (tuple, list):
                out = add_any(out, c)
            else:
                out, own = _sum_into(np.add, out, own, c)
        return out

    for f in each_function(func):
        register(f, "jvp", jvp_rule, replace=replace)
    defvjp_argnum(func, maker, replace=replace)
    for f in each_function(func):
        register(f, "partials", derivs, replace=replace)


def _shared_tangent(tangents: dict[Any, Any], table: dict[Any, Any], kwargs: dict[Any, Any]) -> Any:
    """The tangent of both operands of a binary elementwise call on one value (`x * x`),
    where both have partials and no `where=`; else None."""
    if len(tangents) != 2 or kwargs.get("where", True) is not True:
        return None
    t = tangents.get(0)
    if t is None or t is not tangents.get(1) or type(t) in (tuple, list):
        return None
    if table.get(0) is None or table.get(1) is None:  # (missing or zero: the usual path)
        return None
    return t


def _sum_into(ufunc: np.ufunc, out: Any, own: bool, c: Any) -> tuple[Any, bool]:
    """`ufunc(out, c)`, written into `out` where the rule made it and holds it alone."""
    if own:
        total = accumulate_into(ufunc, out, c)
        if total is not None:
            return total, True
    return ufunc(out, c), True


def _negates(d: Any) -> bool:
    """Whether the partial `d` given to `defelementwise` is the number -1."""
    return type(d) in (int, float) and d == -1


class _PartialPullback:
    """`g -> g * d(ans, *args)`: the pullback of one operand of an elementwise
    primitive, with its partial `d` readable on its own (see `_scaled`)."""

    __slots__ = ("d", "ans", "args")

    def __init__(self, d: Any, ans: Any, args: tuple[Any, ...]) -> None:
        self.d, self.ans, self.args = d, ans, args

    def __call__(self, g: Any) -> Any:
        return _scale(g, self.d, self.ans, self.args)

    def partial(self) -> Any:
        return partial_value(self.d, self.ans, *self.args)


class _ElementwisePullback:
    """The pullback of an elementwise primitive: one `_PartialPullback` (or the zero
    pullback) per traced operand. `backward` may call `scaled` instead, which keeps a
    large cotangent's product with small partials deferred (`_scaled.Scaled`)."""

    __slots__ = ("pulls",)

    def __init__(self, pulls: list[Any]) -> None:
        self.pulls = pulls

    def __call__(self, g: Any) -> list[Any]:
        return [p(g) for p in self.pulls]

    def scaled(self, ct: Any) -> list[Any]:
        base, scale = _scaled.split(ct)
        out: list[Any] = []
        for p in self.pulls:
            if p is _zero_pullback:
                out.append(None)
                continue
            d = p.partial()
            if _scaled.defers(base, d):
                d = _scaled.widened(d, base.dtype)
                out.append(_scaled.Scaled(base, _scaled.rescale(scale, d)))
            else:
                out.append(_times(_scaled.materialize(ct), d))
        return out


def _scale(t: Any, d: Any, ans: Any, args: tuple[Any, ...]) -> Any:
    """`t * d(ans, *args)`, where a constant partial may be given as a number."""
    return _times(t, d(ans, *args) if callable(d) else d)


def _times(t: Any, d: Any) -> Any:
    """`t * d` for the value of a partial (no product for the numbers 1 and -1)."""
    if type(d) in (int, float):
        if d == 1:
            return t
        if d == -1:
            return -t
    out = direct_binary(np.multiply, t, d)
    return t * d if out is None else out


def partial_value(d: Any, ans: Any, *args: Any) -> Any:
    """The value of a partial given to `defelementwise` (a number or a function)."""
    return d(ans, *args) if callable(d) else d


@builder
def defzero(func: Any, argnums: Iterable[Any] | None = None, *, replace: bool = False) -> None:
    """The result of `func` has zero derivative with respect to `argnums` (all if None)."""
    for f in each_function(func):
        register(f, "zero", ALL if argnums is None else frozenset(argnums), replace=replace)


@builder
def defcomposite(func: Any, impl: Callable[..., Any], *, replace: bool = False) -> None:
    """Under differentiation compute `func(*args, **kwargs)` as `impl(*args, **kwargs)`."""
    for f in each_function(func):
        register(f, "composite", impl, replace=replace)
