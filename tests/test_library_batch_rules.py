"""The one-call batch rules of library adapters (and the adapters' argument binding)
give the loop's answer: batched and unbatched arguments mixed, every metric, options
by position and by keyword, and under `grad` (the lowering's path)."""

from __future__ import annotations

import numpy as np
import pytest

import vmapx
from harness import check_vmap

sd = pytest.importorskip("scipy.spatial.distance")
pytest.importorskip("vmapx.libraries.scipy_spatial")

RNG = np.random.default_rng(3)
PTS = RNG.normal(size=(5, 4, 3))
OTHER = RNG.normal(size=(6, 3))
VEC = RNG.normal(size=(5, 4))
METRICS = ("euclidean", "sqeuclidean", "cityblock", "chebyshev", "cosine", "correlation",
           "braycurtis", "canberra", "minkowski")  # fmt: skip


@pytest.mark.parametrize("metric", METRICS)
@pytest.mark.parametrize("in_axes", [(0, 0), (0, None), (None, 0)])
def test_cdist_batch_rule_matches_the_loop(metric, in_axes):
    XB = PTS[::-1] if in_axes == (0, 0) else OTHER if in_axes[1] is None else PTS
    XA = PTS if in_axes[0] == 0 else OTHER
    check_vmap(lambda a, b: sd.cdist(a, b, metric), (XA, XB), in_axes=in_axes)


@pytest.mark.parametrize("metric", METRICS)
def test_pdist_and_squareform_batch_rules_match_the_loop(metric):
    check_vmap(lambda x: sd.pdist(x, metric), (PTS,))
    check_vmap(lambda x: sd.squareform(sd.pdist(x, metric=metric)), (PTS,))


def test_squareform_of_no_distances_matches_the_loop():
    check_vmap(sd.squareform, (np.zeros((3, 0)),))


@pytest.mark.parametrize("name", METRICS)
@pytest.mark.parametrize("in_axes", [(0, 0), (0, None), (None, 0)])
def test_vector_metric_batch_rules_match_the_loop(name, in_axes):
    f = getattr(sd, name)
    u = VEC if in_axes[0] == 0 else VEC[0]
    v = VEC[::-1] if in_axes[1] == 0 else VEC[1]
    check_vmap(f, (u, v), in_axes=in_axes)


@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_vector_metrics_keep_the_library_dtype(dtype):
    u, v = (RNG.integers(-3, 4, (5, 4)).astype(dtype) for _ in range(2))
    for name in ("euclidean", "cityblock", "cosine"):
        check_vmap(getattr(sd, name), (u, v), rtol=1e-5)


@pytest.mark.filterwarnings("ignore::vmapx.PerformanceWarning")
@pytest.mark.parametrize("name", METRICS)
def test_distances_of_small_floats_are_computed_in_the_library_precision(name):
    """SciPy computes `cdist`, `pdist`, `braycurtis` and `canberra` in float64 whatever
    the floats given (the float16 or float32 sums differ by more than a rounding of
    the result), and `correlation` and `cosine` of two dtypes square each in its own."""
    half, single = PTS.astype(np.float16), PTS.astype(np.float32)
    for points in (half, single):
        check_vmap(lambda x: sd.pdist(x, name), (points,), rtol=1e-12, atol=0)
        check_vmap(lambda a, b: sd.cdist(a, b, name), (points, points[::-1]), rtol=1e-12, atol=0)
    f = getattr(sd, name)
    check_vmap(f, (VEC.astype(np.float16), VEC[::-1].astype(np.float16)), rtol=1e-12, atol=0)
    check_vmap(f, (VEC.astype(np.float32), VEC[::-1]), rtol=1e-12, atol=0)


def test_minkowski_order_by_position_and_keyword():
    check_vmap(lambda u, v: sd.minkowski(u, v, 3), (VEC, VEC[::-1]))
    check_vmap(lambda u, v: sd.minkowski(u, v, p=1.5), (VEC, VEC[::-1]))
    check_vmap(lambda u, v: sd.cdist(u, v, "minkowski", p=3), (PTS, PTS[::-1]))


@pytest.mark.filterwarnings("ignore::vmapx.PerformanceWarning")
def test_options_the_batch_rule_leaves_to_the_library_give_the_loop_answer():
    w = np.abs(VEC[0]) + 0.5
    check_vmap(lambda u, v: sd.euclidean(u, v, w), (VEC, VEC[::-1]))
    check_vmap(lambda x: sd.cdist(x, x, lambda a, b: np.abs(a - b).sum()), (PTS,))
    check_vmap(lambda x: sd.pdist(x, "hamming"), (PTS > 0,))


