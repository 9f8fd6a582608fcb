"""Defects of the `scipy.spatial.distance` adapters, each with the case that showed it:
`minkowski` of infinite order, `euclidean` of differences whose squares overflow or
underflow, and integer and boolean vectors (SciPy subtracts and multiplies them in their
own dtype, where they wrap around). vmap must equal the per-example loop (values, shape
and dtype) or raise the loop's error."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import vmapx
from harness import assert_same, check_vmap, loop_reference
from np_compat import NUMPY2

sd = pytest.importorskip("scipy.spatial.distance")
import scipy  # noqa: E402  (after the skip: SciPy is optional)

pytest.importorskip("vmapx.libraries.scipy_spatial")

RNG = np.random.default_rng(29)
PTS = RNG.normal(size=(4, 5, 3))
U, V = RNG.normal(size=(5, 4)), RNG.normal(size=(5, 4))
METRICS = ("euclidean", "sqeuclidean", "cityblock", "chebyshev", "cosine", "correlation",
           "braycurtis", "canberra", "minkowski")  # fmt: skip
INFINITIES = [np.inf, float("inf"), np.float64(np.inf)]

# SciPy's order-2 norm of a vector is BLAS `nrm2` (scaled) before SciPy 1.18, NumPy's after
_SCALED = pytest.mark.skipif(
    np.lib.NumpyVersion(scipy.__version__) >= "1.18.0",
    reason="SciPy 1.18 takes NumPy's norm, which does not scale",
)


def _library(name, **options):
    """The adapted `sd.<name>`, looked up when called (the adapters are put in place on
    vmapx's first use)."""
    return lambda u, v: getattr(sd, name)(u, v, **options)


def _assert_raises_as_loop(f, args, error):
    """The loop raises `error` (after its floating-point warnings), and so does vmap (by
    the loop, or batched)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with pytest.raises(error):
            loop_reference(f, args, 0)
        warnings.simplefilter("ignore", vmapx.PerformanceWarning)
        with pytest.raises(error):
            vmapx.vmap(f)(*args)


def _quietly_as_loop(f, args):
    """vmap equals the loop, both allowed the loop's floating-point warnings."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        expected = loop_reference(f, args, 0)
        got = vmapx.vmap(f)(*args)
    assert_same(got, expected)


# minkowski of infinite order


@pytest.mark.parametrize("p", INFINITIES, ids=["np.inf", "float", "np.float64"])
def test_minkowski_of_infinite_order_is_the_largest_difference(p):
    u, v = np.array([[0.0, 3.0, 1.0]]), np.array([[1.0, 1.0, 1.0]])
    np.testing.assert_array_equal(vmapx.vmap(lambda a, b: sd.minkowski(a, b, p))(u, v), [2.0])
    check_vmap(lambda a, b: sd.minkowski(a, b, p), (U, V))
    check_vmap(lambda a, b: sd.minkowski(a, b, p=p), (U, V[0]), in_axes=(0, None))
    check_vmap(lambda a, b: sd.minkowski(a, b, p), (U.astype(np.float32), V.astype(np.float32)))
    check_vmap(lambda a, b: sd.minkowski(a, b, p), (U * 1e200, V * 1e-200))


@pytest.mark.parametrize("p", [*INFINITIES, -np.inf], ids=["np.inf", "float", "np.float64", "-inf"])
def test_cdist_and_pdist_of_infinite_order_are_chebyshev(p):
    """SciPy's C code takes either infinity as the chebyshev distance (NaN passed over)."""
    points = PTS.copy()
    points[1, 2, 0] = np.nan
    check_vmap(lambda x: sd.cdist(x, x[::-1], "minkowski", p=p), (points,))
    check_vmap(lambda x: sd.pdist(x, "minkowski", p=p), (points,))
    check_vmap(lambda x: sd.cdist(x, x, "minkowski", p=p), (points.astype(np.float32),))


@pytest.mark.parametrize("p", [-np.inf, 0, 0.0, -1, -0.5])
def test_minkowski_of_order_not_above_zero_raises_as_the_loop(p):
    _assert_raises_as_loop(lambda a, b: sd.minkowski(a, b, p), (U, V), ValueError)


@pytest.mark.parametrize("p", [-1, -0.5, np.nan, 0.5, np.float64(3.0)])
def test_cdist_and_pdist_of_other_orders_are_the_loops(p):
    """SciPy's `cdist` and `pdist` do not check `p`: its C loop's powers, silently (of
    zero differences too: `cdist(x, x)`)."""
    check_vmap(lambda x: sd.cdist(x, x, "minkowski", p=p), (PTS,))
    check_vmap(lambda x: sd.pdist(x, "minkowski", p=p), (PTS,))


@pytest.mark.filterwarnings("ignore::vmapx.PerformanceWarning")
def test_cdist_of_order_zero_is_the_loops():
    check_vmap(lambda x: sd.cdist(x, x, "minkowski", p=0), (PTS,))
    check_vmap(lambda x: sd.pdist(x, "minkowski", p=0.0), (PTS,))


@pytest.mark.parametrize("p", [np.nan, 0.5, 1, 1.0, np.int64(3), np.float32(2.5)])
def test_minkowski_of_other_orders_is_the_loops(p):
    check_vmap(lambda a, b: sd.minkowski(a, b, p), (U, V))
    check_vmap(lambda a, b: sd.minkowski(a, b, p), (U.astype(np.float32), V), rtol=1e-6)


def test_minkowski_of_infinite_order_differentiates_as_the_loop():
    check_vmap(vmapx.grad(lambda a, b: sd.minkowski(a, b, np.inf)), (U, V))
    check_vmap(vmapx.grad(lambda x: np.sum(sd.pdist(x, "minkowski", p=np.inf))), (PTS,))


# euclidean of large and small differences


SCALES = [1e200, 1e155, 1e300, 1e-155, 1e-200, 1e-300]


ORDER_2 = {"euclidean": _library("euclidean"), "p=2": _library("minkowski", p=2),
           "p=2.0": _library("minkowski", p=2.0)}  # fmt: skip


@_SCALED
@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize("f", ORDER_2.values(), ids=ORDER_2.keys())
def test_euclidean_of_large_and_small_differences_is_scaled_as_blas(f, scale):
    """SciPy's order 2 is BLAS `nrm2`, which scales: the squares' overflow (infinity)
    and underflow (0) are not its answer."""
    check_vmap(f, (U * scale, V * scale))
    check_vmap(f, (U * scale, V[0] * scale), in_axes=(0, None))
    check_vmap(f, ((U * scale).T.copy(), (V * scale).T.copy()), in_axes=(1, 1))


@_SCALED
def test_euclidean_of_rows_in_and_out_of_range_is_the_loops():
    u, v = U.copy(), V.copy()
    u[1] = v[1]  # no difference
    u[2], v[2] = u[2] * 1e200, v[2] * 1e200
    u[3], v[3] = u[3] * 1e-200, v[3] * 1e-200
    u[4] = v[4] + np.array([5e-324, 0.0, 0.0, 0.0])  # a subnormal difference
    for f in (_library("euclidean"), _library("minkowski", p=2)):
        check_vmap(f, (u, v))
    check_vmap(vmapx.grad(lambda a, b: sd.euclidean(a, b)), (u[[0, 2, 3]], v[[0, 2, 3]]))


@_SCALED
@pytest.mark.parametrize("scale", [1e20, 1e-25])
def test_euclidean_of_float32_out_of_range_is_the_loops(scale):
    u, v = (U * scale).astype(np.float32), (V * scale).astype(np.float32)
    check_vmap(sd.euclidean, (u, v), rtol=1e-6)
    check_vmap(lambda a, b: sd.minkowski(a, b, 2), (u, v), rtol=1e-6)


@_SCALED
@pytest.mark.parametrize("scale", [1e200, 1e-200])
def test_euclidean_derivative_out_of_range_is_the_loops(scale):
    check_vmap(vmapx.grad(lambda a, b: sd.euclidean(a, b)), (U * scale, V * scale))


@pytest.mark.parametrize("p", [3, 0.5])
def test_minkowski_of_other_orders_overflows_as_the_loop(p):
    """`np.linalg.norm` of other orders does not scale: it overflows, as the loop."""
    _quietly_as_loop(lambda a, b: sd.minkowski(a, b, p), (U * 1e200, V * 1e200))


@pytest.mark.parametrize("metric", ["euclidean", "sqeuclidean", "cityblock", "cosine",
                                    "correlation", "minkowski"])  # fmt: skip
def test_cdist_and_pdist_overflow_silently_as_the_loop(metric):
    """SciPy's C loops overflow to infinity (and divide 0 by 0) without a warning."""
    points = PTS * 1e200
    points[0, 0] = 0.0
    check_vmap(lambda x: sd.cdist(x, x, metric), (points,))
    check_vmap(lambda x: sd.pdist(x, metric), (points,))


def test_euclidean_of_empty_vectors_is_zero():
    empty = np.zeros((3, 0))
    for name in ("euclidean", "sqeuclidean", "cityblock"):
        check_vmap(_library(name), (empty, empty))
    check_vmap(_library("minkowski", p=2), (empty, empty))
    if NUMPY2:  # (the norm of no entries: 0 on NumPy 2, NumPy 1.26 raises)
        check_vmap(_library("minkowski", p=np.inf), (empty, empty))
    else:
        _assert_raises_as_loop(_library("minkowski", p=np.inf), (empty, empty), ValueError)
    _assert_raises_as_loop(_library("chebyshev"), (empty, empty), ValueError)


@pytest.mark.parametrize("scale", [1e100, 1e-160])
@pytest.mark.parametrize("name", ["cosine", "correlation"])
def test_cosine_of_large_and_small_vectors_is_the_loops(name, scale):
    """SciPy divides by `sqrt(uu * vv)`: the product overflows (distance 1) or underflows
    (distance 0) where the product of the norms would not."""
    _quietly_as_loop(_library(name), (U * scale, V * scale))


# integer and boolean vectors

INTEGERS = [np.uint8, np.int8, np.uint16, np.int16, np.int32, np.uint32, np.int64, np.uint64]


def _integers(dtype, shape):
    """Values over the whole range of `dtype` (differences, sums and products wrap)."""
    info = np.iinfo(dtype)
    return RNG.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)


