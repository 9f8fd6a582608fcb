"""cond / switch / while_loop / fori_loop / scan: plain Python without a transform, and
under vmap equal to the per-example loop, with each branch run only on its own examples."""

from __future__ import annotations

import doctest
import warnings

import numpy as np
import pytest

import vmapx
from harness import assert_same, check_vmap, loop_reference
from vmapx import control_flow
from vmapx.errors import ConcretizationError, ControlFlowError

rng = np.random.default_rng(0)


def recorder(log: list):
    """An identity function that logs the batch it receives under vmap (one entry per
    batched call), to see which examples a branch ran on."""

    @vmapx.custom_vmap
    def record(x):
        return x

    @record.def_vmap
    def rule(axis_size, in_batched, x):
        log.append(np.array(x, copy=True) if in_batched[0] else ("unbatched", x))
        return x, in_batched[0]

    return record


def countdown(n):
    """Terminates only for n >= 0 (guarded so that a broken test fails, not hangs)."""
    steps = [0]

    def body(v):
        steps[0] += 1
        assert steps[0] < 10_000, "a branch meant for n >= 0 ran on a negative n"
        return v - 1

    return vmapx.while_loop(lambda v: v != 0, body, n)


# -- without a transform: plain Python ------------------------------------------------


def test_plain_python():
    assert vmapx.cond(True, lambda x: x + 1, lambda x: x - 1, 1) == 2
    assert vmapx.cond(np.array(0.0), lambda: "t", lambda: "f") == "f"
    assert vmapx.switch(5, [lambda: 0, lambda: 1]) == 1  # clamped
    assert vmapx.switch(-1, [lambda: 0, lambda: 1]) == 0
    assert vmapx.while_loop(lambda v: v < 10, lambda v: v * 2, 1) == 16
    assert vmapx.fori_loop(2, 5, lambda i, s: s + [i], []) == [2, 3, 4]
    carry, ys = vmapx.scan(lambda c, x: (c + x, c * x), 1.0, np.arange(4.0))
    assert carry == 7.0
    np.testing.assert_array_equal(ys, [0.0, 1.0, 4.0, 12.0])


# -- cond and switch --------------------------------------------------------------------


def branchy(x, y):
    return vmapx.cond(np.sum(x) > 0, lambda a, b: a * b + 1.0, lambda a, b: a - np.sum(b), x, y)


@pytest.mark.parametrize("in_axes", [(0, 0), (0, None), (1, 0), (None, 0)])
def test_cond_equals_loop(in_axes):
    x, y = rng.normal(size=(6, 3)), rng.normal(size=(6, 3))
    args = [
        a if ax is None else np.moveaxis(a, 0, ax) for a, ax in zip((x, y), in_axes, strict=False)
    ]
    args = [a[0] if ax is None else a for a, ax in zip(args, in_axes, strict=False)]
    check_vmap(branchy, args, in_axes=in_axes)


@pytest.mark.parametrize(
    ("branch", "other"),
    [
        (lambda x: x.astype(np.float32), lambda x: 1.0),
        (lambda x: x.astype(np.float32), lambda x: np.float64(1.0)),
        (lambda x: x.astype(np.int32), lambda x: np.int64(1)),
    ],
)
def test_cond_results_of_different_dtypes_promote_like_np_stack(branch, other):
    """Branches of different dtypes: the examples run one by one (what follows could
    depend on each one's dtype), and `np.stack` of them promotes by dtype."""

    def f(x):
        return vmapx.cond(x > 0, branch, other, x)

    with pytest.warns(vmapx.PerformanceWarning, match="different dtypes"):  # (run per example)
        check_vmap(f, (np.array([1.0, -1.0, 2.0]),))


def test_cond_every_example_agrees_stays_batched():
    calls = []

    def f(x):
        return vmapx.cond(x > -100, lambda x: calls.append(1) or x * 2, lambda x: 1 / 0, x)

    np.testing.assert_array_equal(vmapx.vmap(f)(np.arange(5.0)), np.arange(5.0) * 2)
    assert calls == [1]  # one batched call; the other branch never ran


