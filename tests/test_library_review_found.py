"""Defects found by reviewing the library adapters of `scipy.special.logsumexp`,
`numpy.polynomial`, `scipy.integrate` and `scipy.linalg.lu_factor`, each with the case
that showed it and its neighbours: vmap must equal the loop (values, shape, dtype), raise
the loop's exception, and warn where the loop warns."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import vmapx
from harness import check_vmap, check_zero_batch, loop_reference

sc = pytest.importorskip("scipy.special")
si = pytest.importorskip("scipy.integrate")
sl = pytest.importorskip("scipy.linalg")
P = np.polynomial.polynomial

RNG = np.random.default_rng(11)
INF, NAN = np.inf, np.nan
# (numpy.exceptions.RankWarning on NumPy 2; its own class on NumPy 1.26)
# (the class numpy.polynomial warns with: its own on NumPy 1.26, NumPy's on NumPy 2)
_RANK_WARNING = getattr(np.polynomial.polyutils, "RankWarning", None) or np.exceptions.RankWarning


@pytest.fixture(autouse=True, params=["error", "ignore"])
def _numeric_warnings(request):
    """Each test twice: NumPy's numeric warnings as errors (vmap gives none the loop does
    not), and ignored, as by a user's filters (a lowering that warns must still be right:
    an error made it give way to the library, hiding what it computes)."""
    with warnings.catch_warnings():
        warnings.simplefilter(request.param, RuntimeWarning)
        warnings.simplefilter(request.param, np.exceptions.ComplexWarning)
        yield


def _raises_as_the_loop(f, args, in_axes=0):
    """vmap raises the loop's exception: its type and its message."""
    with pytest.raises(Exception) as in_loop:
        loop_reference(f, args, in_axes)
    with pytest.raises(type(in_loop.value)) as in_vmap:
        vmapx.vmap(f, in_axes=in_axes)(*args)
    assert type(in_vmap.value) is type(in_loop.value)
    assert str(in_vmap.value) == str(in_loop.value)


def _same_as_the_loop(f, args, in_axes=0, rtol=1e-7, atol=1e-9):
    """vmap gives the loop's answer, or raises its exception."""
    try:
        loop_reference(f, args, in_axes)
    except Exception:
        _raises_as_the_loop(f, args, in_axes)
    else:
        check_vmap(f, args, in_axes=in_axes, rtol=rtol, atol=atol)


# -- scipy.special.logsumexp ----------------------------------------------------------

_A = RNG.normal(size=(3, 2, 4))
_A_SPECIAL = np.array([[[0.0, INF, 1.0, 2.0], [NAN, 0.0, -INF, 1.0]],
                       [[-INF, -INF, -INF, -INF], [INF, INF, 0.0, 1.0]],
                       [[1000.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]]])  # fmt: skip
_B_MASK = np.array([[[1.0, 0.0, 1.0, 1.0], [0.0, 1.0, 0.0, 1.0]],
                    [[1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 1.0, 1.0]],
                    [[0.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]]])  # fmt: skip
_B_SIGNED = np.array([[[1.0, -1.0, 1.0, 1.0], [-1.0, 1.0, 0.0, 1.0]],
                      [[1.0, -1.0, 1.0, -1.0], [0.0, 0.0, 1.0, -1.0]],
                      [[0.0, -1.0, 1.0, 1.0], [0.0, 0.0, 0.0, -2.0]]])  # fmt: skip
_LSE_A = {"normal": _A, "special": _A_SPECIAL, "float32": _A.astype(np.float32),
          "int": (3 * _A).astype(int), "bool": _A > 0}  # fmt: skip
_LSE_B = {"none": None, "zero weights": _B_MASK, "signed": _B_SIGNED,
          "int": (_B_MASK * 2).astype(int)}  # fmt: skip


