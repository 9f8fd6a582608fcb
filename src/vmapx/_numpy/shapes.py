"""Shape family: functions of one array whose axis arguments are per-example axes.

Most are "shift every axis argument by one and prepend the batch axis to shapes".
Results that NumPy gives as views stay views (registered with `may_view=True`).
Arguments that decide the output's shape (`reps`, `repeats`, `k` of `rot90`, ...)
must be unbatched: a batched one runs the call once per example, with a warning.

Derivatives (see `vmapx._autodiff`): shape functions are linear: the JVP is the function
of the tangent, the VJP undoes the shape change on the cotangent (`broadcast_to`'s sum
is done by the engine).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any, cast

import numpy as np

from .._autodiff import (
    ADTracer,
    defcomposite,
    defelementwise,
    deflinear,
    defvjp,
    defvjp_argnum,
    defvjp_argnums,
    defzero,
)
from .._batching import (
    BatchTrace,
    align_rank,
    bcast_batch,
    defbatch,
    example_ndim,
    is_batched,
    unwrap,
)
from .._compat import NUMPY2, astype, present
from .._core import Trace, Tracer
from .._passthrough import converted_in, has_tracer
from .._payload import like, listed, moved
from .._registry import function_name, get_arg, set_arg
from .._rule_helpers import (
    example_shape,
    flat_shape,
    per_example,
    reduced_axes,
    scalar_axis,
    shift_axis,
    shift_one,
    value_and_axis,
)
from ._tracer_api import IN_PLACE
from .structural import deflinear_in, defstructural, every_positional, operands, positions_vjp

# -- helpers shared by the shape, join and elementwise families --------------------


def raise_like_numpy(func: Callable[..., Any], ndim: int, *args: Any, **kwargs: Any) -> None:
    """Raise the error NumPy gives for one example with `ndim` axes (a tiny stand-in),
    where the batched call would fail differently or not at all."""
    func(np.zeros((1,) * ndim), *args, **kwargs)
    raise AssertionError(f"{function_name(func)} accepted a {ndim}-d example")  # pragma: no cover


def _value_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    """Elementwise-like functions of one array with no axis: apply as they are."""

    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        v = unwrap(trace, args[0])[0]
        return trace.wrap(func(v, *args[1:], **kwargs))

    return rule


def _meta_rule(attr: str) -> Callable[..., Any]:
    """`np.shape/np.ndim/np.size`: answered from the per-example view, not batched."""

    def factory(func: Callable[..., Any]) -> Callable[..., Any]:
        def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
            x = args[0]
            axis = get_arg(args, kwargs, 1, "axis")
            if attr == "size" and axis is not None:
                return x.shape[axis]
            return getattr(x, attr)

        return rule

    return factory


defbatch(np.shape, _meta_rule("shape"))
defbatch(np.ndim, _meta_rule("ndim"))
defbatch(np.size, _meta_rule("size"))
defbatch([np.copy, astype], _value_rule)
defelementwise([np.copy, astype], 1)
defbatch([np.real, np.imag], _value_rule, may_view=True)


def _identity(g: Any) -> Any:
    return g


deflinear([np.real, np.imag])
defvjp(np.real, lambda ans, x: _identity)
defvjp(np.imag, lambda ans, x: lambda g: -1j * g)


# -- reshape, ravel: `order='A'` and ravel's `order='K'` read each example's memory ------
# 'A' reads an F-contiguous array (not C-contiguous) in F order, else in C order; ravel's
# 'K' reads in the order of the memory (NumPy's reshape refuses 'K'). The loop's examples
# have their own layouts, which the batch does not keep (a batched result's example may
# be F-contiguous where the loop's is not, and the other way round): under `vmap` such a
# call runs the loop, unless every order reads the example alike. Under differentiation
# the order is made explicit from the primal's layout (`_explicit_order`), so that the
# JVP (the function of the tangent, whose layout is another) and the VJP read as the
# forward did.

_RAVEL_LAYOUT = ("A", "a", "K", "k")  # (NumPy takes lower case too)
_RESHAPE_LAYOUT = ("A", "a")


def _reads_alike(shape: tuple[int, ...]) -> bool:
    """Whether every order reads an array of `shape` alike (one axis longer than 1, at
    most, or no element)."""
    return 0 in shape or sum(d != 1 for d in shape) <= 1


def _memory_order(x: Any, order: str, name: str) -> str | tuple[int, ...]:
    """The order in which `name(x, order=...)` (`order` 'A' or 'K') reads `x`: "C", "F",
    or the axes from the outermost in memory to the innermost (a transpose, then "C").
    The layout is the concrete array's under the autodiff tracers (what NumPy sees);
    another trace's value (`vmap`'s batch) does not show an example's: that trace takes
    the value out (under `vmap`, the loop runs)."""
    if _reads_alike(x.shape if hasattr(x, "shape") else np.shape(x)):
        return "C"
    a = x
    while isinstance(a, ADTracer):
        a = a.primal
    if isinstance(a, Tracer):
        raise _layout_unknown(a._trace, order, name)
    converted = converted_in()
    if converted is not None:  # (`np.asfortranarray(x)` may have passed `x` as it was)
        raise _layout_unknown(converted, order, name)
    flags = getattr(a, "flags", None)
    if flags is None:  # (a duck array with no memory layout, as Dask's: C order)
        return "C"
    if order in ("A", "a"):
        return "F" if flags.f_contiguous and not flags.c_contiguous else "C"
    if flags.c_contiguous or flags.f_contiguous:
        return "C" if flags.c_contiguous else "F"
    return _keep_axes(a.shape, a.strides)


def _layout_unknown(trace: Trace, order: str, name: str) -> BaseException:
    return trace.concretization(
        f"`{name}(x, order={order!r})` of a traced value (the order follows the memory "
        "layout of each example, which the batch does not keep)",
        "use `order='C'` or `order='F'`",
    )


def _keep_axes(shape: tuple[int, ...], strides: tuple[int, ...]) -> tuple[int, ...]:
    """The axes, outermost first, in which NumPy's iterator reads an array of neither C
    nor F order for `order='K'`: its stable insertion sort by absolute stride, innermost
    first, where a zero stride (a broadcast or length-1 axis) compares with nothing.
    A negative stride keeps its axis read forwards, as `np.ravel` does."""
    size = [0 if n == 1 else abs(s) for n, s in zip(shape, strides, strict=True)]
    inner = list(range(len(shape) - 1, -1, -1))
    for i in range(1, len(inner)):
        pos, s = i, size[inner[i]]
        for j in range(i - 1, -1, -1):
            if s and size[inner[j]]:
                if size[inner[j]] <= s:
                    break
                pos = j
        inner.insert(pos, inner.pop(i))
    return tuple(inner[::-1])


def _explicit_order(func: Callable[..., Any], pos: int, layout: tuple[str, ...]) -> Any:
    """The derivative composite of `np.ravel`/`np.reshape` (order at `pos`): an order in
    `layout` becomes the explicit one the primal's layout gives; others keep the rules."""

    def impl(*args: Any, **kwargs: Any) -> Any:
        order = get_arg(args, kwargs, pos, "order", "C")
        if order == "C" or order not in layout:  # (the common case first)
            return NotImplemented
        read = _memory_order(args[0], order, f"np.{func.__name__}")
        args, kwargs = set_arg(args, kwargs, pos, "order", read if isinstance(read, str) else "C")
        if not isinstance(read, str):  # ('K' of another layout: its axes in memory order)
            args = (np.transpose(args[0], read), *args[1:])
        return func(*args, **kwargs)

    return impl