def test_cond_runs_each_branch_only_on_its_examples():
    true_log, false_log, calls = [], [], []
    rec_true, rec_false = recorder(true_log), recorder(false_log)

    def f(x):
        def true_fn(x):
            calls.append("true")
            return rec_true(x) * 10

        def false_fn(x):
            calls.append("false")
            return -rec_false(x)

        return vmapx.cond(x > 0, true_fn, false_fn, x)

    x = np.array([1.0, -2.0, 3.0, -4.0, 5.0])
    np.testing.assert_array_equal(vmapx.vmap(f)(x), [10.0, 2.0, 30.0, 4.0, 50.0])
    assert calls == ["false", "true"]  # each branch once, on its examples only
    np.testing.assert_array_equal(true_log, [[1.0, 3.0, 5.0]])
    np.testing.assert_array_equal(false_log, [[-2.0, -4.0]])


def test_untaken_branch_that_never_terminates():
    # countdown(n) loops forever for n < 0: a select that runs both branches on every
    # example could never return; the partition runs it only where n >= 0
    def f(n):
        return vmapx.cond(n >= 0, countdown, lambda n: -n, n)

    n = np.array([3, -2, 5, -1, 0])
    np.testing.assert_array_equal(vmapx.vmap(f)(n), [0, 2, 0, 1, 0])
    # and no example takes it at all
    np.testing.assert_array_equal(vmapx.vmap(f)(np.array([-1, -7])), [1, 7])


def test_switch_equals_loop():
    branches = [lambda x: x + 1, lambda x: x * x, lambda x: np.sin(x), lambda x: -x]

    def f(i, x):
        return vmapx.switch(i, branches, x)

    index = np.array([0, 3, 1, 1, 2, 3, 0, 9, -4])  # out of range: clamped
    check_vmap(f, [index, rng.normal(size=(9, 2))])
    check_vmap(f, [index, rng.normal(size=2)], in_axes=(0, None))
    check_vmap(f, [np.int64(2), rng.normal(size=(9, 2))], in_axes=(None, 0))


def test_switch_runs_only_selected_branches():
    calls = []
    branches = [lambda x, k=k: calls.append(k) or x + k for k in range(4)]
    out = vmapx.vmap(lambda i, x: vmapx.switch(i, branches, x))(np.array([2, 0, 2]), np.zeros(3))
    np.testing.assert_array_equal(out, [2.0, 0.0, 2.0])
    assert sorted(calls) == [0, 2]


def test_cond_pytree_operands_and_outputs():
    def f(d, s):
        def yes(d, s):
            return {"a": d["x"] * s, "b": (d["y"], s)}

        def no(d, s):
            return {"a": d["x"] - 1.0, "b": (d["y"] * 0, s + 1.0)}

        return vmapx.cond(s > 0, yes, no, d, s)

    d = {"x": rng.normal(size=(5, 2)), "y": np.arange(5)}
    s = np.array([1.0, -1.0, 2.0, -3.0, 0.5])
    got = vmapx.vmap(f)(d, s)
    expected = loop_reference(lambda x, y, s: f({"x": x, "y": y}, s), [d["x"], d["y"], s], 0)
    assert_same(got, expected)


def test_cond_branch_closes_over_batched_values():
    def f(x, y):
        scale = np.sum(y)

        def helper(v):
            return v * scale  # a closure two functions deep

        return vmapx.cond(x[0] > 0, lambda: helper(x) + y, lambda: x - scale)

    check_vmap(f, [rng.normal(size=(8, 3)), rng.normal(size=(8, 3))])
    check_vmap(f, [rng.normal(size=(8, 3)), rng.normal(size=3)], in_axes=(0, None))


def test_cond_mixed_dtypes_promote_like_the_loop():
    def f(x):
        return vmapx.cond(x > 0, lambda x: x.astype(np.int32), lambda x: x * 0.5, x)

    with pytest.warns(vmapx.PerformanceWarning, match="different dtypes"):
        check_vmap(f, [np.array([1, -2, 3])])


