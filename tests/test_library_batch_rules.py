"""The one-call batch rules of library adapters (and the adapters' argument binding)
give the loop's answer: batched and unbatched arguments mixed, every metric, options
by position and by keyword, and under `grad` (the lowering's path)."""

from __future__ import annotations

import numpy as np
import optree
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
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # (SciPy 1.18 of float16, loop too)
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


SYSTEM_DTYPES = [np.float64, np.float32, np.complex64, np.int64, np.float16]


@pytest.mark.filterwarnings("ignore::vmapx.PerformanceWarning")  # (float16: the library)
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # (SciPy 1.18 of float16, loop too)
@pytest.mark.parametrize("name", SOLVE_CALLS)
@pytest.mark.parametrize("dtype", SYSTEM_DTYPES)
def test_solve_batch_rules_keep_the_library_dtype(name, dtype):
    if "transposed" in name and np.dtype(dtype).kind == "c":
        return  # (SciPy refuses a complex transposed solve)
    a = (SPD * 4).astype(dtype)
    tol = 1e-9 if dtype in (np.float64, np.int64) else 1e-2
    check_vmap(SOLVE_CALLS[name], (a, (VECS * 4).astype(dtype)), rtol=tol, atol=tol)
    check_vmap(SOLVE_CALLS[name], (a, RIGHT), rtol=tol, atol=tol)  # (mixed dtypes)


@pytest.mark.parametrize("assume_a", ["diagonal", "upper triangular", "gen", "her", None])
def test_solve_of_every_structure_matches_the_loop(assume_a):
    a = np.triu(SPD) if assume_a == "upper triangular" else SPD
    a = a * np.eye(4) if assume_a == "diagonal" else a
    check_vmap(lambda a, b: sl.solve(a, b, assume_a=assume_a), (a, VECS))


@pytest.mark.filterwarnings("ignore::vmapx.PerformanceWarning")  # (no columns: the library)
@pytest.mark.parametrize("name", SOLVE_CALLS)
def test_solve_batch_rules_of_one_by_one_and_no_columns_match_the_loop(name):
    check_vmap(SOLVE_CALLS[name], (SPD[:, :1, :1], VECS[:, :1]))
    check_vmap(SOLVE_CALLS[name], (SPD, RIGHT[:, :, :0]))


@pytest.mark.filterwarnings("ignore::vmapx.PerformanceWarning")
@pytest.mark.parametrize("name", SOLVE_CALLS)
def test_solve_batch_rules_raise_the_loop_errors(name):
    f = SOLVE_CALLS[name]
    singular, bad = SPD.copy(), VECS.copy()
    singular[2] = 0.0
    bad[3, 1] = np.inf
    for a, b in [(singular, VECS), (SPD, bad)]:
        try:
            want = np.stack([f(x, y) for x, y in zip(a, b, strict=True)])
        except (np.linalg.LinAlgError, ValueError) as error:
            with pytest.raises(type(error)) as in_vmap:
                vmapx.vmap(f)(a, b)
            assert str(in_vmap.value) == str(error)
        else:  # (a unit diagonal: no matrix is singular)
            np.testing.assert_allclose(vmapx.vmap(f)(a, b), want, rtol=1e-12)
    for b in (VECS, RIGHT):  # (no examples: the shape and dtype of one)
        empty, one = vmapx.vmap(f)(SPD[:0], b[:0]), f(SPD[0], b[0])
        assert empty.shape == (0, *one.shape) and empty.dtype == one.dtype


@pytest.mark.filterwarnings("ignore::vmapx.PerformanceWarning")
def test_an_ill_conditioned_solve_in_a_batch_gives_the_loop_warning():
    ill = SPD.copy()
    ill[1] = np.diag([1.0, 1.0, 1.0, 1e-18])
    with pytest.raises(sl.LinAlgWarning) as in_loop:
        [sl.solve(a, b) for a, b in zip(ill, VECS, strict=True)]
    with pytest.raises(sl.LinAlgWarning) as in_vmap:
        vmapx.vmap(sl.solve)(ill, VECS)
    assert str(in_vmap.value) == str(in_loop.value)