def test_an_argument_the_lowering_does_not_take_goes_to_the_library():
    with pytest.raises(TypeError):
        vmapx.vmap(lambda u, v: sd.euclidean(u, v, nonsense=1))(VEC, VEC)


@pytest.mark.parametrize("name", ["euclidean", "cosine"])
def test_vector_metrics_under_grad_take_the_lowering(name):
    f = getattr(sd, name)
    loss = lambda u: f(u, VEC[0] + 3.0) ** 2  # noqa: E731
    vmapx.check_grads(loss, (VEC[1],), order=1)
    check_vmap(vmapx.grad(loss), (VEC,))
    check_vmap(lambda u: vmapx.grad(lambda x: sd.cdist(x, OTHER).sum())(u), (PTS,))


sf = pytest.importorskip("scipy.fft")
nd = pytest.importorskip("scipy.ndimage")
SIG = RNG.normal(size=(5, 3, 16))
IMG = RNG.normal(size=(5, 7, 8))

FFT_CALLS = {
    "fft": lambda x: sf.fft(x),
    "ifft axis 0": lambda x: sf.ifft(x, axis=0),
    "rfft n": lambda x: sf.rfft(x, 10, norm="ortho"),
    "irfft": lambda x: sf.irfft(sf.rfft(x), axis=-1),
    "dct type 3": lambda x: sf.dct(x, 3, axis=1),
    "idct": sf.idct,
    "dst ortho": lambda x: sf.dst(x, norm="ortho"),
    "idst": lambda x: sf.idst(x, type=1),
}


@pytest.mark.parametrize("name", FFT_CALLS)
def test_scipy_fft_batch_rules_match_the_loop(name):
    check_vmap(FFT_CALLS[name], (SIG,))
    check_vmap(FFT_CALLS[name], (SIG.astype(np.float32),), rtol=1e-5, atol=1e-5)


FILTER_CALLS = {
    "gaussian_filter": lambda x: nd.gaussian_filter(x, 1.0),
    "gaussian_filter sigmas, mode": lambda x: nd.gaussian_filter(x, (0.5, 1.5), mode="nearest"),
    "gaussian_filter axes": lambda x: nd.gaussian_filter(x, 1.0, axes=(-1,)),
    "uniform_filter": lambda x: nd.uniform_filter(x, size=3),
    "median_filter": lambda x: nd.median_filter(x, size=3),
    "median_filter footprint": lambda x: nd.median_filter(x, footprint=np.eye(3, dtype=bool)),
    "maximum_filter axes 0": lambda x: nd.maximum_filter(x, size=2, axes=0),
    "minimum_filter": lambda x: nd.minimum_filter(x, size=(2, 3), mode="constant", cval=1.0),
    "laplace": nd.laplace,
    "gaussian_laplace": lambda x: nd.gaussian_laplace(x, 1.0),
    # (its derivatives smooth along every axis of the input, the batch's too: sigma 0 there)
    "gaussian_gradient_magnitude": lambda x: nd.gaussian_gradient_magnitude(x, 1.0),
    "gaussian_gradient_magnitude sigmas": lambda x: nd.gaussian_gradient_magnitude(x, [0.5, 2]),
    "gaussian_gradient_magnitude axes": lambda x: nd.gaussian_gradient_magnitude(x, 1, axes=0),
}


@pytest.mark.parametrize("name", FILTER_CALLS)
def test_scipy_ndimage_batch_rules_match_the_loop(name):
    check_vmap(FILTER_CALLS[name], (IMG,))


@pytest.mark.filterwarnings("ignore::vmapx.PerformanceWarning")
def test_calls_the_axis_rules_leave_to_the_library_give_the_loop_answer():
    check_vmap(lambda x: nd.sobel(x), (IMG,))  # (no `axes`: smooths every axis)
    check_vmap(lambda x, w: nd.gaussian_filter(x, 1.0) * w, (IMG, IMG))
    out = np.zeros((7, 8))
    check_vmap(lambda x: nd.uniform_filter(x, 3, output=out.copy()) is None, (IMG,))
    with pytest.raises(Exception):  # noqa: B017 (the library's own error, per example)
        vmapx.vmap(lambda x: sf.fft(x, axis=2))(IMG)


def test_a_library_calling_its_own_adapted_function_with_plain_arrays():
    ss = pytest.importorskip("scipy.signal")
    check_vmap(lambda s: np.abs(ss.hilbert(s)), (SIG[:, 0],))
    check_vmap(lambda s: ss.resample(s, 8), (SIG[:, 0],))


