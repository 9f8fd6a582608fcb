"""The library corpus at batch 16: per entry, the loop's time, vmap's time and their ratio.

Runs every entry of `vmapx.libraries.corpus` (the functions `python -m vmapx coverage
--libraries` reports), checks vmap against the loop once (the warm-up), then times the
loop and `vmap(f)` in interleaved rounds and keeps the fastest of each (the intrinsic
cost, without the noise of other processes). The ratio is loop / vmap: above 1, vmap is
faster. "batched" entries ran without a `PerformanceWarning`; the others fell back to
the per-example loop, whose ratio shows vmapx's fixed cost around that loop.

    python benchmarks/libraries.py --json out.json          # measure, save
    python benchmarks/libraries.py --markdown benchmarks/libraries.md a.json [b.json]

With two JSON files the markdown compares them (before, after) entry by entry; each
JSON file may be given several times over (runs of the same code) and the fastest of
each entry's times is kept.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

ROUNDS = 7
MIN_SECONDS = 2e-3  # each timing repeats the call until it takes at least this long


def _per_call(fun: Callable[[], Any], n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        fun()
    return (time.perf_counter() - t0) / n


def _calls_for(fun: Callable[[], Any]) -> int:
    one = _per_call(fun, 1)
    return max(1, min(200, int(MIN_SECONDS / max(one, 1e-7))))


def measure_entry(entry: Any, rounds: int = ROUNDS) -> dict[str, Any]:
    """Loop and vmap times of one corpus entry, fastest of `rounds` interleaved rounds."""
    from vmapx import vmap
    from vmapx.libraries.corpus import _loop, measure

    lib, name, f, args = entry
    checked = measure(entry)  # (the first vmap call: fallback memory, adapters loaded)
    row = {"library": lib, "name": name, "batched": checked["batched"],
           "correct": checked["correct"], "error": checked["error"]}  # fmt: skip
    if checked["error"] is not None:
        return row
    batched = vmap(f)
    loop, vec = (lambda: _loop(f, args)), (lambda: batched(*args))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        n_loop, n_vec = _calls_for(loop), _calls_for(vec)
        t_loop, t_vec = float("inf"), float("inf")
        for _ in range(rounds):
            t_loop = min(t_loop, _per_call(loop, n_loop))
            t_vec = min(t_vec, _per_call(vec, n_vec))
    row.update(loop_us=t_loop * 1e6, vmap_us=t_vec * 1e6)
    return row


def measure_all(rounds: int = ROUNDS, only: str | None = None) -> list[dict[str, Any]]:
    from vmapx.libraries.corpus import entries

    chosen = [e for e in entries() if only is None or only in f"{e[0]}.{e[1]}"]
    return [measure_entry(e, rounds) for e in chosen]


def _merge(runs: list[list[dict[str, Any]]]) -> dict[tuple[str, str], dict[str, Any]]:
    """Each entry's fastest loop and vmap times over several runs of the same code."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for run in runs:
        for r in run:
            key = (r["library"], r["name"])
            if key not in out:
                out[key] = dict(r)
            elif "loop_us" in r:
                for t in ("loop_us", "vmap_us"):
                    out[key][t] = min(out[key][t], r[t])
    for r in out.values():
        if "loop_us" in r:
            r["ratio"] = r["loop_us"] / r["vmap_us"]
    return out


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    fast = [r["ratio"] for r in rows if r["batched"] and "ratio" in r]
    slow = [r["ratio"] for r in rows if not r["batched"] and "ratio" in r]
    return {
        "entries": len(rows),
        "batched": sum(r["batched"] for r in rows),
        "wrong": sum(not r["correct"] for r in rows),
        "speedup": float(np.median(fast)) if fast else None,
        "at_least_3x": sum(x >= 3 for x in fast),
        "fallback": float(np.median(slow)) if slow else None,
        "fallback_worst": float(min(slow)) if slow else None,
        "fallback_over_10pct": sum(x < 1 / 1.1 for x in slow),
    }


def _fmt(x: float | None, digits: int = 2) -> str:
    return "-" if x is None else f"{x:.{digits}f}x"


