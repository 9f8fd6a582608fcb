"""Benchmark runner: every workload (w1-w9, w11-w19), every method side by side.

    python benchmarks/run.py              # all workloads (what `make bench` runs)
    python benchmarks/run.py --only w1,w7 --quick
    python benchmarks/run.py --threads 0  # each library's default threads (default: 1)

Methods: the Python loop (+ `np.stack`), `np.vectorize`, hand-vectorized NumPy, vmapx,
`torch.func.vmap`, eager `jax.vmap` and `jax.jit(jax.vmap)` (compile time apart).
float64 throughout. Each method's result is checked against the loop before it is
timed; the median of repeats after a warm-up is reported. Writes
`benchmarks/results.md`, `benchmarks/results.json` and `benchmarks/results.png`.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import platform
import sys
import time
import tracemalloc
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _threads_from_argv(argv: list[str]) -> int:
    """`--threads N` (read before NumPy is imported: BLAS reads its threads at import)."""
    for i, a in enumerate(argv):
        if a == "--threads" and i + 1 < len(argv):
            return int(argv[i + 1])
        if a.startswith("--threads="):
            return int(a.split("=", 1)[1])
    return 1


THREADS = _threads_from_argv(sys.argv)
if THREADS > 0:  # every library on the same number of threads: a per-core comparison
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(THREADS)
    if THREADS == 1:
        os.environ["XLA_FLAGS"] = (
            os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false"
            " intra_op_parallelism_threads=1"
        ).strip()
os.environ.setdefault("JAX_ENABLE_X64", "1")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np  # noqa: E402
import optree  # noqa: E402

import overhead  # noqa: E402
import vmapx  # noqa: E402
from workloads import WORKLOADS, Workload, compare, loop  # noqa: E402
from workloads_more import MORE_WORKLOADS  # noqa: E402

HERE = Path(__file__).resolve().parent
METHODS = [
    "loop", "np.vectorize", "hand", "vmapx", "vmapx.jit", "torch.vmap", "jax.vmap",
    "jax.jit(vmap)",
]  # fmt: skip
SHOWN = ["loop", "hand", "vmapx", "vmapx.jit", "torch.vmap", "jax.vmap", "jax.jit(vmap)"]


# -- the optional peers ---------------------------------------------------------------


def load_peers() -> dict[str, Any]:
    peers: dict[str, Any] = {}
    try:
        import torch

        if THREADS > 0:
            torch.set_num_threads(THREADS)
        peers["torch"] = torch
    except ImportError:
        print("torch is not installed: its column stays empty (`make bench` installs it)")
    try:
        import jax
        import jax.numpy as jnp

        jax.config.update("jax_enable_x64", True)
        peers["jax"], peers["jnp"] = jax, jnp
    except ImportError:
        print("jax is not installed: its columns stay empty (`make bench` installs it)")
    return peers


def to_torch(torch: Any, args: tuple) -> tuple:
    return optree.tree_map(lambda a: torch.from_numpy(np.ascontiguousarray(a)), args)


def to_jax(jnp: Any, args: tuple) -> tuple:
    return optree.tree_map(jnp.asarray, args)


# -- timing ---------------------------------------------------------------------------


BLOCK_RUNS = 8  # timed calls per block; each block starts with one untimed call


def median_times(thunks: dict[str, Callable[[], Any]], budget: float) -> dict[str, float]:
    """Median seconds of each thunk (already warmed up), timed in alternating blocks.

    Blocks alternate between methods, so that a busy moment of the machine falls on
    every method alike. A block is one untimed call, which refills the caches the other
    methods emptied, then up to `BLOCK_RUNS` timed calls (fewer for slow methods: a
    block stops after a fifth of the budget). Each method runs until it has had
    `budget` seconds (at least 3, at most 200 timed calls). Timing every call right
    after other libraries ran would measure cold caches instead, which costs code that
    runs more Python (vmapx) several times more on the smallest workloads.
    """
    times: dict[str, list[float]] = {k: [] for k in thunks}
    spent = dict.fromkeys(thunks, 0.0)
    active = list(thunks)
    while active:
        for k in active:
            thunks[k]()  # refill the caches
            block = 0.0
            for _ in range(BLOCK_RUNS):
                t0 = time.perf_counter()
                thunks[k]()
                dt = time.perf_counter() - t0
                times[k].append(dt)
                block += dt
                if block > budget / 5:
                    break
            spent[k] += block
        active = [
            k for k in active
            if len(times[k]) < 3 or (spent[k] < budget and len(times[k]) < 200)
        ]  # fmt: skip
    return {k: float(np.median(v)) for k, v in times.items()}


def peak_memory(thunk: Callable[[], Any]) -> int:
    """Peak bytes allocated while `thunk()` runs, beyond what was allocated before."""
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        result = thunk()
        peak = tracemalloc.get_traced_memory()[1]
        del result
    finally:
        tracemalloc.stop()
    return peak - base


class Outcome:
    """One method on one workload: a time, or why there is none."""

    def __init__(self, thunk: Callable[[], Any] | None = None, note: str = "") -> None:
        self.thunk = thunk
        self.note = note
        self.seconds: float | None = None
        self.compile_seconds: float | None = None

    def as_json(self) -> dict:
        return {"ms": None if self.seconds is None else self.seconds * 1e3, "note": self.note,
                "compile_ms": None if self.compile_seconds is None
                else self.compile_seconds * 1e3}  # fmt: skip


def checked(w: Workload, name: str, thunk: Callable[[], Any], expected: Any) -> Outcome:
    """Run once (the warm-up) and check against the loop; a vmapx fallback is noted."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", vmapx.PerformanceWarning)
        try:
            got = thunk()
            compare(w, got, expected, name)
        except AssertionError as e:
            print(f"  {name}: WRONG RESULT, not timed: {str(e).splitlines()[0]}")
            return Outcome(note="wrong result")
        except Exception as e:  # a peer that cannot run this workload
            print(f"  {name}: failed ({type(e).__name__}: {str(e).splitlines()[0][:120]})")
            return Outcome(note=f"fails: {type(e).__name__}")
    note = ""
    fallbacks = [c for c in caught if issubclass(c.category, vmapx.PerformanceWarning)]
    if fallbacks:
        note = "loop fallback"
        print(f"  {name}: {str(fallbacks[0].message)[:160]}")
    return Outcome(thunk, note)