def test_unsigned_differences_wrap_around_as_the_loops():
    a, b = np.array([[1, 5]], np.uint8), np.array([[3, 2]], np.uint8)
    got = vmapx.vmap(sd.cityblock)(a, b)
    assert got.dtype == np.uint64 and got.tolist() == [257]
    for name in ("euclidean", "cityblock", "chebyshev", "minkowski"):
        check_vmap(_library(name), (a, b))


@pytest.mark.parametrize("dtype", INTEGERS)
@pytest.mark.parametrize("name", [m for m in METRICS if m != "cosine"])
def test_integer_vectors_are_the_loops(name, dtype):
    u, v = _integers(dtype, (6, 5)), _integers(dtype, (6, 5))
    u[0, :2] = v[0, :2] = np.iinfo(dtype).min  # (|min| is min in a signed dtype)
    check_vmap(_library(name), (u, v))
    check_vmap(_library(name), (u, v[0]), in_axes=(0, None))


@pytest.mark.parametrize("p", [1, 3, 0.5, np.inf])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int64])
def test_integer_minkowski_of_any_order_is_the_loops(dtype, p):
    u, v = _integers(dtype, (6, 5)), _integers(dtype, (6, 5))
    check_vmap(lambda a, b: sd.minkowski(a, b, p), (u, v))


