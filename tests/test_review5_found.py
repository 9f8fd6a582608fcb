"""Defects found by trying vmapx as a new user would (data-science snippets, library calls,
compositions of transforms), each with the case that showed it: vmap must equal the loop
(values, shape, dtype), derivatives must match finite differences."""

from __future__ import annotations

import contextlib
import math
import re

import numpy as np
import pytest

import vmapx
from harness import check_vmap

RNG = np.random.default_rng(5)


def _with_nan(x):
    return np.where(x > 1, np.nan, x) ** 2  # a NaN entry whose tangent is NaN too


@pytest.mark.parametrize(
    "reduce",
    [np.nansum, np.nanmean, np.nanmax, np.nanmin, np.nanprod,
     lambda v: np.nansum(v, where=v > 0.1), lambda v: np.nanmean(v, keepdims=True)[0]],
)  # fmt: skip
def test_nan_reductions_leave_out_the_tangents_of_nan_elements(reduce):
    # forward mode gave NaN: the NaN element's NaN tangent times its zero weight
    x = np.array([2.0, -2.5, 0.4, -0.6, -0.45])
    vmapx.check_grads(lambda x: reduce(_with_nan(x)), (x,), order=2)
    np.testing.assert_allclose(
        vmapx.jacfwd(lambda x: reduce(_with_nan(x)))(x),
        vmapx.jacrev(lambda x: reduce(_with_nan(x)))(x),
    )


@pytest.mark.parametrize("chunk_size", ["auto", 2])
@pytest.mark.parametrize(
    ("f", "loops"),  # (`if` on a value the examples disagree on: the loop runs)
    [(lambda a: "pos" if a > 0 else "negative", True), (lambda a: "label", False),
     (lambda a: (a * 2, b"x" if a > 0 else b"yy"), True)],
)  # fmt: skip
def test_vectorize_of_a_function_returning_text_gives_numpys_text_arrays(f, loops, chunk_size):
    # vmapx.vectorize raised "vmap: the function must return arrays" where np.vectorize works
    x = np.array([1.0, -1.0, 2.0, -3.0, 4.0])
    with pytest.warns(vmapx.PerformanceWarning) if loops else contextlib.nullcontext():
        got = vmapx.vectorize(f, chunk_size=chunk_size)(x)
    want = np.vectorize(f)(x)
    for g, w in zip(*(r if isinstance(r, tuple) else (r,) for r in (got, want)), strict=True):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


X46 = RNG.normal(size=(4, 6))


def test_a_format_spec_of_a_batched_value_runs_the_loop():
    # f"{x:.2f}" raised TypeError (object.__format__) where the loop formats each example
    def f(x):
        return x * len(f"{x.sum():.2f}")

    with pytest.warns(vmapx.PerformanceWarning, match="format"):
        check_vmap(f, (np.array([[1.0, 2.0], [-30.0, 0.5], [100.0, 0.0]]),))
    check_vmap(lambda x: x * len(f"{x.shape[0]:3d}{np.sum(x * 0):.1f}"), (X46,))  # agree
    with pytest.raises(vmapx.errors.ConcretizationError, match="format"):
        vmapx.vmap(f, fallback="error")(np.array([[1.0, 2.0], [-30.0, 0.5]]))


def test_round_and_trunc_of_a_batched_scalar_act_as_on_numpys_scalars():
    # round(x.mean(), 1) and math.trunc(x) raised TypeError (a NumPy scalar has both)
    check_vmap(lambda x: x * round(x.mean(), 1), (X46,))
    check_vmap(lambda x: x * round(np.int64(25) + np.sum(x > 0), -1), (X46,))
    x = np.array([[0.2, 0.1], [3.7, 0.4], [-2.5, 0.0]])
    with pytest.warns(vmapx.PerformanceWarning):
        check_vmap(lambda x: x * round(x[0]), (x,))
    with pytest.warns(vmapx.PerformanceWarning):
        check_vmap(lambda x: x * math.trunc(x[0]), (x,))
    with pytest.raises(TypeError, match="__round__"):  # (as an ndarray's)
        vmapx.vmap(lambda x: round(x, 1))(x)
    np.testing.assert_allclose(  # round's derivative is zero, as of a NumPy scalar's round
        vmapx.vmap(vmapx.grad(lambda x: np.sum(x * round(x.sum(), 1))))(X46),
        np.stack([np.full(6, round(x.sum(), 1)) for x in X46]),
    )


