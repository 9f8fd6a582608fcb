"""The `vmap` API: the seeds' examples, in/out axes, pytrees, kwargs, chunks, errors."""

from __future__ import annotations

import re
import threading
from collections import namedtuple

import numpy as np
import optree
import pytest

import vmapx
from harness import assert_same, check_vmap, loop_reference, peak_bytes
from vmapx import errors, vmap

rng = np.random.default_rng(0)


# -- the seeds' examples, in NumPy ------------------------------------------------------


def test_batched_dot() -> None:
    x, y = rng.normal(size=(2, 5)), rng.normal(size=(2, 5))
    assert_same(vmap(np.dot)(x, y), np.einsum("ij,ij->i", x, y))


def test_nested_batched_dot() -> None:
    x, y = rng.normal(size=(2, 3, 5)), rng.normal(size=(2, 3, 5))
    got = vmap(vmap(np.dot))(x, y)
    assert got.shape == (2, 3)
    assert_same(got, np.einsum("ijk,ijk->ij", x, y))


def test_in_axes_one() -> None:
    x, y = rng.normal(size=(2, 5)), rng.normal(size=(2, 5))
    got = vmap(np.dot, in_axes=1)(x, y)
    assert got.shape == (5,)
    assert_same(got, (x * y).sum(0))


def test_in_axes_none() -> None:
    x, y = rng.normal(size=(2, 5)), rng.normal(size=5)
    assert_same(vmap(np.dot, in_axes=(0, None))(x, y), x @ y)


def test_dict_inputs() -> None:
    x, y = rng.normal(size=(2, 5)), rng.normal(size=5)
    got = vmap(lambda d: np.dot(d["x"], d["y"]), in_axes=({"x": 0, "y": None},))({"x": x, "y": y})
    assert_same(got, x @ y)


def test_in_dims_alias_and_out_dims() -> None:
    x = rng.normal(size=(2, 5))
    got = vmap(lambda v: v**2, out_dims=1)(x)
    assert got.shape == (5, 2)
    assert_same(got, (x**2).T)
    assert_same(vmap(np.dot, in_dims=(0, None))(x, x[0]), x @ x[0])


def test_kwargs_unbatched() -> None:
    x = rng.normal(size=(2, 5))

    def fn(v, scale=4.0):
        return v * scale

    assert_same(vmap(fn)(x), x * 4)
    with pytest.warns(vmapx.errors.KeywordArgumentWarning):  # (looks like the batch)
        assert vmap(fn)(x, scale=x).shape == (2, 2, 5)


def test_outer_product_seed() -> None:
    a = np.ones((100, 8, 8))
    got = vmap(lambda a: np.tensordot(a, a, 0))(a)
    assert got.shape == (100, 8, 8, 8, 8)
    got2 = vmapx.vectorized_map(lambda a: np.tensordot(a, a, 0), a)
    assert_same(got2, got)


# -- pytrees, axes ------------------------------------------------------------------------


def test_tuple_list_namedtuple_trees() -> None:
    Pair = namedtuple("Pair", "a b")
    x = rng.normal(size=(3, 4))

    def f(t, lst, p):
        return {"s": t[0] + lst[1], "p": Pair(p.a * 2, p.b.sum())}

    out = vmap(f, in_axes=((0, None), [None, 0], Pair(0, 1)))((x, 1.0), [2.0, x], Pair(x, x.T))
    assert_same(out["s"], x + x)
    assert isinstance(out["p"], Pair)
    assert_same(out["p"].a, 2 * x)
    assert_same(out["p"].b, x.sum(1))


def test_negative_in_and_out_axes() -> None:
    x = rng.normal(size=(4, 3))
    check_vmap(lambda v: v * 2, [x], in_axes=-1, out_axes=-1)
    check_vmap(lambda v: np.outer(v, v), [x], in_axes=(-1,), out_axes=-2)


def test_out_axes_none_for_unbatched_output() -> None:
    x = rng.normal(size=(3, 4))
    a, b = vmap(lambda v: (v.sum(), np.ones(2)), out_axes=(0, None))(x)
    assert_same(a, x.sum(1))
    assert_same(b, np.ones(2))