def test_integer_vectors_of_two_dtypes_are_the_loops():
    pairs = [
        (np.int8, np.uint8),
        (np.int8, np.int16),
        (np.uint8, np.float32),
        (np.int64, np.uint64),
    ]
    for a, b in pairs:
        u, v = (
            _integers(a, (4, 3)),
            (_integers(b, (4, 3)) if np.dtype(b).kind != "f" else V[:4, :3].astype(b)),
        )
        for name in ("euclidean", "cityblock", "chebyshev", "braycurtis", "canberra"):
            check_vmap(_library(name), (u, v), rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32, np.uint64, np.int8, bool])
def test_integer_cosine_in_range_is_the_loops(dtype):
    """Dot products in the integers' dtype whose product stays in it: batched, the loop's
    values (a product of wrapped dot products included)."""
    u, v = (RNG.integers(0, 2, (6, 3)).astype(dtype) for _ in range(2))
    u[:, 0] = v[:, 1] = 1  # (no zero vector)
    if dtype is np.int8:
        u[1], v[1] = -u[1], v[1]
    if dtype is np.uint8:
        u[2], v[2] = [16, 1, 0], [16, 0, 1]  # u.u = 257 and u.v = 256 wrap to 1 and 0
    check_vmap(sd.cosine, (u, v))
    check_vmap(sd.cosine, (u, v[0]), in_axes=(0, None))


@pytest.mark.filterwarnings("ignore::vmapx.PerformanceWarning")
def test_integer_cosine_out_of_range_is_the_loops():
    """SciPy's product of the dot products overflows (a warning, then the wrapped value),
    or its square root of a negative one raises: the loop's answer."""
    a, b = np.array([[200, 100]], np.uint8), np.array([[100, 200]], np.uint8)
    _quietly_as_loop(sd.cosine, (a, b))
    for dtype in (np.uint8, np.uint16, np.uint64):
        u, v = _integers(dtype, (5, 4)) | 1, _integers(dtype, (5, 4)) | 1
        _quietly_as_loop(sd.cosine, (u, v))


def test_signed_cosine_whose_dot_product_wraps_negative_raises_as_the_loop():
    u = np.array([[12, 1, 1], [1, 2, 3]], np.int8)  # 12 * 12 + 2 wraps to -110
    _assert_raises_as_loop(sd.cosine, (u, u[::-1]), ValueError)


def test_boolean_vectors_are_the_loops():
    a, b = np.array([[1, 1, 0]], bool), np.array([[1, 0, 1]], bool)
    np.testing.assert_array_equal(vmapx.vmap(sd.cosine)(a, b), [0.0])
    u, v = RNG.random((6, 5)) < 0.5, RNG.random((6, 5)) < 0.5
    u[:, 0] = v[:, 0] = True  # (no zero vector, no constant one)
    u[:, 1] = v[:, 1] = False
    for name in ("sqeuclidean", "cosine", "correlation", "braycurtis", "canberra"):
        check_vmap(_library(name), (u, v))
    for name in ("euclidean", "cityblock", "chebyshev", "minkowski"):  # (SciPy subtracts)
        _assert_raises_as_loop(_library(name), (u, v), TypeError)


@pytest.mark.parametrize("name", METRICS)
def test_float32_vectors_are_the_loops(name):
    u, v = U.astype(np.float32), V.astype(np.float32)
    check_vmap(_library(name), (u, v), rtol=1e-6, atol=1e-6)
