"""Statistics, histograms, interpolation and polynomials under `vmap`: NumPy's exact
semantics (bit for bit where the arithmetic is NumPy's), its errors, and the cases that
must leave the batch (data-dependent result shapes or dtypes)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import optree
import pytest

import vmapx
from harness import check_vmap, loop_reference
from np_compat import requires_numpy2
from op_table_stats import DERIVATIVES_WAITING, OPS
from vmapx._numpy.misc import searchsorted_rows
from vmapx._numpy.statistics import linspace_rows

METHODS = (
    "inverted_cdf", "averaged_inverted_cdf", "closest_observation",
    "interpolated_inverted_cdf", "hazen", "weibull", "linear", "median_unbiased",
    "normal_unbiased", "lower", "higher", "midpoint", "nearest",
)  # fmt: skip


def _exact(f: Callable, args: list, in_axes: Any = 0) -> None:
    """vmap equals the loop bit for bit (same dtype, NaNs where the loop has them)."""
    got = optree.tree_leaves(vmapx.vmap(f, in_axes=in_axes)(*args))
    want = optree.tree_leaves(loop_reference(f, args, in_axes))
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)


def _data(rng: np.random.Generator, shape: tuple, nans: float = 0.0) -> np.ndarray:
    """Values with many ties and, optionally, NaNs (every slice keeps a number)."""
    x = np.round(rng.normal(size=shape), 1)
    if nans:
        x[rng.random(shape) < nans] = np.nan
        x[..., 0] = 0.25
    return x


# -- quantiles ------------------------------------------------------------------------


@pytest.mark.parametrize("method", METHODS)
def test_quantile_methods_are_exact(method: str) -> None:
    rng = np.random.default_rng(0)
    x, xn = _data(rng, (6, 5, 7)), _data(rng, (6, 5, 7), nans=0.3)
    q = rng.uniform(size=(6, 3))
    _exact(lambda a: np.quantile(a, [0.0, 0.3, 1.0], axis=(0, 1), method=method), [x])
    _exact(lambda a, q: np.quantile(a, q, axis=1, method=method), [x, q])
    _exact(lambda a, q: np.quantile(a, q, axis=-1, method=method, keepdims=True), [x[0], q],
           in_axes=(None, 0))  # fmt: skip
    _exact(lambda a: np.quantile(a, 0.5, axis=1, method=method), [xn])  # NaN slices
    _exact(lambda a, q: np.nanquantile(a, q, axis=1, method=method), [xn, q])
    _exact(lambda a: np.nanpercentile(a, 37.5, method=method, keepdims=True), [xn])
    _exact(lambda a: np.nanquantile(a, 0.37, axis=0, method=method), [xn.astype(np.float32)])


def test_quantile_promotes_like_numpy() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(4, 9)).astype(np.float32)
    _exact(lambda a: np.quantile(a, 0.3), [x])  # a Python float keeps float32
    _exact(lambda a: np.quantile(a, np.float64(0.3)), [x])  # a NumPy float does not
    _exact(lambda a, q: np.quantile(a, q), [x, rng.uniform(size=4).astype(np.float32)])
    _exact(lambda a: np.quantile(a, [0, 1], method="lower"), [np.arange(20).reshape(4, 5)])
    _exact(lambda a: np.median(a), [np.arange(4)])  # 0-d examples


def test_median_and_nanmedian_are_exact_on_short_and_long_axes() -> None:
    rng = np.random.default_rng(2)
    for n in (5, 6, 700):  # NumPy takes other paths for long axes
        x = _data(rng, (3, 4, n), nans=0.2)
        _exact(lambda a: np.nanmedian(a, axis=-1), [x])
        _exact(lambda a: np.median(a, axis=-1), [x])
        _exact(lambda a: np.nanmedian(a, axis=(0, 1), keepdims=True), [x])


@requires_numpy2("quantile(weights=)")
def test_weighted_quantiles_are_exact() -> None:
    rng = np.random.default_rng(3)
    x, xn = _data(rng, (4, 5, 6)), _data(rng, (4, 5, 6), nans=0.3)
    w = rng.uniform(0, 2, (4, 5, 6))
    w[w < 0.5] = 0  # zero weights, also leading ones
    opts = {"method": "inverted_cdf"}
    _exact(lambda a, w: np.quantile(a, [0.0, 0.4, 1.0], axis=1, weights=w, **opts), [x, w])
    _exact(lambda a, w: np.percentile(a, 30, axis=1, weights=w, **opts), [x, w[:, 0]])
    _exact(lambda a, w: np.nanquantile(a, 0.6, axis=(0, 1), weights=w, **opts), [xn, w])
    _exact(lambda a, w, q: np.quantile(a, q, axis=0, weights=w, **opts),
           [x, w, rng.uniform(size=(4, 2))])  # fmt: skip


def test_all_nan_slices_warn_once_and_give_nan() -> None:
    x = np.ones((3, 4, 5))
    x[1, 2] = np.nan
    with pytest.warns(RuntimeWarning, match="All-NaN slice"):
        got = vmapx.vmap(lambda a: np.nanquantile(a, 0.5, axis=1))(x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = loop_reference(lambda a: np.nanquantile(a, 0.5, axis=1), [x], 0)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(vmapx.vmap(lambda a: np.nanmedian(a, axis=1))(x), want)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda a: np.quantile(a, 1.5), ValueError, r"Quantiles must be in the range \[0, 1\]"),
        (lambda a: np.percentile(a, -1), ValueError, r"Percentiles must be in the range"),
        (lambda a: np.quantile(a, 0.5, method="cubic"), ValueError, "is not a valid method"),
        (lambda a: np.quantile(a + 0j, 0.5), TypeError, "real numbers"),
        pytest.param(
            lambda a: np.quantile(a, 0.5, weights=a),
            ValueError,
            "Only method 'inverted_cdf'",
            marks=requires_numpy2("quantile(weights=)"),
        ),
        pytest.param(
            lambda a: np.quantile(a, 0.5, method="inverted_cdf", weights=a - 9),
            ValueError,
            "non-negative",
            marks=requires_numpy2("quantile(weights=)"),
        ),
        pytest.param(
            lambda a: np.quantile(a, 0.5, method="inverted_cdf", weights=a[:2]),
            TypeError,
            "Axis must be specified",
            marks=requires_numpy2("quantile(weights=)"),
        ),
        (lambda a: np.average(a, weights=a * 0), ZeroDivisionError, "Weights sum to zero"),
        (lambda a: np.cov(a, fweights=a[0] + 0.5), TypeError, "fweights must be integer"),
        (lambda a: np.histogram(a, range=(1, 0)), ValueError, "max must be larger"),
        (lambda a: np.histogram(a, bins=[3, 1, 2]), ValueError, "increase monotonically"),
        (lambda a: np.histogram(a, bins=0), ValueError, "must be positive"),
        (lambda a: np.histogram(a * np.inf), ValueError, "autodetected range of"),
        (lambda a: np.histogram(a, weights=a[:2]), ValueError, "same shape as a"),
        (lambda a: np.polyder(a[0], -1), ValueError, "Order of derivative must be positive"),
        (lambda a: np.polyfit(a, a[0], 1), TypeError, "expected 1D vector for x"),
        (lambda a: np.interp(a, a[0], a[0], period=0), ValueError, "period must be a non-zero"),
    ],
)
def test_errors_are_numpys(call: Callable, error: type, match: str) -> None:
    x = np.arange(1.0, 25.0).reshape(2, 3, 4)
    with pytest.raises(error, match=match):
        call(x[0])  # NumPy itself raises it ...
    with pytest.raises(error, match=match):
        vmapx.vmap(call)(x)  # ... and so does the batch


# -- averages and covariance ----------------------------------------------------------


def test_average_cov_corrcoef_are_exact() -> None:
    rng = np.random.default_rng(4)
    x, w = rng.normal(size=(5, 3, 8)), rng.uniform(0.1, 1, (5, 3, 8))
    _exact(lambda a, w: np.average(a, axis=1, weights=w, keepdims=True), [x, w[0, 0]],
           in_axes=(0, None))  # fmt: skip
    fw = rng.integers(0, 3, (5, 8))
    # weighted: a batched matmul where NumPy calls dot (the last bit may differ)
    check_vmap(lambda m, f, a: np.cov(m, fweights=f, aweights=a, ddof=3), [x, fw, w[:, 0]])
    _exact(lambda m, y: np.cov(m, y, rowvar=False), [x, x[:, :, :2] * 2])
    _exact(lambda m: np.corrcoef(m + 1j * m[::-1]), [x])


@requires_numpy2("average with N-d weights over an axis tuple")
def test_average_with_weights_over_axes_is_exact() -> None:
    rng = np.random.default_rng(4)
    x, w = rng.normal(size=(5, 3, 8)), rng.uniform(0.1, 1, (5, 3, 8))
    _exact(lambda a, w: np.average(a, axis=(1, 0), weights=w.T, returned=True), [x, w])


def test_cov_with_no_degrees_of_freedom_warns_like_numpy() -> None:
    x = np.random.default_rng(5).normal(size=(3, 2, 4))
    with np.errstate(divide="ignore"), pytest.warns(RuntimeWarning, match="Degrees of freedom"):
        got = vmapx.vmap(lambda m: np.cov(m, ddof=4))(x)
    with warnings.catch_warnings(), np.errstate(divide="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        np.testing.assert_array_equal(got, loop_reference(lambda m: np.cov(m, ddof=4), [x], 0))


# -- histograms -----------------------------------------------------------------------


def test_histograms_are_exact() -> None:
    rng = np.random.default_rng(6)
    a, w = _data(rng, (4, 300)), rng.uniform(size=(4, 300))
    edges = np.sort(rng.normal(size=(4, 7)), axis=1)
    edges[:, 3] = edges[:, 2]  # an empty bin
    _exact(lambda a: np.histogram(a, bins=9), [a])
    _exact(lambda a, w: np.histogram(a, bins=9, range=(-1, 1), weights=w, density=True), [a, w])
    _exact(lambda a, w, e: np.histogram(a, bins=e, weights=w), [a, w, edges])
    _exact(lambda a, e: np.histogram(a, bins=e[::2], density=True), [a[0], edges],
           in_axes=(None, 0))  # fmt: skip
    _exact(lambda a: np.histogram_bin_edges(a, bins=5), [a.astype(np.float32)])
    _exact(lambda x, y: np.histogram2d(x, y, bins=[3, 4], density=True), [a, a[::-1]])
    _exact(lambda x, y, e: np.histogram2d(x, y, bins=e), [a, a**2, edges])
    _exact(lambda x, y, w: np.histogramdd([x, y], bins=(2, 5), weights=w), [a, a[::-1], w])


def test_histogram_of_integers_widens_a_single_value_range() -> None:
    a = np.array([[3, 3, 3, 3], [-128, 127, 0, 5], [1, 2, 3, 4]], dtype=np.int8)
    _exact(lambda x: np.histogram(x, bins=4), [a])  # no overflow in int8's range either


def test_histogram_sums_weights_per_block_as_numpy_does() -> None:
    rng = np.random.default_rng(7)
    a, w = rng.normal(size=(2, 140_000)), rng.normal(size=(2, 140_000))
    _exact(lambda a, w: np.histogram(a, bins=13, weights=w), [a, w])
    _exact(lambda a, w: np.histogram(a, bins=np.linspace(-3, 3, 8) ** 3, weights=w), [a, w])


def test_histogram_of_bools_converts_like_numpy() -> None:
    a = np.random.default_rng(8).random((3, 10)) < 0.5
    with pytest.warns(RuntimeWarning, match="Converting input from bool"):
        got = vmapx.vmap(lambda x: np.histogram(x, bins=2)[0])(a)
    with pytest.warns(RuntimeWarning):
        np.testing.assert_array_equal(got, loop_reference(lambda x: np.histogram(x, 2)[0], [a], 0))


def test_string_bins_loop_with_a_warning() -> None:
    a = np.random.default_rng(9).normal(size=(3, 50))
    with pytest.warns(vmapx.PerformanceWarning, match="np.histogram"):
        check_vmap(lambda x: np.histogram(x, bins="auto")[0].sum(), [a])


# -- interpolation and polynomials ----------------------------------------------------


def test_interp_is_exact_everywhere() -> None:
    rng = np.random.default_rng(10)
    xp = np.sort(np.round(rng.uniform(-2, 2, (5, 12)), 1), axis=1)  # with duplicates
    fp = rng.normal(size=(5, 12))
    fp[2, 4] = np.inf  # NaN-producing slopes take NumPy's other branches
    x = rng.uniform(-3, 3, (5, 40))
    x[:, :12] = xp  # exactly on the sample points
    x[:, 12] = np.nan
    for axes in [(0, 0, 0), (0, None, None), (None, 0, None), (None, None, 0), (None, 0, 0)]:
        args = [v if ax == 0 else v[0] for v, ax in zip((x, xp, fp), axes, strict=True)]
        with np.errstate(invalid="ignore"):
            _exact(np.interp, args, in_axes=axes)
            _exact(lambda a, b, c: np.interp(a, b, c * (2 - 1j), left=7.0, period=3.0), args,
                   in_axes=axes)  # fmt: skip
    _exact(np.interp, [x[:, :3], xp[:, :1], fp[:, :1]])  # one sample point


def test_polynomials_match_numpy() -> None:
    rng = np.random.default_rng(11)
    p, q = rng.normal(size=(4, 5)), rng.normal(size=(4, 2))
    _exact(lambda p, x: np.polyval(p, x), [p, rng.normal(size=(4, 3, 2))])
    _exact(np.polydiv, [p, q])
    _exact(lambda p, k: np.polyint(p, 3, k), [p, q[:, 0]])
    _exact(lambda p: np.polyder(p, 7), [p])  # more derivatives than coefficients
    real = np.stack([np.poly(r) for r in rng.normal(size=(4, 4))])
    _exact(lambda p: np.poly(np.roots(p)), [real])
    check_vmap(np.polymul, [p, q])  # NumPy's convolution sums in its own order
    x = np.linspace(-1, 1, 11)
    check_vmap(lambda y: np.polyfit(x, y, 3, full=True), [rng.normal(size=(4, 11, 2))])
    check_vmap(lambda x, y: np.polyfit(x, y, 2, full=True), [rng.normal(size=(4, 11)),
                                                             rng.normal(size=(4, 11))])  # fmt: skip


def _loops_with_warning(f: Callable, args: list) -> None:
    with pytest.warns(vmapx.PerformanceWarning):
        check_vmap(f, args)
    with pytest.raises(vmapx.errors.ConcretizationError):
        vmapx.vmap(f, fallback="error")(*args)


def test_data_dependent_results_leave_the_batch() -> None:
    p = np.array([[1.0, 2.0, 0.0], [1.0, 2.0, 3.0]])  # a root at 0 (real), complex roots
    _loops_with_warning(np.roots, [p])
    z = np.array([[1.0 + 1j, 1.0 - 1j], [1.0 + 1j, 2.0 + 0j]])  # real, then complex poly
    _loops_with_warning(np.poly, [z])
    u = np.array([[1.0, 3.0, 2.0], [1.0, 3.0, 3.0]])  # remainders [0] and [1]: lengths 1, 1
    check_vmap(lambda u: np.polydiv(u, [1.0, 1.0]), [u])
    u = np.array([[1.0, 2.0, 1.0, 5.0], [1.0, 2.0, 2.0, 5.0]])  # remainders of lengths 1, 2
    with (
        pytest.warns(vmapx.PerformanceWarning),
        pytest.raises(ValueError, match="cannot be stacked"),
    ):
        vmapx.vmap(lambda u: np.polydiv(u, [1.0, 1.0, 0.0]))(u)  # as np.stack of the loop


# -- the batched helpers --------------------------------------------------------------


@pytest.mark.parametrize("side", ["left", "right"])
def test_searchsorted_rows_equals_numpy_per_row(side: str) -> None:
    rng = np.random.default_rng(12)
    a = np.sort(np.round(rng.normal(size=(6, 20)), 1), axis=1)
    a[1, -3:] = np.nan  # NaNs sort last
    v = np.round(rng.normal(size=(6, 15)), 1)
    v[0, :5] = a[0, :5]
    v[1, 0] = np.nan
    want = np.stack([np.searchsorted(a[i], v[i], side=side) for i in range(6)])
    np.testing.assert_array_equal(searchsorted_rows(a, v, side), want)
    np.testing.assert_array_equal(searchsorted_rows(a[:1], v, side)[3],
                                  np.searchsorted(a[0], v[3], side=side))  # fmt: skip


def test_linspace_rows_equals_numpy_per_row() -> None:
    start = np.array([0.0, -1.5, 3.0, 1e-310, 2.0])
    stop = np.array([1.0, 2.5, 3.0, 2e-310, -7.0])
    got = linspace_rows(start, stop, 7, np.float32)
    want = np.stack(
        [np.linspace(a, b, 7, dtype=np.float32) for a, b in zip(start, stop, strict=True)]
    )
    np.testing.assert_array_equal(got, want)


# -- derivatives ----------------------------------------------------------------------


def _one_row_per_missing_rule() -> list:
    rows: dict[str, Any] = {}
    for op in OPS:
        rows.setdefault(DERIVATIVES_WAITING.get(op.name), op)
    return [pytest.param(op, id=f"{prim}:{op.name}") for prim, op in rows.items() if prim]


@pytest.mark.parametrize("op", _one_row_per_missing_rule())
@pytest.mark.xfail(strict=True, reason="a primitive used by the rule has no derivative yet")
def test_waiting_derivatives_still_wait(op: Any) -> None:
    """When this starts passing, take the rows waiting on that primitive off
    `DERIVATIVES_WAITING` (the derivative tests then run them)."""
    args = op.example_args(np.random.default_rng(0))
    vmapx.check_grads(op.fn, args, order=1, modes=("fwd", "rev"), rtol=1e-5, atol=1e-5)


def test_vmap_of_grad_through_cov_and_polyfit() -> None:
    rng = np.random.default_rng(13)
    m, y = rng.normal(size=(4, 3, 6)), rng.normal(size=(4, 9))
    x = np.linspace(-1, 1, 9)
    check_vmap(vmapx.grad(lambda m: np.sum(np.cov(m) ** 2)), [m])
    check_vmap(vmapx.grad(lambda y: np.sum(np.polyfit(x, y, 2) ** 2)), [y], rtol=1e-6)
