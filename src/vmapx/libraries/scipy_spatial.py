"""Adapters for `scipy.spatial.distance`: distances written with NumPy (batched and
differentiable), for the metrics people use most.

Under `vmap`, `cdist`, `pdist` and `squareform` are a single NumPy formulation on the
whole batch (their batch rules: the batch on axis 0 of the arrays, the vectors on the last
axis, which every formula broadcasts over); values another transform traces (a `grad`
around the `vmap`) go through the lowering, which differentiates."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import scipy
import scipy.spatial.distance as sd

from .._batching import BatchTracer
from .._compat import NUMPY2
from .._core import Tracer
from .._numpy.reductions import sum_last_axis
from . import _adapter
from ._adapter import Unsupported, adapts, batch_by_axis

# the library's own functions, taken before `install` puts the adapters in their place
_METRICS = ("euclidean", "sqeuclidean", "cityblock", "chebyshev", "cosine", "correlation",
            "braycurtis", "canberra")  # fmt: skip
_LIBRARY = {name: getattr(sd, name) for name in (*_METRICS, "minkowski")}


def _metric(u: Any, v: Any, metric: Any, p: Any = 2.0, total: Any = None) -> Any:
    """`metric` between the vectors on the last axis of `u` and `v` (broadcast);
    `total(x)` sums `x` over its last axis (default: `np.sum(x, axis=-1)`)."""
    total = total or _sum_last
    d = u - v
    if metric == "euclidean":
        return np.sqrt(total(d * d))
    if metric == "sqeuclidean":
        return total(d * d)
    if metric == "cityblock":
        return total(np.abs(d))
    if metric == "chebyshev":  # (SciPy's C loop passes over NaN)
        return np.max(np.where(np.isnan(d), 0.0, np.abs(d)), axis=-1)
    if metric == "minkowski":
        if np.isinf(p):  # (SciPy's C code: either infinity is the chebyshev distance)
            return _metric(u, v, "chebyshev")
        if p == 0:  # (SciPy's C code divides `1 / p`; Python raises)
            raise Unsupported
        return total(np.abs(d) ** p) ** (1.0 / p)
    if metric == "cosine":
        dots = total(u * v)
        norms = np.sqrt(total(u * u)) * np.sqrt(total(v * v))
        return np.clip(1.0 - dots / norms, 0.0, 2.0)
    if metric == "braycurtis":
        return total(np.abs(d)) / total(np.abs(u + v))
    if metric == "canberra":
        den = np.abs(u) + np.abs(v)
        return total(np.where(den == 0, 0.0, np.abs(d) / np.where(den == 0, 1.0, den)))
    raise Unsupported


def _sum_last(x: Any) -> Any:
    return np.sum(x, axis=-1)


def _c_metric(u: Any, v: Any, metric: Any, p: Any = 2.0, total: Any = None) -> Any:
    """`_metric` as `cdist` and `pdist` compute it: in SciPy's C loops, which overflow and
    divide by zero without a warning (`correlation` centers the points in NumPy first)."""
    if metric == "correlation":
        u, v = u - np.mean(u, -1, keepdims=True), v - np.mean(v, -1, keepdims=True)
        metric = "cosine"
    with np.errstate(all="ignore"):
        return _metric(u, v, metric, p, total)


@functools.lru_cache(maxsize=64)
def _upper_pairs(n: int) -> tuple[np.ndarray, np.ndarray]:
    """`np.triu_indices(n, 1)`, made once per `n` (~10 us each time), read-only."""
    pairs = np.triu_indices(n, 1)
    for index in pairs:
        index.flags.writeable = False
    return pairs


def _pairwise(u: Any, v: Any, metric: Any, p: Any = 2.0) -> Any:
    """`metric` between every row of `u` (m, k) and every row of `v` (n, k): (m, n)."""
    return _c_metric(u[:, None, :], v[None, :, :], metric, p)


def _check(x: Any) -> None:
    if np.ndim(x) != 2 or not np.issubdtype(np.result_type(x), np.floating):
        raise Unsupported


def _double(x: Any) -> Any:
    """`x` in float64, as SciPy's `cdist` and `pdist` compute (float32 and float16
    points too: their distances computed in their own dtype are other numbers)."""
    return x if x.dtype == np.float64 else x.astype(np.float64)


def _check_batched(in_batched: list[Any], args: tuple[Any, ...], ndim: int) -> None:
    """Raise `Unsupported` unless every argument is a float array of `ndim` axes per
    example (one more where batched: the batch on axis 0)."""
    for batched, x in zip(in_batched, args, strict=True):
        _check_one(x, ndim + bool(batched))


def _check_one(x: Any, ndim: int) -> None:
    if type(x) is not np.ndarray or x.ndim != ndim or x.dtype.kind != "f":
        raise Unsupported


def _cdist(XA: Any, XB: Any, metric: Any = "euclidean", *, out: Any = None, p: Any = 2.0) -> Any:
    if out is not None or not isinstance(metric, str):
        raise Unsupported
    _check(XA)
    _check(XB)
    return _pairwise(_double(XA), _double(XB), metric, p)  # (SciPy's dtype)


def _cdist_batched(in_batched: list[Any], XA: Any, XB: Any, metric: Any = "euclidean", *,
                   out: Any = None, p: Any = 2.0) -> Any:  # fmt: skip
    if out is not None or not isinstance(metric, str):
        raise Unsupported
    _check_batched(in_batched, (XA, XB), 2)
    XA, XB = _double(XA), _double(XB)
    pairs = (XA[..., :, None, :], XB[..., None, :, :])
    return _c_metric(*pairs, metric, p, sum_last_axis)


@adapts("scipy.spatial.distance", "cdist", ("XA", "XB"),
        batch=batch_by_axis(_cdist_batched, _cdist))  # fmt: skip
def cdist(XA: Any, XB: Any, metric: Any = "euclidean", *, out: Any = None, p: Any = 2.0) -> Any:
    return _cdist(XA, XB, metric, out=out, p=p)


def _pdist(X: Any, metric: Any = "euclidean", *, out: Any = None, p: Any = 2.0) -> Any:
    if out is not None or not isinstance(metric, str):
        raise Unsupported
    _check(X)
    i, j = _upper_pairs(np.shape(X)[0])
    X = _double(X)
    return _c_metric(X[i], X[j], metric, p)  # (not the diagonal's zeros)


def _pdist_batched(in_batched: list[Any], X: Any, metric: Any = "euclidean", *,
                   out: Any = None, p: Any = 2.0) -> Any:  # fmt: skip
    if out is not None or not isinstance(metric, str):
        raise Unsupported
    _check_batched(in_batched, (X,), 2)
    i, j = _upper_pairs(X.shape[-2])
    X = _double(X)
    return _c_metric(X[..., i, :], X[..., j, :], metric, p, sum_last_axis)


@adapts("scipy.spatial.distance", "pdist", ("X",), batch=batch_by_axis(_pdist_batched, _pdist))
def pdist(X: Any, metric: Any = "euclidean", *, out: Any = None, p: Any = 2.0) -> Any:
    return _pdist(X, metric, out=out, p=p)


def _squareform_batched(in_batched: list[Any], X: Any, force: Any = "no",
                        checks: Any = True) -> Any:  # fmt: skip
    if force != "no" or type(X) is not np.ndarray or X.ndim != 2:
        raise Unsupported
    m = X.shape[1]
    if m == 0:
        return np.zeros_like(X, shape=(X.shape[0], 1, 1))  # SciPy's answer for no distances
    n = int(np.ceil(np.sqrt(m * 2)))
    if n * (n - 1) // 2 != m:
        raise Unsupported
    i, j = _upper_pairs(n)
    out = np.zeros_like(X, shape=(X.shape[0], n, n))
    out[:, i, j] = X
    return out + np.swapaxes(out, 1, 2)


@adapts("scipy.spatial.distance", "squareform", ("X",),
        batch=batch_by_axis(_squareform_batched, lambda X, **kw: squareform(X, **kw)))  # fmt: skip
def squareform(X: Any, force: Any = "no", checks: Any = True) -> Any:
    if force != "no" or np.ndim(X) != 1:
        raise Unsupported  # (a square matrix to its condensed form: the library)
    m = len(X)
    if m == 0:
        return np.zeros_like(X, shape=(1, 1))  # SciPy's answer for no distances
    n = int(np.ceil(np.sqrt(m * 2)))
    if n * (n - 1) // 2 != m:
        raise Unsupported
    i, j = _upper_pairs(n)
    out = np.zeros_like(X, shape=(n, n))
    out[i, j] = X
    return out + out.T


def _library_dtype(name: Any, u: Any, v: Any, **options: Any) -> Any:
    """The dtype SciPy's `name` gives for vectors of `u`'s and `v`'s dtypes (and, for
    `minkowski`, the order `p`: `p=2` goes through `scipy.linalg.norm`, others not)."""
    one, two = (np.arange(1, 3, dtype=np.result_type(x)) for x in (u, v))
    with np.errstate(all="ignore"):  # (booleans' `correlation` is 0/0: only its dtype counts)
        return np.result_type(_LIBRARY[name](one, two[::-1], **options))


def _check_vectors(u: Any, v: Any, w: Any) -> None:
    """The vectors a lowering covers: 1-D, real (SciPy casts some complex inputs to real
    and not others), unweighted."""
    if w is not None or np.ndim(u) != 1 or np.ndim(v) != 1:
        raise Unsupported
    if any(np.result_type(x).kind not in "biuf" for x in (u, v)):
        raise Unsupported


def _vector_chebyshev(d: Any) -> Any:
    """SciPy's `max(abs(u - v))` of the differences `d`: Python's `max`, which is NaN when
    the first difference is and passes over the NaN of the others."""
    d = np.abs(d)
    plain = _plain_values(d)
    if np.result_type(d).kind != "f" or (plain is not None and not np.isnan(plain[0]).any()):
        return np.max(d, axis=-1)  # (no NaN in any example: the plain maximum)
    rest = np.max(np.where(np.isnan(d), -np.inf, d), axis=-1)
    return np.where(np.isnan(d[..., 0]), np.nan, rest)


def _vector_canberra(u: Any, v: Any) -> Any:
    """SciPy's `nansum` of the terms (a NaN term, 0/0 included, counts as 0)."""
    den = np.abs(u) + np.abs(v)
    terms = np.abs(u - v) / np.where(den == 0, 1.0, den)
    return np.sum(np.where((den == 0) | np.isnan(terms), 0.0, terms), axis=-1)