def test_solve_batch_rules_pass_overwrite_flags_without_writing_the_caller_arrays():
    a, b = SPD.copy(), VECS.copy()
    f = lambda a, b: sl.solve(a, b, overwrite_a=True, overwrite_b=True)  # noqa: E731
    check_vmap(f, (a, b))
    g = lambda a, b: sl.solve_triangular(a, b, overwrite_b=True)  # noqa: E731
    check_vmap(g, (a, b))
    np.testing.assert_array_equal(a, SPD)
    np.testing.assert_array_equal(b, VECS)


@pytest.mark.parametrize("lower", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128, np.complex64])
def test_cholesky_batch_rule_reads_one_triangle_and_the_real_diagonal(lower, dtype):
    a = (HPD if np.dtype(dtype).kind == "c" else SPD).astype(dtype)
    other = np.triu_indices(4, 1) if lower else np.tril_indices(4, -1)
    a[:, other[0], other[1]] = 99.0  # (the triangle SciPy does not read)
    if np.dtype(dtype).kind == "c":
        a[:, np.arange(4), np.arange(4)] += 7j  # (nor the imaginary part of the diagonal)
    tol = 1e-5 if dtype in (np.float32, np.complex64) else 1e-12
    check_vmap(lambda m: sl.cholesky(m, lower=lower), (a,), rtol=tol, atol=tol)


CHO_CALLS = {
    "cho_solve": lambda a, b: sl.cho_solve(sl.cho_factor(a), b),
    "cho_solve lower": lambda a, b: sl.cho_solve(sl.cho_factor(a, lower=True), b),
    "cho_solve of a lower triangle": lambda a, b: sl.cho_solve(sl.cho_factor(np.tril(a), True), b),
    "cho_solve of a list": lambda a, b: sl.cho_solve(list(sl.cho_factor(a)), b),
    "cho_factor": lambda a, b: sl.cho_factor(a)[0],
    "cho_factor lower flag": lambda a, b: (sl.cho_factor(a, lower=True), b),
}


@pytest.mark.parametrize("name", CHO_CALLS)
@pytest.mark.parametrize("right", ["vectors", "matrices"])
@pytest.mark.parametrize("in_axes", [(0, 0), (None, 0), (0, None)])
def test_cho_batch_rules_match_the_loop(name, right, in_axes):
    b = VECS if right == "vectors" else RIGHT
    a = SPD if in_axes[0] == 0 else SPD[0]
    b = b if in_axes[1] == 0 else b[0]
    check_vmap(CHO_CALLS[name], (a, b), in_axes=in_axes, rtol=1e-12)
    check_vmap(CHO_CALLS[name], (HPD if in_axes[0] == 0 else HPD[0], b * (1 + 1j)),
               in_axes=in_axes, rtol=1e-12)  # fmt: skip


@pytest.mark.filterwarnings("ignore::vmapx.PerformanceWarning")  # (float16: the library)
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # (SciPy 1.18 of float16, loop too)
@pytest.mark.parametrize("name", CHO_CALLS)
@pytest.mark.parametrize("dtype", SYSTEM_DTYPES)
def test_cho_batch_rules_keep_the_library_dtype(name, dtype):
    tol = 1e-9 if dtype in (np.float64, np.int64) else 1e-2
    a = np.round(SPD * 4).astype(dtype)
    check_vmap(CHO_CALLS[name], (a, (VECS * 4).astype(dtype)), rtol=tol, atol=tol)


