"""`np.asarray` & co. in library code pass traced values through while a vmap runs:
real library functions batch and equal the loop, nothing is visible outside the run
(other threads, after it returns, after an exception), names imported from NumPy work,
and a run that cannot be trusted re-runs per example with a warning naming the line."""

from __future__ import annotations

import sys
import threading
import warnings

import numpy as np
import pytest

import asarray_library as lib
import vmapx
from harness import assert_same, check_vmap, loop_reference
from np_compat import requires_numpy2
from passthrough_cases import cases
from vmapx import _passthrough

rng = np.random.default_rng(0)
X = rng.normal(size=(5, 4))
CASES = {name: (f, args) for name, f, args in cases()}

# cases that need something the pass-through cannot give (C code, data-dependent shapes,
# Python scalars of data): they run the per-example loop, with the loop's answer
FALLBACK = {
    "polynomial.polyint", "polynomial.polyadd", "polynomial.polyvander",
    "polynomial.polyroots", "polynomial.cheb2poly", "scipy.stats.tmean",
    "sklearn.metrics.mean_squared_error", "sklearn.metrics.mean_absolute_error",
    "sklearn.metrics.r2_score", "sklearn.metrics.explained_variance_score",
    "sklearn.metrics.max_error", "sklearn.pairwise.cosine_similarity",
    "sklearn.preprocessing.normalize", "sklearn.preprocessing.scale",
    "sklearn.preprocessing.minmax_scale",
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(CASES))
def test_library_function_equals_the_loop(name: str) -> None:
    f, args = CASES[name]
    with warnings.catch_warnings():
        if name in FALLBACK:
            warnings.simplefilter("ignore", vmapx.PerformanceWarning)
        check_vmap(f, args, rtol=1e-6, atol=1e-8)


def test_most_library_functions_batch() -> None:
    batched = [name for name in CASES if name not in FALLBACK]
    assert len(batched) >= 0.7 * len(CASES), batched


# -- the ways a library converts ----------------------------------------------------


@pytest.mark.parametrize(
    "f", [lib.centered, lib.scaled, lib.doubled_copy, lib.aliased], ids=lambda f: f.__name__
)
def test_each_way_of_converting_stays_batched(f) -> None:
    check_vmap(f, [X])  # (no PerformanceWarning: warnings are errors here)


def test_a_list_of_traced_values_is_stacked() -> None:
    check_vmap(lib.stacked, [X, X[::-1]])


def test_nested_vmap() -> None:
    got = vmapx.vmap(vmapx.vmap(lib.scaled))(np.abs(X[:, :, None]) + 1)
    assert_same(
        got, np.stack([np.stack([lib.scaled(r) for r in m]) for m in np.abs(X[:, :, None]) + 1])
    )


def test_fallback_error_mode_still_passes() -> None:
    got = vmapx.vmap(lib.scaled, fallback="error")(X)
    assert_same(got, loop_reference(lib.scaled, [X], 0))


@pytest.mark.parametrize(
    ("name", "kwargs"),
    [
        ("asarray", {"dtype": np.float32}),
        ("array", {"ndmin": 3}),
        ("ascontiguousarray", {}),
        ("asfortranarray", {"dtype": complex}),
        pytest.param("asanyarray", {"copy": True}, marks=requires_numpy2("copy=")),
    ],
    ids=str,
)
def test_converter_arguments_give_the_loops_dtype_and_shape(name, kwargs) -> None:
    check_vmap(lambda v: getattr(np, name)(v[0], **kwargs) + 1, [X])


@pytest.mark.parametrize("name", ["asarray", "array"])
@pytest.mark.parametrize(
    "copy", [*(pytest.param(c, marks=requires_numpy2("copy=")) for c in (None, True)), "default"]
)
def test_writes_into_a_converted_value_reach_the_input_where_numpy_shares(name, copy) -> None:
    def f(v):
        kwargs = {} if copy == "default" else {"copy": copy}
        y = getattr(np, name)(v, **kwargs)
        y[0] = 5.0  # NumPy: `v` changes too where no copy was made
        return v + y

    check_vmap(f, [X])