def test_unbatched_output_is_repeated_like_the_loop() -> None:
    x = rng.normal(size=(3, 4))
    got = vmap(lambda v: np.arange(2.0))(x)
    assert_same(got, np.tile(np.arange(2.0), (3, 1)))
    got[0, 0] = 5.0  # a fresh writable array, as the loop gives
    assert got[1, 0] == 0.0


def test_non_array_arguments_pass_through() -> None:
    x = rng.normal(size=(3, 4))
    got = vmap(lambda v, name, n: v[:n] if name == "head" else v, in_axes=(0, None, None))(
        x, "head", 2
    )
    assert_same(got, x[:, :2])


def test_python_scalar_outputs() -> None:
    x = rng.normal(size=(3, 4))
    assert_same(vmap(lambda v: 1.5)(x), np.full(3, 1.5))


def test_axis_size_without_mapped_arguments() -> None:
    got = vmap(lambda: np.ones(2), axis_size=3)()
    assert_same(got, np.ones((3, 2)))


def test_zero_size_batch() -> None:
    x = np.zeros((0, 4))
    got = vmap(lambda v: (v @ np.ones((4, 2))).sum(-1) + v.mean())(x)
    assert got.shape == (0,)


def test_chunk_size_gives_identical_results() -> None:
    x = rng.normal(size=(10, 4))
    f = lambda v: np.tanh(v) @ np.ones(4)  # noqa: E731
    assert_same(vmap(f, chunk_size=3)(x), vmap(f)(x), rtol=0, atol=0)
    check_vmap(lambda v: v.cumsum(), [x], in_axes=0)


def test_chunk_size_with_out_axes() -> None:
    x = rng.normal(size=(7, 4))
    assert_same(vmap(lambda v: v * 2, out_axes=1, chunk_size=2)(x), (x * 2).T)


def test_deep_nesting() -> None:
    x = rng.normal(size=(2, 3, 4, 5))
    got = vmap(vmap(vmap(lambda v: v.sum() * v)))(x)
    assert_same(got, x.sum(-1, keepdims=True) * x)


def test_vmap_of_vmap_with_in_axes_mix() -> None:
    x, w = rng.normal(size=(2, 3, 4)), rng.normal(size=(3, 4))
    got = vmap(vmap(np.dot, in_axes=(0, 0)), in_axes=(0, None))(x, w)
    assert_same(got, np.einsum("abk,bk->ab", x, w))


# -- semantics -----------------------------------------------------------------------------


def test_caller_arrays_are_not_mutated() -> None:
    x = rng.normal(size=(3, 4))
    before = x.copy()

    def f(v):
        v[0] = 100.0
        v += 1
        return v

    got = vmap(f)(x)
    assert_same(x, before, rtol=0, atol=0)
    expected = before.copy()
    expected[:, 0] = 100.0
    assert_same(got, expected + 1)


def test_inplace_write_through_view_falls_back_correctly() -> None:
    x = rng.normal(size=(3, 4))

    def f(v):
        v = v.copy()
        w = v[1:]
        w[0] = -1.0  # writes into v too, in NumPy
        return v

    with pytest.warns(vmapx.PerformanceWarning, match="view"):
        got = vmap(f)(x)
    assert_same(got, loop_reference(f, [x], 0))


def test_python_if_when_examples_agree_stays_batched() -> None:
    x = np.abs(rng.normal(size=(3, 4))) + 1

    def f(v):
        if v.min() > 0:
            return np.log(v)
        return v

    check_vmap(f, [x], in_axes=0)  # warnings are errors: no fallback happened


def test_python_if_when_examples_disagree_loops_with_warning() -> None:
    x = np.array([[1.0, 2.0], [-1.0, -2.0]])

    def f(v):
        if v.sum() > 0:
            return v * 2
        return -v

    with pytest.warns(vmapx.PerformanceWarning, match=r"bool\(\).*test_api.py:\d+"):
        got = vmap(f)(x)
    assert_same(got, np.array([[2.0, 4.0], [1.0, 2.0]]))


def test_range_of_batched_value_when_equal() -> None:
    n = np.array([3, 3])

    def f(k):
        return sum(float(i) for i in range(k))

    assert_same(vmap(f)(n), np.array([3.0, 3.0]))


