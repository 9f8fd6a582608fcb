"""Unmapped array arguments indexed by per-example values (`vmapx._unmapped`).

`E[t]` with `E` passed with `in_axes=None` and `t` batched gathers batched (no loop,
no warning); everything is compared with the per-example loop: values, shape, dtype,
and that results are plain, fresh `np.ndarray`s.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import vmapx
from vmapx._unmapped import UnmappedArray

RNG = np.random.default_rng(7)
E = RNG.standard_normal((6, 4))
T = np.array([0, 5, 2, -1, 3])


def loop(f, *args, in_axes):
    pairs = list(zip(args, in_axes, strict=True))
    size = next(np.shape(a)[0] for a, ax in pairs if ax == 0)
    return np.stack([f(*(a if ax is None else a[i] for a, ax in pairs)) for i in range(size)])


def batched_without_loop(f, *args, in_axes):
    with warnings.catch_warnings():
        warnings.simplefilter("error", vmapx.PerformanceWarning)
        return vmapx.vmap(f, in_axes=in_axes)(*args)


def check(f, *args, in_axes=(None, 0)):
    got = batched_without_loop(f, *args, in_axes=in_axes)
    want = loop(f, *args, in_axes=in_axes)
    assert type(got) is np.ndarray
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=0)


GATHERS = {
    "row": lambda e, t: e[t],
    "element": lambda e, t: e[t, 2],
    "column": lambda e, t: e[:, t % 4],
    "ellipsis": lambda e, t: e[..., t % 4],
    "two rows": lambda e, t: e[[t, (t + 1) % 6]],
    "row pair": lambda e, t: e[t, t % 4],
    "row then slice": lambda e, t: e[t][::-1],
    "transposed": lambda e, t: e.T[t % 4],
    "flat": lambda e, t: e.reshape(-1)[t + 7],
    "np.take rows": lambda e, t: np.take(e, t, axis=0),
    "np.take flat": lambda e, t: np.take(e, t + 9),
    "take wrap": lambda e, t: e.take(t + 11, axis=0, mode="wrap"),
    "take clip": lambda e, t: e.take(t + 4, axis=0, mode="clip"),
    "copy": lambda e, t: e.copy()[t],
    "sorted": lambda e, t: np.sort(e, axis=1)[t],
    "in arithmetic": lambda e, t: e[t] @ e[(t + 1) % 6] + e.sum(),
    "one-hot": lambda e, t: (np.arange(6) == t) @ e,
}


@pytest.mark.parametrize("name", list(GATHERS))
def test_gather_from_unmapped_array_batches(name):
    check(GATHERS[name], E, T)


def test_arrays_made_inside_f_still_run_the_loop_and_say_what_to_do():
    f = lambda e, t: np.eye(6)[t] @ e  # noqa: E731
    with pytest.warns(vmapx.PerformanceWarning, match="in_axes=None"):
        got = vmapx.vmap(f, in_axes=(None, 0))(E, T)
    np.testing.assert_array_equal(got, loop(f, E, T, in_axes=(None, 0)))
    with pytest.warns(vmapx.PerformanceWarning, match="plain NumPy array indexed"):
        vmapx.vmap(lambda t: np.take(E, t, axis=0))(T)


def test_computed_arrays_are_plain_as_in_the_loop():
    def f(e, t):
        total = e.sum()  # a NumPy scalar, as the loop's
        assert type(total) is np.float64 and type(e.sum(axis=0)) is np.ndarray
        assert type(e * 2.0) is np.ndarray and type(np.log(np.abs(e))) is np.ndarray
        return (2.0 * e)[t] + total  # a plain array indexed by a batched value: the loop

    with pytest.warns(vmapx.PerformanceWarning, match="plain NumPy array indexed"):
        got = vmapx.vmap(f, in_axes=(None, 0))(E, T)
    np.testing.assert_array_equal(got, loop(f, E, T, in_axes=(None, 0)))


def test_writes_with_traced_values_run_the_loop():
    def f(e, t, v):
        w = e.copy()  # writable (an `UnmappedArray`, as `e`'s copies are)
        w[t] = v  # a batched value written into a plain array: the loop
        return w[t] + e[t]

    v = RNG.standard_normal((5, 4))
    with pytest.warns(vmapx.PerformanceWarning):
        got = vmapx.vmap(f, in_axes=(None, 0, 0))(E, T, v)
    np.testing.assert_array_equal(got, loop(f, E, T, v, in_axes=(None, 0, 0)))


def test_batched_index_arrays():
    idx = RNG.integers(-6, 6, size=(5, 3))
    check(lambda e, i: e[i], E, idx)
    check(lambda e, i: e[i, i % 4], E, idx)


def test_integer_and_bool_tables():
    table = RNG.integers(0, 100, size=(6, 3)).astype(np.int32)
    check(lambda e, t: e[t], table, T)
    flags = RNG.random((6, 3)) < 0.5
    check(lambda e, t: e[t], flags, T)


def test_inside_f_the_argument_is_a_read_only_ndarray():
    seen = []

    def f(e, t):
        seen.append((isinstance(e, np.ndarray), e.flags.writeable))
        with pytest.raises(ValueError, match="read-only"):
            e[0] = 1.0
        return e[t]

    vmapx.vmap(f, in_axes=(None, 0))(E, T)  # (a first run learns that `f` indexes `e`)
    assert seen[-1] == (True, False)


def test_caller_array_is_not_changed_and_results_are_fresh_plain_arrays():
    e = E.copy()
    out = vmapx.vmap(lambda e, t: (e, 2 * e, e[t]), in_axes=(None, 0))(e, T)
    for o in out:
        assert type(o) is np.ndarray and o.flags.writeable
        assert not np.shares_memory(o, e)
    np.testing.assert_array_equal(out[0], np.broadcast_to(E, (5, *E.shape)))
    np.testing.assert_array_equal(out[1], np.broadcast_to(2 * E, (5, *E.shape)))
    np.testing.assert_array_equal(e, E)
    same = vmapx.vmap(lambda e, t: e * 1.0, in_axes=(None, 0), out_axes=None)(e, T)
    assert type(same) is np.ndarray
    np.testing.assert_array_equal(same, E)


def test_index_errors_are_the_loops():
    with pytest.raises(IndexError):
        vmapx.vmap(lambda e, t: e[t], in_axes=(None, 0))(E, np.array([0, 6]))
    with pytest.raises(IndexError):
        vmapx.vmap(lambda e, t: e[t], in_axes=(None, 0))(E, np.array([0.5, 1.0]))


def test_data_dependent_shapes_still_run_the_loop():
    masks = E[None] > np.array([-1.0, 0.0, 0.5])[:, None, None]
    f = lambda e, m: np.sort(e[m])[:2]  # noqa: E731 (e[m] has a length per example)
    with pytest.warns(vmapx.PerformanceWarning):
        got = vmapx.vmap(f, in_axes=(None, 0))(E, masks)
    np.testing.assert_array_equal(got, loop(f, E, masks, in_axes=(None, 0)))


def test_loop_fallback_keeps_plain_arrays():
    def f(e, t):
        row = e[t]
        if row[0] > 0:  # examples disagree: the loop runs
            return row * 2
        return row

    with pytest.warns(vmapx.PerformanceWarning):
        got = vmapx.vmap(f, in_axes=(None, 0))(E, T)
    assert type(got) is np.ndarray
    np.testing.assert_array_equal(got, loop(f, E, T, in_axes=(None, 0)))


def test_nested_vmaps():
    ts = RNG.integers(0, 6, size=(3, 5))
    f = lambda e, t: e[t] * 2  # noqa: E731
    inner = vmapx.vmap(f, in_axes=(None, 0))
    got = vmapx.vmap(inner, in_axes=(None, 0))(E, ts)
    np.testing.assert_array_equal(got, np.stack([loop(f, E, t, in_axes=(None, 0)) for t in ts]))
    # unmapped outside, mapped inside: rows of E, each indexed by its own t
    g = lambda row, t: row[t]  # noqa: E731
    ts6 = RNG.integers(0, 4, size=(3, 6))
    got = vmapx.vmap(vmapx.vmap(g, in_axes=(0, 0)), in_axes=(None, 0))(E, ts6)
    want = np.stack([np.stack([g(E[j], t) for j, t in enumerate(tt)]) for tt in ts6])
    assert type(got) is np.ndarray
    np.testing.assert_array_equal(got, want)


def test_per_example_gradient_with_respect_to_the_table():
    f = lambda e, t: np.sum(np.tanh(e[t]) ** 2)  # noqa: E731
    got = vmapx.vmap(vmapx.grad(f), in_axes=(None, 0))(E, T)
    want = loop(vmapx.grad(f), E, T, in_axes=(None, 0))
    np.testing.assert_allclose(got, want, rtol=1e-12)
    # against finite differences, one example
    eps, k = 1e-6, 3
    fd = np.zeros_like(E)
    for idx in np.ndindex(E.shape):
        d = np.zeros_like(E)
        d[idx] = eps
        fd[idx] = (f(E + d, T[k]) - f(E - d, T[k])) / (2 * eps)
    np.testing.assert_allclose(got[k], fd, rtol=1e-6, atol=1e-9)


def test_gradient_of_looked_up_rows():
    x = RNG.standard_normal((5, 4))
    f = lambda x, e, t: np.sum(x * e[t])  # noqa: E731
    got = vmapx.vmap(vmapx.grad(f), in_axes=(0, None, 0))(x, E, T)
    np.testing.assert_allclose(got, E[T])


def test_jit_and_chunks():
    f = lambda e, t: np.exp(e[t]).sum()  # noqa: E731
    want = loop(f, E, T, in_axes=(None, 0))
    jitted = vmapx.jit(vmapx.vmap(f, in_axes=(None, 0)))
    for _ in range(3):
        np.testing.assert_allclose(jitted(E, T), want, rtol=1e-13)
    chunked = vmapx.vmap(f, in_axes=(None, 0), chunk_size=2)
    np.testing.assert_allclose(chunked(E, T), want, rtol=1e-13)


def test_subclass_does_not_reach_batched_values():
    def f(e, t):
        y = e[t] + e  # a batched value computed with the table
        assert not isinstance(y._trace, type(None))  # a tracer
        return y

    got = vmapx.vmap(f, in_axes=(None, 0))(E, T)
    assert type(got) is np.ndarray
    view = E.view(UnmappedArray)
    assert type(view + np.ones(4)) is np.ndarray  # (its priority is below NumPy's)
    assert type(np.concatenate([view, np.ones((1, 4))])) is np.ndarray


def test_only_functions_that_index_get_the_subclass():
    kinds = []

    def no_lookup(e, x):
        kinds.append(type(e))
        return e @ x

    vmapx.vmap(no_lookup, in_axes=(None, 0))(E, RNG.standard_normal((5, 4)))
    assert kinds == [np.ndarray]

    def lookup(e, t):
        kinds.append(type(e))
        return e[t]

    kinds.clear()
    f = vmapx.vmap(lookup, in_axes=(None, 0))
    f(E, T)
    assert kinds == [np.ndarray, UnmappedArray]  # the first call learns it...
    kinds.clear()
    f(E, T)
    assert kinds == [UnmappedArray]  # ...the next ones run once


def test_fallback_error_mode_batches_the_lookup():
    def lookup(e, t):
        return e[t] * 2

    got = vmapx.vmap(lookup, in_axes=(None, 0), fallback="error")(E, T)
    np.testing.assert_array_equal(got, E[T] * 2)
    with pytest.raises(vmapx.errors.ConcretizationError, match="in_axes=None"):
        vmapx.vmap(lambda t: E[t], fallback="error")(T)  # a global: the message says what to do


def test_gathers_from_a_shared_table_under_vmap_of_vmap_and_with_basic_axes():
    # the unbatched-table path: advanced indices after basic ones, and apart from them
    t = RNG.integers(0, 4, size=(5, 2))
    for f in (
        lambda e, i: e[1:, i],  # adjacent, after a slice: NumPy keeps them there
        lambda e, i: e[i[0], 1:3],
        lambda e, i: e[None, i],
        lambda e, i: e[i[:, None], i[None, :]],
        lambda e, i: e.reshape(3, 2, 4)[i[0] % 3, :, i[1]],  # apart: NumPy puts them first
    ):
        check(f, E, t)


def test_in_place_results_into_buffers_made_from_the_table_are_the_buffers():
    def f(e, i):
        acc = np.zeros_like(e[0, 0, ...])  # (a writable array of the table's class)
        alias = acc
        acc += 1.0
        acc += 1.0
        buf = np.zeros_like(e[0])
        same = np.add(buf, 1.0, out=buf) is buf
        return e[i] * alias + same

    check(f, E, T)


def test_unsigned_and_field_indices():
    check(lambda e, t: e[t], E, T.clip(0).astype(np.uint64))
    check(lambda e, t: e[t, 1:], E, T.clip(0).astype(np.uint8))
    table = np.zeros(6, dtype=[("a", "f8"), ("b", "i4")])
    table["a"], table["b"] = np.arange(6) / 2, np.arange(6) * 3
    got = batched_without_loop(lambda e, t: e[t]["b"] + e[t]["a"], table, T, in_axes=(None, 0))
    np.testing.assert_array_equal(got, table[T]["b"] + table[T]["a"])


def test_a_boolean_index_is_the_loops():
    flags = np.array([False, False, True])
    f = lambda e, m: e[m, 0]  # noqa: E731 (a 0-d boolean: a mask, in the loop)
    with pytest.warns(vmapx.PerformanceWarning):
        got = vmapx.vmap(f, in_axes=(None, 0))(E, flags[:2])
    np.testing.assert_array_equal(got, np.stack([f(E, m) for m in flags[:2]]))


def test_learning_is_per_wrapped_function():
    import functools

    def deco(fn):
        @functools.wraps(fn)
        def wrapper(*a):
            return fn(*a)

        return wrapper

    @deco
    def lookup(e, t):
        return e[t]

    @deco
    def kind(e, x):
        return x * (1.0 if type(e) is np.ndarray else -1.0)

    vmapx.vmap(lookup, in_axes=(None, 0))(E, T)
    np.testing.assert_array_equal(
        vmapx.vmap(kind, in_axes=(None, 0))(E, np.arange(3.0)), np.arange(3.0)
    )


def test_a_per_example_ufunc_at_into_an_unmapped_argument_is_refused():
    w = np.zeros(3)
    with pytest.raises(ValueError, match="read-only"):
        vmapx.vmap(lambda w, v: np.add.at(w, [0, 0, 2], v), in_axes=(None, 0))(w, np.ones(2))
    np.testing.assert_array_equal(w, np.zeros(3))  # (the loop would have written it)
