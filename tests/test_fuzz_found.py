"""Defects found by the differential fuzzer (`tests/fuzzing`), each shrunk to a small case.

An open defect is an expected failure (strict: when it is fixed the test passes, pytest
reports it, and the mark comes off; the test stays as a regression test). The fuzzer
leaves each open construct out of its random programs until then: see
`KNOWN_DEFECT_TAGS` in `fuzzing/checks.py` and the `KNOWN DEFECT (found)` comments in
`fuzzing/ops.py`.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

import vmapx
from harness import check_vmap, check_zero_batch
from np_compat import NUMPY2, numpy1_only


def _xfail(reason: str):  # noqa: ANN202
    return pytest.mark.xfail(strict=True, reason=reason)


def _raises_like_numpy(f, x: np.ndarray, error: type) -> None:  # noqa: ANN001
    """`f` raises `error` on one example, and so does `vmap(f)` on the batch `x`."""
    with pytest.raises(error):
        f(x[0])
    with pytest.raises(error):
        vmapx.vmap(f)(x)


def test_union1d_list_argument():
    check_vmap(lambda x: np.union1d(x, [3.0]), [np.ones((2, 3))])
    check_vmap(lambda x: np.intersect1d([1.0, 3.0], x), [np.ones((2, 3))])
    with pytest.warns(vmapx.PerformanceWarning):  # a list of traced values: the loop
        check_vmap(lambda x: np.setxor1d(x, [x[0], 9.0]), [np.arange(6.0).reshape(2, 3)])


def test_setdiff1d_list_argument():
    check_vmap(lambda x: np.setdiff1d(x, [0.0]), [np.array([[0.0, 1.0, 2.0], [3.0, 4.0, 0.0]])])


def _copyto_one(x: np.ndarray) -> np.ndarray:
    y = x.copy()
    np.copyto(y, 1)
    return y


def test_copyto_python_int_into_uint8():
    check_vmap(_copyto_one, [np.ones((2, 3), np.uint8)])


def _copyto_float(x: np.ndarray) -> np.ndarray:
    y = x.copy()
    np.copyto(y, 1.5)  # NumPy: cannot cast float64 to int64 (same_kind)
    return y


def test_copyto_that_cannot_cast_raises_as_numpy():
    _raises_like_numpy(_copyto_float, np.ones((2, 3), np.int64), TypeError)


def _write_unmapped(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    w[0] = 1
    return w * x


def test_jit_recording_keeps_unmapped_argument_read_only():
    x, w = np.ones((2, 3)), np.zeros(3)
    f = vmapx.vmap(_write_unmapped, in_axes=(0, None))
    with pytest.raises(ValueError, match="read-only"):
        f(x, w)
    with pytest.raises(ValueError, match="read-only"):
        vmapx.jit(f)(x, w)


def test_grad_of_polyval_with_list_coefficients():
    f = lambda x: np.sum(np.polyval([1.0, -2.0, 0.5], x))  # noqa: E731
    vmapx.check_grads(f, [np.array([0.3, 0.5])], order=2)
    vmapx.check_grads(lambda x: np.polyval(np.array([2.0, 1.0]), x), [np.array(0.4)], order=1)
    check_vmap(vmapx.grad(lambda x: np.polyval([1.0, -2.0, 0.5], x)), [np.array([0.3, 0.5])])


def test_grad_of_full_svd_u_raises_differentiation_error():
    x = np.arange(8.0).reshape(4, 2) / 7 + 0.1
    with pytest.raises(vmapx.errors.DifferentiationError, match="svd"):
        vmapx.grad(lambda a: np.sum(np.linalg.svd(a)[0]))(x)
    with pytest.raises(vmapx.errors.DifferentiationError, match="svd"):
        vmapx.jacfwd(lambda a: np.linalg.svd(a)[0])(x)
    reduced = lambda a: np.sum(np.linalg.svd(a, full_matrices=False)[1])  # noqa: E731
    vmapx.check_grads(reduced, [x], order=1)


def test_union1d_array_argument_works():
    """The control of the list case above: with an array it is batched and right."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no PerformanceWarning: a batching rule ran
        check_vmap(lambda x: np.union1d(x, np.array([3.0])), [np.ones((2, 3))])


@pytest.mark.skipif(not NUMPY2, reason="NumPy 1.26's sign of a complex is piecewise constant")
def test_grad_of_sign_of_complex():
    f = lambda t: np.imag(np.sign(t * (1 + 0.5j) + 1j))  # noqa: E731
    vmapx.check_grads(f, [np.array(0.7)], order=1)


def _count_positive(x: np.ndarray) -> np.ndarray:
    return np.arange(np.extract(x > 0, x).size)


