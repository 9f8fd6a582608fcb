"""`vmapx.map` equals the loop `[f(*ex) for ex in zip(*xs)]` over ragged batches: order,
values, shapes, dtypes; under grad, jit and vmap; in the padded mode; and its errors."""

from __future__ import annotations

import doctest
import itertools
import threading
import warnings
from typing import Any

import numpy as np
import optree
import pytest

import vmapx
from vmapx import _padded_groups, _padding, _ragged
from vmapx.errors import (
    AxisSizeError,
    ConcretizationError,
    InAxesError,
    PaddingError,
    RaggedInputError,
    RandomnessError,
)

DTYPES = [np.float64, np.float32, np.int8, np.int32, np.int64, np.bool_, np.complex64]


def assert_loop(got: list, want: list, rtol: float = 1e-6) -> None:
    """Per example: the same structure, and per leaf the same shape, dtype and values, an
    array where the loop gives one (a 0-d result is a NumPy scalar, as reductions give)."""
    assert isinstance(got, list) and len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        g_leaves, g_def = optree.tree_flatten(g)
        w_leaves, w_def = optree.tree_flatten(w)
        assert g_def == w_def, f"example {i}: structure {g_def} != {w_def}"
        for a, b in zip(g_leaves, w_leaves, strict=True):
            assert np.shape(a) == np.shape(b), f"example {i}: shape {np.shape(a)} != {np.shape(b)}"
            assert np.result_type(a) == np.result_type(b), f"example {i}: dtype"
            assert isinstance(a, np.ndarray) or not np.ndim(b), f"example {i}: not an array"
            assert isinstance(a, np.ndarray | np.generic), f"example {i}: {type(a).__name__}"
            np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-6, err_msg=f"example {i}")


def random_array(rng: np.random.Generator, shape: tuple, dtype: Any) -> np.ndarray:
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if np.issubdtype(dtype, np.integer):
        return rng.integers(-5, 6, shape).astype(dtype)
    imaginary = 1j * rng.normal(size=shape) if dtype == np.complex64 else 0
    return (rng.normal(size=shape) + imaginary).astype(dtype)


def random_signatures(rng: np.random.Generator, count: int) -> list:
    """`count` distinct (shape, dtype) pairs: 0-d, size-0 and up to 3-d."""
    seen: list = []
    while len(seen) < count:
        ndim = int(rng.integers(0, 4))
        shape = tuple(int(n) for n in rng.integers(0, 4, ndim))
        sig = (shape, DTYPES[int(rng.integers(len(DTYPES)))])
        if sig not in seen:
            seen.append(sig)
    return seen


def mixed(x: np.ndarray, y: np.ndarray) -> dict:
    """Results whose dtypes follow each example's own dtypes (and promote per group)."""
    return {"a": x * 2 + 1, "b": (x.sum() + y.sum(), np.cumsum(y, axis=-1) if y.ndim else y)}


@pytest.mark.parametrize("seed", range(24))
def test_random_ragged_batches_equal_the_loop(seed: int) -> None:
    rng = np.random.default_rng(seed)
    distinct = int(rng.integers(1, 51))
    sigs = random_signatures(rng, distinct)
    n = int(rng.integers(1, 150))
    pick = rng.integers(0, distinct, n)
    xs = [random_array(rng, *sigs[k]) for k in pick]
    ys = [random_array(rng, *sigs[(k + 1) % distinct]) for k in pick]
    got = vmapx.map(mixed, xs, ys, min_group_size=int(rng.integers(1, 5)))
    assert_loop(got, [mixed(x, y) for x, y in zip(xs, ys, strict=True)])


@pytest.mark.parametrize("min_group_size", [1, 4, 10**6])
def test_scalar_results_are_numpy_scalars_as_in_the_loop(min_group_size: int) -> None:
    xs = [np.arange(float(n)) for n in [3, 1, 3, 0, 3, 3, 1]]
    got = vmapx.map(np.sum, xs, min_group_size=min_group_size)
    assert_loop(got, [np.sum(x) for x in xs])