def _slice_updates(x):
    y = x.copy()
    y[1:3] += x[:2]
    y[1:] += y[:-1]  # (overlapping: NumPy reads the old values)
    y[::-2] **= 2
    m = y.reshape(2, 3).copy()
    m[1] -= m[0] * 0.5
    m[:, 2] /= m[:, 0] + 3.0
    m[..., 1:] *= 2
    return m


@pytest.mark.parametrize("call", range(12))  # (CPython specializes the subscript after ~6)
def test_augmented_assignment_into_a_slice_stays_batched_and_differentiable(call):
    # `y[1:3] += v` ran the loop under vmap and raised ConcretizationError under grad
    # (the slice is a view, and `+=` wrote through it)
    check_vmap(_slice_updates, (X46,))
    loss = lambda x: np.sum(np.sin(_slice_updates(x)))  # noqa: E731
    vmapx.check_grads(loss, (X46[0],), order=2)
    expected = np.stack([vmapx.grad(loss)(x) for x in X46])
    np.testing.assert_allclose(vmapx.vmap(vmapx.grad(loss))(X46), expected, rtol=1e-12)


def test_augmented_assignment_through_a_batched_mask_stays_batched_on_every_call():
    # after ~8 calls CPython's specialized subscript calls `__getitem__` inline, and the
    # frame points past the instruction: the mask's stand-in was not made (the loop ran)
    def f(x):
        y = x.copy()
        y[x > 0] += 1.0
        return y

    for _ in range(12):
        got = vmapx.vmap(f)(X46)
    np.testing.assert_array_equal(got, np.where(X46 > 0, X46 + 1.0, X46))


def test_writes_through_views_still_give_numpys_values():
    def stale(x):
        y = x.copy()
        z = y[1:3]
        y[1:3] += 1.0
        return z * 1.0  # NumPy's view shows the write

    def through(x):
        y = x.copy()
        z = y[1:3]
        z += 1.0  # writes into y
        return y

    for f in (stale, through):
        with pytest.warns(vmapx.PerformanceWarning):
            check_vmap(f, (X46,))
        with pytest.raises(vmapx.errors.ConcretizationError):
            vmapx.grad(lambda x: np.sum(f(x)))(X46[0])  # noqa: B023


_MIXED = np.array([[4.0, 0.25, 9.0], [-4.0, 0.5, 2.0], [1.0, 0.1, 0.3]])  # one example < 0


@pytest.mark.parametrize(
    "f",
    [lambda x: np.float64(np.iscomplexobj(np.emath.sqrt(x))),
     lambda x: np.emath.sqrt(x) * 2.0,
     lambda x: np.real(np.emath.log(x)),
     lambda x: np.float64(np.iscomplexobj(np.emath.arcsin(x * 0.5))),
     lambda x: np.float64(np.iscomplexobj(np.emath.logn(x[0] + 0.5, x))),
     lambda x: np.float64(np.iscomplexobj(np.emath.power(x, 0.5)))],
)  # fmt: skip
def test_emath_results_keep_each_examples_type(f):
    # batched, an example in the real domain got a complex result (np.iscomplexobj, and
    # np.sqrt of it, gave the other answer); the loop runs where the examples' types differ
    with pytest.warns(vmapx.PerformanceWarning, match="complex result for some examples"):
        check_vmap(f, (_MIXED,))
    # (other shapes: a call that looped makes later calls of its signature loop at once)
    check_vmap(f, (np.abs(_MIXED[:, :2]) + 1.5,))  # all real: batched
    check_vmap(f, (-np.abs(_MIXED[:, :1]) - 1.5,))  # all complex: batched


def test_eigenvalues_keep_each_examples_type():
    rotation = np.array([[0.0, -1.0], [1.0, 0.0]])
    a = np.stack([rotation + np.diag([1.0, 2.0]), np.diag([2.0, -2.0]), rotation])

    def f(a):
        return np.float64(np.iscomplexobj(np.linalg.eig(a).eigenvalues)) + np.linalg.eigvals(a)

    with pytest.warns(vmapx.PerformanceWarning, match="eigenvalues for some examples"):
        check_vmap(f, (a,))
    check_vmap(f, (a[[0, 2]],))  # all complex: batched (another batch size: see above)


