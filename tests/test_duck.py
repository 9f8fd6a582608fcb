"""vmapx on a strict duck array (`strict_array.StrictArray`, CuPy's refusals on a CPU):
the backend itself, every op-table row under `vmap` and `vmap(grad)`, and the other
transforms on representative functions. Values must stay strict arrays throughout."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import vmapx
from duck_table import (
    assert_on_device,
    check_duck_vmap,
    check_duck_vmap_grad,
    mapped,
)
from harness import assert_same
from op_table import OPS, Op
from strict_array import StrictArray, host, strict

# rows that cannot pass on a duck array, with the reason (strict expected failures: a
# row that starts passing must be taken off)
VMAP_EXPECTED_FAILURES: dict[str, str] = {}
GRAD_EXPECTED_FAILURES: dict[str, str] = {
    "sliding_window_view": "no derivative rule yet (as on NumPy arrays)",
    "sliding_window_view.axis": "no derivative rule yet (as on NumPy arrays)",
}


def _param(op: Op, failures: dict[str, str]) -> object:
    marks = ()
    if op.name in failures:
        marks = (pytest.mark.xfail(strict=True, reason=failures[op.name]),)
    return pytest.param(op, id=op.name, marks=marks)


# -- the backend refuses what CuPy refuses --------------------------------------------


def test_backend_refuses_host_conversion_and_mixing() -> None:
    x = StrictArray(np.arange(6.0).reshape(2, 3))
    host_array = np.ones(3)
    refusals = [
        lambda: np.asarray(x),
        lambda: x + host_array,
        lambda: host_array * x,
        lambda: np.concatenate([x, host_array[None]]),
        lambda: x[np.array([0, 1])],
        lambda: x.__setitem__(0, host_array),
    ]
    for refused in refusals:
        with pytest.raises(TypeError, match="StrictArray"):
            refused()
    assert not isinstance(x, np.ndarray)


def test_backend_computes_like_numpy_and_stays_strict() -> None:
    data = np.arange(6.0).reshape(2, 3)
    x = StrictArray(data)
    total = np.sum(np.sin(x) * 2.0, axis=None)
    assert isinstance(total, StrictArray) and total.shape == ()
    assert float(total) == pytest.approx(float(np.sum(np.sin(data) * 2.0)))
    assert bool(total > 0) is True and (x[1, 2] == 5.0).item() is True
    assert isinstance(x.sum(axis=0), StrictArray) and isinstance(
        x[StrictArray(np.array([1]))], StrictArray
    )
    np.testing.assert_array_equal(x[StrictArray(np.array([1, 0]))].get(), data[[1, 0]])
    w, v = np.linalg.eigh(StrictArray(np.eye(2)))
    assert isinstance(w, StrictArray) and isinstance(v, StrictArray)


def test_backend_creates_with_like() -> None:
    x = StrictArray(np.zeros(2))
    made = [np.zeros(3, like=x), np.arange(4, like=x), np.asarray(np.ones(2), like=x),
            np.eye(2, like=x), np.zeros_like(x), np.full(2, 1.5, like=x)]  # fmt: skip
    for m in made:
        assert isinstance(m, StrictArray), type(m)
    np.testing.assert_array_equal(made[1].get(), np.arange(4))


# -- the op table ----------------------------------------------------------------------


@pytest.mark.parametrize("op", [_param(op, VMAP_EXPECTED_FAILURES) for op in OPS])
def test_duck_vmap(op: Op) -> None:
    for in_axes in mapped(op):
        check_duck_vmap(op, in_axes)


@pytest.mark.parametrize(
    "op", [_param(op, GRAD_EXPECTED_FAILURES) for op in OPS if op.diff]
)  # fmt: skip
def test_duck_vmap_grad(op: Op) -> None:
    check_duck_vmap_grad(op)


def test_expected_failures_name_rows() -> None:
    names = {op.name for op in OPS}
    assert not (set(VMAP_EXPECTED_FAILURES) | set(GRAD_EXPECTED_FAILURES)) - names


# -- the other transforms on representative functions --------------------------------


def _loss(w: np.ndarray, x: np.ndarray) -> np.ndarray:
    h = np.tanh(x @ w)
    return np.sum(h**2) + 0.5 * np.sum(np.exp(-w))


def _data(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    return rng.normal(size=(4, 3)), rng.normal(size=(5, 4))


def test_grad_jacrev_jacfwd_hessian_stay_strict() -> None:
    w, x = _data(np.random.default_rng(0))
    for transform in (vmapx.grad, vmapx.jacrev, vmapx.jacfwd, vmapx.hessian):
        got = transform(_loss)(*strict((w, x)))
        assert_on_device(got)
        assert_same(host(got), transform(_loss)(w, x), rtol=1e-10, atol=1e-12)


def test_per_example_gradients_stay_strict() -> None:
    rng = np.random.default_rng(1)
    w, xs = rng.normal(size=(4, 3)), rng.normal(size=(6, 5, 4))
    g = vmapx.vmap(vmapx.grad(_loss), in_axes=(None, 0))
    got = g(*strict((w, xs)))
    assert_on_device(got)
    assert_same(host(got), g(w, xs), rtol=1e-10, atol=1e-12)


def test_jit_stays_strict() -> None:
    w, x = _data(np.random.default_rng(2))
    f = vmapx.jit(lambda w, x: np.tanh(x @ w).sum(axis=0) * 2.0)
    for _ in range(2):  # the recording run, then the replay
        got = f(*strict((w, x)))
        assert_on_device(got)
        assert_same(host(got), np.tanh(x @ w).sum(axis=0) * 2.0)


def _control(x: np.ndarray) -> tuple:
    c = vmapx.cond(np.sum(x) > 0, lambda v: v * 2.0, lambda v: -v, x)
    n = vmapx.while_loop(lambda s: np.sum(s) < 10.0, lambda s: s + 1.0, np.abs(x))
    carry, ys = vmapx.scan(lambda c, v: (c + v, c * v), np.zeros_like(x[0]), x)
    return c, n, carry, ys


def test_control_flow_under_vmap_stays_strict() -> None:
    xs = np.random.default_rng(3).normal(size=(5, 3, 2))
    got = vmapx.vmap(_control)(strict(xs))
    assert_on_device(got)
    assert_same(host(got), tuple(np.stack(c) for c in zip(*(_control(x) for x in xs), strict=True)))


def test_control_flow_grad_stays_strict() -> None:
    x = np.random.default_rng(4).normal(size=(3, 2))

    def f(x: np.ndarray) -> np.ndarray:
        c, n, carry, ys = _control(x)
        return np.sum(c) + np.sum(carry) + np.sum(ys)

    got = vmapx.grad(f)(strict(x))
    assert_on_device(got)
    assert_same(host(got), vmapx.grad(f)(x), rtol=1e-10, atol=1e-12)


def test_random_draws_on_duck_arrays_are_refused() -> None:
    def noisy(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return x + rng.normal(size=x.shape)

    xs = strict(np.zeros((3, 2)))
    f = vmapx.vmap(noisy, in_axes=(0, None), randomness="different")
    with pytest.raises(vmapx.errors.UnsupportedError, match="outside the vmap"):
        f(xs, np.random.default_rng(0))


def test_collectives_and_axis_index_stay_strict() -> None:
    xs = np.random.default_rng(5).normal(size=(4, 3))

    def f(x: np.ndarray) -> np.ndarray:
        return x - vmapx.pmean(x, "i") + vmapx.axis_index("i")

    got = vmapx.vmap(f, axis_name="i")(strict(xs))
    assert_on_device(got)
    assert_same(host(got), xs - xs.mean(axis=0) + np.arange(4)[:, None])


# -- the GPU benchmark, with the strict array standing in for CuPy --------------------


def test_gpu_benchmark_runs_on_a_duck_array() -> None:
    """`benchmarks/gpu.py` checks every method against hand-vectorized NumPy before it
    times it: run on strict arrays at tiny batches, vmapx's results stay on the device
    and equal NumPy's."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import gpu

    dev = gpu.Backend("strict", strict, host, lambda: None)
    for w in gpu.GPU_WORKLOADS:
        times = gpu.measure(w, dev, batch=4, repeat=1)
        assert set(times) == {"vmapx strict", "vmapx numpy", "hand strict"}
        got = w.vmapx(vmapx)(*strict(w.inputs(np.random.default_rng(0), 4)))
        assert_on_device(got)
