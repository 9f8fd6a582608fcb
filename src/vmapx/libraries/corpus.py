"""A corpus of real library functions, each called per example, to measure what batches.

Each entry is `(library, name, f, args)`: `f` written for ONE example, `args` a batch
(every argument batched along axis 0). `measure()` runs each entry under `vmap` and as
the loop, checks they agree, and records whether it ran batched (no
`PerformanceWarning`) and the speed-up over the loop. `python -m vmapx coverage
--libraries` prints the summary per library. Entries of libraries that are not installed
are left out.
"""

from __future__ import annotations

import importlib
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import _pytree as optree  # optree in vmapx.config.pytree_namespace

__all__ = ["entries", "measure", "summary_table"]

Entry = tuple[str, str, Callable[..., Any], tuple[Any, ...]]
B = 16  # the batch size measured


def _rng() -> np.random.Generator:
    return np.random.default_rng(0)


def _special(add: Callable[..., Any]) -> None:
    sc = importlib.import_module("scipy.special")
    from .scipy_special import DIFFERENTIATED

    x = _rng().uniform(0.3, 0.9, (B, 8))
    for name in DIFFERENTIATED:
        u = getattr(sc, name)
        if u.nin == 2:
            add("scipy.special", name, lambda v, u=u: u(1.2, v), x)
        else:
            add("scipy.special", name, lambda v, u=u: u(v), x)
    y = _rng().normal(size=(B, 8))
    for name in ("logsumexp", "softmax", "log_softmax"):
        add("scipy.special", name, getattr(sc, name), y)
    add("scipy.special", "polygamma", lambda v: sc.polygamma(1, v), x + 1)
    add("scipy.special", "comb", lambda v: sc.comb(10, v), np.floor(x * 10))


def _stats(add: Callable[..., Any]) -> None:
    st = importlib.import_module("scipy.stats")
    from .scipy_stats import DISTRIBUTIONS, METHODS

    x = _rng().normal(size=(B, 8))
    for d in DISTRIBUTIONS:
        for m in METHODS:
            method = getattr(getattr(st, d), m)
            add("scipy.stats", f"{d}.{m}", lambda v, f=method: f(v, 0.1, 2.0), x)
    for name in ("zscore", "skew", "kurtosis", "sem", "iqr", "variation", "rankdata", "gmean"):
        add("scipy.stats", name, getattr(st, name), np.abs(x) + 0.1)
    add("scipy.stats", "gamma.logpdf", lambda v: st.gamma.logpdf(v, 2.0), np.abs(x) + 0.1)
    add("scipy.stats", "t.logpdf", lambda v: st.t.logpdf(v, 3.0), x)


def _linalg(add: Callable[..., Any]) -> None:
    sl = importlib.import_module("scipy.linalg")
    m = _rng().normal(size=(B, 4, 4))
    a = m @ np.swapaxes(m, 1, 2) + 4 * np.eye(4)
    v = _rng().normal(size=(B, 4))
    add("scipy.linalg", "solve", sl.solve, a, v)
    add("scipy.linalg", "solve(pos)", lambda a, b: sl.solve(a, b, assume_a="pos"), a, v)
    for name in ("inv", "det", "cholesky", "svdvals", "norm", "expm", "lu_factor", "eigvalsh"):
        add("scipy.linalg", name, getattr(sl, name), a / 4)
    add("scipy.linalg", "cho_solve", lambda a, b: sl.cho_solve(sl.cho_factor(a), b), a, v)
    add("scipy.linalg", "solve_triangular", lambda a, b: sl.solve_triangular(a, b), a, v)
    add("scipy.linalg", "eigh", lambda a: sl.eigh(a)[0], a)
    add("scipy.linalg", "qr", lambda a: np.abs(sl.qr(a)[1]), a)
    add("scipy.linalg", "pinv", sl.pinv, a)
    add("scipy.linalg", "lstsq", lambda a, b: sl.lstsq(a, b)[0], a, v)
    add("scipy.linalg", "logm", lambda a: sl.logm(a).real, a)
    add("scipy.linalg", "sqrtm", lambda a: sl.sqrtm(a).real, a)
    add("scipy.linalg", "lu_solve", lambda a, b: sl.lu_solve(sl.lu_factor(a), b), a, v)