def _reshape_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        v = unwrap(trace, args[0])[0]
        shape = get_arg(args, kwargs, 1, "shape")
        if shape is None:
            shape = kwargs.get("newshape")
        shape = resolve_shape(v.shape[1:], shape)
        order = get_arg(args, kwargs, 2, "order", "C")
        if order != "C" and order in _RESHAPE_LAYOUT:  # ('K': NumPy's error, below)
            if not _reads_alike(v.shape[1:]):
                raise _layout_unknown(trace, order, "np.reshape")
            order = "C"
        return trace.wrap(np.reshape(v, (v.shape[0], *shape), order=order))

    return rule


def _ravel_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        v = unwrap(trace, args[0])[0]
        order = get_arg(args, kwargs, 1, "order", "C")
        if order != "C" and order in _RAVEL_LAYOUT:
            if not _reads_alike(v.shape[1:]):
                raise _layout_unknown(trace, order, "np.ravel")
            order = "C"
        return trace.wrap(np.reshape(v, flat_shape(v), order=order))

    return rule


def _broadcast_to_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        v = unwrap(trace, args[0])[0]
        shape = resolve_shape((), get_arg(args, kwargs, 1, "shape"))
        v = v.reshape(v.shape[:1] + (1,) * (len(shape) - v.ndim + 1) + v.shape[1:])
        return trace.wrap(np.broadcast_to(v, (v.shape[0], *shape)))

    return rule