def test_nested_pytrees_and_zero_d_examples() -> None:
    rng = np.random.default_rng(0)
    examples = [
        {"u": rng.normal(size=n), "v": (np.float32(k), rng.normal(size=(2, n)).astype(np.float32))}
        for k, n in enumerate([2, 3, 2, 0, 2, 3])
    ]

    def f(ex: dict) -> tuple:
        return ex["u"] @ ex["v"][1].T, {"s": ex["v"][0] * ex["u"].sum()}

    assert_loop(vmapx.map(f, examples), [f(ex) for ex in examples])


def test_a_dict_of_sequences_is_zipped_into_examples() -> None:
    xs = {"a": [np.ones(2), np.ones(3), np.ones(2)], "b": [np.zeros(1), np.ones(1), np.ones(1)]}
    got = vmapx.map(lambda ex: ex["a"].sum() + ex["b"], xs)
    examples = [{"a": a, "b": b} for a, b in zip(xs["a"], xs["b"], strict=True)]
    assert_loop(got, [ex["a"].sum() + ex["b"] for ex in examples])


def test_an_array_argument_maps_over_its_rows() -> None:
    xs, scales = [np.ones(2), np.ones(3), np.ones(2)], np.array([1.0, 2.0, 3.0])
    got = vmapx.map(lambda x, s: x * s, xs, scales)
    assert_loop(got, [x * s for x, s in zip(xs, scales, strict=True)])


def test_shared_arguments_and_keywords_are_not_mapped() -> None:
    rng = np.random.default_rng(1)
    xs = [rng.normal(size=(n, 3)) for n in [4, 2, 4, 4, 2, 4]]
    w = rng.normal(size=3)

    def f(x: np.ndarray, w: np.ndarray, scale: float = 1.0) -> np.ndarray:
        return np.tanh(x @ w) * scale

    got = vmapx.map(f, xs, w, in_axes=(0, None), scale=3.0)
    assert_loop(got, [f(x, w, scale=3.0) for x in xs])


def test_python_numbers_in_examples_keep_their_weak_type() -> None:
    xs = [np.ones(2, np.float32)] * 6
    scales = [2.0, 3.0, 2.0, 2.0, 3.0, 2.0]  # (0-d float64 arrays would promote to float64)
    got = vmapx.map(lambda x, s: x * s, xs, scales, min_group_size=1)
    assert_loop(got, [x * s for x, s in zip(xs, scales, strict=True)])
    assert all(r.dtype == np.float32 for r in got)


def test_results_keep_the_loop_order_and_an_empty_batch_gives_an_empty_list() -> None:
    xs = [np.full(n % 3 + 1, float(n)) for n in range(40)]
    assert_loop(vmapx.map(lambda x: x[0] + len(x), xs), [x[0] + len(x) for x in xs])
    assert vmapx.map(np.sum, []) == []


def test_groups_below_min_group_size_run_as_plain_calls() -> None:
    calls: list = []

    def f(x: np.ndarray) -> np.ndarray:
        calls.append(type(x))
        return x * 2

    xs = [np.ones(2)] * 5 + [np.ones(3)] * 2
    assert_loop(vmapx.map(f, xs, min_group_size=3), [x * 2 for x in xs])
    assert calls.count(np.ndarray) == 2 and len(calls) == 3  # one batched run, two plain
    calls.clear()
    vmapx.map(f, xs, min_group_size=1)
    assert len(calls) == 2 and np.ndarray not in calls


def test_the_callers_arrays_are_not_written() -> None:
    def f(x: np.ndarray) -> np.ndarray:
        x[0] = 7.0
        return x * 2

    for min_group_size in (1, 100):
        xs = [np.ones(2), np.ones(2), np.ones(3)]
        got = vmapx.map(f, xs, min_group_size=min_group_size)
        assert all((x == 1).all() for x in xs)
        assert_loop(got, [f(x.copy()) for x in xs])


# -- compositions ------------------------------------------------------------------------


def loss(w: np.ndarray, x: np.ndarray) -> np.ndarray:
    return np.sum(np.tanh(x @ w) ** 2) / len(x)


