"""Sorting and searching under vmap: bit-for-bit equality with the loop, partition
properties, batched sorted arrays in `searchsorted`/`digitize`."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import vmapx
from harness import check_vmap, loop_reference
from np_compat import requires_numpy2

rng = np.random.default_rng(0)


def _ties_and_specials(shape: tuple, dtype: str = "float64") -> np.ndarray:
    x = rng.integers(-2, 3, size=shape).astype(dtype)
    if np.dtype(dtype).kind == "f":
        flat = x.reshape(-1)
        flat[::5] = np.nan
        flat[1::7] = -0.0
        flat[2::7] = 0.0
    return x


def _bitwise_equal(f: Any, args: list, in_axes: Any = 0) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = vmapx.vmap(f, in_axes=in_axes)(*args)
    expected = loop_reference(f, args, in_axes)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    assert got.tobytes() == expected.tobytes()


@pytest.mark.parametrize("dtype", ["float64", "float32", "int8", "uint64", "bool", "complex64"])
@pytest.mark.parametrize("axis", [-1, 0, None])
@pytest.mark.parametrize("kind", ["stable", "mergesort"])
def test_stable_sorts_equal_the_loop_bit_for_bit(dtype: str, axis: Any, kind: str) -> None:
    x = _ties_and_specials((4, 5, 6), dtype)
    _bitwise_equal(lambda x: np.sort(x, axis=axis, kind=kind), [x])
    _bitwise_equal(lambda x: np.argsort(x, axis=axis, kind=kind), [x])
    _bitwise_equal(lambda x: np.argsort(x, axis=axis, kind=kind), [x], in_axes=2)


@pytest.mark.parametrize("kind", [None, "quicksort", "heapsort"])
def test_unstable_sorts_of_distinct_values(kind: str) -> None:
    x = rng.permutation(120).reshape(4, 5, 6).astype(float)
    _bitwise_equal(lambda x: np.sort(x, kind=kind), [x])
    _bitwise_equal(lambda x: np.argsort(x, axis=0, kind=kind), [x])


def test_sort_strings_and_structured_order() -> None:
    words = np.array([["pear", "apple", "fig"], ["kiwi", "fig", "apple"]])
    _bitwise_equal(np.sort, [words])
    _bitwise_equal(lambda w: np.argsort(w, kind="stable"), [words])


@requires_numpy2("argsort(stable=)")
def test_argsort_stable_keyword() -> None:
    words = np.array([["pear", "apple", "fig"], ["kiwi", "fig", "apple"]])
    _bitwise_equal(lambda w: np.argsort(w, stable=True), [words])


def test_ndarray_sort_in_place() -> None:
    def f(x: Any) -> Any:
        y = x * 1
        y.sort(axis=0, kind="stable")
        return y

    _bitwise_equal(f, [_ties_and_specials((3, 4, 5))])


def _check_partition(got: np.ndarray, x: np.ndarray, kth: Any, axis: int) -> None:
    """Each lane of `got` is a partition of the lane of `x` around each kth."""
    srt = np.sort(x, axis=axis)
    np.testing.assert_array_equal(np.sort(got, axis=axis), srt)  # same values
    for k in np.atleast_1d(kth):
        at = np.take(got, [k], axis=axis)
        np.testing.assert_array_equal(at, np.take(srt, [k], axis=axis))
        n = x.shape[axis]
        before = np.take(got, np.arange(k), axis=axis)
        after = np.take(got, np.arange(k + 1, n), axis=axis)
        assert np.all(before <= at) and np.all(after >= at)


@pytest.mark.parametrize("kth", [0, 3, -1, (1, 4)])
@pytest.mark.parametrize("axis", [-1, 0])
def test_partition_property(kth: Any, axis: int) -> None:
    x = rng.integers(-3, 4, size=(4, 6, 6)).astype(float)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = vmapx.vmap(lambda x: np.partition(x, kth, axis=axis))(x)
        idx = vmapx.vmap(lambda x: np.argpartition(x, kth, axis=axis))(x)
    lane_axis = axis % 2 + 1
    kths = np.atleast_1d(kth) % 6
    _check_partition(got, x, kths, lane_axis)
    _check_partition(np.take_along_axis(x, idx, axis=lane_axis), x, kths, lane_axis)
    # equal values at kth, exactly as the loop
    loop = loop_reference(lambda x: np.partition(x, kth, axis=axis), [x], 0)
    np.testing.assert_array_equal(np.take(got, kths, lane_axis), np.take(loop, kths, lane_axis))


def test_ndarray_partition_in_place_and_batched_kth() -> None:
    x = rng.normal(size=(3, 7))

    def f(x: Any) -> Any:
        y = x.copy()
        y.partition(2)
        return y

    _check_partition(vmapx.vmap(f)(x), x, [2], 1)
    k = np.array([0, 3, 6])
    with pytest.warns(vmapx.PerformanceWarning, match="np.partition"):
        got = vmapx.vmap(lambda x, k: np.partition(x, k)[k])(x, k)
    np.testing.assert_array_equal(got, [np.sort(r)[i] for r, i in zip(x, k, strict=True)])


def test_lexsort_forms() -> None:
    a = rng.integers(0, 2, size=(3, 8))
    b = rng.integers(0, 3, size=(3, 8))
    _bitwise_equal(lambda a, b: np.lexsort((a, b)), [a, b])
    _bitwise_equal(lambda a, b: np.lexsort((a, b)), [a, b[0]], in_axes=(0, None))
    _bitwise_equal(lambda k: np.lexsort(k), [np.stack([a, b], axis=1)])
    _bitwise_equal(lambda a: np.lexsort((a.T,), axis=0), [a.reshape(3, 2, 4)])
    with pytest.warns(vmapx.PerformanceWarning):  # a list is not dispatched by NumPy
        got = vmapx.vmap(lambda a, b: np.lexsort([a, b]))(a, b)
    np.testing.assert_array_equal(got, loop_reference(lambda a, b: np.lexsort([a, b]), [a, b], 0))


def test_sort_complex_and_0d_errors() -> None:
    check_vmap(np.sort_complex, [rng.integers(0, 3, size=(3, 5)).astype(float)])
    for f in (np.sort_complex, np.sort):
        with pytest.raises(np.exceptions.AxisError):
            vmapx.vmap(f)(np.ones(3))
    check_vmap(np.argsort, [np.ones(3)])  # (NumPy's argsort takes a 0-d value as one element)


# -- searchsorted and digitize ----------------------------------------------------------


_DTYPES = ["float64", "float32", "int8", "uint64", "int64", "bool", "complex128", "U2", "M8[D]"]


def _sorted_rows(dtype: str, b: int, n: int, nan: bool) -> np.ndarray:
    raw = rng.integers(0, 6, size=(b, n))
    if dtype == "U2":
        rows = raw.astype("U2")
    elif dtype.startswith("M8"):
        rows = raw.astype("M8[D]")
    elif dtype == "complex128":
        rows = raw + 1j * rng.integers(0, 2, size=(b, n))
    else:
        rows = raw.astype(dtype)
    if nan and np.dtype(dtype).kind in "fcM":
        rows[:, -1:] = np.array("NaT", "M8[D]") if dtype.startswith("M8") else np.nan
    return np.sort(rows, axis=1)


@pytest.mark.parametrize("dtype", _DTYPES)
@pytest.mark.parametrize("side", ["left", "right"])
def test_searchsorted_with_batched_sorted_arrays(dtype: str, side: str) -> None:
    for n in (0, 1, 5, 16):
        a = _sorted_rows(dtype, 4, n, nan=n > 2)
        v = _sorted_rows(dtype, 4, 7, nan=True)[:, ::-1].reshape(4, 7)
        f = lambda a, v: np.searchsorted(a, v, side=side)  # noqa: E731
        for in_axes in ((0, 0), (0, None)):
            args = [a, v if in_axes[1] == 0 else v[1]]
            _bitwise_equal(f, args, in_axes)


def test_searchsorted_sorter_scalars_and_promotion() -> None:
    a = rng.normal(size=(3, 9))
    sorter = np.argsort(a, axis=1)
    v = rng.normal(size=(3, 2, 2))
    _bitwise_equal(lambda a, s, v: np.searchsorted(a, v, sorter=s), [a, sorter, v])
    _bitwise_equal(lambda a, s: np.searchsorted(a, 0.1, "right", s), [a, sorter])
    # NumPy compares in the common type of the arrays: a Python float is float64
    a32 = np.sort(np.array([[0.1, 0.2], [0.1, 0.3]], np.float32), axis=1)
    _bitwise_equal(lambda a: np.searchsorted(a, 0.1, side="right"), [a32])
    ai = np.sort(rng.integers(0, 5, size=(3, 6)), axis=1)
    _bitwise_equal(lambda a, v: np.searchsorted(a, v), [ai, rng.uniform(0, 5, size=(3, 4))])


def test_searchsorted_is_a_batched_binary_search() -> None:
    """A batched sorted array is searched without a call per example."""
    a = np.sort(rng.normal(size=(64, 1000)), axis=1)
    v = rng.normal(size=(64, 3))
    calls = []
    original = np.searchsorted

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return original(*args, **kwargs)

    got = vmapx.vmap(lambda a, v: spy(a, v))(a, v)
    np.testing.assert_array_equal(got, [original(r, q) for r, q in zip(a, v, strict=True)])
    assert len(calls) == 1


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_searchsorted_hypothesis(data: Any) -> None:
    b = data.draw(st.integers(1, 3))
    n = data.draw(st.integers(0, 9))
    values = st.sampled_from([-1.0, 0.0, -0.0, 1.0, 2.5, np.inf, -np.inf, np.nan])
    a = np.sort(np.array(data.draw(st.lists(values, min_size=b * n, max_size=b * n))))
    a = np.sort(a.reshape(b, n), axis=1)
    v = np.array(data.draw(st.lists(values, min_size=b * 3, max_size=b * 3))).reshape(b, 3)
    side = data.draw(st.sampled_from(["left", "right"]))
    _bitwise_equal(lambda a, v: np.searchsorted(a, v, side=side), [a, v])


def test_digitize_with_batched_bins() -> None:
    bins = np.array([[0.0, 1, 2, 3], [3.0, 2, 2, 0], [1.0, 1, 1, 1], [np.nan, 3, 2, 1]])
    x = np.array([-1.0, 0, 0.5, 1, 2, 2.5, 3, 4, np.nan])
    for right in (False, True):
        f = lambda x, b, right=right: np.digitize(x, b, right=right)  # noqa: E731
        _bitwise_equal(f, [x, bins], in_axes=(None, 0))
        _bitwise_equal(f, [np.stack([x] * 4), bins])
        _bitwise_equal(f, [np.stack([x] * 4), bins[0]], in_axes=(0, None))
    with pytest.raises(ValueError, match="monotonically increasing or decreasing"):
        vmapx.vmap(np.digitize, in_axes=(None, 0))(x, np.array([[0.0, 1, 2], [0.0, 2, 1]]))
    with pytest.raises(TypeError, match="x may not be complex"):
        vmapx.vmap(np.digitize, in_axes=(None, 0))(x + 1j, bins)


def test_unsorted_arrays_get_numpys_own_answer() -> None:
    """NumPy's search of an unsorted array depends on its inner order: loop."""
    odd = np.array([[1.0, np.nan, 0, -1], [0.0, 1, 2, 3]])  # digitize accepts the first
    x = np.array([-1.0, 0, 0.5, 1, 2, 2.5, 3, 4, np.nan])
    with pytest.warns(vmapx.PerformanceWarning, match="not sorted"):
        got = vmapx.vmap(np.digitize, in_axes=(None, 0))(x, odd)
    np.testing.assert_array_equal(got, [np.digitize(x, b) for b in odd])
    a = np.array([[3.0, 1, 2], [1.0, 2, 3]])
    with pytest.warns(vmapx.PerformanceWarning, match="not sorted"):
        got = vmapx.vmap(np.searchsorted, in_axes=(0, None))(a, x)
    np.testing.assert_array_equal(got, [np.searchsorted(r, x) for r in a])
