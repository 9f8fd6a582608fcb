"""Per-op overhead: the time vmapx adds to one NumPy call on tiny arrays.

A chain of N identical operations is timed under `vmap` and as the equivalent NumPy
calls on the batched arrays; the slope over N (time at N minus time at 0, divided by
N) removes the fixed cost of entering `vmap`, which is reported apart. Each time is the fastest
of many runs (the usual statistic for micro-benchmarks: the intrinsic cost, without
the noise of other processes). Under
`vmap(grad)` the reference is the hand-written batched forward and backward pass.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

import vmapx

BATCH = 8
N_OPS = 100
W = np.eye(4) * 0.5


@dataclass(frozen=True)
class Op:
    """One NumPy call as a user writes it (`example`) and on the batch (`batched`)."""

    name: str
    example: Callable[[Any, Any], Any]
    batched: Callable[[Any, Any], Any]


OPS = [
    Op("x + 1.0  (operator)", lambda x, y: x + 1.0, lambda x, y: x + 1.0),
    Op("x * y  (two batched)", lambda x, y: x * y, lambda x, y: x * y),
    Op("np.sin(x)  (ufunc)", lambda x, y: np.sin(x), lambda x, y: np.sin(x)),
    Op(
        "np.cumsum(x, axis=-1)",
        lambda x, y: np.cumsum(x, axis=-1),
        lambda x, y: np.cumsum(x, axis=-1),
    ),
    Op("x.T  (shape)", lambda x, y: x.T, lambda x, y: np.swapaxes(x, 1, 2)),
    Op("x[::-1]  (getitem)", lambda x, y: x[::-1], lambda x, y: x[:, ::-1]),
    Op("x @ w  (matmul)", lambda x, y: x @ W, lambda x, y: x @ W),
]


def _chain(op: Callable, n: int) -> Callable:
    def f(x: Any, y: Any) -> Any:
        for _ in range(n):
            x = op(x, y)
        return x

    return f


def _best_time(fn: Callable, *args: Any, repeat: int = 60) -> float:
    """The fastest of `repeat` runs: the intrinsic cost, robust to a busy machine."""
    fn(*args)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t0)
    return min(times)


def _slope(make: Callable[[int], Callable], *args: Any) -> tuple[float, float]:
    """(seconds per op, seconds at zero ops) of `make(n)(*args)`."""
    t0 = _best_time(make(0), *args)
    tn = _best_time(make(N_OPS), *args)
    return (tn - t0) / N_OPS, t0


def vmap_overhead(rng: np.random.Generator) -> list[dict]:
    """Per op kind: vmapx's added time per call under vmap, and NumPy's own time."""
    x, y = rng.standard_normal((BATCH, 4, 4)), rng.standard_normal((BATCH, 4, 4))
    rows = []
    for op in OPS:
        got = vmapx.vmap(_chain(op.example, 3))(x, y)
        np.testing.assert_allclose(got, _chain(op.batched, 3)(x, y), rtol=1e-12)
        per_op, fixed = _slope(lambda n, op=op: vmapx.vmap(_chain(op.example, n)), x, y)
        numpy_op, _ = _slope(lambda n, op=op: _chain(op.batched, n), x, y)
        rows.append(
            {"op": op.name, "vmapx_us": per_op * 1e6, "numpy_us": numpy_op * 1e6,
             "added_us": (per_op - numpy_op) * 1e6, "fixed_us": fixed * 1e6}
        )  # fmt: skip
    return rows


def _sin_sum_chain(n: int) -> Callable:
    def f(x: Any) -> Any:
        for _ in range(n):
            x = np.sin(x)
        return np.sum(x)

    return f


def _sin_sum_grad_by_hand(n: int) -> Callable:
    """The batched gradient of `_sin_sum_chain(n)`, forward and backward by hand."""

    def g(x: Any) -> Any:
        saved = []
        for _ in range(n):
            saved.append(x)
            x = np.sin(x)
        ct = np.ones_like(x)
        for s in reversed(saved):
            ct = ct * np.cos(s)
        return ct

    return g


def grad_overhead(rng: np.random.Generator) -> dict | None:
    """vmapx's added time per `np.sin` call under `vmap(grad)` (None without grad)."""
    if not hasattr(vmapx, "grad"):
        return None
    x = rng.standard_normal((BATCH, 4, 4))
    got = vmapx.vmap(vmapx.grad(_sin_sum_chain(3)))(x)
    np.testing.assert_allclose(got, _sin_sum_grad_by_hand(3)(x), rtol=1e-12)
    per_op, fixed = _slope(lambda n: vmapx.vmap(vmapx.grad(_sin_sum_chain(n))), x)
    numpy_op, _ = _slope(_sin_sum_grad_by_hand, x)
    return {"op": "np.sin(x) under vmap(grad)", "vmapx_us": per_op * 1e6,
            "numpy_us": numpy_op * 1e6, "added_us": (per_op - numpy_op) * 1e6,
            "fixed_us": fixed * 1e6}  # fmt: skip