def resolve_shape(example_shape: tuple[Any, ...], shape: Any) -> tuple[int, ...]:
    """A reshape target with its `-1` resolved from one example's size (so that a
    zero-size batch reshapes too)."""
    shape = (shape,) if isinstance(shape, int | np.integer) else tuple(shape)
    if -1 in shape:
        known = int(np.prod([d for d in shape if d != -1], dtype=np.int64))
        size = int(np.prod(example_shape, dtype=np.int64))
        shape = tuple(size // known if known and d == -1 else d for d in shape)
    return cast(tuple[int, ...], shape)


def _squeeze_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        v = unwrap(trace, args[0])[0]
        axis = get_arg(args, kwargs, 1, "axis")
        nd = v.ndim - 1
        if axis is None:  # never the batch axis, even when the batch has size 1
            axis = tuple(i for i, d in enumerate(v.shape[1:]) if d == 1)
        return trace.wrap(np.squeeze(v, reduced_axes(axis, nd)))  # (0-d: see scalar_axis)

    return rule


def _transpose_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        v = unwrap(trace, args[0])[0]
        nd = v.ndim - 1
        axes = get_arg(args, kwargs, 1, "axes")
        axes = range(nd - 1, -1, -1) if axes is None else axes
        return trace.wrap(np.transpose(v, (0, *(shift_one(a, nd) for a in axes))))

    return rule


def _axes_rule(*positions: int, names: tuple[str, ...]) -> Callable[..., Any]:
    """Functions whose arguments at `positions` (or keywords `names`) are axes of `a`,
    all counted in the input's rank."""

    def factory(func: Callable[..., Any]) -> Callable[..., Any]:
        def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
            x = args[0]
            v = unwrap(trace, x)[0]
            nd = example_ndim(trace, x)
            args = (v, *args[1:])
            for pos, name in zip(positions, names, strict=True):
                axis = get_arg(args, kwargs, pos, name)
                if axis is not None:
                    new = shift_axis(tuple(axis) if np.iterable(axis) else axis, nd)
                    args, kwargs = set_arg(args, kwargs, pos, name, new)
            return trace.wrap(func(*args, **kwargs))

        return rule

    return factory


def _expand_dims_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        v = unwrap(trace, args[0])[0]
        axis = get_arg(args, kwargs, 1, "axis")
        axes = tuple(axis) if isinstance(axis, tuple | list) else (axis,)
        out_nd = v.ndim - 1 + len(axes)
        return trace.wrap(np.expand_dims(v, tuple(shift_one(a, out_nd) for a in axes)))

    return rule


defbatch(np.reshape, _reshape_rule, may_view=True)


def _unreshape(ans: Any, x: Any, *args: Any, **kwargs: Any) -> Callable[..., Any]:
    order = get_arg(args, kwargs, 1, "order", "C")  # (explicit: see `_explicit_order`)
    return lambda g: np.reshape(g, x.shape, order="F" if order in ("F", "f") else "C")


defvjp(np.reshape, _unreshape)
defcomposite(np.reshape, _explicit_order(np.reshape, 2, _RESHAPE_LAYOUT))
defbatch(np.ravel, _ravel_rule, may_view=True)


def _unravel(ans: Any, x: Any, *args: Any, **kwargs: Any) -> Callable[..., Any]:
    order = get_arg(args, kwargs, 0, "order", "C")  # (explicit: see `_explicit_order`)
    return lambda g: np.reshape(g, x.shape, order="F" if order in ("F", "f") else "C")


defvjp(np.ravel, _unravel)
defcomposite(np.ravel, _explicit_order(np.ravel, 1, _RAVEL_LAYOUT))
defbatch([np.transpose, np.permute_dims] if hasattr(np, "permute_dims") else np.transpose,
         _transpose_rule, may_view=True)  # fmt: skip


def _untranspose(ans: Any, x: Any, *args: Any, **kwargs: Any) -> Callable[..., Any]:
    axes = get_arg(args, kwargs, 0, "axes")
    if axes is None:
        return lambda g: np.transpose(g)
    inverse = tuple(np.argsort([a % x.ndim for a in axes]))
    return lambda g: np.transpose(g, inverse)


defvjp([np.transpose, np.permute_dims] if hasattr(np, "permute_dims") else np.transpose,
       _untranspose)  # fmt: skip
defbatch(np.moveaxis, _axes_rule(1, 2, names=("source", "destination")), may_view=True)


defvjp(
    np.moveaxis, lambda ans, x, source, destination: lambda g: np.moveaxis(g, destination, source)
)
defbatch(np.swapaxes, _axes_rule(1, 2, names=("axis1", "axis2")), may_view=True)


defvjp(np.swapaxes, lambda ans, x, axis1, axis2: lambda g: np.swapaxes(g, axis1, axis2))
defbatch(np.squeeze, _squeeze_rule, may_view=True)
defbatch(np.expand_dims, _expand_dims_rule, may_view=True)


def _unshape(ans: Any, x: Any, *args: Any, **kwargs: Any) -> Callable[..., Any]:
    return lambda g: np.reshape(g, x.shape)


defvjp([np.squeeze, np.expand_dims], _unshape)
defbatch(np.broadcast_to, _broadcast_to_rule, may_view=True)


_SHAPE_FUNCS = [np.reshape, np.ravel, np.transpose, np.moveaxis, np.swapaxes, np.squeeze,
                np.expand_dims, np.broadcast_to]  # fmt: skip
deflinear(_SHAPE_FUNCS + ([np.permute_dims] if hasattr(np, "permute_dims") else []))
defvjp(np.broadcast_to, lambda ans, x, *args, **kwargs: _identity)


def _dtype_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    """Functions of dtypes only (`result_type`, `can_cast`, ...): answered unbatched,
    with each traced argument standing in as an empty array of its dtype."""

    def stand_in(x: Any) -> Any:
        return np.empty(0, dtype=x.dtype) if isinstance(x, Tracer) else x

    def stand_in_0d(x: Any) -> Any:  # (all 0-d: NumPy 1.26 promotes them by type)
        return np.zeros((), dtype=x.dtype) if isinstance(x, Tracer) else x

    def zero_d(x: Any) -> bool:
        return isinstance(x, Tracer) and x.ndim == 0

    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        if not NUMPY2 and func in (np.result_type, np.can_cast) and any(map(zero_d, args)):
            # NumPy 1.26 promotes 0-d values among themselves by type, but a 0-d value
            # next to arrays by its value (each example's): that lies between what its
            # least value (0) and its dtype give; where those agree, it is the answer
            if not any(np.ndim(x) for x in args if not isinstance(x, np.dtype | type | str)):
                return func(*map(stand_in_0d, args), **kwargs)
            low = func(*[stand_in_0d(x) if zero_d(x) else stand_in(x) for x in args], **kwargs)
            high = func(*[x.dtype if zero_d(x) else stand_in(x) for x in args], **kwargs)
            if low == high:
                return low
            raise trace.concretization(
                f"`np.{func.__name__}` of a 0-d value per example next to arrays (NumPy "
                "1.26 decides by the value)",
                "pass dtypes (`x.dtype`) rather than values",
            )
        return func(*map(stand_in, args), **{k: stand_in(v) for k, v in kwargs.items()})

    return rule


defbatch([np.result_type, np.can_cast, np.common_type, np.iscomplexobj, np.isrealobj],
         _dtype_rule)  # fmt: skip


# -- promotions: atleast_*d, broadcast_arrays ------------------------------------------

_ATLEAST = {np.atleast_1d: 1, np.atleast_2d: 2, np.atleast_3d: 3}
# what NumPy returns for several arrays (tuple since 2.0)
_SEQ: type[tuple[Any, ...]] | type[list[Any]] = type(np.atleast_1d(0, 0))


def atleast_shape(shape: tuple[Any, ...], n: int) -> tuple[int, ...]:
    """The shape `np.atleast_{n}d` gives an array of `shape`."""
    shape = tuple(shape)
    if len(shape) >= n:
        return shape
    if n == 3:
        return {0: (1, 1, 1), 1: (1, *shape, 1), 2: (*shape, 1)}[len(shape)]
    return (1,) * (n - len(shape)) + shape


def _atleast_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    n = _ATLEAST[func]

    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        outs = []
        for x in args:
            v, b = unwrap(trace, x)
            if b:
                outs.append(trace.wrap(v.reshape((v.shape[0], *atleast_shape(v.shape[1:], n)))))
            else:
                outs.append(func(x))
        return outs[0] if len(outs) == 1 else _SEQ(outs)

    return rule


_BROADCAST_SEQ = type(np.broadcast_arrays())


def _broadcast_arrays_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        shapes = [example_shape(trace, x) for x in args]
        shape = np.broadcast_shapes(*shapes)
        outs: list[Any] = []
        for x, s in zip(args, shapes, strict=True):
            v, b = unwrap(trace, x)
            if b:  # unbatched ones broadcast to one example's shape only
                v = align_rank(v, len(s), len(shape))
                outs.append(trace.wrap(np.broadcast_to(v, (v.shape[0], *shape))))
            else:
                outs.append(np.broadcast_to(x, shape, **kwargs))
        return _BROADCAST_SEQ(outs)

    return rule


defbatch(list(_ATLEAST), _atleast_rule, may_view=True)


# atleast_*d reshape each array; broadcast_arrays is broadcast_to of each (read-only views
# instead of NumPy's views that warn when written or asked whether they may be)
deflinear_in(list(_ATLEAST), every_positional)
defvjp_argnum(
    list(_ATLEAST),
    lambda argnum, ans, args, kwargs: (
        lambda g: np.reshape(g[argnum] if len(args) > 1 else g, np.shape(args[argnum]))
    ),
)
defbatch(np.broadcast_arrays, _broadcast_arrays_rule, may_view=True)


defcomposite(
    np.broadcast_arrays,
    lambda *args, subok=False: _BROADCAST_SEQ(
        np.broadcast_to(x, np.broadcast_shapes(*map(np.shape, args))) for x in args
    ),
)


# -- reversals and rotations: flip, fliplr, flipud, roll, rot90 ------------------------


def _flip_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        v, nd = unwrap(trace, args[0])[0], example_ndim(trace, args[0])
        axis = get_arg(args, kwargs, 1, "axis")
        axis = tuple(axis) if isinstance(axis, list) else axis
        return trace.wrap(np.flip(v, shift_axis(axis, nd)))

    return rule


def _flip_fixed_rule(axis: int) -> Callable[..., Any]:
    """`fliplr` (axis 1) and `flipud` (axis 0)."""

    def factory(func: Callable[..., Any]) -> Callable[..., Any]:
        def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
            v, nd = unwrap(trace, args[0])[0], example_ndim(trace, args[0])
            if nd <= axis:
                raise_like_numpy(func, nd)
            return trace.wrap(np.flip(v, axis + 1))

        return rule

    return factory


def _roll_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        x = args[0]
        shift = get_arg(args, kwargs, 1, "shift")
        axis = get_arg(args, kwargs, 2, "axis")
        v, nd = bcast_batch(trace, x), example_ndim(trace, x)
        shape, flat = v.shape, axis is None  # None: roll the flattened example
        if flat:
            v, axis, nd = v.reshape(flat_shape(v)), 0, 1
        if isinstance(shift, Tracer):  # a shift per example (or of an outer transform)
            s = bcast_batch(trace, shift)
            if s.dtype.kind == "f" and not NUMPY2:  # (NumPy 1.26 slices by the float)
                return per_example(trace, func, args, kwargs, "with a float shift")
            if s.dtype.kind == "f" and not np.isfinite(s).all():  # (`int(shift)` raises)
                return per_example(trace, func, args, kwargs, "with a non-finite shift")
            out = _roll_batched_shift(v, s, axis, nd)
        else:
            axis = tuple(axis) if isinstance(axis, list) else axis
            out = np.roll(v, shift, axis=shift_axis(axis, nd))
        return trace.wrap(out.reshape(shape) if flat else out)

    return rule


def _roll_batched_shift(v: Any, s: Any, axis: Any, nd: int) -> Any:
    """`np.roll` with a different shift `s` (batch-front) per example: one gather per
    rolled axis (several shifts of one axis add up, as in NumPy)."""
    axes = np.asarray(axis)
    if s.ndim > 2 or axes.ndim > 1:
        raise ValueError("'shift' and 'axis' should be scalars or 1D sequences")
    b = s.shape[0]
    count = np.broadcast_shapes(s.shape[1:], axes.shape)
    k = int(np.prod(count, dtype=np.int64))
    s = np.broadcast_to(s, (b, *count)).reshape(b, k)
    rolled = [shift_one(int(a), nd) for a in np.broadcast_to(axes, count).reshape(k)]
    for ax in dict.fromkeys(rolled):
        n = v.shape[ax]
        total = sum(_whole_shift(s[:, j], n) for j, a in enumerate(rolled) if a == ax)
        ramp = np.arange(n, like=like(v)).reshape((1,) * ax + (n,) + (1,) * (nd - ax))
        index = (ramp - total.reshape((b,) + (1,) * nd)) % max(n, 1)
        v = np.take_along_axis(v, index, axis=ax)
    return v


def _whole_shift(shift: Any, n: int) -> Any:
    """The shifts as `np.roll` takes them, modulo `n`: `int(shift)` truncates a float
    (1.7 -> 1, -1.5 -> -1; exact for any finite float, however large)."""
    if shift.dtype.kind != "f":
        return shift
    return np.fmod(np.trunc(shift), max(n, 1)).astype(np.intp)


def _rot90_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        x = args[0]
        k = get_arg(args, kwargs, 1, "k", 1)
        axes = tuple(get_arg(args, kwargs, 2, "axes", (0, 1)))
        if is_batched(trace, k):
            return per_example(trace, func, args, kwargs, "with a batched `k`")
        v, nd = unwrap(trace, x)[0], example_ndim(trace, x)
        valid = len(axes) == 2 and all(-nd <= a < nd for a in axes)
        if not valid or axes[0] % nd == axes[1] % nd:
            raise_like_numpy(func, nd, k, axes)
        return trace.wrap(np.rot90(v, k, axes=(shift_one(axes[0], nd), shift_one(axes[1], nd))))

    return rule


defbatch(np.flip, _flip_rule, may_view=True)
defbatch(np.fliplr, _flip_fixed_rule(1), may_view=True)
defbatch(np.flipud, _flip_fixed_rule(0), may_view=True)
deflinear([np.flip, np.fliplr, np.flipud])


def _same_on_cotangent(func: Callable[..., Any]) -> Callable[..., Any]:
    """The VJP maker of a self-adjoint rearrangement (`flip`, `tril`: the same call)."""
    return lambda ans, x, *args, **kwargs: lambda g: func(g, *args, **kwargs)


for _func in (np.flip, np.fliplr, np.flipud):
    defvjp(_func, _same_on_cotangent(_func))
defbatch(np.roll, _roll_rule)
deflinear(np.roll)


defvjp(np.roll, lambda ans, x, shift, axis=None: lambda g: np.roll(g, np.negative(shift), axis))
defbatch(np.rot90, _rot90_rule, may_view=True)
deflinear(np.rot90)


defvjp(np.rot90, lambda ans, m, k=1, axes=(0, 1): lambda g: np.rot90(g, -k, axes))


# -- repetition: tile, repeat, resize --------------------------------------------------


def _tile_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        x, reps = args[0], get_arg(args, kwargs, 1, "reps")
        if is_batched(trace, reps) or not is_batched(trace, x):
            return per_example(trace, func, args, kwargs, "with a batched `reps`")
        v, nd = unwrap(trace, x)[0], example_ndim(trace, x)
        reps = tuple(reps) if np.iterable(reps) else (reps,)
        rank = max(nd, len(reps))
        return trace.wrap(np.tile(align_rank(v, nd, rank), (1,) * (1 + rank - len(reps)) + reps))

    return rule


def _repeat_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        x, repeats = args[0], get_arg(args, kwargs, 1, "repeats")
        axis = get_arg(args, kwargs, 2, "axis")
        if is_batched(trace, repeats) or not is_batched(trace, x):
            return per_example(trace, func, args, kwargs, "with batched `repeats`")
        v, ax = value_and_axis(trace, x, axis, as_1d=True)
        return trace.wrap(np.repeat(v, repeats, axis=ax))

    return rule


def _resize_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        x, new_shape = args[0], get_arg(args, kwargs, 1, "new_shape")
        if not is_batched(trace, x) or has_tracer(new_shape):
            return per_example(trace, func, args, kwargs, "with a batched `new_shape`")
        flat = unwrap(trace, x)[0]
        flat = flat.reshape(flat_shape(flat))
        new_shape = (new_shape,) if isinstance(new_shape, int | np.integer) else tuple(new_shape)
        if any(d < 0 for d in new_shape):
            raise ValueError("all elements of `new_shape` must be non-negative")
        size, n = int(np.prod(new_shape, dtype=np.int64)), flat.shape[1]
        if n == 0 or size == 0:
            return trace.wrap(np.zeros_like(flat, shape=(flat.shape[0], *new_shape)))
        # the example's values repeated cyclically: one gather
        return trace.wrap(
            flat[:, np.arange(size, like=like(flat)) % n].reshape((flat.shape[0], *new_shape))
        )

    return rule


defbatch(np.tile, _tile_rule)
deflinear(np.tile)


def _untile(ans: Any, x: Any, reps: Any) -> Callable[..., Any]:
    """`tile`'s VJP: the cotangent split into (reps, example) axis pairs, summed over reps."""
    shape = np.shape(x)
    reps = tuple(reps) if np.iterable(reps) else (reps,)
    rank = max(len(shape), len(reps))
    pairs = zip((1,) * (rank - len(reps)) + reps, (1,) * (rank - len(shape)) + shape, strict=True)
    split = tuple(n for pair in pairs for n in pair)
    return lambda g: np.reshape(
        np.sum(np.reshape(g, split), axis=tuple(range(0, 2 * rank, 2))), shape
    )


defvjp(np.tile, _untile)
defbatch(np.repeat, _repeat_rule)
deflinear(np.repeat)


first = operands((0, None))


_repeat_positions = positions_vjp(np.repeat, first)


def _repeat_vjp(
    argnums: list[Any], ans: Any, args: tuple[Any, ...], kwargs: dict[Any, Any]
) -> Callable[..., Any]:
    """One repeat count: a reshape and a sum; counts per element: from labels."""
    x, repeats = args[0], get_arg(args, kwargs, 1, "repeats")
    if isinstance(repeats, Tracer) or np.size(repeats) != 1 or argnums != [0]:
        return _repeat_positions(argnums, ans, args, kwargs)
    count, axis, shape = (
        int(np.reshape(repeats, -1)[0]),
        get_arg(args, kwargs, 2, "axis"),
        np.shape(x),
    )
    if axis is None or scalar_axis(axis, len(shape)):  # (0-d: its one-element view)
        size = int(np.prod(shape, dtype=np.intp))
        return lambda g: (np.reshape(np.sum(np.reshape(g, (size, count)), axis=1), shape),)
    ax = axis % len(shape)
    split = shape[:ax] + (shape[ax], count) + shape[ax + 1 :]
    return lambda g: (np.sum(np.reshape(g, split), axis=ax + 1),)


defvjp_argnums(np.repeat, _repeat_vjp)
defbatch(np.resize, _resize_rule)
defstructural(np.resize, first)


# -- matrices: diag, diagflat, diagonal, trace, tril, triu, matrix_transpose ------------


def diag_matrix(v: Any, k: int) -> Any:
    """`np.diag` of each 1-d example of `v` (B, n): matrices with `v` on diagonal `k`."""
    b, m = v.shape
    n = m + abs(k)
    out = np.zeros_like(v, shape=(b, n, n))
    i = np.arange(m, like=like(v))
    out[:, i + max(-k, 0), i + max(k, 0)] = v
    return out


def _diag_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        v, nd = unwrap(trace, args[0])[0], example_ndim(trace, args[0])
        k = get_arg(args, kwargs, 1, "k", 0)
        if not isinstance(k, Tracer):  # (a Python int: `-k` of an unsigned or bool wraps)
            k = int(k) if func is np.diagflat and isinstance(k, np.bool_) else operator.index(k)
        if func is np.diagflat:
            return trace.wrap(diag_matrix(v.reshape(flat_shape(v)), k))
        if nd == 1:
            return trace.wrap(diag_matrix(v, k))
        if nd == 2:
            return trace.wrap(np.diagonal(v, k, axis1=1, axis2=2))
        raise ValueError("Input must be 1- or 2-d.")

    return rule


def _two_axes_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    """`diagonal(a, offset, axis1=0, axis2=1)` and `trace(...)`: both axes are shifted."""

    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        v, nd = unwrap(trace, args[0])[0], example_ndim(trace, args[0])
        if nd < 2:
            raise_like_numpy(func, nd)
        args = (v, *args[1:])
        for pos, name, default in ((2, "axis1", 0), (3, "axis2", 1)):
            axis = shift_one(get_arg(args, kwargs, pos, name, default), nd)
            args, kwargs = set_arg(args, kwargs, pos, name, axis)
        return trace.wrap(func(*args, **kwargs))

    return rule


def _tri_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    """`tril`/`triu` act on the last two axes; a 1-d example is broadcast (as NumPy does)."""

    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        v, nd = unwrap(trace, args[0])[0], example_ndim(trace, args[0])
        k = get_arg(args, kwargs, 1, "k", 0)
        if nd >= 2:
            return trace.wrap(func(v, k=k))
        shape = v.shape[1:]
        zero = np.zeros_like(v, shape=())
        # (np.tri's N and M unpacked from a shape, as np.tril does: mypy cannot tell that
        # they leave `k` to the keyword)
        if func is np.tril:
            return trace.wrap(
                np.where(np.tri(*shape[-2:], k=k, dtype=bool, like=like(v)), v[:, None], zero)  # type: ignore[call-overload]
            )
        return trace.wrap(
            np.where(np.tri(*shape[-2:], k=k - 1, dtype=bool, like=like(v)), zero, v[:, None])  # type: ignore[call-overload]
        )

    return rule


def _matrix_transpose_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        v, nd = unwrap(trace, args[0])[0], example_ndim(trace, args[0])
        if nd < 2:
            raise_like_numpy(func, nd)
        return trace.wrap(np.swapaxes(v, -1, -2))

    return rule


def _rollaxis_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        v, nd = unwrap(trace, args[0])[0], example_ndim(trace, args[0])
        axis = shift_one(get_arg(args, kwargs, 1, "axis"), nd)
        start = get_arg(args, kwargs, 2, "start", 0)
        start = start + nd if start < 0 else start
        if not 0 <= start <= nd:
            raise_like_numpy(func, nd, axis - 1, get_arg(args, kwargs, 2, "start", 0))
        return trace.wrap(np.rollaxis(v, axis, start + 1))

    return rule


defbatch([np.diag, np.diagflat], _diag_rule, may_view=True)
defbatch(np.diagonal, _two_axes_rule, may_view=True)


defstructural([np.diag, np.diagflat, np.diagonal], first)
defbatch(np.trace, _two_axes_rule)


def _trace_impl(a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype: Any = None,
                out: Any = None) -> Any:  # fmt: skip
    if out is not None:
        return NotImplemented
    return np.sum(np.diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)


defcomposite(np.trace, _trace_impl)
defbatch([np.tril, np.triu], _tri_rule)


deflinear([np.tril, np.triu])
for _func in (np.tril, np.triu):
    defvjp(_func, _same_on_cotangent(_func))
defbatch(present(np, "matrix_transpose"), _matrix_transpose_rule, may_view=True)


if hasattr(np, "matrix_transpose"):
    deflinear(np.matrix_transpose)
    defvjp(np.matrix_transpose, lambda ans, x: lambda g: np.swapaxes(g, -1, -2))
defbatch(np.rollaxis, _rollaxis_rule, may_view=True)


def _unrollaxis(ans: Any, x: Any, axis: int, start: int = 0) -> Callable[..., Any]:
    nd = np.ndim(x)
    axis, start = axis % nd, start + nd if start < 0 else start
    return lambda g: np.moveaxis(g, start - 1 if start > axis else start, axis)


deflinear(np.rollaxis)
defvjp(np.rollaxis, _unrollaxis)


def fill_diagonal(a: Any, val: Any, wrap: bool = False) -> None:
    """`np.fill_diagonal` of a traced array: a functional write of its diagonal."""
    shape = a.shape
    if len(shape) < 2:
        raise ValueError("array must be at least 2-d")
    end = None
    if len(shape) == 2:
        step = shape[1] + 1
        end = None if wrap else shape[1] * shape[1]
    else:
        if len(set(shape)) != 1:
            raise ValueError("All dimensions of input must be of equal length")
        step = 1 + int(np.cumprod(shape[:-1]).sum())
    flat = np.arange(int(np.prod(shape, dtype=np.int64)), like=like(a))[:end:step]
    if flat.size == 0 or np.size(val) == 0:
        return
    # `a.flat[...] = val` repeats `val` cyclically, which is what `np.resize` does
    a[np.unravel_index(flat, shape)] = moved(np.resize(val, flat.size), a)


IN_PLACE[np.fill_diagonal] = fill_diagonal  # a traced `a` never reaches the primitive
defbatch(np.fill_diagonal, lambda func: lambda trace, args, kwargs: fill_diagonal(*args, **kwargs))


# -- contiguity: ascontiguousarray, asfortranarray, require ---------------------------
# NumPy dispatches these only through `like=`: `np.ascontiguousarray(x, like=x)`.


def _fortran(v: Any, dtype: Any = None) -> Any:
    """Each example in Fortran order (the batch axis stays the outermost)."""
    perm = (0, *range(v.ndim - 1, 0, -1))
    return np.ascontiguousarray(v.transpose(perm), dtype=dtype, like=v).transpose(perm)


_FLAGS = {"C": "C", "C_CONTIGUOUS": "C", "CONTIGUOUS": "C", "F": "F", "F_CONTIGUOUS": "F",
          "FORTRAN": "F", "A": "A", "ALIGNED": "A", "W": "W", "WRITEABLE": "W", "O": "O",
          "OWNDATA": "O", "E": "E", "ENSUREARRAY": "E"}  # fmt: skip


def _contiguous_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        x = args[0]
        v, nd = unwrap(trace, x)[0], example_ndim(trace, x)
        dtype = get_arg(args, kwargs, 1, "dtype")
        if func is np.require:
            reqs = get_arg(args, kwargs, 2, "requirements") or []
            reqs = {_FLAGS[r.upper()] for r in ([reqs] if isinstance(reqs, str) else reqs)}
            if {"C", "F"} <= reqs:
                raise ValueError("Cannot specify both C and Fortran contiguous.")
            if "F" in reqs:
                v, dtype = _fortran(v, dtype), None
            return trace.wrap(np.require(v, dtype, reqs - {"F"}, like=v))
        if nd == 0:  # these give at least one axis
            v = v.reshape(v.shape[0], 1)
        if func is np.asfortranarray:
            return trace.wrap(_fortran(v, dtype))
        return trace.wrap(np.ascontiguousarray(v, dtype=dtype, like=v))

    return rule


defbatch([np.ascontiguousarray, np.asfortranarray, np.require], _contiguous_rule, may_view=True)


# contiguity changes only the layout (and the dtype: the engine casts back)
deflinear([np.ascontiguousarray, np.asfortranarray, np.require])
defvjp([np.ascontiguousarray, np.asfortranarray, np.require], _unshape)
defzero([np.ascontiguousarray, np.asfortranarray, np.require], argnums=("like",))


# -- pad ---------------------------------------------------------------------------------


def _as_pairs(x: Any, nd: int) -> Any:
    """One example's `pad_width`-style argument as an (nd, 2) array (NumPy's layout)."""
    x = x if hasattr(x, "ndim") else np.asarray(x)
    if x.ndim < 3 and x.size == 1:
        x = x.reshape(1, 1)
    elif x.ndim < 3 and x.size == 2 and x.shape != (2, 1):
        x = x.reshape(1, 2)
    return np.broadcast_to(x, (nd, 2))


def _with_batch_pair(x: Any, nd: int, batch: int = 0) -> Any:
    """A per-example pairs argument of `np.pad` with a pair for the batch axis in front."""
    pairs = _as_pairs(x, nd)
    return np.concatenate([np.full((1, 2), batch, dtype=pairs.dtype, like=like(pairs)), pairs])


def _pad_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        x, pad_width = args[0], get_arg(args, kwargs, 1, "pad_width")
        mode = get_arg(args, kwargs, 2, "mode", "constant")
        opts = {k: w for k, w in kwargs.items() if k not in ("array", "pad_width", "mode")}
        values = opts.pop("constant_values", None) if mode == "constant" else None
        if callable(mode):  # it pads 1-d slices of every axis in place: it must see examples
            return per_example(trace, func, args, kwargs, "with a callable `mode`")
        if any(isinstance(w, Tracer) for w in (pad_width, *opts.values())):
            return per_example(trace, func, args, kwargs, f"with traced options of mode {mode!r}")
        v, nd = bcast_batch(trace, x), example_ndim(trace, x)
        if isinstance(pad_width, dict):
            pairs = np.zeros((nd + 1, 2), dtype=np.intp)
            for axis, w in pad_width.items():
                pairs[shift_one(axis, nd)] = w
        else:
            pairs = _with_batch_pair(pad_width, nd)
        if isinstance(values, Tracer):
            return trace.wrap(_pad_traced_constant(trace, v, pairs[1:], values))
        if values is not None:
            opts["constant_values"] = _with_batch_pair(values, nd)
        if "end_values" in opts:
            opts["end_values"] = _with_batch_pair(opts["end_values"], nd)
        if mode in ("maximum", "mean", "median", "minimum"):
            # the batch axis is padded by nothing, yet NumPy takes its statistic: over
            # one element it costs nothing (`None` is the whole axis: its length)
            length = opts.get("stat_length")
            length = np.reshape(v.shape[1:], (nd, 1)) if length is None else length
            opts["stat_length"] = _with_batch_pair(length, nd, 1)
        return trace.wrap(np.pad(v, listed(pairs), mode, **{k: listed(w) for k, w in opts.items()}))

    return rule


def _pad_traced_constant(trace: BatchTrace, v: Any, pairs: Any, values: Any) -> Any:
    """Constant padding with traced `constant_values`: pad one axis at a time, in
    NumPy's order (later axes cover the corners), joining blocks of the values."""
    c, batched = unwrap(trace, values)
    nd = v.ndim - 1
    shape = example_shape(trace, values)
    lead = c.shape[:1] if batched else ()
    size = int(np.prod(shape, dtype=np.int64))
    pairs_shape = tuple(shape)  # NumPy's reading: one value, one (before, after), or per axis
    if len(shape) < 3 and size == 1:
        pairs_shape = (1, 1)
    elif len(shape) < 3 and size == 2 and tuple(shape) != (2, 1):
        pairs_shape = (1, 2)
    c = c.reshape((*lead, *pairs_shape))
    c = align_rank(c, len(pairs_shape), 2) if batched else c
    c = np.broadcast_to(c, (*lead, nd, 2))
    for axis in range(nd):
        blocks = []
        for side, width in enumerate(pairs[axis]):
            block_shape = v.shape[: axis + 1] + (int(width),) + v.shape[axis + 2 :]
            value = c[..., axis, side]
            value = value.reshape(value.shape + (1,) * nd) if batched else value
            blocks.append(np.broadcast_to(value, block_shape))
        v = np.concatenate(
            [blocks[0], v, blocks[1]], axis=axis + 1, dtype=v.dtype, casting="unsafe"
        )
    return v


# pad: the modes that copy elements (and fill constants) are structural; linear_ramp, the
# statistics and odd reflections are computed axis by axis, in NumPy's order, with
# differentiable calls
_STATS: dict[str, Callable[..., Any]] = {
    "maximum": np.max,
    "minimum": np.min,
    "mean": np.mean,
    "median": np.median,
}


def _pad_mode(args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
    return get_arg(args, kwargs, 2, "mode", "constant")


def _empty_as_constant(
    args: tuple[Any, ...], kwargs: dict[Any, Any]
) -> tuple[tuple[Any, ...], dict[Any, Any]]:
    """`empty` pads nothing in particular: tangents and labels pad zeros (none)."""
    if _pad_mode(args, kwargs) == "empty":
        args, kwargs = set_arg(args, kwargs, 2, "mode", "constant")
    return args, kwargs


def _pad_impl(array: Any, pad_width: Any, mode: Any = "constant", **kwargs: Any) -> Any:
    odd = kwargs.get("reflect_type") == "odd"
    if not (mode in _STATS or mode == "linear_ramp" or odd) or np.size(array) == 0:
        return NotImplemented
    nd = np.ndim(array)
    if isinstance(pad_width, dict):
        pairs = np.zeros((nd, 2), dtype=np.intp)
        for axis, w in pad_width.items():
            pairs[axis] = w
    else:
        pairs = _as_pairs(pad_width, nd)
    if mode == "linear_ramp":
        ends = _value_pairs(kwargs.get("end_values", 0), nd)
    elif mode in _STATS:
        length = kwargs.get("stat_length")
        lengths = [(None, None)] * nd if length is None else _as_pairs(length, nd).tolist()
    y = array
    for axis in range(nd):
        before, after = (int(w) for w in pairs[axis])
        if mode == "linear_ramp":
            sides = _ramp_sides(y, axis, before, after, ends[axis])
        elif mode in _STATS:
            sides = _stat_sides(y, axis, before, after, lengths[axis], _STATS[mode])
        else:
            y = _reflect_axis(y, axis, before, after, mode == "symmetric")
            continue
        parts = [p for p, w in zip((sides[0], y, sides[1]), (before, 1, after), strict=True) if w]
        y = np.concatenate(parts, axis=axis, dtype=np.result_type(array), casting="unsafe")
    return y


def _value_pairs(values: Any, nd: int) -> Any:
    """`_as_pairs` of a possibly traced value (NumPy's reading of pairs)."""
    shape, size = np.shape(values), int(np.prod(np.shape(values), dtype=np.intp))
    if len(shape) < 3 and size == 1:
        values = np.reshape(values, (1, 1))
    elif len(shape) < 3 and size == 2 and shape != (2, 1):
        values = np.reshape(values, (1, 2))
    return np.broadcast_to(values, (nd, 2))


def _at_axis(y: Any, axis: int, start: int, stop: int) -> Any:
    return y[(slice(None),) * axis + (slice(start, stop),)]


def _ramp_sides(y: Any, axis: int, before: int, after: int, ends: Any) -> tuple[Any, ...]:
    """Ramps from each end value (included) towards the edge (excluded), as linspace."""
    n = y.shape[axis]
    sides = []
    for width, edge, end in ((before, _at_axis(y, axis, 0, 1), ends[0]),
                             (after, _at_axis(y, axis, n - 1, n), ends[1])):  # fmt: skip
        ramp = np.arange(width).reshape((width,) + (1,) * (y.ndim - axis - 1))
        sides.append(ramp * ((edge - end) / max(width, 1)) + end)
    return sides[0], np.flip(sides[1], axis)


def _stat_sides(
    y: Any, axis: int, before: int, after: int, lengths: Any, stat: Callable[..., Any]
) -> tuple[Any, ...]:
    n = y.shape[axis]
    left, right = (n if m is None or m > n else int(m) for m in lengths)
    if (left == 0 or right == 0) and stat in (np.max, np.min):
        raise ValueError("stat_length of 0 yields no value for padding")
    values = [stat(_at_axis(y, axis, 0, left), axis=axis, keepdims=True)]
    if left == right == n:
        values.append(values[0])
    else:
        values.append(stat(_at_axis(y, axis, n - right, n), axis=axis, keepdims=True))
    shape = list(y.shape)
    return tuple(
        np.broadcast_to(v, (*shape[:axis], w, *shape[axis + 1 :]))
        for v, w in zip(values, (before, after), strict=True)
    )


def _reflect_axis(y: Any, axis: int, before: int, after: int, symmetric: bool) -> Any:
    """Odd reflection of one axis, chunk by chunk as NumPy pads it (`2 * edge - mirror`)."""
    period = y.shape[axis]
    if period == 1:  # a singleton axis is padded with its edge
        shape = list(y.shape)
        parts = [
            np.broadcast_to(y, (*shape[:axis], w, *shape[axis + 1 :])) for w in (before, after)
        ]
        return np.concatenate([parts[0], y, parts[1]], axis=axis)
    edge = 1 if symmetric else 0
    while before > 0 or after > 0:
        n = y.shape[axis]
        usable = n // period * period if symmetric else (n - 1) // (period - 1) * (period - 1)
        parts = [y]
        if before > 0:
            c = min(usable, before)
            mirror = np.flip(_at_axis(y, axis, 1 - edge, c + 1 - edge), axis)
            parts.insert(0, 2 * _at_axis(y, axis, 0, 1) - mirror)
            before -= c
        if after > 0:
            c = min(usable, after)
            mirror = np.flip(_at_axis(y, axis, n + edge - 1 - c, n + edge - 1), axis)
            parts.append(2 * _at_axis(y, axis, n - 1, n) - mirror)
            after -= c
        y = np.concatenate(parts, axis=axis)
    return y


defbatch(np.pad, _pad_rule)
_PAD_OPERANDS = operands((0, "array"), (None, "constant_values"))
defstructural(np.pad, _PAD_OPERANDS, _empty_as_constant, _empty_as_constant)
defcomposite(np.pad, _pad_impl)
