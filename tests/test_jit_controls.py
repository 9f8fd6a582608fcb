"""`vmapx.jit`'s controls: numbers as values of the replay, static arguments, the bounded
cache, and `lower` (the program a signature replays)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import vmapx
from harness import assert_same
from harness import counting as _counting
from vmapx import _jit_api, grad, jit, vmap

RNG = np.random.default_rng(5)


def _loss(w, x, y):
    return 0.5 * np.sum((x @ w - y) ** 2)


def _train_step(w, x, y, lr):
    return w - lr * vmap(grad(_loss), in_axes=(None, 0, 0))(w, x, y).mean(0)


def test_a_changing_learning_rate_replays_one_recording():
    step, calls = _counting(_train_step)
    fast = jit(step, trace_numbers=True)
    w, x, y = (
        RNG.standard_normal((5, 1)),
        RNG.standard_normal((32, 5)),
        RNG.standard_normal((32, 1)),
    )
    for lr in [0.1, 0.05, np.float64(0.02), 1e-3, 7]:
        expected = _train_step(w, x, y, lr)
        assert_same(fast(w, x, y, lr), expected, rtol=1e-13, atol=1e-15)
        w = expected
    # one recording per number type (float, np.float64, int): the values are the replay's
    assert len(calls) == 3
    assert len(fast._recordings) == 3


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_python_numbers_keep_numpys_promotion(dtype):
    def f(x, lr):
        scale = 1 - lr * 2  # Python arithmetic among numbers stays Python's
        return x * scale + lr

    fast = jit(f, trace_numbers=True)
    x = RNG.standard_normal(4).astype(dtype)
    for lr in (0.25, 0.5, 0.125):
        got, expected = fast(x, lr), f(x, lr)
        assert got.dtype == expected.dtype
        assert_same(got, expected)
    assert len(fast._recordings) == 1


@pytest.mark.parametrize("trace_numbers", [False, True])
def test_integer_arithmetic_among_numbers_is_pythons(trace_numbers):
    f = lambda x, n: x * (n**-1) + (n // 3) + (n % 4)  # noqa: E731 (ints to a negative power)
    fast = jit(f, trace_numbers=trace_numbers)
    x = np.arange(3.0)
    for n in (2, 5, 9, 10**20):
        assert_same(fast(x, n), f(x, n))


def test_a_number_python_reads_is_recorded_as_a_constant():
    def f(x, n, lr):
        for _ in range(n):  # `range` reads n
            x = x * lr
        return x

    f_counted, calls = _counting(f)
    fast = jit(f_counted, trace_numbers=True)
    x = RNG.standard_normal(3)
    assert_same(fast(x, 2, 0.5), f(x, 2, 0.5))  # records; finds that n is read
    assert_same(fast(x, 2, 0.25), f(x, 2, 0.25))  # records with n a constant
    assert_same(fast(x, 2, 0.75), f(x, 2, 0.75))  # replays
    assert_same(fast(x, 3, 0.75), f(x, 3, 0.75))  # a new n: records
    assert_same(fast(x, 3, 0.5), f(x, 3, 0.5))  # replays
    assert len(calls) == 3


@pytest.mark.parametrize("trace_numbers", [False, True])
def test_a_branch_on_a_number_records_it_as_a_constant(trace_numbers):
    f = lambda x, lr: x * lr if lr > 0.5 else x - lr  # noqa: E731
    fast = jit(f, trace_numbers=trace_numbers)
    x = RNG.standard_normal(3)
    for lr in (0.25, 0.75, 0.25, 0.75, 0.3):
        assert_same(fast(x, lr), f(x, lr))


def test_a_function_that_cannot_take_a_traced_number_gets_the_number():
    def f(x, n):
        if not isinstance(n, int):
            raise TypeError("n must be an int")
        return x * n

    fast = jit(f)
    x = np.ones(2)
    assert_same(fast(x, 3), x * 3)
    assert_same(fast(x, 4), x * 4)
    with pytest.raises(TypeError, match="must be an int"):
        fast(x, 2.0)


def test_static_argnums_and_argnames():
    def f(x, k, *, scale):
        return x * k * scale

    f_counted, calls = _counting(f)
    fast = jit(f_counted, static_argnums=1, static_argnames="scale")
    x = np.ones(3)
    for k, scale in [(2, 1.0), (2, 1.0), (3, 1.0), (3, 2.0), (3, 2.0)]:
        assert_same(fast(x, k, scale=scale), f(x, k, scale=scale))
    assert len(calls) == 3  # one recording per distinct static value
    by_name = jit(f, static_argnames=("k", "scale"))  # a positional parameter by name
    assert by_name._static_nums == {1}
    assert_same(by_name(x, 2, scale=3.0), x * 6.0)


def test_unhashable_static_arguments_are_a_clear_error():
    fast = jit(lambda x, opts: x * len(opts), static_argnums=1)
    with pytest.raises(TypeError, match="static argument must be hashable"):
        fast(np.ones(2), {1, 2})  # (a set is one leaf; a list would be two)
    with pytest.raises(TypeError, match="static_argnums"):
        jit(lambda x: x, static_argnums="x")


def test_the_cache_is_bounded_and_warns_once_why(monkeypatch):
    monkeypatch.setattr(_jit_api, "MAX_SIGNATURES", 3)
    f, calls = _counting(lambda x: x * 2.0)
    fast = jit(f)
    for n in range(1, 4):
        fast(np.ones(n))
    with pytest.warns(vmapx.PerformanceWarning, match=r"3 signatures recorded.*leaves \[0\]"):
        assert_same(fast(np.ones(4)), np.full(4, 2.0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_same(fast(np.ones(5)), np.full(5, 2.0))  # no second warning
        assert_same(fast(np.ones(2)), np.full(2, 2.0))  # recorded signatures still replay
    assert len(calls) == 3 + 2


def test_lower_shows_the_numpy_calls_a_replay_makes():
    step = jit(lambda w, lr: w - lr * np.tanh(w), trace_numbers=True)
    program = step.lower(np.ones(3), 0.1)
    text = str(program)
    assert program.replayable
    assert text.startswith("def replay(v0, v1):")
    assert "np.tanh(v0)" in text and "np.subtract(v0" in text
    # the program is the one calls of that signature replay, and it is valid Python
    compile(text, "<program>", "exec")
    assert "Program(" in repr(program)


def test_lower_of_a_program_that_cannot_replay_says_why():
    f = lambda x: x * 2.0 if x.sum() > 0 else x  # noqa: E731
    program = jit(f).lower(np.ones(3))
    assert not program.replayable
    assert "not replayable" in str(program) and "reads a value" in str(program)


def test_lower_lists_constants_it_cannot_spell():
    w = RNG.standard_normal((4, 4))
    text = str(jit(lambda x: x @ w).lower(np.ones(4)))
    assert "# where" in text and "float64 array of shape (4, 4)" in text


def test_jitted_keeps_the_function_name_and_docs():
    def my_step(x):
        """Docs."""
        return x

    fast = jit(my_step)
    assert fast.__name__ == "my_step" and fast.__doc__ == "Docs."
    assert fast.__wrapped__ is my_step
