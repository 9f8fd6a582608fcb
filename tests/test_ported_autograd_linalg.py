"""Ported from HIPS autograd's `tests/test_linalg.py` (MIT license,
https://github.com/HIPS/autograd): `np.linalg` derivatives in both modes (autograd checks
only reverse mode for most of them) to order 2, each checked as `autograd_port.Case`
describes. Complex eigenvectors and singular vectors are only defined up to a phase, so
those tests compare their absolute values, as autograd's do.
"""

from __future__ import annotations

import numpy as np
import pytest

import vmapx
from autograd_port import single

RS = np.random.default_rng(4)


def randn(*shape: int) -> np.ndarray:
    return RS.standard_normal(shape)


def crandn(*shape: int) -> np.ndarray:
    return randn(*shape) + 1j * randn(*shape)


def rand_psd(d: int) -> np.ndarray:
    m = randn(d, d)
    return m @ m.T


def symmetrized(fun):
    """autograd's `check_symmetric_matrix_grads`: `fun` of the symmetric matrix made from
    the lower triangle of the argument."""

    def of_lower(a, *rest):
        low = np.tril(a)
        return fun((low + np.swapaxes(low, -1, -2)) / 2.0, *rest)

    return of_lower


def _eigh(uplo: str, complex_: bool = False):
    def fun(x):
        w, v = np.linalg.eigh(x, uplo)
        return w, (np.abs(v) if complex_ else v)

    return fun


def _svd(phase: bool):
    def fun(x):
        u, s, vh = np.linalg.svd(x, full_matrices=False)
        return (np.abs(u), s, np.abs(vh)) if phase else (u, s, vh)

    return fun


def _svd_s(x):
    return np.linalg.svd(x, full_matrices=False, compute_uv=False)


def _pinv_low_rank(x):
    return np.linalg.pinv(np.swapaxes(x, -1, -2) @ x)


def _cholesky_reparameterization(a):
    z = np.dot(np.linalg.cholesky(a), np.random.RandomState(0).randn(a.shape[0]))
    return np.linalg.norm(z)


def _slogdet(x):
    return np.linalg.slogdet(x)[1]


def _well_conditioned(d: int) -> np.ndarray:
    m = randn(d, d)
    return m @ m + np.eye(d)


_B8, _B81, _B6 = randn(8, 7), randn(8), randn(6, 5)
_A6 = randn(6, 6) + np.eye(6)
_B3d, _B3d3 = randn(5, 4), randn(5, 4, 6)
_BATCH_H = randn(2, 3, 6, 6) + 10 * np.eye(6)
_H = np.einsum("...ij,...kj->...ik", _BATCH_H, _BATCH_H)
_SLOG = np.stack([rand_psd(5) + 5 * np.eye(5) for _ in range(3)])
_CHOL3 = np.stack([rand_psd(6) for _ in range(3)])

SVD_SHAPES = {"wide_2d": (3, 5), "wide_3d": (4, 3, 5), "square_2d": (4, 4),
              "square_3d": (3, 4, 4), "tall_2d": (5, 3), "tall_3d": (4, 5, 3)}  # fmt: skip

