"""Defects found by feeding library functions the inputs a new user has: NaN and
infinity, complex, `float32`. vmap must equal the loop: the same values, shape and dtype,
and the same error where the loop raises one."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import vmapx
from harness import check_vmap

sl = pytest.importorskip("scipy.linalg")
sd = pytest.importorskip("scipy.spatial.distance")

RNG = np.random.default_rng(11)
COMPLEX_WARNING = getattr(np, "exceptions", np).ComplexWarning  # (NumPy 1.26: np's own)


def _loop_raises(f, *args) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # (the loop's 0/0)
            for example in zip(*args, strict=True):
                f(*example)
    except ValueError:
        return True
    return False


def _assert_vmap_raises_as_loop(f, *args) -> None:
    assert _loop_raises(f, *args)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", vmapx.PerformanceWarning)
        with pytest.raises(ValueError, match="infs or NaNs"):
            vmapx.vmap(f)(*args)


LINALG = {
    "solve": lambda a: sl.solve(a, a[0]),
    "det": sl.det,
    "inv": sl.inv,
    "cholesky": sl.cholesky,
    "cho_factor": lambda a: sl.cho_factor(a)[0],
    "cho_solve": lambda a: sl.cho_solve((a, False), a[0]),
    "solve_triangular": lambda a: sl.solve_triangular(a, a[0]),
    "eigh": lambda a: sl.eigh(a)[0],
    "eigvalsh": sl.eigvalsh,
    "svd": lambda a: sl.svd(a)[1],
    "svdvals": sl.svdvals,
    "qr": lambda a: sl.qr(a)[1],
    "norm": sl.norm,
    "pinv": sl.pinv,
}


@pytest.mark.parametrize("name", sorted(LINALG))
@pytest.mark.parametrize("bad", ["one example", "every example"])
def test_scipy_linalg_raises_for_a_nan_as_the_loop_does(name, bad):
    """SciPy's `check_finite=True` raises ValueError for a NaN or an infinity; the
    adapters once returned NaN for the batch instead."""
    a = np.stack([2.0 * np.eye(3) + 0.1 * RNG.normal(size=(3, 3)) for _ in range(3)])
    a = a @ np.swapaxes(a, 1, 2)
    if bad == "one example":
        a[1, 0, 0] = np.nan
    else:
        a[:, 2, 2] = np.inf
    _assert_vmap_raises_as_loop(LINALG[name], a)


@pytest.mark.parametrize("name", sorted(LINALG))
def test_scipy_linalg_check_finite_false_stays_batched(name):
    a = np.stack([2.0 * np.eye(3) + 0.1 * RNG.normal(size=(3, 3)) for _ in range(3)])
    a = a @ np.swapaxes(a, 1, 2)
    check_vmap(LINALG[name], (a,))


@pytest.mark.parametrize("name", sorted(LINALG))
@pytest.mark.parametrize("n", [0, 3])
@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint16, np.float16, np.int64])
def test_scipy_linalg_of_small_dtypes_and_empty_matrices_is_the_libraries(name, n, dtype):
    """SciPy's LAPACK wrappers take 8- and 16-bit integers and float16 as float32 (and
    booleans by the function; NumPy's linalg all as float64), and give some empty
    results their own dtypes: those go to SciPy."""
    eye = np.broadcast_to(np.eye(n, dtype=dtype) * np.ones((), dtype), (3, n, n))
    rows = (RNG.normal(size=(3, n, n)) > 0).astype(dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", vmapx.PerformanceWarning)
        warnings.simplefilter("ignore", sl.LinAlgWarning)  # (SciPy's, in the loop too)
        warnings.simplefilter("ignore", DeprecationWarning)  # (SciPy 1.18: these dtypes)
        for a in (eye, eye + rows * np.swapaxes(rows, 1, 2)):
            try:
                for example in a:
                    LINALG[name](example)
            except (ValueError, IndexError):  # (a singular matrix; `a[0]` of no rows)
                continue
            check_vmap(LINALG[name], (a,), rtol=1e-3, atol=1e-3)


METRICS = ("euclidean", "sqeuclidean", "cityblock", "chebyshev", "cosine", "correlation",
           "braycurtis", "canberra", "minkowski")  # fmt: skip


def _with_nans() -> tuple[np.ndarray, np.ndarray]:
    u, v = RNG.normal(size=(6, 4)), RNG.normal(size=(6, 4))
    u[0, 0] = np.nan  # the first difference: Python's `max` gives NaN
    u[1, 2] = np.nan  # another: Python's `max` passes over it
    u[2, :] = np.nan
    v[3, 1] = np.inf
    u[4, 0] = v[4, 0] = 0.0
    return u, v


@pytest.mark.parametrize("metric", METRICS)
def test_distance_with_nan_is_the_loops(metric):
    """SciPy's `chebyshev` is Python's `max` (order-dependent with NaN), `canberra` a
    `nansum`, and `euclidean`/`minkowski` raise for NaN: each now as SciPy's."""
    f = getattr(sd, metric)
    u, v = _with_nans()
    if _loop_raises(f, u, v):
        _assert_vmap_raises_as_loop(f, u, v)
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # (the loop's 0/0)
            check_vmap(f, (u, v))


