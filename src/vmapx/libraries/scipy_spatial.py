"""Adapters for `scipy.spatial.distance`: distances written with NumPy (batched and
differentiable), for the metrics people use most."""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.spatial.distance as sd

from .._batching import BatchTracer
from . import _adapter
from ._adapter import Unsupported, adapts

# the library's own functions, taken before `install` puts the adapters in their place
_METRICS = ("euclidean", "sqeuclidean", "cityblock", "chebyshev", "cosine", "correlation",
            "braycurtis", "canberra")  # fmt: skip
_LIBRARY = {name: getattr(sd, name) for name in (*_METRICS, "minkowski")}


def _metric(u: Any, v: Any, metric: Any, p: Any = 2.0) -> Any:
    """`metric` between the vectors on the last axis of `u` and `v` (broadcast)."""
    d = u - v
    if metric == "euclidean":
        return np.sqrt(np.sum(d * d, axis=-1))
    if metric == "sqeuclidean":
        return np.sum(d * d, axis=-1)
    if metric == "cityblock":
        return np.sum(np.abs(d), axis=-1)
    if metric == "chebyshev":  # (SciPy's C loop passes over NaN)
        return np.max(np.where(np.isnan(d), 0.0, np.abs(d)), axis=-1)
    if metric == "minkowski":
        return np.sum(np.abs(d) ** p, axis=-1) ** (1.0 / p)
    if metric == "cosine":
        dots = np.sum(u * v, axis=-1)
        norms = np.sqrt(np.sum(u * u, axis=-1)) * np.sqrt(np.sum(v * v, axis=-1))
        return np.clip(1.0 - dots / norms, 0.0, 2.0)
    if metric == "correlation":
        return _metric(u - np.mean(u, -1, keepdims=True), v - np.mean(v, -1, keepdims=True),
                       "cosine")  # fmt: skip
    if metric == "braycurtis":
        return np.sum(np.abs(d), axis=-1) / np.sum(np.abs(u + v), axis=-1)
    if metric == "canberra":
        den = np.abs(u) + np.abs(v)
        return np.sum(np.where(den == 0, 0.0, np.abs(d) / np.where(den == 0, 1.0, den)), -1)
    raise Unsupported


def _pairwise(u: Any, v: Any, metric: Any, p: Any = 2.0) -> Any:
    """`metric` between every row of `u` (m, k) and every row of `v` (n, k): (m, n)."""
    return _metric(u[:, None, :], v[None, :, :], metric, p)


def _check(x: Any) -> None:
    if np.ndim(x) != 2 or not np.issubdtype(np.result_type(x), np.floating):
        raise Unsupported


@adapts("scipy.spatial.distance", "cdist", ("XA", "XB"))
def cdist(XA: Any, XB: Any, metric: Any = "euclidean", *, out: Any = None, p: Any = 2.0) -> Any:
    if out is not None or not isinstance(metric, str):
        raise Unsupported
    _check(XA)
    _check(XB)
    return _pairwise(XA, XB, metric, p).astype(np.float64)  # SciPy's dtype


@adapts("scipy.spatial.distance", "pdist", ("X",))
def pdist(X: Any, metric: Any = "euclidean", *, out: Any = None, p: Any = 2.0) -> Any:
    if out is not None or not isinstance(metric, str):
        raise Unsupported
    _check(X)
    i, j = np.triu_indices(np.shape(X)[0], 1)
    return _metric(X[i], X[j], metric, p).astype(np.float64)  # (not the diagonal's zeros)


@adapts("scipy.spatial.distance", "squareform", ("X",))
def squareform(X: Any, force: Any = "no", checks: Any = True) -> Any:
    if force != "no" or np.ndim(X) != 1:
        raise Unsupported  # (a square matrix to its condensed form: the library)
    m = len(X)
    if m == 0:
        return np.zeros_like(X, shape=(1, 1))  # SciPy's answer for no distances
    n = int(np.ceil(np.sqrt(m * 2)))
    if n * (n - 1) // 2 != m:
        raise Unsupported
    i, j = np.triu_indices(n, 1)
    out = np.zeros_like(X, shape=(n, n))
    out[i, j] = X
    return out + out.T


