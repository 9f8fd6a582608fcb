"""Collectives over named vmap axes: psum, pmean, pmax, pmin, all_gather, axis_index."""

from __future__ import annotations

import doctest

import numpy as np
import pytest

import vmapx
from vmapx import _collectives
from vmapx._core import Tracer
from vmapx.errors import AxisNameError, ControlFlowError

rng = np.random.default_rng(0)


def test_batch_norm_with_pmean_equals_hand_computed_statistics():
    def batch_norm(x, gamma, beta):
        mean = vmapx.pmean(x, "batch")
        var = vmapx.pmean((x - mean) ** 2, "batch")
        return gamma * (x - mean) / np.sqrt(var + 1e-5) + beta

    x, gamma, beta = rng.normal(size=(16, 4)), rng.normal(size=4), rng.normal(size=4)
    got = vmapx.vmap(batch_norm, in_axes=(0, None, None), axis_name="batch")(x, gamma, beta)
    mean, var = x.mean(axis=0), x.var(axis=0)
    np.testing.assert_allclose(got, gamma * (x - mean) / np.sqrt(var + 1e-5) + beta, rtol=1e-12)


@pytest.mark.parametrize(
    ("collective", "reference"),
    [
        (vmapx.psum, lambda x: x.sum(0)),
        (vmapx.pmean, lambda x: x.mean(0)),
        (vmapx.pmax, lambda x: x.max(0)),
        (vmapx.pmin, lambda x: x.min(0)),
        (vmapx.all_gather, lambda x: x),
    ],
)
def test_collectives(collective, reference):
    x = rng.normal(size=(5, 3))
    seen = []

    def f(x):
        r = collective(x, "i")
        seen.append(isinstance(r, Tracer))
        return x * 0 + r if collective is not vmapx.all_gather else r + 0 * x[None]

    got = vmapx.vmap(f, axis_name="i")(x)
    np.testing.assert_allclose(got, np.broadcast_to(reference(x), got.shape), rtol=1e-12)
    assert seen == [False]  # the same for every example: unbatched, no copy per example
    # a value the batch does not change is reduced as that value repeated
    const = vmapx.vmap(lambda x: collective(np.arange(3.0), "i") + 0 * x[0], axis_name="i")(x)
    np.testing.assert_allclose(const[0], reference(np.broadcast_to(np.arange(3.0), (5, 3))))


def test_integer_and_boolean_dtypes_match_numpy():
    x = np.array([[1, 2], [3, 4]], dtype=np.int8)
    got = vmapx.vmap(lambda x: vmapx.psum(x, "i"), axis_name="i", out_axes=None)(x)
    assert got.dtype == x.sum(0).dtype
    np.testing.assert_array_equal(got, x.sum(0))
    m = vmapx.vmap(lambda x: vmapx.pmean(x, "i"), axis_name="i", out_axes=None)(x)
    assert m.dtype == np.float64


def test_axis_index():
    got = vmapx.vmap(lambda x: x + vmapx.axis_index("i"), axis_name="i")(np.zeros(4))
    np.testing.assert_array_equal(got, np.arange(4.0))
    nested = vmapx.vmap(
        vmapx.vmap(lambda x: vmapx.axis_index(("i", "j")) + 0 * x, axis_name="j"), axis_name="i"
    )(np.zeros((2, 3)))
    np.testing.assert_array_equal(nested, np.arange(6).reshape(2, 3))


def test_nested_names_and_tuples():
    x = rng.normal(size=(3, 4, 2))

    def f(x):
        return (
            vmapx.psum(x, "inner"),
            vmapx.psum(x, "outer"),
            vmapx.psum(x, ("outer", "inner")),
            vmapx.pmax(x, ("inner", "outer")),
        )

    inner, outer, both, top = vmapx.vmap(vmapx.vmap(f, axis_name="inner"), axis_name="outer")(x)
    np.testing.assert_allclose(inner, np.broadcast_to(x.sum(1, keepdims=True), x.shape))
    np.testing.assert_allclose(outer, np.broadcast_to(x.sum(0, keepdims=True), x.shape))
    np.testing.assert_allclose(both, np.broadcast_to(x.sum((0, 1)), x.shape))
    np.testing.assert_allclose(top, np.broadcast_to(x.max((0, 1)), x.shape))


def test_reduce_over_a_level_that_does_not_batch_the_value():
    # x varies over the outer vmap only; summing it over the inner axis repeats it
    def f(x, y):
        return vmapx.psum(x, "inner") + 0 * y

    x, y = rng.normal(size=3), np.zeros((3, 4))
    inner = vmapx.vmap(f, in_axes=(None, 0), axis_name="inner")
    got = vmapx.vmap(inner, axis_name="outer")(x, y)
    np.testing.assert_allclose(got, np.broadcast_to(4 * x[:, None], (3, 4)))

    # and the other way round: y varies over the inner vmap only
    def g(x, y):
        return vmapx.psum(y, "outer") + 0 * x

    got = vmapx.vmap(vmapx.vmap(g, in_axes=(None, 0)), in_axes=(0, None), axis_name="outer")(
        x, np.arange(4.0)
    )
    np.testing.assert_allclose(got, np.broadcast_to(3 * np.arange(4.0), (3, 4)))


