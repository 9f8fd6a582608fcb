"""The benchmark workloads at tiny sizes: vmapx and the hand-vectorized NumPy each
give the loop's answer (the check `make bench` makes before it times anything)."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import vmapx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from workloads import WORKLOADS, Workload, compare, loop  # noqa: E402
from workloads_more import MORE_WORKLOADS  # noqa: E402

TINY = 3
ALL = WORKLOADS + MORE_WORKLOADS


@pytest.mark.parametrize("w", ALL, ids=lambda w: w.key)
def test_hand_equals_loop(w: Workload) -> None:
    args = w.inputs(np.random.default_rng(0), TINY)
    compare(w, w.hand(*args), loop(w, args), "hand")


@pytest.mark.parametrize("w", ALL, ids=lambda w: w.key)
def test_vmapx_equals_loop(w: Workload) -> None:
    missing = w.missing()
    if missing:
        pytest.skip(f"needs vmapx.{', vmapx.'.join(missing)}")
    args = w.inputs(np.random.default_rng(0), TINY)
    with warnings.catch_warnings():  # correctness here; speed is `make bench`'s business
        warnings.simplefilter("ignore", vmapx.PerformanceWarning)
        got = w.vmapx(vmapx)(*args)
    compare(w, got, loop(w, args), "vmapx")


@pytest.mark.parametrize("w", ALL, ids=lambda w: w.key)
def test_vmapx_jit_replays_equal_the_loop(w: Workload) -> None:
    """The recording call and replays with new values (what `make bench` times)."""
    rng = np.random.default_rng(0)
    jitted = vmapx.jit(w.vmapx(vmapx))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", vmapx.PerformanceWarning)
        for _ in range(3):
            args = w.inputs(rng, TINY)
            compare(w, jitted(*args), loop(w, args), "vmapx.jit")


def test_the_parallel_benchmarks_large_workload() -> None:
    """w10 of `benchmarks/parallel.py` (256 MiB there), at a tiny size."""
    from parallel import W10

    args = W10.inputs(np.random.default_rng(0), TINY)
    compare(W10, W10.hand(*args), loop(W10, args), "hand")
    compare(W10, W10.vmapx(vmapx)(*args), loop(W10, args), "vmapx")
