"""`chunk_size` on `jacrev`/`jacfwd`, `checkpoint` and `eval_shape`: each against the
unchunked Jacobian, the plain function and finite differences, or the call itself."""

from __future__ import annotations

import numpy as np
import optree
import pytest

import vmapx
from harness import peak_bytes
from vmapx.errors import ConcretizationError, DifferentiationError

RNG = np.random.default_rng(0)


def wide(x: np.ndarray) -> np.ndarray:  # R^7 -> R^7, every output on every input
    return np.tanh(np.outer(x, x)).sum(1) + np.sin(x)


# -- chunk_size on jacrev / jacfwd ---------------------------------------------------


@pytest.mark.parametrize("jac", [vmapx.jacrev, vmapx.jacfwd])
@pytest.mark.parametrize("chunk_size", [1, 3, 7, 100])
def test_chunked_jacobian_is_the_unchunked_one(jac, chunk_size):
    x = RNG.normal(size=7)
    np.testing.assert_array_equal(jac(wide, chunk_size=chunk_size)(x), jac(wide)(x))


@pytest.mark.parametrize("jac", [vmapx.jacrev, vmapx.jacfwd])
def test_chunked_jacobian_of_pytrees_with_aux(jac):
    def f(p, x):
        y = np.tanh(p["W"] @ x + p["b"])
        return {"y": y, "s": y.sum()}, y.max()

    p = {"W": RNG.normal(size=(3, 4)), "b": RNG.normal(size=3)}
    x = RNG.normal(size=4)
    whole, aux = jac(f, argnums=(0, 1), has_aux=True)(p, x)
    chunked, aux2 = jac(f, argnums=(0, 1), has_aux=True, chunk_size=2)(p, x)
    assert aux == aux2
    assert optree.tree_structure(whole) == optree.tree_structure(chunked)
    for u, v in zip(optree.tree_leaves(whole), optree.tree_leaves(chunked), strict=True):
        np.testing.assert_array_equal(u, v)


def test_chunked_jacobian_matches_finite_differences():
    x, eps = RNG.normal(size=7), 1e-6
    fd = np.stack([(wide(x + eps * e) - wide(x - eps * e)) / (2 * eps) for e in np.eye(7)], 1)
    np.testing.assert_allclose(vmapx.jacrev(wide, chunk_size=2)(x), fd, rtol=1e-6, atol=1e-8)


def test_chunked_jacobian_under_vmap():
    X = RNG.normal(size=(5, 7))
    got = vmapx.vmap(vmapx.jacrev(wide, chunk_size=3))(X)
    np.testing.assert_allclose(got, np.stack([vmapx.jacrev(wide)(x) for x in X]))


@pytest.mark.parametrize("bad", [0, -1, 2.5, "3", True])
def test_chunk_size_must_be_a_positive_int(bad):
    with pytest.raises(DifferentiationError, match="jacrev: `chunk_size` must be a positive"):
        vmapx.jacrev(wide, chunk_size=bad)


# -- checkpoint -----------------------------------------------------------------------


