"""Statistics: order statistics (median, quantiles), weighted averages, covariance, histograms.

Rules work on batch-front values: per-example axes are shifted by one, or the reduced
axes of each example are merged into one last axis. Quantities that depend on each
example's data (its count of non-NaN values, its autodetected bin edges) become arrays
with one entry per example. Where NumPy's own function already computes the batch in
one call (`np.quantile` over shifted axes), the rule calls it; elsewhere the rule follows
NumPy's algorithm step by step with the same arithmetic, so results equal the loop's.
Derivatives are those of each rule applied to one example (`defcomposite_by_rule`).
"""

from __future__ import annotations

import operator
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from .._batching import (
    BatchTrace,
    bcast_batch,
    example_ndim,
    is_batched,
    unwrap,
    user_stacklevel,
)
from .._compat import NUMPY2, normalize_axis_tuple
from .._core import is_ndarray
from .._differentiate_rule import defcomposite_by_rule, own_impl
from .._payload import like, moved
from .._rule_helpers import example_shape, in_example_order, shift_axis
from .._rule_helpers import loop as _loop
from .misc import as_array, call_params, defrules, gather_last, searchsorted_rows

_NoValue = np._NoValue


def _warn(message: str, category: type[Warning] = RuntimeWarning) -> None:
    warnings.warn(message, category, stacklevel=user_stacklevel())


def merge_reduced(v: Any, nd: int, axis: Any) -> tuple[Any, tuple[int, ...]]:
    """`v` (batch axis first) with each example's axes named by `axis` (None: all) merged
    into one last axis, in their original order: `(B, *kept, m)`; and those axes."""
    axes = tuple(range(nd)) if axis is None else normalize_axis_tuple(axis, nd)
    kept = [i for i in range(nd) if i not in axes]
    v = np.moveaxis(v, [i + 1 for i in kept], list(range(1, len(kept) + 1)))
    m = int(np.prod(v.shape[1 + len(kept) :], dtype=np.int64))
    return v.reshape(v.shape[: 1 + len(kept)] + (m,)), axes


