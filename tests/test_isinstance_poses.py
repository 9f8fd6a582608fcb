"""`isinstance` of a traced value answers as the loop's value would (`Tracer.__class__`).

Code branches on `isinstance(x, np.ndarray)`, `isinstance(s, float)`, `np.isscalar(s)`;
a traced value that answered otherwise took the other branch: a silently wrong value.
Every check compares a transform against the explicit loop of the same function.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import vmapx
from harness import assert_same, check_vmap, loop_reference, type_answers

rng = np.random.default_rng(0)
X = rng.normal(size=(4, 3))
V = rng.normal(size=4)
I = np.arange(4) * 3  # noqa: E741


def branchy(x):
    """Branches on the types of the argument and of values made from it."""
    s = x.sum() if isinstance(x, np.ndarray) and x.ndim else x
    out = type_answers(x) + 10 * type_answers(s) + 100 * type_answers(x * 2)
    return out * (s if isinstance(s, float) else s * -1.0)


@pytest.mark.parametrize(
    "arg", [X, V, I, X.astype(np.float32), V > 0], ids=["2d", "1d", "int", "f32", "bool"]
)
def test_vmap_answers_as_the_loop(arg) -> None:
    check_vmap(branchy, [arg])


def test_the_branch_taken_is_the_loops() -> None:
    def scale(x):
        return x * (2.0 if isinstance(x, np.ndarray) else 3.0)

    assert_same(vmapx.vmap(scale)(X), 2 * X)
    assert_same(vmapx.vmap(lambda x: scale(x.sum()))(X), 3 * X.sum(axis=1))


def test_nested_vmap_and_in_axes() -> None:
    f = vmapx.vmap(branchy, in_axes=1)
    check_vmap(f, [X[:, :, None] * np.ones(2)])
    check_vmap(lambda x, y: branchy(x) + type_answers(y).sum(), [X, 2.0], in_axes=(0, None))


def test_python_numbers_drawn_per_example_are_floats_not_numpy_scalars() -> None:
    def draw(m, g):
        r = g.random()  # the loop: a Python float
        return type_answers(r) + m

    out = vmapx.vmap(draw, in_axes=(0, None), randomness="different")(V, np.random.default_rng(1))
    assert_same(out, np.stack([type_answers(0.5) + m for m in V]))


def test_under_grad_the_primals_type() -> None:
    def loss(x):
        y = x * 2 if isinstance(x, np.ndarray) else x
        s = np.sum(y**2)
        return s * (3.0 if isinstance(s, np.floating) else 5.0)

    for fn in (vmapx.grad(loss), vmapx.jacfwd(loss), vmapx.jacrev(loss)):
        got = fn(X[0])
        assert_same(got, 24 * X[0])
        assert_same(vmapx.vmap(fn)(X), 24 * X)
    assert_same(vmapx.grad(loss)(np.array(2.0)), np.array(48.0))  # a 0-d array: an ndarray


def test_under_jit_the_values_type() -> None:
    def f(x, n):
        a = x * 2 if isinstance(x, np.ndarray) else x
        return a + (1 if isinstance(n, float) else 2) + type_answers(x.sum()).sum()

    jf = vmapx.jit(f)
    for _ in range(3):  # the recording, then replays
        assert_same(jf(X, 2.0), f(X, 2.0))
        assert_same(jf(X, 2), f(X, 2))


def test_vmap_of_grad_of_a_scalar_example() -> None:
    # the loop's `grad` of an np.float64 differentiates a 0-d array (`np.asarray`): no float
    g = vmapx.grad(lambda v: v**3 if isinstance(v, float) else 2 * v)
    check_vmap(g, [V])
    check_vmap(g, [V.astype(np.float32)])
    h = vmapx.grad(lambda v: v**3 if isinstance(v, np.ndarray) else 2 * v)
    check_vmap(h, [V])


def test_type_is_still_the_tracers() -> None:
    # documented: `type(x)` is the tracer's class (only `isinstance` consults `__class__`)
    out = vmapx.vmap(lambda x: type(x) is np.ndarray)(X)
    assert out.tolist() == [False] * 4
    assert loop_reference(lambda x: type(x) is np.ndarray, [X], 0).tolist() == [True] * 4


def test_scipy_variation_batches_and_equals_the_loop() -> None:
    import scipy.stats  # (here: imported after vmapx, its adapters are in place)

    Y = rng.normal(size=(6, 4, 3))
    Y[0] = 0.0  # zero deviation and mean: NaN
    Y[1] = 2.0  # zero deviation
    for axis in (0, -1, None):
        for ddof in (0, 1, 3, 4):
            for keepdims in (False, True):
                for y in (Y, Y.astype(np.float32)):

                    def f(a, axis=axis, ddof=ddof, keepdims=keepdims):
                        return scipy.stats.variation(a, axis=axis, ddof=ddof, keepdims=keepdims)

                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", RuntimeWarning)
                        warnings.simplefilter("error", vmapx.PerformanceWarning)
                        got, want = vmapx.vmap(f)(y), loop_reference(f, [y], 0)
                    assert got.dtype == want.dtype and got.shape == want.shape
                    np.testing.assert_array_equal(got, want)