def run_workload(w: Workload, peers: dict, budget: float) -> dict:
    rng = np.random.default_rng(0)
    args = w.inputs(rng, w.batch)
    print(f"{w.key}: {w.title}, B={w.batch}")
    expected = loop(w, args)
    out: dict[str, Outcome] = {"loop": Outcome(lambda: loop(w, args))}
    if w.signature is not None:
        vec = np.vectorize(w.example, signature=w.signature)
        out["np.vectorize"] = checked(w, "np.vectorize", lambda: vec(*args), expected)
    out["hand"] = checked(w, "hand", lambda: w.hand(*args), expected)

    missing = w.missing()
    if missing:
        names = ", ".join(f"vmapx.{m}" for m in missing)
        print(f"  vmapx: skipped, {names} does not exist yet")
        out["vmapx"] = Outcome(note=f"needs {names}")
    else:
        fn = w.vmapx(vmapx)
        out["vmapx"] = checked(w, "vmapx", lambda: fn(*args), expected)
        if hasattr(vmapx, "jit"):
            jitted = vmapx.jit(w.vmapx(vmapx))  # checked: the recording call and a replay
            o = checked(w, "vmapx.jit", lambda: [jitted(*args) for _ in "rr"][1], expected)
            if o.thunk is not None:
                o.thunk = lambda: jitted(*args)
            out["vmapx.jit"] = o

    if "torch" in peers and w.torch is not None:
        torch = peers["torch"]
        targs = to_torch(torch, args)
        tfn = w.torch(torch)
        out["torch.vmap"] = checked(w, "torch.vmap", lambda: tfn(*targs), expected)
    if "jax" in peers and w.jax is not None:
        jax, jnp = peers["jax"], peers["jnp"]
        jargs = to_jax(jnp, args)
        jfn = w.jax(jax, jnp)
        out["jax.vmap"] = checked(
            w, "jax.vmap", lambda: jax.block_until_ready(jfn(*jargs)), expected
        )
        t0 = time.perf_counter()
        try:
            compiled = jax.jit(jfn).lower(*jargs).compile()
        except Exception as e:
            print(f"  jax.jit: failed to compile ({type(e).__name__})")
            out["jax.jit(vmap)"] = Outcome(note="fails to compile")
        else:
            compile_s = time.perf_counter() - t0
            out["jax.jit(vmap)"] = checked(
                w, "jax.jit(vmap)", lambda: jax.block_until_ready(compiled(*jargs)), expected
            )
            out["jax.jit(vmap)"].compile_seconds = compile_s

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", vmapx.PerformanceWarning)
        thunks = {m: o.thunk for m, o in out.items() if o.thunk is not None}
        for m, seconds in median_times(thunks, budget).items():
            out[m].seconds = seconds
        memory = {"hand": peak_memory(out["hand"].thunk)}
        if out["vmapx"].thunk is not None:
            memory["vmapx"] = peak_memory(out["vmapx"].thunk)
    for name in METHODS:
        o = out.get(name)
        if o is not None and o.seconds is not None:
            print(f"  {name:>14}: {o.seconds * 1e3:10.3f} ms  {o.note}")
    return {"workload": w, "outcomes": out, "memory": memory}


