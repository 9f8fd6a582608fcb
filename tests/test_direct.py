"""The engine's direct elementwise arithmetic on batched values (`vmapx._direct`) gives
what the ordinary dispatch gives, and steps aside where it does not apply."""

import numpy as np

import vmapx
from vmapx._direct import direct_binary


def test_direct_binary_matches_the_dispatch_and_declines_other_operands():
    seen = {}

    def f(x, y, z):
        seen["product"] = direct_binary(np.multiply, x, y)
        seen["broadcast"] = direct_binary(np.multiply, x, z)  # shapes differ
        seen["plain"] = direct_binary(np.add, x, np.ones(3))  # not batched
        return x * y

    x, y, z = np.arange(6.0).reshape(2, 3), np.ones((2, 3)) * 2, np.arange(2.0)
    out = vmapx.vmap(f)(x, y, z)
    np.testing.assert_array_equal(out, x * y)
    assert seen["broadcast"] is None and seen["plain"] is None
    np.testing.assert_array_equal(seen["product"].val, x * y)


def test_vmap_grad_through_the_direct_path_matches_the_loop():
    def f(x):
        return np.sum(np.sin(x) * np.cos(x) + np.tanh(x) * np.exp(-x))

    xs = np.random.default_rng(0).standard_normal((5, 3))
    got = vmapx.vmap(vmapx.grad(f))(xs)
    want = np.stack([vmapx.grad(f)(x) for x in xs])
    np.testing.assert_allclose(got, want, rtol=1e-12)
    vmapx.check_grads(f, (xs[0],), order=2)
