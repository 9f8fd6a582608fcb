"""The vmapx showcase: real workloads, each checked against the loop and timed.

Every line names the two things it times. BLAS runs on one thread where threadpoolctl is
installed (`pip install vmapx[parallel]`): with BLAS's threads competing for a busy
machine's cores, the figures would swing by an order of magnitude from run to run.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator

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


@contextlib.contextmanager
def blas_pinned() -> Iterator[str]:
    """BLAS limited to one thread while the demo runs (where threadpoolctl is installed);
    yields a line saying which."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        yield "BLAS threads: not pinned (pip install threadpoolctl for steadier figures)"
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield "BLAS threads: 1 for every method (threadpoolctl)"


def report(title: str, base: tuple[str, float], method: tuple[str, float], note: str) -> None:
    """One line: what is compared, both times (medians), the ratio, and what was checked."""
    (base_name, t_base), (name, t) = base, method
    print(f"{title:<44} {base_name:>14} {t_base * 1e3:7.2f} ms   {name:>15} {t * 1e3:7.2f} ms   "
          f"speed-up {t_base / t:6.1f}x   ({note})")  # fmt: skip


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
    report(title, ("loop of f", t_loop), ("vmap(f)", t_vmap), "equal to the loop: yes")


def main() -> None:
    with blas_pinned() as threads:
        print("vmapx demo: functions written for ONE example, run over a batch.")
        print(f"Medians of 5 calls after one warm-up call (vmap with its defaults). {threads}.\n")
        run_all()


def run_all() -> None:
    rng = np.random.default_rng(0)

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

    print("\nComposed with differentiation:\n")

    # the seed's per-example gradients of a dense layer, in NumPy
    def loss(params: dict, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        pred = x @ params["W"] + params["b"]
        return 0.5 * np.sum((y - pred) ** 2)

    params = {"W": rng.normal(size=(32, 1)), "b": rng.normal(size=(1,))}
    xs, ys = rng.random((1024, 32)), rng.random((1024, 1))
    per_example = vmapx.vmap(vmapx.grad(loss), in_axes=(None, 0, 0))
    grads = per_example(params, xs, ys)
    residual = xs @ params["W"] + params["b"] - ys  # hand-written backprop
    np.testing.assert_allclose(grads["W"], xs[:, :, None] * residual[:, None, :], rtol=1e-12)
    np.testing.assert_allclose(grads["b"], residual, rtol=1e-12)
    loop_grad = vmapx.grad(loss)
    t_loop = timeit(lambda: [loop_grad(params, x, y) for x, y in zip(xs, ys, strict=True)], 3)
    t_vmap = timeit(lambda: per_example(params, xs, ys))
    report("per-example grads, dense layer (B=1024)", ("loop of grad", t_loop),
           ("vmap(grad)", t_vmap), "equal to hand-written backprop: yes")  # fmt: skip
    replayed = vmapx.jit(per_example)  # records once, then replays the NumPy calls
    replayed(params, xs, ys)
    again = replayed(params, xs + 1.0, ys)
    np.testing.assert_allclose(again["W"], per_example(params, xs + 1.0, ys)["W"], rtol=1e-12)
    t_jit = timeit(lambda: replayed(params, xs, ys))
    report("  the same, replayed by vmapx.jit", ("vmap(grad)", t_vmap),
           ("jit(vmap(grad))", t_jit), "equal to vmap(grad): yes")  # fmt: skip

    # the seed's Jacobian: vmap over VJPs of the identity rows
    def f(x: np.ndarray) -> np.ndarray:
        return x**2 + np.sin(x)

    x = rng.normal(size=256)
    _, vjp_fn = vmapx.vjp(f, x)
    jac = vmapx.vmap(vjp_fn)(np.eye(256))[0]
    np.testing.assert_allclose(jac, np.diag(2 * x + np.cos(x)), atol=1e-12)
    np.testing.assert_allclose(vmapx.jacfwd(f)(x), jac, atol=1e-12)
    t_loop = timeit(lambda: np.stack([vjp_fn(row)[0] for row in np.eye(256)]), 3)
    t_vmap = timeit(lambda: vmapx.vmap(vjp_fn)(np.eye(256)))
    report("Jacobian by VJPs (256x256)", ("loop of vjp_fn", t_loop),
           ("vmap(vjp_fn)", t_vmap), "equal to jacfwd and the closed form: yes")  # fmt: skip

    print("\nPython control flow that differs per example:\n")

    def newton_sqrt(a: np.ndarray) -> np.ndarray:
        return vmapx.while_loop(lambda r: abs(r * r - a) > 1e-12 * a,
                                lambda r: 0.5 * (r + a / r), a)  # fmt: skip

    show("Newton sqrt, each example its own iterations", newton_sqrt,
         (rng.uniform(1, 1e6, size=5000),), (0,))  # fmt: skip


if __name__ == "__main__":
    main()
