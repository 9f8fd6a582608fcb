"""`vmapx.jit` defects found in review: each test runs the jitted function and `f`
itself over several calls with changing arguments (so that later calls replay), and
asks for the same results."""

from __future__ import annotations

import copy
import math
import warnings

import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

import vmapx
from harness import assert_same
from vmapx import grad, jit, vmap

RNG = np.random.default_rng(37)


def _same_as_f(f, calls, rounds=2):
    """`jit(f)` and `f` give the same on each argument tuple of `calls`, `rounds` times
    over (the later rounds replay where a recording is kept), with numbers constants of
    the signature (the default) and traced (`trace_numbers=True`, returned)."""
    for trace_numbers in (False, True):
        fast = jit(f, trace_numbers=trace_numbers)
        for _ in range(rounds):
            for args in calls:
                assert_same(fast(*args), f(*args), rtol=0, atol=0)
    return fast


x12 = np.arange(12.0)
x4 = np.arange(4.0)


@pytest.mark.parametrize(
    "f, values",
    [
        (lambda x, rows: x.reshape(rows, -1).sum(0) / x.reshape(rows, -1).shape[0], [2, 3, 4]),
        (lambda x, rows: np.zeros_like(x.reshape(rows, -1)), [2, 3, 4]),
        (lambda x, n: np.ones_like(np.broadcast_to(x[:4], (n, 4))), [1, 2, 3]),
        (lambda x, n: np.diag(x[:4], k=n) * np.diag(x[:4], k=n).shape[0], [0, 1, -2]),
        (lambda x, n: x.reshape(3, 4).sum(n) * len(x.reshape(3, 4).sum(n)), [0, 1, -1]),
        (lambda x, n: np.zeros_like(np.expand_dims(x, n)), [0, 1]),
        (lambda x, n: np.zeros_like(np.moveaxis(x.reshape(2, 3, 2), 0, n)), [0, 1, 2]),
        (lambda x, n: np.zeros_like(np.stack([x, x], axis=n)), [0, 1]),
        (lambda x, n: x[n] * x, [0, 1, 5]),
    ],
)
def test_a_number_that_sets_a_shape_or_an_axis_is_part_of_the_signature(f, values):
    _same_as_f(f, [(x12, n) for n in values])


def test_a_computed_value_that_sets_a_shape_is_checked_by_each_replay():
    def f(x):
        y = np.broadcast_to(x, (np.sum(x > 0), 4))
        return y.sum(0) / y.shape[0]

    _same_as_f(f, [(np.ones(4),), (np.array([1.0, 1.0, -1.0, -1.0]),)])


@pytest.mark.parametrize(
    "f, x, values",
    [
        (lambda x, n: x + (n & 0xFF), np.array([100, 27], np.int8), [1, 2, 3]),
        (lambda x, n: x + (n | 1) + (n ^ 3), np.array([100, 27], np.int8), [1, 2, 4]),
        (lambda x, n: x + (n << 1) + (n >> 1) + ~n, np.array([100, 27], np.int8), [1, 2, 4]),
        (lambda x, n: x + divmod(n, 3)[0] + divmod(7, n)[1], np.array([1, 2], np.int8), [1, 5]),
        (lambda x, s: x * round(s, 1) + round(s), np.ones(2, np.float32), [2.25, 3.75, 1.05]),
        (lambda x, s: x * s.conjugate() + s.real + s.imag, np.ones(2, np.float32), [2.25, 3.5]),
        (lambda x, n: x * (math.floor(n) - 2**60), np.ones(2), [2**60 + 1, 2**60 + 3]),
        (lambda x, s: x * len(str(s)) + len(repr(s)), np.ones(2), [2.25, 3.5, 1e-20]),
        (lambda x, n: x * (n & 1) * round(n, 1), np.ones(2, np.float32), [np.int64(3)]),
    ],
)
def test_python_operations_on_a_number_argument_give_pythons_numbers(f, x, values):
    _same_as_f(f, [(x, v) for v in values])


def _type_is(x, s):
    return x * s if type(s) is float else x + s


def _hidden_alias(x, s, _isinstance=isinstance):
    return x * s if _isinstance(s, float) else x + s


def _copied(x, s):
    return x * copy.copy(s)  # (`copy.copy` calls `type(s)`)


@pytest.mark.parametrize(
    "f",
    [
        lambda x, s: x * s if isinstance(s, int | float) else x + s,
        _type_is,
        lambda x, s: x * s if np.isscalar(s) else x + s,
        lambda x, s: x + s if hasattr(s, "shape") else x * s,
        lambda x, s: x * s if s.__class__ is float else x + s,
        _hidden_alias,
        _copied,
        vmap(_type_is, in_axes=(0, None)),
        lambda x, s: grad(lambda x, s: np.sum(_type_is(x, s)))(x, s),
    ],
)
def test_type_checks_on_a_number_argument_see_its_type(f):
    x = np.ones(3)
    _same_as_f(f, [(x, s) for s in (3.0, 4.0, 5, 2.5, np.float64(2.0))])


def test_numbers_stay_traced_where_no_code_looks_at_types():
    fast = _same_as_f(lambda x, s: x * s + 1, [(np.ones(3), s) for s in (3.0, 4.0, 2.5)])
    assert len(fast._recordings) == 1


def test_a_replay_never_writes_into_memory_a_window_still_reads():
    def f(x):
        y = np.exp(x)
        window = sliding_window_view(y, 3)
        return (y * 2)[: len(window)] + window.mean(-1)

    _same_as_f(f, [(np.linspace(0, 1, 6),), (np.linspace(1, 2, 6),)])
    _same_as_f(vmap(f), [(RNG.standard_normal((2, 6)),), (RNG.standard_normal((2, 6)),)])


