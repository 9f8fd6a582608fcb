"""Every (workload, method) cell timed in a fresh process, as an outside harness does.

    python benchmarks/fresh.py                       # every workload, 1 round
    python benchmarks/fresh.py --only w18,w20 --rounds 3

`run.py` times every method in one long-lived process: the allocator keeps the memory
earlier workloads freed, and NumPy's large temporaries come back without page faults.
A fresh process per cell is what a user's script sees: fresh memory (glibc gives large
freed blocks back to the system, and each call's temporaries page-fault in again),
vmapx's automatic chunking and threads learning from the first call, each library at
its default threads with no other library's threads around. On this kind of machine
the page faults alone can double hand-vectorized NumPy's time on a workload of
megabyte temporaries.

In each cell: the inputs (the same seed as `run.py`), one call checked against the
loop's result, `WARMUP` more calls, then the median of `CALLS` timed calls (each round
in its own process; the report takes the median of the rounds). Methods: hand-written
NumPy, `vmapx.vmap`, `torch.func.vmap` and eager `jax.vmap` where installed. Writes
`benchmarks/fresh.md`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
METHODS = ["hand", "vmapx", "torch.vmap", "jax.vmap"]
WARMUP = 3
CALLS = 20


def _cell(key: str, method: str) -> dict[str, Any]:
    """Time one method on one workload in this (fresh) process."""
    os.environ.setdefault("JAX_ENABLE_X64", "1")
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import numpy as np

    from run import to_jax, to_torch
    from workloads import WORKLOADS, compare, loop
    from workloads_more import MORE_WORKLOADS

    w = {x.key: x for x in WORKLOADS + MORE_WORKLOADS}[key]
    args = w.inputs(np.random.default_rng(0), w.batch)
    expected = loop(w, args)
    if method == "hand":
        fn = lambda: w.hand(*args)  # noqa: E731
    elif method == "vmapx":
        import vmapx

        batched = w.vmapx(vmapx)
        fn = lambda: batched(*args)  # noqa: E731
    elif method == "torch.vmap":
        import torch

        if w.torch is None:
            return {"ms": None, "note": "not written"}
        targs, tfn = to_torch(torch, args), w.torch(torch)
        fn = lambda: tfn(*targs)  # noqa: E731
    else:
        import jax

        if w.jax is None:
            return {"ms": None, "note": "not written"}
        jax.config.update("jax_enable_x64", True)
        jargs, jfn = to_jax(jax.numpy, args), w.jax(jax, jax.numpy)
        fn = lambda: jax.block_until_ready(jfn(*jargs))  # noqa: E731
    try:
        compare(w, fn(), expected, method)
    except Exception as e:  # a peer that cannot run it, or a wrong result
        return {"ms": None, "note": f"{type(e).__name__}: {str(e).splitlines()[0][:80]}"}
    for _ in range(WARMUP):
        fn()
    times = []
    for _ in range(CALLS):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return {"ms": statistics.median(times) * 1e3, "note": ""}


def _run_cell(key: str, method: str) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, __file__, "--cell", key, method],
        capture_output=True, text=True, cwd=HERE, check=False,
    )  # fmt: skip
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode or not lines:
        return {"ms": None, "note": f"exit {proc.returncode}: {proc.stderr.strip()[-80:]}"}
    return dict(json.loads(lines[-1]))


def _geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else math.nan


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated workload id prefixes")
    parser.add_argument("--rounds", type=int, default=1, help="fresh processes per cell")
    parser.add_argument("--cell", nargs=2, help=argparse.SUPPRESS)
    opts = parser.parse_args(argv)
    sys.path.insert(0, str(HERE))
    if opts.cell:
        print(json.dumps(_cell(*opts.cell)))
        return 0
    from workloads import WORKLOADS
    from workloads_more import MORE_WORKLOADS

    keys = [w.key for w in WORKLOADS + MORE_WORKLOADS]
    if opts.only:
        keys = [k for k in keys if any(k.startswith(p) for p in opts.only.split(","))]
    rows = []
    for key in keys:
        row: dict[str, Any] = {"key": key}
        for method in METHODS:
            runs = [_run_cell(key, method) for _ in range(opts.rounds)]
            times = [r["ms"] for r in runs if r["ms"] is not None]
            row[method] = statistics.median(times) if times else None
            if not times:
                row[method + " note"] = runs[0]["note"]
        rows.append(row)
        shown = "  ".join(f"{m} {row[m]:.3g}" if row[m] is not None else f"{m} -" for m in METHODS)
        print(f"{key:12s} {shown}", flush=True)
    text = _report(rows, opts.rounds)
    (HERE / "fresh.md").write_text(text)
    print(text)
    return 0


def _report(rows: list[dict[str, Any]], rounds: int) -> str:
    head = "| id | hand (ms) | " + " | ".join(f"{m} (ms, / hand)" for m in METHODS[1:]) + " |"
    lines = [
        "# Benchmarks, each cell in a fresh process",
        "",
        f"`python benchmarks/fresh.py` ({rounds} round(s); median of {CALLS} calls after "
        f"{1 + WARMUP}; every library at its default threads).",
        "",
        head,
        "|" + "---|" * (len(METHODS) + 1),
    ]
    for row in rows:
        cells = [f"{row['hand']:.3g}" if row["hand"] else "–"]
        for m in METHODS[1:]:
            t = row[m]
            cells.append(f"{t:.3g} ({t / row['hand']:.2f})" if t and row["hand"] else "–")
        lines.append(f"| {row['key']} | " + " | ".join(cells) + " |")
    ratios = [r["vmapx"] / r["hand"] for r in rows if r["vmapx"] and r["hand"]]
    lines += ["", f"- geomean vmapx / hand: {_geomean(ratios):.2f} over {len(ratios)} workloads"]
    for peer in METHODS[2:]:
        both = [r for r in rows if r["vmapx"] and r[peer]]
        slower = [r["key"] for r in both if r["vmapx"] > r[peer]]
        lines.append(
            f"- vmapx slower than {peer} on {len(slower)} of {len(both)}"
            + (f": {', '.join(slower)}" if slower else "")
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
