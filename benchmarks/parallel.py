"""vmapx with parallel chunks against one thread and hand-vectorized NumPy.

The workloads whose examples are large (w2, w5-16, w6, w8, w9 of `workloads.py`) and
w10, a batch of 256 MiB of input. For each: the median time of `--repeats` calls after
warm-up (vmapx's auto-chunking decides in its first calls) and the peak of memory that
NumPy allocates during one call (`tracemalloc`), for

- `hand`: the hand-vectorized NumPy (BLAS with its default threads),
- `vmapx 1 thread`: `vmap(f, workers=1)`,
- `vmapx N threads`: `vmap(f)` (`workers`: the cores this process may use),

each vmapx method the workload's own (`Workload.vmapx`), with `vmapx.config.workers`.

Run: `python benchmarks/parallel.py [--repeats 7] [--only w8,w10]`.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
import optree

sys.path.insert(0, str(Path(__file__).resolve().parent))

import vmapx  # noqa: E402
import workloads as W  # noqa: E402
from vmapx import _parallel  # noqa: E402


def _w10_inputs(rng: np.random.Generator, b: int) -> tuple:
    return (rng.standard_normal((b, 4096)),)


def _log_softmax(z: np.ndarray) -> np.ndarray:
    shifted = z - z.max()
    return shifted - np.log(np.sum(np.exp(shifted)))


def _w10_hand(z: np.ndarray) -> np.ndarray:
    shifted = z - z.max(axis=1, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=1, keepdims=True))


W10 = W.Workload(
    key="w10",
    title="log-softmax, z (4096,), 256 MiB in",
    batch=8192,
    work=4096,
    inputs=_w10_inputs,
    in_axes=(0,),
    example=_log_softmax,
    hand=_w10_hand,
    vmapx=lambda vx: vx.vmap(_log_softmax),
)
WORKLOADS = [W.W2, W.W5_16, W.W6_SQRT, W.W6_NORM, W.W8, W.W9, W10]


def peak_mib(fn) -> float:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def with_workers(f, workers: int):
    """`f` called with `vmapx.config.workers` set to `workers`."""

    def call(*args):
        saved, vmapx.config.workers = vmapx.config.workers, workers
        try:
            return f(*args)
        finally:
            vmapx.config.workers = saved

    return call


def measure(w: W.Workload, repeats: int) -> dict:
    args = w.inputs(np.random.default_rng(0), w.batch)
    methods = {
        "hand": lambda: w.hand(*args),
    }
    for name, workers in (("vmapx 1 thread", 1), ("vmapx parallel", None)):
        f = with_workers(w.vmapx(vmapx), workers)
        methods[name] = lambda f=f: f(*args)
    reference = methods["hand"]()
    for fn in methods.values():
        for _ in range(16):  # warm-up: auto-chunking decides in these calls
            out = fn()
        np.testing.assert_allclose(
            np.concatenate([np.ravel(x) for x in optree.tree_leaves(out)]),
            np.concatenate([np.ravel(x) for x in optree.tree_leaves(reference)]),
            rtol=w.rtol * 100,
            atol=w.atol * 100,
        )
        del out
    del reference
    times: dict = {name: [] for name in methods}
    for _ in range(repeats):  # the methods in turn: a busy machine slows them alike
        for name, fn in methods.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    row = {}
    for name, fn in methods.items():
        row[name] = (1e3 * float(np.median(times[name])), peak_mib(fn))
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--only", default="")
    opts = parser.parse_args()
    chosen = [w for w in WORKLOADS if not opts.only or w.key in opts.only.split(",")]
    cores = _parallel.available_cores()
    print(f"{cores} cores; times in ms (median of {opts.repeats}), peak in MiB (tracemalloc)")
    print(
        f"| id | hand | vmapx 1 thread | vmapx {cores} threads | /hand | /1 thread "
        "| peak hand | peak parallel |"
    )
    print("|---|---|---|---|---|---|---|---|")
    ratios = []
    for w in chosen:
        r = measure(w, opts.repeats)
        (hand, hand_peak), (one, _), (par, par_peak) = r.values()
        ratios.append(par / hand)
        print(
            f"| {w.key} | {hand:.2f} | {one:.2f} | {par:.2f} | {par / hand:.2f} | "
            f"{par / one:.2f} | {hand_peak:.1f} | {par_peak:.1f} |",
            flush=True,
        )
    geo = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
    print(f"\ngeometric mean, parallel / hand: {geo:.2f}")


if __name__ == "__main__":
    main()
