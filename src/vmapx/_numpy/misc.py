"""Interpolation, integration and polynomials: `interp`, `trapezoid`, the `poly*` family.

Polynomials are 1-d coefficient arrays per example, so a batch of them is `(B, n)`;
rules loop over coefficients (the degree), never over examples. `searchsorted_rows` is
the batched `np.searchsorted` these rules (and the histograms) need: NumPy's own only
takes one sorted array. Derivatives are those of each rule applied to one example
(`defcomposite_by_rule`).
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np

from .._batching import (
    BatchTrace,
    align_rank,
    bcast_batch,
    defbatch,
    example_ndim,
    is_batched,
    unwrap,
    user_stacklevel,
)
from .._compat import RankWarning, trapezoid
from .._core import Tracer, is_ndarray
from .._differentiate_rule import defcomposite_by_rule, own_impl
from .._payload import like
from .._plain import PLAIN_ARRAYS
from .._registry import builder
from .._rule_helpers import loop, shift_one, zero_batch
from .linalg import gelsd_kept
from .sorting import search_rows


def as_array(x: Any) -> Any:
    """`x` itself when it is an array or a tracer, else `np.asarray(x)` (lists, scalars)."""
    return x if hasattr(x, "dtype") and hasattr(x, "shape") else np.asarray(x)


@cache
def _signature(func: Callable[..., Any]) -> inspect.Signature:
    return inspect.signature(func)


def call_params(
    func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[Any, Any]
) -> dict[Any, Any]:
    """The call's arguments by name, defaults filled in (NumPy's own signature)."""
    bound = _signature(func).bind(*args, **kwargs)
    bound.apply_defaults()
    return dict(bound.arguments)


@builder
def defrules(
    funcs: Callable[..., Any] | list[Any], factory: Callable[..., Any], *, zero: bool = True
) -> None:
    """`defbatch` for this family: with `zero`, zero-size batches are answered by
    `zero_batch`, so the rule only meets batches with at least one example."""

    def sized(func: Callable[..., Any]) -> Callable[..., Any]:
        rule = factory(func)

        def run(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
            if zero and trace.axis_size == 0:
                return zero_batch(trace, func, args, kwargs, quiet=True)
            return rule(trace, args, kwargs)

        return run

    defbatch(funcs, sized)


def searchsorted_rows(a: Any, v: Any, side: str = "left") -> Any:
    """`np.searchsorted(a[i], v[i], side)` for every row `i` of the 2-d `a` (rows sorted
    in NumPy's order) and `v`, whose leading sizes are equal or 1: the sorting family's
    batched binary search."""
    b = max(a.shape[0], v.shape[0])
    a = np.broadcast_to(a, (b, a.shape[1]))
    v = np.broadcast_to(v, (b, v.shape[1]))
    found = search_rows(a, v, side, check=False)
    if found is None:  # a dtype without a known order (objects): NumPy row by row
        found = np.stack([np.searchsorted(a[i], v[i], side) for i in range(b)])  # type: ignore[call-overload]  # (NumPy checks the side)
    return found


def _complex(re: Any, im: Any) -> Any:
    """`re + 1j * im` built part by part (exact also for infinite parts)."""
    if is_ndarray(re) and is_ndarray(im):
        out = np.empty(np.broadcast_shapes(re.shape, im.shape), np.complex128)
        out.real, out.imag = re, im
        return out
    return re + im * 1j


# -- interp ---------------------------------------------------------------------------


def _fill_value(trace: BatchTrace, value: Any, default: Any, ftype: Any, rank: int) -> Any:
    """`left`/`right` of `np.interp` as one value per example, aligned to `x`'s rank."""
    if value is None:
        v, b = default
    else:
        v, b = unwrap(trace, value)
        if isinstance(v, Tracer) and not b:  # an outer transform's: kept (NumPy's
            return v.astype(ftype)  # `float()` would drop its derivative or batch)
        if not b:
            return ftype.type(complex(v) if ftype.kind == "c" else float(v))
        v = v.astype(ftype)
    return v.reshape(v.shape[:1] + (1,) * rank) if b else v


def gather_last(arr: Any, idx: Any) -> Any:
    """`arr[..., idx]` along the last axis, other axes broadcast: `np.take_along_axis`,
    which (unlike `np.take` or `arr[idx]`) dispatches on a traced `idx` too."""
    nd = max(arr.ndim, idx.ndim)
    arr = arr.reshape((1,) * (nd - arr.ndim) + arr.shape)
    idx = idx.reshape((1,) * (nd - idx.ndim) + idx.shape)
    return np.take_along_axis(arr, idx, axis=-1)


def _gather(arr: Any, arr_batched: bool, idx: Any, idx_batched: bool) -> Any:
    """`arr[idx]` per example: `arr` is (n,) or (B, n); `idx` is x-shaped, batched or not."""
    lead = idx.shape[:1] if idx_batched else ()
    flat = idx.reshape(lead + (int(np.prod(idx.shape[len(lead) :], dtype=np.int64)),))
    if arr_batched and not idx_batched:
        flat = flat[None]
    out = gather_last(arr, flat)
    return out.reshape(out.shape[:-1] + idx.shape[len(lead) :])


def _interp_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        p = call_params(func, args, kwargs)
        x, xp, fp = as_array(p["x"]), as_array(p["xp"]), as_array(p["fp"])
        period = p["period"]
        if (
            example_ndim(trace, xp) != 1
            or example_ndim(trace, fp) != 1
            or x.dtype.kind not in "biuf"
            or xp.dtype.kind not in "biuf"
            or fp.dtype.kind not in "biufc"
            or xp.shape[-1] != fp.shape[-1]
            or xp.shape[-1] == 0
            or is_batched(trace, period)
            or any(isinstance(v, Tracer) and v.ndim != 0 for v in (p["left"], p["right"]))
        ):
            return loop(trace, func, args, kwargs)  # NumPy's own errors, or a rare case
        ftype = np.dtype(np.complex128 if fp.dtype.kind == "c" else np.float64)
        (xv, xb), (xpv, xpb), (fpv, fpb) = (unwrap(trace, v) for v in (x, xp, fp))
        left, right = p["left"], p["right"]
        # traced `left`/`right` (this transform's or an outer one's) take the path below:
        # NumPy's interp makes Python numbers of them
        shared = not (xpb or fpb or isinstance(left, Tracer) or isinstance(right, Tracer))
        if shared and not own_impl(trace):  # only x is batched: NumPy's interp is elementwise
            return trace.wrap(np.interp(xv, xpv, fpv, left, right, period))
        xv, xpv, fpv = xv.astype(np.float64), xpv.astype(np.float64), fpv.astype(ftype)
        if period is not None:
            if period == 0:
                raise ValueError("period must be a non-zero value")
            period, left, right = abs(period), None, None
            xv, xpv, fpv, fpb = _periodic(trace, xv, xpv, xpb, fpv, fpb, period)
        rank = example_ndim(trace, x)
        lval = _fill_value(trace, left, (fpv[..., 0], fpb), ftype, rank)
        rval = _fill_value(trace, right, (fpv[..., -1], fpb), ftype, rank)
        return trace.wrap(_interp_values(trace, xv, xb, xpv, xpb, fpv, fpb, lval, rval, rank))

    return rule


def _periodic(trace: BatchTrace, xv: Any, xpv: Any, xpb: bool, fpv: Any, fpb: bool,
              period: Any) -> tuple[Any, ...]:  # fmt: skip
    """`np.interp`'s normalisation of periodic sample points, batched."""
    xv, xpv = xv % period, xpv % period
    order = np.argsort(xpv, axis=-1)
    if xpb:
        fpv = np.take_along_axis(bcast_batch_value(fpv, fpb, xpv.shape[0]), order, axis=-1)
        xpv, fpb = np.take_along_axis(xpv, order, axis=-1), True
    else:
        xpv, fpv = gather_last(xpv, order), gather_last(fpv, order)
    xpv = np.concatenate((xpv[..., -1:] - period, xpv, xpv[..., 0:1] + period), axis=-1)
    fpv = np.concatenate((fpv[..., -1:], fpv, fpv[..., 0:1]), axis=-1)
    return xv, xpv, fpv, fpb


def bcast_batch_value(v: Any, batched: bool, size: int) -> Any:
    """A value one level down as batch-front: itself, or a broadcast view of it."""
    return v if batched else np.broadcast_to(v, (size, *np.shape(v)))


def _interp_values(trace: BatchTrace, xv: Any, xb: bool, xpv: Any, xpb: bool, fpv: Any,
                   fpb: bool, lval: Any, rval: Any, rank: int) -> Any:  # fmt: skip
    """NumPy's compiled `interp` (and `interp_complex`), branch by branch."""
    n = xpv.shape[-1]
    xs = xv if xb or not xpb else np.broadcast_to(xv, (trace.axis_size, *np.shape(xv)))
    jb = xb or xpb  # whether the interval indices differ per example
    first, last = _per_example(xpv[..., 0], xpb, rank), _per_example(xpv[..., -1], xpb, rank)
    if n == 1:
        f0 = _per_example(fpv[..., 0], fpb, rank)
        return np.where(xs < first, lval, np.where(xs > first, rval, f0))
    if xpb:
        flat = xs.reshape(xs.shape[0], int(np.prod(xs.shape[1:], dtype=np.int64)))
        j = searchsorted_rows(xpv, flat, "right").reshape(xs.shape) - 1
    else:
        j = np.searchsorted(xpv, xs, side="right") - 1
    jc = np.clip(j, 0, n - 2)

    def take(table: Any, batched: bool, offset: int = 0) -> Any:
        return _gather(table, batched, jc + offset if offset else jc, jb)

    x0, y0 = take(xpv, xpb), take(fpv, fpb)
    tb = xpb or fpb  # whether the slope table differs per example
    # on a sample point NumPy gives its value (past the last interval: the last point's)
    on_last = j == n - 1
    on = (xs == x0) | on_last
    yk = np.where(on_last, _per_example(fpv[..., -1], fpb, rank), y0)
    xk = np.where(on_last, last, x0) if _traced(xs, xpv) else None  # (see `_interp_part`)
    with np.errstate(divide="ignore", invalid="ignore"):
        # NumPy's table of slopes, one per interval, gathered once per point
        dx, dy = xpv[..., 1:] - xpv[..., :-1], fpv[..., 1:] - fpv[..., :-1]
        if fpv.dtype.kind == "c":
            inv_dx = 1.0 / dx
            re = _interp_part(xs, x0, y0.real, take(dy.real * inv_dx, tb),
                              lambda: (take(xpv, xpb, 1), take(fpv, fpb, 1).real),
                              (on, xk, yk.real))  # fmt: skip
            im = _interp_part(xs, x0, y0.imag, take(dy.imag * inv_dx, tb),
                              lambda: (take(xpv, xpb, 1), take(fpv, fpb, 1).imag),
                              (on, xk, yk.imag))  # fmt: skip
            res = _complex(re, im)
        else:
            res = _interp_part(xs, x0, y0, take(dy / dx, tb),
                               lambda: (take(xpv, xpb, 1), take(fpv, fpb, 1)),
                               (on, xk, yk))  # fmt: skip
    res = np.where(xs > last, rval, res)
    res = np.where(j == -1, lval, res)
    nan = xs if fpv.dtype.kind != "c" else _complex(xs, np.zeros_like(xs))
    return np.where(np.isnan(xs), nan, res)


def _traced(*values: Any) -> bool:
    """Whether a derivative may flow through one of `values` (not plain arrays)."""
    return any(type(v) not in PLAIN_ARRAYS for v in values)


def _interp_part(x: Any, x0: Any, y0: Any, slope: Any, upper: Callable[..., Any],
                 point: tuple[Any, Any, Any]) -> Any:  # fmt: skip
    """One real part: from the left point; where that is NaN, from the right point
    (`upper()` gives it), else the flat value. `point`: where `x` is a sample point, that
    point (`None` where no derivative with respect to it can flow) and its value."""
    res = slope * (x - x0) + y0
    nan = np.isnan(res)
    if not is_ndarray(nan) or nan.any():  # (usually no retry is needed)
        x1, y1 = upper()
        other = slope * (x - x1) + y1
        other = np.where(np.isnan(other) & (y0 == y1), y0, other)
        res = np.where(nan, other, res)
    on, xk, yk = point
    return np.where(on, yk if xk is None else _at_point(yk, slope, x, xk), res)


def _at_point(y: Any, slope: Any, x: Any, xk: Any) -> Any:
    """`y` bit for bit (NumPy's value on the sample point `xk == x`), with the derivative
    of `y + slope * (x - xk)`: one side's, that of the interval `slope` belongs to (as
    JAX's: the one to the right, but at the last point)."""
    ok = np.isfinite(slope) & np.isfinite(xk)  # (no NaN derivative from an unused side)
    t = np.where(ok, slope, 0.0) * np.where(ok, x - xk, 0.0)  # +0.0 or -0.0
    # adding a zero keeps every `y` but -0.0 (+ +0.0 is +0.0): negated twice, that too
    return np.where(np.signbit(y), -(-y - t), y + t)


def _per_example(v: Any, batched: bool, rank: int) -> Any:
    return v.reshape(v.shape[:1] + (1,) * rank) if batched else v


defrules(np.interp, _interp_rule)
defcomposite_by_rule(np.interp)


# -- trapezoid ------------------------------------------------------------------------


def _trapezoid_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        p = call_params(func, args, kwargs)
        y, x, dx, axis = as_array(p["y"]), p["x"], p["dx"], p["axis"]
        nd = example_ndim(trace, y)
        ax = shift_one(axis, nd)
        if x is None:
            d, db = unwrap(trace, dx)
            if db:
                if example_ndim(trace, dx) != 0:
                    return loop(trace, func, args, kwargs)
                d = d.reshape(d.shape[:1] + (1,) * nd)
        else:
            x = as_array(x)
            xv, xb = unwrap(trace, x)
            xnd = example_ndim(trace, x)
            if xnd == 1:
                d = np.diff(xv, axis=-1)
                shape = [1] * nd
                shape[axis] = d.shape[-1]
                d = d.reshape(d.shape[:1] + tuple(shape)) if xb else d.reshape(shape)
            elif xnd <= nd:
                d = np.diff(xv, axis=shift_one(axis, xnd) if xb else axis)
                d = align_rank(d, xnd, nd) if xb else d
            else:
                return loop(trace, func, args, kwargs)
        yv = bcast_batch(trace, y)
        slice1, slice2 = [slice(None)] * (nd + 1), [slice(None)] * (nd + 1)
        slice1[ax], slice2[ax] = slice(1, None), slice(None, -1)
        ret = (d * (yv[tuple(slice1)] + yv[tuple(slice2)]) / 2.0).sum(ax)
        return trace.wrap(ret)

    return rule


defrules(trapezoid, _trapezoid_rule)
defcomposite_by_rule(trapezoid)


# -- polynomials ----------------------------------------------------------------------


def _coefficients(trace: BatchTrace, p: Any) -> tuple[Any, bool] | None:
    """`np.atleast_1d(p)` per example as `(value, batched)`, or None for what the rules
    leave to the loop (poly1d objects, coefficient arrays of more than one axis)."""
    if isinstance(p, np.poly1d):
        return None
    p = as_array(p)
    nd = example_ndim(trace, p)
    if nd > 1:
        return None
    v, b = unwrap(trace, p)
    if nd == 0:
        v = v.reshape(v.shape[:1] + (1,)) if b else np.reshape(v, (1,))
    return v, b


def _poly_rule(impl: Callable[..., Any], arrays: int, scalars: bool = True) -> Callable[..., Any]:
    """Rules for `np.poly*(p, ...)`: the first `arrays` arguments are coefficients,
    normalised by `_coefficients` (0-d ones only if `scalars`: some functions need a
    sequence); `impl(trace, coefficients, params)` computes the batched result."""

    def factory(func: Callable[..., Any]) -> Callable[..., Any]:
        names = list(_signature(func).parameters)[:arrays]

        def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
            params = call_params(func, args, kwargs)
            coefs = [_coefficients(trace, params[n]) for n in names]
            if any(c is None for c in coefs) or (
                not scalars and any(example_ndim(trace, params[n]) == 0 for n in names)
            ):
                return loop(trace, func, args, kwargs)
            return impl(trace, coefs, params)

        return rule

    return factory


def _wrap_if(trace: BatchTrace, v: Any, batched: bool) -> Any:
    return trace.wrap(v) if batched else v


def _padded(v: Any, length: int) -> Any:
    """Coefficients with leading zeros up to `length` (NumPy's polyadd padding)."""
    missing = length - v.shape[-1]
    if missing <= 0:
        return v
    zeros = np.zeros(v.shape[:-1] + (missing,), v.dtype, like=like(v))
    return np.concatenate((zeros, v), axis=-1)


def _polyadd(op: Callable[..., Any]) -> Callable[..., Any]:
    def impl(trace: BatchTrace, coefs: list[Any], params: dict[Any, Any]) -> Any:
        (a, ab), (b, bb) = coefs
        n = max(a.shape[-1], b.shape[-1])
        return trace.wrap(op(_padded(a, n), _padded(b, n)))

    return impl


def convolve_full(a: Any, b: Any) -> Any:
    """`np.convolve(a, b)` along the last axes (batched or not): one shifted product per
    coefficient of the shorter operand."""
    if a.shape[-1] == 0:
        raise ValueError("a cannot be empty")
    if b.shape[-1] == 0:
        raise ValueError("v cannot be empty")
    if b.shape[-1] > a.shape[-1]:
        a, b = b, a
    na, nb = a.shape[-1], b.shape[-1]
    first = a * b[..., :1]
    out = np.zeros_like(first, shape=first.shape[:-1] + (na + nb - 1,))
    out[..., :na] = first
    for i in range(1, nb):
        out[..., i : i + na] += a * b[..., i : i + 1]
    return out


def _polymul(trace: BatchTrace, coefs: list[Any], params: dict[Any, Any]) -> Any:
    (a, _), (b, _) = coefs
    return trace.wrap(convolve_full(a, b))


def _polyval(trace: BatchTrace, coefs: list[Any], params: dict[Any, Any]) -> Any:
    (p, pb), x = coefs[0], params["x"]
    if isinstance(x, np.poly1d):
        return loop(trace, np.polyval, (params["p"], x), {})
    xv, xb = unwrap(trace, as_array(x))
    if not pb and not own_impl(trace):  # Horner's rule is elementwise in x
        return trace.wrap(np.polyval(p, xv))
    rank = example_ndim(trace, x)
    y = np.zeros_like(xv)
    for k in range(p.shape[-1]):  # (unbatched coefficients: a list, under derivatives)
        y = y * xv + (p[:, k].reshape((-1,) + (1,) * rank) if pb else p[k])
    return _wrap_if(trace, y, (pb and p.shape[-1] > 0) or xb)


def _polyder(trace: BatchTrace, coefs: list[Any], params: dict[Any, Any]) -> Any:
    m = int(params["m"])
    if m < 0:
        raise ValueError("Order of derivative must be positive (see polyint)")
    (p, _), = coefs  # fmt: skip
    for _ in range(m):
        n = p.shape[-1] - 1
        p = p[..., :-1] * np.arange(n, 0, -1, like=like(p))
    return trace.wrap(p)


def _polyint(trace: BatchTrace, coefs: list[Any], params: dict[Any, Any]) -> Any:
    m = int(params["m"])
    if m < 0:
        raise ValueError("Order of integral must be positive (see polyder)")
    (p, _), = coefs  # fmt: skip
    k = params["k"]
    if k is None:
        kv = np.zeros(m, float)
    else:
        k = as_array(k)
        kv, kb = unwrap(trace, k)
        if example_ndim(trace, k) == 0:
            kv = kv.reshape(kv.shape[:1] + (1,)) if kb else np.reshape(kv, (1,))
        elif example_ndim(trace, k) > 1:
            return loop(trace, np.polyint, (params["p"], params["m"], params["k"]), {})
    if kv.shape[-1] == 1 and m > 1:
        kv = kv[..., :1] * np.ones(m, float, like=like(kv))
    if kv.shape[-1] < m:
        raise ValueError("k must be a scalar or a rank-1 array of length 1 or >m.")
    b = trace.axis_size
    for j in range(m):
        p = p / np.arange(p.shape[-1], 0, -1, like=like(p))
        const = kv[..., j : j + 1]
        p = np.concatenate(
            (bcast_batch_value(p, p.ndim == 2, b), bcast_batch_value(const, const.ndim == 2, b)),
            axis=-1,
        )
    return trace.wrap(bcast_batch_value(p, p.ndim == 2, b))


def _polydiv(trace: BatchTrace, coefs: list[Any], params: dict[Any, Any]) -> Any:
    (u, ub), (v, vb) = coefs
    u, v = u + 0.0, v + 0.0
    w_dtype = np.result_type(u.dtype, v.dtype)
    m, n = u.shape[-1] - 1, v.shape[-1] - 1
    scale = 1.0 / v[..., 0]
    size = trace.axis_size
    r = bcast_batch_value(u, ub, size).astype(w_dtype)
    quotient = []
    for k in range(m - n + 1):
        d = scale * r[:, k]
        quotient.append(d)
        r[:, k : k + n + 1] -= d.reshape(-1, 1) * v
    if quotient:
        q = np.stack(quotient, axis=-1).astype(w_dtype, copy=False)
    else:
        q = np.zeros((size, 1), w_dtype)
    # NumPy strips leading (near) zeros of the remainder: a data-dependent length
    close = np.isclose(r[:, :-1], 0, rtol=1e-14)
    strip = np.sum(np.cumprod(close, axis=-1), axis=-1)
    if size and not bool(np.all(strip == strip[0])):
        raise trace.concretization(
            "`np.polydiv` gives remainders of different lengths for different examples",
            "compute the remainder outside the vmapped function, or strip it yourself",
        )
    s = int(strip[0]) if size else 0
    return trace.wrap(q), trace.wrap(r[:, s:])


def _poly(trace: BatchTrace, coefs: list[Any], params: dict[Any, Any]) -> Any:
    z = as_array(params["seq_of_zeros"])
    nd = example_ndim(trace, z)
    zv, zb = unwrap(trace, z)
    shape = zv.shape[1:]
    if nd == 2 and shape[0] == shape[1] and shape[0] != 0:
        zv = np.linalg.eigvals(zv)
    elif nd <= 1:
        zv = zv.reshape(zv.shape[0], int(np.prod(shape, dtype=np.int64)))
        if zv.dtype != object:
            zv = zv.astype(np.mintypecode(zv.dtype.char))
    else:
        raise ValueError("input must be 1d or non-empty square 2d array.")
    if zv.shape[-1] == 0:
        return 1.0
    a = np.ones((zv.shape[0], 1), zv.dtype, like=like(zv))
    zero = np.zeros((zv.shape[0], 1), zv.dtype, like=like(zv))
    for i in range(zv.shape[-1]):
        shifted = np.concatenate((zero, a), axis=-1)
        a = np.concatenate((a, zero), axis=-1) - shifted * zv[:, i : i + 1]
    if a.dtype.kind == "c":
        roots = zv.astype(complex)
        closed = np.all(np.sort(roots, axis=-1) == np.sort(np.conj(roots), axis=-1), axis=-1)
        if bool(np.all(closed)):
            a = a.real.copy()
        elif bool(np.any(closed)):
            raise trace.concretization(
                "`np.poly` returns real coefficients for some examples and complex ones for others",
                "give the zeros as complex conjugate pairs for every example, or none",
            )
    return trace.wrap(a)


def _roots(trace: BatchTrace, coefs: list[Any], params: dict[Any, Any]) -> Any:
    (p, _), = coefs  # fmt: skip
    b, n = p.shape
    nonzero = p != 0
    if b == 0:
        lead = trail = np.zeros(0, np.intp)
    else:
        lead = np.argmax(nonzero, axis=-1)
        trail = np.argmax(nonzero[:, ::-1], axis=-1)
    has = np.any(nonzero, axis=-1)
    same = (lead == lead[0]) & (trail == trail[0]) & (has == has[0]) if b else True
    if b and not bool(np.all(same)):
        raise trace.concretization(
            "`np.roots` of polynomials whose leading or trailing zero coefficients differ "
            "between examples (the number of roots depends on the values)",
            "pad every example to the same degree with nonzero leading coefficients",
        )
    if b and not bool(has[0]):
        return np.array([])
    lo, hi = (int(lead[0]), n - int(trail[0])) if b else (0, n)
    p = p[:, lo:hi]
    if not issubclass(p.dtype.type, np.floating | np.complexfloating):
        p = p.astype(float)
    size = p.shape[1]
    if size > 1:
        row = -p[:, 1:] / p[:, :1]
        sub = np.eye(size - 2, size - 1, dtype=p.dtype, like=like(p))
        sub = np.broadcast_to(sub, (b, size - 2, size - 1))
        roots = np.linalg.eigvals(np.concatenate((row[:, None, :], sub), axis=1))
        if roots.dtype.kind == "c" and p.dtype.kind != "c" and b:
            real = np.all(roots.imag == 0, axis=-1)
            if bool(np.any(real)):  # NumPy gives those examples real roots
                raise trace.concretization(
                    "`np.roots` gives real roots for some examples and complex ones for others",
                    "make the roots' type the same for every example, e.g. "
                    "`np.roots(p).astype(complex)` outside the vmapped function",
                )
    else:
        roots = np.zeros((b, 0))
    trailing = n - hi
    if trailing:
        roots = np.concatenate((roots, np.zeros((b, trailing), roots.dtype)), axis=-1)
    return trace.wrap(roots)


def _vander(x: Any, order: int) -> Any:
    """`np.vander(x, order)` along a new last axis: powers by repeated multiplication,
    as NumPy's `multiply.accumulate` makes them."""
    dtype = np.promote_types(x.dtype, int)
    power = np.ones_like(x, dtype=dtype)
    powers = [power]
    for _ in range(order - 1):
        power = power * x
        powers.append(power)
    return np.stack(powers[::-1], axis=-1) if order else np.zeros_like(x, shape=(*x.shape, 0))


def _polyfit_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        p = call_params(func, args, kwargs)
        x, y, w = as_array(p["x"]), as_array(p["y"]), p["w"]
        w = None if w is None else as_array(w)
        deg = p["deg"]
        order = int(deg) + 1
        if deg < 0:
            raise ValueError("expected deg >= 0")
        if example_ndim(trace, x) != 1:
            raise TypeError("expected 1D vector for x")
        if x.shape[-1] == 0:
            raise TypeError("expected non-empty vector for x")
        ynd = example_ndim(trace, y)
        if ynd < 1 or ynd > 2:
            raise TypeError("expected 1D or 2D array for y")
        n = x.shape[-1]
        if y.shape[-ynd] != n:
            raise TypeError("expected x and y to have same length")
        if w is not None:
            if example_ndim(trace, w) != 1:
                raise TypeError("expected a 1-d array for weights")
            if w.shape[-1] != n:
                raise TypeError("expected w and y to have the same length")
        xv, xb = unwrap(trace, x)
        rcond = p["rcond"]
        if rcond is None:
            rcond = n * np.finfo((xv + 0.0).dtype).eps
        if xb or is_batched(trace, w):
            return _polyfit_batched(trace, p, order, rcond)
        return _polyfit_shared(trace, p, xv + 0.0, order, rcond, ynd)

    return rule


def lstsq_svd(a: Any, b: Any, rcond: Any) -> tuple[Any, Any, Any]:
    """`np.linalg.lstsq(a, b, rcond)`'s solution, rank and singular values for stacks
    `a` (..., n, m) and `b` (..., n, k), by one SVD: singular values at most `rcond`
    times the largest count as zero, as in LAPACK's `gelsd` (equal up to rounding; far
    faster than `lstsq` for many right-hand sides)."""
    u, s, vt = np.linalg.svd(a, full_matrices=False)
    keep = gelsd_kept(s, rcond)
    inv_s = np.where(keep, 1 / np.where(keep, s, 1), 0)
    c = np.matmul(np.swapaxes(vt, -1, -2), inv_s[..., None] * np.matmul(np.swapaxes(u, -1, -2), b))
    return c, np.count_nonzero(keep, axis=-1), s


def _polyfit_shared(trace: BatchTrace, p: dict[Any, Any], x: Any, order: int, rcond: Any,
                    ynd: int) -> Any:  # fmt: skip
    """Only `y` is batched: one least-squares solve with every example's `y` as
    right-hand sides (one SVD of the shared matrix)."""
    yv = unwrap(trace, as_array(p["y"]))[0] + 0.0
    b, n = yv.shape[0], yv.shape[1]
    k = yv.shape[2] if ynd == 2 else 1
    rhs = np.moveaxis(yv.reshape(b, n, k), 0, 1).reshape(n, b * k)
    lhs = _vander(x, order)
    if p["w"] is not None:
        w = as_array(p["w"]) + 0.0
        lhs = lhs * w[:, None]
        rhs = rhs * w[:, None]
    scale = np.sqrt((lhs * lhs).sum(axis=0))
    lhs = lhs / scale
    c, rank, s = lstsq_svd(lhs, rhs, rcond)
    rank = int(rank)
    if not (p["full"] or p["cov"]):
        resids: Any = None  # (neither returned nor scaling a covariance: not computed)
    elif rank == order and n > order:  # lstsq's residuals: one per right-hand side
        resids = np.sum(np.abs(rhs - np.matmul(lhs, c)) ** 2, axis=0).reshape(b, k)
    else:
        resids = np.zeros((b, 0), s.dtype)
    c = (c.T / scale).T
    if rank != order and not p["full"]:
        warnings.warn("Polyfit may be poorly conditioned", RankWarning,
                      stacklevel=user_stacklevel())  # fmt: skip
    c = np.moveaxis(c.reshape(order, b, k), 1, 0)
    c = c if ynd == 2 else c[..., 0]
    if p["full"]:
        return trace.wrap(c), trace.wrap(resids), np.int32(rank), s, rcond
    if p["cov"]:
        vbase = np.linalg.inv(np.dot(lhs.T, lhs)) / np.outer(scale, scale)
        return trace.wrap(c), _polyfit_cov(trace, p, vbase, resids, n, order, ynd, False)
    return trace.wrap(c)


def _polyfit_cov(trace: BatchTrace, p: dict[Any, Any], vbase: Any, resids: Any, n: int, order: int,
                 ynd: int, vbatched: bool) -> Any:  # fmt: skip
    if p["cov"] == "unscaled":
        out = vbase if ynd == 1 else vbase[..., None] * 1
        return _wrap_if(trace, out, vbatched)
    if n <= order:
        raise ValueError(
            "the number of data points must exceed order to scale the covariance matrix"
        )
    fac = resids / (n - order)
    v = vbase if ynd == 1 else vbase[..., None]
    return trace.wrap(v * align_rank(fac, 1, v.ndim - (1 if vbatched else 0)))


def _polyfit_batched(trace: BatchTrace, p: dict[Any, Any], order: int, rcond: Any) -> Any:
    """`x` or `w` is batched: one least-squares problem per example, solved by a batched
    SVD with `lstsq`'s cutoff (singular values at most `rcond` times the largest)."""
    size = trace.axis_size
    x = bcast_batch(trace, as_array(p["x"])) + 0.0
    y = bcast_batch(trace, as_array(p["y"])) + 0.0
    ynd = y.ndim - 1
    lhs = _vander(x, order)
    rhs = y if ynd == 2 else y[..., None]
    if p["w"] is not None:
        w = bcast_batch(trace, as_array(p["w"])) + 0.0
        lhs = lhs * w[..., None]
        rhs = rhs * w[..., None]
    scale = np.sqrt((lhs * lhs).sum(axis=1))
    lhs = lhs / scale[:, None, :]
    c, rank, s = lstsq_svd(lhs, rhs, rcond)
    rank = rank.astype(np.int32)  # lstsq's rank type
    n = lhs.shape[1]
    full_rank = rank == order
    solution = c

    def residuals() -> Any:  # lstsq's: empty unless the fit has full rank and n > order
        if n > order and bool(np.all(full_rank)):
            return np.sum(np.abs(rhs - np.matmul(lhs, solution)) ** 2, axis=1)
        if n > order and size and bool(np.any(full_rank)):
            raise trace.concretization(
                "`np.polyfit`: the residuals are empty for some examples (rank-deficient "
                "fits) and not for others",
                "make every example's fit well conditioned",
            )
        return np.zeros((size, 0), rhs.dtype)

    c = c / scale[:, :, None]
    if not p["full"] and size and not bool(np.all(full_rank)):
        warnings.warn("Polyfit may be poorly conditioned", RankWarning,
                      stacklevel=user_stacklevel())  # fmt: skip
    c = c if ynd == 2 else c[..., 0]
    if p["full"]:
        return trace.wrap(c), trace.wrap(residuals()), trace.wrap(rank), trace.wrap(s), rcond
    if p["cov"]:
        gram = np.matmul(np.swapaxes(lhs, 1, 2), lhs)
        vbase = np.linalg.inv(gram) / (scale[:, :, None] * scale[:, None, :])
        resids = None if p["cov"] == "unscaled" else residuals()
        return trace.wrap(c), _polyfit_cov(trace, p, vbase, resids, n, order, ynd, True)
    return trace.wrap(c)


defrules(np.polyadd, _poly_rule(_polyadd(np.add), 2))
defcomposite_by_rule(np.polyadd)
defrules(np.polysub, _poly_rule(_polyadd(np.subtract), 2))
defcomposite_by_rule(np.polysub)
defrules(np.polymul, _poly_rule(_polymul, 2))
defcomposite_by_rule(np.polymul)
defrules(np.polydiv, _poly_rule(_polydiv, 2))
defcomposite_by_rule(np.polydiv)
defrules(np.polyval, _poly_rule(_polyval, 1, scalars=False))
defcomposite_by_rule(np.polyval)
defrules(np.polyder, _poly_rule(_polyder, 1, scalars=False))
defcomposite_by_rule(np.polyder)
defrules(np.polyint, _poly_rule(_polyint, 1, scalars=False))
defcomposite_by_rule(np.polyint)
# a dummy example would guess the dtype (complex roots): real coefficients give real here
defrules(np.roots, _poly_rule(_roots, 1), zero=False)
defcomposite_by_rule(np.roots)
defrules(np.poly, _poly_rule(_poly, 0))
defcomposite_by_rule(np.poly)
defrules(np.polyfit, _polyfit_rule, zero=False)  # a dummy example is a singular fit
defcomposite_by_rule(np.polyfit)