def test_real_if_close_keeps_each_examples_type():
    z = np.array([[1.0 + 1e-20j, 2.0], [1.0 + 0.5j, 2.0]])
    with pytest.warns(vmapx.PerformanceWarning, match="real_if_close"):
        check_vmap(lambda z: np.float64(np.iscomplexobj(np.real_if_close(z))), (z,))


def _inverse_or_zeros(a):
    try:
        return np.linalg.inv(a)
    except np.linalg.LinAlgError:
        return np.zeros_like(a)


def _reciprocal_or_zeros(x):
    with np.errstate(divide="raise"):
        try:
            return 1.0 / x
        except FloatingPointError:
            return np.zeros_like(x)


def _cholesky_with_jitter(a):
    try:
        return np.linalg.cholesky(a)
    except np.linalg.LinAlgError:
        return np.linalg.cholesky(a + 10.0 * np.eye(3))


_SPD = np.stack([m @ m.T + np.eye(3) for m in RNG.normal(size=(4, 3, 3))])


@pytest.mark.parametrize(
    ("f", "x"),
    [(_inverse_or_zeros, np.stack([np.eye(3), np.zeros((3, 3)), 2 * np.eye(3)])),
     (_reciprocal_or_zeros, np.array([[1.0, 2.0], [0.0, 1.0], [4.0, 8.0]])),
     (_cholesky_with_jitter, _SPD - np.array([0.0, 6.0, 0.0, 0.0])[:, None, None] * np.eye(3))],
)  # fmt: skip
def test_an_error_the_function_catches_for_some_examples_runs_the_loop(f, x):
    # a NumPy call raised for the whole batch, so every example took the `except` branch
    # (zeros for all, where the loop inverts the invertible ones)
    with pytest.warns(vmapx.PerformanceWarning, match="the function caught it"):
        check_vmap(f, (x,))
    with pytest.raises(vmapx.errors.ConcretizationError, match="the function caught it"):
        vmapx.vmap(f, fallback="error")(x)
    check_vmap(f, (x[[0, 2]],))  # no example raises: batched


def test_an_error_the_function_does_not_catch_is_raised_as_before():
    with pytest.raises(np.linalg.LinAlgError):
        vmapx.vmap(np.linalg.inv)(np.stack([np.eye(2), np.zeros((2, 2))]))


@pytest.mark.parametrize("casting", ["no", "equiv", "safe", "same_kind"])
def test_astype_follows_its_casting_rule(casting):
    # x.astype(np.int8, casting="safe") cast anyway under vmap, where NumPy raises
    x = np.array([[1.0, 2.0], [0.0, 1.0]])
    with pytest.raises(TypeError, match="Cannot cast"):
        vmapx.vmap(lambda x: x.astype(np.int8, casting=casting))(x)
    check_vmap(lambda x: x.astype(np.float64, casting=casting), (x,))


def test_an_error_caught_inside_a_cond_branch_runs_the_loop():
    # the branch runs on its examples as a batch of its own: the same error, the same fix
    a = np.stack([np.eye(3), np.zeros((3, 3)), 2 * np.eye(3), -np.eye(3)])

    def f(a):
        return vmapx.cond(np.trace(a) >= 0, lambda a: _inverse_or_zeros(a) + 1, lambda a: a, a)

    with pytest.warns(vmapx.PerformanceWarning, match="the function caught it"):
        check_vmap(f, (a,))


@pytest.mark.parametrize("chunk_size", ["auto", 1])
@pytest.mark.parametrize(
    ("f", "match"),
    [(lambda a: a[: int(a[0])], r"output 0 of the function has shape \(1,\)"),
     (lambda a: {"x": a[: int(a[0])]}, r"output 0 of the function has shape \(1,\)"),
     (lambda a: (a,) if a[0] > 1 else (a, a), "another structure")],
)  # fmt: skip
def test_results_of_different_shapes_say_so(f, match, chunk_size):
    # NumPy's "all input arrays must have the same shape" (or optree's, or concatenate's
    # with chunks) named no output and no example
    x = np.array([[1.0, 2.0], [2.0, 2.0]])
    loops = chunk_size == "auto"  # (chunks of one example: each batched on its own)
    with pytest.warns(vmapx.PerformanceWarning) if loops else contextlib.nullcontext():
        with pytest.raises(ValueError) as caught:
            vmapx.vmap(f, chunk_size=chunk_size)(x)
    assert isinstance(caught.value, vmapx.errors.OutputShapeError)
    assert re.search(match, str(caught.value)) or chunk_size == 1
    assert "vmapx.map" in str(caught.value) or "structure" in match