def _check_finite(d: Any) -> None:
    """SciPy's `minkowski` (and `euclidean`) takes the norm of the differences `d` with
    `scipy.linalg.norm`, which raises for a NaN or an infinity."""
    plain = _plain_values(d)
    if plain is not None and np.isfinite(plain[0]).all():
        return  # (every example's difference is finite: asked without tracing)
    if not np.all(np.isfinite(d)):
        raise ValueError("array must not contain infs or NaNs")


# SciPy's order-2 norm of a vector: BLAS `nrm2` (scaled) before 1.18, NumPy's after
_SCIPY_SCALES = np.lib.NumpyVersion(scipy.__version__) < "1.18.0"


def _norm2(d: Any, total: Any) -> Any:
    """`sqrt(total(d * d))` of float differences as BLAS `nrm2` gives it (SciPy's order
    2): scaled by the largest `|d|` where the squares overflow or underflow, and only
    there (the common case pays one range check). From SciPy 1.18 on, `minkowski` takes
    NumPy's norm along the last axis, which does not scale: its overflow, as it is."""
    if not _SCIPY_SCALES:
        return np.sqrt(total(d * d))
    with np.errstate(over="ignore"):  # (those are the ones scaled below)
        squares = total(d * d)
    if np.shape(d)[-1] == 0:
        return np.sqrt(squares)  # (no entries to scale by: 0)
    info = np.finfo(np.result_type(d))
    fine = (squares >= info.tiny / info.eps) & (squares <= info.max)
    if type(squares) is not np.ndarray:  # traced: both ways, each example takes its own
        root = np.sqrt(np.where(fine, squares, 1.0))  # (no infinite slope where unused)
        return np.where(fine, root, _scaled_norm2(d, total))
    out = np.sqrt(squares)
    if not fine.all():
        rows = np.flatnonzero(~fine)
        out[rows] = _scaled_norm2(d[rows], total)
    return out