def sequences(seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    return [rng.normal(size=(n, 3)) for n in rng.integers(1, 6, 30)]


def test_grad_inside_map_gives_the_per_example_gradients() -> None:
    w, seqs = np.array([0.3, -0.2, 0.5]), sequences()
    got = vmapx.map(vmapx.grad(loss), w, seqs, in_axes=(None, 0))
    assert_loop(got, [vmapx.grad(loss)(w, x) for x in seqs], rtol=1e-10)


def test_per_example_gradients_of_pytree_parameters_over_sequences() -> None:
    rng = np.random.default_rng(8)
    seqs = [rng.normal(size=(n, 3)) for n in rng.integers(1, 12, 60)]
    ys = rng.normal(size=len(seqs))
    params = {"W": rng.normal(size=(3, 2)), "b": rng.normal(size=2)}

    def seq_loss(params: dict, x: np.ndarray, y: Any) -> Any:
        return 0.5 * (np.tanh(x @ params["W"] + params["b"]).mean() - y) ** 2

    per_example = vmapx.grad(seq_loss)
    got = vmapx.map(per_example, params, seqs, ys, in_axes=(None, 0, 0))
    want = [per_example(params, x, y) for x, y in zip(seqs, ys, strict=True)]
    assert_loop(got, want, rtol=1e-10)
    vmapx.check_grads(lambda p: seq_loss(p, seqs[0], ys[0]), (params,), order=1)


def test_map_inside_grad_equals_the_loop_and_finite_differences() -> None:
    w, seqs = np.array([0.3, -0.2, 0.5]), sequences(1)

    def total(w: np.ndarray) -> Any:
        return sum(vmapx.map(loss, w, seqs, in_axes=(None, 0), min_group_size=2))

    want = sum(vmapx.grad(loss)(w, x) for x in seqs)
    np.testing.assert_allclose(vmapx.grad(total)(w), want, rtol=1e-10)
    vmapx.check_grads(total, (w,), order=2)


def test_grad_through_mapped_examples() -> None:
    seqs = sequences(2)[:8]
    w = np.array([0.1, 0.2, 0.3])
    grads = vmapx.grad(lambda xs: sum(vmapx.map(lambda x: loss(w, x), xs)))(seqs)
    assert_loop(grads, [vmapx.grad(loss, argnums=1)(w, x) for x in seqs], rtol=1e-10)


def test_jit_of_map_records_and_replays_the_loop() -> None:
    seqs = sequences(3)
    f = vmapx.jit(lambda xs: vmapx.map(lambda x: np.tanh(x).sum(0), xs))
    want = [np.tanh(x).sum(0) for x in seqs]
    assert_loop(f(seqs), want)
    assert_loop(f(seqs), want)
    others = [x + 1 for x in seqs]
    assert_loop(f(others), [np.tanh(x).sum(0) for x in others])


def test_vmap_of_map_maps_the_outer_batch() -> None:
    seqs = sequences(4)
    ws = np.random.default_rng(0).normal(size=(5, 3))
    got = vmapx.vmap(lambda w: vmapx.map(loss, w, seqs, in_axes=(None, 0)))(ws)
    want = [np.array([loss(w, x) for w in ws]) for x in seqs]
    assert_loop(got, want, rtol=1e-10)


def test_map_over_batched_examples_inside_vmap() -> None:
    a, b = np.random.default_rng(0).normal(size=(2, 4, 3))

    def f(a: np.ndarray, b: np.ndarray) -> list:
        return vmapx.map(lambda x: np.cumsum(x) * 2, [a, b, a[:2], b], min_group_size=2)

    got = vmapx.vmap(f)(a, b)
    want = [np.stack([f(a[i], b[i])[k] for i in range(4)]) for k in range(4)]
    assert_loop(got, want)


def test_map_of_vmap() -> None:
    xs = [np.ones((n, 2)) * n for n in [1, 3, 1, 3]]
    got = vmapx.map(vmapx.vmap(lambda r: r.sum()), xs)
    assert_loop(got, [x.sum(1) for x in xs])


def test_threads_do_not_see_each_other() -> None:
    seqs, out, errors = sequences(5), {}, []

    def run(k: int) -> None:
        try:
            out[k] = vmapx.map(lambda x, k=k: x.sum(0) * k, seqs)
        except Exception as e:  # pragma: no cover (reported below)
            errors.append(e)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for k in range(4):
        assert_loop(out[k], [x.sum(0) * k for x in seqs])


# -- groups that cannot stay batched ----------------------------------------------------


def test_a_group_that_cannot_stay_batched_runs_example_by_example() -> None:
    xs = [np.array([1.0, -2.0]), np.array([3.0, 4.0]), np.array([-1.0, -1.0]), np.ones(3)]

    def positive(x: np.ndarray) -> np.ndarray:
        return x[x > 0]  # the result's shape depends on the values

    with pytest.warns(vmapx.PerformanceWarning, match=r"vmapx\.map: a group of 3 examples"):
        got = vmapx.map(positive, xs, min_group_size=2)
    assert_loop(got, [positive(x) for x in xs])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_loop(vmapx.map(positive, xs, fallback="silent"), [positive(x) for x in xs])
    with pytest.raises(ConcretizationError):
        vmapx.map(positive, xs, fallback="error", min_group_size=2)


def test_python_control_flow_where_examples_disagree() -> None:
    xs = [np.array([1.0, 2.0]), np.array([-1.0, 2.0]), np.array([3.0, 0.0])]

    def f(x: np.ndarray) -> np.ndarray:
        return x * 2 if x.sum() > 1 else -x

    with pytest.warns(vmapx.PerformanceWarning):
        got = vmapx.map(f, xs, min_group_size=1)
    assert_loop(got, [f(x) for x in xs])


# -- randomness -------------------------------------------------------------------------


def test_a_generator_draw_raises_even_in_groups_of_one() -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(RandomnessError):
        vmapx.map(lambda x, r: x + r.normal(), [np.ones(2), np.ones(3)], rng, in_axes=(0, None))
    with pytest.raises(RandomnessError):
        vmapx.map(lambda x, r: x + r.normal(), [np.ones(2)], r=rng)


HIDDEN_RNG = np.random.default_rng(5)


def draws_from_a_global(x: np.ndarray) -> np.ndarray:
    return x + HIDDEN_RNG.normal()


def draws_from_numpy_legacy(x: np.ndarray) -> np.ndarray:
    return x + np.random.normal()


def draw_state(source: str) -> Any:
    return HIDDEN_RNG.bit_generator.state if source == "global" else np.random.get_state()


@pytest.mark.parametrize("source", ["closure", "global", "legacy"])
@pytest.mark.parametrize("min_group_size", [1, 8, 100])
def test_draws_the_map_cannot_see_raise_and_leave_the_state(source: str, min_group_size: int):
    """Examples grouped by shape run in another order than the loop: a draw from a
    generator that is not an argument cannot give the loop's numbers (a batched group
    would repeat one number), so the map raises and puts the generators' states back."""
    rng = np.random.default_rng(1)
    f = {
        "closure": lambda x: x + rng.normal(),
        "global": draws_from_a_global,
        "legacy": draws_from_numpy_legacy,
    }[source]
    xs = [np.ones(n) for n in [2, 3] * 10]  # (the groups interleave)
    before = rng.bit_generator.state if source == "closure" else draw_state(source)
    with pytest.raises(RandomnessError, match="Draw the random numbers before the map"):
        vmapx.map(f, xs, min_group_size=min_group_size)
    after = rng.bit_generator.state if source == "closure" else draw_state(source)
    assert str(after) == str(before)


def test_a_generator_the_function_holds_but_does_not_draw_from_is_fine() -> None:
    rng = np.random.default_rng(1)
    f = lambda x, n: np.where(np.arange(x.shape[0]) < n, x * 2, 0.0) if rng else x  # noqa: E731
    xs = [np.arange(float(n)) for n in [2, 3, 2, 5] * 4]
    assert_loop(vmapx.map(f, xs, pad_axes=0, out_pad_axes=0), [x * 2 for x in xs])


def test_randomness_other_than_error_is_refused_with_the_fix() -> None:
    with pytest.raises(ValueError, match="Draw the random numbers before the map"):
        vmapx.map(np.sum, [np.ones(2)], randomness="different")


def test_numbers_drawn_before_the_map_give_the_loops_results() -> None:
    rng = np.random.default_rng(0)
    xs = [np.ones(n) for n in [2, 3, 2, 3]]
    noise = [rng.normal(size=x.shape) for x in xs]
    assert_loop(vmapx.map(np.add, xs, noise), [x + e for x, e in zip(xs, noise, strict=True)])


# -- errors -------------------------------------------------------------------------------


ONE, TWO = [np.ones(1)], [np.ones(2)]
KEEP = lambda x, n: x  # noqa: E731
ERRORS = [  # (positional arguments of map, keywords, error, words of the message)
    ((np.add, ONE * 2, ONE * 3), {}, AxisSizeError, "argument 1 has 3 examples"),
    ((np.sum, 3.0), {}, RaggedInputError, "must be a sequence of examples"),
    ((np.sum, "abc"), {}, TypeError, "got a str"),
    ((np.sum, None), {}, TypeError, "got a NoneType"),
    ((np.sum, np.float64(1.0)), {}, RaggedInputError, "0-d array"),
    ((np.sum,), {}, TypeError, "at least one sequence"),
    ((3, ONE), {}, TypeError, "`f` must be callable"),
    ((np.sum, ONE), {"in_axes": 1}, InAxesError, "must be 0"),
    ((np.sum, ONE), {"in_axes": None}, ValueError, "no examples"),
    ((np.add, ONE, 1.0), {"in_axes": (0,)}, InAxesError, "1 entries but 2"),
    ((np.sum, ONE), {"min_group_size": 0}, ValueError, "min_group_size"),
    ((np.sum, ONE), {"buckets": 0}, ValueError, "`buckets`"),
    ((np.sum, ONE), {"buckets": [3, -1]}, ValueError, "`buckets`"),
    ((np.sum, ONE), {"check": -2}, ValueError, "`check`"),
    ((np.sum, ONE), {"fallback": "loud"}, ValueError, "`fallback`"),
    ((np.sum, {"a": ONE, "b": []}), {}, AxisSizeError, "different lengths"),
    ((np.sum, ONE), {"pad_axes": "x"}, InAxesError, "`pad_axes` entries"),
    ((np.add, ONE, 1.0), {"in_axes": (0, None), "pad_axes": (0, 0)}, InAxesError, "cannot be"),
    ((np.add, ONE), {"pad_axes": (0, 0)}, InAxesError, "2 entries but 1"),
    ((KEEP, [np.float64(1.0)]), {"pad_axes": 0}, PaddingError, "0-d array has no axis"),
    ((KEEP, TWO), {"pad_axes": 1}, PaddingError, "out of range"),
    ((lambda x, y, n: x, TWO, [np.ones(3)]), {"pad_axes": 0}, PaddingError, "different sizes"),
    ((KEEP, [{"a": np.ones(2)}]), {"pad_axes": {"b": 0}}, PaddingError, "does not match"),
    ((KEEP, TWO), {"pad_axes": {"b": 0}}, PaddingError, "a pytree"),
    ((KEEP, [{"a": 1.0}]), {"pad_axes": 0}, PaddingError, "selects no array"),
    ((lambda x, n: x.sum(), TWO * 9), {"pad_axes": 0, "out_pad_axes": 0}, PaddingError, "range"),
]


@pytest.mark.parametrize(("args", "kwargs", "error", "match"), ERRORS)
def test_errors_name_the_cause(args: tuple, kwargs: dict, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        vmapx.map(*args, **kwargs)


def test_out_pad_axes_without_pad_axes_pads_nothing() -> None:
    with pytest.raises(TypeError, match="missing 1 required positional argument"):
        vmapx.map(KEEP, TWO, out_pad_axes=0)


# -- the padded mode -----------------------------------------------------------------------


def masked_stats(x: np.ndarray, w: np.ndarray, n: Any) -> tuple:
    """Mask-aware: a pooled summary, and a per-step result with the padded axis first."""
    mask = np.arange(x.shape[0]) < n
    valid = np.where(mask[:, None], x, 0.0)
    mean = valid.sum(axis=0) / np.maximum(n, 1)
    score = np.where(mask, x @ w, -np.inf)
    top = score.max() if x.shape[0] else np.float64(-np.inf)
    return (mean, top), np.cumsum(valid, axis=0) * 2


@pytest.mark.parametrize("seed", range(8))
def test_padded_mode_equals_the_loop_on_the_true_lengths(seed: int) -> None:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 60, int(rng.integers(1, 120)))
    xs = [rng.normal(size=(n, 3)) for n in lengths]
    w = rng.normal(size=3)
    buckets = [4, 8, 20] if seed % 2 else int(rng.integers(1, 10))
    got = vmapx.map(
        masked_stats, xs, w, in_axes=(0, None), pad_axes=(0, None), out_pad_axes=(None, 0),
        buckets=buckets, check=True, min_group_size=int(rng.integers(1, 4)),
    )  # fmt: skip
    assert_loop(got, [masked_stats(x, w, len(x)) for x in xs], rtol=1e-10)


def test_padded_mode_over_pytrees_on_another_axis() -> None:
    rng = np.random.default_rng(0)
    examples = [
        {"tokens": rng.normal(size=(2, n)), "labels": rng.integers(0, 3, n), "bias": rng.normal()}
        for n in rng.integers(1, 30, 40)
    ]

    def f(ex: dict, n: Any) -> np.ndarray:
        mask = np.arange(ex["labels"].shape[0]) < n
        hits = np.where(mask, ex["labels"] == 1, False)
        return (np.where(mask, ex["tokens"], 0.0) * hits).sum(axis=1) + ex["bias"]

    got = vmapx.map(f, examples, pad_axes={"tokens": 1, "labels": 0, "bias": None}, check=5)
    assert_loop(got, [f(ex, len(ex["labels"])) for ex in examples], rtol=1e-10)


def test_padded_mode_with_zero_lengths_and_a_pad_value() -> None:
    xs = [np.arange(float(n)) for n in [0, 3, 5, 0, 2, 7, 5]]
    f = lambda x, n: np.where(np.arange(x.shape[0]) < n, x, 100.0).min(initial=100.0)  # noqa: E731
    got = vmapx.map(f, xs, pad_axes=0, pad_value=-1.0, buckets=2, min_group_size=1, check=True)
    assert_loop(got, [f(x, len(x)) for x in xs])


def test_check_finds_a_function_that_is_not_mask_aware() -> None:
    xs = [np.arange(float(n)) + 1 for n in range(1, 30)]
    with pytest.raises(PaddingError, match="mask-aware"):
        vmapx.map(lambda x, n: x.mean(), xs, pad_axes=0, buckets=3, check=True)
    with pytest.raises(PaddingError, match=r"float64\[\d+\] padded but float64\[\d+\] unpadded"):
        vmapx.map(lambda x, n: x * 2, xs, pad_axes=0, buckets=3, check=2)
    got = vmapx.map(lambda x, n: x * 2, xs, pad_axes=0, out_pad_axes=0, buckets=3, check=True)
    assert_loop(got, [x * 2 for x in xs])


def test_grad_of_a_padded_map() -> None:
    seqs, w = sequences(6), np.array([0.2, -0.1, 0.4])

    def masked_loss(w: np.ndarray, x: np.ndarray, n: Any) -> Any:
        mask = np.arange(x.shape[0]) < n
        return np.sum(np.where(mask, np.tanh(x @ w) ** 2, 0.0)) / n

    got = vmapx.map(vmapx.grad(masked_loss), w, seqs, in_axes=(None, 0), pad_axes=(None, 0))
    assert_loop(got, [vmapx.grad(loss)(w, x) for x in seqs], rtol=1e-10)
    total = lambda w: sum(vmapx.map(masked_loss, w, seqs, in_axes=(None, 0), pad_axes=(None, 0)))  # noqa: E731
    np.testing.assert_allclose(
        vmapx.grad(total)(w), sum(vmapx.grad(loss)(w, x) for x in seqs), rtol=1e-10
    )


def test_padded_examples_traced_by_grad() -> None:
    seqs, w = sequences(7)[:10], np.array([0.2, -0.1, 0.4])

    def masked_loss(x: np.ndarray, n: Any) -> Any:
        return np.sum(np.where(np.arange(x.shape[0]) < n, np.tanh(x @ w), 0.0))

    grads = vmapx.grad(lambda xs: sum(vmapx.map(masked_loss, xs, pad_axes=0, buckets=2)))(seqs)
    assert_loop(grads, [vmapx.grad(lambda x: np.sum(np.tanh(x @ w)))(x) for x in seqs])


def padded_plan(xs: tuple, pad_axes: Any, buckets: Any, general: bool) -> Any:
    """The grouped plan of `map(f, *xs, pad_axes=...)`, by the array path or the general."""
    plan = _ragged._Plan(KEEP, xs, [0] * len(xs), pad_axes, {})
    if general:
        plan._group_by_length = lambda buckets: False  # (the general path's own grouping)
    plan.group(buckets)
    return plan


def group_sets(plan: Any) -> dict:
    return {(g.size, tuple(g.pads)): sorted(g.idxs) for g in plan.groups.values()}


@pytest.mark.parametrize("seed", range(30))
def test_groups_found_by_length_equal_the_general_grouping(seed: int) -> None:
    rng = np.random.default_rng(seed)
    count, ndim = int(rng.integers(1, 200)), int(rng.integers(1, 4))
    axis = int(rng.integers(-ndim, ndim))
    lengths = rng.integers(0, int(rng.integers(1, 90)), count)
    other = tuple(rng.integers(0, 4, ndim - 1))
    shape = lambda n: other[: axis % ndim] + (n,) + other[axis % ndim :]  # noqa: E731
    xs = ([rng.normal(size=shape(n)) for n in lengths],)
    pads: Any = axis
    if seed % 3:  # a second padded argument of another dtype, and one not padded
        xs += ([np.ones((2, n), np.int32) for n in lengths], [np.ones(3)] * count)
        pads = (axis, -1, None)
    buckets = ["auto", int(rng.integers(1, 6)), [5, 20, 40]][seed % 3]
    fast, general = (padded_plan(xs, pads, buckets, flag) for flag in (False, True))
    assert _padded_groups.plain_lengths(fast.columns, fast.pad_axes) is not None
    np.testing.assert_array_equal(fast.lengths, general.lengths)
    np.testing.assert_array_equal(fast.sizes, general.sizes)
    assert group_sets(fast) == group_sets(general)


UNEVEN = [  # (examples of one argument, pad axis): batches the array path leaves alone
    ([np.ones(3), np.ones(4, np.float32)] * 5, 0),  # two dtypes
    ([np.ones((2, 3)), np.ones((3, 4))] * 5, 1),  # other dimensions that differ
    ([np.ones((2, 3)), np.ones(4)] * 5, -1),  # numbers of dimensions that differ
    ([np.ones(3)] * 5, {"a": 0}),  # a pytree of axes (the general path explains)
]


@pytest.mark.parametrize(("xs", "axis"), UNEVEN)
def test_uneven_batches_take_the_general_grouping(xs: list, axis: Any) -> None:
    assert _padded_groups.plain_lengths([xs], [axis]) is None
    if isinstance(axis, dict):
        return
    f = lambda x, n: np.where(np.arange(x.shape[-1]) < n, x, 0.0).sum(axis=-1)  # noqa: E731
    got = vmapx.map(f, xs, pad_axes=axis, min_group_size=1, check=True)
    assert_loop(got, [f(x, x.shape[-1]) for x in xs])


@pytest.mark.parametrize("seed", range(40))
def test_bucket_sizes_are_the_least_padding(seed: int) -> None:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 40, int(rng.integers(1, 30)))
    weights = rng.integers(1, 5, len(lengths)) if seed % 2 else np.ones(len(lengths))
    k = int(rng.integers(1, 5))
    sizes = _padding.bucket_sizes(lengths, k, weights)
    assert (sizes >= lengths).all() and len(np.unique(sizes)) <= k
    values = np.unique(lengths)
    best = min(
        (_padding.bucket_sizes(lengths, list(tops) + [values[-1]]) * weights).sum()
        for r in range(k)
        for tops in itertools.combinations(values[:-1], r)
    )
    assert (sizes * weights).sum() == best