def test_jit_replay_whose_numpy_call_raises_runs_the_function():
    # recorded where the inverse exists, a replay on a singular matrix raised LinAlgError
    # where the function catches it
    def f(x):
        try:
            return np.linalg.inv(np.outer(x, x) + np.diag(x))
        except np.linalg.LinAlgError:
            return np.zeros((3, 3))

    jitted = vmapx.jit(f)
    for x in (np.array([1.0, 2.0, 3.0]), np.array([2.0, 1.0, 5.0]), np.zeros(3)):
        np.testing.assert_array_equal(jitted(x), f(x))
    with pytest.raises(np.linalg.LinAlgError):  # (an error `f` does not catch: raised)
        vmapx.jit(np.linalg.inv)(np.zeros((2, 2)))


def test_jit_of_a_function_that_raises_under_its_own_errstate_is_not_replayed():
    # the replay ran under the caller's errstate: 1 / 0 gave inf where `f` catches the
    # FloatingPointError its own `np.errstate(divide="raise")` makes
    def f(x):
        with np.errstate(divide="raise"):
            try:
                return 1.0 / x
            except FloatingPointError:
                return np.zeros_like(x)

    jitted = vmapx.jit(f)
    for x in (np.array([1.0, 2.0]), np.array([3.0, 4.0]), np.array([0.0, 1.0])):
        np.testing.assert_array_equal(jitted(x), f(x))

    def quiet(x):  # (an errstate that only silences warnings is replayed)
        with np.errstate(divide="ignore"):
            return np.log(x)

    assert "def replay" in str(vmapx.jit(quiet).lower(np.array([1.0, 2.0])))


def test_a_view_with_another_dtype_batches_or_runs_the_loop():
    # `x.view(np.int64)` raised UnsupportedError under vmap where the loop works
    x = RNG.normal(size=(3, 4))
    check_vmap(lambda x: x.view(np.int64) >> 52, (x,))  # the same itemsize: batched
    check_vmap(lambda x: x.view(np.int64) >> 52, (x.T.copy(),), in_axes=1)
    with pytest.warns(vmapx.PerformanceWarning, match="view"):
        check_vmap(lambda x: x.view(np.uint8).sum(), (x,))  # another itemsize: the loop

    def write_through(x):
        y = x.copy()
        y.view(np.int64)[0] = 0  # (writes y's first element)
        return y

    with pytest.warns(vmapx.PerformanceWarning):
        check_vmap(write_through, (x,))
    with pytest.raises(vmapx.errors.ConcretizationError, match="view"):
        vmapx.grad(lambda x: np.sum(x.view(np.int64)))(x[0])


def test_an_error_caught_then_another_raised_runs_the_loop():
    # the batch took the `except` branch, whose own call failed for an example that the
    # loop never sends there (its inverse exists): a LinAlgError where the loop succeeds
    def f(a):
        try:
            return np.linalg.inv(a)
        except np.linalg.LinAlgError:
            return np.linalg.cholesky(a + 1e-3 * np.eye(3))

    a = np.stack([np.diag([1.0, -1.0, 1.0]), np.zeros((3, 3)), 2 * np.eye(3)])
    with pytest.warns(vmapx.PerformanceWarning, match="the function caught it"):
        check_vmap(f, (a,))


def test_python_code_that_refuses_a_batched_value_runs_the_loop():
    # `np.ndarray.sum(x)`, `{0: a}[x]` (a NumPy scalar is hashable) raised TypeError naming
    # BatchTracer where the loop works
    x = np.arange(6.0).reshape(3, 2)
    weights = {0.0: 1.5, 2.0: 2.5, 4.0: 3.5}
    for f in (np.ndarray.sum, lambda x: np.float64(weights[x[0]])):
        with pytest.warns(vmapx.PerformanceWarning, match="refused a batched value"):
            check_vmap(f, (x,))
    with pytest.raises(vmapx.errors.ConcretizationError, match="refused a batched value"):
        vmapx.vmap(np.ndarray.sum, fallback="error")(x)
    with pytest.raises(TypeError, match="did not contain a loop"):  # (a genuine error)
        vmapx.vmap(lambda x: x + "a")(x)
