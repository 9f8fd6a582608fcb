"""Real library functions that convert their inputs with `np.asarray` & co. on entry,
each called per example: the table behind tests/test_passthrough.py and
benchmarks/passthrough.py. Each case is `(name, f, args)` with every argument batched
along axis 0 (batch 16); libraries that are not installed are left out."""

from __future__ import annotations

import importlib
from collections.abc import Callable

import numpy as np

B = 16
Case = tuple[str, Callable, tuple]


def _imports(*names: str) -> list:
    return [importlib.import_module(name) for name in names]


def _data() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.normal(size=(B, 12)), rng.normal(size=(B, 12)), rng.uniform(0.1, 1.0, (B, 12))


def _polynomial() -> list[Case]:
    P, C, L, H = _imports("numpy.polynomial.polynomial", "numpy.polynomial.chebyshev",
                          "numpy.polynomial.legendre", "numpy.polynomial.hermite")  # fmt: skip
    x, y, _ = _data()
    t = np.linspace(-1, 1, 12)
    c = x[:, :4]
    return [
        ("polynomial.polyval", lambda v: P.polyval(t, v), (c,)),
        ("polynomial.polyfit", lambda v: P.polyfit(t, v, 3), (x,)),
        ("polynomial.polyder", lambda v: P.polyder(v, 2), (c,)),
        ("polynomial.polyint", lambda v: P.polyint(v), (c,)),
        ("polynomial.polymul", lambda a, b: P.polymul(a, b), (c, y[:, :4])),
        ("polynomial.polyadd", lambda a, b: P.polyadd(a, b), (c, y[:, :3])),
        ("polynomial.polyvander", lambda v: P.polyvander(v, 3), (x,)),
        ("polynomial.polyroots", lambda v: np.sort(np.abs(P.polyroots(v))), (c,)),
        ("polynomial.chebval", lambda v: C.chebval(t, v), (c,)),
        ("polynomial.chebfit", lambda v: C.chebfit(t, v, 3), (x,)),
        ("polynomial.legval", lambda v: L.legval(t, v), (c,)),
        ("polynomial.legfit", lambda v: L.legfit(t, v, 3), (x,)),
        ("polynomial.hermval", lambda v: H.hermval(t, v), (c,)),
        ("polynomial.cheb2poly", lambda v: C.cheb2poly(v), (c,)),
    ]


def _scipy() -> list[Case]:
    st, sp, dist, integ = _imports("scipy.stats", "scipy.special", "scipy.spatial.distance",
                                   "scipy.integrate")  # fmt: skip
    x, y, u = _data()
    ones = np.ones(12)
    return [
        ("scipy.special.logsumexp", sp.logsumexp, (x,)),
        ("scipy.special.softmax", sp.softmax, (x,)),
        ("scipy.special.log_softmax", sp.log_softmax, (x,)),
        ("scipy.stats.zscore", st.zscore, (x,)),
        ("scipy.stats.skew", st.skew, (x,)),
        ("scipy.stats.kurtosis", st.kurtosis, (x,)),
        ("scipy.stats.sem", st.sem, (x,)),
        ("scipy.stats.variation", st.variation, (u,)),
        ("scipy.stats.gmean", st.gmean, (u,)),
        ("scipy.stats.hmean", st.hmean, (u,)),
        ("scipy.stats.moment", lambda v: st.moment(v, 3), (x,)),
        ("scipy.stats.entropy", st.entropy, (u,)),
        ("scipy.stats.tmean", st.tmean, (x,)),
        ("scipy.stats.trim_mean", lambda v: st.trim_mean(v, 0.1), (x,)),
        ("scipy.stats.norm.logpdf", lambda v: st.norm.logpdf(v, 0.5, 2.0), (x,)),
        ("scipy.spatial.distance.sqeuclidean", dist.sqeuclidean, (x, y)),
        ("scipy.spatial.distance.cityblock", dist.cityblock, (x, y)),
        ("scipy.spatial.distance.chebyshev", dist.chebyshev, (x, y)),
        ("scipy.spatial.distance.braycurtis", dist.braycurtis, (u, u[::-1])),
        ("scipy.spatial.distance.canberra", dist.canberra, (x, y)),
        ("scipy.spatial.distance.minkowski", lambda a: dist.minkowski(a, ones, 3), (x,)),
        ("scipy.spatial.distance.jensenshannon", dist.jensenshannon, (u, u[::-1])),
        ("scipy.integrate.trapezoid", integ.trapezoid, (x,)),
        ("scipy.integrate.simpson", integ.simpson, (x,)),
        ("scipy.integrate.cumulative_trapezoid", integ.cumulative_trapezoid, (x,)),
    ]


def _sklearn() -> list[Case]:
    metrics, pairwise, pre, extmath = _imports(
        "sklearn.metrics", "sklearn.metrics.pairwise", "sklearn.preprocessing",
        "sklearn.utils.extmath",
    )  # fmt: skip
    x, y, u = _data()
    return [
        ("sklearn.metrics.mean_squared_error", metrics.mean_squared_error, (x, y)),
        ("sklearn.metrics.mean_absolute_error", metrics.mean_absolute_error, (x, y)),
        ("sklearn.metrics.r2_score", metrics.r2_score, (x, y)),
        ("sklearn.metrics.explained_variance_score", metrics.explained_variance_score, (x, y)),
        ("sklearn.metrics.max_error", metrics.max_error, (x, y)),
        ("sklearn.pairwise.euclidean_distances",
         lambda a: pairwise.euclidean_distances(a.reshape(3, 4)), (x,)),
        ("sklearn.pairwise.cosine_similarity",
         lambda a: pairwise.cosine_similarity(a.reshape(3, 4)), (x,)),
        ("sklearn.pairwise.rbf_kernel", lambda a: pairwise.rbf_kernel(a.reshape(3, 4)), (x,)),
        ("sklearn.preprocessing.normalize", lambda a: pre.normalize(a.reshape(3, 4)), (x,)),
        ("sklearn.preprocessing.scale", lambda a: pre.scale(a.reshape(6, 2)), (x,)),
        ("sklearn.preprocessing.minmax_scale", lambda a: pre.minmax_scale(a), (x,)),
        ("sklearn.utils.extmath.softmax", lambda a: extmath.softmax(a.reshape(3, 4)), (x,)),
        ("sklearn.utils.extmath.row_norms", lambda a: extmath.row_norms(a.reshape(3, 4)), (x,)),
    ]  # fmt: skip


def cases() -> list[Case]:
    """Every case whose library is installed."""
    found = []
    for group in (_polynomial, _scipy, _sklearn):
        try:
            found += group()
        except ImportError:
            pass
    return found