@pytest.mark.parametrize(
    ("a", "b"),
    [([0.0, INF], [1.0, 0.0]), ([0.0, NAN], [1.0, 0.0]), ([0.0, -INF], [1.0, 0.0]),
     ([1000.0, 0.0], [0.0, 1.0])],
)  # fmt: skip
def test_logsumexp_drops_the_terms_of_zero_weights_whatever_a_holds(a, b):
    # vmap gave NaN (0 * inf) for the first two, -inf for the last (the shift took 1000)
    got = check_vmap(lambda a, b: sc.logsumexp(a, b=b), (np.array([a]), np.array([b])))
    np.testing.assert_array_equal(got, [0.0])


@pytest.mark.parametrize("a", _LSE_A, ids=str)
@pytest.mark.parametrize("b", _LSE_B, ids=str)
@pytest.mark.parametrize("axis", [None, -1, 0, (0, 1)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_logsumexp_matches_the_loop_on_every_option(a, b, axis, keepdims):
    a, b = _LSE_A[a], _LSE_B[b]
    rtol = 1e-6 if a.dtype == np.float32 else 1e-7
    options = {"axis": axis, "keepdims": keepdims}
    if b is None:
        check_vmap(lambda a: sc.logsumexp(a, **options), (a,), rtol=rtol)
        return
    f = lambda a, b: sc.logsumexp(a, b=b, **options)  # noqa: E731
    check_vmap(f, (a, b), rtol=rtol)
    check_vmap(f, (a, b[0]), in_axes=(0, None), rtol=rtol)  # the weights unbatched
    check_vmap(f, (a[0], b), in_axes=(None, 0), rtol=rtol)  # the exponents unbatched
    check_vmap(f, (a, b[:, :1]), rtol=rtol)  # the weights broadcast along an axis
    check_vmap(f, (a[:, 0], b), rtol=rtol)  # the weights of more dimensions than `a`


@pytest.mark.filterwarnings("ignore::vmapx.PerformanceWarning")
@pytest.mark.parametrize(
    "f",
    [lambda a, b: sc.logsumexp(a, b=b, return_sign=True),
     lambda a, b: sc.logsumexp(a, b=b, axis=-1, return_sign=True),
     lambda a, b: sc.logsumexp(a + 1j * b, b=b),
     lambda a, b: sc.logsumexp(a + 1j * b, b=b, axis=-1, return_sign=True),
     lambda a, b: sc.logsumexp(a, b=b[0, 0], axis=-1),
     lambda a, b: sc.logsumexp(a, b=0.0, axis=-1),
     lambda a, b: sc.logsumexp(a.astype(np.float32), b=[1, 0, -1, 2], axis=-1),
     lambda a, b: sc.logsumexp(a.astype(np.float32), b=2.0, axis=-1),
     lambda a, b: sc.logsumexp(a[0, 0], b=b[0, 0], keepdims=True),
     lambda a, b: sc.logsumexp(a[0, 0], b=b[0, 0], axis=0)],
)  # fmt: skip
def test_logsumexp_of_signs_complex_numbers_and_scalars_matches_the_loop(f):
    for a in (_A, _A_SPECIAL):
        check_vmap(f, (a, _B_SIGNED))


def test_logsumexp_of_float16_matches_the_loop():
    f = lambda a, b: sc.logsumexp(a, b=b, axis=-1)  # noqa: E731
    a, b = _A_SPECIAL.astype(np.float16), _B_SIGNED.astype(np.float16)
    check_vmap(f, (a, b), rtol=2e-3, atol=2e-3)  # (float16's rounding)
    check_vmap(f, (a, b[0]), in_axes=(0, None), rtol=2e-3, atol=2e-3)


@pytest.mark.filterwarnings("ignore::vmapx.PerformanceWarning")
@pytest.mark.parametrize(
    ("f", "x"),
    [(lambda a: sc.logsumexp(a, axis=-1), np.ones((2, 3, 0))),  # SciPy's -inf
     (lambda a: sc.logsumexp(a, axis=0), np.ones((2, 3, 0))),
     (lambda a: sc.logsumexp(a), np.ones((2, 0))),
     (lambda a: sc.logsumexp(a, axis=2), np.ones((2, 3, 2))),  # an axis out of range
     (lambda a: sc.logsumexp(a, b=np.ones(3)), np.ones((2, 2)))],  # weights that do not fit
)  # fmt: skip
def test_logsumexp_of_empty_arrays_and_bad_arguments_is_the_loops(f, x):
    _same_as_the_loop(f, (x,))


def test_logsumexp_of_all_zero_weights_is_scipys():
    # SciPy's unshifted sum there: -inf, or NaN where a zero weight meets an infinity
    a = np.array([[0.0, 1.0], [INF, 0.0], [NAN, 0.0], [-INF, INF]])
    check_vmap(lambda a: sc.logsumexp(a, b=np.zeros(2)), (a,))
    check_vmap(lambda a: sc.logsumexp(a, b=np.array([1.0, 0.0])), (a,))
    check_vmap(lambda a: sc.logsumexp(a, b=np.array([1.0, -1.0])), (a * 1000,))


@pytest.mark.parametrize("argnums", [0, 1, (0, 1)])
@pytest.mark.parametrize("axis", [None, -1])
def test_vmap_of_grad_of_logsumexp_with_zero_weights_is_the_loops(argnums, axis):
    f = lambda a, b: np.sum(sc.logsumexp(a, b=b, axis=axis))  # noqa: E731
    g = vmapx.grad(f, argnums=argnums)
    check_vmap(g, (_A, _B_MASK[:, :1] + _B_MASK[:, 1:]))
    check_vmap(g, (_A, _B_MASK[:, 1:] + _B_MASK[:1, :1]), in_axes=(0, 0))
    check_vmap(g, (_A, _B_MASK[0] + 0.5), in_axes=(0, None))
    # a masked infinity gets no derivative, nor does its NaN reach the others
    a = np.where(_B_MASK[:, 0] == 0, INF, _A[:, 0])
    got = check_vmap(vmapx.grad(lambda a, b: sc.logsumexp(a, b=b)), (a, _B_MASK[:, 0]))
    assert np.all(np.isfinite(got)) and np.all(got[_B_MASK[:, 0] == 0] == 0)


def test_logsumexp_with_zero_weights_differentiates_twice():
    vmapx.check_grads(lambda a: sc.logsumexp(a, b=_B_MASK[0]), (_A[0],), order=2)
    vmapx.check_grads(lambda a: sc.logsumexp(a, b=_B_MASK[0], axis=-1), (_A[0],), order=2)
    vmapx.check_grads(lambda a, b: sc.logsumexp(a, b=b), (_A[0], _B_MASK[0] + 0.5), order=2)


# -- numpy.polynomial.polynomial.polyder ------------------------------------------------

_C = RNG.normal(size=(3, 4)) * 3
_C_DTYPES = {"float64": _C, "float32": _C.astype(np.float32), "complex": _C + 1j,
             "int": (3 * _C).astype(int), "int8": _C.astype(np.int8), "bool": _C > 0}  # fmt: skip


@pytest.mark.filterwarnings("ignore::vmapx.PerformanceWarning")
def test_polyder_of_real_coefficients_by_a_complex_scale_raises_numpys_error():
    # NumPy scales in place (`c *= scl`): vmap gave zeros, with a ComplexWarning
    _raises_as_the_loop(lambda c: P.polyder(c, 1, scl=1j), (np.array([[1.0, 2.0, 3.0]]),))


@pytest.mark.filterwarnings("ignore::vmapx.PerformanceWarning")
@pytest.mark.parametrize("c", _C_DTYPES, ids=str)
@pytest.mark.parametrize("scl", [2, 0.5, -3, True, 1j, np.float32(0.5), np.float64(0.5),
                                 np.complex64(1j), np.float16(2.0), np.array([2.0]), "a"],
                         ids=repr)  # fmt: skip
@pytest.mark.parametrize("m", [0, 1, 3, 4, 5])
def test_polyder_matches_the_loop_for_every_dtype_of_coefficients_and_scale(c, scl, m):
    c = _C_DTYPES[c]
    tol = 1e-5 if c.dtype == np.float32 else 1e-12
    _same_as_the_loop(lambda c: P.polyder(c, m, scl=scl), (c,), rtol=tol, atol=tol)


@pytest.mark.filterwarnings("ignore::vmapx.PerformanceWarning")
@pytest.mark.parametrize("options", [{"m": 1.0}, {"m": -1}, {"axis": 0.0}, {"axis": 1},
                                     {"m": 5, "axis": 1.0}, {"m": True}])  # fmt: skip
@pytest.mark.parametrize("c", [_C, _C[:, :1], np.ones((3, 0))], ids=["4", "1", "0"])
def test_polyder_of_bad_orders_and_axes_is_the_loops(options, c):
    # an order or axis given as a float went through where the loop raises TypeError
    _same_as_the_loop(lambda c: P.polyder(c, **options), (c,))


def test_polyder_past_the_degree_keeps_nan_and_does_not_scale():
    c = np.array([[1.0, NAN], [2.0, 3.0]])
    check_vmap(lambda c: P.polyder(c, 2, scl=1j), (c,))  # (NumPy: no scaling, no error)
    check_vmap(lambda c: P.polyder(c, 3, scl=np.float32(2)), (c,))


# -- numpy.polynomial.polynomial.polyfit ------------------------------------------------

_X = np.linspace(-1.0, 1.0, 6)
_Y = RNG.normal(size=(3, 6))
_W = RNG.uniform(0.5, 2.0, size=(3, 6))


@pytest.mark.parametrize(
    ("f", "args", "in_axes"),
    [(lambda y: P.polyfit(np.arange(4.0), y, -1), (np.ones((2, 4)),), 0),
     (lambda y: P.polyfit(np.arange(0.0), y, 2), (np.ones((2, 0)),), 0),
     (lambda y: P.polyfit(_X, y, True), (_Y,), 0),  # a boolean degree
     (lambda y: P.polyfit(_X, y, 2.0), (_Y,), 0),
     (lambda y: P.polyfit(_X, y, []), (_Y,), 0),
     (lambda y: P.polyfit(_X, y, [[1]]), (_Y,), 0),
     (lambda y: P.polyfit(_X, y, [0, -1]), (_Y,), 0),
     (lambda x, y: P.polyfit(x, y, 1), (np.arange(4.0), np.ones((2, 5))), (None, 0)),
     (lambda x, y: P.polyfit(x, y, 1), (np.ones((4, 2)), np.ones((2, 4))), (None, 0)),
     (lambda x, y: P.polyfit(x, y, 1), (np.array(1.0), np.ones((2, 1))), (None, 0)),
     (lambda y: P.polyfit(_X, y, 1), (np.ones(2),), 0),  # a 0-d `y`
     (lambda y: P.polyfit(_X, y, 1), (np.ones((2, 6, 2, 1)),), 0),
     (lambda y, w: P.polyfit(_X, y, 1, w=w), (_Y, np.ones((3, 1))), 0),  # `w` broadcast
     (lambda y, w: P.polyfit(_X, y, 1, w=w), (_Y, np.ones((3, 5))), 0),
     (lambda y, w: P.polyfit(_X, y, 1, w=w), (_Y, np.ones((3, 6, 1))), 0),
     (lambda y, w: P.polyfit(_X, y, 1, w=w), (_Y, np.ones(3)), 0),
     (lambda y: P.polyfit(_X.astype(np.float16), y, 1), (_Y,), 0),  # lstsq refuses float16
     (lambda y: P.polyfit(_X.astype(object), y, 1), (_Y,), 0)],
)  # fmt: skip
@pytest.mark.filterwarnings("ignore::vmapx.PerformanceWarning")
def test_polyfit_checks_its_arguments_as_numpy_does(f, args, in_axes):
    # a negative degree gave an empty fit and an empty `x` zeros, where NumPy raises
    _same_as_the_loop(f, args, in_axes)


@pytest.mark.parametrize("deg", [0, 1, 2, 5, np.int64(2)], ids=repr)
def test_polyfit_of_one_degree_matches_the_loop(deg):
    check_vmap(lambda y: P.polyfit(_X, y, deg), (_Y,), rtol=1e-6, atol=1e-8)
    check_vmap(lambda y, w: P.polyfit(_X, y, deg, w=w), (_Y, _W), rtol=1e-6, atol=1e-8)
    check_vmap(lambda x, y: P.polyfit(x, y, deg), (_Y[::-1], _Y), rtol=1e-6, atol=1e-8)


def test_polyfit_of_complex_points_scales_columns_by_their_moduli():
    x = _X + 0.5j * _X[::-1]
    check_vmap(lambda y: P.polyfit(x, y, 2), (_Y,), rtol=1e-6, atol=1e-8)
    check_vmap(lambda y: P.polyfit(x, y, 2, w=_W[0]), (_Y + 1j,), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("rcond", [None, 1e-3, -1.0])
def test_polyfit_takes_numpys_default_cutoff(rcond):
    x32 = _X.astype(np.float32)
    check_vmap(lambda y: P.polyfit(x32, y, 3, rcond=rcond), (_Y,), rtol=1e-6, atol=1e-8)


@pytest.mark.filterwarnings("ignore::vmapx.PerformanceWarning")
@pytest.mark.parametrize(
    ("f", "args"),
    [(lambda y: P.polyfit(_X, y, 6), (_Y,)),  # more coefficients than points
     (lambda y: P.polyfit(np.array([1.0, 1, 1, 1, 2, 2]), y, 2), (_Y,)),
     (lambda y: P.polyfit(_X, y, 3, rcond=0.5), (_Y,)),
     (lambda x, y: P.polyfit(x, y, 2), (np.stack([_X, np.repeat([1.0, 2.0], 3), _X]), _Y))],
)  # fmt: skip
def test_polyfit_warns_of_a_rank_deficient_fit_as_numpy_does(f, args):
    with pytest.warns(_RANK_WARNING):
        want = loop_reference(f, args, 0)
    with pytest.warns(_RANK_WARNING):
        got = vmapx.vmap(f)(*args)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)


# -- numpy.polynomial.polynomial.polyval ------------------------------------------------


@pytest.mark.filterwarnings("ignore::vmapx.PerformanceWarning")
@pytest.mark.parametrize(
    "f",
    [lambda c: P.polyval(0.5, c), lambda c: P.polyval(2, c), lambda c: P.polyval(1j, c),
     lambda c: P.polyval(np.float32(0.5), c), lambda c: P.polyval([0.5, 1.5], c, tensor=False),
     lambda c: P.polyval(np.array([0.5, 2.0]), c, tensor=False)],
)  # fmt: skip
def test_polyval_of_object_coefficients_has_the_loops_dtype(f):
    # vmap gave an object array where each example gives a float
    check_vmap(f, (np.array([[1.0, 2.0], [3.0, -1.0]], dtype=object),))
    check_vmap(f, (np.array([[1, 2], [3, -1]], dtype=object),))


@pytest.mark.filterwarnings("ignore::vmapx.PerformanceWarning")
def test_polyval_at_object_points_has_the_loops_dtype():
    x = np.array([0.5, 1.5, -2.0], dtype=object)
    check_vmap(lambda x: P.polyval(x, np.array([1.0, 2.0, 3.0])), (x,))


# -- scipy.integrate ------------------------------------------------------------------

_INTEGRATE = {
    "trapezoid": lambda y, x=None, **kw: si.trapezoid(y, x, **kw),
    "cumulative_trapezoid": lambda y, x=None, **kw: si.cumulative_trapezoid(y, x, **kw),
    "cumulative_trapezoid initial": lambda y, x=None, **kw: si.cumulative_trapezoid(
        y, x, initial=0, **kw),
    "simpson": lambda y, x=None, **kw: si.simpson(y, x=x, **kw),
    "cumulative_simpson": lambda y, x=None, **kw: si.cumulative_simpson(y, x=x, **kw),
    "cumulative_simpson initial": lambda y, x=None, **kw: si.cumulative_simpson(
        y, x=x, initial=0, **kw),
}  # fmt: skip


@pytest.mark.filterwarnings("ignore::vmapx.PerformanceWarning")
def test_cumulative_trapezoid_of_no_points_raises_scipys_error():
    # vmap gave an empty array, and with initial=0 a zero per example
    _raises_as_the_loop(lambda y: si.cumulative_trapezoid(y), (np.ones((2, 0)),))
    _raises_as_the_loop(lambda y: si.cumulative_trapezoid(y, initial=0), (np.ones((2, 0)),))


@pytest.mark.filterwarnings("ignore::vmapx.PerformanceWarning")
@pytest.mark.parametrize("name", _INTEGRATE)
@pytest.mark.parametrize("n", [0, 1, 2, 3, 5])
def test_integrate_rules_of_few_points_match_the_loop(name, n):
    f = _INTEGRATE[name]
    y = RNG.normal(size=(2, 3, n))
    x = np.sort(RNG.normal(size=n))
    _same_as_the_loop(f, (y[:, 0],))
    _same_as_the_loop(f, (y,))
    _same_as_the_loop(lambda y, f=f: f(y, axis=0), (np.swapaxes(y, 1, 2),))
    _same_as_the_loop(lambda y, x, f=f: f(y, x), (y[:, 0], x), in_axes=(0, None))
    _same_as_the_loop(lambda y, x, f=f: f(y, x), (y[:, 0], y[:, 1]))
    _same_as_the_loop(f, ((3 * y[:, 0]).astype(int),))
    _same_as_the_loop(f, (y[:, 0].astype(np.float32),), rtol=1e-5, atol=1e-6)
    _same_as_the_loop(lambda y, f=f: f(y, axis=3), (y,))


@pytest.mark.filterwarnings("ignore::vmapx.PerformanceWarning")
@pytest.mark.parametrize("name", _INTEGRATE)
@pytest.mark.parametrize(("n", "m"), [(1, 2), (2, 0), (2, 1), (2, 3), (4, 2), (5, 2)])
def test_integrate_rules_of_points_of_another_length_match_the_loop(name, n, m):
    # cumulative_trapezoid broadcast a 2-point `x` where SciPy raises ValueError
    f = _INTEGRATE[name]
    y = RNG.normal(size=(2, n))
    _same_as_the_loop(lambda y, x, f=f: f(y, x), (y, np.arange(float(m))), in_axes=(0, None))


@pytest.mark.filterwarnings("ignore::vmapx.PerformanceWarning")
@pytest.mark.parametrize("initial", [0, 0.0, False, np.float64(0), 1, np.array(0), [0], "0"],
                         ids=repr)  # fmt: skip
@pytest.mark.parametrize("n", [0, 1, 3])
def test_cumulative_trapezoid_checks_initial_as_scipy_does(initial, n):
    y = RNG.normal(size=(2, n))
    _same_as_the_loop(lambda y: si.cumulative_trapezoid(y, initial=initial), (y,))


@pytest.mark.filterwarnings("ignore::vmapx.PerformanceWarning")
def test_cumulative_trapezoid_of_a_complex_initial_warns_as_scipy_does():
    f = lambda y: si.cumulative_trapezoid(y, initial=0j)  # noqa: E731
    y = RNG.normal(size=(2, 3))
    with pytest.warns(np.exceptions.ComplexWarning):
        want = loop_reference(f, (y,), 0)
    with pytest.warns(np.exceptions.ComplexWarning):
        got = vmapx.vmap(f)(y)
    np.testing.assert_array_equal(got, want)


# -- scipy.linalg ---------------------------------------------------------------------

_M = RNG.normal(size=(3, 4, 4))
# (library functions behind functions of this file: vmapx remembers a function whose
# batched run could not be trusted and loops it from then on, in other tests too)
_lu_factor = lambda a: sl.lu_factor(a)  # noqa: E731
_SPD = _M @ np.swapaxes(_M, 1, 2) + 4 * np.eye(4)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128, np.int64, np.bool_,
                                   np.float16])  # fmt: skip