def _keepdims_shape(shape: tuple[Any, ...], axes: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(1 if i in axes else s for i, s in enumerate(shape))


def _take_last(arr: Any, idx: Any, nq: int) -> Any:
    """`arr[..., idx]` per slice: `arr` is `(B, *kept, m)`, `idx` is `(B, *qs, *kept)`
    (any of its axes may be 1); the result is `(B, *qs, *kept)`."""
    a = arr.reshape(arr.shape[:1] + (1,) * nq + arr.shape[1:])
    return np.take_along_axis(a, idx[..., None], axis=-1)[..., 0]


# -- quantiles ------------------------------------------------------------------------

_METHOD_NAMES = (
    "inverted_cdf", "averaged_inverted_cdf", "closest_observation",
    "interpolated_inverted_cdf", "hazen", "weibull", "linear", "median_unbiased",
    "normal_unbiased", "lower", "higher", "midpoint", "nearest",
)  # fmt: skip
_ALPHA_BETA = {
    "interpolated_inverted_cdf": (0, 1),
    "hazen": (0.5, 0.5),
    "weibull": (0, 0),
    "median_unbiased": (1 / 3.0, 1 / 3.0),
    "normal_unbiased": (3 / 8.0, 3 / 8.0),
}
# methods whose virtual index is already an integer index (NumPy's fix_gamma is None)
_DISCRETE = {"inverted_cdf", "closest_observation", "lower", "higher", "nearest"}


def _boundaries(index: Any, condition: Callable[..., Any]) -> Any:
    previous = np.floor(index)
    gamma = index - previous
    res = np.where(condition(gamma, index), previous, previous + 1).astype(np.intp)
    return np.maximum(res, 0)


def _virtual_index(method: str, n: Any, q: Any) -> Any:
    """NumPy's `_QuantileMethods[method]["get_virtual_index"]`, written for arrays."""
    if method == "linear":
        return (n - 1) * q
    if method in _ALPHA_BETA:
        alpha, beta = _ALPHA_BETA[method]
        return n * q + (alpha + q * (1 - alpha - beta)) - 1
    if method == "averaged_inverted_cdf":
        return (n * q) - 1
    if method == "inverted_cdf":
        return _boundaries((n * q) - 1, lambda g, i: g == 0)
    if method == "closest_observation":  # NumPy 1.26 rounds ties to the other parity
        return _boundaries(
            (n * q) - 1 - 0.5, lambda g, i: (g == 0) & (np.floor(i) % 2 == int(NUMPY2))
        )  # fmt: skip
    if method == "lower":
        return np.floor((n - 1) * q).astype(np.intp)
    if method == "higher":
        return np.ceil((n - 1) * q).astype(np.intp)
    if method == "midpoint":
        return 0.5 * (np.floor((n - 1) * q) + np.ceil((n - 1) * q))
    return np.around((n - 1) * q).astype(np.intp)  # nearest


def _fix_gamma(method: str, gamma: Any, index: Any) -> Any:
    if method == "averaged_inverted_cdf":
        return np.where(gamma == 0, 0.5, 1.0)
    if method == "midpoint":
        return np.where(index % 1 == 0, 0.0, 0.5)
    return gamma


def _lerp(a: Any, b: Any, gamma: Any, weak_dtype: Any) -> Any:
    """NumPy's `_lerp`; with `weak_dtype`, the weight acts as a Python float would."""
    if weak_dtype is None:
        t, one_minus_t = gamma, 1 - gamma
    else:
        t, one_minus_t = gamma.astype(weak_dtype), (1 - gamma).astype(weak_dtype)
    diff = b - a
    low = np.add(a, diff * t)
    high = np.subtract(b, diff * one_minus_t, dtype=low.dtype, casting="unsafe")
    return np.where(gamma >= 0.5, high, low)


def quantile_sorted(arr: Any, q: Any, q_batched: bool, method: str, weak: bool,
                    omit_nan: bool) -> Any:  # fmt: skip
    """Quantiles of sorted slices, following NumPy's `_quantile` step by step.

    `arr` is `(B, *kept, m)` sorted along its last axis (NaNs last; `B` may be 1 for a
    value shared by the batch); `q` is `(B, *qs)` when `q_batched`, else `qs`-shaped.
    With `omit_nan` each slice counts only its non-NaN values (`np.nanquantile`).
    Returns `(B, *qs, *kept)`.
    """
    nk = arr.ndim - 2
    nq = q.ndim - (1 if q_batched else 0)
    lead = q.shape[:1] if q_batched else (1,)
    q = moved(q, arr).reshape(lead + q.shape[1 if q_batched else 0 :] + (1,) * nk)
    if omit_nan:
        count = np.count_nonzero(~np.isnan(arr), axis=-1)
        count = count.reshape(count.shape[:1] + (1,) * nq + count.shape[1:])
        # a Python int `n` promotes weakly: give the counts q's float type
        n = count.astype(np.result_type(q.dtype, 0))
        last = np.maximum(count - 1, 0)
    else:
        count = n = arr.shape[-1]
        last = n - 1
    index = _virtual_index(method, n, q)
    if method in _DISCRETE or (method == "linear" and index.dtype.kind in "iu"):
        result = _take_last(arr, np.minimum(index.astype(np.intp), last), nq)
    else:
        previous = np.floor(index)
        above, below = index >= n - 1, index < 0
        nxt = np.where(above, -1, np.where(below, 0, previous + 1))
        previous = np.where(above, -1, np.where(below, 0, previous))
        if arr.dtype.kind in "fc":
            nan_index = np.isnan(index)
            previous, nxt = np.where(nan_index, -1, previous), np.where(nan_index, -1, nxt)
        previous, nxt = previous.astype(np.intp), nxt.astype(np.intp)
        gamma = _fix_gamma(method, index - previous, index)
        if NUMPY2:  # NumPy 1.26 keeps the float64 of `index - previous` (intp)
            gamma = gamma.astype(index.dtype)
        # -1 stands for each slice's last valid value
        lo = _take_last(arr, np.where(previous < 0, last, previous), nq)
        hi = _take_last(arr, np.where(nxt < 0, last, nxt), nq)
        weak_dtype = np.result_type(arr.dtype, 1.0) if weak else None
        result = _lerp(lo, hi, gamma, weak_dtype)
    if omit_nan:
        empty = count == 0
        if np.any(empty):
            _warn("All-NaN slice encountered")
            result = np.where(empty, np.nan, result)
    elif arr.dtype.kind in "fc":
        final = arr[..., -1].reshape(arr.shape[:1] + (1,) * nq + arr.shape[1:-1])
        result = np.where(np.isnan(final), final, result)
    return result


def median_sorted(arr: Any) -> Any:
    """`np.median` of sorted slices `(B, *kept, m)` (NaNs last): the mean of the middle
    one or two values, NaN for a slice with a NaN."""
    m = arr.shape[-1]
    low, high = arr[..., (m - 1) // 2], arr[..., m // 2]
    result = np.mean(np.stack([low, high] if m % 2 == 0 else [low]), axis=0)
    if arr.dtype.kind in "fc":
        last = arr[..., -1]
        result = np.where(np.isnan(last), last, result)
    return result


def nanmedian_sorted(arr: Any) -> Any:
    """`np.nanmedian` of sorted slices `(B, *kept, m)` (NaNs last): the mean of the
    middle one or two valid values, as `np.median` computes it."""
    count = np.count_nonzero(~np.isnan(arr), axis=-1)
    low = _take_last(arr, np.maximum((count - 1) // 2, 0), 0)
    high = _take_last(arr, np.minimum(count // 2, arr.shape[-1] - 1), 0)
    even = np.mean(np.stack([low, high]), axis=0)
    odd = np.mean(low[None], axis=0)
    result: Any = np.where(count % 2 == 1, odd, even)
    empty = count == 0
    if np.any(empty):
        _warn("All-NaN slice encountered")
        result = np.where(empty, np.nan, result)
    return result


_PLAIN: dict[Any, Callable[..., Any]] = {
    np.nanmedian: np.median,
    np.nanquantile: np.quantile,
    np.nanpercentile: np.percentile,
}


def _quantile_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    """median/percentile/quantile and their NaN-ignoring versions."""
    has_q = func not in (np.median, np.nanmedian)
    omit_nan = func in _PLAIN
    percent = func in (np.percentile, np.nanpercentile)

    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        p = call_params(func, args, kwargs)
        a = p["a"]
        q = p["q"] if has_q else None
        method = p.get("method", "linear")
        keepdims = p["keepdims"] is True
        av, ab = unwrap(trace, as_array(a))
        qv, qb = unwrap(trace, q)
        nd = example_ndim(trace, a)
        shape = av.shape[1:] if ab else av.shape
        reduced = normalize_axis_tuple(p["axis"], nd) if p["axis"] is not None else range(nd)
        weights = p.get("weights")
        if any(shape[i] == 0 for i in reduced):
            return _loop(trace, func, args, kwargs)
        if has_q:
            _check_quantile_args(a, av, qv, method, percent)
        kind = av.dtype.kind
        nan_aware = omit_nan and kind in "fc"
        if weights is not None:
            if method != "inverted_cdf":
                raise ValueError(f"Only method 'inverted_cdf' supports weights. Got: {method}.")
            qarr = as_array(np.true_divide(qv, 100) if percent else qv)
            res = _weighted_quantile(trace, av, ab, shape, p["axis"], weights, qarr, qb,
                                     nan_aware)  # fmt: skip
            if keepdims:
                axes = tuple(reduced)
                res = res.reshape(res.shape[: res.ndim - (nd - len(axes))]
                                  + _keepdims_shape(shape, axes))  # fmt: skip
            return trace.wrap(res)
        plain = _PLAIN.get(func, func) if not nan_aware else func
        opts = {"method": method} if has_q else {}
        native = not own_impl(trace)
        if native and not qb and not nan_aware:  # NumPy's own function, shifted axes
            qs = () if q is None else np.shape(qv)
            out = plain(av, *([q] if has_q else []), axis=shift_axis(p["axis"], nd),
                        keepdims=keepdims, **opts)  # fmt: skip
            return trace.wrap(np.moveaxis(out, len(qs), 0) if qs else out)
        # q carries the batch (NumPy 1.26's nanquantile transposes the result of a 2-d q)
        if native and qb and not ab and example_ndim(trace, q) <= 1 and (NUMPY2 or not omit_nan):
            return trace.wrap(func(av, qv, axis=p["axis"], keepdims=keepdims, **opts))
        if kind not in "fiub" or (omit_nan and kind == "c"):
            return _loop(trace, func, args, kwargs)
        arr, axes = merge_reduced(av if ab else av[None], nd, p["axis"])
        arr = np.sort(arr, axis=-1)
        if has_q:
            weak = type(q) in (int, float) and NUMPY2  # NumPy 1.26 promotes q as float64
            qarr = as_array(np.true_divide(qv, 100) if percent else qv)
            res = quantile_sorted(arr, qarr, qb, method, weak, nan_aware)
            nq = qarr.ndim - (1 if qb else 0)
        else:
            res, nq = (nanmedian_sorted(arr) if nan_aware else median_sorted(arr)), 0
        if keepdims:
            res = res.reshape(res.shape[: 1 + nq] + _keepdims_shape(shape, axes))
        return trace.wrap(res)

    return rule


def _weighted_quantile(trace: BatchTrace, av: Any, ab: bool, shape: tuple[Any, ...], axis: Any,
                       weights: Any, q: Any, qb: bool, omit_nan: bool) -> Any:  # fmt: skip
    """NumPy's weighted `inverted_cdf` quantile (which loops over slices) for all slices
    at once: the first sorted value whose cumulative weight share reaches `q`."""
    nd = len(shape)
    axes = None if axis is None else normalize_axis_tuple(axis, nd)
    wv = weights_for(trace, weights, shape, axes)
    if bool(np.any(wv < 0)):
        raise ValueError("Weights must be non-negative.")
    size = trace.axis_size
    full = (size, *shape)
    arr, _ = merge_reduced(av if ab else np.broadcast_to(av, full), nd, axis)
    w, _ = merge_reduced(np.broadcast_to(wv, full), nd, axis)
    m = arr.shape[-1]
    kept = arr.shape[1:-1]
    order = np.argsort(arr, axis=-1)
    arr = np.take_along_axis(arr, order, axis=-1)
    w = np.take_along_axis(w, order, axis=-1)
    if omit_nan:  # NumPy drops NaNs with their weights; an all-NaN slice gives NaN
        valid = ~np.isnan(arr)
        count = np.count_nonzero(valid, axis=-1)
        empty = count == 0
        w = np.where(valid, w, 0)
        w = np.where(empty[..., None], 1, w)
    cdf = np.cumsum(w, axis=-1, dtype=np.float64)
    cdf = cdf / cdf[..., -1:]
    if bool(np.any(np.isnan(cdf[..., -1]))):
        raise ValueError("Weights included NaN, inf or were all zero.")
    if q.dtype.kind == "f":
        cdf = cdf.astype(q.dtype)
    cdf = np.where(cdf == 0, -1, cdf)  # leading zero weights never hold a quantile
    rows = size * int(np.prod(kept, dtype=np.int64))
    qs = q.shape[1:] if qb else q.shape
    nq = int(np.prod(qs, dtype=np.int64))
    if qb:
        qrows = np.broadcast_to(q.reshape(size, 1, nq), (size, rows // max(size, 1), nq))
    else:
        qrows = np.broadcast_to(moved(np.reshape(q, (1, nq)), cdf), (rows, nq))
    idx = searchsorted_rows(cdf.reshape(rows, m), qrows.reshape(rows, nq), "left")
    last = (count.reshape(rows, 1) if omit_nan else m) - 1
    idx = np.maximum(np.minimum(idx, last), 0)
    res = np.take_along_axis(arr.reshape(rows, m), idx, axis=-1)
    res = res.reshape((size, *kept, *qs))
    res = np.moveaxis(res, tuple(range(1 + len(kept), res.ndim)), tuple(range(1, 1 + len(qs))))
    kept_ones = (1,) * len(qs)
    if omit_nan:
        if bool(np.any(empty)):
            _warn("All-NaN slice encountered")
            res = np.where(empty.reshape((size, *kept_ones, *kept)), np.nan, res)
    elif arr.dtype.kind in "fc":
        final = arr[..., -1].reshape((size, *kept_ones, *kept))
        res = np.where(np.isnan(final), final, res)
    return res


def _check_quantile_args(a: Any, av: Any, qv: Any, method: str, percent: bool) -> None:
    """NumPy's argument errors, raised once for the batch (the loop raises them too)."""
    if av.dtype.kind == "c":
        raise TypeError("a must be an array of real numbers")
    q = np.true_divide(qv, 100) if percent else as_array(qv)
    if not bool(np.all((q >= 0) & (q <= 1))):
        if percent:
            raise ValueError("Percentiles must be in the range [0, 100]")
        raise ValueError("Quantiles must be in the range [0, 1]")
    if method not in _METHOD_NAMES:
        names = dict.fromkeys(_METHOD_NAMES).keys()
        raise ValueError(f"{method!r} is not a valid method. Use one of: {names}")


defrules(
    [np.median, np.nanmedian, np.quantile, np.nanquantile, np.percentile, np.nanpercentile],
    _quantile_rule,
)
defcomposite_by_rule(
    [np.median, np.nanmedian, np.quantile, np.nanquantile, np.percentile, np.nanpercentile]
)


# -- average --------------------------------------------------------------------------


def weights_for(trace: BatchTrace, weights: Any, a_shape: tuple[Any, ...], axes: Any) -> Any:
    """NumPy's `_weights_are_valid` per example: weights shaped like `a`, or 1-d along
    `axes`, checked and laid out to broadcast against `a`; returned batch-front with a
    batch axis of size 1 when the weights are shared."""
    wv, wb = unwrap(trace, as_array(weights))
    w_shape = tuple(wv.shape[1:]) if wb else wv.shape
    if a_shape != w_shape:
        if axes is None:
            raise TypeError("Axis must be specified when shapes of a and weights differ.")
        if w_shape != tuple(a_shape[ax] for ax in axes):
            raise ValueError(
                "Shape of weights must be consistent with shape of a along specified axis."
            )
        perm = [int(i) for i in np.argsort(axes)]
        target = tuple(s if ax in axes else 1 for ax, s in enumerate(a_shape))
        if wb:
            wv = np.transpose(wv, (0, *(i + 1 for i in perm))).reshape(wv.shape[:1] + target)
        else:
            wv = np.transpose(wv, perm).reshape(target)
    return wv if wb else wv[None]


def _average_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        p = call_params(func, args, kwargs)
        a, axis, weights = as_array(p["a"]), p["axis"], p["weights"]
        nd = example_ndim(trace, a)
        kw = {} if p["keepdims"] is _NoValue else {"keepdims": p["keepdims"]}
        sax = shift_axis(None if axis is None else normalize_axis_tuple(axis, nd), nd)
        if weights is None and not own_impl(trace):
            av = in_example_order(unwrap(trace, a)[0])
            out = np.average(av, axis=sax, returned=p["returned"], **kw)
            return tuple(map(trace.wrap, out)) if p["returned"] else trace.wrap(out)
        if weights is None:  # np.average's own steps
            av = bcast_batch(trace, a)
            avg = np.mean(av, axis=sax, **kw)
            if not p["returned"]:
                return trace.wrap(avg)
            scl = np.full_like(avg, av.size / avg.size, dtype=avg.dtype)
            return trace.wrap(avg), trace.wrap(scl)
        av = in_example_order(unwrap(trace, a)[0])
        axes = None if axis is None else normalize_axis_tuple(axis, nd)
        wv = weights_for(trace, weights, example_shape(trace, a), axes)
        if np.issubdtype(av.dtype, np.integer) or av.dtype == np.bool_:
            result_dtype = np.result_type(av.dtype, wv.dtype, "f8")
        else:
            result_dtype = np.result_type(av.dtype, wv.dtype)
        scl = np.sum(wv, axis=sax, dtype=result_dtype, **kw)
        if np.any(scl == 0.0):
            raise ZeroDivisionError("Weights sum to zero, can't be normalized")
        avg = np.sum(np.multiply(av, wv, dtype=result_dtype), axis=sax, **kw) / scl
        if not p["returned"]:
            return trace.wrap(avg)
        if scl.shape != avg.shape:
            scl = np.broadcast_to(scl, avg.shape).copy()
        return trace.wrap(avg), trace.wrap(scl)

    return rule


defrules(np.average, _average_rule)
defcomposite_by_rule(np.average)


# -- covariance -----------------------------------------------------------------------


def _rows(
    trace: BatchTrace, m: Any, dtype: Any, rowvar: bool, transpose_if: Callable[..., Any]
) -> Any:
    """`np.array(m, ndmin=2, dtype=dtype)` per example, as `(B, V, N)`, transposed
    when `not rowvar` and `transpose_if(per-example 2-d shape)`."""
    nd = example_ndim(trace, m)
    v = bcast_batch(trace, m).astype(dtype)
    v = v.reshape(v.shape[:1] + (1,) * (2 - nd) + v.shape[1:])
    if not rowvar and transpose_if(nd, v.shape[1:]):
        v = np.swapaxes(v, 1, 2)
    return v


def _prefix_sum(x: Any) -> Any:
    """Python's `sum(x)` over the last axis: left to right, as `np.cumsum` adds."""
    if x.shape[-1] == 0:
        return np.zeros_like(x, shape=x.shape[:-1])
    return np.cumsum(x, axis=-1)[..., -1]


def _frequency(trace: BatchTrace, w: Any, name: str, n: int, integer: bool) -> Any:
    wv = unwrap(trace, as_array(w))[0].astype(float)
    if integer and not bool(np.all(wv == np.around(wv))):
        raise TypeError("fweights must be integer")
    if example_ndim(trace, w) > 1:
        raise RuntimeError(f"cannot handle multidimensional {name}")
    if wv.shape[-1] != n:
        raise RuntimeError(f"incompatible numbers of samples and {name}")
    if bool(np.any(wv < 0)):
        raise ValueError(f"{name} cannot be negative")
    return wv


def cov_batched(trace: BatchTrace, p: dict[Any, Any]) -> tuple[Any, bool]:
    """`np.cov` of every example as `(B, V, V)`, and whether one example's result is a
    scalar (NumPy squeezes a 1x1 covariance)."""
    m, y, rowvar, ddof, dtype = p["m"], p.get("y"), p["rowvar"], p.get("ddof"), p["dtype"]
    m = as_array(m)
    y = None if y is None else as_array(y)
    if ddof is not None and ddof != int(ddof):
        raise ValueError("ddof must be integer")
    if example_ndim(trace, m) > 2:
        raise ValueError("m has more than 2 dimensions")
    if y is not None and example_ndim(trace, y) > 2:
        raise ValueError("y has more than 2 dimensions")
    if dtype is None:
        dtype = np.result_type(m.dtype, *([] if y is None else [y.dtype]), np.float64)
    X = _rows(trace, m, dtype, rowvar, lambda nd, s: nd != 1)
    if X.shape[1] == 0:
        return np.zeros((trace.axis_size, 0, 0)), False
    if y is not None:
        Y = _rows(trace, y, dtype, rowvar, lambda nd, s: s[0] != 1)
        X = np.concatenate((X, Y), axis=1)
    if ddof is None:
        ddof = 1 if p.get("bias", False) == 0 else 0
    n = X.shape[2]
    fw, aw = p.get("fweights"), p.get("aweights")
    w = None if fw is None else _frequency(trace, fw, "fweights", n, True)
    if aw is not None:
        aw = _frequency(trace, aw, "aweights", n, False)
        w = aw if w is None else w * aw
    if w is None:
        avg = np.mean(X, axis=2)
        fact = n - ddof
    else:
        wr = w.reshape(w.shape[:-1] + (1, n)) if w.ndim == 2 else w[None, None]
        result_dtype = np.result_type(X.dtype, w.dtype)
        scl = np.sum(wr, axis=2, dtype=result_dtype)
        if np.any(scl == 0.0):
            raise ZeroDivisionError("Weights sum to zero, can't be normalized")
        avg = np.sum(np.multiply(X, wr, dtype=result_dtype), axis=2) / scl
        w_sum = scl[:, 0]
        if ddof == 0:
            fact = w_sum
        elif aw is None:
            fact = w_sum - ddof
        else:
            fact = w_sum - ddof * _prefix_sum(w * aw) / w_sum
    bad = fact <= 0
    if np.any(bad):
        _warn("Degrees of freedom <= 0 for slice")
        fact = np.where(bad, 0.0, fact) if np.ndim(fact) else 0.0
    X -= avg[:, :, None]
    X_T = np.swapaxes(X if w is None else X * wr, 1, 2)
    c = np.matmul(X, np.conj(X_T) if X_T.dtype.kind == "c" else X_T)
    factor = np.true_divide(1, fact)
    c *= factor.reshape(factor.shape + (1, 1)) if np.ndim(factor) else factor
    return c, c.shape[1] == 1


def _cov_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        c, scalar = cov_batched(trace, call_params(func, args, kwargs))
        return trace.wrap(c[:, 0, 0] if scalar else c)

    return rule


def _corrcoef_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        p = call_params(func, args, kwargs)
        for name in ("bias", "ddof"):
            if p.get(name, _NoValue) is not _NoValue:
                warnings.warn(
                    "bias and ddof have no effect and are deprecated",
                    DeprecationWarning,
                    stacklevel=user_stacklevel(),
                )
                break
        c, scalar = cov_batched(trace, {**p, "m": p["x"], "bias": False, "ddof": None})
        if scalar:
            c = c[:, 0, 0]
            return trace.wrap(c / c)
        stddev = np.sqrt(np.diagonal(c, axis1=1, axis2=2).real)
        c /= stddev[:, :, None]
        c /= stddev[:, None, :]
        return trace.wrap(_clip_unit(c))

    return rule


def _clip_unit(c: Any) -> Any:
    """Real and imaginary parts clipped to [-1, 1], as `np.corrcoef` does in place."""
    if c.dtype.kind != "c":
        return np.clip(c, -1, 1)
    if is_ndarray(c):
        np.clip(c.real, -1, 1, out=c.real)
        np.clip(c.imag, -1, 1, out=c.imag)
        return c
    return np.clip(c.real, -1, 1) + np.clip(c.imag, -1, 1) * 1j


defrules(np.cov, _cov_rule)
defcomposite_by_rule(np.cov)
defrules(np.corrcoef, _corrcoef_rule)
defcomposite_by_rule(np.corrcoef)


# -- histograms -----------------------------------------------------------------------

_BLOCK = 65536  # NumPy's histogram sums weights per block of this many values
_SIGNED_TO_UNSIGNED = {
    np.byte: np.ubyte, np.short: np.ushort, np.intc: np.uintc, np.int_: np.uint,
    np.longlong: np.ulonglong,
}  # fmt: skip


def _unsigned_subtract(a: Any, b: Any) -> Any:
    """NumPy's histogram helper: `a - b` without overflow for signed integers."""
    dt = np.result_type(a, b)
    unsigned = _SIGNED_TO_UNSIGNED.get(dt.type)
    if unsigned is None:
        return np.subtract(a, b, dtype=dt)
    a = a.astype(dt) if hasattr(a, "astype") else np.asarray(a, dtype=dt)
    b = b.astype(dt) if hasattr(b, "astype") else np.asarray(b, dtype=dt)
    return np.subtract(a, b, casting="unsafe", dtype=unsigned)


def linspace_rows(start: Any, stop: Any, num: int, dtype: Any = None) -> Any:
    """`np.linspace(start[i], stop[i], num, dtype=dtype)` for every row `i` of the
    1-d `start`/`stop`, as `(B, num)`, with NumPy's own arithmetic."""
    dt = np.result_type(start.dtype, stop.dtype)
    if dt.kind not in "fc" or not NUMPY2:  # NumPy 1.26's `start * 1.0` is double precision
        dt = np.result_type(dt, 1.0 if NUMPY2 else np.float64)
    delta = np.subtract(stop, start, dtype=dt)
    y = np.arange(0, num, dtype=dt, like=like(start, stop)).reshape(-1, 1)
    div = num - 1
    if div > 0:
        step = delta / div
        # NumPy divides first where the step underflows to zero (denormal ranges)
        y = np.where(step == 0, (y / div) * delta, y * step)
    else:
        y = y * delta
    y = y + start
    if num > 1:
        y = np.concatenate((y[:-1], stop[None].astype(y.dtype)))
    return np.swapaxes(y, 0, 1).astype(dt if dtype is None else dtype)


def _flat_example(trace: BatchTrace, x: Any) -> Any:
    """`x.ravel()` per example, as `(B, size)` (a shared `x` as a broadcast view)."""
    v = bcast_batch(trace, x)
    return v.reshape(v.shape[0], int(np.prod(v.shape[1:], dtype=np.int64)))


def _ravel_checked(trace: BatchTrace, a: Any, weights: Any) -> tuple[Any, Any]:
    """NumPy's `_ravel_and_check_weights`, batched: `(a, weights)` as `(B, N)`."""
    a = as_array(a)
    if a.dtype == np.bool_:
        _warn(f"Converting input from {a.dtype} to {np.uint8} for compatibility.")
        a = a.astype(np.uint8)
    if weights is not None:
        weights = as_array(weights)
        if example_shape(trace, weights) != example_shape(trace, a):
            raise ValueError("weights should have the same shape as a.")
        weights = _flat_example(trace, weights)
    return _flat_example(trace, a), weights


def _range_edges(rng: Any) -> tuple[Any, Any]:
    first, last = rng
    if first > last:
        raise ValueError("max must be larger than min in range parameter.")
    if not (np.isfinite(first) and np.isfinite(last)):
        raise ValueError(f"supplied range of [{first}, {last}] is not finite")
    if first == last:
        first, last = first - 0.5, last + 0.5
    return first, last


def outer_edges(a: Any, rng: Any) -> tuple[Any, Any]:
    """NumPy's `_get_outer_edges` for each row of `a` (B, N): `(first, last)` as
    scalars (a given range) or arrays of shape (B,) (autodetected)."""
    if rng is not None:
        first, last = _range_edges(rng)
        return first, last
    if a.shape[1] == 0:
        return 0, 1  # NumPy's range for empty input
    first, last = np.min(a, axis=1), np.max(a, axis=1)
    finite = np.isfinite(first) & np.isfinite(last)
    if not bool(np.all(finite)):
        i = int(np.argmin(finite))
        raise ValueError(f"autodetected range of [{first[i]}, {last[i]}] is not finite")
    same = first == last
    if bool(np.any(same)):
        return np.where(same, first - 0.5, first), np.where(same, last + 0.5, last)
    return first, last


def _bins_count(bins: Any) -> int:
    try:
        n = operator.index(bins)
    except TypeError as e:
        raise TypeError("`bins` must be an integer, a string, or an array") from e
    if n < 1:
        raise ValueError("`bins` must be positive, when an integer")
    return n


def bin_edges(trace: BatchTrace, a: Any, bins: Any, rng: Any) -> tuple[Any, bool, Any]:
    """NumPy's `_get_bin_edges` for each row of `a` (B, N) with a number of bins or
    explicit edges: `(edges, batched, uniform)`; `uniform` is `(first, last, n)` for
    equal bins (NumPy's fast path), else None."""
    if np.ndim(bins) == 0:
        n = _bins_count(bins)
        first, last = outer_edges(a, rng)
        bin_type = np.result_type(first, last, a.dtype)
        if np.issubdtype(bin_type, np.integer):
            bin_type = np.result_type(bin_type, float)
        if np.ndim(first) == 0:  # a given range: the same edges for every example
            edges = moved(np.linspace(first, last, n + 1, endpoint=True, dtype=bin_type), a)
        else:
            edges = linspace_rows(first, last, n + 1, bin_type)
        if bool(np.any(edges[..., :-1] >= edges[..., 1:])):
            raise ValueError(f"Too many bins for data range. Cannot create {n} finite-sized bins.")
        return edges, np.ndim(first) > 0, (first, last, n)
    if np.ndim(bins) == 1:
        edges, batched = unwrap(trace, as_array(bins))
        if bool(np.any(edges[..., :-1] > edges[..., 1:])):
            raise ValueError("`bins` must increase monotonically, when an array")
        return edges, batched, None
    raise ValueError("`bins` must be 1d, when an array")


def _gather_rows(edges: Any, idx: Any) -> Any:
    """`edges[idx]` per row: `edges` is (K,) shared or (B, K); `idx` is (B, N)."""
    return gather_last(edges, idx)


def bincount_rows(idx: Any, weights: Any, length: int) -> Any:
    """`np.bincount(idx[i], weights[i], minlength=length)` for every row, in one call;
    `idx` (B, N) holds values in `[0, length)`."""
    b = idx.shape[0]
    offsets = (np.arange(b, like=like(idx)) * length).reshape(-1, 1)
    flat = (idx + offsets).reshape(-1)
    w = None if weights is None else weights.reshape(-1)
    return np.bincount(flat, w, minlength=b * length).reshape(b, length)


def _uniform_counts(a: Any, w: Any, edges: Any, uniform: tuple[Any, ...], ntype: Any) -> Any:
    """NumPy's equal-bins fast path, block by block as it sums."""
    first, last, n = uniform
    if np.ndim(first):
        first, last = first[:, None], last[:, None]
    # integer data whose range was widened by 0.5 has float edges here, so the
    # difference is exact in float64 as NumPy's unsigned one is
    denom = _unsigned_subtract(last, first)
    hist = np.zeros((a.shape[0], n), ntype, like=like(a))
    for i in range(0, max(a.shape[1], 1), _BLOCK):
        tmp = a[:, i : i + _BLOCK]
        keep = (tmp >= first) & (tmp <= last)
        tmp = np.where(keep, tmp.astype(edges.dtype), edges[..., :1])
        f_indices = (_unsigned_subtract(tmp, first) / denom) * n
        idx = f_indices.astype(np.intp)
        idx = np.where(idx == n, n - 1, idx)
        idx = idx - (tmp < _gather_rows(edges, idx))
        idx = idx + ((tmp >= _gather_rows(edges, idx + 1)) & (idx != n - 1))
        idx = np.where(keep, idx, n)  # values outside the range go to a discarded bin
        tw = None if w is None else w[:, i : i + _BLOCK]
        if ntype.kind == "c":
            assert tw is not None  # (counts are complex only with complex weights)
            part = bincount_rows(idx, tw.real, n + 1) + 1j * bincount_rows(idx, tw.imag, n + 1)
            hist = hist + part[:, :n]
        else:
            hist = hist + bincount_rows(idx, tw, n + 1)[:, :n].astype(ntype)
    return hist


def _edge_counts(a: Any, w: Any, edges: Any, ntype: Any) -> Any:
    """NumPy's cumulative-count path for explicit edges, block by block."""
    nb = edges.shape[-1]
    cum: Any = 0
    for i in range(0, max(a.shape[1], 1), _BLOCK):
        tmp = a[:, i : i + _BLOCK]
        row_edges = np.broadcast_to(edges, (tmp.shape[0], nb))
        if w is None:
            sa = np.sort(tmp, axis=1)
            cum = cum + _search_inclusive(sa, row_edges)
        else:
            order = np.argsort(tmp, axis=1)
            sa = np.take_along_axis(tmp, order, axis=1)
            sw = np.take_along_axis(w[:, i : i + _BLOCK], order, axis=1)
            zero = np.zeros_like(sw, shape=(sw.shape[0], 1), dtype=ntype)
            cw = np.concatenate((zero, np.cumsum(sw, axis=1)), axis=1)
            cum = cum + np.take_along_axis(cw, _search_inclusive(sa, row_edges), axis=1)
    return np.diff(cum, axis=1).astype(ntype, copy=False)


def _search_inclusive(sa: Any, edges: Any) -> Any:
    """NumPy's `_search_sorted_inclusive` per row (the last edge counts from the right)."""
    return np.concatenate(
        (searchsorted_rows(sa, edges[:, :-1], "left"),
         searchsorted_rows(sa, edges[:, -1:], "right")),
        axis=1,
    )  # fmt: skip


def histogram_batched(trace: BatchTrace, p: dict[Any, Any]) -> Any:
    """`np.histogram` of every example: `(hist, edges, edges_batched)`, or None when
    the bins depend on the data in a way that is not batched (string bin rules)."""
    a, weights = _ravel_checked(trace, p["a"], p["weights"])
    edges, batched, uniform = bin_edges(trace, a, p["bins"], p["range"])
    ntype = np.dtype(np.intp) if weights is None else weights.dtype
    if uniform is not None:
        hist = _uniform_counts(a, weights, edges, uniform, ntype)
    else:
        hist = _edge_counts(a, weights, edges, ntype)
    if p["density"]:
        db = np.diff(edges, axis=-1).astype(float)
        hist = hist / db / np.sum(hist, axis=1, keepdims=True)
    return hist, edges, batched


def _simple_weights(weights: Any) -> bool:
    if weights is None:
        return True
    dt = as_array(weights).dtype
    return np.can_cast(dt, np.double) or np.can_cast(dt, complex)


def _has_tracer(trace: BatchTrace, x: Any) -> bool:
    if isinstance(x, list | tuple):
        return any(_has_tracer(trace, e) for e in x)
    return is_batched(trace, x)


def _histogram_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        p = call_params(func, args, kwargs)
        if (
            isinstance(p["bins"], str)
            or _has_tracer(trace, p["range"])
            or not _simple_weights(p["weights"])
        ):
            return _loop(trace, func, args, kwargs)
        if func is np.histogram_bin_edges:
            a, _ = _ravel_checked(trace, p["a"], p["weights"])
            edges, batched, _ = bin_edges(trace, a, p["bins"], p["range"])
            return trace.wrap(edges) if batched else edges
        hist, edges, batched = histogram_batched(trace, p)
        return trace.wrap(hist), trace.wrap(edges) if batched else edges

    return rule


defrules([np.histogram, np.histogram_bin_edges], _histogram_rule)
defcomposite_by_rule([np.histogram, np.histogram_bin_edges])


def _sample_columns(trace: BatchTrace, sample: Any) -> list[Any] | None:
    """histogramdd's `sample` as D columns of shape (B, N), or None if not batchable."""
    if isinstance(sample, list | tuple):
        if any(example_ndim(trace, s) != 1 for s in sample):
            return None
        dtype = np.result_type(*[as_array(s).dtype for s in sample])
        return [_flat_example(trace, as_array(s)).astype(dtype, copy=False) for s in sample]
    nd = example_ndim(trace, sample)
    v = bcast_batch(trace, sample)
    if nd == 1:
        return [v]
    if nd == 2:
        return [v[:, :, i] for i in range(v.shape[2])]
    return None


def histogramdd_batched(trace: BatchTrace, cols: list[Any], bins: Any, rng: Any, density: Any,
                        weights: Any) -> tuple[Any, list[Any]]:  # fmt: skip
    """`np.histogramdd` of every example, on the sample's D columns (each (B, N))."""
    d = len(cols)
    try:
        if len(bins) != d:
            raise ValueError(
                "The dimension of bins must be equal to the dimension of the sample x."
            )
    except TypeError:
        bins = d * [bins]
    if rng is None:
        rng = (None,) * d
    elif len(rng) != d:
        raise ValueError("range argument must have one entry per dimension")
    edges, nbin, counts = [], [], []
    for i, col in enumerate(cols):
        if np.ndim(bins[i]) == 0:
            if bins[i] < 1:
                raise ValueError(f"`bins[{i}]` must be positive, when an integer")
            smin, smax = outer_edges(col, rng[i])
            try:
                n = operator.index(bins[i])
            except TypeError as err:
                raise TypeError(f"`bins[{i}]` must be an integer, when a scalar") from err
            if np.ndim(smin) == 0:
                e = np.linspace(smin, smax, n + 1)
            else:
                e = linspace_rows(smin, smax, n + 1)
        elif np.ndim(bins[i]) == 1:
            e = unwrap(trace, as_array(bins[i]))[0]
            if bool(np.any(e[..., :-1] > e[..., 1:])):
                raise ValueError(f"`bins[{i}]` must be monotonically increasing, when an array")
        else:
            raise ValueError(f"`bins[{i}]` must be a scalar or 1d array")
        edges.append(e)
        nbin.append(e.shape[-1] + 1)
        if e.ndim == 1:
            count = np.searchsorted(e, col, side="right")
        else:
            count = searchsorted_rows(e, col, "right")
        counts.append(count - (col == e[..., -1:]))
    flat = 0
    for count, size in zip(counts, nbin, strict=True):
        flat = flat * size + count
    total = int(np.prod(nbin))
    w = None if weights is None else _flat_example(trace, as_array(weights))
    hist = bincount_rows(flat, w, total).reshape((-1, *nbin))
    hist = hist.astype(float, casting="safe")
    hist = hist[(slice(None),) + d * (slice(1, -1),)]
    if density:
        s = np.sum(hist, axis=tuple(range(1, d + 1)), keepdims=True)
        for i, e in enumerate(edges):
            shape = [1] * d
            shape[i] = nbin[i] - 2
            de = np.diff(e, axis=-1)
            hist = hist / de.reshape(de.shape[:-1] + tuple(shape))
        hist = hist / s
    return hist, edges


def _histogramdd_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        p = call_params(func, args, kwargs)
        if func is np.histogram2d:
            sample, bins = [p["x"], p["y"]], p["bins"]
            try:
                n = len(bins)
            except TypeError:
                n = 1
            if n not in {1, 2}:
                bins = [bins, bins]
        else:
            sample, bins = p["sample"], p["bins"]
        cols = _sample_columns(trace, sample)
        if cols is None or _has_tracer(trace, p["range"]):
            return _loop(trace, func, args, kwargs)
        hist, edges = histogramdd_batched(trace, cols, bins, p["range"], p["density"],
                                          p["weights"])  # fmt: skip
        # edges computed per example, or given batched, are 2-d here
        edges = [trace.wrap(e) if e.ndim == 2 else e for e in edges]
        if func is np.histogram2d:
            return trace.wrap(hist), edges[0], edges[1]
        return trace.wrap(hist), edges

    return rule


defrules([np.histogramdd, np.histogram2d], _histogramdd_rule)
defcomposite_by_rule([np.histogramdd, np.histogram2d])