@pytest.mark.parametrize(
    "f",
    [
        lambda x: np.broadcast_arrays(np.zeros((2, 3)), x)[0],
        lambda x: np.atleast_2d(np.zeros(3), x)[0],
        lambda x: np.ix_(np.arange(3.0), x[0])[0],
        lambda x: (np.broadcast_arrays(np.zeros((2, 3)), x)[0], x + 1),
    ],
)
def test_results_are_new_arrays_on_every_call(f):
    fast = jit(f)
    x = np.ones((2, 3))
    for _ in range(3):
        expected = f(x)
        got = fast(x)
        assert_same(got, expected)
        for leaf in got if isinstance(got, tuple) else (got,):
            leaf += 5  # the caller updates its own result: no later call may see it


def test_number_values_in_the_signature_compare_exactly():
    fast = _same_as_f(
        lambda x, s: x * math.copysign(1.0, s),
        [(np.ones(2), s) for s in (0.0, -0.0, math.nan, -math.nan, 1.0)],
        rounds=3,
    )
    assert len(fast._recordings) == 5  # a NaN matches a NaN: recorded once
    static = jit(lambda x, s: x * math.copysign(1.0, s), static_argnums=1)
    for s in (0.0, -0.0, 0.0, -0.0):
        assert_same(static(np.ones(2), s), np.ones(2) * math.copysign(1.0, s))


@pytest.mark.parametrize("mode", [{"divide": "raise"}, {"all": "call"}])
def test_a_replay_leaves_no_step_out_that_could_raise(mode):
    def f(x):
        np.log(x)  # value unused: a replay would leave it out
        return x * 2

    fast = jit(f)
    fast(np.ones(2))
    fast(np.ones(2))
    called = []
    old = np.seterrcall(lambda kind, flag: called.append(kind))
    try:
        with np.errstate(**mode):
            assert_same(fast(np.ones(2)), np.ones(2) * 2)
            if "divide" in mode:
                with pytest.raises(FloatingPointError):
                    fast(np.zeros(2))
            else:
                fast(np.zeros(2))
                assert called
    finally:
        np.seterrcall(old)


def test_negative_static_argnums_count_from_the_signature():
    def f(x, n, mode="a"):
        return x * n if mode == "a" else x - n

    fast = jit(f, static_argnums=-2)
    assert fast._static_nums == {1}
    x = np.ones(2)
    for n, mode in [(2, "a"), (3, "a"), (2, "b")]:
        assert_same(fast(x, n, mode), f(x, n, mode))
        assert_same(fast(x, n), f(x, n))  # (the default omitted: -2 is still `n`)
    with pytest.raises(ValueError, match=r"static_argnums=-1 .*\*args"):
        jit(lambda *args: args[0], static_argnums=-1)
    with pytest.raises(ValueError, match="only 3 positional parameters"):
        jit(f, static_argnums=-4)


def test_random_draws_are_never_replayed():
    state = np.random.get_state()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", vmapx.PerformanceWarning)
        fast = jit(lambda x: x + np.random.normal(size=3))
        np.random.seed(0)
        got = [fast(np.zeros(3)) for _ in range(3)]
        np.random.seed(0)
        assert_same(got, [np.random.normal(size=3) for _ in range(3)])
        np.random.set_state(state)

        closed = np.random.default_rng(0)
        fast = jit(lambda x: x + closed.normal(size=3))
        reference = np.random.default_rng(0)
        for _ in range(3):
            assert_same(fast(np.zeros(3)), reference.normal(size=3))

        aware = np.random.default_rng(1)
        batched = jit(
            vmap(lambda x: x + vmapx.random.batch_aware(aware).normal(), randomness="different")
        )
        reference = np.random.default_rng(1)
        for _ in range(3):
            assert_same(batched(np.zeros(3)), reference.normal(size=3))


_DEFAULT_SCALE = 1.0
_WEIGHTS = {1: 10.0, 2: 20.0}


def _matches(x, n):
    match n:
        case int():
            return x * 3
        case float():
            return x * 2
    return x


def _caught(x, n):
    try:
        w = _WEIGHTS[n]
    except (KeyError, TypeError):
        w = 1.0
    return x * w


@pytest.mark.parametrize(
    "f, values",
    [
        (lambda a, n: np.zeros_like(np.concatenate((a, a), n)), [0, 1]),  # a positional axis
        (lambda a, n: a * np.size(a, n), [0, 1]),
        (lambda a, n: a[: len(n * (0,))], [1, 2]),  # a sequence repeated by the number
        (lambda a, n: a + np.array(n * [1.0]).sum(), [1, 2]),
        (_matches, [1, 2, 1.5]),  # a class pattern: an isinstance check Python makes
        (_caught, [1, 2, 3]),  # an exception only a traced number would raise
        (lambda a, s: a if s is _DEFAULT_SCALE else a * s * 10, [_DEFAULT_SCALE, 2.0]),
        (
            lambda a, s: np.apply_along_axis(
                lambda r: r * (2.0 if isinstance(s, float) else 3.0), 0, a
            ),
            [2.0, 3],
        ),
    ],
)
def test_numbers_that_python_inspects_are_the_numbers_by_default(f, values):
    a = np.arange(4.0).reshape(2, 2)
    fast = jit(f)  # (numbers are constants of the signature unless traced on request)
    for _ in range(2):
        for n in values:
            assert_same(fast(a, n), f(a, n), rtol=0, atol=0)


def test_clip_with_one_bound_as_a_method():
    a = np.arange(4.0)
    assert_same(jit(lambda x: x.clip(1))(a), a.clip(1))
    assert_same(vmap(lambda x: x.clip(max=2))(np.stack([a, a])), np.stack([a.clip(max=2)] * 2))
