"""`vmapx.config.pytree_namespace`: classes registered in optree under a library's own
namespace are containers under vmap, grad and jit (and leaves without the setting)."""

import numpy as np
import optree
import pytest

import vmapx
from vmapx.errors import ArgumentError

NAMESPACE = "vmapx-tests"


class Params:
    """Weights and a bias, registered in the namespace only (not optree's global one)."""

    def __init__(self, w, b):
        self.w, self.b = w, b


optree.register_pytree_node(
    Params,
    lambda p: ((p.w, p.b), None, ("w", "b")),
    lambda _, children: Params(*children),
    namespace=NAMESPACE,
)


@pytest.fixture
def namespace():
    before = vmapx.config.pytree_namespace
    vmapx.config.pytree_namespace = NAMESPACE
    yield
    vmapx.config.pytree_namespace = before


def predict(p, x):
    return np.tanh(x @ p.w + p.b)


def loss(p, x):
    return np.sum(predict(p, x) ** 2)


def test_vmap_maps_over_a_namespaced_class(namespace):
    rng = np.random.default_rng(0)
    P = Params(rng.normal(size=(5, 3)), rng.normal(size=(5,)))
    x = rng.normal(size=3)
    got = vmapx.vmap(predict, in_axes=(0, None))(P, x)
    loop = np.stack([predict(Params(P.w[i], P.b[i]), x) for i in range(5)])
    np.testing.assert_allclose(got, loop)
    assert got.shape == loop.shape and got.dtype == loop.dtype


def test_vmap_returns_a_namespaced_class(namespace):
    X = np.random.default_rng(1).normal(size=(4, 3))
    out = vmapx.vmap(lambda x: Params(np.sin(x), np.sum(x)))(X)
    assert isinstance(out, Params)
    np.testing.assert_allclose(out.w, np.sin(X))
    np.testing.assert_allclose(out.b, X.sum(axis=1))


def test_grad_of_a_namespaced_class(namespace):
    rng = np.random.default_rng(2)
    p, x = Params(rng.normal(size=3), np.array(0.3)), rng.normal(size=3)
    g = vmapx.grad(loss)(p, x)
    assert isinstance(g, Params)
    vmapx.check_grads(lambda w, b: loss(Params(w, b), x), (p.w, p.b), order=2)
    gw = vmapx.grad(lambda w: loss(Params(w, p.b), x))(p.w)
    gb = vmapx.grad(lambda b: loss(Params(p.w, b), x))(p.b)
    np.testing.assert_allclose(g.w, gw)
    np.testing.assert_allclose(g.b, gb)


def test_per_example_gradients_of_a_namespaced_class(namespace):
    rng = np.random.default_rng(3)
    p, X = Params(rng.normal(size=3), np.array(0.1)), rng.normal(size=(6, 3))
    g = vmapx.vmap(vmapx.grad(loss), in_axes=(None, 0))(p, X)
    for i in range(len(X)):
        gi = vmapx.grad(loss)(p, X[i])
        np.testing.assert_allclose(g.w[i], gi.w)
        np.testing.assert_allclose(g.b[i], gi.b)


def test_jit_of_a_namespaced_class(namespace):
    p, x = Params(np.ones(3), np.array(0.5)), np.arange(3.0)
    np.testing.assert_allclose(vmapx.jit(predict)(p, x), predict(p, x))


def test_without_the_namespace_the_class_is_a_leaf():
    p = Params(np.ones(3), np.array(0.5))
    with pytest.raises(TypeError, match="argument `p`"):
        vmapx.grad(loss)(p, np.arange(3.0))


def test_pytree_namespace_must_be_a_string():
    with pytest.raises(ArgumentError, match="pytree_namespace must be a str"):
        vmapx.config.pytree_namespace = None