def _scaled_norm2(d: Any, total: Any) -> Any:
    scale = np.max(np.abs(d), axis=-1, keepdims=True)
    scale = np.where(scale == 0, 1.0, scale)  # (no difference: 0)
    return scale[..., 0] * np.sqrt(total((d / scale) ** 2))


def _plain_values(*xs: Any) -> list[Any] | None:
    """The plain values of batches of NumPy arrays (the batch first) and of constants,
    broadcastable against each other; None where one is traced otherwise."""
    values = [x.val if type(x) is BatchTracer else x for x in xs]
    if not all(type(v) is np.ndarray for v in values):
        return None
    return values


def _working(name: Any, u: Any, v: Any) -> tuple[Any, Any]:
    """`u` and `v` in the dtypes SciPy's metric `name` takes them in: `v` as float64 for
    `braycurtis` and `canberra` (`canberra`'s `abs(u)` is in `u`'s dtype), floats for
    `sqeuclidean` and `correlation` (integers as float64: `_float`), else their own: SciPy
    subtracts them in their dtype, where integers wrap around. float16 vectors, whose norms
    and dot products SciPy computes with other intermediate precision, and `correlation`
    and `cosine` of two dtypes go to the library."""
    if name in ("braycurtis", "canberra"):
        return u, v.astype(np.float64)
    dtypes = (np.result_type(u), np.result_type(v))
    if np.float16 in dtypes or (name in ("correlation", "cosine") and dtypes[0] != dtypes[1]):
        raise Unsupported  # (SciPy centers and squares each vector in its own dtype)
    if name in ("sqeuclidean", "correlation"):
        return _float(u), _float(v)
    return u, v