# -- the report -----------------------------------------------------------------------


def _load() -> str:
    """The 1-minute load average: other processes make the timings noisy."""
    try:
        return f"{os.getloadavg()[0]:.2f}"
    except OSError:
        return "unknown"


def machine_info(peers: dict) -> dict[str, str]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info = {
        "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
        "machine": f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "numpy": np.__version__,
        "vmapx": vmapx.__version__,
        "threads": f"{THREADS} per library (BLAS, torch, XLA)" if THREADS else "defaults",
        "load average at start": _load(),
    }
    if "torch" in peers:
        torch = peers["torch"]
        info["torch"] = f"{torch.__version__} ({torch.get_num_threads()} threads)"
    if "jax" in peers:
        import jaxlib

        info["jax"] = f"{peers['jax'].__version__} (jaxlib {jaxlib.__version__}, x64)"
    return info


def _ms(o: Outcome | None) -> str:
    if o is None:
        return "–"
    if o.seconds is None:
        return f"({o.note})"
    text = f"{o.seconds * 1e3:.3g}"
    if o.compile_seconds is not None:
        text += f" (+{o.compile_seconds * 1e3:.0f} compile)"
    if o.note:
        text += f" ({o.note})"
    return text


def ratio(a: Outcome | None, b: Outcome | None) -> float | None:
    if a is None or b is None or a.seconds is None or b.seconds is None:
        return None
    return a.seconds / b.seconds


def _r(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f}"


def _holds(value: float | None, limit: float, strict: bool = False) -> bool | None:
    if value is None:
        return None
    return value < limit if strict else value <= limit


def targets(results: list[dict], op_rows: list[dict]) -> list[tuple[str, str, bool | None]]:
    """(target, detail, met) for each target of the issue."""
    rows: list[tuple[str, str, bool | None]] = []
    for r in results:
        w, o = r["workload"], r["outcomes"]
        limit = 2.0 if w.overhead_bound else 1.2
        vh = ratio(o["vmapx"], o["hand"])
        rows.append(
            (f"{w.key}: vmapx ≤ {limit}× hand", _r(vh), None if vh is None else vh <= limit)
        )
        for peer in ("torch.vmap", "jax.vmap"):
            vp = ratio(o["vmapx"], o.get(peer))
            rows.append(
                (f"{w.key}: vmapx faster than {peer}", _r(vp), None if vp is None else vp < 1)
            )
        if w.overhead_bound and o.get("vmapx.jit") is not None:
            vj = ratio(o["vmapx.jit"], o["hand"])
            rows.append(
                (f"{w.key}: vmapx.jit ≤ {limit}× hand (opt-in replay)", _r(vj),
                 None if vj is None else vj <= limit)
            )  # fmt: skip
        mem = r["memory"]
        if "vmapx" in mem:
            m = mem["vmapx"] / max(mem["hand"], 1)
            rows.append((f"{w.key}: peak memory ≤ 1.2× hand", _r(m), m <= 1.2))
    for row in op_rows:
        if "grad" not in row["op"]:
            rows.append((f"overhead {row['op']} ≤ 5 µs", f"{row['added_us']:.2f} µs",
                         row["added_us"] <= 5.0))  # fmt: skip
    return rows


