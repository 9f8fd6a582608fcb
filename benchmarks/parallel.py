"""vmapx with parallel chunks against one thread, hand-vectorized NumPy and the peers.

The workloads whose examples are large (w2, w5-16, w6, w8, w9 of `workloads.py`) and
w10, a batch of 256 MiB of input. Methods:

- `hand`: the hand-vectorized NumPy as a user runs it (BLAS with its default threads),
- `vmapx 1 thread`: `vmap(f)` with `vmapx.config.workers = 1`,
- `vmapx N threads`: `vmap(f)` with the default workers (the cores this process may use),
- `torch.vmap` and `jax.jit(vmap)` (compiled before timing) where installed.

Every method's result is checked against the hand-written one, then each is called
`WARMUP` times (vmapx's auto-chunking decides in its first calls). The timed calls run
in interleaved rounds: each round calls every method of every workload `BLOCK` times in
a row, in an order rotated from round to round, so that the machine's other work slows
all methods alike; the tables report medians over all the calls of the wall time and
of the process's CPU time per call (all its threads, user and system: the work, which
on shared cores swings less than the wall time). Peak memory: what NumPy allocates during one call
(`tracemalloc`). The summary gives the geometric mean over the workloads of the
parallel time against hand-written NumPy, its spread across rounds (each round's own
geometric mean), the same of each method's fastest call (the least slowed by other
work: closest to what an idle machine gives), the workloads where threads were slower
than one thread, and those whose peak memory exceeded the hand-written one's.

Run: `python benchmarks/parallel.py [--rounds 11] [--block 4] [--only w8,w10] [--no-peers]`.
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import optree

sys.path.insert(0, str(Path(__file__).resolve().parent))

import vmapx  # noqa: E402
import workloads as W  # noqa: E402
from vmapx import _parallel  # noqa: E402

WARMUP = 16
# calls of one method in a row in each round, as a loop of the user's calls them: after
# a call of another method, the threads it woke (BLAS's, torch's, XLA's) keep spinning
# on the cores for up to ~0.1 s, and a call on two threads that follows at once gets
# one core (measured: np.exp on two threads, 53 ms right after a matrix product on
# BLAS's two threads, 27 ms otherwise; `--block 1` shows it)
BLOCK = 4
SLOWER_NOISE = 1.05  # a ratio to one thread above this is reported as slower
PEAK_NOISE = 1.01  # and a peak above hand-written NumPy's by this (Python's own objects)


def _w10_inputs(rng: np.random.Generator, b: int) -> tuple:
    return (rng.standard_normal((b, 4096)),)


def _log_softmax(z: Any) -> Any:
    shifted = z - z.max()
    return shifted - np.log(np.sum(np.exp(shifted)))


def _w10_hand(z: np.ndarray) -> np.ndarray:
    shifted = z - z.max(axis=1, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=1, keepdims=True))


def _w10_jax(jax: Any, jnp: Any) -> Callable:
    return jax.vmap(lambda z: (z - z.max()) - jnp.log(jnp.sum(jnp.exp(z - z.max()))))


def _w10_torch(torch: Any) -> Callable:
    return torch.func.vmap(lambda z: (z - z.max()) - torch.log(torch.sum(torch.exp(z - z.max()))))


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
    torch=_w10_torch,
    jax=_w10_jax,
)
WORKLOADS = [W.W2, W.W5_16, W.W6_SQRT, W.W6_NORM, W.W8, W.W9, W10]


def peak_mib(fn: Callable[[], Any]) -> float:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def with_workers(f: Callable, workers: int | None) -> Callable:
    """`f` called with `vmapx.config.workers` set to `workers`."""

    def call(*args: Any) -> Any:
        saved, vmapx.config.workers = vmapx.config.workers, workers
        try:
            return f(*args)
        finally:
            vmapx.config.workers = saved

    return call


def _process_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _flat(tree: Any) -> np.ndarray:
    return np.concatenate([np.ravel(np.asarray(x)) for x in optree.tree_leaves(tree)])


def _load_peers(wanted: bool) -> dict[str, Any]:
    """torch and jax where installed, on their default threads (as a user runs them)."""
    peers: dict[str, Any] = {}
    if not wanted:
        return peers
    try:
        import torch

        peers["torch"] = torch
    except ImportError:
        print("torch is not installed: its column stays empty (`make bench` installs it)")
    try:
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
        import jax
        import jax.numpy as jnp

        jax.config.update("jax_enable_x64", True)
        peers["jax"], peers["jnp"] = jax, jnp
    except ImportError:
        print("jax is not installed: its column stays empty (`make bench` installs it)")
    return peers


def methods_of(w: W.Workload, args: tuple, peers: dict[str, Any]) -> dict[str, Callable]:
    """The methods of one workload, each a call of no arguments."""
    methods: dict[str, Callable] = {"hand": lambda: w.hand(*args)}
    for name, workers in (("vmapx 1 thread", 1), ("vmapx parallel", None)):
        f = with_workers(w.vmapx(vmapx), workers)
        methods[name] = lambda f=f: f(*args)
    if "torch" in peers and w.torch is not None:
        torch = peers["torch"]
        torch_fn = w.torch(torch)
        torch_args = optree.tree_map(lambda a: torch.from_numpy(np.ascontiguousarray(a)), args)
        methods["torch.vmap"] = lambda: torch_fn(*torch_args)
    if "jax" in peers and w.jax is not None:
        jax = peers["jax"]
        jax_args = optree.tree_map(peers["jnp"].asarray, args)
        try:
            compiled = jax.jit(w.jax(jax, peers["jnp"])).lower(*jax_args).compile()
        except Exception as e:  # noqa: BLE001 (a peer that fails is reported, not fatal)
            print(f"{w.key}: jax.jit fails to compile ({type(e).__name__})")
        else:
            methods["jax.jit(vmap)"] = lambda: jax.block_until_ready(compiled(*jax_args))
    return methods


def prepared(w: W.Workload, peers: dict[str, Any]) -> dict[str, Callable]:
    """The methods of `w`, each checked against the hand-written result and warmed up."""
    args = w.inputs(np.random.default_rng(0), w.batch)
    methods = methods_of(w, args, peers)
    reference = _flat(methods["hand"]())
    for name, fn in methods.items():
        for _ in range(WARMUP):
            out = fn()
        np.testing.assert_allclose(
            _flat(out), reference, rtol=w.rtol * 100, atol=w.atol * 100, err_msg=name
        )
        del out
    return methods


def timed_rounds(table: dict[str, dict[str, Callable]], rounds: int, block: int = 1) -> dict:
    """`(wall, cpu)` seconds of each call, per workload and method, over interleaved
    rounds: each round calls every method `block` times in a row (all timed)."""
    times = {key: {name: [] for name in methods} for key, methods in table.items()}
    calls = [(key, name, fn) for key, methods in table.items() for name, fn in methods.items()]
    for r in range(rounds):
        shift = r % len(calls)
        for key, name, fn in calls[shift:] + calls[:shift]:
            for _ in range(block):
                start, cpu = time.perf_counter(), _process_cpu()
                fn()
                times[key][name].append((time.perf_counter() - start, _process_cpu() - cpu))
    return times


def geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def _cell(times: dict, name: str, column: int) -> str:
    if name not in times:
        return "-"
    return f"{1e3 * float(np.median([t[column] for t in times[name]])):.2f}"


def _median_cpu(times: dict, name: str) -> float:
    return float(np.median([t[1] for t in times[name]]))


def _fastest(times: dict, name: str, against: str) -> float:
    """The ratio of the two methods' fastest calls (the least disturbed by other work)."""
    return min(t[0] for t in times[name]) / min(t[0] for t in times[against])