def _summary_table(columns: list[tuple[str, dict[Any, Any]]]) -> list[str]:
    lines = ["| library | entries | batched | " + " | ".join(
        f"{label}: median speed-up (batched) | {label}: median fallback ratio"
        for label, _ in columns) + " |"]  # fmt: skip
    lines.append("|---" * (3 + 2 * len(columns)) + "|")
    libs = sorted({k[0] for _, merged in columns for k in merged})
    for lib in [*libs, "all"]:
        cells, batched = [], []
        for _, merged in columns:
            s = _summary([r for k, r in merged.items() if lib in ("all", k[0])])
            cells += [_fmt(s["speedup"]), _fmt(s["fallback"])]
            batched.append(str(s["batched"]))
        name = f"**{lib}**" if lib == "all" else lib
        lines.append(f"| {name} | {s['entries']} | {' → '.join(batched)} | "
                     + " | ".join(cells) + " |")  # fmt: skip
    return lines


def markdown(columns: list[tuple[str, dict[Any, Any]]], note: str = "") -> str:
    """The summary per library and the per-entry table, one column pair per run."""
    out = ["# The library corpus at batch 16", "",
           "Produced by `benchmarks/libraries.py` (see its docstring). Times are the fastest "
           "of interleaved rounds, in microseconds per call of the whole batch of 16; the "
           "ratio is loop / vmap (above 1: vmap is faster). A fallback entry runs the "
           "per-example loop inside vmap: its ratio is vmapx's fixed cost around that "
           "loop (1.00x: none).", ""]  # fmt: skip
    if note:
        out += [note, ""]
    for label, merged in columns:
        s = _summary(list(merged.values()))
        out.append(
            f"- **{label}**: {s['batched']}/{s['entries']} batched, {s['wrong']} wrong; "
            f"median batched speed-up {_fmt(s['speedup'])} ({s['at_least_3x']} of "
            f"{s['batched']} at 3x or more); median fallback ratio {_fmt(s['fallback'])}, "
            f"worst {_fmt(s['fallback_worst'])}, {s['fallback_over_10pct']} fallbacks more "
            "than 10% slower than the loop."
        )
    out += ["", "## Per library", "", *_summary_table(columns), "", "## Per entry", ""]
    head = "| library | entry | batched | loop µs |"
    for label, _ in columns:
        head += f" {label}: vmap µs | {label}: ratio |"
    out += [head, "|---" * (4 + 2 * len(columns)) + "|"]
    keys = list(columns[-1][1])
    keys.sort(key=lambda k: (not columns[-1][1][k]["batched"], columns[-1][1][k].get("ratio", 0)))
    for key in keys:
        rows = [merged.get(key, {}) for _, merged in columns]
        last = rows[-1]
        line = f"| {key[0]} | {key[1]} | {'yes' if last['batched'] else 'no'} | "
        line += f"{last.get('loop_us', float('nan')):.0f} |"
        for r in rows:
            if "ratio" in r:
                line += f" {r['vmap_us']:.0f} | {r['ratio']:.2f}x |"
            else:
                line += f" - | {r.get('error') or '-'} |"
        out.append(line)
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", help="measure the corpus and save the rows here")
    parser.add_argument("--only", help="only entries whose 'library.name' contains this")
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--markdown", help="write the table of the JSON files given here")
    parser.add_argument("--note", default="", help="a paragraph for the markdown's head")
    parser.add_argument("files", nargs="*", help="label=path.json (repeat a label to merge)")
    args = parser.parse_args(argv)
    if args.json:
        rows = measure_all(args.rounds, args.only)
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
        merged = _merge([rows])
        print("\n".join(_summary_table([("now", merged)])))
    if args.markdown:
        runs: dict[str, list[Any]] = {}
        for spec in args.files:
            label, _, path = spec.rpartition("=")
            with open(path) as fh:
                runs.setdefault(label or path, []).append(json.load(fh))
        columns = [(label, _merge(rs)) for label, rs in runs.items()]
        with open(args.markdown, "w") as fh:
            fh.write(markdown(columns, args.note))
    if not (args.json or args.markdown):
        parser.print_help(sys.stderr)


if __name__ == "__main__":
    main()