@pytest.mark.parametrize("shape", [(4, 4), (4, 3), (2, 4), (0, 0), (0, 3)])
def test_lu_factor_of_no_matrices_has_the_shapes_and_dtypes_of_one(dtype, shape):
    # vmap raised AxisSizeError: SciPy's call on the empty stack raised, and the loop of
    # no examples cannot say what it gives
    a = np.ones((1, *shape), dtype=dtype)
    with warnings.catch_warnings():  # (an example of ones is singular: SciPy warns; 1.18
        warnings.simplefilter("ignore", sl.LinAlgWarning)  # deprecates bool and float16)
        warnings.simplefilter("ignore", DeprecationWarning)
        lu, piv = loop_reference(_lu_factor, (a,), 0)
    got_lu, got_piv = vmapx.vmap(_lu_factor)(a[:0])
    assert got_lu.shape == (0, *lu.shape[1:]) and got_lu.dtype == lu.dtype
    assert got_piv.shape == (0, *piv.shape[1:]) and got_piv.dtype == piv.dtype


@pytest.mark.filterwarnings("ignore::vmapx.PerformanceWarning")
@pytest.mark.parametrize(
    ("f", "a"),
    [(_lu_factor, _M), (_lu_factor, _M[:, :, :3]), (_lu_factor, _M.astype(np.float32)),
     (_lu_factor, _M[:, 0]),  # a vector per example: SciPy's own answer
     (_lu_factor, np.stack([_M, _M])),  # a stack per example: SciPy's list of factors
     (lambda a: sl.lu_factor(a, check_finite=False), _M),
     (lambda a: sl.lu_factor(a, overwrite_a=True), _M.copy())],
)  # fmt: skip
def test_lu_factor_batch_rule_matches_the_loop(f, a):
    tol = 1e-5 if a.dtype == np.float32 else 1e-9
    check_vmap(f, (a,), rtol=tol, atol=tol)