@pytest.mark.parametrize("seed", range(20))
def test_auto_buckets_trade_padding_against_groups(seed: int) -> None:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 400, int(rng.integers(1, 40)))
    weights = rng.integers(1, 2000, len(lengths)).astype(float)

    def cost(sizes: np.ndarray) -> float:  # (each bucket's elements, weighed as "auto" does)
        tops = np.unique(sizes)
        per_bucket = [_padding.auto_cost(top * weights[sizes == top].sum()) for top in tops]
        return float(np.sum(per_bucket)) + _padding.GROUP_COST_ELEMENTS * len(tops)

    auto = cost(_padding.bucket_sizes(lengths, "auto", weights))
    for k in range(1, min(len(np.unique(lengths)), _padding.MAX_AUTO_BUCKETS) + 1):
        assert auto <= cost(_padding.bucket_sizes(lengths, k, weights)) + 1e-6


@pytest.mark.parametrize("weigh", [False, True])
@pytest.mark.parametrize("seed", range(20))
def test_the_auto_search_stops_where_buckets_save_too_little(seed: int, weigh: bool) -> None:
    """The least padding (as it is, or weighed by `auto_cost`) is convex in the number of
    buckets: the search for 'auto' stops at the first bucket that saves no more than one
    costs, and picks what the full search over 1..MAX_AUTO_BUCKETS picks."""
    rng = np.random.default_rng(seed)
    values = np.unique(rng.integers(1, int(rng.choice([30, 500])), int(rng.integers(2, 300))))
    counts = rng.integers(1, int(rng.choice([300, 3000])), len(values)).astype(float)
    kmax = min(_padding.MAX_AUTO_BUCKETS, len(values))
    full, _ = _padding._best_splits(values.astype(float), counts, kmax, None, weigh)
    assert (np.diff(full, 2) >= -1e-6 * full[0]).all()  # (convex)
    cut, _ = _padding._best_splits(values.astype(float), counts, kmax, 5000.0, weigh)
    np.testing.assert_array_equal(cut, full[: len(cut)])
    pick = lambda t: np.argmin(t + 5000.0 * np.arange(len(t)))  # noqa: E731
    assert pick(cut) == pick(full)


