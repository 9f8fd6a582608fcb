"""Defects found by reviewing the library adapters and the new transforms, each with the
case that showed it: vmap must equal the loop (values, shape, dtype), derivatives must
match finite differences, and an adapted library function must still behave as the
library's own (pickling, binding as a method)."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest

import vmapx
from harness import check_vmap

sl = pytest.importorskip("scipy.linalg")
sd = pytest.importorskip("scipy.spatial.distance")
sc = pytest.importorskip("scipy.special")
P = pytest.importorskip("numpy.polynomial.polynomial")

RNG = np.random.default_rng(7)
A = RNG.normal(size=(4, 3, 3))
AC = A + 1j * RNG.normal(size=A.shape)
BC = RNG.normal(size=(4, 3)) + 1j * RNG.normal(size=(4, 3))
SPD = A @ np.swapaxes(A, 1, 2) + 3 * np.eye(3)

# (numpy.exceptions.RankWarning on NumPy 2; its own class on NumPy 1.26)
_RANK_WARNING = getattr(np.exceptions, "RankWarning", None) or np.polynomial.polyutils.RankWarning


@pytest.mark.parametrize("assume_a", ["sym", "her"])
def test_solve_complex_symmetric_and_hermitian_read_one_triangle_as_lapack(assume_a):
    # "sym" is complex symmetric (no conjugate); "her" ignores the diagonal's imaginary part
    check_vmap(lambda a, b: sl.solve(a, b, assume_a=assume_a), (AC, BC), rtol=1e-9)


def test_eigh_eigenvectors_have_scipys_signs():
    # NumPy's and SciPy's LAPACK drivers pick different signs for some eigenvectors
    check_vmap(sl.eigh, (SPD,), rtol=1e-9)
    check_vmap(lambda a: sl.eigh(a, lower=False)[1], (A,), rtol=1e-9)


def test_eigh_eigenvector_derivative_matches_finite_differences():
    def f(a):
        return np.sum(sl.eigh(a)[1][:, 0] * np.array([1.0, 2.0, 3.0]))

    vmapx.check_grads(f, (SPD[1],), order=1, modes=("rev", "fwd"))
    expected = np.stack([vmapx.grad(f)(a) for a in SPD])
    np.testing.assert_allclose(vmapx.vmap(vmapx.grad(f))(SPD), expected, rtol=1e-9)


def test_det_keeps_scipys_dtype():
    check_vmap(sl.det, (A.astype(np.float32),), rtol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.int64])
@pytest.mark.parametrize("name", ["euclidean", "cityblock", "chebyshev", "braycurtis",
                                  "canberra", "minkowski"])  # fmt: skip
def test_vector_distances_keep_scipys_dtype(name, dtype):
    u = (RNG.normal(size=(4, 3)) * 5).astype(dtype)
    v = (RNG.normal(size=(4, 3)) * 5).astype(dtype) + 1
    check_vmap(getattr(sd, name), (u, v), rtol=1e-6)


def test_cdist_and_pdist_of_float32_are_float64():
    x = RNG.normal(size=(4, 5, 3)).astype(np.float32)
    check_vmap(sd.cdist, (x, x[:, :2]), rtol=1e-6)
    check_vmap(sd.pdist, (x,), rtol=1e-6)


def test_pdist_derivative_is_finite():
    # the full distance matrix's zero diagonal gave sqrt's infinite slope times zero
    vmapx.check_grads(lambda x: np.sum(sd.pdist(x)), (RNG.normal(size=(4, 3)),), order=2)


def test_squareform_of_no_distances_is_one_by_one():
    check_vmap(sd.squareform, (np.zeros((3, 0)),))


def test_softmax_of_infinity_is_scipys_nan():
    with np.errstate(invalid="ignore"):
        check_vmap(sc.softmax, (np.array([[np.inf, 1.0], [2.0, 1.0]]),))


@pytest.mark.parametrize("dtype", [np.int64, np.float32])
def test_polynomial_functions_keep_numpys_dtype(dtype):
    x = (RNG.normal(size=(4, 8)) * 3).astype(dtype)
    c = (RNG.normal(size=(4, 3)) * 3).astype(dtype)
    check_vmap(P.polyval, (x, c), rtol=1e-5)
    check_vmap(P.polyder, (c,), rtol=1e-6)
    check_vmap(lambda a, b: P.polyfit(a, b, 2), (x, x[:, ::-1]), rtol=1e-4, atol=1e-4)


def test_polyfit_of_a_zero_column_is_numpys():
    x = np.zeros((2, 6))
    with warnings.catch_warnings():  # (the loop warns that the fit is rank deficient)
        warnings.simplefilter("ignore", _RANK_WARNING)
        check_vmap(lambda a, b: P.polyfit(a, b, 1), (x, RNG.normal(size=(2, 6))))


@pytest.mark.parametrize("fun", [sl.solve, sd.cdist, sc.logsumexp])
def test_adapted_functions_pickle_as_the_library_function(fun):
    loaded = pickle.loads(pickle.dumps(fun))
    assert loaded.__name__ == fun.__name__ and loaded.__module__ == fun.__module__
    a, b = SPD[0], BC[0].real
    if fun is sl.solve:
        np.testing.assert_array_equal(loaded(a, b), fun(a, b))


def test_adapted_function_binds_as_a_method_like_the_library_function():
    class Solver:
        solve = sl.solve
        original = sl.solve.original

    s = Solver()  # the instance comes first, as for the library's function
    with pytest.raises(ValueError) as original_error:
        s.original(np.eye(2))
    with pytest.raises(ValueError) as adapted_error:
        s.solve(np.eye(2))
    assert str(adapted_error.value) == str(original_error.value)


def _draws(f, make_rng, x):
    """`vmap(f)(x)` and the loop's results, each from a fresh generator."""
    make_rng()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", vmapx.PerformanceWarning)
        got = vmapx.vmap(f, randomness="different")(x)
    make_rng()
    return got, np.stack([f(example) for example in x])


