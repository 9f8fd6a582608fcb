"""GPU benchmark: w2, w6 and the per-example gradient workloads (w3, w9) at large batches,
absolute times on the GPU.

Methods, each checked equal to hand-vectorized NumPy on the host before it is timed:

- `vmapx cupy`: `vmapx.vmap` of the workload's NumPy function, on CuPy arrays;
- `vmapx numpy`: the same on NumPy arrays (the CPU);
- `hand cupy`: the hand-vectorized NumPy of the workload, on CuPy arrays (NumPy's
  dispatch runs it as CuPy: hand-written CuPy);
- `torch.func.vmap`: the workload's torch function on CUDA tensors (when torch with
  CUDA is installed).

Run on a machine with an NVIDIA GPU: `pip install -e '.[cupy]' torch` and
`python benchmarks/gpu.py` (`--scale 8` multiplies the batch sizes, `--only w9`). The
device work is synchronized before each clock reading.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import optree

import vmapx
from workloads import W2, W3, W6_NORM, W6_SQRT, W9, Workload

GPU_WORKLOADS: list[Workload] = [W2, W6_SQRT, W6_NORM, W3, W9]
SCALE = 16  # the batch of each workload times this (large batches: where GPUs pay off)


@dataclass(frozen=True)
class Backend:
    """An array library to run the NumPy code on: `to` moves a pytree of host arrays
    there, `back` brings one back, `sync` waits for the device's queued work."""

    name: str
    to: Callable[[Any], Any]
    back: Callable[[Any], Any]
    sync: Callable[[], None]


def _tree_map(fn: Callable, tree: Any, kind: type) -> Any:
    return optree.tree_map(
        lambda v: fn(v) if isinstance(v, kind) else v, tree, is_leaf=lambda v: isinstance(v, kind)
    )


def cupy_backend() -> Backend:
    import cupy

    return Backend(
        "cupy",
        lambda t: _tree_map(cupy.asarray, t, np.ndarray),
        lambda t: _tree_map(cupy.asnumpy, t, cupy.ndarray),
        cupy.cuda.Device().synchronize,
    )


def methods(w: Workload, dev: Backend, torch: Any = None) -> dict[str, tuple[Callable, Callable]]:
    """Per method: `(prepare(args) -> device args, run(device args) -> device result)`,
    and the matching way back (the host result) in `back`."""
    batched = w.vmapx(vmapx)
    out: dict[str, tuple[Callable, Callable]] = {
        f"vmapx {dev.name}": (dev.to, batched),
        "vmapx numpy": (lambda a: a, batched),
        f"hand {dev.name}": (dev.to, w.hand),
    }
    if torch is not None and w.torch is not None:
        fn = w.torch(torch)
        to = lambda a: _tree_map(lambda v: torch.from_numpy(v).cuda(), a, np.ndarray)  # noqa: E731
        out["torch.func.vmap cuda"] = (to, fn)
    return out


def _host(result: Any, dev: Backend, torch: Any) -> Any:
    result = dev.back(result)
    if torch is not None:
        result = _tree_map(lambda t: t.detach().cpu().numpy(), result, torch.Tensor)
    return result


def _same(got: Any, want: Any, w: Workload) -> None:
    for g, e in zip(optree.tree_leaves(got), optree.tree_leaves(want), strict=True):
        np.testing.assert_allclose(np.asarray(g), e, rtol=max(w.rtol, 1e-6), atol=1e-8)


def measure(
    w: Workload, dev: Backend, batch: int, repeat: int = 5, torch: Any = None
) -> dict[str, float]:
    """Median milliseconds of every method on `w` at `batch`, each checked first."""
    args = w.inputs(np.random.default_rng(0), batch)
    want = w.hand(*args)
    sync = dev.sync if torch is None else lambda: (dev.sync(), torch.cuda.synchronize())
    times = {}
    for name, (prepare, run) in methods(w, dev, torch).items():
        ready = prepare(args)
        _same(_host(run(*ready), dev, torch), want, w)
        samples = []
        for _ in range(repeat):
            sync()
            t0 = time.perf_counter()
            run(*ready)
            sync()
            samples.append(time.perf_counter() - t0)
        times[name] = float(np.median(samples)) * 1e3
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=int, default=SCALE, help="batch size multiplier")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--only", help="comma-separated workload ids (prefixes), e.g. w2,w9")
    opts = parser.parse_args()
    try:
        import torch

        torch = torch if torch.cuda.is_available() else None
    except ImportError:
        torch = None
    dev = cupy_backend()
    chosen = [
        w for w in GPU_WORKLOADS if not opts.only or w.key.startswith(tuple(opts.only.split(",")))
    ]
    for w in chosen:
        batch = w.batch * opts.scale
        times = measure(w, dev, batch, opts.repeat, torch)
        hand = times[f"hand {dev.name}"]
        print(f"{w.key:8s} {w.title} (B={batch})")
        for name, ms in times.items():
            print(f"  {name:22s} {ms:9.3f} ms   {ms / hand:6.2f}x hand cupy")


if __name__ == "__main__":
    main()