@pytest.mark.filterwarnings("ignore::vmapx.PerformanceWarning")
@pytest.mark.parametrize("name", CHO_CALLS)
def test_cho_batch_rules_raise_the_loop_errors(name):
    f = CHO_CALLS[name]
    not_positive, bad, bad_b = SPD.copy(), SPD.copy(), VECS.copy()
    not_positive[2] = -np.eye(4)
    bad[1, 0, 0], bad_b[3, 1] = np.nan, np.inf
    for a, b in [(not_positive, VECS), (bad, VECS), (SPD, bad_b)]:
        try:
            want = [f(x, y) for x, y in zip(a, b, strict=True)]
        except (np.linalg.LinAlgError, ValueError) as error:
            with pytest.raises(type(error)) as in_vmap:
                vmapx.vmap(f)(a, b)
            assert str(in_vmap.value) == str(error)
        else:  # (cho_factor does not read b)
            assert "cho_factor" in name
            check_vmap(f, (a, b), rtol=1e-12)
            del want
    for b in (VECS, RIGHT):  # (no examples: the shape and dtype of one)
        empty, one = vmapx.vmap(f)(SPD[:0], b[:0]), f(SPD[0], b[0])
        for e, o in zip(optree.tree_leaves(empty), optree.tree_leaves(one), strict=True):
            assert np.shape(e) == (0, *np.shape(o)) and np.result_type(e) == np.result_type(o)


def test_cho_solve_under_grad_takes_the_lowering():
    loss = lambda a, b: np.sum(CHO_CALLS["cho_solve"](a @ a.T + 4 * np.eye(4), b) ** 2)  # noqa: E731
    vmapx.check_grads(loss, (_M[0], VECS[0]), order=1)
    check_vmap(vmapx.grad(loss, argnums=(0, 1)), (_M, VECS))


sc = pytest.importorskip("scipy.special")
MATS = RNG.normal(size=(5, 3, 4))


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("axis", [None, 0, 1, -1, -2, (0, 1), (-1,)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int8, np.int64])
def test_softmax_batch_rules_match_the_loop(name, axis, dtype):
    f = getattr(sc, name)
    x = (MATS * 3).astype(dtype)
    tol = 1e-5 if np.result_type(f(x[0], axis=axis)).itemsize < 8 else 1e-12
    check_vmap(lambda v: f(v, axis=axis), (x,), rtol=tol, atol=tol)
    if axis in (0, -1):  # (vectors, the axis by position)
        check_vmap(lambda v: f(v, axis), (x[:, 0],), rtol=tol, atol=tol)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_batch_rules_of_scalars_and_no_examples_match_the_loop(name):
    f = getattr(sc, name)
    check_vmap(f, (MATS[:, 0, 0],))
    empty, one = vmapx.vmap(f)(MATS[:0]), f(MATS[0])
    assert empty.shape == (0, *one.shape) and empty.dtype == one.dtype


@pytest.mark.filterwarnings("ignore::vmapx.PerformanceWarning")
@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # (SciPy's own, on inf - inf)
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_batch_rules_on_infinities_and_bad_axes_give_the_loop_answer(name):
    f = getattr(sc, name)
    x = MATS.copy()
    x[1, 0, 2], x[2] = np.inf, -np.inf
    x[3, 1] = np.nan
    want = np.stack([f(v, axis=-1) for v in x])
    np.testing.assert_array_equal(vmapx.vmap(lambda v: f(v, axis=-1))(x), want)
    assert np.isnan(x[3, 1]).all() and np.isinf(x[2]).all()  # (the caller's, unchanged)
    for axis in (2, -3, (0, 2)):
        with pytest.raises(np.exceptions.AxisError):
            f(x[0], axis=axis)
        with pytest.raises(np.exceptions.AxisError):
            vmapx.vmap(lambda v, axis=axis: f(v, axis=axis))(x)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_batch_rules_under_grad_take_the_lowering(name):
    f = getattr(sc, name)
    loss = lambda v: np.sum(f(v, axis=-1)[..., 1] ** 2)  # noqa: E731
    vmapx.check_grads(loss, (MATS[0],), order=1)
    check_vmap(vmapx.grad(loss), (MATS,))