def test_float_of_differing_values_loops() -> None:
    x = np.array([1.0, 2.0])
    with pytest.warns(vmapx.PerformanceWarning, match="float"):
        got = vmap(lambda v: np.full(2, float(v)))(x)
    assert_same(got, np.array([[1.0, 1.0], [2.0, 2.0]]))


def test_asarray_stays_batched() -> None:
    # np.asarray of a batched value gives the value itself (see test_passthrough.py)
    x = rng.normal(size=(3, 2))
    got = vmap(lambda v: np.asarray(v) * 2)(x)
    assert_same(got, x * 2)


def test_write_into_plain_array_loops_and_suggests_zeros_like() -> None:
    x = rng.normal(size=(3, 2))

    def f(v):
        out = np.zeros(3)
        out[1:] = v
        return out

    with pytest.warns(vmapx.PerformanceWarning, match="zeros_like"):
        got = vmap(f)(x)
    assert_same(got, loop_reference(f, [x], 0))


def test_zeros_like_buffer_stays_batched() -> None:
    x = rng.normal(size=(3, 2))

    def f(v):
        out = np.zeros_like(v, shape=(3,))
        out[1:] = v
        return out

    check_vmap(f, [x], in_axes=0)


def test_plain_indexed_by_batched_index_loops() -> None:
    table = rng.normal(size=(5, 2))
    idx = np.array([0, 3, 4])
    with pytest.warns(vmapx.PerformanceWarning):
        got = vmap(lambda i: table[i])(idx)
    assert_same(got, table[idx])


def test_data_dependent_shape_loops_when_shapes_differ() -> None:
    x = np.array([[1.0, -1.0, 2.0], [1.0, 2.0, 3.0]])

    def f(v):
        return v[v > 0].sum()

    with pytest.warns(vmapx.PerformanceWarning, match="boolean mask"):
        got = vmap(f)(x)
    assert_same(got, np.array([3.0, 6.0]))


def test_swallowed_signal_still_gives_loop_answer() -> None:
    x = np.array([1.0, -1.0])

    def f(v):
        try:
            flag = bool(v > 0)
        except Exception:  # a broad except must not hide the batch
            flag = True
        return v * (2 if flag else 3)

    with pytest.warns(vmapx.PerformanceWarning):
        got = vmap(f)(x)
    assert_same(got, np.array([2.0, -3.0]))


def test_fallback_error_mode_raises_typed_error() -> None:
    x = np.array([1.0, -1.0])

    def f(v):
        return v if v > 0 else -v

    with pytest.raises(errors.ConcretizationError, match=r"bool\(\).*Fix: use `np.where"):
        vmap(f, fallback="error")(x)


def test_fallback_config_global() -> None:
    x = np.array([1.0, -1.0])
    old = vmapx.config.fallback
    vmapx.config.fallback = "error"
    try:
        with pytest.raises(errors.ConcretizationError):
            vmap(lambda v: float(v))(x)
    finally:
        vmapx.config.fallback = old
    with pytest.raises(ValueError, match="fallback"):
        vmapx.config.fallback = "sometimes"


def test_silent_fallback() -> None:
    x = np.array([1.0, -1.0])
    got = vmap(lambda v: v if v > 0 else -v, fallback="silent")(x)
    assert_same(got, np.array([1.0, 1.0]))


def test_function_without_rule_loops_with_one_warning_naming_it() -> None:
    x = rng.normal(size=(3, 4))
    with pytest.warns(vmapx.PerformanceWarning, match="np.array2string") as record:
        got = vmap(np.array2string)(x)
    assert len(record) == 1
    assert_same(got, np.stack([np.array2string(v) for v in x]))


def test_vectorized_map_without_loop_raises() -> None:
    x = np.array([1.0, -1.0])
    with pytest.raises(errors.ConcretizationError):
        vmapx.vectorized_map(lambda v: v if v > 0 else -v, x, fallback_to_loop=False)
    got = vmapx.vectorized_map(lambda v: v if v > 0 else -v, x, warn=False)
    assert_same(got, np.array([1.0, 1.0]))


def test_vectorized_map_tuple_elems_seed() -> None:
    inputs, labels = rng.random((10, 32)), rng.random((10, 1))
    kernel = rng.normal(size=(32, 1))

    def model(arg):
        inp, label = arg
        return 0.5 * np.sum((label - inp @ kernel) ** 2)

    got = vmapx.vectorized_map(model, (inputs, labels))
    assert_same(got, 0.5 * ((labels - inputs @ kernel) ** 2).sum(1))