def _float(x: Any) -> Any:
    """`x` as floats: a float array as it is, others as float64 (as `x * 1.0`)."""
    return x if np.result_type(x).kind == "f" else x * 1.0


def _vector_value(name: Any, u: Any, v: Any, p: Any = 2, total: Any = None) -> Any:
    """Metric `name` between `u` and `v` (vectors on the last axis, in `_working`'s
    dtypes), as SciPy's vector function gives it (NaN, infinities and the integers'
    wraparound included)."""
    total = total or _sum_last
    if name == "canberra":
        return _vector_canberra(u, v)
    if name == "cosine":
        cosine = _vector_cosine if np.result_type(u).kind == "f" else _integer_cosine
        return cosine(u, v, total)
    if name == "correlation":
        u, v = u - np.mean(u, -1, keepdims=True), v - np.mean(v, -1, keepdims=True)
        return _vector_cosine(u, v, total)
    if name not in ("euclidean", "minkowski", "chebyshev", "cityblock"):
        return _metric(u, v, name, p, total)
    d = u - v
    if name == "chebyshev":
        return _vector_chebyshev(d)
    if name == "cityblock":
        return total(np.abs(d))
    if p <= 0:  # (SciPy raises)
        raise Unsupported
    _check_finite(d)
    d = _float(d)  # (`np.linalg.norm` takes integers as float64)
    if name == "euclidean" or p == 2:
        return _norm2(d, total)
    if p == np.inf:  # (`np.linalg.norm`: no entries, 0 on NumPy 2; NumPy 1.26 raises)
        return np.max(np.abs(d), axis=-1, **({"initial": 0.0} if NUMPY2 else {}))  # type: ignore[call-overload]  # (NumPy 2 only)
    if p == 1:
        return total(np.abs(d))
    return total(np.abs(d) ** p) ** (1.0 / p)


