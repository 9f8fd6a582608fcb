"""`solve` of a batch of small triangular matrices by substitution, batch axis last.

A Cholesky or QR factor is solved against (`solve(low, b)`, then `solve(low.T, y)`);
NumPy solves it as any matrix: LU with pivoting, one LAPACK call per example of the
stack, ~175 ns each for a 4x4 whatever the work inside. Substitution row by row, each
term one NumPy call over the whole batch (each entry a contiguous row of the batch),
is faster for thousands of small matrices (measured, the checks below and the copies
in and out included; LAPACK's time in brackets): n=2, B=1024: 28 us (97); n=4,
B=1024: 119 (183); n=4, B=5000: 116 (887); n=8, B=2000: 526 (876); n=12, B=2000: 1081
(1969). Not for fewer matrices (n=4, B=512: 103 against 93) nor larger ones (n=16,
B=1000: 1482 against 1496; B=5000: 10.3 against 7.5 ms, the entries no longer fit in
the cache that LAPACK's one matrix at a time does). The checks run entry by entry, on
one row of the batch at a time: temporaries of the whole batch's entries would be new
memory at every call in a process whose allocator gives large blocks back (page
faults: 1.03 ms against 0.32 in a fresh process).

Taken only where it computes what LAPACK computes, up to rounding, and LAPACK runs as
the loop does everywhere else:

- every example's `a` triangular the same way, with nonzero entries of `a` in the
  normal range with room (at least `tiny / eps`: subnormal values lose digits, and
  the two orders of operations would then differ by more than rounding), all finite;
- no row swaps in LU's partial pivoting: for a lower triangular `a`, each diagonal
  entry at least as large in magnitude as every entry below it in its column (an
  upper triangular `a` never swaps). LU then factors `a` as `(a / diag) @ diag` and its
  solve is this substitution with each term scaled by the diagonal and back (where a
  row swap would happen, LU can meet a zero pivot, "Singular matrix", or lose digits
  that substitution keeps: the loop's values are LAPACK's);
- a finite result (where it overflows, the inf and NaN entries depend on the order of
  operations).

The values are then the loop's up to rounding: where a row's sum cancels (an
ill-conditioned system) an entry may differ in its last digits relative to itself, as
any two stable solvers do, and a zero's sign may differ. Real float32 and float64 of a
batch of at least `_MIN_BATCH`; under `vmapx.jit`'s recording (values that are not
arrays) and for another array library, the stacked LAPACK call.
"""

from __future__ import annotations

from typing import Any

import numpy as np

_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
_MAX_N = 12
_MIN_BATCH = 1024


def triangular_solve(va: Any, vb: Any) -> np.ndarray | None:
    """`np.linalg.solve` per example of `va` (B, n, n) and `vb` (B, n) (vectors) or
    (B, n, k), or None where LAPACK must run (see above)."""
    if (
        type(va) is not np.ndarray  # (values, not a `vmapx.jit` recording's; NumPy's)
        or type(vb) is not np.ndarray
        or va.ndim != 3
        or not 2 <= va.shape[-1] == va.shape[-2] <= _MAX_N
        or va.shape[0] < _MIN_BATCH
        or va.dtype not in _DTYPES
        or vb.dtype != va.dtype
        or vb.shape[0] != va.shape[0]
        or (vb.ndim == 3 and vb.shape[-1] > va.shape[-1])  # (LAPACK's BLAS-3 solve of
        # many right-hand sides: n=8, 64 columns, 12.7 against 13.9 ms)
    ):
        return None
    n = va.shape[-1]
    first = va[0]  # (a general matrix is told apart here, at little cost)
    lower = not np.triu(first, 1).any()
    if not lower and np.tril(first, -1).any():
        return None
    m = np.ascontiguousarray(np.moveaxis(va, 0, -1))  # (n, n, B): entry by entry
    if not _substitution_computes_lapacks(m, lower):
        return None
    rhs = vb if vb.ndim == 3 else vb[..., None]
    x = np.moveaxis(rhs, 0, -1).copy(order="C")  # (n, k, B): row i of every b, ours
    if not np.isfinite(x).all():
        return None
    order = range(n) if lower else range(n - 1, -1, -1)
    with np.errstate(all="ignore"):  # (an overflow goes to LAPACK, below)
        for step, i in enumerate(order):
            row = x[i]  # b's row, then the solution's, in place
            for j in order[:step]:
                row -= m[i, j] * x[j]
            np.divide(row, m[i, i], out=row)
    if not np.isfinite(x).all():
        return None
    out = np.ascontiguousarray(np.moveaxis(x, -1, 0))  # (B, n, k), as the loop's
    return out if vb.ndim == 3 else out[..., 0]


def _substitution_computes_lapacks(m: np.ndarray, lower: bool) -> bool:
    """Whether every matrix of `m` (n, n, B) is triangular (`lower` or upper) with
    entries in the normal range and finite, and, lower, needs no row swap in LU. Entry
    by entry: each temporary is one row of the batch (temporaries of the whole `m`
    are fresh memory at every call where the allocator gives large blocks back)."""
    n = m.shape[0]
    smallest = np.finfo(m.dtype).tiny / np.finfo(m.dtype).eps
    if not np.isfinite(m).all():
        return False
    diagonal = [np.abs(m[i, i]) for i in range(n)]
    if not all((d >= smallest).all() for d in diagonal):
        return False
    for i in range(n):
        for j in range(n):
            if i == j:
                continue
            if (j > i) == lower:  # (the side that must be zero)
                if m[i, j].any():
                    return False
                continue
            size = np.abs(m[i, j])
            if ((size < smallest) & (size != 0)).any():
                return False
            if lower and (size > diagonal[j]).any():
                return False
    return True