def test_scipy_special_ufuncs_batch_natively() -> None:
    special = pytest.importorskip("scipy.special")
    x = rng.uniform(0.1, 2, size=(4, 3))
    check_vmap(lambda v: special.gamma(v) + special.erf(v) + special.expit(v), [x], 0)
    check_vmap(lambda v, w: special.xlogy(v, w), [x, x[0]], (0, None))


def test_results_are_plain_ndarrays() -> None:
    out = vmap(lambda v: (v, v.sum()))(np.ones((2, 3)))
    assert all(type(o) is np.ndarray for o in out)


def test_dtypes_match_the_loop() -> None:
    for dtype in (np.bool_, np.int32, np.int64, np.float32, np.float64, np.complex128):
        x = (rng.normal(size=(3, 4)) * 3).astype(dtype)
        check_vmap(lambda v: v * 2 + v.sum(), [x], 0)
        check_vmap(lambda v: np.abs(v).max(-1), [x], 0)


# -- threads and state --------------------------------------------------------------------


def test_threads_do_not_interfere() -> None:
    errors_seen = []

    def work(seed: int) -> None:
        r = np.random.default_rng(seed)
        x, w = r.normal(size=(50, 8)), r.normal(size=(8, 3))
        try:
            for _ in range(20):
                got = vmap(vmap(lambda v: np.tanh(v @ w) * v.sum()))(x.reshape(5, 10, 8))
                expected = (np.tanh(x @ w) * x.sum(-1, keepdims=True)).reshape(5, 10, 3)
                np.testing.assert_allclose(got, expected, rtol=1e-12)
        except Exception as e:  # collected and re-raised in the main thread
            errors_seen.append(e)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors_seen, errors_seen


def test_exception_inside_f_leaves_no_state() -> None:
    from vmapx._core import current_level

    def bad(v):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        vmap(bad)(np.ones((2, 3)))
    assert current_level() == 0


def test_escaped_tracer_raises() -> None:
    leaked = []

    def f(v):
        leaked.append(v)
        return v

    vmap(f)(np.ones((2, 3)))
    with pytest.raises(errors.EscapedTracerError, match="escaped"):
        np.sin(leaked[0])


# -- errors --------------------------------------------------------------------------------


def test_inconsistent_sizes_names_each_argument() -> None:
    def f(x, y):
        return x + y

    with pytest.raises(errors.AxisSizeError) as e:
        vmap(f)(np.ones((3, 2)), np.ones((4, 2)))
    msg = str(e.value)
    assert "argument `x`" in msg and "size 3" in msg
    assert "argument `y`" in msg and "size 4" in msg


def test_in_axes_out_of_range() -> None:
    with pytest.raises(errors.InAxesError, match=r"in_axes=2 is out of range.*shape \(3, 2\)"):
        vmap(lambda x: x, in_axes=2)(np.ones((3, 2)))


def test_in_axes_length_mismatch() -> None:
    with pytest.raises(errors.InAxesError, match="length 1.*2 positional"):
        vmap(lambda x, y: x, in_axes=(0,))(np.ones(3), np.ones(3))


def test_in_axes_structure_mismatch() -> None:
    with pytest.raises(errors.InAxesError, match="does not match the structure"):
        vmap(lambda d: d["a"], in_axes=({"b": 0},))({"a": np.ones(3)})


def test_in_axes_bad_type() -> None:
    with pytest.raises(errors.InAxesError, match="must be an int, None"):
        vmap(lambda x: x, in_axes=1.5)
    with pytest.raises(errors.InAxesError, match="out_axes"):
        vmap(lambda x: x, out_axes="a")


def test_mapping_a_scalar_or_non_array() -> None:
    with pytest.raises(errors.InAxesError, match="0-d value cannot be mapped"):
        vmap(lambda x: x)(np.float64(1.0))
    with pytest.raises(errors.InAxesError, match="no axis to map over"):
        vmap(lambda s: s, in_axes=0)("abc")


