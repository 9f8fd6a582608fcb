"""Set functions under vmap: `isin` with batched sets, and the functions whose result
size depends on the data (batched when the examples agree, else the loop)."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import vmapx
from harness import loop_reference
from np_compat import np2, requires_numpy2

rng = np.random.default_rng(0)


def _native(f: Any, args: list, in_axes: Any = 0) -> None:
    """No warning (no loop), and the loop's answer bit for bit."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = vmapx.vmap(f, in_axes=in_axes)(*args)
    expected = loop_reference(f, args, in_axes)
    got, expected = (
        (got, expected) if isinstance(got, tuple) else ((got,), (expected,))
    )  # fmt: skip
    for g, e in zip(got, expected, strict=True):
        assert g.dtype == e.dtype and g.shape == e.shape
        assert _bits(g) == _bits(e)


def _bits(a: np.ndarray) -> bytes:
    """The bytes of `a` (0.0 and -0.0 differ), NaN payloads aside: NumPy 1.26's SIMD sort
    rewrites them."""
    if a.dtype.kind not in "fc":
        return a.tobytes()
    parts = (a.real, a.imag) if a.dtype.kind == "c" else (a,)
    return b"".join(np.where(np.isnan(p), np.nan, p).astype(p.dtype).tobytes() for p in parts)


def _permutations(base: np.ndarray, n: int, shift: bool = True) -> np.ndarray:
    """`n` examples with as many distinct values as `base` (shuffled, shifted)."""
    return np.stack([rng.permutation(base + (k if shift else 0)) for k in range(n)])


# -- isin ------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["int64", "float64", "complex128", "U1", "bool"])
def test_isin_with_batched_test_sets(dtype: str) -> None:
    e = rng.integers(0, 5, size=(4, 3, 2)).astype(dtype)
    t = rng.integers(0, 5, size=(4, 3)).astype(dtype)
    if dtype in ("float64", "complex128"):
        e[0, 0, 0] = t[0, 0] = np.nan
        e[1, 0, 0], t[1, 0] = -0.0, 0.0
    for invert in (False, True):
        f = lambda e, t, invert=invert: np.isin(e, t, invert=invert)  # noqa: E731
        _native(f, [e, t])
        _native(f, [e[0], t], in_axes=(None, 0))
        _native(f, [e, t[0]], in_axes=(0, None))
    _native(np.isin, [e, t[:, :0]])


def test_isin_mixed_types_and_table_kind() -> None:
    e = rng.integers(0, 5, size=(3, 4))
    t = rng.integers(0, 5, size=(3, 2)) + 0.5 * rng.integers(0, 2, size=(3, 2))
    _native(np.isin, [e, t])
    with pytest.warns(vmapx.PerformanceWarning):
        got = vmapx.vmap(lambda e, t: np.isin(e, t, kind="table"))(e, t.astype(int))
    np.testing.assert_array_equal(
        got, [np.isin(a, b) for a, b in zip(e, t.astype(int), strict=True)]
    )


# -- unique -------------------------------------------------------------------------------


_FLAGS = [
    {},
    {"return_index": True},
    {"return_inverse": True},
    {"return_counts": True},
    {"return_index": True, "return_inverse": True, "return_counts": True},
    {"return_counts": True, "equal_nan": False},
    pytest.param(
        {"return_inverse": True, "axis": 0}, marks=requires_numpy2("NaNs equal along an axis")
    ),
]


@pytest.mark.parametrize("flags", _FLAGS, ids=str)
def test_unique_native_when_examples_agree(flags: dict) -> None:
    base = np.array([3.0, 1, 1, 2, 5, 5, 5, 0])
    x = _permutations(base, 4)
    x[2] = rng.permutation([np.nan, 9, 1, 2, 2, np.nan, 0.0, 0.0])  # 5 values if NaNs equal
    if flags.get("equal_nan") is False:
        x[2] = rng.permutation([np.nan, 9, 1, 2, 2, 2, 0.0, 0.0])
    _native(lambda x: np.unique(x, **flags), [x])


def test_unique_of_nd_examples_and_strings() -> None:
    x = _permutations(np.array([1, 2, 2, 3, 3, 3]), 3).reshape(3, 2, 3)
    _native(lambda x: np.unique(x, return_inverse=True), [x])
    w = np.array([["b", "a", "b"], ["c", "c", "a"]])
    _native(lambda w: np.unique(w, return_counts=True), [w])


def test_equal_values_with_other_bits_loop() -> None:
    """NumPy keeps 0.0 or -0.0 as its hash table decides: the loop gives its pick."""
    x = np.array([[1.0, 1.0, 0.0, -0.0], [0.0, 1.0, -0.0, 1.0]])
    for f in (np.unique, lambda x: np.union1d(x, x[:1]), lambda x: np2.unique_counts(x)[0]):
        with pytest.warns(vmapx.PerformanceWarning):
            got = vmapx.vmap(f)(x)
        assert got.tobytes() == loop_reference(f, [x], 0).tobytes()
    _native(lambda x: np.unique(x, return_index=True), [x])  # stable: first occurrence


def test_unique_disagreeing_sizes_loop_with_a_clear_warning() -> None:
    x = np.array([[1, 1, 2], [1, 2, 3]])

    def f(x: Any) -> Any:
        return np.sum(np.unique(x))

    with pytest.warns(vmapx.PerformanceWarning, match="np.unique` gives results of different"):
        got = vmapx.vmap(f)(x)
    np.testing.assert_array_equal(got, [3, 6])
    with pytest.raises(vmapx.errors.ConcretizationError, match="np.unique"):
        vmapx.vmap(f, fallback="error")(x)