def summary_table(results: list[dict]) -> list[str]:
    """The table the README shows: loop, hand, vmapx and the peers, with ratios."""
    shown = SHOWN
    lines = [
        "| id | workload | B | " + " | ".join(shown) + " |",
        "|---|---|---|" + "---|" * len(shown),
    ]
    for r in results:
        w, o = r["workload"], r["outcomes"]
        cells = []
        for m in shown:
            q = ratio(o.get(m), o["hand"])
            if q is None or m == "hand":
                cells.append(_ms(o.get(m)).replace(" compile", ""))
            else:
                cells.append(f"{o[m].seconds * 1e3:.3g} ({q:.0f})" if q >= 10 else
                             f"{o[m].seconds * 1e3:.3g} ({q:.2f})")  # fmt: skip
        lines.append(f"| {w.key} | {w.title} | {w.batch} | " + " | ".join(cells) + " |")
    return lines


def write_markdown(path: Path, info: dict, results: list[dict], op_rows: list[dict]) -> str:
    lines = [
        "# Benchmark results",
        "",
        "Produced by `make bench` (`python benchmarks/run.py`). Medians in milliseconds",
        "(float64, after warm-up; every result checked against the loop first). Methods",
        "are timed in alternating blocks of consecutive calls, each block after one untimed",
        "call that refills the caches the other methods emptied.",
        "",
        *[f"- {k}: {v}" for k, v in info.items()],
        "",
        "## Summary (ms; in brackets the ratio to hand-vectorized NumPy)",
        "",
        *summary_table(results),
        "",
        "## Times (ms)",
        "",
        "| id | workload | B | " + " | ".join(METHODS) + " |",
        "|---|---|---|" + "---|" * len(METHODS),
    ]
    for r in results:
        w, o = r["workload"], r["outcomes"]
        cells = [_ms(o.get(m)) if m in o else "–" for m in METHODS]
        lines.append(f"| {w.key} | {w.title} | {w.batch} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Ratios (lower is better for vmapx)",
        "",
        "| id | vmapx / hand | vmapx / torch.vmap | vmapx / jax.vmap | vmapx / jax.jit(vmap) "
        "| vmapx.jit / hand | peak MiB hand | peak MiB vmapx | memory vmapx / hand |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        o, mem = r["outcomes"], r["memory"]
        v = o["vmapx"]
        mem_h = mem["hand"] / 2**20
        mem_v = mem.get("vmapx")
        cells = [
            _r(ratio(v, o["hand"])),
            _r(ratio(v, o.get("torch.vmap"))),
            _r(ratio(v, o.get("jax.vmap"))),
            _r(ratio(v, o.get("jax.jit(vmap)"))),
            _r(ratio(o.get("vmapx.jit"), o["hand"])),
            f"{mem_h:.2f}",
            "–" if mem_v is None else f"{mem_v / 2**20:.2f}",
            "–" if mem_v is None else _r(mem_v / max(mem["hand"], 1)),
        ]
        lines.append(f"| {r['workload'].key} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Per-op overhead on tiny arrays (µs per NumPy call)",
        "",
        f"A chain of {overhead.N_OPS} calls on a batch of {overhead.BATCH} examples of shape "
        "(4, 4); slope over the chain length, so the fixed cost of a `vmap` call is apart.",
        "",
        "| operation | vmapx | the NumPy call itself | added by vmapx | fixed cost per call |",
        "|---|---|---|---|---|",
    ]
    for row in op_rows:
        lines.append(
            f"| {row['op']} | {row['vmapx_us']:.2f} | {row['numpy_us']:.2f} | "
            f"{row['added_us']:.2f} | {row['fixed_us']:.1f} |"
        )
    if not any("grad" in row["op"] for row in op_rows):
        lines.append("| under vmap(grad) | (needs `vmapx.grad`) | | | |")
    lines += ["", "## Targets", "", "| target | measured | met |", "|---|---|---|"]
    for name, detail, met in targets(results, op_rows):
        lines.append(f"| {name} | {detail} | {'–' if met is None else ('yes' if met else 'NO')} |")
    text = "\n".join(lines) + "\n"
    path.write_text(text)
    return text


def write_chart(path: Path, results: list[dict]) -> None:
    """Grouped bars: each method's time relative to hand-vectorized NumPy (log scale)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no chart")
        return
    shown = SHOWN
    keys = [r["workload"].key for r in results]
    fig, ax = plt.subplots(figsize=(max(12.0, 0.55 * len(keys)), 5.2))
    width = 0.8 / len(shown)
    for j, m in enumerate(shown):
        xs, ys = [], []
        for i, r in enumerate(results):
            q = ratio(r["outcomes"].get(m), r["outcomes"]["hand"])
            if q is not None:
                xs.append(i + (j - (len(shown) - 1) / 2) * width)
                ys.append(q)
        ax.bar(xs, ys, width, label=m)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_yscale("log")
    ax.set_xticks(range(len(keys)), keys, rotation=45, ha="right", fontsize=8)
    ax.set_ylabel("time / hand-vectorized NumPy (log)")
    ax.set_title("vmapx benchmarks (float64, median; lower is better)")
    ax.legend(ncol=len(shown), fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated workload ids (prefixes), e.g. w1,w6")
    parser.add_argument("--quick", action="store_true", help="short timing budget")
    parser.add_argument("--out", type=Path, default=HERE, help="folder for the results")
    parser.add_argument(
        "--threads", type=int, default=1,
        help="threads for every library (BLAS, torch, XLA); 0 keeps each one's default",
    )  # fmt: skip
    opts = parser.parse_args(argv)

    peers = load_peers()
    info = machine_info(peers)
    for k, v in info.items():
        print(f"{k}: {v}")
    budget = 0.1 if opts.quick else 0.5
    chosen = WORKLOADS + MORE_WORKLOADS
    if opts.only:
        prefixes = opts.only.split(",")
        chosen = [w for w in chosen if any(w.key.startswith(p) for p in prefixes)]
    results = [run_workload(w, peers, budget) for w in chosen]

    print("per-op overhead ...")
    rng = np.random.default_rng(0)
    op_rows = overhead.vmap_overhead(rng)
    try:
        grad_row = overhead.grad_overhead(rng)
    except Exception as e:  # vmapx.grad exists but cannot run this chain yet
        print(f"per-op overhead under vmap(grad): failed ({type(e).__name__}: {e})"[:200])
        grad_row = None
    if grad_row is not None:
        op_rows.append(grad_row)

    info["load average at end"] = _load()
    opts.out.mkdir(parents=True, exist_ok=True)
    text = write_markdown(opts.out / "results.md", info, results, op_rows)
    write_chart(opts.out / "results.png", results)
    payload = {
        "info": info,
        "workloads": {
            r["workload"].key: {
                "batch": r["workload"].batch,
                "times": {m: o.as_json() for m, o in r["outcomes"].items()},
                "peak_bytes": r["memory"],
            }
            for r in results
        },
        "overhead_us": op_rows,
    }
    (opts.out / "results.json").write_text(json.dumps(payload, indent=1) + "\n")
    print()
    print(text)
    wrong = [r["workload"].key for r in results if r["outcomes"]["vmapx"].note == "wrong result"]
    if wrong:
        print(f"vmapx gave a wrong result on {', '.join(wrong)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
