"""`solve` of a batch of triangular matrices by substitution.

A Cholesky or QR factor is solved against (`solve(low, b)`, then `solve(low.T, y)`);
NumPy solves it as any matrix: LU with pivoting, one LAPACK call per example of the
stack, ~175 ns each for a 4x4 whatever the work inside, and LU's n^3 work where
substitution's is n^2. Two forms, by size (measured, the checks below and the copies
in and out included; LAPACK's time in brackets):

- **entry by entry, batch axis last** (up to `_MAX_N` = 12 rows, at least
  `_MIN_BATCH` matrices): each term one NumPy call over the whole batch, each entry a
  contiguous row of the batch. n=2, B=1024: 28 us (97); n=4, B=1024: 119 (183); n=4,
  B=5000: 116 (887); n=8, B=2000: 526 (876); n=12, B=2000: 1081 (1969). Not for fewer
  matrices (n=4, B=512: 103 against 93). The checks run entry by entry, on one row of
  the batch at a time: temporaries of the whole batch's entries would be new memory at
  every call in a process whose allocator gives large blocks back (page faults: 1.03
  ms against 0.32 in a fresh process).
- **row by row, batch axis first** (13 to `_MAX_ROWS` = 128 rows, at least
  `_MIN_WORK` entries in all): each row of the solution one `einsum` over the batch;
  the checks in whole-array passes over blocks of matrices that stay in the cache.
  Lower and upper (B, n) = (500, 16): 0.51 / 0.42 ms (0.75 / 0.78); (500, 32): 1.43 /
  1.28 (2.91 / 2.64); (100, 64): 1.07 / 1.60 (2.19 / 2.07); (200, 128): 10.3 / 16.4
  (73 / 48); (1000, 13): 0.93 / 0.65 (3.9 / 3.2). Not for less work ((64, 32): 0.30 /
  0.41 against 0.37 / 0.34; (16, 32): 0.21 against 0.09), nor for the small matrices
  above (n=4, B=5000: 0.95 against the first form's 0.26).

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
  operations) whose entries are zero or in the normal range with room (a subnormal
  `x_j = y_j / a_jj` has lost digits that LU's `(a_ij / a_jj) * y_j` keeps).

The values are then the loop's up to rounding: where a row's sum cancels (an
ill-conditioned system) an entry may differ in its last digits relative to itself, as
any two stable solvers do, and a zero's sign may differ. Real float32 and float64 of
the batch sizes above; under `vmapx.jit`'s recording (values that are not
arrays) and for another array library, the stacked LAPACK call.
"""

from __future__ import annotations

from typing import Any

import numpy as np

_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
_MAX_N = 12  # entry by entry, batch axis last, up to this many rows...
_MIN_BATCH = 1024  # ...for at least this many matrices
_MAX_ROWS = 128  # row by row, batch axis first, up to this many rows...
_MIN_WORK = 100_000  # ...for matrices of at least this many entries in all
_CHECKED_AT_ONCE = 1 << 16  # entries of the matrices checked in one block


def triangular_solve(va: Any, vb: Any) -> np.ndarray | None:
    """`np.linalg.solve` per example of `va` (B, n, n) and `vb` (B, n) (vectors) or
    (B, n, k), or None where LAPACK must run (see above)."""
    if (
        type(va) is not np.ndarray  # (values, not a `vmapx.jit` recording's; NumPy's)
        or type(vb) is not np.ndarray
        or va.ndim != 3
        or not 2 <= va.shape[-1] == va.shape[-2] <= _MAX_ROWS
        or va.dtype not in _DTYPES
        or vb.dtype != va.dtype
        or vb.shape[0] != va.shape[0]
        or (vb.ndim == 3 and vb.shape[-1] > va.shape[-1])  # (LAPACK's BLAS-3 solve of
        # many right-hand sides: n=8, 64 columns, 12.7 against 13.9 ms)
    ):
        return None
    n = va.shape[-1]
    by_entries = n <= _MAX_N
    if va.shape[0] < _MIN_BATCH if by_entries else va.size < _MIN_WORK:
        return None
    first = va[0]  # (a general matrix is told apart here, at little cost)
    lower = not np.triu(first, 1).any()
    if not lower and np.tril(first, -1).any():
        return None
    if not by_entries:
        return _by_rows(va, vb, lower)
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
    if not (np.isfinite(x).all() and _normal_or_zero(x)):
        return None
    out = np.ascontiguousarray(np.moveaxis(x, -1, 0))  # (B, n, k), as the loop's
    return out if vb.ndim == 3 else out[..., 0]