def test_generator_in_a_closure_dict_gives_the_loops_numbers():
    state = {}

    def reset():
        state["rng"] = np.random.default_rng(3)

    got, expected = _draws(lambda x: x + state["rng"].normal(), reset, np.zeros(3))
    np.testing.assert_array_equal(got, expected)


def test_generator_of_an_attribute_object_gives_the_loops_numbers():
    class Streams:
        pass

    class Model:
        def __init__(self):
            self.parts = Streams()

        def noisy(self, x):
            return x + self.parts.rng.normal(size=2)

    model = Model()

    def reset():
        model.parts.rng = np.random.default_rng(5)

    got, expected = _draws(model.noisy, reset, np.zeros((3, 2)))
    np.testing.assert_array_equal(got, expected)


def test_generator_in_a_partials_list_gives_the_loops_numbers():
    import functools

    rngs = []

    def noisy(x, streams):
        return x + streams[0].normal()

    def reset():
        rngs[:] = [np.random.default_rng(6)]

    f = functools.partial(noisy, streams=rngs)
    got, expected = _draws(f, reset, np.zeros(3))
    np.testing.assert_array_equal(got, expected)


STATS_SPLIT = [("laplace", "logcdf"), ("laplace", "logsf"), ("cauchy", "logpdf"),
               ("cauchy", "logcdf"), ("cauchy", "logsf"), ("gumbel_r", "logsf"),
               ("gumbel_l", "logcdf")]  # fmt: skip


@pytest.mark.parametrize(("dist", "method"), STATS_SPLIT)
def test_stats_methods_with_two_formulas_batch_and_differentiate(dist, method):
    # SciPy computes them with `apply_where`, which writes into a plain array: the loop ran
    # under vmap, and grad raised
    st = pytest.importorskip("scipy.stats")
    fun = getattr(getattr(st, dist), method)
    x = np.array([[-40.0, -2.0, -0.3, 0.0], [0.4, 3.0, 1e10, -1e10]])
    with np.errstate(all="ignore"):
        check_vmap(lambda v, m: fun(v, m, 1.5), (x, np.array([0.1, -0.2])), rtol=1e-12)
    z = np.array([-2.5, -0.4, 0.3, 2.0])
    vmapx.check_grads(lambda v, m, s: np.sum(fun(v, m, s)), (z, 0.1, 1.3), order=2)
