"""A call that fell back to the per-example loop is remembered per function and
signature: later calls run the loop directly (the loop's values, dtypes, draws,
exceptions and warnings), a fallback that depended on the data is re-tried and batches
once the data allow, and the loop of the common case (arrays on axis 0) equals the
general one."""

from __future__ import annotations

import gc
import warnings
import weakref

import numpy as np
import pytest

import vmapx
from harness import assert_same, counting, loop_reference
from vmapx import _fallback_memory

rng = np.random.default_rng(0)
X = rng.normal(size=(6, 4))


def by_float(x):
    return x * float(x[0])  # examples differ: the loop


def silent(f, **options):
    """`vmap(f, fallback="silent")`, called from one line (the memory is per calling line)."""
    g = vmapx.vmap(f, fallback="silent", **options)
    return lambda *args: g(*args)


def test_a_remembered_fallback_runs_the_loop_directly() -> None:
    f, calls = counting(by_float)
    g = silent(f)
    first = g(X)
    assert len(calls) == 1 + len(X)  # the abandoned batched run, then the loop
    calls.clear()
    second = g(X)
    assert len(calls) == len(X)  # the loop only
    assert_same(first, loop_reference(by_float, [X], 0))
    assert_same(second, loop_reference(by_float, [X], 0))


def test_the_memory_is_per_function_not_per_vmap() -> None:
    f, calls = counting(by_float)
    silent(f)(X)
    calls.clear()
    assert_same(silent(f)(X), loop_reference(by_float, [X], 0))
    assert len(calls) == len(X)


def test_another_signature_runs_batched_first() -> None:
    f, calls = counting(by_float)
    silent(f)(X)
    calls.clear()
    silent(f)(X[:, :3])  # another shape: not remembered yet
    assert len(calls) == 1 + len(X)
    calls.clear()
    silent(f)(X.astype(np.float32))  # another dtype
    assert len(calls) == 1 + len(X)


def test_each_call_warns_as_the_batched_run_would() -> None:
    g = vmapx.vmap(by_float)
    messages = []
    for _ in range(3):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            g(X)
        messages.append([(str(w.message), w.filename, w.lineno) for w in caught])
    assert len(messages[0]) == 1 and messages[0][0][1] == __file__
    assert messages[1] == messages[0] == messages[2]


def test_a_data_dependent_fallback_is_retried_and_batches_when_the_data_allow() -> None:
    def scaled(x):
        return x * 2.0 if x.sum() > 0 else x  # an `if`: batches where examples agree

    f, calls = counting(scaled)
    mixed = np.concatenate([np.ones((3, 4)), -np.ones((3, 4))])
    silent(f)(mixed)
    positive = np.ones((6, 4))
    batched_at = None
    for call in range(2 * _fallback_memory.FIRST_WAIT + 2):
        calls.clear()
        assert_same(silent(f)(positive), loop_reference(scaled, [positive], 0))
        if len(calls) == 1:
            batched_at = call
            break
    assert batched_at == _fallback_memory.FIRST_WAIT  # waited, then re-tried: batched
    calls.clear()
    silent(f)(positive)
    assert len(calls) == 1  # forgotten: batched from then on


def test_retries_wait_longer_each_time_they_fall_back() -> None:
    f, calls = counting(by_float)
    silent(f)(X)
    runs = []
    for _ in range(3 * _fallback_memory.FIRST_WAIT + 2):
        calls.clear()
        silent(f)(X)
        runs.append(len(calls) > len(X))
    retries = [i for i, retried in enumerate(runs) if retried]
    first = _fallback_memory.FIRST_WAIT
    assert retries == [first, first + 2 * first + 1]


def test_the_loops_exception_is_raised_on_a_remembered_call() -> None:
    def f(x):
        if float(x[0]) > 1.0:
            raise ValueError("too large")
        return x * float(x[0])

    small = rng.uniform(-1, 1, size=(5, 3))
    silent(f)(small)
    large = small.copy()
    large[3, 0] = 2.0
    with pytest.raises(ValueError, match="too large"):
        silent(f)(large)