def _distance(add: Callable[..., Any]) -> None:
    sd = importlib.import_module("scipy.spatial.distance")
    p = _rng().normal(size=(B, 6, 3))
    rng = _rng()
    u, w = rng.normal(size=(B, 5)), rng.normal(size=(B, 5))  # (two different vectors)
    for metric in ("euclidean", "sqeuclidean", "cityblock", "chebyshev", "cosine",
                   "correlation", "braycurtis", "canberra", "minkowski"):  # fmt: skip
        add("scipy.spatial.distance", metric, getattr(sd, metric), u, w)
        add("scipy.spatial.distance", f"cdist({metric})", lambda x, m=metric: sd.cdist(x, x, m), p)
    add("scipy.spatial.distance", "pdist", sd.pdist, p)
    add("scipy.spatial.distance", "squareform", lambda x: sd.squareform(sd.pdist(x)), p)
    add("scipy.spatial.distance", "hamming", sd.hamming, u > 0, w > 0)


def _signal(add: Callable[..., Any]) -> None:
    ss = importlib.import_module("scipy.signal")
    y = _rng().normal(size=(B, 64))
    sos = ss.butter(2, 0.2, output="sos")
    add("scipy.signal", "lfilter", lambda s: ss.lfilter([1, 0.5], [1, -0.3], s), y)
    add("scipy.signal", "filtfilt", lambda s: ss.filtfilt([1, 0.5], [1, -0.3], s), y)
    add("scipy.signal", "sosfilt", lambda s: ss.sosfilt(sos, s), y)
    add("scipy.signal", "sosfiltfilt", lambda s: ss.sosfiltfilt(sos, s), y)
    add("scipy.signal", "savgol_filter", lambda s: ss.savgol_filter(s, 7, 2), y)
    add("scipy.signal", "detrend", ss.detrend, y)
    add("scipy.signal", "hilbert", lambda s: np.abs(ss.hilbert(s)), y)
    add("scipy.signal", "resample", lambda s: ss.resample(s, 32), y)
    add("scipy.signal", "welch", lambda s: ss.welch(s, nperseg=16)[1], y)
    add("scipy.signal", "periodogram", lambda s: ss.periodogram(s)[1], y)
    add("scipy.signal", "convolve", lambda s: ss.convolve(s, np.ones(5) / 5), y)
    add("scipy.signal", "correlate", lambda s: ss.correlate(s, s[:8], mode="valid"), y)
    add("scipy.signal", "fftconvolve", lambda s: ss.fftconvolve(s, np.hanning(9)), y)
    add("scipy.signal", "medfilt", lambda s: ss.medfilt(s, 5), y)
    add("scipy.signal", "find_peaks count", lambda s: len(ss.find_peaks(s)[0]), y)


def _integrate_interpolate(add: Callable[..., Any]) -> None:
    si = importlib.import_module("scipy.integrate")
    ip = importlib.import_module("scipy.interpolate")
    t = np.linspace(0, 1, 33)
    y = np.sin(_rng().uniform(1, 3, (B, 1)) * t)
    add("scipy.integrate", "trapezoid", lambda s: si.trapezoid(s, t), y)
    add("scipy.integrate", "cumulative_trapezoid", lambda s: si.cumulative_trapezoid(s, t), y)
    add("scipy.integrate", "simpson", lambda s: si.simpson(s, x=t), y)
    add("scipy.integrate", "romb", lambda s: si.romb(s, dx=t[1]), y)
    q = np.linspace(0.05, 0.95, 7)
    add("scipy.interpolate", "interp1d", lambda s: ip.interp1d(t, s)(q), y)
    add("scipy.interpolate", "CubicSpline", lambda s: ip.CubicSpline(t, s)(q), y)
    add("scipy.interpolate", "make_interp_spline", lambda s: ip.make_interp_spline(t, s)(q), y)
    add("scipy.interpolate", "PchipInterpolator", lambda s: ip.PchipInterpolator(t, s)(q), y)