CASES = [
    single("inv", np.linalg.inv, _well_conditioned(8)),
    *[single(f"pinv-{m}", np.linalg.pinv, randn(5, m)) for m in range(2, 8)],
    *[single(f"pinv_stacked-{m}", np.linalg.pinv, randn(2, 5, m)) for m in range(2, 8)],
    *[single(f"pinv_low_rank-{m}", _pinv_low_rank, randn(5, m)) for m in range(2, 6)],
    *[single(f"pinv_low_rank_stacked-{m}", _pinv_low_rank, randn(2, 5, m)) for m in range(2, 6)],
    single("inv_3d", np.linalg.inv, randn(4, 4, 4) + 5 * np.eye(4)),
    single("inv_4d", np.linalg.inv, randn(4, 4, 4, 4) + 5 * np.eye(4)),
    single("solve_arg1", lambda a: np.linalg.solve(a, _B8), randn(8, 8) + 10 * np.eye(8)),
    single("solve_arg1_1d", lambda a: np.linalg.solve(a, _B81), randn(8, 8) + 10 * np.eye(8)),
    single("solve_arg2", lambda b: np.linalg.solve(_A6, b), _B6),
    single("solve_both", np.linalg.solve, _A6, _B6, argnums=(0, 1)),
    single("solve_arg1_3d", lambda a: np.linalg.solve(a, _B3d[..., None])[..., 0],
           randn(5, 4, 4) + 5 * np.eye(4)),  # fmt: skip
    single("solve_arg1_3d_3d", lambda a: np.linalg.solve(a, _B3d3),
           randn(5, 4, 4) + 5 * np.eye(4)),  # fmt: skip
    single("det", np.linalg.det, randn(6, 6)),
    single("det_3d", np.linalg.det, randn(3, 3, 3)),
    single("slogdet", _slogdet, randn(6, 6)),
    single("slogdet_negative", lambda x: _slogdet(-x), randn(6, 6)),
    single("slogdet_3d", lambda x: np.sum(_slogdet(x)), _SLOG),
    single("vector_2norm", np.linalg.norm, randn(6)),
    single("vector_2norm_complex", np.linalg.norm, crandn(6)),
    single("frobenius_norm", np.linalg.norm, randn(6, 5)),
    single("frobenius_norm_complex", np.linalg.norm, crandn(6, 5)),
    single("frobenius_norm_axis", lambda x: np.linalg.norm(x, axis=(0, 1)), randn(6, 5, 4)),
    single("frobenius_norm_axis_complex", lambda x: np.linalg.norm(x, axis=(0, 1)),
           crandn(6, 5, 4)),  # fmt: skip
    *[single(f"vector_norm_ord{o}", lambda x, o=o: np.linalg.norm(x, ord=o), randn(6))
      for o in range(2, 5)],
    *[single(f"vector_norm_ord{o}_complex", lambda x, o=o: np.linalg.norm(x, ord=o), crandn(6))
      for o in range(2, 5)],
    *[single(f"norm_axis{a}", lambda x, a=a: np.linalg.norm(x, axis=a), randn(6, 5, 4))
      for a in range(3)],
    *[single(f"norm_axis{a}_complex", lambda x, a=a: np.linalg.norm(x, axis=a),
             crandn(6, 5, 4)) for a in range(3)],
    single("norm_nuclear", lambda x: np.linalg.norm(x, ord="nuc"), randn(6, 5)),
    single("norm_nuclear_complex", lambda x: np.linalg.norm(x, ord="nuc"), crandn(6, 5)),
    single("norm_nuclear_axis", lambda x: np.linalg.norm(x, ord="nuc", axis=(0, 1)),
           randn(6, 5, 4)),
    single("norm_nuclear_axis_complex", lambda x: np.linalg.norm(x, ord="nuc", axis=(0, 1)),
           crandn(6, 5, 4)),
    single("eigh_lower", _eigh("L"), randn(6, 6)),
    single("eigh_upper", _eigh("U"), randn(6, 6)),
    single("eigh_lower_broadcasting", _eigh("L"), _H),
    single("eigh_upper_broadcasting", _eigh("U"), _H),
    single("eigh_lower_complex", _eigh("L", True), crandn(6, 6)),
    single("eigh_upper_complex", _eigh("U", True), crandn(6, 6)),
    single("eig_real", lambda x: tuple(np.abs(r) for r in np.linalg.eig(x)), randn(8, 8)),
    single("eig_complex", lambda x: (np.linalg.eig(x)[0], np.abs(np.linalg.eig(x)[1])),
           crandn(8, 8)),
    single("eig_batched", lambda x: (np.linalg.eig(x)[0], np.abs(np.linalg.eig(x)[1])),
           crandn(5, 8, 8)),
    single("cholesky", symmetrized(np.linalg.cholesky), rand_psd(6)),
    single("cholesky_broadcast", symmetrized(np.linalg.cholesky), _CHOL3),
    single("cholesky_reparameterization_trick", symmetrized(_cholesky_reparameterization),
           rand_psd(6)),
    *[single(f"svd_{n}", _svd(False), randn(*s)) for n, s in SVD_SHAPES.items()],
    *[single(f"svd_{n}_complex", _svd(True), crandn(*s)) for n, s in SVD_SHAPES.items()],
    *[single(f"svd_only_s_{n}", _svd_s, randn(*s)) for n, s in SVD_SHAPES.items()],
    *[single(f"svd_only_s_{n}_complex", _svd_s, crandn(*s)) for n, s in SVD_SHAPES.items()],
]  # fmt: skip


@pytest.mark.parametrize("case", CASES)
def test_linalg(case):
    case.check()


@pytest.mark.parametrize("container", [list, tuple])
def test_norm_of_a_sequence_of_traced_values(container):
    """d/dx sqrt(x**2 + (x + 2)**2) at 0 is 2 / sqrt(4) = 1 (autograd builds the array
    from the list; here `np.stack` does, see `test_ported_autograd_numpy`)."""
    fun = lambda x: np.linalg.norm(np.stack(container([x, x + 2])))  # noqa: E731
    assert vmapx.grad(fun)(0.0) == 1.0