def test_mapping_a_0d_array_names_it() -> None:
    with pytest.raises(errors.InAxesError, match="0-d value cannot be mapped"):
        vmap(lambda x, y: x + y)(np.ones(3), np.array(2.0))


@pytest.mark.parametrize(
    ("f", "in_axes", "out_axes"),
    [
        (lambda x, y: x * y, 0, 0),
        (lambda x, y: x, 0, 0),  # an argument returned as it is: a copy, like the loop
        (lambda x, y: (x.sum(), y[::-1]), 0, 0),
        (lambda x, y: x @ y.T, (0, None), 1),
        (lambda x, y: np.sin(x) + y, (None, 0), 0),
        (lambda x, y: x - y.sum(), (0, 0), -1),
    ],
)
def test_plain_array_calls_match_pytree_calls_and_the_loop(f, in_axes, out_axes) -> None:
    """Positional NumPy arrays take a shorter path through `vmap` than pytrees; both
    give the loop's answer."""
    x, y = rng.normal(size=(5, 3)), rng.normal(size=(5, 3))
    expected = loop_reference(f, (x, y), in_axes, out_axes)
    got = vmap(f, in_axes, out_axes)(x, y)
    axes = in_axes if isinstance(in_axes, tuple) else (in_axes, in_axes)
    via_tree = vmap(lambda xy: f(*xy), in_axes=(axes,), out_axes=out_axes)((x, y))
    assert_same(got, expected)
    assert_same(via_tree, expected)
    for out in optree.tree_leaves(got):
        assert not np.shares_memory(out, x) and not np.shares_memory(out, y)


def test_no_mapped_argument_needs_axis_size() -> None:
    with pytest.raises(errors.AxisSizeError, match="axis_size"):
        vmap(lambda x: x, in_axes=None)(np.ones(3))


def test_axis_size_conflict() -> None:
    with pytest.raises(errors.AxisSizeError, match="axis_size=5"):
        vmap(lambda x: x, axis_size=5)(np.ones((3, 2)))


def test_non_array_output() -> None:
    with pytest.raises(errors.OutputError, match="output 0 is a str"):
        vmap(lambda x: "hello")(np.ones((3, 2)))


def test_out_axes_none_for_batched_output() -> None:
    with pytest.raises(errors.InAxesError, match="out_axes is None"):
        vmap(lambda x: x, out_axes=None)(np.ones((3, 2)))


def test_out_axes_out_of_range() -> None:
    with pytest.raises(errors.InAxesError, match="out_axes=3 is out of range"):
        vmap(lambda x: x, out_axes=3)(np.ones((3, 2)))


def test_bad_options() -> None:
    with pytest.raises(ValueError, match="chunk_size"):
        vmap(lambda x: x, chunk_size=0)
    with pytest.raises(ValueError, match="randomness"):
        vmap(lambda x: x, randomness="sometimes")
    with pytest.raises(ValueError, match="fallback"):
        vmap(lambda x: x, fallback="never")
    with pytest.raises(TypeError, match="callable"):
        vmap(3)


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"chunk_size": 0}, "`chunk_size` must be a positive int, 'auto' or None, got 0"),
        ({"chunk_size": True}, "`chunk_size` must be a positive int"),
        ({"axis_size": -1}, "`axis_size` must be a non-negative int, got -1"),
        ({"randomness": "sometimes"}, "`randomness` must be one of"),
        ({"fallback": "never"}, "`fallback` must be one of"),
        ({"chunk_size": 2, "axis_name": "i"}, "`chunk_size` cannot be combined with `axis_name`"),
        ({"workers": 0}, "`workers` must be a positive int or None, got 0"),
    ],
)
def test_each_bad_option_raises_an_argument_error_naming_it(options, named) -> None:
    with pytest.raises(errors.ArgumentError, match=re.escape(f"vmap: {named}")):
        vmap(lambda x: x, **options)


def test_truth_value_of_array_is_ambiguous_like_numpy() -> None:
    with pytest.raises(ValueError, match="ambiguous"):
        vmap(lambda x: 1.0 if x else 0.0)(np.ones((2, 3)))