@pytest.mark.parametrize("name", ["outer", "inner"])
def test_all_gather_over_one_of_two_nested_names(name):
    """Each example (i, j) gathers its value over the named axis only: over `outer`, the
    column Y[:, j]; over `inner`, the row Y[i]."""
    y = np.arange(24.0).reshape(2, 3, 4)
    f = vmapx.vmap(vmapx.vmap(lambda x: vmapx.all_gather(x, name), axis_name="inner"),
                   axis_name="outer")  # fmt: skip
    got = f(y)
    expected = np.stack([np.stack([y[:, j] if name == "outer" else y[i] for j in range(3)])
                         for i in range(2)])  # fmt: skip
    assert got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)


def test_shadowed_name_means_the_innermost():
    x = rng.normal(size=(2, 3))

    def f(x):
        return vmapx.psum(x, "b")

    got = vmapx.vmap(vmapx.vmap(f, axis_name="b"), axis_name="b")(x)
    np.testing.assert_allclose(got, np.broadcast_to(x.sum(1, keepdims=True), x.shape))


def test_pytree_argument():
    d = {"a": rng.normal(size=(4, 2)), "b": rng.normal(size=4)}
    got = vmapx.vmap(lambda d: vmapx.psum(d, "i"), axis_name="i", out_axes=None)(d)
    np.testing.assert_allclose(got["a"], d["a"].sum(0))
    np.testing.assert_allclose(got["b"], d["b"].sum(0))


def test_errors():
    with pytest.raises(AxisNameError, match=r"axis_name='nope'.*names in scope: \['i'\]"):
        vmapx.vmap(lambda x: vmapx.psum(x, "nope"), axis_name="i")(np.zeros(2))
    with pytest.raises(AxisNameError, match="axis_name='i'"):
        vmapx.psum(np.zeros(2), "i")
    with pytest.raises(ValueError, match="chunk_size.*axis_name"):
        vmapx.vmap(lambda x: x, axis_name="i", chunk_size=2)
    with pytest.raises(ControlFlowError, match="only some of its examples take"):
        vmapx.vmap(
            lambda x: vmapx.cond(x > 0, lambda: vmapx.psum(x, "i"), lambda: x), axis_name="i"
        )(np.array([1.0, -1.0]))
    with pytest.raises(ValueError, match="one axis name"):
        vmapx.vmap(lambda x: vmapx.all_gather(x, ("i", "i")), axis_name="i")(np.zeros(2))


def test_docstring_examples():
    failures, _ = doctest.testmod(_collectives, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert failures == 0


# -- derivatives: grad(vmap(f)) differentiates the rules' NumPy calls; under vmap(grad(f))
# a collective's transpose is the same collective, so each example gets the gradient of
# the sum of all examples' outputs, as in JAX: vmap(grad(f)) == grad(sum(vmap(f))) --------

COUPLED = {
    "psum": lambda x: np.sin(x) * vmapx.psum(x**2, "b"),
    "pmean": lambda x: np.tanh(x - vmapx.pmean(x, "b")),
    "pmax-pmin": lambda x: x * vmapx.pmax(x, "b") + vmapx.pmin(np.sin(x), "b"),
    "all_gather": lambda x: x * np.sum(np.cos(vmapx.all_gather(x, "b")), axis=0),
}


@pytest.mark.parametrize("name", list(COUPLED))
def test_collectives_are_differentiable(name):
    f = COUPLED[name]
    x = rng.normal(size=(4, 3))

    def total(x):
        return np.sum(vmapx.vmap(f, axis_name="b")(x))

    vmapx.check_grads(total, [x], order=2)
    per_example = vmapx.vmap(vmapx.grad(lambda v: np.sum(f(v))), axis_name="b")(x)
    np.testing.assert_allclose(per_example, vmapx.grad(total)(x), rtol=1e-12, atol=1e-12)
    t = rng.normal(size=x.shape)
    _, forward = vmapx.jvp(vmapx.vmap(f, axis_name="b"), (x,), (t,))
    _, inside = vmapx.vmap(lambda v, s: vmapx.jvp(f, (v,), (s,)), axis_name="b")(x, t)
    np.testing.assert_allclose(inside, forward, rtol=1e-12, atol=1e-12)


def test_batch_norm_gradient():
    def loss(x):
        mean = vmapx.pmean(x, "batch")
        var = vmapx.pmean((x - mean) ** 2, "batch")
        return np.sum(np.sin((x - mean) / np.sqrt(var + 1e-5)))

    x = rng.normal(size=(5, 3))
    vmapx.check_grads(lambda x: np.sum(vmapx.vmap(loss, axis_name="batch")(x)), [x], order=2)