def test_cond_unbatched_branch_results():
    def f(x):
        return vmapx.cond(x > 0, lambda x: np.float64(1.0), lambda x: np.float64(2.0), x)

    check_vmap(f, [np.array([1.0, -1.0, 2.0])])

    def g(x):
        return vmapx.cond(x > 0, lambda x: 1.0, lambda x: x, x)  # Python scalar result

    check_vmap(g, [np.array([1.0, -1.0, 2.0])])


def test_zero_size_batch():
    def f(x):
        return vmapx.cond(x > 0, lambda x: x * 2, lambda x: -x, x)

    assert vmapx.vmap(f)(np.zeros(0)).shape == (0,)

    def g(n):
        return vmapx.while_loop(lambda v: v > 0, lambda v: v - 1, n)

    assert vmapx.vmap(g)(np.zeros(0, dtype=int)).shape == (0,)


# -- while_loop and fori_loop ---------------------------------------------------------


def newton_sqrt(a):
    def body(s):
        x, k = s
        return 0.5 * (x + a / x), k + 1

    return vmapx.while_loop(lambda s: np.abs(s[0] * s[0] - a) > 1e-10 * a, body, (a, 0))


def test_while_loop_equals_loop():
    a = np.array([4.0, 2.0, 1e6, 1.0, 0.25, 9.0])
    x, k = check_vmap(newton_sqrt, [a])
    np.testing.assert_allclose(x, np.sqrt(a))
    assert len(set(k.tolist())) > 2  # examples ran different numbers of iterations


def test_while_loop_active_set_shrinks():
    log = []
    rec = recorder(log)

    def f(n):
        return vmapx.while_loop(lambda v: v > 0, lambda v: rec(v) - 1, n)

    np.testing.assert_array_equal(vmapx.vmap(f)(np.array([1, 3, 0, 5])), [0, 0, 0, 0])
    assert [len(x) for x in log] == [3, 2, 2, 1, 1]  # only the examples still running
    np.testing.assert_array_equal(log[2], [1, 3])


def test_while_loop_unbatched_predicate_stays_batched():
    def f(x):
        return vmapx.while_loop(lambda s: s[1] < 4, lambda s: (s[0] * 2 + 1, s[1] + 1), (x, 0))

    check_vmap(f, [rng.normal(size=(5, 2))])


def test_while_loop_body_closes_over_batched_bound():
    def f(x, limit):
        return vmapx.while_loop(lambda v: np.sum(v) < limit, lambda v: v + np.abs(x), x)

    check_vmap(f, [np.abs(rng.normal(size=(6, 3))) + 0.1, np.linspace(1, 20, 6)])


def test_fori_loop_equals_loop():
    def f(n, x):
        return vmapx.fori_loop(0, n, lambda i, v: v * 0.5 + i, x)

    check_vmap(f, [np.array([0, 3, 1, 6]), rng.normal(size=(4, 2))])

    def g(lo, x):
        return vmapx.fori_loop(lo, 5, lambda i, v: v + i * x, x)

    check_vmap(g, [np.array([0, 3, 5, 7]), rng.normal(size=(4, 2))])

    def h(x):
        return vmapx.fori_loop(0, 3, lambda i, v: v * x + i, x)  # unbatched bounds

    check_vmap(h, [rng.normal(size=(4, 2))])


# -- scan --------------------------------------------------------------------------------


def test_scan_equals_loop():
    def ema(x, alpha):
        return vmapx.scan(lambda c, v: (alpha * c + (1 - alpha) * v, c * v), x[0], x)

    check_vmap(ema, [rng.normal(size=(5, 7, 2)), np.linspace(0.1, 0.9, 5)])

    def rev(x):
        return vmapx.scan(lambda c, v: (c + v, {"c": c}), np.zeros(2), x, reverse=True)

    check_vmap(rev, [rng.normal(size=(5, 4, 2))])

    def counter(x):
        return vmapx.scan(lambda c, _: (c * x, c), 1.0, None, length=4)

    check_vmap(counter, [rng.normal(size=5)])


def test_scan_zero_length():
    carry, ys = vmapx.vmap(lambda x: vmapx.scan(lambda c, v: (c + v, v * 2), 0.0, x))(
        np.zeros((3, 0))
    )
    assert carry.shape == (3,) and ys.shape == (3, 0)