def test_results_never_alias_the_callers_arrays() -> None:
    x = rng.normal(size=(3, 4))
    for f in (lambda v: v, lambda v: v[1:], lambda v: v.T, lambda v: np.zeros_like(v)):
        out = vmap(f)(x)
        assert not np.shares_memory(out, x)
        assert out.flags.writeable
        out[...] = 7.0
    assert not (x == 7.0).any()


def test_the_loop_fallback_never_writes_the_callers_arrays() -> None:
    x, w = rng.normal(size=(2, 3, 4)), rng.normal(size=4)
    x0, w0 = x.copy(), w.copy()

    def f(x, w):
        v = x[1:]
        v[0] = 5.0  # through a view: the batched run cannot, the loop runs
        return x + w

    with pytest.warns(vmapx.PerformanceWarning):
        got = vmap(f, in_axes=(0, None))(x, w)
    assert_same(got, loop_reference(f, (x.copy(), w.copy()), (0, None)))
    np.testing.assert_array_equal(x, x0)
    np.testing.assert_array_equal(w, w0)


def test_an_unmapped_argument_is_read_only_inside_f() -> None:
    w = np.zeros(3)

    def f(w, x):
        w[0] = 7.0
        return w + x

    with pytest.raises(ValueError, match="read-only") as info:
        vmap(f, in_axes=(None, 0))(w, np.ones((2, 3)))
    if hasattr(info.value, "__notes__"):
        assert "w = w.copy()" in info.value.__notes__[0]
    np.testing.assert_array_equal(w, np.zeros(3))
    ok = vmap(lambda w, x: (w := w.copy()).__setitem__(0, 7.0) or w + x, in_axes=(None, 0))
    assert_same(ok(w, np.ones((2, 3))), np.array([[8.0, 1.0, 1.0]] * 2))


@pytest.mark.parametrize("returned", ["view", "view in a tuple"])
def test_a_returned_view_of_a_written_array_has_the_written_values(returned) -> None:
    x = rng.normal(size=(3, 4))

    def f(x):
        x = x.copy()
        v = x[1:]
        x[1] = 9.0  # after the view was taken: NumPy's view shows it
        return v if returned == "view" else (x, v)

    with pytest.warns(vmapx.PerformanceWarning):
        got = vmap(f)(x)
    assert_same(got, loop_reference(f, (x,), 0))


def test_write_into_base_after_taking_a_view_stays_batched() -> None:
    x = rng.normal(size=(4, 3, 2))

    def f(v):
        v = v.copy()
        v[v[:, 0] > 0] = 0.0  # `v[:, 0]` is a view of `v`, gone before the write
        h = np.zeros_like(v)
        for i in range(1, 3):
            h[i] = np.tanh(h[i - 1] + v[i])  # reads views of `h`, writes into `h`
        return h

    check_vmap(f, [x], in_axes=0)  # warnings are errors: stayed batched


def test_stale_view_after_write_into_base_gives_the_loop_answer() -> None:
    x = rng.normal(size=(3, 4))

    def f(v):
        v = v.copy()
        head = v[:2]
        v[0] = 100.0  # NumPy shows this write through `head`
        return head * 1.0

    with pytest.warns(vmapx.PerformanceWarning, match="view"):
        got = vmap(f)(x)
    assert_same(got, loop_reference(f, [x], 0))


def test_chunk_size_bounds_peak_memory() -> None:
    x = rng.normal(size=(400, 50))

    def f(v):  # a (50, 50) intermediate per example: 8 MB for the whole batch at once
        return np.tanh(np.outer(v, v)).sum(0)

    whole = peak_bytes(lambda: vmap(f)(x), warm=False)
    chunked = peak_bytes(lambda: vmap(f, chunk_size=20)(x), warm=False)
    assert chunked < whole / 5, (chunked, whole)
    assert_same(vmap(f, chunk_size=20)(x), vmap(f)(x), rtol=0, atol=0)


def test_fallback_warning_names_the_users_line_not_numpys() -> None:
    x = rng.normal(size=(3, 2))

    def f(v):
        return np.require(v, requirements="W") * 2  # NumPy's own code reads `v.flags`

    with pytest.warns(vmapx.PerformanceWarning, match=r"at [^ ]*test_api.py:\d+;") as record:
        got = vmap(f)(x)
    assert "numpy" not in str(record[0].message).split(" at ")[1].split(";")[0]
    assert_same(got, x * 2)