def report(chosen: list, times: dict, peaks: dict, cores: int, load: tuple) -> None:
    med = {k: {n: float(np.median([t[0] for t in v])) for n, v in times[k].items()} for k in times}
    print(
        f"| id | hand | vmapx 1 thread | vmapx {cores} threads | torch.vmap | jax.jit(vmap) "
        "| /hand | /1 thread | fastest /hand | CPU hand | CPU 1 thread | CPU threads "
        "| peak hand | peak threads |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for w in chosen:
        t, m, (hand_peak, par_peak) = times[w.key], med[w.key], peaks[w.key]
        hand, one, par = m["hand"], m["vmapx 1 thread"], m["vmapx parallel"]
        print(
            f"| {w.key} | {1e3 * hand:.2f} | {1e3 * one:.2f} | {1e3 * par:.2f} "
            f"| {_cell(t, 'torch.vmap', 0)} | {_cell(t, 'jax.jit(vmap)', 0)} "
            f"| {par / hand:.2f} | {par / one:.2f} | {_fastest(t, 'vmapx parallel', 'hand'):.2f} "
            f"| {_cell(t, 'hand', 1)} "
            f"| {_cell(t, 'vmapx 1 thread', 1)} | {_cell(t, 'vmapx parallel', 1)} "
            f"| {hand_peak:.1f} | {par_peak:.1f} |"
        )
    keys = [w.key for w in chosen]
    ratio = geomean([med[k]["vmapx parallel"] / med[k]["hand"] for k in keys])
    one = geomean([med[k]["vmapx 1 thread"] / med[k]["hand"] for k in keys])
    per_round = sorted(
        geomean([times[k]["vmapx parallel"][r][0] / times[k]["hand"][r][0] for k in keys])
        for r in range(len(times[keys[0]]["hand"]))
    )
    slower = [
        f"{k} ({med[k]['vmapx parallel'] / med[k]['vmapx 1 thread']:.2f}x)"
        for k in keys
        if med[k]["vmapx parallel"] > SLOWER_NOISE * med[k]["vmapx 1 thread"]
    ]
    heavier = [k for k in keys if peaks[k][1] > PEAK_NOISE * peaks[k][0]]
    print(f"\ngeometric mean of the medians, {cores} threads / hand: {ratio:.2f}")
    print(f"geometric mean of the medians, 1 thread / hand: {one:.2f}")
    print(
        f"the k-th timed call's geometric mean, {cores} threads / hand: min {per_round[0]:.2f}, "
        f"median {per_round[len(per_round) // 2]:.2f}, max {per_round[-1]:.2f}"
    )
    print(
        f"slower than one thread (by more than {SLOWER_NOISE - 1:.0%}): "
        f"{', '.join(slower) or 'none'}"
    )
    best = geomean([_fastest(times[k], "vmapx parallel", "hand") for k in keys])
    print(f"geometric mean of the fastest calls, {cores} threads / hand: {best:.2f}")
    work = geomean(
        [_median_cpu(times[k], "vmapx parallel") / _median_cpu(times[k], "hand") for k in keys]
    )
    print(f"geometric mean of the CPU time (all threads), {cores} threads / hand: {work:.2f}")
    print(
        f"peak memory above hand-written NumPy's (by more than {PEAK_NOISE - 1:.0%}): "
        f"{', '.join(heavier) or 'none'}"
    )
    print(f"load average (1 min) at the start: {load[0]:.2f}, at the end: {os.getloadavg()[0]:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--only", default="")
    parser.add_argument("--no-peers", action="store_true")
    parser.add_argument(
        "--block", type=int, default=BLOCK, help="calls of each method in a row per round"
    )
    opts = parser.parse_args()
    load = os.getloadavg()
    chosen = [w for w in WORKLOADS if not opts.only or w.key in opts.only.split(",")]
    cores = _parallel.available_cores()
    peers = _load_peers(not opts.no_peers)
    print(
        f"{cores} cores, load average (1, 5, 15 min) at the start: "
        f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}. Medians of {opts.rounds} interleaved "
        f"rounds of {opts.block} calls of each method in a row: wall and process CPU time "
        "(all threads) per call in ms; peak in MiB "
        "(tracemalloc). On shared cores the wall times swing with other work."
    )
    table = {w.key: prepared(w, peers) for w in chosen}
    times = timed_rounds(table, opts.rounds, opts.block)
    peaks = {
        key: (peak_mib(methods["hand"]), peak_mib(methods["vmapx parallel"]))
        for key, methods in table.items()
    }
    report(chosen, times, peaks, cores, load)


if __name__ == "__main__":
    main()
