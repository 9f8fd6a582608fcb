"""Where the time of a vmapx workload goes: the NumPy calls it makes on the batch.

    python benchmarks/op_counts.py w11-16 w12-16 w13-8   # workload ids of run.py

Every operation the outermost `vmap` applies to its batch-front arrays is one NumPy call
on batch-sized data (a nested transform's operations end there: a Hessian's basis `vmap`,
its JVP and its tape all call NumPy through it). For one call of each workload this
prints those operations by primitive, split into batch-times-`work`-sized results (the
`(B, n, n)` tangents of `vmap(hessian)`) and smaller ones, with the call site that asked
for each large one, and the page faults and CPU time per call of vmapx and of the
hand-written NumPy: a new array of a megabyte costs more in page faults than the
arithmetic that fills it. Run with `VMAPX_WORKERS=1` for one thread.
"""

from __future__ import annotations

import collections
import os
import resource
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import vmapx
from vmapx import _batching
from workloads_more import MORE_WORKLOADS, Workload

_OWN_FILES = ("_core.py", "_batching.py", "_direct.py", "op_counts.py")


def _site(depth: int = 3) -> str:
    """The innermost vmapx frames (outside the dispatch) that asked for an operation."""
    frame, out = sys._getframe(3), []
    while frame is not None and len(out) < depth:
        name = os.path.basename(frame.f_code.co_filename)
        if name not in _OWN_FILES and "numpy" not in frame.f_code.co_filename:
            out.append(f"{name}:{frame.f_lineno} {frame.f_code.co_name}")
        frame = frame.f_back
    return " < ".join(out)


def count_ops(w: Workload, f: Callable[..., Any], args: tuple) -> tuple[Any, Any]:
    """`(by primitive and size, large results by call site)` for one call of `f`."""
    counts: collections.Counter = collections.Counter()
    sites: collections.Counter = collections.Counter()
    large = w.batch * w.work
    process = _batching.BatchTrace.process

    def counted(trace: Any, prim: Any, a: tuple, k: dict) -> Any:
        out = process(trace, prim, a, k)
        if trace.level == 1:
            size = getattr(getattr(out, "val", None), "size", 0)
            kind = "large" if size >= large else "small"
            counts[(prim.name, kind)] += 1
            if kind == "large":
                sites[f"{prim.name} <- {_site()}"] += 1
        return out

    _batching.BatchTrace.process = counted  # type: ignore[method-assign]
    try:
        f(*args)
    finally:
        _batching.BatchTrace.process = process  # type: ignore[method-assign]
    return counts, sites


def faults_and_time(f: Callable[..., Any], args: tuple, calls: int = 10) -> tuple[float, float]:
    """Minor page faults and CPU milliseconds per call (after one warm-up call)."""
    f(*args)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    start = time.thread_time()
    for _ in range(calls):
        f(*args)
    cpu = (time.thread_time() - start) / calls * 1e3
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults) / calls, cpu


def report(w: Workload) -> None:
    args = w.inputs(np.random.default_rng(0), w.batch)
    f = w.vmapx(vmapx)
    f(*args)
    counts, sites = count_ops(w, f, args)
    total = sum(counts.values())
    n_large = sum(v for (_, kind), v in counts.items() if kind == "large")
    print(f"{w.key}: {total} batch operations, {n_large} of batch x {w.work} elements")
    for (name, kind), v in counts.most_common():
        print(f"  {v:4d}  {kind:5s}  {name}")
    for site, v in sites.most_common():
        print(f"  {v:4d}  large: {site}")
    for name, g in (("vmapx", f), ("hand", w.hand)):
        faults, cpu = faults_and_time(g, args)
        print(f"  {name}: {faults:.0f} page faults, {cpu:.2f} ms CPU per call")


def main(argv: list[str]) -> None:
    keys = argv or ["w11-4", "w11-16", "w12-16", "w13-8", "w19-32x10"]
    table = {w.key: w for w in MORE_WORKLOADS}
    for key in keys:
        report(table[key])


if __name__ == "__main__":
    main(sys.argv[1:])
