"""The vmapx showcase: real workloads, each checked against the loop and timed."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

import vmapx


def timeit(fn: Callable, repeat: int = 5) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def show(title: str, f: Callable, args: tuple, in_axes: tuple) -> None:
    batched = vmapx.vmap(f, in_axes=in_axes)
    size = next(a.shape[0] for a, ax in zip(args, in_axes, strict=True) if ax is not None)

    def loop() -> np.ndarray:
        return np.stack(
            [f(*(a if ax is None else a[i] for a, ax in zip(args, in_axes, strict=True)))
             for i in range(size)]
        )  # fmt: skip

    np.testing.assert_allclose(batched(*args), loop(), rtol=1e-9, atol=1e-12)
    t_loop, t_vmap = timeit(loop), timeit(lambda: batched(*args))
    print(f"{title:<48} loop {t_loop * 1e3:8.2f} ms   vmap {t_vmap * 1e3:7.2f} ms   "
          f"speed-up {t_loop / t_vmap:6.1f}x   (equal to the loop: yes)")  # fmt: skip


def main() -> None:
    rng = np.random.default_rng(0)
    print("vmapx demo: functions written for ONE example, run over a batch.\n")

    def distances(x: np.ndarray, points: np.ndarray) -> np.ndarray:
        return np.sqrt(((points - x) ** 2).sum(-1))

    show("pairwise distances (B=2048, 512 points)", distances,
         (rng.normal(size=(2048, 3)), rng.normal(size=(512, 3))), (0, None))  # fmt: skip

    def normalise(img: np.ndarray) -> np.ndarray:
        return (img - img.mean()) / (img.std() + 1e-6)

    show("per-image normalisation (B=100, 64x64x3)", normalise,
         (rng.random((100, 64, 64, 3)),), (0,))  # fmt: skip

    w1, b1 = rng.normal(size=(64, 32)) / 6, rng.normal(size=64)
    w2, b2 = rng.normal(size=(10, 64)) / 8, rng.normal(size=10)

    def mlp(x: np.ndarray) -> np.ndarray:
        return np.tanh(w2 @ np.tanh(w1 @ x + b1) + b2)

    show("MLP forward (B=4096, 32->64->10)", mlp, (rng.normal(size=(4096, 32)),), (0,))

    def batched_dot(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return np.dot(x, y)

    show("batched dot (B=10000, 64)", batched_dot,
         (rng.normal(size=(10000, 64)), rng.normal(size=(10000, 64))), (0, 0))  # fmt: skip


if __name__ == "__main__":
    main()
