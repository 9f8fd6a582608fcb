"""Gather/scatter functions under vmap: in-place writers, data-dependent shapes, errors."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

import vmapx
from harness import check_vmap, loop_reference
from np_compat import NUMPY2, requires_numpy2

rng = np.random.default_rng(0)


def _in_place(func: Any) -> Any:
    def f(x: Any, *rest: Any) -> Any:
        x = x.copy()
        func(x, *rest)
        return x

    return f


def _loops(f: Any, args: list, in_axes: Any = 0, match: str = "") -> Any:
    """vmap loops (with a warning matching `match`) and equals the loop."""
    with pytest.warns(vmapx.PerformanceWarning, match=match):
        got = vmapx.vmap(f, in_axes=in_axes)(*args)
    expected = loop_reference(f, args, in_axes)
    for g, e in zip(
        got if isinstance(got, tuple) else (got,),
        expected if isinstance(expected, tuple) else (expected,),
        strict=True,
    ):
        np.testing.assert_array_equal(g, e)
    return got


# -- in-place writers ------------------------------------------------------------------


@pytest.mark.parametrize(
    "write",
    [
        lambda x, i, v: np.put(x, i, v),
        lambda x, i, v: np.put(x, i, v, mode="wrap"),
        lambda x, i, v: np.put(x, i, v, mode="clip"),
    ],
)
def test_put_duplicates_and_repeats(write: Any) -> None:
    x = rng.normal(size=(4, 6))
    i = np.array([[0, 0, 5], [7, -1, 7], [2, 3, 2], [-9, 9, 1]])
    v = rng.normal(size=(4, 2))  # shorter than the indices: repeated
    f = _in_place(write)
    for in_axes in ((0, 0, 0), (0, None, 0), (0, 0, None)):
        args = [x, i if in_axes[1] == 0 else i[2], v if in_axes[2] == 0 else v[0]]
        try:
            loop_reference(f, args, in_axes)
        except IndexError as e:
            with pytest.raises(IndexError, match=str(e)):
                vmapx.vmap(f, in_axes=in_axes)(*args)
            continue
        check_vmap(f, args, in_axes=in_axes)


def test_put_empty_cases_like_numpy() -> None:
    x = rng.normal(size=(2, 3))
    check_vmap(_in_place(lambda x: np.put(x, [], [1.0])), [x])
    check_vmap(_in_place(lambda x: np.put(x, [7], [])), [x])  # nothing to write: no error
    with pytest.raises(IndexError, match="cannot replace elements of an empty array"):
        vmapx.vmap(_in_place(lambda x: np.put(x, [0], [1.0], mode="wrap")))(np.zeros((2, 0)))


def test_place_with_batched_mask_counts_per_example() -> None:
    x = rng.normal(size=(3, 5))
    m = np.array([[1, 0, 1, 1, 0], [0, 0, 0, 0, 0], [1, 1, 1, 1, 1]], dtype=bool)
    check_vmap(_in_place(np.place), [x, m, np.array([10.0, 20.0])], in_axes=(0, 0, None))
    check_vmap(_in_place(np.place), [x, m, rng.normal(size=(3, 2))])


def test_place_errors_like_numpy() -> None:
    x = rng.normal(size=(2, 3))
    m = np.array([[True, False, False], [False, False, False]])
    with pytest.raises(ValueError, match="Cannot insert from an empty array"):
        vmapx.vmap(_in_place(np.place), in_axes=(0, 0, None))(x, m, np.zeros(0))
    with pytest.raises(ValueError, match="mask and data must be the same size"):
        vmapx.vmap(_in_place(np.place), in_axes=(0, None, None))(x, m[0, :2], [1.0])
    with pytest.raises(TypeError, match="Cannot cast array data"):
        vmapx.vmap(_in_place(np.place), in_axes=(0, 0, None))(
            np.zeros((2, 3), int), m, np.array([1.5])
        )


def test_place_putmask_python_values_convert() -> None:
    x = np.arange(6).reshape(2, 3)
    m = np.array([[True, False, True], [False, True, True]])
    check_vmap(_in_place(lambda x, m: np.place(x, m, [1.7, 2.2])), [x, m])
    check_vmap(_in_place(lambda x, m: np.putmask(x, m, 9.9)), [x, m])


def test_writing_batched_values_into_plain_array_loops() -> None:
    target = np.zeros(4)
    i = np.array([0, 3, 1])

    def f(i: Any) -> Any:
        out = target.copy()
        np.put(out, i, 1.0)
        return out

    _loops(f, [i], match="writes a traced value into a plain NumPy array")
    with pytest.raises(vmapx.errors.ConcretizationError, match="np.put"):
        vmapx.vmap(f, fallback="error")(i)


def test_in_place_writes_from_an_outer_vmap() -> None:
    x = rng.normal(size=(2, 4))
    idx = np.array([[0, 1], [3, 3], [2, 0]])

    def inner(x: Any, i: Any) -> Any:
        x = x.copy()
        np.put_along_axis(x, i, -1.0, axis=0)
        return x

    got = vmapx.vmap(lambda i: vmapx.vmap(inner, in_axes=(0, None))(x, i))(idx)
    expected = np.stack([np.stack([inner(xe, i) for xe in x]) for i in idx])
    np.testing.assert_array_equal(got, expected)


# -- data-dependent shapes -----------------------------------------------------------------


@pytest.mark.parametrize("func", [np.nonzero, np.argwhere, np.flatnonzero])
def test_nonzero_family(func: Any) -> None:
    agree = np.stack([rng.permutation(np.r_[np.ones(5), np.zeros(7)]).reshape(3, 4)] * 2)
    agree[1] = rng.permutation(agree[1].ravel()).reshape(3, 4)
    check_vmap(func, [agree])
    differ = agree.copy()
    differ[0, 0, 0] = 1 - differ[0, 0, 0]

    def total(x: Any) -> Any:  # a fixed-size result of data-dependent intermediates
        out = func(x)
        return sum(np.sum(o) for o in out) if isinstance(out, tuple) else np.sum(out)

    _loops(total, [differ], match="results of different sizes")
    with pytest.raises(vmapx.errors.ConcretizationError, match="different sizes"):
        vmapx.vmap(total, fallback="error")(differ)


def test_nonzero_zero_batch() -> None:
    assert vmapx.vmap(np.nonzero)(np.zeros((0, 3)))[0].shape == (0, 3)
    check_vmap(np.argwhere, [np.array([0.0, 2.0, 3.0])[1:]])


@requires_numpy2("nonzero of 0-d arrays refused")
def test_nonzero_of_0d_examples_raises() -> None:
    with pytest.raises(ValueError, match="0d"):
        vmapx.vmap(np.nonzero)(np.ones(3))


def test_compress_with_batched_condition_loops() -> None:
    x = rng.normal(size=(3, 4))
    _loops(lambda x: np.sum(np.compress(x > 0, x)), [x], match="batched condition")
    _loops(lambda x: np.sum(np.extract(x > 0, x)), [x], match="batched condition")


def test_compress_and_extract_errors() -> None:
    f = lambda x: np.compress([True, False, False, True], x, axis=0)  # noqa: E731
    with pytest.raises(IndexError) as got:
        vmapx.vmap(f)(np.zeros((2, 3)))
    with pytest.raises(IndexError) as expected:
        f(np.zeros(3))
    assert str(got.value) == str(expected.value)


def test_bincount_lengths() -> None:
    x = np.array([[0, 1, 3], [3, 3, 3]])
    check_vmap(np.bincount, [x])  # both give length 4
    check_vmap(lambda x: np.bincount(x, minlength=2), [x])
    _loops(lambda x: np.bincount(x)[:2], [np.array([[0, 1], [3, 3]])], match="different sizes")
    check_vmap(lambda x: np.bincount(x, minlength=3), [np.zeros((2, 0), int)])
    w = rng.normal(size=(2, 3))
    check_vmap(np.bincount, [x, w])
    check_vmap(np.bincount, [x[0], w], in_axes=(None, 0))


def test_bincount_errors_like_numpy() -> None:
    with pytest.raises(ValueError, match="no negative elements"):
        vmapx.vmap(np.bincount)(np.array([[0, 1], [-1, 2]]))
    with pytest.raises(TypeError, match="Cannot cast array data"):
        vmapx.vmap(np.bincount)(np.array([[0.0, 1.0]]))


def test_trim_zeros() -> None:
    agree = np.array([[0, 1, 2, 0], [0, 3, 0, 0]])
    check_vmap(lambda x: np.trim_zeros(x, "f"), [agree])
    check_vmap(lambda x: np.trim_zeros(x, "B"), [np.array([[0, 5, 0], [0, 4, 0]])])
    _loops(lambda x: np.sum(np.trim_zeros(x)), [agree], match="different sizes")
    check_vmap(np.trim_zeros, [np.zeros((2, 3))])  # all zeros: empty


@requires_numpy2("trim_zeros of n-d arrays, trim_zeros(axis=)")
def test_trim_zeros_along_axes() -> None:
    agree = np.array([[0, 1, 2, 0], [0, 3, 0, 0]])
    box = np.array([[[0, 0, 0], [0, 1, 2], [0, 0, 3]], [[0, 0, 0], [0, 4, 0], [0, 5, 0]]])
    check_vmap(lambda x: np.trim_zeros(x, axis=0), [box])
    check_vmap(lambda x: np.trim_zeros(x, "f", axis=(0, -1)), [box])
    _loops(lambda x: np.sum(np.trim_zeros(x)), [box], match="different sizes")
    check_vmap(lambda x: np.trim_zeros(x, axis=()), [agree])
    with pytest.raises(ValueError, match="unexpected character"):
        vmapx.vmap(lambda x: np.trim_zeros(x, "x"))(agree)


def test_ix_with_batched_bool() -> None:
    m = np.array([[True, False, True], [False, True, True]])
    check_vmap(lambda m, j: np.ix_(m, j), [m, np.array([0, 1])], in_axes=(0, None))
    _loops(lambda m: np.sum(np.ix_(m)[0]), [np.array([[True, False], [True, True]])])


# -- gather errors are NumPy's ---------------------------------------------------------------


@pytest.mark.parametrize(
    "f, args",
    [
        (lambda x, i: np.take(x, i), [np.zeros((2, 3)), np.array([1, 3])]),
        (lambda x, i: np.take(x, i, axis=0), [np.zeros((2, 3)), np.array([0, -4])]),
        (lambda x: np.take(x, [5], axis=1), [np.zeros((2, 3, 4))]),
        (lambda x, i: np.take_along_axis(x, i, 0), [np.zeros((2, 3)), np.array([[1], [3]])]),
        (lambda a, c: np.choose(a, c), [np.array([[0, 3]]), np.zeros((1, 3, 2))]),
        (lambda i: np.unravel_index(i, (2, 2)), [np.array([1, 4])]),
        (lambda i: np.ravel_multi_index((i, i), (2, 2)), [np.array([1, 2])]),
    ],
)
def test_gather_errors_match_numpy(f: Any, args: list) -> None:
    with pytest.raises(Exception) as got:  # noqa: B017 (compared below)
        vmapx.vmap(f)(*args)
    with pytest.raises(Exception) as expected:  # noqa: B017
        loop_reference(f, args, 0)
    assert type(got.value) is type(expected.value)
    assert str(got.value) == str(expected.value)


def test_take_modes_with_batched_indices() -> None:
    x = rng.normal(size=(3, 4, 5))
    i = np.array([[-7, 9], [0, 4], [13, -1]])
    for mode in ("wrap", "clip"):
        check_vmap(lambda x, i, mode=mode: np.take(x, i, axis=1, mode=mode), [x, i])
        check_vmap(lambda x, i, mode=mode: np.take(x, i, mode=mode), [x, i])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_vmap(lambda x, i: np.take(x, i % 4, axis=0), [x, i])


@pytest.mark.parametrize(
    "f",
    [
        lambda x, b: np.take(x, b),  # a float scalar per example: cast as C does
        lambda x, b: np.take(x, np.abs(np.sin(b)) % 3, axis=0),
        lambda x, b: x.take(b.astype(np.float32)),
        lambda x, b: np.take(x, b, mode="clip"),
        lambda x, b: np.take(x, b > 0),  # a boolean is an integer here, not a mask
        lambda x, b: np.take(x, np.stack([b > 0, b < 1]), mode="wrap"),
    ],
    ids=["float", "float.axis", "float32.method", "float.clip", "bool", "bools"],
)
def test_take_casts_float_scalar_and_boolean_indices_as_numpy_does(f: Any) -> None:
    x = rng.normal(size=(4, 3))
    b = np.array([-1.5, 0.2, 1.7, 2.99])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # batched: no loop
        check_vmap(f, [x, b])


def _put(a: Any, ind: Any, v: Any) -> Any:
    a = a.copy()
    np.put(a, ind, v)
    return a


@pytest.mark.parametrize(
    "f",
    [
        lambda x, b: _put(x, b, 5.0),  # a float scalar per example
        lambda x, b: _put(x, b > 0, b),  # a boolean is an integer here, not a mask
        lambda x, b: _put(x, np.stack([b > 0, b < 1]), b),
        lambda x, b: _put(x, 1.7, b),  # plain indices of the kinds NumPy casts
        lambda x, b: _put(x, True, b),
        lambda x, b: _put(x, np.array([True, False]), b),
        lambda x, b: _put(x, [1.7, -0.2], b),
        lambda x, b: np.take(x, [1.7, 0.2]) * b,
    ],
    ids=["float", "bool", "bools", "plain.float", "plain.bool", "plain.bools", "plain.list",
         "take.plain.list"],
)  # fmt: skip
def test_put_casts_float_scalar_and_boolean_indices_as_numpy_does(f: Any) -> None:
    x = rng.normal(size=(4, 3))
    b = np.array([-1.5, 0.2, 1.7, 2.99])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # batched: no loop
        check_vmap(f, [x, b])


@pytest.mark.parametrize(
    "f, error",
    [
        (lambda x: np.take(x, float("inf"), mode="clip"), OverflowError),
        (lambda x: np.take(x, [float("nan"), 1.0], mode="clip"), ValueError),
        (lambda x: _put(x, 1e20, -1.0), OverflowError),
        (lambda x: _put(x, [float("nan")], -1.0), ValueError),
        (lambda x: _put(x, 9, -1.0), IndexError),
    ],
)
def test_plain_indices_numpy_cannot_convert_raise_its_error(f: Any, error: type) -> None:
    # (a Python float goes through `int()`: a cast to integers gave the least integer)
    x = rng.normal(size=(2, 6))
    with pytest.raises(error):
        f(x[0])
    with pytest.raises(error):
        vmapx.vmap(f)(x)


@pytest.mark.parametrize("mode", ["raise", "wrap", "clip"])
def test_put_at_plain_complex_indices(mode: str) -> None:
    def f(x: Any) -> Any:
        y = x.copy()
        np.put(y, np.complex128(1.5), -1.0, mode=mode)
        np.put(y, [np.complex64(4.5), 2.0], x[:2], mode=mode)
        return y

    complex_warning = np.exceptions.ComplexWarning if NUMPY2 else np.ComplexWarning
    with warnings.catch_warnings():  # (NumPy casts them, with its warning, in the loop too)
        warnings.simplefilter("ignore", complex_warning)
        check_vmap(f, [rng.normal(size=(2, 6))])


def test_take_of_float_arrays_raises_numpys_error() -> None:
    # NumPy casts a float scalar index, not a float array (a 0-d one too)
    x = rng.normal(size=(4, 3))
    b = np.array([-1.5, 0.2, 1.7, 2.99])
    for f in (
        lambda x, b: np.take(x, b[...]),
        lambda x, b: np.take(x, b * np.ones(2)),
        lambda x, b: _put(x, b[...], 1.0),
        lambda x, b: _put(x, np.array([1.5, 0.5]), b),
    ):
        with pytest.raises(TypeError, match="Cannot cast"):
            f(x[0], b[0])
        with pytest.raises(TypeError, match="Cannot cast"):
            vmapx.vmap(f)(x, b)


@pytest.mark.parametrize(
    "f, inner, outer",
    [
        (lambda x, i: np.take(x, i, axis=0, mode="wrap"), (2, 5, 3), ("int", (4, 2))),
        (lambda x, i: np.take(x, i), (2, 5, 3), ("int", (4, 2))),
        (lambda x, i: np.take_along_axis(x, i, axis=0), (2, 5, 3), ("int", (4, 2, 3))),
        (lambda x, m: np.extract(m, x), (2, 4), ("two_of_four", (3, 4))),
        (lambda x, v: np.searchsorted(np.sort(x), v), (2, 6), ("float", (3, 4))),
        (lambda x, v: np.searchsorted(v, x), (2, 4), ("sorted", (3, 6))),
        (lambda x, v: np.digitize(x, v), (2, 4), ("sorted", (3, 6))),
        (lambda x, t: np.isin(x, t), (2, 4), ("int", (3, 3))),
        (lambda x, t: np.isin(t, x), (2, 4), ("int", (3, 3))),
        (lambda x, m: _in_place(np.putmask)(x, m, 9.0), (2, 4), ("mask", (3, 4))),
        (lambda x, m: _in_place(np.place)(x, m, [7.0, 8.0]), (2, 4), ("mask", (3, 4))),
    ],
)
def test_outer_vmap_arguments(f: Any, inner: tuple, outer: tuple) -> None:
    """An argument traced by an outer vmap (unbatched for the inner one) stays batched."""
    x = rng.integers(0, 4, size=inner).astype(float)
    kind, shape = outer
    o = {
        "int": lambda: rng.integers(-3, 4, size=shape),
        "mask": lambda: rng.random(shape) < 0.5,
        "two_of_four": lambda: np.stack([rng.permutation([1, 1, 0, 0]) for _ in range(3)]) > 0,
        "float": lambda: rng.integers(0, 4, size=shape).astype(float),
        "sorted": lambda: np.sort(rng.integers(0, 4, size=shape).astype(float), axis=-1),
    }[kind]()
    if f(x[0], o[0]) is None:
        return
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = vmapx.vmap(lambda o: vmapx.vmap(lambda x: f(x, o))(x))(o)
    expected = np.stack([np.stack([f(xe, oe) for xe in x]) for oe in o])
    np.testing.assert_array_equal(got, expected)
