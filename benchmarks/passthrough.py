"""Library functions that convert their inputs with `np.asarray` on entry, under vmap:
batched or fallback, agreement with the loop, and vmap time against the loop (batch 16).

Run: `python benchmarks/passthrough.py` (the cases are tests/passthrough_cases.py).
"""

from __future__ import annotations

import functools
import statistics
import sys
import timeit
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import vmapx  # noqa: E402
from passthrough_cases import cases  # noqa: E402


def _loop(f, args):
    return np.stack([np.asarray(f(*ex)) for ex in zip(*args, strict=True)])


def _best(fn, number=5, repeat=5):
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number


def main() -> None:
    rows, batched, speedups, fallback_ratios = [], 0, [], []
    for name, f, args in cases():
        g = vmapx.vmap(f)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                got = g(*args)
            except Exception as error:  # noqa: BLE001 (reported, not hidden)
                rows.append((name, f"raises {type(error).__name__}", "", ""))
                continue
        perf = [w for w in caught if issubclass(w.category, vmapx.PerformanceWarning)]
        ok = np.allclose(got, _loop(f, args), equal_nan=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t_loop = _best(functools.partial(_loop, f, args))
            t_vmap = _best(functools.partial(g, *args))
        kind = "fallback" if perf else "batched"
        batched += not perf
        (fallback_ratios if perf else speedups).append(t_loop / t_vmap)
        rows.append(
            (name, kind if ok else "WRONG", f"{t_loop * 1e3:.2f}", f"{t_loop / t_vmap:.1f}x")
        )
    width = max(len(r[0]) for r in rows)
    for r in rows:
        print(f"{r[0]:<{width}}  {r[1]:<9} loop {r[2]:>7} ms  vmap {r[3]:>6}")
    print(
        f"\n{batched} of {len(rows)} batched; median speed-up of those "
        f"{statistics.median(speedups) if speedups else float('nan'):.1f}x; fallbacks run at "
        f"{statistics.median(fallback_ratios) if fallback_ratios else float('nan'):.2f}x "
        "the loop (median)"
    )


if __name__ == "__main__":
    main()
