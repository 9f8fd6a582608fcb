"""`vmapx.jit`: record once per signature, replay; `f` runs wherever a replay could differ."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import vmapx
from harness import assert_same, loop_reference
from harness import counting as _counting
from vmapx import grad, jit, vmap

RNG = np.random.default_rng(21)


def _loss(w, b, x, y):
    return 0.5 * np.sum((x @ w + b - y) ** 2)


def _lsq_args(n=16):
    return (
        RNG.standard_normal((5, 1)), RNG.standard_normal(1),
        RNG.standard_normal((n, 5)), RNG.standard_normal((n, 1)),
    )  # fmt: skip


def test_per_example_gradients_replay_with_new_values():
    loss, calls = _counting(_loss)
    # (chunk_size=None: "auto" may split a plain call into chunks on a busy machine, each
    # calling `loss` once, which would make the count below depend on timing)
    per_example = vmap(grad(loss, (0, 1)), in_axes=(None, None, 0, 0), chunk_size=None)
    fast = jit(per_example)
    for _ in range(3):
        args = _lsq_args()
        expected = per_example(*args)
        assert_same(fast(*args), expected, rtol=1e-12, atol=1e-14)
    assert len(calls) == 3 + 1  # three plain calls, one recording: the replays run no Python


def test_jacobian_rows_replay():
    def jac(eye, x):
        _, pull = vmapx.vjp(lambda x: x**2 + np.sin(x), x)
        return vmap(lambda r: pull(r)[0])(eye)

    fast = jit(jac)
    for _ in range(3):
        x = RNG.standard_normal(8)
        assert_same(fast(np.eye(8), x), np.diag(2 * x + np.cos(x)), rtol=1e-12, atol=1e-14)


def test_a_new_shape_or_static_argument_value_records_again():
    f, calls = _counting(lambda x, scale, mode: np.tanh(x) * scale if mode == "a" else x)
    fast = jit(f, trace_numbers=True)
    x3, x4 = RNG.standard_normal(3), RNG.standard_normal(4)
    assert_same(fast(x3, 2.0, "a"), np.tanh(x3) * 2.0)
    assert_same(fast(x4, 2.0, "a"), np.tanh(x4) * 2.0)
    assert_same(fast(x4, 3.0, "a"), np.tanh(x4) * 3.0)  # a number: a value of the replay
    assert_same(fast(x4, 3.0, "b"), x4)  # a string: part of the signature
    assert_same(fast(x4, 5.0, "b"), x4)
    assert len(calls) == 3


def test_python_control_flow_on_values_runs_f_every_time():
    f, calls = _counting(lambda x: x * 2.0 if x.sum() > 0 else x - 1.0)
    fast = jit(f)
    pos, neg = np.ones(3), -np.ones(3)
    assert_same(fast(pos), pos * 2.0)
    assert_same(fast(neg), neg - 1.0)  # a replay of the first call would be wrong
    assert_same(fast(pos), pos * 2.0)
    assert len(calls) == 3


def test_per_example_branches_under_vmap_are_not_replayed():
    def f(x):
        return x * 2.0 if x[0] > 0 else -x  # vmap runs it per example

    fast = jit(vmap(f))
    for x in (np.array([[1.0, 2.0], [-1.0, 3.0]]), np.array([[-1.0, 2.0], [1.0, 3.0]])):
        with pytest.warns(vmapx.PerformanceWarning):
            got = fast(x)
        assert_same(got, loop_reference(f, [x], 0))


@pytest.mark.parametrize(
    "case", ["array_equal", "copyto into a plain array", "exception caught", "asarray"]
)
def test_numpy_calls_a_replay_could_not_repeat_make_f_run(case):
    scratch = np.zeros(3)

    def f(x):
        if case == "array_equal":
            return x + (1.0 if np.array_equal(x, np.ones(3)) else 0.0)
        if case == "copyto into a plain array":
            np.copyto(scratch, x)
            return scratch * 2.0
        if case == "exception caught":
            try:
                return np.linalg.inv(x.reshape(1, 3))  # not square: raises
            except np.linalg.LinAlgError:
                return x
        return np.asarray(x) * 3.0

    g, calls = _counting(f)
    fast = jit(g)
    counts = []
    for x in (np.ones(3), np.arange(3.0), np.ones(3)):
        assert_same(fast(x), f(x.copy()))
        counts.append(len(calls))
    # every call runs f (the first maybe twice: a recording that had to stop, then f)
    assert counts[1] - counts[0] == counts[2] - counts[1] == 1


def test_random_generator_arguments_are_not_replayed():
    f, calls = _counting(lambda x, rng: x + rng.normal(size=x.shape))
    fast = jit(f)
    a = fast(np.zeros(3), np.random.default_rng(0))
    b = fast(np.zeros(3), np.random.default_rng(1))
    assert_same(a, np.random.default_rng(0).normal(size=3))
    assert_same(b, np.random.default_rng(1).normal(size=3))
    assert len(calls) == 2


def test_results_are_new_arrays():
    table = np.arange(3.0)
    fast = jit(lambda x: (x, x.reshape(3, 1), table, x + table))
    for _ in range(3):  # the recording call and two replays
        x = RNG.standard_normal(3)
        same, view, constant, fresh = fast(x)
        assert_same(same, x)
        assert not np.shares_memory(same, x) and not np.shares_memory(view, x)
        assert not np.shares_memory(constant, table)
        constant[0] = 100.0  # the caller owns it: the next call is not affected
        assert_same(fresh, x + np.arange(3.0))


def test_one_array_twice_and_two_arrays_are_different_signatures():
    f, calls = _counting(lambda a, b: a - b)
    fast = jit(f)
    x, y = RNG.standard_normal(3), RNG.standard_normal(3)
    assert_same(fast(x, x), np.zeros(3))
    assert_same(fast(x, y), x - y)
    assert len(calls) == 2


def test_closure_state_is_read_when_recording():
    """As with `jax.jit`: state outside the arguments is part of the recording."""
    state = {"scale": 2.0}
    fast = jit(lambda x: x * state["scale"])
    x = np.ones(2)
    assert_same(fast(x), x * 2.0)
    state["scale"] = 5.0
    assert_same(fast(x), x * 2.0)  # the recorded value
    assert_same(jit(lambda x: x * state["scale"])(x), x * 5.0)


def test_keyword_arguments_pytrees_and_a_plain_function():
    def f(params, x, *, shift):
        return {"y": np.tanh(x @ params["w"]) + shift, "n": np.linalg.norm(params["w"])}

    fast = jit(f)
    for _ in range(3):
        params, x = {"w": RNG.standard_normal((3, 2))}, RNG.standard_normal((4, 3))
        got, expected = fast(params, x, shift=1.5), f(params, x, shift=1.5)
        assert type(got["n"]) is type(expected["n"]) is np.float64  # f's own result types
        np.testing.assert_allclose(got["n"], expected["n"], rtol=1e-12)
        assert_same(got["y"], expected["y"], rtol=1e-12)


def test_errors_propagate_and_are_not_cached():
    f, calls = _counting(lambda x: x @ np.ones((2, 2)))
    fast = jit(f)
    with pytest.raises(ValueError):
        fast(np.ones(3))
    assert_same(fast(np.ones(2)), np.full(2, 2.0))
    assert_same(fast(np.ones(2)), np.full(2, 2.0))
    assert len(calls) == 2


def test_a_write_into_a_view_runs_f_plainly():
    def f(x):
        y = x.copy()
        v = y[1:]
        v[0] = 9.0  # a write through a view: NumPy shows it in `y`
        return y

    fast = jit(f)
    for _ in range(2):
        x = RNG.standard_normal(3)
        assert_same(fast(x), f(x))


def test_inside_a_transform_it_is_the_function_itself():
    fast = jit(lambda x: np.sin(x) * 2.0)
    xs = RNG.standard_normal((4, 3))
    assert_same(vmap(fast)(xs), np.sin(xs) * 2.0)
    assert_same(grad(lambda x: np.sum(fast(x)))(xs[0]), 2.0 * np.cos(xs[0]))


def test_bad_input():
    with pytest.raises(TypeError, match="callable"):
        jit(3)


def test_docstring_example():
    import doctest

    from vmapx import _jit_api

    failures, tried = doctest.testmod(_jit_api, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert tried and not failures


# -- replays reuse dead temporaries -----------------------------------------------------


def test_a_replay_writes_results_into_dead_temporaries_only():
    def f(x):
        t = x * 2.0
        view = t[::2]  # keeps `t`'s memory alive: `t + 1.0` must not go into it
        u = (t + 1.0) * 3.0  # `t + 1.0` is dead after `* 3.0`: that may go into it
        return view, u, np.sqrt(u * u + 1.0)

    fast = jit(f)
    for _ in range(3):
        x = RNG.standard_normal(6)
        x0 = x.copy()
        got = fast(x)
        assert_same(got, f(x0), rtol=0, atol=0)
        np.testing.assert_array_equal(x, x0)  # an input is never written
        assert not any(np.shares_memory(a, b) for a in got for b in got if a is not b)


def test_a_replay_allocates_like_numpy_elision():
    from harness import peak_bytes

    x = RNG.standard_normal(200_000)
    fast = jit(lambda x: np.sqrt(np.exp(np.sin(x) * 0.5) + 1.0) * 2.0)
    fast(x)
    assert peak_bytes(lambda: fast(x)) < 1.5 * x.nbytes  # one array, not one per step


def test_a_replay_leaves_out_values_f_dropped():
    """Values `f` computes and drops (a loss's value under `grad`) are not recomputed by a
    replay; values a result needs are. A dropped `np.log` warns no more."""

    def dropped(x):
        np.log(x)
        return x * 2.0

    def used(x):
        return x * 2.0 + np.log(x)

    x = np.ones(3)
    for f, warns in ((dropped, False), (used, True)):
        jf = jit(f)
        jf(x)  # (records: f runs)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert_same(jf(-x), f(-x))  # (f warns here in both cases)
        assert len(caught) == (2 if warns else 1), [str(w.message) for w in caught]


@pytest.mark.parametrize(
    "case",
    ["index by a computed array", "linalg.inv", "frompyfunc"],
)
def test_dropped_calls_that_can_raise_for_other_values_still_run(case):
    def f(x, i):
        if case == "index by a computed array":
            x[i.astype(int)]
        elif case == "linalg.inv":
            np.linalg.inv(np.diag(i))
        else:
            np.frompyfunc(lambda v: 1 // int(v), 1, 1)(i)
        return x * 2.0

    jf = jit(f)
    ok = (np.arange(1.0, 3.0), np.array([1.0, 1.0]))
    jf(*ok)
    assert_same(jf(*ok), f(*ok))
    bad = (np.arange(1.0, 3.0), np.array([5.0, 0.0]))
    errors = (IndexError, np.linalg.LinAlgError, ZeroDivisionError)
    with pytest.raises(errors) as from_f:
        f(*bad)
    with pytest.raises(type(from_f.value)):
        jf(*bad)


def test_an_operand_returned_as_it_is_is_never_written():
    """`np.real(x)` of a real `x` is `x` itself: the replay must not take it for memory of
    its own (it would write the caller's array), nor for the owner of later views."""
    x = np.arange(3.0)
    jf = jit(lambda x: np.real(x) + 1.0)
    for _ in range(3):
        assert_same(jf(x), x + 1.0)
    assert_same(x, np.arange(3.0))

    def g(x):
        y = x * 2.0
        np.real(y)  # dropped; returns `y` itself
        np.real(x)
        return y.T + 1.0, np.atleast_1d(y) * 1.0

    jg, x = jit(g), RNG.normal(size=(2, 2))
    for _ in range(3):
        assert_same(jg(x), g(x))


def _local_buffer(x):
    acc, outs = np.zeros(3), []
    for _ in range(2):
        outs.append(acc * x)
        acc += 1.0  # written after the call that used it
    return outs


def _broadcast_pair(x):
    a, b = np.broadcast_arrays(x * 2.0, x[:, None] * 3.0)
    return np.sin(a) + b, np.sin(a)


def _scatter_add(x):
    out = np.zeros(3)
    np.add.at(out, [0, 0, 1], x)
    return out


_SIGNATURE_CASES = {
    # (f, arguments of the recording call, arguments of later calls)
    "ravel: copy when recorded, view when replayed": (
        lambda x: np.sin(np.ravel(x)),
        (np.asfortranarray(np.ones((2, 2))),),
        (np.ones((2, 2)),),
    ),
    "grad of vdot (its rule ravels)": (
        vmapx.grad(lambda x: np.vdot(x, x) ** 2),
        (np.asfortranarray(np.ones((2, 2))),),
        (np.arange(4.0).reshape(2, 2),),
    ),
    "zero-stride views from broadcast_arrays": (
        _broadcast_pair,
        (np.arange(3.0),),
        (np.arange(1.0, 4.0),),
    ),
    "an array of f's own, written after use": (_local_buffer, (np.ones(3),), (np.arange(3.0),)),
    "ufunc.at": (_scatter_add, (np.ones(3),), (np.arange(3.0),)),
    "the gradient of take (its rule scatters with add.at)": (
        vmap(grad(lambda x: np.sum(np.take(x, [0, 2]) ** 2))),
        (np.ones((2, 3)),),
        (np.arange(6.0).reshape(2, 3),),
    ),
    "a 0-d argument whose value sets NumPy 1.26's dtype": (
        lambda x, s: (x * 2) * s,
        (np.arange(1, 4, dtype=np.int8), np.array(2)),
        (np.arange(1, 4, dtype=np.int8), np.array(1000)),
    ),
    "not replayable: f's own result": (lambda x: np.asarray(x), (np.ones(2),), (np.ones(2),)),
}


@pytest.mark.parametrize("case", list(_SIGNATURE_CASES))
def test_replays_match_f_and_leave_the_arguments_alone(case):
    f, first, later = _SIGNATURE_CASES[case]
    jf = jit(f)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (no warning of vmapx's own either)
        for args in (first, later, later):
            kept = [a.copy() for a in args]
            got, expected = jf(*args), f(*[a.copy() for a in args])
            assert_same(got, expected, rtol=0, atol=0)
            for a, k in zip(args, kept, strict=True):
                np.testing.assert_array_equal(a, k)  # arguments untouched
            for r in got if isinstance(got, tuple | list) else [got]:
                assert r.flags.writeable and 0 not in r.strides
                assert not any(np.shares_memory(r, a) for a in args)


def test_large_results_are_replayed():
    f, calls = _counting(lambda x: np.sin(x) * 2.0)
    fast = jit(f)
    x = np.linspace(0.0, 1.0, vmapx._jit.LARGE_BYTES // 8)
    for _ in range(3):
        assert_same(fast(x), np.sin(x) * 2.0, rtol=0, atol=0)
    assert len(calls) == 1


def _distances(x, ys):
    return np.sqrt(((ys - x) ** 2).sum(-1))


def test_large_intermediates_replay_the_chunks_of_vmap():
    """A whole-batch recording with 24 MiB intermediates is not kept; a later call, when
    vmap runs in cache-sized chunks, records those, and its replay gives the loop's values."""
    f, calls = _counting(vmap(_distances, in_axes=(0, None)))
    fast = jit(f)
    rng = np.random.default_rng(0)
    ys = rng.standard_normal((512, 3))
    counts = []
    for _ in range(vmapx._jit.RECORD_AGAIN + vmapx._autochunk.WARM_WHOLES + 3):
        x = rng.standard_normal((2048, 3))
        assert_same(fast(x, ys), np.stack([_distances(e, ys) for e in x]))
        counts.append(len(calls))
    assert counts[-4] == counts[-1] <= vmapx._jit.RECORD_AGAIN + 1  # the last calls replayed
    text = str(fast.lower(x, ys))
    assert "getitem(v0, (slice(0, " in text  # the first chunk
    assert "    del v" in text  # a chunk's intermediates freed before the next chunk's


def test_large_intermediates_without_chunks_warn_once_and_run_f():
    f, calls = _counting(lambda x: np.outer(x, x).sum(0))
    fast = jit(f)
    x = np.linspace(0.0, 1.0, 2048)
    with pytest.warns(vmapx.PerformanceWarning, match="not replayed.*intermediates of 32 MiB"):
        for _ in range(vmapx._jit.RECORD_AGAIN + 2):
            assert_same(fast(x), np.outer(x, x).sum(0), rtol=0, atol=0)
    assert len(calls) == vmapx._jit.RECORD_AGAIN + 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fast(x)  # (said once)


# -- random programs: a replay gives what running f gives ---------------------------------

_STEPS = ("add", "mul", "sin", "view", "reshape", "sum", "iadd", "square", "where")


def _random_program(steps: list[tuple[str, int, int]]):
    def f(x, y):
        vals = [x, y]
        for op, i, j in steps:
            a, b = vals[i % len(vals)], vals[j % len(vals)]
            if a.shape != b.shape:
                b = a
            if op == "add":
                v = a + b
            elif op == "mul":
                v = a * b * 0.5
            elif op == "sin":
                v = np.sin(a)
            elif op == "view":
                v = a[::-1]
            elif op == "reshape":
                v = a.reshape(-1)
            elif op == "sum":
                v = a.sum(axis=-1, keepdims=True) + a
            elif op == "iadd":
                v = a.copy()
                v += b
            elif op == "square":
                v = (a - 0.25) ** 2
            else:
                v = np.where(a > b, a, b)
            vals.append(v)
        return vals[2:] or [x]

    return f


def test_random_programs_replay_like_f():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    step = st.tuples(st.sampled_from(_STEPS), st.integers(0, 30), st.integers(0, 30))

    @settings(max_examples=50, deadline=None)
    @given(st.lists(step, min_size=1, max_size=10), st.booleans())
    def run(steps, batched):
        f = _random_program(steps)
        g = vmap(f) if batched else f
        fast = jit(g)
        for _ in range(3):  # the recording and two replays, each on new values
            x, y = RNG.standard_normal((3, 4)), RNG.standard_normal((3, 4))
            x0, y0 = x.copy(), y.copy()
            got, expected = fast(x, y), g(x0.copy(), y0.copy())
            assert len(got) == len(expected)
            for a, b in zip(got, expected, strict=True):
                np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-15)
            np.testing.assert_array_equal(x, x0)
            np.testing.assert_array_equal(y, y0)
            assert not any(np.shares_memory(a, b) for i, a in enumerate(got) for b in got[i + 1 :])

    run()


def test_shape_only_values_and_broadcasts_to_the_same_shape():
    def f(x):
        ones = np.ones_like(x)  # a constant of the recording
        same = np.broadcast_to(x * 2.0, x.shape)  # the array itself
        return ones, same + np.zeros_like(x), np.empty_like(x).shape

    fast = jit(f)
    for _ in range(3):
        x = RNG.standard_normal(4)
        ones, doubled, shape = fast(x)
        assert_same(ones, np.ones(4))
        assert_same(doubled, x * 2.0)
        assert shape == (4,)
        ones[0] = 5.0  # the caller's own array: the next replay still gives ones


def _custom_double():
    @vmapx.custom_vmap
    def double(x):
        return x * 2

    @double.def_vmap
    def _(axis_size, in_batched, x):
        return x * 2, in_batched[0]

    return double


_TRANSFORMS = {
    "cond": lambda: vmap(lambda x: vmapx.cond(x.sum() > 0, lambda v: v * 2, lambda v: -v, x)),
    "while_loop": lambda: vmap(
        lambda x: vmapx.while_loop(lambda c: c[0] < 5, lambda c: (c[0] + 1, c[1] * 1.1), (0, x))[1]
    ),
    "scan": lambda: vmap(lambda x: vmapx.scan(lambda c, v: (c + v, c * v), 0.0, x)),
    "psum": lambda: vmap(lambda x: x / vmapx.psum(x, "i"), axis_name="i"),
    "hessian": lambda: vmap(vmapx.hessian(lambda x: np.sum(np.sin(x) ** 2))),
    "jacfwd": lambda: vmap(vmapx.jacfwd(lambda x: np.tanh(x) * x[::-1])),
    "linalg": lambda: vmap(lambda x: np.linalg.solve(np.outer(x, x) + np.eye(3), x)),
    "sort": lambda: vmap(lambda x: np.sort(x)[::-1].cumsum()),
    "gather": lambda: vmap(lambda x: x[np.argmax(x)] * x),
    "custom_vmap": lambda: vmap(_custom_double()),
    "loop fallback": lambda: vmap(lambda x: x * 2 if float(x[0]) > 0 else x, fallback="silent"),
}


@pytest.mark.parametrize("name", list(_TRANSFORMS))
def test_jit_of_every_transform_gives_fs_results(name):
    g = _TRANSFORMS[name]()
    fast = jit(g)
    for _ in range(3):
        x = RNG.standard_normal((5, 3))
        assert_same(fast(x), g(x.copy()), rtol=1e-12, atol=1e-14)


def test_a_data_dependent_shape_that_python_reads_is_checked_by_each_replay():
    def count(x):
        return np.arange(np.extract(x > 0, x).size)

    def total(x):  # the shape is not read: the replay runs
        return np.sum(np.extract(x > 0, x))

    counted, calls = _counting(count)
    fast = jit(counted)
    for x in ([1.0, -1.0], [1.0, 2.0], [-1.0, 3.0]):
        np.testing.assert_array_equal(fast(np.array(x)), count(np.array(x)))
    assert len(calls) == 2  # the recording, `f` where the size changed; then a replay
    summed, calls = _counting(total)
    fast = jit(summed)
    for x in ([1.0, -1.0], [1.0, 2.0]):
        np.testing.assert_array_equal(fast(np.array(x)), total(np.array(x)))
    assert len(calls) == 1


@pytest.mark.parametrize("like", [np.zeros_like, np.ones_like, lambda v: np.empty_like(v) * 0])
def test_an_array_shaped_like_a_data_dependent_shape_is_checked_by_each_replay(like):
    # `np.zeros_like(x[x > 0])` was a constant of the recording: a replay on data with
    # another number of positives returned the recorded shape (also under vmap's loop)
    def f(x):
        return like(np.not_equal(x[x > 0], x[:, None]))

    fast, batched = jit(f), jit(vmapx.vmap(f))
    for x in ([1.0, -1.0, 2.0], [1.0, 2.0, 3.0], [-1.0, -2.0, 3.0], [1.0, -1.0, 2.0]):
        assert_same(fast(np.array(x)), f(np.array(x)), rtol=0, atol=0)
        with warnings.catch_warnings():  # (a boolean mask: vmap runs the loop)
            warnings.simplefilter("ignore", vmapx.PerformanceWarning)
            got = batched(np.array([x]))
        assert_same(got, f(np.array(x))[None], rtol=0, atol=0)


def test_a_replayed_copy_method_has_the_method_s_c_order():
    """`x.copy()` is C order (np.copy's default is "K"): a replay makes the same layout
    as `f` (the moved layout of a broadcast subtraction copies its operands so)."""
    x = np.arange(12.0).reshape(3, 4)
    fast = jit(lambda a: a.T.copy())
    for _ in range(3):
        got = fast(x)
        assert got.strides == x.T.copy().strides
        assert_same(got, x.T.copy(), rtol=0, atol=0)
