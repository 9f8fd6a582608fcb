"""Regression tests for defects that gave wrong answers, crashes or wrong refusals."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import vmapx
from harness import assert_same, check_vmap
from vmapx import jit, value_and_grad, vmap

# -- an in-place operator on a per-example NumPy scalar rebinds it -------------------


def _count_plus_half(x):
    n = np.sum(x > 0)
    n += 0.5
    return n


def _sum_plus_f64(x):
    s = x.sum()
    s += np.float64(0.5)
    return s


def _sum_plus_x(x):
    s = x.sum()
    s += x
    return s


def _element_plus_half(x):
    e = x[0]
    e *= 1.5
    return e


@pytest.mark.parametrize(
    "f, x",
    [
        (_count_plus_half, np.array([[1.0, -1.0, 2.0], [3.0, 4.0, -5.0]])),
        (_sum_plus_f64, np.ones((2, 3), np.float32)),
        (_sum_plus_x, np.ones((2, 1))),
        (_sum_plus_x, np.ones((2, 3))),
        (_element_plus_half, np.arange(6).reshape(2, 3)),
    ],
)
def test_inplace_on_numpy_scalar_rebinds_under_vmap(f, x):
    check_vmap(f, (x,))


def test_inplace_on_0d_array_stays_in_place():
    def f(x):
        a = np.where(x > 1, x, 0)
        b = a
        a *= 3  # a 0-d array: written in place, `b` sees it
        return b

    check_vmap(f, (np.arange(3),))


@pytest.mark.parametrize("transform", [jit, lambda f: value_and_grad(f)])
def test_inplace_on_numpy_scalar_rebinds_under_jit_and_grad(transform):
    x = np.ones(3, np.float32)
    got = transform(_sum_plus_f64)(x)
    got = got[0] if isinstance(got, tuple) else got
    assert np.asarray(got).dtype == _sum_plus_f64(x).dtype == np.float64


# -- reverse mode: an in-place write into the differentiated argument ----------------


def _write_then_square_sum(a):
    a[1] = 3.0
    return np.sum(a * a)


@pytest.mark.parametrize("transform", [vmapx.grad, vmapx.jacrev])
def test_grad_through_write_into_argument(transform):
    x = np.arange(5.0)
    expected = 2 * x
    expected[1] = 0.0
    np.testing.assert_allclose(transform(_write_then_square_sum)(x), expected)
    vmapx.check_grads(_write_then_square_sum, (x,), order=2)


# -- fori_loop with batched bounds: the index is a Python int in the loop -------------


def _fori_add_index(lower, c):
    return vmapx.fori_loop(lower, 3, lambda i, c: c + i, c)


def test_fori_loop_batched_lower_keeps_the_loops_dtype():
    args = (np.array([0, 1, 2]), np.ones(3, np.float32))
    with pytest.warns(vmapx.PerformanceWarning, match="fori_loop"):
        check_vmap(_fori_add_index, args)  # (float32 on NumPy 2: a Python int is weak)


def test_fori_loop_batched_bound_same_dtype_stays_batched():
    check_vmap(_fori_add_index, (np.array([0, 1, 2]), np.ones(3)))


# -- a random draw of one number is a Python number per example (weakly typed) -------


def _times_normal(x, g):
    return x * g.normal()


def _plus_twice_poisson(x, g):
    return x + 2 * g.poisson(1.5)


def _ufunc_of_draw(x, g):
    return np.add(x, -g.random())


def _draw_plus_in_place(x, g):
    s = g.normal()
    s += x
    return s


@pytest.mark.parametrize(
    "f", [_times_normal, _plus_twice_poisson, _ufunc_of_draw, _draw_plus_in_place]
)
@pytest.mark.parametrize("dtype", [np.float32, np.complex64, np.float16, np.int8])
def test_draw_of_one_number_promotes_like_a_python_number(f, dtype):
    x = np.arange(1, 7).reshape(3, 2).astype(dtype)  # (arrays: NumPy 1.26 promotes scalars)
    got = vmap(f, in_axes=(0, None), randomness="different")(x, np.random.default_rng(0))
    rng = np.random.default_rng(0)
    assert_same(got, np.stack([f(e, rng) for e in x]), rtol=1e-3)


# -- nested vmaps with randomness="different" draw the loop's numbers ----------------


def _loop_of_loops(f, xs, rng):
    return np.stack([np.stack([f(x, rng) for x in row]) for row in xs])


_NESTED_DRAWS = [
    lambda x, g: x + g.choice(5, size=3),
    lambda x, g: x + g.permutation(4),
    lambda x, g: x + g.integers(0, 9, size=2, dtype=np.int16),
    lambda x, g: x + g.normal(size=2),
]


@pytest.mark.parametrize("f", _NESTED_DRAWS)
@pytest.mark.parametrize("chunk_size", [None, 2])
def test_nested_vmaps_draw_the_loops_numbers(f, chunk_size):
    xs = np.zeros((3, 4))
    inner = vmap(f, in_axes=(0, None), randomness="different", chunk_size=chunk_size)
    outer = vmap(inner, in_axes=(0, None), randomness="different")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", vmapx.PerformanceWarning)
        got = outer(xs, np.random.default_rng(0))
    assert_same(got, _loop_of_loops(f, xs, np.random.default_rng(0)))


# -- randomness="same" inside a cond whose branches split the batch ------------------


def _cond_draw(p, g):
    return vmapx.cond(p > 0, lambda g: g.normal(), lambda g: -g.normal(), g)


def _cond_uneven_draws(p, g):
    y = vmapx.cond(p > 0, lambda g: g.normal(), lambda g: 0.0, g)
    return y + g.normal()


@pytest.mark.parametrize("f", [_cond_draw, _cond_uneven_draws])
def test_same_randomness_in_cond_branches(f):
    p = np.array([1.0, -1.0, 1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", vmapx.PerformanceWarning)
        got = vmap(f, in_axes=(0, None), randomness="same")(p, np.random.default_rng(0))
    expected = [f(e, np.random.default_rng(0)) for e in p]
    assert_same(got, np.stack(expected))


# -- derivatives that were NaN where the true derivative is finite --------------------


def _sum_eigvalsh(m):
    return np.sum(np.linalg.eigvalsh(m) ** 2)


def _sum_pinv(a):
    return np.sum(np.linalg.pinv(a))


@pytest.mark.parametrize(
    "f, x",
    [
        (_sum_eigvalsh, np.eye(3)),
        (_sum_pinv, 0.1 * np.eye(3, 5)),
        (lambda a: np.linalg.pinv(a, hermitian=True), 2.0 * np.eye(3)),
        (np.std, np.array([2.0])),
        (lambda x: np.std(x, axis=1), np.arange(3.0).reshape(3, 1)),
    ],
)
def test_derivative_finite_where_true_derivative_is(f, x):
    assert np.all(np.isfinite(vmapx.jacrev(f)(x)))
    vmapx.check_grads(f, (x,), order=1)


def test_eigvalsh_gradient_at_repeated_eigenvalues_is_identity():
    got = vmapx.grad(lambda m: np.sum(np.linalg.eigvalsh(m)))(np.eye(3))
    np.testing.assert_allclose(got, np.eye(3), atol=1e-12)


# -- float()/.item() of a differentiated value is never silently a constant -----------


@pytest.mark.parametrize("convert", [float, lambda v: v.item(), complex])
@pytest.mark.parametrize("transform", [vmapx.grad, vmapx.jacfwd])
def test_python_number_of_differentiated_value_warns(convert, transform):
    def f(x):
        return np.real(x[0] * convert(x[1]))

    with pytest.warns(vmapx.errors.DroppedDerivativeWarning, match="test_regressions.py"):
        transform(f)(np.array([2.0, 3.0]))


def test_python_number_of_differentiated_value_raises_with_fallback_error(monkeypatch):
    monkeypatch.setattr(vmapx.config, "fallback", "error")
    with pytest.raises(vmapx.errors.ConcretizationError, match="constant"):
        vmapx.grad(lambda x: x[0] * float(x[1]))(np.array([2.0, 3.0]))


def test_python_number_of_a_constant_is_quiet():
    out = vmapx.grad(lambda x: x[0] * float(vmapx.stop_gradient(x[1])) + int(x[1]))(
        np.array([2.0, 3.0])
    )
    np.testing.assert_allclose(out, [3.0, 0.0])


# -- NumPy's legacy global random functions inside vmap run as the loop ---------------


def _legacy_draws(x):
    return x + np.random.normal() + np.random.rand(2)


def test_legacy_global_random_runs_as_the_loop():
    xs = np.zeros((4, 2))
    state = np.random.get_state()
    try:
        np.random.seed(0)
        with pytest.warns(vmapx.PerformanceWarning, match="default_rng"):
            got = vmap(_legacy_draws)(xs)
        np.random.seed(0)
        assert_same(got, np.stack([_legacy_draws(x) for x in xs]))
    finally:
        np.random.set_state(state)


def test_legacy_global_random_raises_with_fallback_error():
    state = np.random.get_state()
    try:
        with pytest.raises(vmapx.errors.ConcretizationError, match="legacy"):
            vmap(_legacy_draws, fallback="error")(np.zeros((4, 2)))
        assert vmapx._legacy_random.moved(vmapx._legacy_random.snapshot()) is False
    finally:
        np.random.set_state(state)


def test_legacy_state_snapshot_sees_a_cached_gaussian_taken():
    from vmapx import _legacy_random

    state = np.random.get_state()
    try:
        np.random.seed(1)
        np.random.normal()  # the second of the pair is cached now
        saved = _legacy_random.snapshot()
        np.random.normal()  # taken from the cache: the MT19937 words do not move
        assert _legacy_random.moved(saved)
    finally:
        np.random.set_state(state)


# -- moveaxis/swapaxes: ranges and keyword axes ---------------------------------------


def test_moveaxis_with_ranges_under_vmap():
    check_vmap(lambda a: np.moveaxis(a, range(0, 2), range(1, 3)), (np.ones((2, 3, 4, 5)),))


def test_nested_vmap_of_tensordot_batched_on_the_second_operand():
    a, b = np.arange(120.0).reshape(2, 3, 4, 5), np.arange(90.0).reshape(3, 5, 6)
    inner = vmap(lambda a, b: np.tensordot(a, b, 1), in_axes=(None, 0))
    got = vmap(inner, in_axes=(0, None))(a, b)
    expected = np.stack([np.stack([np.tensordot(x, y, 1) for y in b]) for x in a])
    assert_same(got, expected)


@pytest.mark.parametrize(
    "f",
    [
        lambda a: np.moveaxis(a, source=0, destination=1),
        lambda a: np.swapaxes(a, axis1=0, axis2=1),
    ],
)
def test_reverse_mode_of_axis_functions_with_keyword_axes(f):
    vmapx.check_grads(f, (np.arange(6.0).reshape(2, 3),), order=1)


# -- in-place operators on indexed places ---------------------------------------------


def _add_to_element(v):
    v = v * 1.0
    v[1] += v[0] ** 2
    return v


def _add_into_item(x):
    y = np.zeros_like(x)
    y[0] += x[1] ** 2
    return y


def _add_to_fancy(x):
    y = x * 1.0
    y[[0, 2]] += x[1]
    return y


def _scale_masked(x):
    y = x * 1.0
    y[x > 0] *= 3.0
    return y


def _element_read_before_write(x):
    y = x * 1.0
    e = y[0]
    y[0] = 5.0
    return y * e


_INDEXED_WRITES = [_add_to_element, _add_into_item, _add_to_fancy, _scale_masked]


@pytest.mark.parametrize("f", [*_INDEXED_WRITES, _element_read_before_write])
def test_in_place_writes_into_indexed_places_differentiate(f):
    x = np.array([1.5, -2.0, 3.0])
    vmapx.check_grads(f, (x,), order=1)
    assert_same(jit(f)(x), f(x))


@pytest.mark.parametrize("f", [_add_to_element, _add_into_item, _add_to_fancy])
def test_in_place_writes_into_indexed_places_stay_batched(f):
    check_vmap(f, (np.arange(6.0).reshape(2, 3) - 2,))  # (warnings are errors)


# -- derivatives of reductions over an empty axis -------------------------------------


@pytest.mark.parametrize("reduce", [np.prod, np.mean, np.std, np.var, np.sum, np.nanprod])
@pytest.mark.parametrize("transform", [vmapx.grad, lambda f: vmapx.jacfwd(f)])
def test_derivative_of_reduction_over_empty_axis(reduce, transform):
    x = np.ones((0, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # NumPy's own: mean of empty slice
        got = transform(lambda x: np.sum(reduce(x, axis=0)))(x)
    assert_same(got, np.zeros_like(x))


# -- axis_index inside a branch or a loop condition is a per-example value ------------


def _count_up_to_index(x, i):
    return vmapx.while_loop(lambda x: x < i, lambda x: x + 2, x)


def _add_index_where_positive(x, i):
    return vmapx.cond(x > 0, lambda x: x + i, lambda x: x, x)


@pytest.mark.parametrize("f", [_count_up_to_index, _add_index_where_positive])
def test_axis_index_in_a_branch(f):
    xs = np.array([0, -1, 1, 0])
    got = vmap(lambda x: f(x, vmapx.axis_index("i")), axis_name="i")(xs)
    assert_same(got, np.stack([f(x, i) for i, x in enumerate(xs)]))


def test_axis_index_of_two_axes_in_a_nested_branch():
    def f(x):
        return vmapx.cond(x > 0, lambda x: x * 0 + vmapx.axis_index(("i", "j")), lambda x: -x, x)

    xs = np.array([[1, -2, 3], [4, 5, -6]])
    got = vmap(vmap(f, axis_name="j"), axis_name="i")(xs)
    expected = np.where(xs > 0, np.arange(6).reshape(2, 3), -xs)
    assert_same(got, expected)


# -- Generator methods with out= under vmap --------------------------------------------


def _fill_random(x, g):
    g.random(out=x, dtype=x.dtype)
    return x


def _fill_normal_plus_one(x, g):
    buf = np.zeros_like(x)
    g.standard_normal(out=buf, dtype=x.dtype)
    return buf + 1


def _fill_plain_buffer(x, g):
    buf = np.empty(x.shape, x.dtype)
    g.standard_exponential(out=buf, dtype=x.dtype)
    return buf * x


@pytest.mark.parametrize("f", [_fill_random, _fill_normal_plus_one, _fill_plain_buffer])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_generator_out_under_vmap(f, dtype):
    xs = np.ones((3, 2), dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", vmapx.PerformanceWarning)  # a plain buffer loops
        got = vmap(f, in_axes=(0, None), randomness="different")(xs, np.random.default_rng(0))
    rng = np.random.default_rng(0)
    assert_same(got, np.stack([f(x.copy(), rng) for x in xs]))


# -- an escaped tracer is reported as one ---------------------------------------------


@pytest.mark.parametrize("transform", [vmap, vmapx.grad, vmapx.jacfwd])
def test_asarray_of_escaped_tracer(transform):
    kept = []

    def f(x):
        kept.append(x)
        return np.sum(x * x)

    transform(f)(np.ones((2, 3)) if transform is vmap else np.ones(3))
    with pytest.raises(vmapx.errors.EscapedTracerError, match="escaped"):
        np.asarray(kept[0])


# -- append of a list of traced values; derivatives of linspace and nan_to_num --------


def _append_to_list(x):
    return np.append([x[0], x[1] * 2], x)


def test_append_to_a_list_of_traced_values():
    check_vmap(_append_to_list, (np.arange(6.0).reshape(2, 3),))
    vmapx.check_grads(_append_to_list, (np.arange(3.0),), order=2)


@pytest.mark.parametrize(
    "f",
    [
        lambda a: np.linspace(a[0], a[1], 5),
        lambda a: np.linspace(a[0], a[1], 1),
        lambda a: np.linspace(a[0], a[1], 1, endpoint=False),
        lambda a: np.linspace(a[0], a[1], 4, endpoint=False, retstep=True)[1],
    ],
)
def test_linspace_derivatives(f):
    vmapx.check_grads(f, (np.array([1.0, 3.0]),), order=2)


def test_nan_to_num_derivatives():
    x = np.array([1.0, np.nan, np.inf, -np.inf])
    got = vmapx.grad(lambda x: np.sum(np.nan_to_num(x, posinf=7.0, neginf=-7.0) * 2))(x)
    assert_same(got, np.array([2.0, 0.0, 0.0, 0.0]))

    def fills(a):
        return np.nan_to_num(x + 0 * a[3], nan=a[0], posinf=a[1], neginf=a[2]) * a

    vmapx.check_grads(fills, (np.array([0.5, 2.0, -3.0, 4.0]),), order=2)


# -- a traced value written into a plain array: vmapx's error is what the user sees ---


def _write_element_into_plain(x):
    buf = np.zeros(3)
    buf[0] = x[0]
    return buf * x


def test_write_into_plain_array_under_vmap_raises_vmapx_error():
    with pytest.raises(vmapx.errors.ConcretizationError, match="test_regressions.py"):
        vmap(_write_element_into_plain, fallback="error")(np.arange(6.0).reshape(2, 3))


@pytest.mark.parametrize("transform", [vmapx.jacfwd, vmapx.jacrev])
def test_write_into_plain_array_under_derivatives_raises_vmapx_error(transform):
    with pytest.raises(vmapx.errors.ConcretizationError, match="test_regressions.py"):
        transform(_write_element_into_plain)(np.arange(3.0))


# -- every vmapx error is also the builtin exception of its kind ----------------------

_ERROR_BASES = {
    "VmapxError": (Exception,),
    "InAxesError": (vmapx.errors.VmapxError, ValueError),
    "AxisSizeError": (vmapx.errors.VmapxError, ValueError),
    "OutputError": (vmapx.errors.VmapxError, TypeError),
    "OutputShapeError": (vmapx.errors.VmapxError, ValueError),
    "ConcretizationError": (vmapx.errors.VmapxError, TypeError),
    "FallbackError": (vmapx.errors.VmapxError, NotImplementedError),
    "EscapedTracerError": (vmapx.errors.VmapxError, TypeError),
    "TraceMixError": (vmapx.errors.VmapxError, TypeError),
    "UnsupportedError": (vmapx.errors.VmapxError, NotImplementedError, TypeError),
    "ArgumentError": (vmapx.errors.VmapxError, TypeError, ValueError),
    "RandomnessError": (vmapx.errors.VmapxError, ValueError),
    "DifferentiationError": (vmapx.errors.VmapxError, TypeError),
    "ControlFlowError": (vmapx.errors.VmapxError, ValueError),
    "AxisNameError": (vmapx.errors.VmapxError, NameError),
    "RegistrationError": (vmapx.errors.VmapxError, ValueError),
    "RaggedInputError": (vmapx.errors.VmapxError, TypeError),
    "PaddingError": (vmapx.errors.VmapxError, ValueError),
    "PerformanceWarning": (UserWarning,),
    "DroppedDerivativeWarning": (UserWarning,),
    "KeywordArgumentWarning": (UserWarning,),
}


def test_every_error_class_and_its_bases():
    classes = {
        name: c
        for name, c in vars(vmapx.errors).items()
        if isinstance(c, type) and c.__module__ == vmapx.errors.__name__
    }
    assert {name: c.__bases__ for name, c in classes.items()} == _ERROR_BASES


def _two(x, y):
    return np.sum(x * y)


_BAD_ARGUMENTS = [
    lambda: vmapx.grad(_two, argnums=2)(np.ones(2), np.ones(2)),
    lambda: vmapx.grad(_two, argnums="x")(np.ones(2), np.ones(2)),
    lambda: vmapx.jacrev(_two, argnums=(0, 0))(np.ones(2), np.ones(2)),
    lambda: vmapx.jacfwd(_two, argnums=5)(np.ones(2), np.ones(2)),
    lambda: vmapx.grad(lambda x: (np.sum(x),), has_aux=True)(np.ones(2)),
    lambda: vmapx.vjp(lambda x: (x, x), np.ones(2))[1]((np.ones(2),)),
    lambda: vmapx.jvp(np.sin, np.ones(2), np.ones(2)),
    lambda: vmapx.jvp(_two, (np.ones(2), np.ones(2)), (np.ones(2),)),
]


@pytest.mark.parametrize("call", _BAD_ARGUMENTS)
def test_errors_about_arguments_are_builtin_errors(call):
    with pytest.raises(vmapx.errors.VmapxError) as info:
        call()
    assert isinstance(info.value, ValueError | TypeError)


def test_no_derivative_rule_is_a_type_error():
    with pytest.raises(vmapx.errors.DifferentiationError) as info:
        vmapx.grad(lambda x: np.sum(np.unique(x)))(np.ones(2))
    assert isinstance(info.value, TypeError)


# -- y[mask] op= v with a batched mask stays batched -----------------------------------


def _scale_where_positive(x, c):
    y = x * 1.0
    y[x > 0] *= c
    y[y < -1] += 1
    return y


def _add_vector_where_positive(x):
    y = x * 1.0
    y[x > 0] += x[x > 0]  # as many values as selected elements: only the loop knows
    return y


def test_augmented_assignment_through_batched_mask():
    xs = np.array([[1.0, -2.0, 3.0], [-4.0, 5.0, -0.5]])
    check_vmap(_scale_where_positive, (xs, np.array([2.0, 3.0])))  # (warnings are errors)
    check_vmap(_scale_where_positive, (xs, 3.0), in_axes=(0, None))
    with pytest.warns(vmapx.PerformanceWarning):
        check_vmap(_add_vector_where_positive, (xs,))


# -- an in-place operator that NumPy cannot cast back raises as NumPy does -------------


def _scale_ints_in_place(x):
    y = x * 1
    y *= 1.5
    return y


@pytest.mark.parametrize("transform", [vmap, jit])
def test_in_place_operator_that_cannot_cast_raises(transform):
    with pytest.raises(TypeError, match="[Cc]annot cast"):
        _scale_ints_in_place(np.arange(3))
    with pytest.raises(TypeError, match="[Cc]annot cast"):
        transform(_scale_ints_in_place)(np.arange(6).reshape(2, 3))


# -- a buffer made from a traced value under vmap(grad) --------------------------------


def _sum_through_buffer(x):
    r = np.zeros_like(x, shape=(3,))
    r[...] = x
    return r.sum()


def test_vmap_of_grad_through_a_zeros_like_buffer():
    got = vmap(vmapx.grad(_sum_through_buffer))(np.arange(6.0).reshape(2, 3))
    assert_same(got, np.ones((2, 3)))


def test_arctan2_derivative_with_an_integer_operand():
    """The partials of arctan2 squared and negated an integer operand in its own dtype
    (uint8: -4 is 252, 200 * 200 wraps): silently wrong gradients."""
    y = np.array([4, 17, 200], dtype=np.uint8)
    k = np.array([-100, 5, 100], dtype=np.int8)

    def f(x):
        return np.sum(np.arctan2(y, x) * np.array([1.0, -0.5, 0.25]) + np.arctan2(x, k))

    x = np.array([0.5, 1.5, -2.0])
    vmapx.check_grads(f, (x,), order=2)
    check_vmap(vmapx.grad(f), (np.stack([x, 2 * x]),))