def _substitution_computes_lapacks(m: np.ndarray, lower: bool) -> bool:
    """Whether every matrix of `m` (n, n, B) is triangular (`lower` or upper) with
    entries in the normal range and finite, and, lower, needs no row swap in LU. Entry
    by entry: each temporary is one row of the batch (temporaries of the whole `m`
    are fresh memory at every call where the allocator gives large blocks back)."""
    n = m.shape[0]
    smallest = _smallest(m.dtype)
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


def _smallest(dtype: np.dtype) -> Any:
    """The smallest size of an entry in the normal range with room (`tiny / eps`): below
    it, the two orders of operations differ by more than rounding."""
    return np.finfo(dtype).tiny / np.finfo(dtype).eps


def _by_rows(va: np.ndarray, vb: np.ndarray, lower: bool) -> np.ndarray | None:
    """The substitution row by row, batch axis first: each row of the solution is one
    `einsum` over the batch of that row of `a` against the rows already solved. For
    larger matrices, where the entry-by-entry form makes too many calls."""
    if not _rows_compute_lapacks(va, lower):
        return None
    n = va.shape[-1]
    x = (vb if vb.ndim == 3 else vb[..., None]).copy()  # (B, n, k), C order: ours
    if not np.isfinite(x).all():
        return None
    order = range(n) if lower else range(n - 1, -1, -1)
    with np.errstate(all="ignore"):  # (an overflow goes to LAPACK, below)
        for step, i in enumerate(order):
            row = x[:, i]  # b's row, then the solution's, in place
            if step:
                solved = slice(0, i) if lower else slice(i + 1, n)
                row -= np.einsum("bj,bjk->bk", va[:, i, solved], x[:, solved])
            row /= va[:, i, i, None]
    if not (np.isfinite(x).all() and _normal_or_zero(x)):
        return None
    return x if vb.ndim == 3 else x[..., 0]


def _normal_or_zero(x: np.ndarray) -> bool:
    """Whether every entry of the solution is zero or in the normal range with room: a
    smaller one lost digits in `x_j = y_j / a_jj` that LU's `(a_ij / a_jj) * y_j` keeps
    (a row of 1e300 and a right-hand side of 1e-21: 0.2% off)."""
    smallest = _smallest(x.dtype)
    size = np.abs(x)
    return bool(np.count_nonzero(size < smallest) == np.count_nonzero(size == 0))


def _rows_compute_lapacks(va: np.ndarray, lower: bool) -> bool:
    """`_substitution_computes_lapacks` for `va` (B, n, n), a block of matrices at a
    time (whole-array passes, few calls: for larger matrices). Where an entry off the
    diagonal is not finite, the result is not (checked after the solve); a lower `a`'s
    entries must not exceed their diagonal entry, which the same comparison checks."""
    n = va.shape[-1]
    smallest = _smallest(va.dtype)
    ones = np.ones((n, n), va.dtype)
    zero_side = (np.triu(ones, 1) if lower else np.tril(ones, -1)).reshape(n * n)
    step = max(1, _CHECKED_AT_ONCE // (n * n))
    for start in range(0, va.shape[0], step):
        size = np.abs(va[start : start + step])
        if (size.reshape(-1, n * n) @ zero_side).any():  # (a sum of sizes: NaN too)
            return False
        diagonal = np.diagonal(size, axis1=1, axis2=2)
        if not (np.isfinite(diagonal).all() and (diagonal >= smallest).all()):
            return False
        if lower and not (size <= diagonal[:, None, :]).all():  # (no LU row swap)
            return False
        if np.count_nonzero(size < smallest) != np.count_nonzero(size == 0):
            return False  # (nonzero entries below the normal range with room)
    return True