@pytest.mark.parametrize("buckets", [1, 5, "auto"])
def test_buckets_over_many_distinct_lengths(buckets: Any) -> None:
    lengths = np.random.default_rng(0).integers(0, 5000, 3000)
    sizes = _padding.bucket_sizes(lengths, buckets)
    assert (sizes >= lengths).all() and sizes.max() == lengths.max()
    assert len(np.unique(sizes)) <= (_padding.MAX_AUTO_BUCKETS if buckets == "auto" else buckets)


def test_explicit_bucket_sizes_and_lengths_beyond_them() -> None:
    np.testing.assert_array_equal(
        _padding.bucket_sizes(np.array([1, 4, 5, 9, 30]), [4, 8]), [4, 4, 8, 9, 30]
    )


def test_docstring_examples_run() -> None:
    failures, tried = doctest.testmod(_ragged, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert tried and not failures


def test_the_ragged_benchmarks_methods_equal_the_loop() -> None:
    """What `benchmarks/ragged.py` checks before it times anything, at a tiny size."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "ragged.py"
    spec = importlib.util.spec_from_file_location("ragged_benchmark", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    rng = np.random.default_rng(0)
    weights = bench.make_weights(rng)
    seqs = [rng.normal(size=(bench.D, n)) for n in bench.skewed_lengths(rng, 40)]
    want = [bench.pool_one(x, *weights) for x in seqs]
    shared = (0, None, None, None)
    bench.same(vmapx.map(lambda x: bench.pool_one(x, *weights), seqs), want, "exact")
    bench.same(vmapx.map(bench.pool, seqs, *weights, in_axes=shared, pad_axes=1), want, "padded")
    bench.same(bench.hand_padded(seqs, weights), want, "hand")