def _ndimage_fft_optimize(add: Callable[..., Any]) -> None:
    nd = importlib.import_module("scipy.ndimage")
    sf = importlib.import_module("scipy.fft")
    so = importlib.import_module("scipy.optimize")
    img = _rng().normal(size=(B, 12, 12))
    for name in ("gaussian_filter", "uniform_filter", "median_filter", "maximum_filter"):
        kw = {"sigma": 1.0} if name == "gaussian_filter" else {"size": 3}
        fun = getattr(nd, name)
        add("scipy.ndimage", name, lambda x, f=fun, kw=kw: f(x, **kw), img)
    for name in ("sobel", "laplace"):
        add("scipy.ndimage", name, getattr(nd, name), img)
    y = _rng().normal(size=(B, 16))
    for name in ("fft", "rfft", "dct", "idct", "dst", "ifft"):
        add("scipy.fft", name, getattr(sf, name), y)
    add("scipy.optimize", "rosen", so.rosen, y)
    add("scipy.optimize", "rosen_der", so.rosen_der, y)


def _numpy_libs(add: Callable[..., Any]) -> None:
    P = np.polynomial.polynomial
    t = np.linspace(0, 1, 20)
    y = _rng().normal(size=(B, 20))
    c = _rng().normal(size=(B, 4))
    add("numpy.polynomial", "polyfit", lambda s: P.polyfit(t, s, 3), y)
    add("numpy.polynomial", "polyval", lambda k: P.polyval(t, k), c)
    add("numpy.polynomial", "polyder", P.polyder, c)
    add("numpy.polynomial", "Polynomial.fit", lambda s: np.polynomial.Polynomial.fit(t, s, 2)(t), y)
    add("numpy.polynomial", "chebval", lambda k: np.polynomial.chebyshev.chebval(t, k), c)
    add("numpy.polynomial", "legval", lambda k: np.polynomial.legendre.legval(t, k), c)
    add("numpy.polynomial", "np.polyfit", lambda s: np.polyfit(t, s, 3), y)
    add("numpy.polynomial", "np.polyval", lambda k: np.polyval(k, t), c)
    for name in ("fft", "rfft", "ifft", "fftshift"):
        add("numpy.fft", name, getattr(np.fft, name), y)
    add("numpy.fft", "irfft", lambda s: np.fft.irfft(np.fft.rfft(s)), y)


def _sklearn(add: Callable[..., Any]) -> None:
    metrics = importlib.import_module("sklearn.metrics")
    pairwise = importlib.import_module("sklearn.metrics.pairwise")
    pre = importlib.import_module("sklearn.preprocessing")
    yt, yp = _rng().normal(size=(B, 20)), _rng().normal(size=(B, 20))
    for name in ("mean_squared_error", "mean_absolute_error", "r2_score",
                 "explained_variance_score", "median_absolute_error"):  # fmt: skip
        add("sklearn", f"metrics.{name}", getattr(metrics, name), yt, yp)
    add("sklearn", "metrics.accuracy_score", metrics.accuracy_score, yt > 0, yp > 0)
    p = _rng().normal(size=(B, 6, 3))
    for name in ("euclidean_distances", "rbf_kernel", "cosine_similarity", "linear_kernel"):
        add("sklearn", f"pairwise.{name}", getattr(pairwise, name), p)
    for name in ("scale", "normalize", "minmax_scale", "robust_scale"):
        add("sklearn", f"preprocessing.{name}", getattr(pre, name), p)