def test_jit_does_not_replay_a_data_dependent_size():
    f = vmapx.vmap(_count_positive)
    jitted = vmapx.jit(f)
    first, second = np.array([[1.0, -1.0, -2.0]]), np.array([[1.0, 2.0, -2.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", vmapx.PerformanceWarning)
        jitted(first)
        np.testing.assert_array_equal(jitted(second), f(second))


def test_tensordot_under_nested_vmap():
    b = np.arange(18.0).reshape(3, 2, 3)
    f = lambda a: np.tensordot(b, a, axes=1)  # noqa: E731
    got = vmapx.vmap(vmapx.vmap(f))(np.ones((2, 2, 3)))
    want = np.stack([np.stack([f(a) for a in row]) for row in np.ones((2, 2, 3))])
    np.testing.assert_array_equal(got, want)


def test_division_by_python_zero_under_grad():
    f = lambda x: np.sum(x / 0)  # noqa: E731
    with np.errstate(divide="ignore"):
        want = f(np.ones(2))
        value, grad = vmapx.value_and_grad(f)(np.ones(2))
        _, tangent = vmapx.jvp(lambda x: x / 0.0, (np.ones(2, np.float32),), (np.ones(2),))
    np.testing.assert_array_equal(value, want)
    np.testing.assert_array_equal(grad, [np.inf, np.inf])
    assert tangent.dtype == np.float32 and np.all(np.isinf(tangent))


def _write_unmapped_after_python_if(w: np.ndarray, x: np.ndarray) -> np.ndarray:
    if np.sum(x) > 1.5:  # the examples disagree: vmap runs f once per example
        pass
    w[0] = 1
    return w * x


def test_unmapped_argument_is_read_only_in_the_fallback():
    f = vmapx.vmap(_write_unmapped_after_python_if, in_axes=(None, 0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", vmapx.PerformanceWarning)
        with pytest.raises(ValueError, match="read-only"):
            f(np.zeros(2), np.array([1.0, 2.0]))


def test_grad_of_a_0d_argument_is_an_ndarray():
    assert type(vmapx.grad(lambda x: np.sum(x * np.ones(3)))(np.array(1.0))) is np.ndarray
    assert type(vmapx.grad(lambda x: x * 2)(np.array(1.0))) is np.ndarray
    assert type(vmapx.jacrev(lambda x: x * 2)(np.array(1.0))) is np.ndarray
    assert type(vmapx.vjp(lambda x: x * 2, np.array(1.0))[1](1.0)[0]) is np.ndarray


def _asarray_then_draw(a: np.ndarray, b: np.ndarray, g: np.random.Generator) -> np.ndarray:
    np.asarray(b)  # vmap cannot see this: the inner vmap runs f once per example
    return g.uniform(size=2)


def test_nested_draws_in_the_loops_order_when_the_inner_vmap_falls_back():
    a, b = np.zeros(2), np.zeros(3)
    inner = vmapx.vmap(_asarray_then_draw, in_axes=(None, 0, None), randomness="different")
    outer = vmapx.vmap(inner, in_axes=(0, None, None), randomness="different")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", vmapx.PerformanceWarning)
        got = outer(a, b, np.random.default_rng(0))
    g = np.random.default_rng(0)
    want = np.stack([np.stack([_asarray_then_draw(x, y, g) for y in b]) for x in a])
    np.testing.assert_array_equal(got, want)


def test_bincount_of_uint8_255():
    check_vmap(np.bincount, [np.array([[255, 0]], np.uint8)])
    check_vmap(lambda x: np.bincount(x, minlength=3), [np.array([[255, 0], [1, 255]], np.uint8)])
    check_vmap(lambda w: np.bincount(np.array([255, 0], np.uint8), w), [np.ones((2, 2))])


def test_einsum_under_nested_vmap():
    b = np.arange(12.0).reshape(3, 2, 2)
    f = lambda a: np.einsum("abz,zy->aby", b, a)  # noqa: E731
    x = np.ones((3, 2, 2, 2))
    want = np.stack([np.stack([f(a) for a in row]) for row in x])
    np.testing.assert_array_equal(vmapx.vmap(vmapx.vmap(f))(x), want)


def test_bincount_of_uint64():
    x = np.array([[4, 5]], np.uint64)
    if NUMPY2:
        check_vmap(np.bincount, [x])
    else:  # NumPy 1.26 refuses uint64 values
        _raises_like_numpy(np.bincount, x, TypeError)


def _mean_of_switch(x: np.ndarray) -> np.ndarray:
    return np.mean(vmapx.switch((x > 0) * 1, [lambda u: -u, lambda u: np.sin(u)], x))


def test_switch_of_branches_with_different_dtypes_then_mean():
    with pytest.warns(vmapx.PerformanceWarning, match="different dtypes"):
        check_vmap(_mean_of_switch, [np.array([0, 3], np.uint8)])


def test_grad_of_heaviside_in_its_second_argument():
    f = lambda h: np.heaviside(np.zeros(2), h)  # noqa: E731
    vmapx.check_grads(f, [np.array([0.3, 0.7])], order=1)
    vmapx.check_grads(lambda h: np.heaviside(0.0, h), [np.array([0.3, 0.7])], order=1)
    assert np.all(vmapx.grad(lambda h: np.sum(np.heaviside(0.5, h)))(np.ones(2)) == 0)


def _write_array_into_element(x: np.ndarray) -> np.ndarray:
    v = x.copy()
    v[0] = x  # an array of shape (1,) into one element: NumPy 2 raises
    return v


def _write_a_row_of_one(x: np.ndarray) -> np.ndarray:
    v = x.copy()
    v[0, ...] = x[1, :1]
    return v


@pytest.mark.skipif(not NUMPY2, reason="NumPy 1.26 only deprecates this assignment")
def test_writing_an_array_into_one_element_raises_as_in_numpy():
    _raises_like_numpy(_write_array_into_element, np.array([[2.0], [3.0]]), ValueError)
    _raises_like_numpy(lambda x: x.__setitem__((0, 1), [1.0]), np.ones((2, 2, 2)), ValueError)
    check_vmap(_write_a_row_of_one, [np.arange(8.0).reshape(2, 2, 2)])  # a row: broadcasts


def test_correlate_of_two_batched_values_with_a_nan():
    x = np.array([[1.0, np.nan, 1.0, 1.0]])
    check_vmap(lambda v: np.correlate(v, v, "full"), [x])


@pytest.mark.parametrize("func", [np.convolve, np.correlate])
@pytest.mark.parametrize("mode", ["full", "same", "valid"])
def test_convolve_of_one_batched_value_with_inf_or_nan(func, mode):  # noqa: ANN001
    x = np.array([[1.0, np.inf, 1.0, 1.0], [2.0, 1.0, -1.0, 0.5]])
    k = np.array([1.0, np.nan, 2.0])
    check_vmap(lambda a, v: func(a, v, mode), [x, np.array([0.5, 1.0, 2.0])], in_axes=(0, None))
    check_vmap(lambda a, v: func(a, v, mode), [x[1], np.stack([k, k])], in_axes=(None, 0))
    check_vmap(lambda a, v: func(a, v, mode), [x[:, :2], k], in_axes=(0, None))


def test_outer_keeps_the_sign_of_zero():
    f = lambda x: np.arctan2(np.outer(np.zeros(1), x), -1.0)  # noqa: E731
    check_vmap(f, [np.array([[-1.5], [2.0]])])


def _scale_in_place(x: np.ndarray) -> np.ndarray:
    v = x * 1
    v *= 1.5  # NumPy: "Cannot cast ufunc 'multiply' output from float64 to int64"
    return v


def test_in_place_float_operator_on_integers_raises():
    _raises_like_numpy(_scale_in_place, np.array([[3, 3]]), TypeError)


def test_invert_of_allclose_is_the_python_bools():
    with warnings.catch_warnings():  # (the loop's `~True`: deprecated from Python 3.12)
        warnings.simplefilter("ignore", DeprecationWarning)
        check_vmap(lambda x: ~np.allclose(x, x), [np.ones((2, 3))])
    check_vmap(lambda x: -np.array_equal(x, x[::-1]), [np.ones((2, 3))])
    check_vmap(lambda x: np.allclose(x, 1) + np.array_equal(x, x), [np.ones((2, 3))])
    check_vmap(lambda x: np.float32(1.5) * np.allclose(x, 1), [np.ones((2, 3))])


def _add_scalar_draw(x: np.ndarray, g: np.random.Generator) -> np.ndarray:
    return x + g.random(())  # a 0-d float64 array: float32 + it is float64


def test_draw_of_size_empty_tuple_promotes_as_an_array():
    x = np.ones((2, 1), np.float32)
    f = vmapx.vmap(_add_scalar_draw, in_axes=(0, None), randomness="different")
    g = np.random.default_rng(0)
    loop = np.stack([_add_scalar_draw(v, g) for v in x])  # (float32 on NumPy 1.26: by value)
    assert f(x, np.random.default_rng(0)).dtype == loop.dtype


@numpy1_only("value-based promotion of NumPy scalars")
def test_numpy1_scalar_power_promotes_like_the_loop() -> None:
    """NumPy 1.26: a per-example np.float32 scalar ** a Python float is float64 (scalar
    math, by value), where `array ** 0.5` is np.sqrt (float32)."""
    for f in (
        lambda x: np.sqrt(np.abs(x)) ** 0.5,
        lambda x: x**2.0,
        lambda x: x**-1.0,
        lambda x: np.abs(x) ** 0.5 + x[...] ** 0.5,  # x[...]: a 0-d array, np.sqrt
        lambda x: np.ones(2, np.float32) * x**0.5,
    ):
        check_vmap(f, [np.array([1.0455, 2.0], dtype=np.float32)])


def test_grad_of_sign_of_complex_in_both_parts_and_of_real_sign():
    z = np.array([0.3 - 0.4j, -1.2 + 0.1j])
    vmapx.check_grads(lambda z: np.sign(z) * np.conj(z) ** 2, [z], order=2)
    assert np.all(vmapx.grad(lambda x: np.sum(np.sign(x) * x))(np.array([-2.0, 3.0])) == [-1, 1])


def test_kron_keeps_the_sign_of_zero():
    f = lambda x: np.copysign(1.0, np.kron(np.zeros((1, 2)), x))  # noqa: E731
    check_vmap(f, [np.array([[[-1.5, 2.0]], [[2.0, -3.0]]])])
    g = lambda z, x: np.copysign(1.0, np.outer(z, x))  # noqa: E731
    check_vmap(g, [np.zeros((2, 2)), np.array([-1.5, 2.0])], in_axes=(0, None))
    check_vmap(g, [np.zeros(2), np.array([[-1.5, 2.0], [1.0, -1.0]])], in_axes=(None, 0))


def _copy_of_a_scalar_then_add(x: np.ndarray) -> np.ndarray:
    s = np.median(x).copy()  # a NumPy scalar's copy is a scalar: `+=` rebinds it
    s += x
    return s


def _astype_of_a_scalar_then_subtract(x: np.ndarray) -> np.ndarray:
    s = (np.zeros(()) + np.std(x)).astype(np.float32)
    s -= x[:1]
    return s


@pytest.mark.parametrize("f", [_copy_of_a_scalar_then_add, _astype_of_a_scalar_then_subtract])
def test_in_place_operator_on_a_copied_numpy_scalar_rebinds(f):  # noqa: ANN001
    check_vmap(f, [np.arange(6.0).reshape(2, 3)])


@pytest.mark.parametrize("draw", [
    lambda g: g.standard_normal(dtype=np.float32), lambda g: g.integers(0, 5),
    lambda g: g.random(),
])  # fmt: skip
def test_a_returned_python_number_draw_stacks_as_the_loop(draw):  # noqa: ANN001
    def f(x, g):  # noqa: ANN001, ANN202
        return draw(g)

    x = np.zeros((2, 3))
    want = np.stack([f(v, np.random.default_rng(0)) for v in x[:1]])
    got = vmapx.vmap(f, in_axes=(0, None), randomness="different")(x[:1], np.random.default_rng(0))
    assert got.dtype == want.dtype
    inner = vmapx.vmap(f, in_axes=(0, None), randomness="different")
    nested = vmapx.vmap(inner, in_axes=(0, None), randomness="different")
    assert nested(x[:, None], np.random.default_rng(0)).dtype == want.dtype


@pytest.mark.parametrize("loop", [
    lambda x: vmapx.fori_loop(0, np.sum(x > 2), lambda i, u: u * 0.5 + i, np.sum(x)),
    lambda x: vmapx.fori_loop(np.sum(x > 2), 4, lambda i, u: u * 0.5 + i, np.sum(x)),
    lambda x: vmapx.while_loop(lambda s: s[0] < np.sum(x > 2), lambda s: (s[0] + 1, s[1] * 0.9),
                               (0, np.sum(x)))[1],
    lambda x: vmapx.cond(np.sum(x) > 5, lambda u: u * 2, lambda u: u - 1, np.sum(x)),
])  # fmt: skip
def test_in_place_operator_on_a_scalar_from_control_flow_rebinds(loop):  # noqa: ANN001
    def f(x):  # noqa: ANN001, ANN202
        s = loop(x).copy()
        s += x
        return s

    check_vmap(f, [np.arange(6.0).reshape(2, 3)])


def _add_into_an_example_of_a_vector(x: np.ndarray) -> np.ndarray:
    x += np.ones(3)  # `for x in X` gives NumPy scalars: `+=` rebinds (and broadcasts)
    return x


def test_a_0d_example_is_a_numpy_scalar():
    check_vmap(_add_into_an_example_of_a_vector, [np.array([1.0, 2.0])])


def test_python_complex_times_a_float64_example_is_a_python_complex():
    # np.float64 is a Python float: `1j * x` is a Python complex, weak against complex64
    f = lambda x: (1j * x) * np.ones(2, np.complex64)  # noqa: E731
    check_vmap(f, [np.array([1.5, -2.0])])


def test_derivatives_of_sort_complex_and_nextafter():
    x = np.array([0.3, -1.2, 0.7])
    vmapx.check_grads(lambda x: np.real(np.sort_complex(x)) * np.arange(3.0), [x], order=2)
    z = np.array([0.3 + 1j, -1.2 - 0.5j, 0.8 - 2j])
    vmapx.check_grads(lambda z: np.sort_complex(z) * np.arange(3.0), [z], order=1)
    vmapx.check_grads(lambda x: np.nextafter(x, 2.0) * x, [x], order=1, eps=1e-4)
    assert np.all(vmapx.grad(lambda y: np.sum(np.nextafter(x, y)))(x) == 0)


@pytest.mark.parametrize("func", [np.nan_to_num, np.real, np.squeeze, np.sinc, np.fix])
def test_in_place_operator_on_a_scalar_from_a_function_rebinds(func):  # noqa: ANN001
    def f(x):  # noqa: ANN001, ANN202
        s = func(x).copy()  # x[i] is a scalar, and so is func of it
        s += np.array([1.0, 2.0])
        return s

    check_vmap(f, [np.array([-0.5, 2.0])])


@pytest.mark.skipif(not NUMPY2, reason="NumPy 1.26's inf-norm of an empty vector raises")
def test_grad_of_the_inf_norm_of_an_empty_vector():
    f = lambda x: np.linalg.norm(x[:0] + x[0], np.inf) + x[1]  # noqa: E731
    np.testing.assert_array_equal(vmapx.grad(f)(np.ones(2)), [0.0, 1.0])
    check_vmap(lambda x: np.linalg.norm(x[:, :0], np.inf, axis=1), [np.ones((2, 3, 2))])


@pytest.mark.parametrize("func", [
    np.linalg.cond, np.linalg.matrix_rank, lambda a: np.linalg.slogdet(a)[1],
    lambda a: np.polyval([1.0, 2.0], a[0, 0]), lambda a: np.corrcoef(a[0], a[1]),
    lambda a: np.searchsorted(a[0], 0.5),
])  # fmt: skip
def test_in_place_operator_on_a_scalar_from_linalg_rebinds(func):  # noqa: ANN001
    def f(a):  # noqa: ANN001, ANN202
        s = func(a).copy()  # a NumPy scalar
        s += np.array([1.0, 2.0])
        return s

    check_vmap(f, [np.arange(8.0).reshape(2, 2, 2) ** 2 + 1])


def _choose_then_add(x: np.ndarray, g: np.random.Generator) -> np.ndarray:
    s = g.choice(x.ravel()).copy()  # a NumPy scalar
    s += x
    return s


def test_in_place_operator_on_a_choice_without_size_rebinds():
    x = np.array([[0.5, -2.0], [1.0, 3.0]])
    got = vmapx.vmap(_choose_then_add, in_axes=(0, None), randomness="different")(
        x, np.random.default_rng(0)
    )
    g = np.random.default_rng(0)
    np.testing.assert_array_equal(got, np.stack([_choose_then_add(v, g) for v in x]))


@pytest.mark.skipif(not NUMPY2, reason="NumPy 1.26's norms of an empty matrix raise")
@pytest.mark.parametrize("order", [1, np.inf])
def test_grad_of_the_norm_of_an_empty_matrix(order):  # noqa: ANN001
    np.testing.assert_array_equal(
        vmapx.grad(lambda x: np.linalg.norm(x, order))(np.zeros((3, 0))), np.zeros((3, 0))
    )


def _write_into_boolean(value_of: Any) -> Any:
    def f(x: np.ndarray) -> Any:
        b = np.zeros_like(x, shape=(2, 3), dtype=bool)
        b[1, 0] = value_of(x)
        return b

    return f


@pytest.mark.skipif(not NUMPY2, reason="NumPy 1.26 warns for every dtype instead")
@pytest.mark.parametrize("value_of", [
    lambda x: x, lambda x: x[None] * 0, lambda x: [x[0]], lambda x: [], lambda x: x.copy(),
])  # fmt: skip
def test_an_element_of_a_boolean_array_takes_a_sequence_of_one_element(value_of: Any) -> None:
    # NumPy 2 writes a one-element array (or a list's truth) into one element of a
    # boolean array, and refuses it for every other dtype; vmap raised for both
    check_vmap(_write_into_boolean(value_of), [np.array([[0.0], [2.0], [np.nan]])])
    check_zero_batch(_write_into_boolean(value_of), [np.zeros((2, 1), dtype=bool)], 0)


@pytest.mark.skipif(not NUMPY2, reason="NumPy 1.26 warns instead")
def test_an_element_of_a_float_array_refuses_a_sequence_as_numpy_does() -> None:
    def f(x: np.ndarray) -> Any:
        b = np.zeros_like(x, shape=(3,))
        b[1] = x
        return b

    with pytest.raises(ValueError, match="with a sequence"):
        f(np.ones(1))
    with pytest.raises(ValueError, match="with a sequence"):
        vmapx.vmap(f)(np.ones((2, 1)))
    with pytest.raises(ValueError, match="with a sequence"):  # (several elements)
        vmapx.vmap(_write_into_boolean(lambda x: x))(np.ones((2, 2)))


@pytest.mark.parametrize("reshape", [
    lambda s: np.reshape(s, ()), lambda s: s.reshape(()), lambda s: np.moveaxis(s, [], []),
])  # fmt: skip
def test_a_reshaped_scalar_stays_a_scalar_under_in_place_operators(reshape: Any) -> None:
    # `np.reshape(np.int64(1), ())` is a NumPy scalar: `s *= floats` rebinds to floats
    # (vmap wrote into the int64 value and raised a casting error)
    def f(x: np.ndarray) -> Any:
        s = reshape(np.invert(x)).copy()
        s *= np.array([0.5, 2.0])
        return s

    check_vmap(f, [np.array([1, 3])])


@pytest.mark.parametrize("part", [np.real, np.imag])
@pytest.mark.parametrize("number", [
    lambda b: b, lambda b: b + 1, lambda b: b * 1.5, lambda b: b * 1j,
])  # fmt: skip
def test_real_and_imag_of_a_python_number_are_its_attributes(part: Any, number: Any) -> None:
    # `np.imag(True)` is `True.imag`, the int 0 (vmap gave a bool)
    def f(x: np.ndarray) -> Any:
        return part(number(np.array_equal(x, x[::-1])))

    check_vmap(f, [np.array([[0, 1], [2, 2]], dtype=np.int32)])
    if NUMPY2:  # (NumPy 1.26 promotes a Python int with a float32 scalar to float64)
        check_vmap(lambda x: f(x) * np.float32(2.0), [np.array([[0, 1], [2, 2]])])


def _diagonal_written(x: np.ndarray) -> np.ndarray:
    d = np.einsum("ii->i", x)
    d[0] = 100.0
    return x


def _transpose_after_write(x: np.ndarray) -> np.ndarray:
    t = np.einsum("ij->ji", x)
    x[0, 1] = -1.0
    return t


def _sublists_after_write(x: np.ndarray) -> np.ndarray:
    t = np.einsum(x, [0, 1], [1, 0])
    x[1, 0] = 9.0
    return t


@pytest.mark.parametrize("f", [_diagonal_written, _transpose_after_write, _sublists_after_write])
def test_an_einsum_that_numpy_gives_as_a_view_shares_writes(f: Any) -> None:
    # `np.einsum("ij->ji", x)` is a view of `x`: vmap returned a copy, so a later write
    # into `x` was not seen in it (a silent wrong value); now the loop runs
    x = np.arange(18.0).reshape(2, 3, 3)
    with pytest.warns(vmapx.PerformanceWarning, match="view"):
        got = vmapx.vmap(f)(x.copy())
    np.testing.assert_array_equal(got, np.stack([f(e) for e in x.copy()]))


def test_an_einsum_that_sums_is_no_view_and_stays_batched() -> None:
    def f(x: np.ndarray) -> np.ndarray:
        s = np.einsum("ij,jk->ik", x, x)
        s += 1.0
        r = np.einsum("ij->i", x)
        x[0] = 7.0
        return s + r[:, None]

    check_vmap(f, [np.arange(18.0).reshape(2, 3, 3)])  # (warnings are errors here)


def _scalar_through_cond(x: np.ndarray, flags: np.ndarray) -> Any:
    norm = np.linalg.norm(x, 1)  # a NumPy scalar per example
    s = vmapx.cond(norm > 1.0, np.abs, lambda u: u * 2, norm).copy()
    s *= np.invert(flags)  # (a scalar rebinds: the result takes the flags' shape)
    return s


def test_a_scalar_from_cond_stays_a_scalar_under_derivatives() -> None:
    # under vmap(grad) and vmap(jacfwd) the result of cond lost its scalar mark, so the
    # in-place operator wrote into it and raised where the loop rebinds it
    x = np.array([[0.3, -0.2], [1.5, 2.0], [-0.1, 0.05]])
    flags = np.array([[True, False, True], [False, False, True], [True, True, True]])
    weights = np.array([1.5, -0.5, 2.0])
    loss = lambda x, f: np.sum(_scalar_through_cond(x, f) * weights)  # noqa: E731
    check_vmap(vmapx.grad(loss), [x, flags])
    check_vmap(vmapx.jacfwd(_scalar_through_cond), [x, flags])
    vmapx.check_grads(lambda x: loss(x, flags[0]), (x[1],), order=1)


def _added_in_place(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a.copy()
    a += b  # (b (1, 1): the broadcast shape (1, 3) is not a's (3,))
    return a


def _added_into_out(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.add(a, b, out=a * 1.0)


def _summed_into_out(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.sum(a + b, axis=0, keepdims=True, out=a * 1.0)


def _chosen_into_out(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.choose(np.zeros((1, 3), int), [a + b], out=a * 1.0)


@pytest.mark.parametrize("f", [_added_in_place, _added_into_out, _summed_into_out])
def test_an_output_operand_takes_no_leading_dimensions(f: Any) -> None:
    # `a += b` and `np.add(a, b, out=a)` where broadcasting gives more dimensions than
    # `a` has: NumPy raises; vmap wrote the (1, 3) result into (3,) as an assignment
    # would (dropping the leading 1) and returned a value where the loop raises
    a, b = np.ones((2, 3)), np.ones((2, 1, 1))
    with pytest.raises(ValueError, match="output operand|output parameter"):
        f(a[0], b[0])
    with pytest.raises(ValueError, match="output operand|output parameter"):
        vmapx.vmap(f)(a, b)
    with pytest.raises(ValueError, match="output operand|output parameter"):
        vmapx.vmap(f, in_axes=(0, None))(a, b[0])
    # inputs broadcast into the output operand stay fine, as in NumPy
    check_vmap(lambda a, b: np.add(b, 1.0, out=a * 1.0), [a, np.ones((2, 1))])
    check_vmap(lambda a: _added_in_place(a, np.ones((1, 3))), [np.ones((2, 1, 3))])


def test_choose_into_an_output_of_fewer_dimensions_raises_numpys_error() -> None:
    a, b = np.ones((2, 3)), np.ones((2, 1, 3))
    with pytest.raises(TypeError, match="invalid shape for output array"):
        _chosen_into_out(a[0], b[0])
    with pytest.raises(TypeError, match="invalid shape for output array"):
        vmapx.vmap(_chosen_into_out)(a, b)


def _sum_into_larger(a: np.ndarray) -> Any:
    return np.sum(a, axis=0, out=a[:1] * 0)  # (NumPy: out must be the result's shape)


def _take_into_larger(a: np.ndarray) -> Any:
    return np.take(a, [0, 1], out=np.zeros((3, 2)) + a[0, :2])


def _clip_into_larger(a: np.ndarray) -> Any:
    return np.clip(a[0], 0.6, 0.9, out=np.zeros((2, 4)) + a[0])  # (a ufunc: broadcasts)


def _outer_into_fewer(a: np.ndarray) -> Any:
    return np.add.outer(a[0, :1], a[0], out=a[0] * 0)  # ((1, 4) into (4,))


def _reduce_into_fewer(a: np.ndarray) -> Any:
    return np.add.reduce(a, axis=0, keepdims=True, out=a[0] * 0)


@pytest.mark.parametrize(
    "f", [_sum_into_larger, _take_into_larger, _outer_into_fewer, _reduce_into_fewer]
)
def test_a_numpy_functions_out_of_another_shape_follows_numpy(f: Any) -> None:
    # NumPy's functions and ufunc methods take an `out=` of exactly their result's shape
    # (the ufunc-based functions broadcast into a larger one); vmap broadcast into any
    # larger `out`, or wrote as an assignment would, and returned a value where the loop
    # raises
    a = np.random.default_rng(5).random((3, 4, 4))
    with pytest.raises(ValueError):
        f(a[0])
    with pytest.raises(ValueError):
        vmapx.vmap(f)(a)
    check_vmap(_clip_into_larger, [a])


def test_astype_of_a_numpy_scalar_stays_a_scalar() -> None:
    # `np.astype` of a NumPy scalar is a scalar (NumPy 2), so `s -= array` rebinds it;
    # vmap made it a 0-d array and the in-place operator raised where the loop works
    if not hasattr(np, "astype"):
        pytest.skip("np.astype is NumPy 2's")

    def f(x: np.ndarray) -> Any:
        s = np.astype(np.nanmin(x, axis=None, keepdims=True), np.float32).copy()
        s -= np.array([0.5, 2.0])
        return s

    check_vmap(f, [np.array([-0.87, 1.0])])


def _divmod_one_out(a: np.ndarray) -> Any:
    return np.divmod(a, 0.3, out=(a.copy(), None))


def _modf_other_out(a: np.ndarray) -> Any:
    return np.modf(a, out=(None, a.copy()))


def test_an_output_left_to_numpy_among_several() -> None:
    # `out=(o, None)` on a two-output ufunc: the None output is NumPy's own new array
    a = np.random.default_rng(0).random((3, 4)) + 0.5
    check_vmap(_divmod_one_out, [a])
    check_vmap(_modf_other_out, [a])


def _converted_scalar_added_in_place(x: np.ndarray) -> Any:
    s = np.asarray(x[0])  # (a 0-d array: NumPy converts the scalar x[0])
    s += np.ones(2)  # (into a 0-d array: NumPy raises)
    return s


def _taken_scalar_added_in_place(x: np.ndarray) -> Any:
    s = np.take(x, 0)  # (a NumPy scalar, as is np.digitize's)
    s += np.ones(2)  # (rebinds)
    return s + np.digitize(x[1], [0.3, 0.6])


def test_numpy_scalars_and_0d_arrays_from_conversions_and_take() -> None:
    x = np.random.default_rng(1).random((3, 4))
    with pytest.raises(ValueError, match="non-broadcastable output operand"):
        _converted_scalar_added_in_place(x[0])
    with pytest.warns(vmapx.PerformanceWarning):  # (a library conversion: the loop decides)
        with pytest.raises(ValueError, match="non-broadcastable output operand"):
            vmapx.vmap(_converted_scalar_added_in_place)(x)
    check_vmap(_taken_scalar_added_in_place, [x])


def _added_into_ints(x: np.ndarray) -> Any:
    y = (x * 10).astype(np.int64)
    np.add(y, x, out=y)  # (float results into ints: NumPy refuses under "same_kind")
    return y


def test_a_ufunc_output_of_a_narrower_kind_raises_numpys_error() -> None:
    # vmap wrote the float sums into the int array (truncating them) where NumPy raises
    x = np.random.default_rng(2).random((3, 4))
    with pytest.raises(TypeError, match="Cannot cast ufunc 'add' output"):
        _added_into_ints(x[0])
    with pytest.raises(TypeError, match="Cannot cast ufunc 'add' output"):
        vmapx.vmap(_added_into_ints)(x)
    unsafe = lambda x: np.add(  # noqa: E731
        (x * 10).astype(np.int64), x, out=(x * 10).astype(np.int64), casting="unsafe"
    )
    check_vmap(unsafe, [x])


def test_numpy_scalars_are_no_outputs_and_take_no_items() -> None:
    x = np.random.default_rng(3).random((3, 4))

    def into_scalar(x: np.ndarray) -> Any:
        return np.add(x[0], 1.0, out=x[1])

    def summed_into_scalar(x: np.ndarray) -> Any:
        return np.sum(x, out=x[1])

    def item_of_scalar(x: np.ndarray) -> Any:
        s = x[0].astype(np.float32)
        s[()] = 3
        return s

    for f, match in (
        (into_scalar, "ArrayType"),
        (summed_into_scalar, "ArrayType|output must be an array"),  # (NumPy 2, 1.26)
        (item_of_scalar, "does not support item assignment"),
    ):
        with pytest.raises(TypeError, match=match):
            f(x[0])
        with pytest.raises(TypeError, match=match):
            vmapx.vmap(f)(x)


def test_np_astype_without_a_copy_is_the_array_itself() -> None:
    # `np.astype(y, y.dtype, copy=False)` is `y`: a write into it is a write into `y`;
    # vmap made a copy, so `y` came back unchanged (a silent wrong value)
    if not hasattr(np, "astype"):
        pytest.skip("np.astype is NumPy 2's")

    def f(x: np.ndarray) -> Any:
        y = x.copy()
        s = np.astype(y, np.float64, copy=False)
        s += 1
        t = np.astype(y, np.float32, copy=False)  # (another dtype: a copy)
        t += 1
        return y, s, t

    check_vmap(f, [np.random.default_rng(4).random((3, 4))])


def test_np_astype_on_another_device_raises_numpys_error() -> None:
    if not hasattr(np, "astype"):
        pytest.skip("np.astype is NumPy 2's")
    f = lambda x: np.astype(x, np.float32, device="gpu")  # noqa: E731
    x = np.ones((2, 3))
    with pytest.raises(ValueError, match="Device not understood"):
        f(x[0])
    with pytest.raises(ValueError, match="Device not understood"):
        vmapx.vmap(f)(x)
    check_vmap(lambda x: np.astype(x, np.float32, device="cpu"), [x])


def test_an_integer_conversion_of_an_unbatched_derivative_tracer() -> None:
    # `np.array(traced, np.uint8)` under `vmap(grad)` of an unbatched argument gives a
    # plain array (integers carry no derivative): marking it raised AttributeError
    def f(x: Any, y: Any) -> Any:
        return np.sum(np.array(np.clip(x, 0, 9), np.uint8) * x * y + np.asarray(x, int))

    g = vmapx.grad(f)
    x, y = np.array([0.5, 1.5, 3.0]), np.arange(4.0)
    check_vmap(g, [x, y], in_axes=(None, 0))


def test_a_loop_value_never_is_its_initial_array() -> None:
    # with no iteration, the Python loop's value was `init_val` itself, which `f` then
    # wrote in place; a batched loop's examples that ran are new arrays (seed 9101034888)
    def f(x: Any) -> Any:
        n = np.sum(np.abs(np.modf(x)[0]) > 0.5)
        v = vmapx.fori_loop(0, n, lambda i, u: u * 0.5 + i, x)
        w = vmapx.while_loop(lambda u: u[0] < 0, lambda u: u + 1, x)
        x[0] = 1
        return -v, w

    x = np.array([[1.56], [-0.67], [1.85], [0.13]])
    check_vmap(f, [x.copy()])
    check_vmap(f, [np.tile(x, (1, 2)).T.copy()], in_axes=1)  # (examples of 2 elements)