def _library_dtype(name: Any, u: Any, v: Any, **options: Any) -> Any:
    """The dtype SciPy's `name` gives for vectors of `u`'s and `v`'s dtypes (and, for
    `minkowski`, the order `p`: `p=2` goes through `scipy.linalg.norm`, others not)."""
    one, two = (np.arange(1, 3, dtype=np.result_type(x)) for x in (u, v))
    return np.result_type(_LIBRARY[name](one, two[::-1], **options))


def _check_vectors(u: Any, v: Any, w: Any) -> None:
    """The vectors a lowering covers: 1-D, real (SciPy casts some complex inputs to real
    and not others), unweighted."""
    if w is not None or np.ndim(u) != 1 or np.ndim(v) != 1:
        raise Unsupported
    if any(np.result_type(x).kind not in "biuf" for x in (u, v)):
        raise Unsupported


def _vector_chebyshev(u: Any, v: Any) -> Any:
    """SciPy's `max(abs(u - v))`: Python's `max`, which is NaN when the first difference
    is and passes over the NaN of the others."""
    d = np.abs(u - v)
    plain = _plain_values(u, v)
    if plain is not None and not np.isnan(plain[0] - plain[1]).any():
        return np.max(d, axis=-1)  # (no NaN in any example: the plain maximum)
    rest = np.max(np.where(np.isnan(d), -np.inf, d), axis=-1)
    return np.where(np.isnan(d[..., 0]), np.nan, rest)


def _vector_canberra(u: Any, v: Any) -> Any:
    """SciPy's `nansum` of the terms (a NaN term, 0/0 included, counts as 0)."""
    den = np.abs(u) + np.abs(v)
    terms = np.abs(u - v) / np.where(den == 0, 1.0, den)
    return np.sum(np.where((den == 0) | np.isnan(terms), 0.0, terms), axis=-1)


def _check_finite_difference(u: Any, v: Any) -> None:
    """SciPy's `minkowski` (and `euclidean`) takes the norm of `u - v` with
    `scipy.linalg.norm`, which raises for a NaN or an infinity."""
    plain = _plain_values(u, v)
    if plain is not None and np.isfinite(plain[0] - plain[1]).all():
        return  # (every example's difference is finite: asked without tracing)
    if not np.all(np.isfinite(u - v)):
        raise ValueError("array must not contain infs or NaNs")


def _plain_values(*xs: Any) -> list[Any] | None:
    """The plain values of batches of NumPy arrays (the batch first) and of constants,
    broadcastable against each other; None where one is traced otherwise."""
    values = [x.val if type(x) is BatchTracer else x for x in xs]
    if not all(type(v) is np.ndarray for v in values):
        return None
    return values


def _vector_metric(name: Any) -> Any:
    def lowering(u: Any, v: Any, w: Any = None) -> Any:
        _check_vectors(u, v, w)
        dtype = _library_dtype(name, u, v)
        u, v = u * 1.0, v * 1.0
        if name == "chebyshev":
            d = _vector_chebyshev(u, v)
        elif name == "canberra":
            d = _vector_canberra(u, v)
        else:
            if name == "euclidean":
                _check_finite_difference(u, v)
            d = _metric(u, v, name)
        return d.astype(dtype)

    lowering.__name__ = name
    return adapts("scipy.spatial.distance", name, ("u", "v", "w"))(lowering)


for _name in _METRICS:
    _vector_metric(_name)


@adapts("scipy.spatial.distance", "minkowski", ("u", "v", "w"))
def minkowski(u: Any, v: Any, p: Any = 2, w: Any = None) -> Any:
    _check_vectors(u, v, w)
    _check_finite_difference(u, v)
    dtype = _library_dtype("minkowski", u, v, p=p)
    return _metric(u * 1.0, v * 1.0, "minkowski", p).astype(dtype)


def install() -> None:
    _adapter.install("scipy.spatial.distance")
