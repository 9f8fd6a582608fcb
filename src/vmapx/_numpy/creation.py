"""Creation family: `*_like` constructors and functions called with `like=`.

`np.zeros_like(x)` of a batched `x` gives a batched value whose batch axis is a
zero-stride broadcast (no memory per example): it must stay a tracer so that later
index assignments into it (`out[i] = ...`, the common way to fill a result) are
traced, yet nothing is copied until one happens.

Derivatives (see `vmapx._autodiff`): `*_like` results do not depend on the values of
`x`; they stay (constant) tracers so that traced values can be written into them.
`full_like` is linear in `fill_value`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .._autodiff import defcomposite, defelementwise, defzero, stop_gradient_leaf
from .._batching import BatchTrace, aligned_operands, defbatch, example_ndim, is_batched, unwrap
from .._compat import NUMPY2, astype
from .._registry import get_arg, set_arg
from .._rule_helpers import example_shape, per_example, shift_one


def _like_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        x = args[0]
        v, batched = unwrap(trace, x)
        if not batched:  # only `fill_value` is batched (full_like)
            return _full_like_batched_fill(trace, args, kwargs)
        shape = kwargs.pop("shape", None)
        shape = v.shape[1:] if shape is None else _as_shape(shape)
        fill_value, batched_fill = unwrap(trace, get_arg(args, kwargs, 1, "fill_value"))
        example = np.empty_like(v, shape=shape, dtype=kwargs.get("dtype"))
        if func is np.full_like:
            if batched_fill:
                out = np.empty_like(v, shape=(v.shape[0], *shape), dtype=kwargs.get("dtype"))
                out[...] = fill_value.reshape(fill_value.shape[:1] + (1,) * len(shape))
                return trace.wrap(out)
            example = np.full_like(example, fill_value)
        elif func is not np.empty_like:
            example = func(example)
        return trace.wrap(np.broadcast_to(example, (v.shape[0], *shape)))

    return rule


def _as_shape(shape: Any) -> tuple[int, ...]:
    return (int(shape),) if isinstance(shape, int | np.integer) else tuple(shape)


def _full_like_batched_fill(
    trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]
) -> Any:
    x, fill = args[0], unwrap(trace, get_arg(args, kwargs, 1, "fill_value"))[0]
    shape = _as_shape(kwargs.get("shape", np.shape(x)))
    dtype = kwargs.get("dtype") or np.result_type(x)
    out = np.empty_like(fill, shape=(fill.shape[0], *shape), dtype=dtype)
    out[...] = fill.reshape(fill.shape[:1] + (1,) * len(shape))
    return trace.wrap(out)


def _like_kwarg_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    """`np.zeros(..., like=x)` and friends. NumPy drops `like=` before dispatching, so
    this runs only when another argument is batched: `np.full`'s `fill_value` batches,
    a batched size or range gives shapes that differ between examples (a loop)."""

    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        fill = get_arg(args, kwargs, 1, "fill_value")
        if func is np.full and is_batched(trace, fill) and not _batched_rest(trace, args, 1):
            shape = get_arg(args, kwargs, 0, "shape")
            shape = (shape,) if isinstance(shape, int | np.integer) else tuple(shape)
            v = unwrap(trace, fill)[0]
            out = np.empty_like(v, shape=(v.shape[0], *shape), dtype=kwargs.get("dtype"))
            out[...] = v.reshape(v.shape[:1] + (1,) * (len(shape) - v.ndim + 1) + v.shape[1:])
            return trace.wrap(out)
        return per_example(trace, func, args, kwargs, "with a batched size or range")

    return rule


def _batched_rest(trace: BatchTrace, args: tuple[Any, ...], skip: int) -> bool:
    return any(is_batched(trace, a) for i, a in enumerate(args) if i != skip)


defbatch([np.zeros_like, np.ones_like, np.empty_like, np.full_like], _like_rule)


defzero([np.zeros_like, np.ones_like, np.empty_like])
defbatch(
    [np.zeros, np.ones, np.empty, np.full, np.eye, np.identity, np.arange, np.tri,
     np.fromfunction, np.frombuffer, np.fromiter, np.fromstring],
    _like_kwarg_rule,
)  # fmt: skip


defelementwise([np.full_like, np.full], None, 1)


# -- linspace, logspace, geomspace with batched endpoints ---------------------------------

# per function: the positions and names of its array operands, and of `axis`
_SPACES: dict[Callable[..., Any], tuple[tuple[tuple[int, str], ...], int]] = {
    np.linspace: (((0, "start"), (1, "stop")), 6),
    np.logspace: (((0, "start"), (1, "stop"), (4, "base")), 6),
    np.geomspace: (((0, "start"), (1, "stop")), 5),
}


def _space_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    """Batched operands get the batch axis at the front of their broadcast shape, and
    `axis` (where the new axis goes, counted in one example's result) shifts by one.
    (`np.linspace` divides differently when any step is 0: batched, "any" spans the
    batch, so examples then may differ from the loop in the last bit.)"""
    operands, axis_pos = _SPACES[func]

    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        present = [(p, n) for p, n in operands if len(args) > p or n in kwargs]
        values = [get_arg(args, kwargs, p, n) for p, n in present]
        if any(is_batched(trace, a) for a in args[2:] if all(a is not v for v in values)):
            return per_example(trace, func, args, kwargs, "with a batched `num`")
        rank = max(example_ndim(trace, a) for a in values)
        for (p, n), a in zip(present, aligned_operands(trace, values), strict=True):
            args, kwargs = set_arg(args, kwargs, p, n, a)
        axis = shift_one(get_arg(args, kwargs, axis_pos, "axis", 0), rank + 1)
        args, kwargs = set_arg(args, kwargs, axis_pos, "axis", axis)
        out = func(*args, **kwargs)
        if isinstance(out, tuple):  # retstep: the step is batched, or NaN for all
            return trace.wrap(out[0]), trace.wrap(out[1]) if np.ndim(out[1]) else out[1]
        return trace.wrap(out)

    return rule


defbatch(list(_SPACES), _space_rule)


defzero(
    [np.zeros, np.ones, np.empty, np.full, np.eye, np.identity, np.arange, np.linspace,
     np.logspace, np.geomspace, np.tri, np.fromfunction, np.frombuffer, np.fromiter,
     np.fromstring],
    argnums=("like",),
)  # fmt: skip


def _linspace(start: Any, stop: Any, num: int = 50, endpoint: bool = True,
              retstep: bool = False, dtype: Any = None, axis: int = 0,
              **kwargs: Any) -> Any:  # fmt: skip
    """`np.linspace` as NumPy computes it, in differentiable calls."""
    div = num - 1 if endpoint else num
    if kwargs.get("like") is not None:
        return NotImplemented
    delta = stop - start
    ramp = np.arange(num).reshape((num,) + (1,) * np.ndim(delta))
    if div > 0:
        step = delta / div
        y = ramp * step + start
    else:  # one point (or none): NumPy's step is nan
        step, y = np.nan, ramp * delta + start
    if endpoint and num > 1:
        y = np.concatenate([y[:-1], np.expand_dims(stop + np.zeros_like(y[-1]), 0)])
    if axis != 0:
        y = np.moveaxis(y, 0, axis)
    if dtype is not None:
        y = astype(y, dtype)
    return (y, step) if retstep else y


def _logspace(start: Any, stop: Any, num: int = 50, endpoint: bool = True,
              base: Any = 10.0, dtype: Any = None, axis: int = 0) -> Any:  # fmt: skip
    nd = max(np.ndim(start), np.ndim(stop), np.ndim(base))
    start, stop, base = (np.reshape(a, (1,) * (nd - np.ndim(a)) + np.shape(a))
                         for a in (start, stop, base))  # fmt: skip
    y = np.linspace(start, stop, num=num, endpoint=endpoint, axis=axis)
    out = np.power(np.expand_dims(base, axis=axis), y)
    return out if dtype is None else astype(out, dtype)


def _geomspace(start: Any, stop: Any, num: int = 50, endpoint: bool = True,
               dtype: Any = None, axis: int = 0) -> Any:  # fmt: skip
    """Real `np.geomspace` as NumPy computes it (the ends are `start`, `stop` exactly)."""
    if np.iscomplexobj(start) or np.iscomplexobj(stop) or num < 2:
        return NotImplemented
    shape = np.broadcast_shapes(np.shape(start), np.shape(stop))
    start, stop = start * np.ones(shape), stop * np.ones(shape)
    sign = np.sign(stop_gradient_leaf(start))
    start, stop = start / sign, stop / sign
    y = np.logspace(np.log10(start), np.log10(stop), num=num, endpoint=endpoint)
    ends = [np.expand_dims(start, 0), y[1:-1] if endpoint else y[1:]]
    if endpoint:
        ends.append(np.expand_dims(stop, 0))
    y = sign * np.concatenate(ends)
    if axis != 0:
        y = np.moveaxis(y, 0, axis)
    return y if dtype is None else astype(y, dtype)


defcomposite(np.linspace, _linspace)
defcomposite(np.logspace, _logspace)
defcomposite(np.geomspace, _geomspace)


# -- meshgrid, vander ----------------------------------------------------------------------


def _meshgrid_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    """Each input becomes a view shaped to its grid axis; unbatched inputs give
    unbatched outputs (never broadcast to the batch)."""

    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        copy, sparse = kwargs.get("copy", True), kwargs.get("sparse", False)
        indexing = kwargs.get("indexing", "xy")
        if indexing not in ("xy", "ij"):
            raise ValueError("Valid values for `indexing` are 'xy' and 'ij'.")
        sizes = [int(np.prod(example_shape(trace, x), dtype=np.intp)) for x in args]
        where = list(range(len(args)))
        if indexing == "xy" and len(args) > 1:
            where[0], where[1] = 1, 0
        full = [0] * len(args)
        for i, n in zip(where, sizes, strict=True):
            full[i] = n
        out = []
        for x, i, n in zip(args, where, sizes, strict=True):
            shape = (1,) * i + (n,) + (1,) * (len(args) - i - 1)
            v, b = unwrap(trace, x)
            if not sparse:
                shape = tuple(full)
            if b:
                v = v.reshape((v.shape[0], *(1,) * i, n, *(1,) * (len(args) - i - 1)))
                v = np.broadcast_to(v, (v.shape[0], *shape)) if not sparse else v
            else:
                v = np.broadcast_to(
                    np.reshape(x, (1,) * i + (n,) + (1,) * (len(args) - i - 1)), shape
                )
            v = v.copy() if copy else v
            out.append(trace.wrap(v) if b else v)
        return tuple(out) if NUMPY2 and (copy or not sparse) else out  # a list on NumPy 1.26

    return rule


def _vander_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        x = get_arg(args, kwargs, 0, "x")
        n, increasing = get_arg(args, kwargs, 1, "N"), get_arg(args, kwargs, 2, "increasing")
        if is_batched(trace, n) or not is_batched(trace, x):
            return per_example(trace, func, args, kwargs, "with a batched `N`")
        if example_ndim(trace, x) != 1:
            raise ValueError("x must be a one-dimensional array or sequence.")
        v = unwrap(trace, x)[0]
        b, m = v.shape
        n = m if n is None else n
        dtype = np.promote_types(v.dtype, int)
        ones = np.ones_like(v, shape=(b, m, min(n, 1)), dtype=dtype)
        # NumPy's arithmetic exactly: x, x*x, (x*x)*x, ... after a column of ones
        powers = np.multiply.accumulate(
            np.broadcast_to(v[:, :, None], (b, m, max(n - 1, 0))), axis=2, dtype=dtype
        )
        out = np.concatenate([ones, powers], axis=2)
        return trace.wrap(out if increasing else out[:, :, ::-1])

    return rule


defbatch(np.meshgrid, _meshgrid_rule, may_view=True)


# -- derivatives of meshgrid: computed as reshapes and broadcasts (see vmapx._autodiff) --
def _meshgrid_impl(*xi: Any, copy: bool = True, sparse: bool = False, indexing: str = "xy") -> Any:
    if indexing not in ("xy", "ij"):
        raise ValueError("Valid values for `indexing` are 'xy' and 'ij'.")
    n = len(xi)
    where = [1, 0, *range(2, n)] if indexing == "xy" and n > 1 else list(range(n))
    out = [
        np.reshape(x, (1,) * i + (-1,) + (1,) * (n - i - 1)) for x, i in zip(xi, where, strict=True)
    ]
    if not sparse:
        shape = np.broadcast_shapes(*(np.shape(o) for o in out))
        out = [np.broadcast_to(o, shape) for o in out]
    if copy:
        out = [np.copy(o) for o in out]
    return tuple(out) if NUMPY2 and (copy or not sparse) else out


defcomposite(np.meshgrid, _meshgrid_impl)
defbatch(np.vander, _vander_rule)


def _vander(x: Any, N: int | None = None, increasing: bool = False) -> Any:  # noqa: N803
    """`np.vander` as NumPy computes it: powers by repeated multiplication by `x`."""
    if np.ndim(x) != 1 or not hasattr(x, "dtype"):
        return NotImplemented  # NumPy's error, or a list
    n = np.shape(x)[0] if N is None else N
    dtype = np.promote_types(x.dtype, int)
    if n <= 0:
        return np.zeros_like(x, shape=(np.shape(x)[0], 0), dtype=dtype)
    powers = [np.ones_like(x, dtype=dtype)]
    for _ in range(n - 1):
        powers.append(powers[-1] * x)
    return np.stack(powers if increasing else powers[::-1], axis=1)


defcomposite(np.vander, _vander)