@requires_numpy2("copy=False")
def test_copy_false_that_needs_a_copy_raises_as_numpy_does() -> None:
    with pytest.raises(ValueError, match="avoid copy"):
        vmapx.vmap(lambda v: np.asarray(v, dtype=np.float32, copy=False))(X)
    with pytest.raises(ValueError, match="avoid copy"):
        np.asarray(X[0], dtype=np.float32, copy=False)


def test_a_local_alias_cannot_be_reached_and_loops() -> None:
    convert = np.asarray  # a local name: nothing binds it, so the loop runs

    with pytest.warns(vmapx.PerformanceWarning, match="np.asarray"):
        check_vmap(lambda v: convert(v) * 2, [X])


# -- a batched run that cannot be trusted --------------------------------------------


def test_a_run_that_raises_after_passing_loops_and_names_the_library_line() -> None:
    with pytest.warns(vmapx.PerformanceWarning) as record:
        got = vmapx.vmap(lib.needs_ndarray)(X)
    assert_same(got, X * 3.0)
    message = str(record[0].message)
    assert "asarray_library.py" in message and "test_passthrough.py" in message
    assert "TypeError" in message


def test_after_an_untrusted_run_the_function_loops_at_once() -> None:
    def f(x):
        return lib.needs_ndarray(x) + 1.0

    for expected in ("then raised TypeError", "received a batched value"):
        with pytest.warns(vmapx.PerformanceWarning, match=expected):
            got = vmapx.vmap(f)(X)
        assert_same(got, X * 3.0 + 1.0)


def test_the_loops_exception_is_raised() -> None:
    with pytest.warns(vmapx.PerformanceWarning), pytest.raises(ValueError, match="negative"):
        vmapx.vmap(lib.fails_on_negative)(X)
    assert not _passthrough.active()


def test_fallback_warning_names_the_library_line_and_the_users_line() -> None:
    stats = pytest.importorskip("scipy.stats")
    f = lambda u: stats.tmean(u, (-0.5, 0.5))  # noqa: E731 (SciPy indexes with a data mask)
    pattern = r"scipy[^ ]*\.py:\d+ \(called from [^ ]*test_passthrough\.py:\d+\)"
    with pytest.warns(vmapx.PerformanceWarning, match=pattern):
        got = vmapx.vmap(f)(X)
    assert_same(got, loop_reference(f, [X], 0))


def test_fallback_warning_in_the_users_own_module_names_that_line() -> None:
    with pytest.warns(vmapx.PerformanceWarning, match=r"asarray_library\.py:\d+;"):
        got = vmapx.vmap(lib.python_float)(X)
    assert_same(got, loop_reference(lib.python_float, [X], 0))


def test_generators_draw_the_loops_numbers_after_a_retry() -> None:
    def f(x, g):
        return lib.centered(x + g.normal(size=x.shape))

    vmapped = vmapx.vmap(lambda x, g: f(x, g), in_axes=(0, None), randomness="different")
    got = vmapped(X, np.random.default_rng(1))
    g = np.random.default_rng(1)
    assert_same(got, np.stack([f(x, g) for x in X]))


# -- nothing visible outside the run -------------------------------------------------


def _names_are_numpys() -> bool:
    return lib.asarray is np.asarray and lib.np is np and lib._as_array is np.asanyarray


def test_nothing_changes_after_the_vmap_returns_or_raises() -> None:
    vmapx.vmap(lib.scaled)(X)
    assert _names_are_numpys() and not _passthrough.active()

    def raises(x):
        lib.scaled(x)
        raise KeyError("raised in f")

    with pytest.raises(KeyError), warnings.catch_warnings():
        warnings.simplefilter("ignore", vmapx.PerformanceWarning)
        vmapx.vmap(raises)(X)
    assert _names_are_numpys() and not _passthrough.active()


def test_numpy_itself_is_never_changed() -> None:
    seen = []

    numpy = sys.modules["numpy"]  # (this module's own `np` is bound while a vmap runs)

    def f(x):
        seen.append((numpy.asarray, numpy.array, numpy.asanyarray))
        return lib.scaled(x)

    vmapx.vmap(f)(X)
    assert all(type(c) is type(len) for c in seen[-1])  # NumPy's builtins, no wrappers