NORM_CALLS = {
    "norm": sl.norm,
    "norm unchecked": lambda a: sl.norm(a, check_finite=False),
    "norm ord 1": lambda a: sl.norm(a, 1),
    "norm axis": lambda a: sl.norm(a, axis=-1),
    "norm keepdims": lambda a: sl.norm(a, keepdims=True),
}


@pytest.mark.parametrize("name", NORM_CALLS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128, np.complex64, np.int64])
@pytest.mark.parametrize("shape", ["vectors", "matrices"])
def test_norm_batch_rule_matches_the_loop(name, dtype, shape):
    x = (HPD if np.dtype(dtype).kind == "c" else SPD * 3).astype(dtype)
    x = x[:, 0] if shape == "vectors" else x
    tol = 1e-5 if dtype in (np.float32, np.complex64) else 1e-12
    check_vmap(NORM_CALLS[name], (x,), rtol=tol, atol=tol)


@pytest.mark.filterwarnings("ignore::vmapx.PerformanceWarning")
def test_norm_batch_rule_on_nan_and_no_examples_gives_the_loop_answer():
    bad = SPD.copy()
    bad[2, 1, 1] = np.nan
    with pytest.raises(ValueError, match="infs or NaNs") as in_loop:
        [sl.norm(a) for a in bad]
    with pytest.raises(ValueError, match="infs or NaNs") as in_vmap:
        vmapx.vmap(sl.norm)(bad)
    assert str(in_vmap.value) == str(in_loop.value)
    check_vmap(NORM_CALLS["norm unchecked"], (bad,))
    empty, one = vmapx.vmap(sl.norm)(SPD[:0]), sl.norm(SPD[0])
    assert empty.shape == (0,) and empty.dtype == np.result_type(one)


def test_norm_batch_rule_under_grad_takes_the_lowering():
    loss = lambda a: sl.norm(a @ a.T) ** 2  # noqa: E731
    vmapx.check_grads(loss, (_M[0],), order=1)
    check_vmap(vmapx.grad(loss), (_M,))


P = pytest.importorskip("numpy.polynomial.polynomial")
COEFS = RNG.normal(size=(5, 4)) * 3


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16, np.complex64, np.int8,
                                   np.int64, np.bool_])  # fmt: skip
@pytest.mark.parametrize("options", [{}, {"m": 0}, {"m": 2}, {"m": 4}, {"m": 7},
                                     {"m": 2, "scl": 0.5}, {"scl": 3}, {"axis": -1},
                                     {"m": np.int64(2)}])  # fmt: skip
def test_polyder_batch_rule_matches_the_loop(dtype, options):
    c = (COEFS > 0) if dtype is np.bool_ else COEFS.astype(dtype)
    check_vmap(lambda c: P.polyder(c, **options), (c,), rtol=0, atol=0)


def test_polyder_batch_rule_of_no_examples_and_under_grad():
    empty, one = vmapx.vmap(P.polyder)(COEFS[:0]), P.polyder(COEFS[0])
    assert empty.shape == (0, *one.shape) and empty.dtype == one.dtype
    loss = lambda c: np.sum(P.polyder(c, 2) ** 2)  # noqa: E731
    vmapx.check_grads(loss, (COEFS[0],), order=1)
    check_vmap(vmapx.grad(loss), (COEFS,))


def test_cho_solve_takes_a_lower_flag_given_as_a_0d_array():
    """SciPy 1.18's `cho_factor` gives its `lower` flag as a 0-d boolean array (earlier
    versions a bool): the factor stays one batched call either way."""
    c, _ = sl.cho_factor(SPD[0], lower=True)
    for flag in (True, np.array(True)):
        check_vmap(lambda b, flag=flag: sl.cho_solve((c, flag), b), (VEC,))
