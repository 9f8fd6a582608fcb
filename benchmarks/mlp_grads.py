"""Per-example gradients of a two-layer MLP at B=1024: `vmap(grad)` against a loop of
`grad` calls and against hand-written batched backprop (NumPy only, no peers).

Run: `python benchmarks/mlp_grads.py` (part of `make bench`).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

import vmapx
from workloads import _W9_AXES, _w9_hand, _w9_inputs, _xent


def median_ms(fn: Callable, repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)) * 1e3


def main(batch: int = 1024) -> None:
    params, x, onehot = _w9_inputs(np.random.default_rng(0), batch)
    loss = _xent(np)
    per_example = vmapx.vmap(vmapx.grad(loss), in_axes=_W9_AXES)
    one = vmapx.grad(loss)

    def loop() -> dict:
        grads = [one(params, x[i], onehot[i]) for i in range(batch)]
        return {k: np.stack([g[k] for g in grads]) for k in params}

    got, hand, looped = per_example(params, x, onehot), _w9_hand(params, x, onehot), loop()
    for k in params:
        np.testing.assert_allclose(got[k], hand[k], rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(looped[k], hand[k], rtol=1e-9, atol=1e-12)
    t_vmap = median_ms(lambda: per_example(params, x, onehot), 7)
    t_hand = median_ms(lambda: _w9_hand(params, x, onehot), 7)
    t_loop = median_ms(loop, 3)
    print(f"MLP 784-128-10 per-example gradients, B={batch} (all three checked equal):")
    print(f"  loop of vmapx.grad        {t_loop:9.1f} ms")
    print(f"  hand-written backprop     {t_hand:9.1f} ms")
    print(f"  vmapx.vmap(vmapx.grad)    {t_vmap:9.1f} ms   ({t_vmap / t_hand:.2f}x hand, "
          f"{t_loop / t_vmap:.0f}x faster than the loop)")  # fmt: skip


if __name__ == "__main__":
    main()