# -- nested vmaps -------------------------------------------------------------------------


def test_nested_cond_predicate_batched_at_both_levels():
    log = []
    rec = recorder(log)

    def f(x):
        return vmapx.cond(x > 0, lambda x: rec(x) * 2, lambda x: x - 1, x)

    x = rng.normal(size=(3, 4))
    vmapx.vmap(vmapx.vmap(f))(x)
    assert len(log) == 1 and log[0].shape == ((x > 0).sum(),)  # one flat partition
    check_vmap(vmapx.vmap(f), [x])


def test_nested_cond_predicate_batched_at_one_level():
    def f(p, x):
        return vmapx.cond(p > 0, lambda x: x * p, lambda x: x + p, x)

    p, x = rng.normal(size=3), rng.normal(size=(3, 4))
    # the outer vmap batches the predicate, the inner one the operand
    check_vmap(vmapx.vmap(f, in_axes=(None, 0)), [p, x], in_axes=(0, 0))
    # the inner vmap batches the predicate, the outer one the operand
    p = rng.normal(size=4)
    check_vmap(vmapx.vmap(f, in_axes=(0, None)), [p, x[:, 0]], in_axes=(None, 0))


def test_nested_while_loop():
    def f(n):
        return vmapx.while_loop(lambda v: v[0] > 0, lambda v: (v[0] - 1, v[1] + v[0]), (n, 0))

    check_vmap(vmapx.vmap(f), [np.array([[3, 0, 1], [5, 2, 0]])])


def test_cond_inside_branch_of_cond():
    def f(x):
        def inner(x):
            return vmapx.cond(x > 1, lambda x: x * 100, lambda x: x * 10, x)

        return vmapx.cond(x > 0, inner, lambda x: -x, x)

    check_vmap(f, [np.array([0.5, -1.0, 2.0, 3.0, -0.5])])


def test_cond_inside_while_loop_and_loop_inside_cond():
    def f(n, x):
        def body(s):
            k, v = s
            v = vmapx.cond(v > 10, lambda v: v - 7.0, lambda v: v * 2.0 + 1.0, v)
            return k - 1, v

        steps = vmapx.while_loop(lambda s: s[0] > 0, body, (n, x))[1]
        return vmapx.cond(
            x > 0, lambda: vmapx.fori_loop(0, n, lambda i, v: v + i, steps), lambda: steps
        )

    check_vmap(f, [np.array([0, 5, 3, 8, 1]), np.array([1.0, -2.0, 30.0, 4.0, -5.0])])


def test_chunks_and_threads():
    import threading

    f = lambda n: vmapx.cond(n >= 0, countdown, lambda n: -n, n)  # noqa: E731
    n = np.array([3, -2, 5, -1, 0, 7, -9])
    expected = np.array([0, 2, 0, 1, 0, 0, 9])
    np.testing.assert_array_equal(vmapx.vmap(f, chunk_size=3)(n), expected)
    results = [None] * 4

    def work(k):
        results[k] = vmapx.vmap(f)(n * (k + 1))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k, r in enumerate(results):
        np.testing.assert_array_equal(r, np.where(n >= 0, 0, -n * (k + 1)))


# -- fallbacks and errors -----------------------------------------------------------------


class Holder:
    def __init__(self, value):
        self.value = value


def test_branch_using_uncaptured_batched_value_loops():
    def f(x):
        h = Holder(x * 2)  # reached through an attribute: not an operand, not a closure cell
        return vmapx.cond(x > 0, lambda: h.value + 1, lambda: -x)

    x = np.array([1.0, -2.0, 3.0])
    with pytest.warns(vmapx.PerformanceWarning, match="did not receive as an operand"):
        got = vmapx.vmap(f)(x)
    np.testing.assert_array_equal(got, [3.0, 2.0, 7.0])
    with pytest.raises(ConcretizationError, match="pass the value to `cond`"):
        vmapx.vmap(f, fallback="error")(x)


