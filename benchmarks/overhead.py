"""Per-op overhead: the time vmapx adds to one NumPy call on tiny arrays.

A chain of N identical operations is timed under `vmap` and as the equivalent NumPy
calls on the batched arrays; the slope over N (time at N minus time at 0, divided by
N) removes the fixed cost of entering `vmap`, which is reported apart. Each time is the
fastest of many runs (the usual statistic for micro-benchmarks: the intrinsic cost,
without the noise of other processes), the four functions of a row timed in interleaved
rounds. Under `vmap(grad)` the reference is the hand-written batched forward and
backward pass.
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


def _best_times(fns: list[Callable], *args: Any, rounds: int = 20, repeat: int = 10) -> list:
    """The fastest run of each function (the intrinsic cost), timed in interleaved
    rounds: a burst of load on a shared machine then slows all of them alike instead
    of the one being timed during the burst."""
    best = [float("inf")] * len(fns)
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            fn(*args)
            for _ in range(repeat):
                t0 = time.perf_counter()
                fn(*args)
                best[i] = min(best[i], time.perf_counter() - t0)
    return best


def _row(
    name: str, make_vmapx: Callable[[int], Callable], make_numpy: Callable, *args: Any
) -> dict:
    """vmapx's time per op (slope over the chain length), NumPy's, and vmapx's time
    at zero ops (the fixed cost of a call)."""
    v0, vn, n0, nn = _best_times(
        [make_vmapx(0), make_vmapx(N_OPS), make_numpy(0), make_numpy(N_OPS)], *args
    )
    per_op, numpy_op = (vn - v0) / N_OPS, (nn - n0) / N_OPS
    return {"op": name, "vmapx_us": per_op * 1e6, "numpy_us": numpy_op * 1e6,
            "added_us": (per_op - numpy_op) * 1e6, "fixed_us": v0 * 1e6}  # fmt: skip


def vmap_overhead(rng: np.random.Generator) -> list[dict]:
    """Per op kind: vmapx's added time per call under vmap, and NumPy's own time."""
    x, y = rng.standard_normal((BATCH, 4, 4)), rng.standard_normal((BATCH, 4, 4))
    rows = []
    for op in OPS:
        got = vmapx.vmap(_chain(op.example, 3))(x, y)
        np.testing.assert_allclose(got, _chain(op.batched, 3)(x, y), rtol=1e-12)
        make_vmapx = lambda n, op=op: vmapx.vmap(_chain(op.example, n))  # noqa: E731
        rows.append(_row(op.name, make_vmapx, lambda n, op=op: _chain(op.batched, n), x, y))
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
    return _row(
        "np.sin(x) under vmap(grad)",
        lambda n: vmapx.vmap(vmapx.grad(_sin_sum_chain(n))),
        _sin_sum_grad_by_hand,
        x,
    )
