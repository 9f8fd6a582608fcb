"""Adapters for `scipy.spatial.distance`: distances written with NumPy (batched and
differentiable), for the metrics people use most."""

from __future__ import annotations

import numpy as np

from . import _adapter
from ._adapter import Unsupported, adapts


def _pairwise(u, v, metric, p=2.0):
    """`metric` between every row of `u` (m, k) and every row of `v` (n, k): (m, n)."""
    d = u[:, None, :] - v[None, :, :]
    if metric == "euclidean":
        return np.sqrt(np.sum(d * d, axis=-1))
    if metric == "sqeuclidean":
        return np.sum(d * d, axis=-1)
    if metric == "cityblock":
        return np.sum(np.abs(d), axis=-1)
    if metric == "chebyshev":
        return np.max(np.abs(d), axis=-1)
    if metric == "minkowski":
        return np.sum(np.abs(d) ** p, axis=-1) ** (1.0 / p)
    if metric == "cosine":
        dots = u @ v.T
        norms = np.sqrt(np.sum(u * u, axis=-1))[:, None] * np.sqrt(np.sum(v * v, axis=-1))
        return np.clip(1.0 - dots / norms, 0.0, 2.0)
    if metric == "correlation":
        return _pairwise(u - np.mean(u, -1, keepdims=True), v - np.mean(v, -1, keepdims=True),
                         "cosine")  # fmt: skip
    if metric == "braycurtis":
        s = np.abs(u[:, None, :] + v[None, :, :])
        return np.sum(np.abs(d), axis=-1) / np.sum(s, axis=-1)
    if metric == "canberra":
        den = np.abs(u[:, None, :]) + np.abs(v[None, :, :])
        return np.sum(np.where(den == 0, 0.0, np.abs(d) / np.where(den == 0, 1.0, den)), -1)
    raise Unsupported


def _check(x):
    if np.ndim(x) != 2 or not np.issubdtype(np.result_type(x), np.floating):
        raise Unsupported


@adapts("scipy.spatial.distance", "cdist", ("XA", "XB"))
def cdist(XA, XB, metric="euclidean", *, out=None, p=2.0):
    if out is not None or not isinstance(metric, str):
        raise Unsupported
    _check(XA)
    _check(XB)
    return _pairwise(XA, XB, metric, p)


@adapts("scipy.spatial.distance", "pdist", ("X",))
def pdist(X, metric="euclidean", *, out=None, p=2.0):
    if out is not None or not isinstance(metric, str):
        raise Unsupported
    _check(X)
    i, j = np.triu_indices(np.shape(X)[0], 1)
    return _pairwise(X, X, metric, p)[i, j]


@adapts("scipy.spatial.distance", "squareform", ("X",))
def squareform(X, force="no", checks=True):
    if force != "no" or np.ndim(X) != 1:
        raise Unsupported  # (a square matrix to its condensed form: the library)
    m = len(X)
    n = int(np.ceil(np.sqrt(m * 2)))
    if n * (n - 1) // 2 != m:
        raise Unsupported
    i, j = np.triu_indices(n, 1)
    out = np.zeros_like(X, shape=(n, n))
    out[i, j] = X
    return out + out.T


def _vector_metric(name):
    def lowering(u, v, w=None):
        if w is not None or np.ndim(u) != 1 or np.ndim(v) != 1:
            raise Unsupported
        return _pairwise(u[None, :] * 1.0, v[None, :] * 1.0, name)[0, 0]

    lowering.__name__ = name
    return adapts("scipy.spatial.distance", name, ("u", "v", "w"))(lowering)


for _name in ("euclidean", "sqeuclidean", "cityblock", "chebyshev", "cosine", "correlation",
              "braycurtis", "canberra"):  # fmt: skip
    _vector_metric(_name)


@adapts("scipy.spatial.distance", "minkowski", ("u", "v", "w"))
def minkowski(u, v, p=2, w=None):
    if w is not None or np.ndim(u) != 1 or np.ndim(v) != 1:
        raise Unsupported
    return _pairwise(u[None, :] * 1.0, v[None, :] * 1.0, "minkowski", p)[0, 0]


def install() -> None:
    _adapter.install("scipy.spatial.distance")