@pytest.mark.filterwarnings("ignore::vmapx.PerformanceWarning")
def test_lu_factor_of_nan_is_the_loops():
    bad = _M.copy()
    bad[1, 2, 2] = NAN
    _raises_as_the_loop(_lu_factor, (bad,))


def test_lu_factor_leaves_the_callers_array_as_it_was():
    a = _M.copy()
    vmapx.vmap(lambda a: sl.lu_factor(a, overwrite_a=True))(a)
    np.testing.assert_array_equal(a, _M)


_B = RNG.normal(size=(3, 4))
_CHO = sl.cho_factor(_SPD[0])
_ZERO_BATCH_CALLS = {
    "solve": (lambda a, b: sl.solve(a, b), (_SPD, _B), 0),
    "solve one matrix": (lambda a, b: sl.solve(a, b), (_SPD[0], _B), (None, 0)),
    "inv": (lambda a: sl.inv(a), (_SPD,), 0),
    "det": (lambda a: sl.det(a), (_SPD,), 0),
    "cholesky": (lambda a: sl.cholesky(a), (_SPD,), 0),
    "cho_factor": (lambda a: sl.cho_factor(a), (_SPD,), 0),
    "cho_solve": (lambda b: sl.cho_solve(_CHO, b), (_B,), 0),
    "cho_solve of cho_factor": (lambda a, b: sl.cho_solve(sl.cho_factor(a), b), (_SPD, _B), 0),
    "solve_triangular": (lambda a, b: sl.solve_triangular(a, b), (_SPD, _B), 0),
    "eigh": (lambda a: sl.eigh(a), (_SPD,), 0),
    "eigvalsh": (lambda a: sl.eigvalsh(a), (_SPD,), 0),
    "svd": (lambda a: sl.svd(a), (_M,), 0),
    "svdvals": (lambda a: sl.svdvals(a), (_M,), 0),
    "qr": (lambda a: sl.qr(a), (_M,), 0),
    "norm": (lambda a: sl.norm(a), (_M,), 0),
    "norm 1": (lambda a: sl.norm(a, 1), (_M,), 0),
    "pinv": (lambda a: sl.pinv(a), (_M,), 0),
    "expm": (lambda a: sl.expm(a), (_M,), 0),
    "lu_factor": (_lu_factor, (_SPD,), 0),
}


@pytest.mark.parametrize("name", _ZERO_BATCH_CALLS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128, np.int64])
def test_linalg_adapters_of_no_examples_give_the_shapes_and_dtypes_of_one(name, dtype):
    f, args, in_axes = _ZERO_BATCH_CALLS[name]
    check_zero_batch(f, [a.astype(dtype) for a in args], in_axes)