def test_branch_that_cannot_stay_batched_loops():
    def f(x):
        return vmapx.cond(x[0] > 0, lambda x: x[x > 0].sum(), lambda x: x.sum(), x)

    with pytest.warns(vmapx.PerformanceWarning, match="boolean mask"):
        check_vmap(f, [np.array([[1.0, -2.0], [-1.0, 2.0], [3.0, 4.0]])])


def test_errors():
    x = np.array([1.0, -1.0])
    with pytest.raises(ControlFlowError, match="different shapes"):
        vmapx.vmap(lambda x: vmapx.cond(x > 0, lambda: np.zeros(2), lambda: np.zeros(3)))(x)
    with pytest.raises(ControlFlowError, match="different structures"):
        vmapx.vmap(lambda x: vmapx.cond(x > 0, lambda: (x, x), lambda: x))(x)
    with pytest.raises(TypeError, match="scalar for each example"):
        vmapx.vmap(lambda x: vmapx.cond(x > 0, lambda: x, lambda: x))(np.ones((2, 2)))
    with pytest.raises(TypeError, match="must be an integer"):
        vmapx.vmap(lambda x: vmapx.switch(x, [lambda: x, lambda: x]))(x)
    with pytest.raises(TypeError, match="non-empty sequence"):
        vmapx.switch(0, [])
    with pytest.raises(TypeError, match="must be functions"):
        vmapx.cond(True, 1, 2)
    with pytest.raises(ControlFlowError, match="structure of the loop value"):
        vmapx.vmap(lambda n: vmapx.while_loop(lambda v: v > 0, lambda v: (v - 1,), n))(
            np.array([0, 2])
        )
    with pytest.raises(ValueError, match="same leading axis size"):
        vmapx.scan(lambda c, x: (c, x), 0, (np.zeros(3), np.zeros(4)))
    with pytest.raises(ValueError, match="give `xs` or `length`"):
        vmapx.scan(lambda c, x: (c, x), 0)
    with pytest.raises(TypeError, match="must return a pair"):
        vmapx.scan(lambda c, x: c, 0, np.zeros(3))


def test_state_is_restored_after_an_error():
    from vmapx._core import _state

    with pytest.raises(ZeroDivisionError):
        vmapx.vmap(lambda x: vmapx.cond(x > 0, lambda: 1 / 0, lambda: x))(np.array([1.0, -1.0]))
    assert _state.stack == []