def _vector_cosine(u: Any, v: Any, total: Any) -> Any:
    """SciPy's `1 - uv / sqrt(uu * vv)`, clipped: the product of the squared norms (not
    of the norms, as `cdist`) overflows and underflows where SciPy's does."""
    dots = total(u * v)
    return np.clip(1.0 - dots / np.sqrt(total(u * u) * total(v * v)), 0.0, 2.0)


def _integer_cosine(u: Any, v: Any, total: Any) -> Any:
    """SciPy's `cosine` of integers or booleans (one dtype): its dot products in that dtype
    (integers wrap around, booleans' sums are `or`), their product too, then as floats."""
    dtype = np.result_type(u)
    uv, uu, vv = (total(a * b).astype(dtype) for a, b in ((u, v), (u, u), (v, v)))
    if dtype.kind != "b":
        top = np.iinfo(dtype).max
        if np.any((uu < 0) | (vv < 0) | (uu > top // np.maximum(vv, 1))):
            raise Unsupported  # (SciPy's product overflows (warning) or its root raises)
    root = np.sqrt((uu * vv).astype(np.float64))
    return np.clip(1.0 - uv.astype(np.float64) / root, 0.0, 2.0)


@functools.lru_cache(maxsize=256)
def _dtype_of(name: Any, a: Any, b: Any, options: Any) -> Any:
    """`_library_dtype` by dtypes (and `minkowski`'s order), asked of SciPy once."""
    return _library_dtype(name, a, b, **dict(options))


def _vector_batched(name: Any) -> Any:
    """The batch rule of metric `name`: its lowering's calls on the whole batch (they act
    on the last axis), its checks asked of every example at once."""

    def call(in_batched: list[Any], u: Any, v: Any, w: Any = None, **options: Any) -> Any:
        if w is not None or any(in_batched[2:]) or not any(in_batched[:2]):
            raise Unsupported
        for batched, x in zip(in_batched[:2], (u, v), strict=True):
            if type(x) is not np.ndarray or x.ndim != 1 + bool(batched):
                raise Unsupported
            if x.dtype.kind not in "biuf":  # (as `_check_vectors`)
                raise Unsupported
        p = options.pop("p", 2)
        real = not isinstance(p, Tracer) and (
            isinstance(p, int | float | np.integer | np.floating) and not isinstance(p, bool)
        )
        if options or not real:
            raise Unsupported
        dtype = _dtype_of(name, u.dtype, v.dtype, (("p", p),) if name == "minkowski" else ())
        u, v = _working(name, u, v)
        return _vector_value(name, u, v, p, sum_last_axis).astype(dtype, copy=False)

    return call


def _vector_metric(name: Any) -> Any:
    def lowering(u: Any, v: Any, w: Any = None) -> Any:
        _check_vectors(u, v, w)
        dtype = _library_dtype(name, u, v)
        return _vector_value(name, *_working(name, u, v)).astype(dtype)

    lowering.__name__ = name
    batch = batch_by_axis(_vector_batched(name), lowering)
    return adapts("scipy.spatial.distance", name, ("u", "v", "w"), batch=batch)(lowering)


for _name in _METRICS:
    _vector_metric(_name)


@adapts("scipy.spatial.distance", "minkowski", ("u", "v", "w"),
        batch=batch_by_axis(_vector_batched("minkowski"),
                            lambda u, v, w=None, **kw: minkowski(u, v, w=w, **kw)))  # fmt: skip
def minkowski(u: Any, v: Any, p: Any = 2, w: Any = None) -> Any:
    _check_vectors(u, v, w)
    dtype = _library_dtype("minkowski", u, v, p=p)
    return _vector_value("minkowski", *_working("minkowski", u, v), p).astype(dtype)


def install() -> None:
    _adapter.install("scipy.spatial.distance")