@pytest.mark.parametrize("metric", ["chebyshev", "canberra", "cityblock", "euclidean"])
def test_cdist_and_pdist_with_nan_are_the_loops(metric):
    """SciPy's C `chebyshev` passes over NaN (0 when every difference is NaN)."""
    p = RNG.normal(size=(3, 5, 2))
    p[0, 1, 0] = np.nan
    p[1] = np.nan
    check_vmap(lambda x: sd.cdist(x, x, metric), (p,))
    check_vmap(lambda x: sd.pdist(x, metric), (p,))


@pytest.mark.parametrize("metric", METRICS)
def test_distance_of_complex_vectors_is_the_loops(metric):
    """SciPy casts `v` (not `u`) of `braycurtis` and `canberra` to real, and the
    adapters took both as complex: complex vectors go to the library."""
    u = RNG.normal(size=(4, 5)) + 1j * RNG.normal(size=(4, 5))
    v = RNG.normal(size=(4, 5)) + 1j * RNG.normal(size=(4, 5))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", COMPLEX_WARNING)
        warnings.simplefilter("ignore", vmapx.PerformanceWarning)
        f = getattr(sd, metric)
        try:
            [f(a, b) for a, b in zip(u, v, strict=True)]
        except TypeError:  # (SciPy's `cosine` and `correlation` of complex vectors)
            with pytest.raises(TypeError):
                vmapx.vmap(f)(u, v)
            return
        check_vmap(f, (u, v))


@pytest.mark.parametrize("metric", ["chebyshev", "canberra"])
def test_distance_derivatives_match_finite_differences(metric):
    u, v = RNG.normal(size=5), RNG.normal(size=5)
    vmapx.check_grads(lambda a: getattr(sd, metric)(a, v), (u,), order=1)


si = pytest.importorskip("scipy.integrate")
ss = pytest.importorskip("scipy.signal")


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.complex64, np.bool_])
@pytest.mark.parametrize(
    "f",
    [
        lambda y: si.trapezoid(y),
        lambda y: si.trapezoid(y, np.linspace(0.0, 1.0, 6)),
        lambda y: si.trapezoid(y, dx=np.float32(0.5)),
        lambda y: si.cumulative_trapezoid(y),
        lambda y: si.cumulative_trapezoid(y, np.linspace(0.0, 1.0, 6), initial=0),
    ],
)
def test_trapezoid_keeps_the_libraries_dtype(dtype, f):
    """SciPy integrates `float32` samples in `float32`; the adapter gave `float64`."""
    y = (3 * RNG.normal(size=(3, 6))).astype(dtype)
    check_vmap(f, (y,), rtol=1e-5, atol=1e-5)


_CONVOLUTIONS = [(name, method) for name in ("convolve", "correlate")
                 for method in ("auto", "direct", "fft")] + [("fftconvolve", None)]  # fmt: skip


@pytest.mark.parametrize(("name", "method"), _CONVOLUTIONS)
@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("in_axes", [(0, None), (None, 0), (0, 0)])
def test_convolution_with_nan_is_the_loops(name, method, mode, in_axes):
    """`convolve(method="auto")` of short signals is SciPy's direct sum, which keeps a
    NaN or an infinity to the outputs whose window holds it; the batch went through the
    FFT, which spreads it over the whole signal."""
    x, h = RNG.normal(size=(4, 64)), RNG.normal(size=(4, 5))
    x[0, 3], x[2, -1], x[1, 0], h[1, 0], h[2, 1] = np.nan, np.inf, np.inf, 0.0, np.nan
    args = (x if in_axes[0] == 0 else x[3], h if in_axes[1] == 0 else h[0])
    kw = {} if method is None else {"method": method}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # (inf - inf in the FFT)
        check_vmap(lambda s, k: getattr(ss, name)(s, k, mode=mode, **kw), args, in_axes)