@pytest.mark.filterwarnings("ignore::vmapx.PerformanceWarning")  # (dct: the inner per example)
def test_nested_vmaps_of_adapted_functions_match_the_loop():
    pts = RNG.normal(size=(3, 4, 5, 2))
    got = vmapx.vmap(vmapx.vmap(lambda x: sd.cdist(x, x, "cityblock")))(pts)
    want = np.stack([np.stack([sd.cdist(x, x, "cityblock") for x in row]) for row in pts])
    np.testing.assert_allclose(got, want, rtol=1e-12)
    sig = RNG.normal(size=(3, 4, 8))
    got = vmapx.vmap(vmapx.vmap(sf.dct), in_axes=1)(sig)
    want = np.stack([np.stack([sf.dct(s) for s in sig[:, j]]) for j in range(4)])
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_grad_of_a_vmap_over_an_adapted_function_takes_the_lowering():
    loss = lambda x: np.sum(vmapx.vmap(lambda p: sd.cdist(p, OTHER))(x) ** 2)  # noqa: E731
    vmapx.check_grads(loss, (PTS,), order=1)


sl = pytest.importorskip("scipy.linalg")
_M = RNG.normal(size=(5, 4, 4))
SPD = _M @ np.swapaxes(_M, 1, 2) + 4 * np.eye(4)
HPD = SPD + 1j * (_M - np.swapaxes(_M, 1, 2))

MATRIX_CALLS = {
    "inv": sl.inv,
    "inv pos upper": lambda a: sl.inv(np.triu(a), assume_a="pos"),
    "inv sym lower": lambda a: sl.inv(np.tril(a), assume_a="sym", lower=True),
    "det": sl.det,
    "cholesky": sl.cholesky,
    "cholesky lower": lambda a: sl.cholesky(a, lower=True),
    "cholesky positional": lambda a: sl.cholesky(np.tril(a), True),
    "eigvalsh": sl.eigvalsh,
    "eigvalsh upper": lambda a: sl.eigvalsh(np.triu(a), lower=False),
}