def test_other_threads_see_plain_numpy_during_a_vmap() -> None:
    inside, done = threading.Event(), threading.Event()
    seen = {}

    class ArrayLike:  # something other code converts while the vmap runs
        def __array__(self, dtype=None, copy=None):
            return np.arange(3.0)

    def other_thread() -> None:
        inside.wait(10)
        seen["active"] = _passthrough.active()
        seen["converted"] = lib.asarray(ArrayLike())
        seen["copy"] = lib.array(np.arange(3.0))
        done.set()

    def f(x):
        out = lib.scaled(x)
        inside.set()
        done.wait(10)
        return out

    thread = threading.Thread(target=other_thread)
    thread.start()
    got = vmapx.vmap(f)(X)
    thread.join()
    assert_same(got, loop_reference(lib.scaled, [X], 0))
    assert seen["active"] is False
    assert type(seen["converted"]) is np.ndarray and type(seen["copy"]) is np.ndarray
    assert_same(seen["converted"], np.arange(3.0))


def test_plain_calls_outside_a_vmap_get_numpys_functions() -> None:
    vmapx.vmap(lib.scaled)(X)  # (learned: the names are bound while a vmap runs)
    assert _names_are_numpys()
    assert_same(lib.scaled(X[0]), X[0] / np.sqrt((X[0] ** 2).sum()))


# -- derivatives ---------------------------------------------------------------------


def _central_differences(f, x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    return np.array([(f(x + eps * e) - f(x - eps * e)) / (2 * eps) for e in np.eye(x.size)])


@pytest.mark.parametrize(
    "f",
    [
        lambda x: np.sum(lib.centered(x) ** 3),
        lambda x: np.sum(lib.doubled_copy(x) * lib.scaled(x)),
        lambda x: np.sum(lib.stacked(x, x**2) ** 2),
    ],
)
def test_vmap_of_grad_passes_the_converters(f) -> None:
    got = vmapx.vmap(vmapx.grad(f))(X)
    assert_same(got, np.stack([_central_differences(f, x) for x in X]), rtol=1e-5, atol=1e-6)


def test_vmap_of_grad_of_scipy_functions() -> None:
    stats = pytest.importorskip("scipy.stats")
    for f in (lambda x: np.sum(stats.zscore(x) ** 3), stats.skew, stats.kurtosis):
        got = vmapx.vmap(vmapx.grad(f))(X)
        assert_same(got, np.stack([_central_differences(f, x) for x in X]), 1e-5, 1e-6)


def test_an_inner_vmaps_warning_made_an_error_reaches_the_caller():
    """Nested vmaps over library code that converts its input: the inner vmap runs its
    loop and warns; with warnings as errors the caller gets that PerformanceWarning, not
    an escaped-tracer error from a record of the inner vmap, which has ended."""
    ss = pytest.importorskip("scipy.signal")
    x = np.random.default_rng(0).standard_normal((3, 4, 32))
    inner = vmapx.vmap(lambda y: ss.lfilter([1.0, 0.5], [1.0, -0.2], y) ** 1)
    with pytest.raises(vmapx.PerformanceWarning, match="once per example"):
        vmapx.vmap(inner)(x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", vmapx.PerformanceWarning)
        got = vmapx.vmap(inner)(x)
    assert_same(got, np.stack([[ss.lfilter([1.0, 0.5], [1.0, -0.2], e) for e in a] for a in x]))


def test_np_array_of_a_plain_array_beside_a_traced_one():
    """`np.array([plain, traced])`: the plain array was taken apart as if it were a list,
    down to its numbers (TypeError: 'numpy.float64' object is not iterable)."""
    b = np.array([-0.69, -1.95, -1.08, -0.04])

    def f(x):
        return np.array([b, b + x])

    check_vmap(f, (np.array([[4, 4, 0, 0], [1, 2, 3, 4]], dtype=np.int32),))
