"""Per-example arguments of the kinds NumPy and Python treat specially, batched: integer
NumPy scalars repeat sequences (`[0.0] * n`), lists hold traced values, and an order, a
size, a shape or an offset differs between examples. vmap must give the loop's answer
(batched, or by the loop with a warning), or the loop's error."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

import vmapx
from harness import check_vmap
from np_compat import requires_numpy2

RNG = np.random.default_rng(11)
X = RNG.normal(size=(3, 6))


def _loop_raises_and_so_does_vmap(f: Any, args: list, error: type) -> None:
    with pytest.raises(error):
        f(*(a[0] for a in args))
    with pytest.raises(error):
        vmapx.vmap(f)(*args)


@pytest.mark.parametrize(
    "f",
    [
        lambda x, n: np.array([1.0] * n) * x[0],
        lambda x, n: np.array(n * [1.0, 2.0]) * x[0],
        lambda x, n: np.array((1.0, 2.0) * n) + x[:1],
        lambda x, n: np.ones(len("ab" * n)) * x[0],
    ],
    ids=["list", "reflected", "tuple", "str"],
)
def test_an_integer_scalar_repeats_a_sequence(f: Any) -> None:
    # Python repeats a sequence by a NumPy integer scalar (it multiplied elementwise)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (the same count in every example: batched)
        check_vmap(f, [X, np.array([3, 3, 3])])


def test_a_sequence_repeated_by_counts_that_differ_is_the_loops() -> None:
    with pytest.warns(vmapx.PerformanceWarning, match="index"):
        check_vmap(lambda x, n: np.sum([1.0] * n) * x, [X, np.array([1, 2, 3])])


@pytest.mark.parametrize(
    "count",
    [
        np.array([2.0, 2.0, 2.0]),
        pytest.param(
            np.array([True, True, False]),
            marks=requires_numpy2("a bool scalar that is no index (1.26: deprecated)"),
        ),
    ],
)
def test_a_sequence_times_another_scalar_raises_as_in_the_loop(count: np.ndarray) -> None:
    _loop_raises_and_so_does_vmap(lambda x, n: [1.0] * n, [X, count], TypeError)
    _loop_raises_and_so_does_vmap(lambda x, n: n * (1.0,), [X, count], TypeError)


def test_a_0d_array_multiplies_a_list_elementwise() -> None:
    check_vmap(lambda x, n: [1.0, 2.0] * n[...] + x[:2], [X, np.array([1, 2, 3])])


@pytest.mark.parametrize(
    "f",
    [
        lambda x, b: np.isin([b, 3.0], x),
        lambda x, b: np.isin(x, [b, 3.0]),
        lambda x, b: np.isin([x[0], 3.0], [b, x[1]]),
    ],
    ids=["element", "test", "both"],
)
def test_isin_of_lists_holding_traced_values(f: Any) -> None:
    x = np.round(X * 2)
    with warnings.catch_warnings():  # (both lists: the loop, for now)
        warnings.simplefilter("ignore", vmapx.PerformanceWarning)
        check_vmap(f, [x, x[:, 2].copy()])


def test_extract_with_a_list_condition_holding_a_traced_value() -> None:
    # (the result was a leaked tracer)
    with pytest.warns(vmapx.PerformanceWarning, match="extract"):
        check_vmap(lambda x, b: np.extract([b, 1], x[:2]), [X, np.array([2, 2, 2])])


@pytest.mark.parametrize(
    "f, order",
    [
        (lambda x, o: np.linalg.norm(x, o), [1.0, 2.0, np.inf]),
        (lambda x, o: np.linalg.norm(x.reshape(2, 3), o), [1.0, 2.0, -np.inf]),
        (lambda x, o: np.linalg.vector_norm(x, ord=o), [1.0, 3.0, 0.0]),
        (lambda x, o: np.linalg.cond(x[:4].reshape(2, 2), p=o), [1.0, 2.0, np.inf]),
    ],
    ids=["norm", "matrix", "vector_norm", "cond"],
)
def test_norms_of_an_order_per_example(f: Any, order: list) -> None:
    if f.__code__.co_names.count("vector_norm") and not hasattr(np.linalg, "vector_norm"):
        pytest.skip("np.linalg.vector_norm is NumPy 2's")
    args = [X + 2.0, np.array(order)]
    with pytest.warns(vmapx.PerformanceWarning):
        check_vmap(f, args)
    with pytest.warns(vmapx.PerformanceWarning):  # (derivatives: the loop's too)
        check_vmap(vmapx.grad(f), args)


def test_resize_to_a_size_per_example() -> None:
    with pytest.warns(vmapx.PerformanceWarning, match="new_shape"):
        check_vmap(lambda x, n: np.resize(x, n), [X, np.array([4, 4, 4])])
    with pytest.warns(vmapx.PerformanceWarning):
        _loop_raises_and_so_does_vmap(
            lambda x, n: np.resize(x, n), [X, -np.ones(3, int)], ValueError
        )


@pytest.mark.parametrize(
    "f",
    [
        lambda x: np.diag(x[:3], np.uint8(1)),
        lambda x: np.diag(x[:3], np.uint32(2)),
        lambda x: np.diag(x.reshape(2, 3), np.uint8(1)),
        lambda x: np.diagflat(x[:3], np.True_),
        lambda x: np.diag(x[:3], np.int8(-1)),
    ],
    ids=["uint8", "uint32", "matrix", "diagflat.bool", "int8"],
)
def test_diagonal_offsets_of_other_integer_kinds(f: Any) -> None:
    # (`-k` of an unsigned offset wrapped: an IndexError)
    check_vmap(f, [X])


@requires_numpy2("a bool scalar that is no index (1.26: deprecated)")
def test_diag_with_a_numpy_bool_offset_raises_as_numpy() -> None:
    _loop_raises_and_so_does_vmap(lambda x: np.diag(x[:3], np.True_), [X], TypeError)


@pytest.mark.parametrize(
    "f",
    [
        lambda x, n: np.fft.fft(x, n),
        lambda x, n: np.fft.irfft(x, n),
        lambda x, n: np.fft.ihfft(x, n),
        lambda x, n: np.fft.irfftn(x, [n], axes=[0]),
        lambda x, n: np.fft.fftshift(x.reshape(2, 3), axes=n % 2),
    ],
    ids=["fft", "irfft", "ihfft", "irfftn", "fftshift"],
)
def test_fft_sizes_and_axes_per_example(f: Any) -> None:
    with pytest.warns(vmapx.PerformanceWarning, match="batched size or axis"):
        check_vmap(f, [X, np.array([6, 6, 6])] if "shift" not in str(f) else [X, np.arange(3)])


def test_split_into_a_number_of_pieces_per_example() -> None:
    # (lists of different lengths per example: the whole function's loop, not an error)
    with pytest.warns(vmapx.PerformanceWarning):
        check_vmap(lambda x, n: np.array_split(x, n)[0][:1], [X, np.array([2, 3, 4])])


def test_item_of_an_example_of_several_elements_raises_numpys_error() -> None:
    _loop_raises_and_so_does_vmap(lambda x: x.item(), [X], ValueError)
    _loop_raises_and_so_does_vmap(lambda x: float(x), [X], TypeError)
