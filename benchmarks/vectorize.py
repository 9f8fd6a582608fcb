"""`vmapx.vectorize` against `np.vectorize(signature=...)` on the workloads that have a
signature (`workloads.py`): median milliseconds of `--repeats` calls after warm-up,
each result checked against `np.vectorize`'s first.

Run: `python benchmarks/vectorize.py [--repeats 5]`.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import optree

sys.path.insert(0, str(Path(__file__).resolve().parent))

import vmapx  # noqa: E402
import workloads as W  # noqa: E402

CHOSEN = [W.W1, W.W2, W.W5_8, W.W5_16, W.W6_SQRT, W.W6_NORM, W.W7, W.W8]


def median_ms(fn, repeats: int) -> float:
    fn()
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e3 * float(np.median(times))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    repeats = parser.parse_args().repeats
    print("| id | np.vectorize | vmapx.vectorize | speed-up |")
    print("|---|---|---|---|")
    for w in CHOSEN:
        args = w.inputs(np.random.default_rng(0), w.batch)
        ours = vmapx.vectorize(w.example, signature=w.signature)
        numpy = np.vectorize(w.example, signature=w.signature)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # (no per-example loop)
            got = ours(*args)
        expected = numpy(*args)
        for g, e in zip(optree.tree_leaves(got), optree.tree_leaves(expected), strict=True):
            np.testing.assert_allclose(g, e, rtol=1e-9, atol=1e-12)
        slow = median_ms(lambda numpy=numpy, args=args: numpy(*args), repeats)
        fast = median_ms(lambda ours=ours, args=args: ours(*args), repeats)
        print(f"| {w.key} | {slow:.2f} | {fast:.2f} | {slow / fast:.0f}x |", flush=True)


if __name__ == "__main__":
    main()