st = pytest.importorskip("scipy.stats")


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.longdouble, np.int8, np.complex128])
@pytest.mark.parametrize("method", ["logpdf", "pdf", "cdf", "logsf"])
@pytest.mark.parametrize("where", ["x", "loc", "scale"])
def test_distribution_methods_keep_the_libraries_dtype(dtype, method, where):
    """SciPy's result has the dtype of `x` promoted to float64, and it takes `loc` and
    `scale` given as Python numbers as float64 arrays; the adapter followed NumPy's
    promotion of all three (a `float128` `loc` gave `float128`; a `float16` `scale` with
    Python numbers computed in `float16`) and dropped the imaginary part of complex
    values."""
    f = getattr(st.cauchy, method)
    g = {"x": lambda v: f(v, 0.1, 2.0), "loc": lambda v: f(0.3, v, 2.0),
         "scale": lambda v: f(0.3, 0.1, v)}[where]  # fmt: skip
    v = np.abs(RNG.normal(size=(3, 4))).astype(dtype) + 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", COMPLEX_WARNING)  # (SciPy casting to real)
        warnings.simplefilter("ignore", vmapx.PerformanceWarning)
        try:
            for example in v:
                g(example)
        except TypeError:  # (SciPy's own formulas have no loop for some dtypes)
            with pytest.raises(TypeError):
                vmapx.vmap(g)(v)
            return
        check_vmap(g, (v,), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("p", [1, 2, 3])
def test_minkowski_of_float32_keeps_the_libraries_dtype(p):
    """SciPy's `minkowski` of `float32` vectors is `float32` for orders other than 2
    (which go through `scipy.linalg.norm`); the adapter asked SciPy for order 2 only."""
    u, v = (RNG.normal(size=(3, 4)).astype(np.float32) for _ in range(2))
    check_vmap(lambda a, b: sd.minkowski(a, b, p), (u, v), rtol=1e-5, atol=1e-6)


P = pytest.importorskip("numpy.polynomial.polynomial")


def test_polyder_of_large_integers_does_not_overflow():
    """NumPy's `polyder` makes integer coefficients floats first; the adapter multiplied
    the integers (which wrapped around) and made floats after."""
    c = np.array([[1, -(2**62), 3, 4], [2**62, 5, 6, 7]], dtype=np.int64)
    check_vmap(P.polyder, (c,))
    check_vmap(lambda k: P.polyder(k, 2, scl=3), (c,))


@pytest.mark.parametrize(
    "f",
    [
        lambda s: ss.welch(s, nperseg=8),
        lambda s: ss.fftconvolve(s, np.ones(40)),
        lambda s: ss.fftconvolve(s, s[:5], mode="same"),
        lambda s: ss.lfilter([1, 0.5], [1, -0.3], s),
    ],
)
def test_an_empty_batch_of_a_library_call_has_the_examples_shapes(f):
    """A library called on the whole batch with no examples gave shapes that are not
    one example's (`fftconvolve` a 1-D empty array, `welch` a 3-D one)."""
    from harness import check_zero_batch

    check_zero_batch(f, (RNG.normal(size=(3, 32)),), 0)


@pytest.mark.parametrize("dtype", [np.float32, np.complex64, np.float64])
@pytest.mark.parametrize(
    "options", [{}, {"ord": 1}, {"ord": 2}, {"axis": 0}, {"keepdims": True}, {"ord": -1}]
)
@pytest.mark.parametrize("shape", [(3, 4), (3, 2, 3)])
def test_scipy_linalg_norm_keeps_the_libraries_dtype(dtype, options, shape):
    """SciPy's `norm` of a float32 vector is BLAS's Python float (float64); the adapter
    gave NumPy's float32."""
    x = RNG.normal(size=shape) * (1 + 0.5j if np.dtype(dtype).kind == "c" else 1)
    x = x.astype(dtype)
    try:
        sl.norm(x[0], **options)
    except ValueError:  # (an order the library has no norm of, for this shape)
        return
    check_vmap(lambda v: sl.norm(v, **options), (x,), rtol=1e-5, atol=1e-5)


sc = pytest.importorskip("scipy.special")


@pytest.mark.parametrize("axis", [None, 0])
def test_log_softmax_of_small_integers_is_the_libraries(axis):
    """SciPy shifts integers as integers, so int8 gives float16 (NumPy's exp of int8);
    the adapter shifted by a float64 and gave float64."""
    x = (3 * RNG.normal(size=(3, 4, 2))).astype(np.int8)
    check_vmap(lambda v: sc.log_softmax(v, axis=axis), (x,), rtol=1e-3, atol=1e-3)
    check_vmap(lambda v: sc.log_softmax(v, axis=axis), (x.astype(np.int64),))