@pytest.mark.parametrize("name", MATRIX_CALLS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
def test_linalg_batch_rules_match_the_loop(name, dtype):
    a = (HPD if dtype is np.complex128 else SPD).astype(dtype)
    tol = 1e-4 if dtype is np.float32 else 1e-9
    check_vmap(MATRIX_CALLS[name], (a,), rtol=tol, atol=tol)


def test_linalg_batch_rules_with_an_unbatched_matrix_and_a_singular_one():
    check_vmap(lambda a, b: sl.det(a) * sl.inv(b), (SPD, SPD[0]), in_axes=(0, None))
    singular = SPD.copy()
    singular[2] = 0.0
    check_vmap(sl.det, (singular,))


@pytest.mark.filterwarnings("ignore::vmapx.PerformanceWarning")
def test_a_matrix_the_batch_rule_cannot_factor_gives_the_loop_error():
    not_positive = SPD.copy()
    not_positive[1] = -np.eye(4)
    with pytest.raises(np.linalg.LinAlgError):
        [sl.cholesky(a) for a in not_positive]
    with pytest.raises(np.linalg.LinAlgError):
        vmapx.vmap(sl.cholesky)(not_positive)


@pytest.mark.parametrize("name", ["det", "cholesky", "eigvalsh", "inv"])
def test_linalg_batch_rules_under_grad_take_the_lowering(name):
    f = getattr(sl, name)
    loss = lambda a: np.sum(np.abs(f(a @ a.T + 4 * np.eye(4))) ** 2)  # noqa: E731
    vmapx.check_grads(loss, (_M[0],), order=1)
    check_vmap(vmapx.grad(loss), (_M,))


VECS = RNG.normal(size=(5, 4))
RIGHT = RNG.normal(size=(5, 4, 2))
SOLVE_CALLS = {
    "solve": sl.solve,
    "solve pos": lambda a, b: sl.solve(np.triu(a), b, assume_a="pos"),
    "solve sym lower transposed": lambda a, b: sl.solve(
        a, b, True, assume_a="sym", transposed=True
    ),
    "solve_triangular": sl.solve_triangular,
    "solve_triangular lower trans": lambda a, b: sl.solve_triangular(a, b, 1, lower=True),
    "solve_triangular unit conj": lambda a, b: sl.solve_triangular(a, b, "C", unit_diagonal=True),
}


@pytest.mark.parametrize("name", SOLVE_CALLS)
@pytest.mark.parametrize("right", ["vectors", "matrices"])
@pytest.mark.parametrize("in_axes", [(0, 0), (None, 0), (0, None)])
def test_solve_batch_rules_match_the_loop(name, right, in_axes):
    b = VECS if right == "vectors" else RIGHT
    a = SPD if in_axes[0] == 0 else SPD[0]
    b = b if in_axes[1] == 0 else b[0]
    check_vmap(SOLVE_CALLS[name], (a, b), in_axes=in_axes)
    if "transposed" not in name:  # (SciPy refuses a complex transposed solve)
        check_vmap(SOLVE_CALLS[name], (a.astype(complex), b * (1 + 1j)), in_axes=in_axes)


@pytest.mark.parametrize("name", ["solve", "solve_triangular"])
def test_solve_batch_rules_under_grad_take_the_lowering(name):
    f = getattr(sl, name)
    loss = lambda b: np.sum(f(SPD[0], b) ** 2)  # noqa: E731
    vmapx.check_grads(loss, (VECS[0],), order=1)
    check_vmap(vmapx.grad(loss), (VECS,))


@pytest.mark.filterwarnings("ignore::vmapx.PerformanceWarning")
@pytest.mark.parametrize("name", ["inv", "det", "cholesky", "eigvalsh"])
def test_linalg_batch_rules_check_finite_as_the_library(name):
    f = getattr(sl, name)
    bad = SPD.copy()
    bad[3, 0, 0] = np.nan
    with pytest.raises(ValueError, match="infs or NaNs"):
        [f(a) for a in bad]
    with pytest.raises(ValueError, match="infs or NaNs"):
        vmapx.vmap(f)(bad)
    check_vmap(f, (SPD.astype(np.int64),))  # (an integer stack: the library's dtypes)
    empty = vmapx.vmap(f)(np.zeros((0, 4, 4)))
    one = f(SPD[0])
    assert empty.shape == (0, *np.shape(one)) and empty.dtype == np.result_type(one)


@pytest.mark.filterwarnings("ignore::vmapx.PerformanceWarning")
@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # (SciPy's own, on NaN and inf)
@pytest.mark.parametrize("name", METRICS)
def test_vector_metric_batch_rules_on_nan_and_infinity_give_the_loop_answer(name):
    f = getattr(sd, name)
    u, v = VEC.copy(), VEC[::-1].copy()
    u[1, 0], u[2, 3], v[3, 1] = np.nan, np.inf, -np.inf
    try:
        want = np.stack([f(a, b) for a, b in zip(u, v, strict=True)])
    except ValueError:
        with pytest.raises(ValueError):
            vmapx.vmap(f)(u, v)
        return
    np.testing.assert_allclose(vmapx.vmap(f)(u, v), want, rtol=1e-12, equal_nan=True)


@pytest.mark.filterwarnings("ignore::vmapx.PerformanceWarning")
@pytest.mark.filterwarnings("ignore::scipy.linalg.LinAlgWarning")  # (the loop's, as SciPy's)
@pytest.mark.parametrize("name", ["inv", "det", "cholesky", "eigvalsh"])
def test_unchecked_infinities_give_the_library_answer(name):
    """With `check_finite=False` a NaN or an infinity goes to LAPACK as SciPy calls it
    (NumPy's inverse of a matrix with an infinity is another array than SciPy's)."""
    f = lambda a: getattr(sl, name)(a, check_finite=False)  # noqa: E731
    bad = SPD.copy()
    bad[2, 1, 1] = np.inf
    with np.errstate(all="ignore"):
        got = vmapx.vmap(f)(bad)
        expected = np.stack([f(a) for a in bad])
    assert got.shape == expected.shape and got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


@pytest.mark.filterwarnings("ignore::vmapx.PerformanceWarning")
@pytest.mark.filterwarnings("ignore::scipy.linalg.LinAlgWarning")
@pytest.mark.parametrize("name", ["solve", "solve_triangular"])
def test_unchecked_infinities_in_a_solve_give_the_library_answer(name):
    f = lambda a, b: getattr(sl, name)(a, b, check_finite=False)  # noqa: E731
    bad = SPD.copy()
    bad[1, 0, 0] = np.inf
    with np.errstate(all="ignore"):
        got = vmapx.vmap(f)(bad, VECS)
        expected = np.stack([f(a, b) for a, b in zip(bad, VECS, strict=True)])
    assert got.shape == expected.shape and got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)
