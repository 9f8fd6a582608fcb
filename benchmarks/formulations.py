"""Faster NumPy formulations a batching rule could choose, measured side by side.

    python benchmarks/formulations.py

Each row is one NumPy computation that a vmapx rule performs on a benchmark workload,
in the form the rule uses now and in a faster form that gives the same values
(checked before timing, bitwise where the row says so). Times are the fastest of
repeats, in milliseconds; peak memory from tracemalloc, in MiB.
"""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np

rng = np.random.default_rng(0)


def best_ms(fn: Callable[[], Any], repeat: int = 7) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times) * 1e3


def peak_mib(fn: Callable[[], Any]) -> float:
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    tracemalloc.reset_peak()
    out = fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    del out
    return (peak - base) / 2**20


def column_sum(v: Any) -> Any:
    """Sum over a short last axis (fewer than 8 entries) as adds of its columns: the
    same additions in the same order as NumPy's reduction, so bitwise equal."""
    out = v[..., 0] + v[..., 1]
    for j in range(2, v.shape[-1]):
        out += v[..., j]
    return out


def rows() -> list[tuple[str, str, Callable, Callable, bool]]:
    """(where, what, current form, proposed form, bitwise equal?)"""
    x7 = rng.standard_normal((100_000, 4))
    x8, y8 = rng.standard_normal((2048, 3)), rng.standard_normal((512, 3))
    d8 = (y8[None] - x8[:, None]) ** 2
    a5, a8 = rng.standard_normal((100, 16, 16)), rng.standard_normal((100, 8, 8))
    r5, r8 = a5.reshape(100, -1), a8.reshape(100, -1)
    x15, c15 = rng.standard_normal((2048, 16)), rng.standard_normal((256, 16))
    x16, k16 = rng.standard_normal((500, 1024)), rng.standard_normal(32)
    return [
        ("w7, reductions", "sum over a length-4 axis of (100000, 4)",
         lambda: x7.sum(axis=1), lambda: column_sum(x7), True),
        ("w8, reductions", "sum over the length-3 axis of (2048, 512, 3)",
         lambda: d8.sum(axis=-1), lambda: column_sum(d8), True),
        ("w5, contractions", "outer product of batched a (8,8): broadcast vs einsum",
         lambda: a8[:, :, :, None, None] * a8[:, None, None, :, :],
         lambda: np.einsum("bi,bj->bij", r8, r8).reshape(a8.shape + a8.shape[1:]), True),
        ("w5, contractions", "outer product of batched a (16,16): broadcast vs einsum",
         lambda: a5[:, :, :, None, None] * a5[:, None, None, :, :],
         lambda: np.einsum("bi,bj->bij", r5, r5).reshape(a5.shape + a5.shape[1:]), True),
        ("w8, fusion", "distances: broadcast form vs |x|^2 + |y|^2 - 2 x.y",
         lambda: np.sqrt(((y8[None] - x8[:, None]) ** 2).sum(-1)),
         lambda: np.sqrt(np.maximum(
             (x8**2).sum(1)[:, None] + (y8**2).sum(1)[None] - 2 * x8 @ y8.T, 0.0)),
         False),
        ("w15, fusion", "nearest centroid, min over C (256,16) of squared distances: "
         "broadcast vs |x|^2 + |c|^2 - 2 x.c (argmin can differ at near ties)",
         lambda: ((c15[None] - x15[:, None]) ** 2).sum(-1).min(1),
         lambda: ((x15**2).sum(1)[:, None] + (c15**2).sum(1)[None] - 2 * x15 @ c15.T).min(1),
         False),
        ("w16, convolve", "np.convolve of (500, 1024) rows with a shared (32,) kernel: rows "
         "end to end in one np.convolve (vmapx's rule) vs sliding windows @ kernel",
         lambda: _rows_end_to_end(x16, k16), lambda: _windows_matmul(x16, k16), False),
    ]  # fmt: skip


def _rows_end_to_end(x: Any, k: Any) -> Any:
    rows, m = x.shape[0], len(k)
    length = x.shape[1] + m - 1
    padded = np.concatenate([x, np.zeros((rows, m - 1))], axis=1).reshape(-1)
    return np.convolve(padded, k)[: rows * length].reshape(rows, length)


def _windows_matmul(x: Any, k: Any) -> Any:
    m = len(k)
    padded = np.pad(x, ((0, 0), (m - 1, m - 1)))
    return np.lib.stride_tricks.sliding_window_view(padded, m, axis=1) @ k[::-1]


def memory_rows() -> list[tuple[str, str, Callable, Callable]]:
    """Peak memory: a rule that writes into a temporary it alone holds (what NumPy's
    own temporary elision does for `(a - b) ** 2` in plain code) against a new array."""
    x8, y8 = rng.standard_normal((2048, 3)), rng.standard_normal((512, 3))
    x7 = rng.standard_normal((100_000, 4))

    def w8_new() -> Any:
        d = np.subtract(y8[None], x8[:, None])
        sq = np.power(d, 2)  # what a rule does now: `d` is held by its tracer
        return np.sqrt(sq.sum(-1))

    def w8_reuse() -> Any:
        d = np.subtract(y8[None], x8[:, None])
        np.power(d, 2, out=d)
        return np.sqrt(d.sum(-1))

    def w7_new() -> Any:
        s = x7.sum(axis=1)
        return np.multiply(s, 2)

    def w7_reuse() -> Any:
        s = x7.sum(axis=1)
        return np.multiply(s, 2, out=s)

    return [
        ("w8", "(Y - x) ** 2 then sum", w8_new, w8_reuse),
        ("w7", "x.sum() * 2", w7_new, w7_reuse),
    ]


def main() -> None:
    print("| workload, rule | computation | now (ms) | proposed (ms) | speed-up | bitwise |")
    print("|---|---|---|---|---|---|")
    for where, what, now, new, bitwise in rows():
        a, b = now(), new()
        if bitwise:
            assert np.array_equal(a, b), what
        else:
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9, err_msg=what)
        t_now, t_new = best_ms(now), best_ms(new)
        print(f"| {where} | {what} | {t_now:.3f} | {t_new:.3f} | {t_now / t_new:.1f}x | "
              f"{'yes' if bitwise else 'no (rounding)'} |")  # fmt: skip
    print()
    print("| workload | computation | peak MiB, new array | peak MiB, reuse temporary |")
    print("|---|---|---|---|")
    for where, what, now, new in memory_rows():
        np.testing.assert_array_equal(now(), new())
        print(f"| {where} | {what} | {peak_mib(now):.2f} | {peak_mib(new):.2f} |")


if __name__ == "__main__":
    main()
