"""Op-table rows for statistics, polynomials and misc numeric functions (see `op_table.py`).

Inputs come with ties, NaNs (never a whole NaN slice: NumPy warns there) and duplicate
sample points, so that the batched rules meet NumPy's edge cases on every run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from np_compat import NUMPY2
from op_spec import Op

# np.trapz on NumPy 1.26: the same function under its old name
_trapezoid = np.trapezoid if NUMPY2 else np.trapz

_METHODS = (
    "inverted_cdf", "averaged_inverted_cdf", "closest_observation",
    "interpolated_inverted_cdf", "hazen", "weibull", "linear", "median_unbiased",
    "normal_unbiased", "lower", "higher", "midpoint", "nearest",
)  # fmt: skip


def _make(*parts: Callable) -> Callable:
    """An input maker from one maker per argument: `part(rng) -> array`."""
    return lambda rng: [p(rng) for p in parts]


def _uniform(shape: tuple, lo: float = -2.0, hi: float = 2.0) -> Callable:
    return lambda rng: rng.uniform(lo, hi, shape)


def _ties(shape: tuple) -> Callable:
    """Values on a coarse grid: many exact ties."""
    return lambda rng: np.round(rng.uniform(-2, 2, shape) * 2) / 2


def _with_nans(shape: tuple) -> Callable:
    """Floats with some NaNs, never a whole slice along any axis of NaNs."""

    def make(rng: np.random.Generator) -> np.ndarray:
        x = np.round(rng.uniform(-2, 2, shape), 1)
        mask = rng.random(shape) < 0.3
        mask[(0,) * (len(shape) - 1)] = False  # a NaN-free line along the last axis
        mask[..., 0] = False  # and a NaN-free first column
        x[mask] = np.nan
        return x

    return make


def _sorted(shape: tuple, duplicate: bool = False) -> Callable:
    def make(rng: np.random.Generator) -> np.ndarray:
        x = np.sort(rng.uniform(-2, 2, shape), axis=-1)
        if duplicate:
            x[..., 2] = x[..., 1]
        return x

    return make


def _edges(k: int) -> Callable:
    """Increasing bin edges spanning [-2.5, 2.5] (so no histogram is empty)."""

    def make(rng: np.random.Generator) -> np.ndarray:
        e = np.sort(rng.uniform(-2, 2, k))
        e[0], e[-1] = -2.5, 2.5
        return e

    return make


def _q(shape: tuple) -> Callable:
    """Probabilities, including the ends 0 and 1."""

    def make(rng: np.random.Generator) -> np.ndarray:
        q = rng.uniform(0, 1, shape)
        if q.size > 1:
            q.flat[0], q.flat[1] = 0.0, 1.0
        return q

    return make


def _percent(shape: tuple) -> Callable:
    return lambda rng: np.asarray(rng.uniform(0, 100, shape))


def _int(shape: tuple, lo: int = -4, hi: int = 5) -> Callable:
    return lambda rng: rng.integers(lo, hi, shape)


def _interp_x(rng: np.random.Generator) -> np.ndarray:
    """Points inside, outside and exactly on the sample points (made in `_interp_make`)."""
    return rng.uniform(-2.5, 2.5, (3, 4))


def _interp_make(rng: np.random.Generator) -> list:
    xp = _sorted((6,), duplicate=True)(rng)
    x = _interp_x(rng)
    x[0, 0], x[0, 1], x[0, 2], x[1, 0] = xp[0], xp[-1], xp[2], np.nan
    return [x, xp, rng.uniform(-2, 2, 6)]


def _roots_make(rng: np.random.Generator) -> list:
    """Real-rooted cubics (so every example's roots are real)."""
    return [np.poly(np.sort(rng.uniform(-2, 2, 3)))]


def _quantile_rows() -> list[Op]:
    rows = []
    for m in _METHODS:
        rows += [
            Op(f"quantile.{m}", lambda x, m=m: np.quantile(x, 0.3, axis=1, method=m),
               ((3, 7),), make=_make(_ties((3, 7)))),
            Op(f"quantile.{m}.batched_q", lambda x, q, m=m: np.quantile(x, q, method=m),
               ((3, 5), (4,)), make=_make(_ties((3, 5)), _q((4,)))),
            Op(f"nanquantile.{m}", lambda x, q, m=m: np.nanquantile(x, q, axis=-1, method=m),
               ((3, 6), (2,)), make=_make(_with_nans((3, 6)), _q((2,)))),
        ]  # fmt: skip
    return rows


def _stats_rows() -> list[Op]:
    return [
        Op("median", lambda x: np.median(x, axis=-1), ((3, 6),), covers=(np.median,),
           make=_make(_ties((3, 6)))),
        Op("median.all_keepdims", lambda x: np.median(x, keepdims=True), ((3, 4),),
           make=_make(_with_nans((3, 4)))),
        Op("nanmedian", lambda x: np.nanmedian(x, axis=0), ((5, 3),), covers=(np.nanmedian,),
           make=_make(_with_nans((5, 3)))),
        Op("nanmedian.all", np.nanmedian, ((4, 5),), make=_make(_with_nans((4, 5)))),
        Op("quantile", lambda x, q: np.quantile(x, q, axis=(0, 1), keepdims=True),
           ((3, 4, 2), (3,)), covers=(np.quantile,), make=_make(_ties((3, 4, 2)), _q((3,)))),
        Op("quantile.int", lambda x: np.quantile(x, [0.25, 0.5]), ((7,),), ("int64",),
           make=_make(_int((7,)))),
        Op("quantile.float32_weak", lambda x: np.quantile(x, 0.35, axis=0), ((5, 2),),
           make=lambda rng: [rng.uniform(-2, 2, (5, 2)).astype(np.float32)]),
        Op("percentile", lambda x, q: np.percentile(x, q, axis=1), ((2, 5), ()),
           covers=(np.percentile,), make=_make(_uniform((2, 5)), _percent(()))),
        Op("nanquantile", lambda x: np.nanquantile(x, 0.4, axis=1, keepdims=True), ((3, 6),),
           covers=(np.nanquantile,), make=_make(_with_nans((3, 6)))),
        Op("nanpercentile", lambda x, q: np.nanpercentile(x, q), ((4, 3), (2,)),
           covers=(np.nanpercentile,), make=_make(_with_nans((4, 3)), _percent((2,)))),
        Op("quantile.weights",
           lambda x, w: np.quantile(x, [0.2, 0.9], axis=0, method="inverted_cdf", weights=w),
           ((5, 2), (5, 2)), make=_make(_ties((5, 2)), _uniform((5, 2), 0.0, 1.0)),
           numpy2="quantile(weights=)"),
        Op("percentile.weights_1d",
           lambda x, w: np.percentile(x, 40, axis=1, method="inverted_cdf", weights=w),
           ((3, 6), (6,)), make=_make(_ties((3, 6)), _uniform((6,), 0.0, 1.0)),
           numpy2="percentile(weights=)"),
        Op("nanpercentile.weights",
           lambda x, w: np.nanpercentile(x, 40, axis=1, method="inverted_cdf", weights=w),
           ((3, 6), (3, 6)), make=_make(_with_nans((3, 6)), _uniform((3, 6), 0.1, 1.0)),
           numpy2="nanpercentile(weights=)"),
        Op("average", lambda x: np.average(x, axis=0), ((3, 4),), covers=(np.average,)),
        Op("average.weights", lambda x, w: np.average(x, axis=1, weights=w, returned=True),
           ((3, 4), (4,)), domain=(0.5, 2.0)),
        Op("average.full_weights", lambda x, w: np.average(x, weights=w, keepdims=True),
           ((3, 4), (3, 4)), domain=(0.5, 2.0)),
        Op("cov", np.cov, ((3, 6),), covers=(np.cov,)),
        Op("cov.y_rowvar", lambda m, y: np.cov(m, y, rowvar=False, bias=True), ((6, 2), (6,))),
        Op("cov.weights", lambda m, f, a: np.cov(m, fweights=f, aweights=a, ddof=0),
           ((2, 5), (5,), (5,)), make=_make(_uniform((2, 5)), _int((5,), 1, 4),
                                            _uniform((5,), 0.2, 1.0))),
        Op("cov.aweights_ddof", lambda m, a: np.cov(m, aweights=a, ddof=2), ((2, 6), (6,)),
           make=_make(_uniform((2, 6)), _uniform((6,), 0.2, 1.0))),
        Op("cov.scalar", np.cov, ((5,),)),
        Op("corrcoef", np.corrcoef, ((3, 6),), covers=(np.corrcoef,)),
        Op("corrcoef.y", lambda x, y: np.corrcoef(x, y), ((2, 5), (5,))),
        Op("corrcoef.complex", np.corrcoef, ((2, 5),), ("complex128",), diff=False),
    ]  # fmt: skip


def _hist2(x: Any, y: Any) -> Any:
    return np.histogram2d(x, y, bins=(3, 4))


def _histogram_rows() -> list[Op]:
    return [
        Op("histogram", lambda a: np.histogram(a, bins=5), ((4, 6),), covers=(np.histogram,),
           diff=False, make=_make(_ties((4, 6)))),
        Op("histogram.range_weights_density",
           lambda a, w: np.histogram(a, bins=4, range=(-1, 1), weights=w, density=True),
           ((12,), (12,)), diff=False),
        Op("histogram.edges", lambda a, e: np.histogram(a, bins=e, weights=a * a),
           ((12,), (5,)), diff=False, make=_make(_ties((12,)), _sorted((5,), duplicate=True))),
        Op("histogram.int", lambda a: np.histogram(a, bins=3), ((9,),), ("int64",), diff=False,
           make=_make(_int((9,), 0, 2))),
        Op("histogram_bin_edges", lambda a: np.histogram_bin_edges(a, bins=6), ((3, 4),),
           covers=(np.histogram_bin_edges,), diff=False),
        Op("histogram2d", _hist2, ((15,), (15,)), covers=(np.histogram2d,), diff=False,
           make=_make(_ties((15,)), _uniform((15,)))),
        Op("histogram2d.edges_density",
           lambda x, y, e: np.histogram2d(x, y, bins=e, density=True),
           ((15,), (15,), (4,)), diff=False, make=_make(_ties((15,)), _uniform((15,)), _edges(4))),
        Op("histogramdd", lambda s, w: np.histogramdd(s, bins=(2, 3, 2), weights=w),
           ((10, 3), (10,)), covers=(np.histogramdd,), diff=False),
    ]  # fmt: skip


def _misc_rows() -> list[Op]:
    return [
        Op("interp", np.interp, ((3, 4), (6,), (6,)), covers=(np.interp,), make=_interp_make),
        Op("interp.left_right_period",
           lambda x, xp, fp: (np.interp(x, xp, fp, left=-5.0, right=5.0),
                              np.interp(x, xp, fp, period=1.5)),
           ((3, 4), (6,), (6,)), make=_interp_make),
        Op("interp.complex", lambda x, xp, fp: np.interp(x, xp, fp * (1 - 2j)),
           ((3, 4), (6,), (6,)), make=_interp_make, diff=False),
        Op("trapezoid", lambda y, x: _trapezoid(y, x), ((3, 5), (5,)),
           covers=(_trapezoid,), make=_make(_uniform((3, 5)), _sorted((5,)))),
        Op("trapezoid.axis_dx", lambda y, dx: _trapezoid(y, dx=dx, axis=0), ((4, 3), ())),
        Op("trapezoid.x_nd", lambda y, x: _trapezoid(y, x, axis=0), ((4, 3), (4, 3))),
        Op("polyval", np.polyval, ((4,), (3, 2)), covers=(np.polyval,)),
        Op("polyadd", np.polyadd, ((4,), (2,)), covers=(np.polyadd,)),
        Op("polysub", np.polysub, ((2,), (4,)), covers=(np.polysub,)),
        Op("polymul", np.polymul, ((4,), (3,)), covers=(np.polymul,)),
        Op("polyder", lambda p: np.polyder(p, 2), ((5,),), covers=(np.polyder,)),
        Op("polyint", lambda p, k: np.polyint(p, 2, k), ((4,), (2,)), covers=(np.polyint,),
           needs_batched=(0,)),  # NumPy does not dispatch on `k`
        Op("polydiv", np.polydiv, ((5,), (2,)), covers=(np.polydiv,),
           make=_make(_uniform((5,)), _uniform((2,), 1.0, 2.0))),
        Op("polyfit", lambda y: np.polyfit(np.linspace(-1, 1, 7), y, 2), ((7,),),
           covers=(np.polyfit,)),
        Op("polyfit.full", lambda y: np.polyfit(np.linspace(-1, 1, 7), y, 2, full=True),
           ((7, 2),), diff=False),
        Op("polyfit.batched_x_cov", lambda x, y, w: np.polyfit(x, y, 2, w=w, cov=True),
           ((8,), (8,), (8,)), rtol=1e-6, atol=1e-8,
           make=_make(_sorted((8,)), _uniform((8,)), _uniform((8,), 0.5, 1.0))),
        Op("poly", np.poly, ((4,),), covers=(np.poly,)),
        Op("poly.matrix", np.poly, ((3, 3),), rtol=1e-6, diff=False),
        Op("roots", np.roots, ((4,),), covers=(np.roots,), make=_roots_make, rtol=1e-6,
           atol=1e-7, diff=False),
    ]  # fmt: skip


OPS: list[Op] = [*_stats_rows(), *_quantile_rows(), *_histogram_rows(), *_misc_rows()]

# Rows whose inputs sit where the function has no derivative (exact ties at the
# quantile, q of 0 or 1, NaN results, points on or repeated sample points of `interp`)
# are not differentiated at them: their derivatives are checked on twins of the rows at
# inputs where they exist (`<row>.smooth`, below; and in `test_grad_gather.py`).
_AT_KINKS = "inputs where the derivative exists"
_SORT_ROWS_CHECKED = {
    "median", "nanmedian", "quantile.float32_weak", "percentile", "nanquantile",
    "nanpercentile.weights", "quantile.inverted_cdf", "quantile.averaged_inverted_cdf",
    "quantile.higher", "quantile.nearest",
}  # fmt: skip

# Rows whose derivatives wait for rules of other families' primitives (named here):
# they are not run by the derivative tests yet; `test_stats.py` checks that they still
# fail, so that the day the rules exist the row is switched back on.
DERIVATIVES_WAITING: dict[str, str] = {
    **{
        op.name: _AT_KINKS
        for op in OPS
        if any(k in op.name for k in ("median", "quantile", "percentile"))
        and op.name != "quantile.int"
        and op.name not in _SORT_ROWS_CHECKED
    },
    "interp": _AT_KINKS,
    "interp.left_right_period": _AT_KINKS,
}
for _op in OPS:
    if _op.name in DERIVATIVES_WAITING:
        _op.diff = False


# Derivative twins of the rows above: the same functions at inputs where the derivative
# exists (distinct values, NaNs only for the nan-functions, q strictly inside its range,
# positive weights, interp points between distinct sample points). The rows themselves
# keep their ties and NaNs for the batching tests.
def _smooth_nans(shape: tuple) -> Callable:
    """`_with_nans` without the rounding (no ties)."""

    def make(rng: np.random.Generator) -> np.ndarray:
        x = _uniform(shape)(rng)
        x[np.isnan(_with_nans(shape)(rng))] = np.nan
        return x

    return make


def _smooth_interp(rng: np.random.Generator) -> list:
    return [_interp_x(rng), _sorted((6,))(rng), rng.uniform(-2, 2, 6)]


def _smooth_twin(op: Op) -> Op:
    if op.name.startswith("interp"):
        make = _smooth_interp
    else:
        data = (_smooth_nans if op.name.startswith("nan") else _uniform)(op.shapes[0])
        lo, hi = (
            (0.1, 1.0) if "weights" in op.name
            else (5.0, 95.0) if "percentile" in op.name
            else (0.05, 0.95)
        )  # fmt: skip
        make = _make(data, *(_uniform(s, lo, hi) for s in op.shapes[1:]))
    return Op(f"{op.name}.smooth", op.fn, op.shapes, op.dtypes, make=make, numpy2=op.numpy2)


OPS += [_smooth_twin(op) for op in OPS if op.name in DERIVATIVES_WAITING]