def test_docstring_examples():
    with warnings.catch_warnings():
        failures, _ = doctest.testmod(control_flow, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert failures == 0


# -- derivatives --------------------------------------------------------------------------


def test_grads_through_loops_without_vmap():
    def rnn(w, xs):
        return vmapx.scan(lambda c, x: (np.tanh(c * w + x), c * x), np.zeros(3), xs)[0]

    vmapx.check_grads(rnn, [rng.normal(size=3), rng.normal(size=(4, 3))], order=2)
    fori = lambda w: vmapx.fori_loop(0, 4, lambda i, v: np.sin(v * w + i), w)  # noqa: E731
    vmapx.check_grads(fori, [rng.normal(size=2)], order=2)
    vmapx.check_grads(newton_sqrt, [np.array(3.0)], order=1)  # the tape records iterations
    assert np.isclose(vmapx.grad(lambda a: newton_sqrt(a)[0])(3.0), 0.5 / np.sqrt(3.0))
    branchy = lambda x: vmapx.cond(np.sum(x) > 0, np.sin, np.cos, x)  # noqa: E731
    vmapx.check_grads(branchy, [rng.normal(size=3)], order=2)


def piecewise(x):
    return vmapx.cond(x > 0, lambda x: x**3, lambda x: np.sin(x), x)


X = np.array([1.0, -2.0, 0.5, -0.1])
DPIECEWISE = np.where(X > 0, 3 * X**2, np.cos(X))


def test_grad_of_vmap_keeps_the_partition():
    got = vmapx.grad(lambda x: np.sum(vmapx.vmap(piecewise)(x)))(X)
    np.testing.assert_allclose(got, DPIECEWISE)
    vmapx.check_grads(lambda x: vmapx.vmap(piecewise)(x), [X], order=2)
    roots = lambda a: np.sum(vmapx.vmap(newton_sqrt)(a)[0])  # noqa: E731
    np.testing.assert_allclose(
        vmapx.grad(roots)(np.array([4.0, 2.0, 100.0])), [0.25, 0.5 / np.sqrt(2), 0.05]
    )  # noqa: E501


def test_derivatives_inside_vmap_stay_batched():
    # vmap(grad(f)), vmap(jvp(f)), second order: `switch` becomes a primitive whose
    # derivative is the switch of the branches' derivatives (no per-example loop)
    np.testing.assert_allclose(vmapx.vmap(vmapx.grad(piecewise))(X), DPIECEWISE)
    tangent = vmapx.vmap(lambda x: vmapx.jvp(piecewise, (x,), (1.0,))[1])(X)
    np.testing.assert_allclose(tangent, DPIECEWISE)
    second = vmapx.vmap(vmapx.grad(vmapx.grad(piecewise)))(X)
    np.testing.assert_allclose(second, np.where(X > 0, 6 * X, -np.sin(X)))
    np.testing.assert_allclose(vmapx.vmap(vmapx.jacfwd(piecewise))(X), DPIECEWISE)


def test_per_example_gradients_through_switch_with_closures():
    w = rng.normal(size=3)

    def loss(w, x, k):
        branches = [
            lambda x: np.sum(np.sin(w * x)),  # `w` reaches the branches as a closure
            lambda x: np.sum((w - x) ** 2),
            lambda x: np.sum(w * x) ** 2,
        ]
        return vmapx.switch(k, branches, x)

    xs, ks = rng.normal(size=(6, 3)), np.array([0, 1, 2, 2, 0, 1])
    for argnums in (0, 1):
        got = vmapx.vmap(vmapx.grad(loss, argnums=argnums), in_axes=(None, 0, 0))(w, xs, ks)
        expected = [vmapx.grad(loss, argnums=argnums)(w, x, k) for x, k in zip(xs, ks, strict=True)]  # noqa: E501
        np.testing.assert_allclose(got, np.stack(expected))


def test_forward_mode_of_batched_while_inside_vmap_stays_batched():
    def root(a):
        return newton_sqrt(a)[0]

    a = np.array([4.0, 2.0, 1e6, 1.0, 0.25])
    expected = np.stack([vmapx.jvp(root, (v,), (1.0,))[1] for v in a])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no per-example loop
        got = vmapx.vmap(lambda v: vmapx.jvp(root, (v,), (1.0,))[1])(a)
        np.testing.assert_allclose(got, expected)
        np.testing.assert_allclose(vmapx.vmap(vmapx.jacfwd(root))(a), expected)

        def accumulate(x):  # a carried Python float comes to depend on `x`
            body = lambda s: (s[0] + 1.0, s[1] + np.sin(x))  # noqa: E731
            return vmapx.while_loop(lambda s: s[0] < x * 3, body, (0.0, 0.0))[1]

        x = np.array([1.0, 2.0, 0.5])
        got = vmapx.vmap(lambda v: vmapx.jvp(accumulate, (v,), (1.0,))[1])(x)
        expected = [vmapx.jvp(accumulate, (v,), (1.0,))[1] for v in x]
        np.testing.assert_allclose(got, expected)

        def power(n, x):
            return vmapx.fori_loop(0, n, lambda i, v: np.sin(v) * x, x)

        n = np.array([1, 3, 2])

        def tangent(n, v):
            return vmapx.jvp(lambda v: power(n, v), (v,), (1.0,))[1]

        got = vmapx.vmap(tangent)(n, x)
        expected = [tangent(k, v) for k, v in zip(n, x, strict=True)]
        np.testing.assert_allclose(got, expected)


def test_reverse_mode_of_batched_while_inside_vmap_loops():
    with pytest.warns(vmapx.PerformanceWarning, match="reverse-mode derivative"):
        got = vmapx.vmap(vmapx.grad(lambda a: newton_sqrt(a)[0]))(np.array([4.0, 2.0]))
    np.testing.assert_allclose(got, [0.25, 0.5 / np.sqrt(2)])