def _user_code(add: Callable[..., Any]) -> None:
    sc = importlib.import_module("scipy.special")
    st = importlib.import_module("scipy.stats")
    sl = importlib.import_module("scipy.linalg")
    x, w = _rng().normal(size=(B, 10)), _rng().normal(size=(10,))
    add("user code", "logistic loss", lambda v: -np.sum(sc.log_expit(v * w)), x)
    add("user code", "softmax cross-entropy", lambda v: -sc.log_softmax(v)[3], x)
    add("user code", "gaussian log-likelihood", lambda v: st.norm.logpdf(v, 0.0, 1.5).sum(), x)
    m = _rng().normal(size=(B, 5, 5))
    k = m @ np.swapaxes(m, 1, 2) + 5 * np.eye(5)
    add("user code", "GP log marginal",
        lambda K, y: -0.5 * y @ sl.cho_solve(sl.cho_factor(K), y)
        - np.log(np.diag(sl.cholesky(K))).sum(), k, x[:, :5])  # fmt: skip


_GROUPS = (_special, _stats, _linalg, _distance, _signal, _integrate_interpolate,
           _ndimage_fft_optimize, _numpy_libs, _sklearn, _user_code)  # fmt: skip


def entries() -> list[Entry]:
    """Every corpus entry whose library is installed."""
    out: list[Entry] = []
    for group in _GROUPS:
        found: list[Entry] = []
        try:
            group(lambda lib, name, f, *args, found=found: found.append((lib, name, f, args)))
        except ImportError:
            continue
        out.extend(found)
    return out


def _loop(f: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    outs = [f(*[a[i] for a in args]) for i in range(len(args[0]))]
    return optree.tree_map(lambda *xs: np.stack(xs), *outs)


def _same(got: Any, want: Any) -> bool:
    g, w = optree.tree_leaves(got), optree.tree_leaves(want)
    return len(g) == len(w) and all(
        a.shape == b.shape and a.dtype == b.dtype and np.allclose(a, b, rtol=1e-6, atol=1e-9,
                                                                  equal_nan=True)
        for a, b in zip(g, w, strict=True)
    )  # fmt: skip


def _time(fun: Callable[..., Any], repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fun()
        best = min(best, time.perf_counter() - t0)
    return best


def measure(entry: Entry, timing: bool = False) -> dict[Any, Any]:
    """Run one entry: `batched` (no PerformanceWarning), `correct` (equals the loop),
    `error` (what vmap raised, if it did) and, with `timing`, `speedup` over the loop."""
    from .. import vmap
    from ..errors import PerformanceWarning

    lib, name, f, args = entry
    want = _loop(f, args)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            got = vmap(f)(*args)
        except Exception as e:  # recorded: the corpus reports it
            return {"library": lib, "name": name, "batched": False, "correct": False,
                    "error": f"{type(e).__name__}: {e}"[:200]}  # fmt: skip
    batched = not any(issubclass(w.category, PerformanceWarning) for w in caught)
    result = {"library": lib, "name": name, "batched": batched,
              "correct": _same(got, want), "error": None}  # fmt: skip
    if timing:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result["speedup"] = _time(lambda: _loop(f, args)) / _time(lambda: vmap(f)(*args))
    return result


def summary_table(timing: bool = True) -> str:
    """Per library: entries, batched (%), wrong, median speed-up of batched entries and
    of fallbacks over the loop at batch 16."""
    results = [measure(e, timing) for e in entries()]
    rows = [f"{'library':<24} {'entries':>7} {'batched':>8} {'%':>5} {'wrong':>5}"
            + (f" {'speedup':>8} {'fallback':>8}" if timing else "")]  # fmt: skip
    libs = sorted({r["library"] for r in results})
    for lib in [*libs, "all"]:
        rs = [r for r in results if lib in ("all", r["library"])]
        nb = sum(r["batched"] for r in rs)
        row = f"{lib:<24} {len(rs):>7} {nb:>8} {100 * nb / len(rs):>5.0f} "
        row += f"{sum(not r['correct'] for r in rs):>5}"
        if timing:
            fast = [r["speedup"] for r in rs if r["batched"] and "speedup" in r]
            slow = [r["speedup"] for r in rs if not r["batched"] and "speedup" in r]
            row += f" {f'{np.median(fast):.1f}x' if fast else '-':>8}"
            row += f" {f'{np.median(slow):.2f}x' if slow else '-':>8}"
        rows.append(row)
    return "\n".join(rows)
