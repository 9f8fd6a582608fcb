"""`allow_int` on grad, value_and_grad and jacrev: integer inputs are constants whose
derivative is a float0 zero array; without it an integer input is a TypeError naming it."""

import numpy as np
import pytest

import vmapx
from harness import check_vmap
from vmapx.errors import DifferentiationError

FLOAT0_NAMES = ("float0",)


def scaled_power(w, n):
    return np.sum(w**n * np.arange(1, w.size + 1))


def test_grad_allow_int_float_part_matches_finite_differences():
    w, n = np.array([0.5, 1.5, -2.0]), np.array([1, 2, 3])
    gw, gn = vmapx.grad(scaled_power, argnums=(0, 1), allow_int=True)(w, n)
    vmapx.check_grads(lambda w: scaled_power(w, n), (w,), order=1, modes=("rev",))
    np.testing.assert_allclose(gw, vmapx.grad(lambda w: scaled_power(w, n))(w))
    assert gn.shape == n.shape and gn.dtype.names == FLOAT0_NAMES


def test_grad_allow_int_python_int_and_bool_in_a_pytree():
    params = {"w": np.array([1.0, 2.0]), "k": 3, "on": np.array(True)}

    def loss(p):
        return np.sum(p["w"] ** p["k"]) * p["on"]

    g = vmapx.grad(loss, allow_int=True)(params)
    np.testing.assert_allclose(g["w"], 3 * params["w"] ** 2)
    for key in ("k", "on"):
        assert g[key].shape == () and g[key].dtype.names == FLOAT0_NAMES


def test_value_and_grad_allow_int():
    w, n = np.array([2.0, 3.0]), np.array([2, 2])
    value, (gw, gn) = vmapx.value_and_grad(scaled_power, argnums=(0, 1), allow_int=True)(w, n)
    assert value == scaled_power(w, n)
    np.testing.assert_allclose(gw, np.array([4.0, 12.0]))
    assert gn.dtype.names == FLOAT0_NAMES


def test_integer_input_without_allow_int_names_the_argument():
    with pytest.raises(TypeError, match="argument `n` is int64") as info:
        vmapx.grad(scaled_power, argnums=(0, 1))(np.ones(3), np.arange(3))
    assert isinstance(info.value, DifferentiationError)
    assert "allow_int=True" in str(info.value)


def test_float_inputs_are_unchanged_by_allow_int():
    w = np.array([0.3, -1.2, 2.0])
    got = vmapx.grad(lambda w: np.sum(np.sin(w) * w), allow_int=True)(w)
    np.testing.assert_allclose(got, vmapx.grad(lambda w: np.sum(np.sin(w) * w))(w))


def test_vmap_of_grad_allow_int_matches_the_loop():
    def per_example(w, n):
        gw, gn = vmapx.grad(scaled_power, argnums=(0, 1), allow_int=True)(w, n)
        return gw, np.zeros(gn.shape)  # the float0 part's shape, as floats for the loop

    W = np.random.default_rng(0).normal(size=(4, 3))
    N = np.arange(12).reshape(4, 3) % 3
    check_vmap(per_example, (W, N))
    _, gn = vmapx.vmap(vmapx.grad(scaled_power, argnums=(0, 1), allow_int=True))(W, N)
    assert gn.shape == N.shape and gn.dtype.names == FLOAT0_NAMES


def test_jacrev_allow_int():
    w, n = np.array([1.0, 2.0, 3.0]), np.array([1, 2, 3])
    jw, jn = vmapx.jacrev(lambda w, n: w**n, argnums=(0, 1), allow_int=True)(w, n)
    np.testing.assert_allclose(jw, np.diag(n * w ** (n - 1)))
    np.testing.assert_allclose(jw, vmapx.jacfwd(lambda w: w**n)(w))
    assert jn.shape == (3, 3) and jn.dtype.names == FLOAT0_NAMES
    with pytest.raises(TypeError, match="argument `n`"):
        vmapx.jacrev(lambda w, n: w**n, argnums=(0, 1))(w, n)