@pytest.mark.parametrize(
    "f",
    [
        lambda x: np.unique(x, axis=0),
        pytest.param(
            lambda x: np.unique(x, sorted=False), marks=requires_numpy2("unique(sorted=)")
        ),
        lambda x: np2.unique_values(x),
        lambda x: np.unique(x.astype(object)),
    ],
)
def test_unique_forms_that_loop(f: Any) -> None:
    x = _permutations(np.array([1, 2, 2, 3]), 3, shift=False).reshape(3, 2, 2)
    with pytest.warns(vmapx.PerformanceWarning):
        got = vmapx.vmap(f)(x)
    np.testing.assert_array_equal(got, loop_reference(f, [x], 0))


@pytest.mark.parametrize("func", [np2.unique_all, np2.unique_counts, np2.unique_inverse])
def test_array_api_unique(func: Any) -> None:
    x = _permutations(np.array([1.0, np.nan, np.nan, 2, 2]), 3)
    _native(lambda x: tuple(func(x)), [x])
    got = vmapx.vmap(func)(x)
    assert type(got) is type(func(x[0]))


def test_unique_zero_batch_and_bad_axis() -> None:
    assert vmapx.vmap(np.unique)(np.zeros((0, 4))).shape == (0, 1)  # as for ones
    with pytest.raises(np.exceptions.AxisError):
        vmapx.vmap(lambda x: np.unique(x, axis=1))(np.zeros((2, 3)))


# -- union1d, intersect1d, setdiff1d, setxor1d ----------------------------------------------


_SET_OPS = [
    np.union1d,
    np.intersect1d,
    np.setdiff1d,
    np.setxor1d,
    lambda a, b: np.intersect1d(np.unique(a), np.unique(b), assume_unique=True),
    lambda a, b: np.setxor1d(np.unique(a), np.unique(b), assume_unique=True),
    lambda a, b: np.setdiff1d(np.unique(a), b, assume_unique=True),
]


@pytest.mark.parametrize("op", _SET_OPS)
def test_set_ops_native_when_examples_agree(op: Any) -> None:
    a = _permutations(np.array([0.0, 1, 1, 2, 3, 3]), 3)
    b = _permutations(np.array([2.0, 3, 4, 4, 5]), 3)
    _native(op, [a, b])
    _native(op, [_permutations(a[0], 3, shift=False), b[0]], in_axes=(0, None))
    ints = _permutations(np.array([0, 1, 1, 2, 3, 3]), 3)
    _native(op, [ints, b])  # promotion


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_set_ops_hypothesis(data: Any) -> None:
    """Whatever the sizes, vmap gives the loop's answer (batched or by looping)."""
    values = st.sampled_from([0.0, -0.0, 1.0, 2.0, 3.0, np.nan])
    n, m = data.draw(st.integers(0, 5)), data.draw(st.integers(0, 5))
    a = np.array(data.draw(st.lists(values, min_size=2 * n, max_size=2 * n))).reshape(2, n)
    b = np.array(data.draw(st.lists(values, min_size=2 * m, max_size=2 * m))).reshape(2, m)
    for op in _SET_OPS[:4]:
        f = lambda a, b, op=op: np.sum(np.isnan(op(a, b))) + np.nansum(op(a, b)) + 0 * len(op(a, b))  # noqa: E501, E731
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", vmapx.PerformanceWarning)
            got = vmapx.vmap(f)(a, b)
        np.testing.assert_array_equal(got, loop_reference(f, [a, b], 0))
        try:
            expected = loop_reference(op, [a, b], 0)
        except ValueError:  # ragged: the loop cannot stack either
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", vmapx.PerformanceWarning)
            got = vmapx.vmap(op)(a, b)
        assert _bits(got) == _bits(expected) and got.shape == expected.shape


def test_set_op_forms_that_loop() -> None:
    a = np.array([[1.0, 2.0, np.nan], [1.0, np.nan, 2.0]])
    with pytest.warns(vmapx.PerformanceWarning, match="setxor1d"):
        got = vmapx.vmap(np.setxor1d)(a, a[::-1])
    np.testing.assert_array_equal(got, loop_reference(np.setxor1d, [a, a[::-1]], 0))
    f = lambda a, b: np.intersect1d(a, b, return_indices=True)  # noqa: E731
    with pytest.warns(vmapx.PerformanceWarning, match="intersect1d"):
        got = vmapx.vmap(f)(a, a)
    check = loop_reference(f, [a, a], 0)
    for g, e in zip(got, check, strict=True):
        np.testing.assert_array_equal(g, e)


def test_zero_and_minus_zero_across_the_two_sets_follow_numpy() -> None:
    """0.0 in one set and -0.0 in the other: which NumPy keeps depends on its sort."""
    a = np.array([[1.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
    b = np.array([[-0.0], [1.0]])
    for op in (np.union1d,):  # (the others give results of different sizes here)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", vmapx.PerformanceWarning)
            got = vmapx.vmap(op)(a, b)
        expected = loop_reference(op, [a, b], 0)
        assert _bits(got) == _bits(expected) and got.shape == expected.shape