def test_the_loops_random_draws_on_remembered_calls() -> None:
    gen = np.random.default_rng(1)

    def f(x):
        return x * float(x[0]) + gen.normal()  # reads a generator from its closure

    for _ in range(3):
        state = gen.bit_generator.state
        got = silent(f)(X)
        gen.bit_generator.state = state
        assert_same(got, loop_reference(f, [X], 0))


def test_writes_into_an_example_do_not_reach_the_caller() -> None:
    def f(x):
        x[1] = float(x[0])  # writes into its example
        return x

    before = X.copy()
    for _ in range(2):
        got = silent(f)(X)
        assert_same(X, before)
        assert_same(got, loop_reference(f, [X.copy()], 0))


def test_an_unmapped_argument_is_read_only_in_the_loop() -> None:
    w = np.ones(4)

    def f(x, w):
        w += float(x[0])
        return x + w

    for _ in range(2):
        with pytest.raises(ValueError, match="read-only"):
            silent(f, in_axes=(0, None))(X, w)
    assert_same(w, np.ones(4))


@pytest.mark.parametrize(
    ("f", "args", "in_axes", "out_axes"),
    [
        (lambda x: (x * float(x[0]), x.sum()), (X,), 0, 0),
        (lambda x: {"a": x * float(x[0])}, (X,), 0, 1),
        (lambda x: x * float(x[0]), (X.T,), 1, 0),
        (lambda x, y: y * float(x), (X[:, 0], X), (0, 0), 0),  # a 1-d argument: scalars
        (lambda x, w: w * float(x[0]), (X, X[0]), (0, None), 0),
        (lambda x: float(x[0]), (X,), 0, 0),  # Python floats
        (lambda x: int(x[0] > 0), (X,), 0, 0),  # Python ints
        (lambda x: np.int8(1) if x[0] > 0 else np.float16(1), (X,), 0, 0),  # dtypes differ
        (lambda x: x[:2] * float(x[0]), (X.astype(np.float32),), 0, 0),
    ],
)
def test_the_loop_of_remembered_calls_equals_the_loop(f, args, in_axes, out_axes) -> None:
    want = loop_reference(f, list(args), in_axes, out_axes)
    for _ in range(3):
        got = silent(f, in_axes=in_axes, out_axes=out_axes)(*args)
        assert_same(got, want)
        assert np.result_type(got if not isinstance(got, tuple | dict) else 0) is not None


def test_functions_that_cannot_be_referred_to_weakly_are_remembered() -> None:
    class Call:
        __slots__ = ()  # (no weak references)

        def __call__(self, x):
            return by_float(x)

        def __hash__(self):
            return 1

    f = Call()
    silent(f)(X)
    assert _fallback_memory._records(f)
    assert_same(silent(f)(X), loop_reference(by_float, [X], 0))


def test_the_memory_is_bounded_and_lets_functions_go() -> None:
    def f(x):
        return x * float(x[0])

    for n in range(1, _fallback_memory.PER_FUNCTION + 5):
        silent(f)(X[:, :1].repeat(n, axis=1))
    assert len(_fallback_memory._records(f)) == _fallback_memory.PER_FUNCTION
    gone = weakref.ref(f)
    del f
    gc.collect()
    assert gone() is None


def test_calls_under_another_transform_are_not_remembered() -> None:
    f, calls = counting(by_float)

    def loss(w):
        return vmapx.vmap(lambda x: f(x) * w, fallback="silent")(X).sum()

    for _ in range(2):
        calls.clear()
        vmapx.grad(loss)(1.5)
    assert _fallback_memory._records(f) is None


def test_fallback_error_still_raises() -> None:
    silent(by_float)(X)
    with pytest.raises(vmapx.errors.ConcretizationError):
        vmapx.vmap(by_float, fallback="error")(X)