def block(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    return np.tanh(np.sin(x * w) * w)


def deep(f):
    return lambda x, w: np.sum(f(f(f(x, w), w), w) ** 2)


def test_checkpoint_values_and_gradients_are_the_functions():
    x, w = RNG.normal(size=5), RNG.normal(size=5)
    cb = vmapx.checkpoint(block)
    np.testing.assert_array_equal(cb(x, w), block(x, w))
    got = vmapx.grad(deep(cb), argnums=(0, 1))(x, w)
    want = vmapx.grad(deep(block), argnums=(0, 1))(x, w)
    for g, e in zip(got, want, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-12)
    vmapx.check_grads(deep(cb), (x, w), order=2)


@pytest.mark.parametrize(
    "transform",
    [
        lambda f: vmapx.vmap(vmapx.grad(f), in_axes=(0, None)),
        lambda f: vmapx.jit(vmapx.vmap(vmapx.grad(f), in_axes=(0, None))),
        lambda f: vmapx.grad(lambda X, w: vmapx.vmap(f, in_axes=(0, None))(X, w).sum()),
        lambda f: vmapx.vmap(vmapx.hessian(f), in_axes=(0, None)),
        lambda f: vmapx.vmap(vmapx.jacfwd(f), in_axes=(0, None)),
    ],
)
def test_checkpoint_composes(transform):
    X, w = RNG.normal(size=(4, 5)), RNG.normal(size=5)
    got = transform(deep(vmapx.checkpoint(block)))
    want = transform(deep(block))
    np.testing.assert_allclose(got(X, w), want(X, w), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got(X + 1, w), want(X + 1, w), rtol=1e-10, atol=1e-12)


def test_checkpoint_recomputes_in_the_backward_pass():
    calls = []

    def counted(x):
        calls.append(None)
        return np.sin(x) * x

    loss = lambda f: lambda x: np.sum(f(x))  # noqa: E731
    x = RNG.normal(size=3)
    vmapx.grad(loss(counted))(x)
    assert len(calls) == 1
    calls.clear()
    g = vmapx.grad(loss(vmapx.checkpoint(counted)))(x)
    assert len(calls) == 2  # the forward pass, then again for the backward pass
    np.testing.assert_allclose(g, np.cos(x) * x + np.sin(x))


def test_checkpoint_keeps_less_memory_for_the_backward_pass():
    def layer(x):  # 8 intermediates of the input's size
        for _ in range(8):
            x = np.sin(x) * 1.01
        return x

    def loss(f):
        def total(x):
            for _ in range(6):
                x = f(x)
            return np.sum(x)

        return vmapx.grad(total)

    x = RNG.normal(size=200_000)
    np.testing.assert_allclose(loss(vmapx.checkpoint(layer))(x), loss(layer)(x), rtol=1e-12)
    plain = peak_bytes(lambda: loss(layer)(x))
    remat = peak_bytes(lambda: loss(vmapx.checkpoint(layer))(x))
    assert remat < 0.5 * plain, (remat, plain)


def test_checkpoint_of_pytrees_and_constant_arguments():
    def f(p, x, n, power=1):
        return {"a": p["w"] * x**n, "b": np.sin(x) ** power}

    cf = vmapx.checkpoint(f)
    p, x = {"w": RNG.normal(size=4)}, RNG.normal(size=4)

    def loss(f):
        return lambda p, x: np.sum(f(p, x, 3)["a"] * f(p, x, 3, power=2)["b"])

    got = vmapx.grad(loss(cf), argnums=(0, 1))(p, x)
    want = vmapx.grad(loss(f), argnums=(0, 1))(p, x)
    np.testing.assert_allclose(got[0]["w"], want[0]["w"])
    np.testing.assert_allclose(got[1], want[1])


def test_checkpoint_keeps_the_signature_and_refuses_non_callables():
    assert vmapx.checkpoint(block).__name__ == "block"
    with pytest.raises(TypeError, match="checkpoint: `f` must be callable"):
        vmapx.checkpoint(3)
    with pytest.raises(TypeError, match="keyword arguments are constants and must be hashable"):
        vmapx.checkpoint(lambda x, w=None: x)(np.ones(2), w=np.ones(2))


# -- eval_shape -----------------------------------------------------------------------


CASES = [
    (lambda w, x: np.tanh(x @ w), [(5, 3), (2, 5)], np.float32),
    (lambda x: (x.sum(0), x.T, np.linalg.eigh(x @ x.T)), [(4, 4)], np.float64),
    (lambda x: {"m": x.mean(), "i": np.argmax(x, axis=-1)}, [(3, 6)], np.float64),
    (lambda x: np.fft.rfft(x), [(16,)], np.float64),
    (lambda x, y: np.concatenate([x, y]) * 2, [(2, 3), (4, 3)], np.int32),
    (vmapx.grad(lambda x: np.sum(x**2)), [(3,)], np.float64),
    (vmapx.vmap(lambda x: np.outer(x, x)), [(5, 3)], np.float32),
]


@pytest.mark.parametrize("f, shapes, dtype", CASES)
def test_eval_shape_is_the_calls_shapes_and_dtypes(f, shapes, dtype):
    args = [RNG.normal(size=s).astype(dtype) for s in shapes]
    real = f(*args)
    for given in (args, [vmapx.ShapeDtypeStruct(s, dtype) for s in shapes]):
        got = vmapx.eval_shape(f, *given)
        assert optree.tree_structure(got) == optree.tree_structure(real)
        for g, r in zip(optree.tree_leaves(got), optree.tree_leaves(real), strict=True):
            assert isinstance(g, vmapx.ShapeDtypeStruct)
            assert (g.shape, g.dtype) == (np.shape(r), np.asarray(r).dtype)


def test_eval_shape_computes_nothing():
    huge = vmapx.ShapeDtypeStruct((200_000, 100_000), np.float64)  # 160 GB if made
    out = vmapx.eval_shape(lambda a, b: a @ b.T, huge, huge)
    assert out == vmapx.ShapeDtypeStruct((200_000, 200_000), np.float64)


def test_eval_shape_with_numbers_and_keywords():
    out = vmapx.eval_shape(lambda n, scale=1.0: np.zeros(n) * scale, 4, scale=2.0)
    assert out == vmapx.ShapeDtypeStruct((4,), np.float64)


def test_eval_shape_refuses_to_read_values():
    with pytest.raises(ConcretizationError, match="eval_shape: the function reads a value"):
        vmapx.eval_shape(lambda x: x if x.sum() > 0 else -x, np.ones(3))
    with pytest.raises(ConcretizationError):
        vmapx.eval_shape(lambda x: x[x > 0], np.ones(3))


def test_shape_dtype_struct():
    s = vmapx.ShapeDtypeStruct([3, 2], "float32")
    assert (s.shape, s.dtype, s.ndim, s.size) == ((3, 2), np.dtype(np.float32), 2, 6)
