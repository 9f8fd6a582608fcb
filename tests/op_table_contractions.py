"""Op-table rows for contractions, numpy.linalg and numpy.fft (see `op_table.py`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from np_compat import np2
from op_spec import Op, _random

la = np2.linalg
fft = np.fft


# -- input makers: well-conditioned matrices ---------------------------------------------


def _general(n: int) -> np.ndarray:
    """A well-conditioned square matrix (diagonally dominant)."""

    def make(rng: np.random.Generator, shape: tuple = (n, n)) -> np.ndarray:
        return rng.uniform(-1, 1, shape) + n * np.eye(n)

    return make


def _spd(rng: np.random.Generator, n: int, stack: tuple = ()) -> np.ndarray:
    a = rng.uniform(-1, 1, (*stack, n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def _make(*parts: Callable) -> Callable:
    """A row's input maker from one maker per argument."""
    return lambda rng: [p(rng) for p in parts]


def _u(*shape: int, dtype: str = "float64") -> Callable:
    return lambda rng: _random(rng, shape, dtype, (-2.0, 2.0))


def _sq(n: int, *stack: int) -> Callable:
    return lambda rng: rng.uniform(-1, 1, (*stack, n, n)) + n * np.eye(n)


def _sym(n: int, *stack: int) -> Callable:
    return lambda rng: _spd(rng, n, stack)


def _tall(m: int, n: int) -> Callable:
    """Full column rank: an orthonormal-ish part plus noise."""
    return lambda rng: np.eye(m, n) * 3 + rng.uniform(-1, 1, (m, n))


def _real_spectrum(n: int) -> Callable:
    """A non-symmetric matrix with real, distinct eigenvalues: P diag(d) P^-1."""

    def make(rng: np.random.Generator) -> np.ndarray:
        p = rng.uniform(-1, 1, (n, n)) + n * np.eye(n)
        return p @ np.diag(np.arange(1.0, n + 1)) @ np.linalg.inv(p)

    return make


def _no_rank(result: tuple) -> tuple:
    """`lstsq`'s results without the integer rank (for derivative checks)."""
    x, residuals, _, s = result
    return x, residuals, s


def _rank_deficient(rng: np.random.Generator) -> np.ndarray:
    u = rng.uniform(-1, 1, (5, 2))
    return u @ rng.uniform(-1, 1, (2, 3))


# -- contractions ------------------------------------------------------------------------


def _contraction_ops() -> list[Op]:
    return [
        Op("dot.vv", np.dot, ((4,), (4,)), covers=(np.dot,)),
        Op("dot.mv", np.dot, ((3, 4), (4,))),
        Op("dot.vm", np.dot, ((4,), (4, 3))),
        Op("dot.mm", np.dot, ((2, 4), (4, 3))),
        Op("dot.nd", np.dot, ((2, 3, 4), (5, 4, 2))),
        Op("dot.nd_v", np.dot, ((2, 3, 4), (4,))),
        Op("dot.scalar", np.dot, ((), (3,))),
        Op("dot.int", np.dot, ((3, 4), (4,)), ("int64",), diff=False),
        Op("dot.complex", np.dot, ((3, 4), (4, 2)), ("complex128",), diff=False),
        # `ndarray.dot` of a plain array does not dispatch: the function loops
        Op("method.dot", lambda a, b: a.dot(b), ((3, 4), (4,)), needs_batched=(0,)),
        Op("vdot", np.vdot, ((2, 3), (6,)), covers=(np.vdot,)),
        Op("vdot.complex", np.vdot, ((2, 3), (3, 2)), ("complex128",), diff=False),
        Op("inner.vv", np.inner, ((4,), (4,)), covers=(np.inner,)),
        Op("inner.mm", np.inner, ((2, 4), (3, 4))),
        Op("inner.nd", np.inner, ((2, 3, 4), (5, 4))),
        Op("inner.scalar", np.inner, ((3,), ())),
        Op("outer", np.outer, ((2, 3), (4,)), covers=(np.outer,)),
        Op("linalg.outer", la.outer, ((3,), (4,)), covers=(la.outer,)),
        Op("tensordot.2", np.tensordot, ((2, 3, 4), (3, 4, 5)), covers=(np.tensordot,)),
        Op("tensordot.0", lambda a, b: np.tensordot(a, b, 0), ((2, 3), (3,))),
        Op("tensordot.1", lambda a, b: np.tensordot(a, b, 1), ((2, 3), (3,))),
        Op("tensordot.self_outer", lambda a: np.tensordot(a, a, 0), ((3, 3),)),
        Op(
            "tensordot.pairs",
            lambda a, b: np.tensordot(a, b, ([0, 2], [2, 0])),
            ((2, 3, 4), (4, 5, 2)),
        ),  # fmt: skip
        Op(
            "linalg.tensordot",
            lambda a, b: la.tensordot(a, b, axes=1),
            ((2, 3), (3, 4)),
            covers=(la.tensordot,),
        ),  # fmt: skip
        Op("kron", np.kron, ((2, 3), (3, 2)), covers=(np.kron,)),
        Op("kron.ranks", np.kron, ((2,), (3, 2))),
        Op("kron.scalar", np.kron, ((), (3,))),
        Op("linalg.matmul", la.matmul, ((2, 3), (3, 4)), covers=(la.matmul,)),
        Op("matmul.mv_big", np.matmul, ((40, 30), (30,))),
        Op("matmul.int", np.matmul, ((3,), (3, 2)), ("int64",), diff=False),
        Op("matmul.complex_vv", np.matmul, ((3,), (3,)), ("complex128",), diff=False),
        Op("matmul.bool", np.matmul, ((2, 3), (3,)), ("bool",), diff=False),
    ]


def _einsum(spec: str, **kw: Any) -> Callable:
    return lambda *ops: np.einsum(spec, *ops, **kw)


def _einsum_ops() -> list[Op]:
    return [
        Op("einsum.mv", _einsum("ij,j->i"), ((3, 4), (4,)), covers=(np.einsum,)),
        Op("einsum.implicit_mm", _einsum("ij,jk"), ((2, 3), (3, 4))),
        Op("einsum.implicit_order", _einsum("ba,ca"), ((2, 3), (4, 3))),
        Op("einsum.transposed", _einsum("ji,j->i"), ((3, 2), (3,))),
        Op("einsum.outer", _einsum("i,j"), ((2,), (3,))),
        Op("einsum.full_sum", _einsum("ij,ij->"), ((2, 3), (2, 3))),
        Op("einsum.ellipsis", _einsum("...ij,...j"), ((5, 2, 3), (3,))),
        Op("einsum.ellipsis_out", _einsum("i...->...i"), ((2, 3, 4),)),
        Op("einsum.trace", _einsum("ii"), ((3, 3),)),
        Op("einsum.diag", _einsum("ii->i"), ((3, 3),)),
        Op("einsum.stacked", _einsum("bij,bjk->bki", optimize=True), ((2, 2, 3), (2, 3, 4))),
        Op("einsum.sum_one", _einsum("ij,k->i"), ((2, 3), (4,))),
        Op("einsum.three", _einsum("ij,jk,kl->il", optimize="greedy"), ((2, 3), (3, 4), (4, 2))),
        Op("einsum.sublist", lambda a, b: np.einsum(a, [0, 1], b, [1, 26]), ((2, 3), (3, 4))),
        Op(
            "einsum.sublist_out",
            lambda a: np.einsum(a, [Ellipsis, 1, 0], [0, Ellipsis]),
            ((4, 2, 3),),
        ),  # fmt: skip
        Op("einsum.int", _einsum("ij,j->i"), ((3, 4), (4,)), ("int64",), diff=False),
        Op(
            "einsum_path",
            lambda a, b: np.einsum("ij,jk->ik", a, b, optimize=np.einsum_path("ij,jk", a, b)[0]),
            ((2, 3), (3, 4)),
            covers=(np.einsum_path,),
        ),  # fmt: skip
    ]


def _conv_ops() -> list[Op]:
    ops = []
    for f in (np.convolve, np.correlate):
        for mode in ("full", "same", "valid"):
            for n, m in ((6, 3), (3, 6), (4, 4), (5, 2)):
                ops.append(
                    Op(
                        f"{f.__name__}.{mode}.{n}x{m}",
                        lambda a, v, f=f, mode=mode: f(a, v, mode),
                        ((n,), (m,)),
                        covers=(f,),
                    )  # fmt: skip
                )
        ops += [
            Op(f"{f.__name__}.default", f, ((5,), (3,))),
            Op(
                f"{f.__name__}.complex",
                lambda a, v, f=f: f(a, v, "same"),
                ((5,), (2,)),
                ("complex128",),
                diff=False,
            ),  # fmt: skip
            Op(
                f"{f.__name__}.complex_short",
                lambda a, v, f=f: f(a, v, "full"),
                ((2,), (5,)),
                ("complex128",),
                diff=False,
            ),  # fmt: skip
            Op(
                f"{f.__name__}.int",
                lambda a, v, f=f: f(a, v, "full"),
                ((6,), (3,)),
                ("int64",),
                diff=False,
            ),  # fmt: skip
            # long rows, both batched: NumPy's kernel per row
            Op(
                f"{f.__name__}.long", lambda a, v, f=f: f(a, v, "same"), ((160,), (120,)), rtol=1e-9
            ),  # fmt: skip
        ]
    ops.append(Op("convolve.scalar", lambda a, v: np.convolve(a, v), ((), (3,))))
    return ops


# -- numpy.linalg ----------------------------------------------------------------------------


def _linalg_ops() -> list[Op]:
    return [
        Op("linalg.inv", la.inv, ((3, 3),), make=_make(_sq(3)), covers=(la.inv,)),
        Op("linalg.inv.stacked", la.inv, ((2, 3, 3),), make=_make(_sq(3, 2))),
        Op("linalg.det", la.det, ((3, 3),), make=_make(_sq(3)), covers=(la.det,)),
        Op("linalg.slogdet", la.slogdet, ((3, 3),), covers=(la.slogdet,)),
        # the result dtype depends on the values (complex only if an eigenvalue is), so
        # rows use matrices with real eigenvalues, or complex ones (test_linalg: mixed)
        Op("linalg.eig", la.eig, ((4, 4),), make=_make(_real_spectrum(4)), covers=(la.eig,)),
        Op("linalg.eig.complex", la.eig, ((3, 3),), ("complex128",), diff=False),
        Op(
            "linalg.eigvals",
            la.eigvals,
            ((4, 4),),
            make=_make(_real_spectrum(4)),
            covers=(la.eigvals,),
        ),  # fmt: skip
        Op("linalg.eigh", la.eigh, ((4, 4),), make=_make(_sym(4)), covers=(la.eigh,)),
        Op("linalg.eigh.upper", lambda a: la.eigh(a, UPLO="U"), ((3, 3),), make=_make(_sym(3))),
        Op("linalg.eigvalsh", la.eigvalsh, ((4, 4),), make=_make(_sym(4)), covers=(la.eigvalsh,)),
        # full_matrices=True: the extra singular vectors of a non-square matrix are not
        # determined, so derivatives exist for square ones (or full_matrices=False)
        Op("linalg.svd", la.svd, ((4, 4),), covers=(la.svd,)),
        Op("linalg.svd.full", la.svd, ((4, 3),), diff=False),
        Op("linalg.svd.reduced", lambda a: la.svd(a, full_matrices=False), ((2, 4, 3),)),
        Op("linalg.svd.values", lambda a: la.svd(a, compute_uv=False), ((3, 4),)),
        Op("linalg.svdvals", la.svdvals, ((3, 4),), covers=(la.svdvals,)),
        Op("linalg.qr", la.qr, ((4, 3),), covers=(la.qr,)),
        Op("linalg.qr.r", lambda a: la.qr(a, mode="r"), ((3, 4),)),
        # complete Q of a tall matrix: the extra columns are not determined (no derivative)
        Op("linalg.qr.complete", lambda a: la.qr(a, mode="complete"), ((4, 3),), diff=False),
        Op("linalg.qr.wide", la.qr, ((2, 4),)),
        Op("linalg.qr.raw", lambda a: la.qr(a, mode="raw"), ((4, 3),), diff=False),
        Op("linalg.cholesky", la.cholesky, ((4, 4),), make=_make(_sym(4)), covers=(la.cholesky,)),
        Op(
            "linalg.cholesky.upper",
            lambda a: la.cholesky(a, upper=True),
            ((3, 3),),
            make=_make(_sym(3)),
            numpy2="cholesky(upper=)",
        ),  # fmt: skip
        Op("linalg.pinv", la.pinv, ((4, 3),), covers=(la.pinv,)),
        Op(
            "linalg.pinv.rcond",
            lambda a, r: la.pinv(a, rcond=r),
            ((2, 4, 3), ()),
            make=_make(_u(2, 4, 3), lambda rng: rng.uniform(0.01, 0.5, ())),
            needs_batched=(0,),  # NumPy dispatches on `a` alone
        ),  # fmt: skip
        Op(
            "linalg.pinv.hermitian",
            lambda a: la.pinv(a, hermitian=True),
            ((3, 3),),
            make=_make(_sym(3)),
        ),  # fmt: skip
        Op("linalg.matrix_rank", la.matrix_rank, ((4, 3),), diff=False, covers=(la.matrix_rank,)),
        Op(
            "linalg.matrix_rank.deficient",
            la.matrix_rank,
            ((5, 3),),
            diff=False,
            make=lambda rng: [_rank_deficient(rng)],
        ),  # fmt: skip
        Op(
            "linalg.matrix_rank.tol",
            lambda a, t: la.matrix_rank(a, tol=t),
            ((2, 3, 3), (2,)),
            diff=False,
            make=_make(_u(2, 3, 3), lambda rng: rng.uniform(0.0, 2.0, (2,))),
            needs_batched=(0,),  # NumPy dispatches on `A` alone
        ),  # fmt: skip
        Op("linalg.matrix_rank.vector", la.matrix_rank, ((3,),), diff=False),
        Op(
            "linalg.matrix_power",
            lambda a: la.matrix_power(a, 3),
            ((3, 3),),
            covers=(la.matrix_power,),
        ),  # fmt: skip
        Op(
            "linalg.matrix_power.neg",
            lambda a: la.matrix_power(a, -2),
            ((3, 3),),
            make=_make(_sq(3)),
        ),  # fmt: skip
        Op("linalg.matrix_norm", la.matrix_norm, ((3, 4),), covers=(la.matrix_norm,)),
        Op(
            "linalg.matrix_norm.nuc",
            lambda a: la.matrix_norm(a, ord="nuc", keepdims=True),
            ((2, 3, 4),),
        ),  # fmt: skip
        Op("linalg.cond", la.cond, ((3, 3),), make=_make(_sq(3)), covers=(la.cond,)),
        Op("linalg.cond.fro", lambda a: la.cond(a, "fro"), ((3, 3),), make=_make(_sq(3))),
        Op("linalg.trace", lambda a: la.trace(a, offset=1), ((2, 3, 4),), covers=(la.trace,)),
        Op("linalg.diagonal", la.diagonal, ((3, 4),), covers=(la.diagonal,)),
        Op(
            "linalg.matrix_transpose",
            la.matrix_transpose,
            ((2, 3, 4),),
            covers=(la.matrix_transpose,),
        ),  # fmt: skip
        Op("linalg.cross", la.cross, ((2, 3), (3,)), covers=(la.cross,)),
        Op("linalg.cross.axis0", lambda a, b: la.cross(a, b, axis=0), ((3, 2), (3, 2))),
        Op("linalg.vecdot", la.vecdot, ((2, 3), (3,)), covers=(la.vecdot,)),
        Op("linalg.vecdot.axis0", lambda a, b: la.vecdot(a, b, axis=0), ((3, 2), (3, 1))),
        Op(
            "linalg.vecdot.complex", la.vecdot, ((2, 3), (2, 3)), ("complex128",), diff=False
        ),  # fmt: skip
        *_solve_ops(),
        *_norm_ops(),
    ]


def _solve_ops() -> list[Op]:
    return [
        Op(
            "linalg.solve.vector",
            la.solve,
            ((3, 3), (3,)),
            make=_make(_sq(3), _u(3)),
            covers=(la.solve,),
        ),  # fmt: skip
        Op("linalg.solve.matrix", la.solve, ((3, 3), (3, 2)), make=_make(_sq(3), _u(3, 2))),
        Op(
            "linalg.solve.stacked",
            la.solve,
            ((2, 3, 3), (3,)),
            make=_make(_sq(3, 2), _u(3)),
            numpy2="solve with a 1-d b for a stack of matrices",
        ),
        Op(
            "linalg.solve.stacked_b",
            la.solve,
            ((3, 3), (2, 3, 2)),
            make=_make(_sq(3), _u(2, 3, 2)),
        ),  # fmt: skip
        Op(
            "linalg.lstsq",
            lambda a, b: la.lstsq(a, b),
            ((5, 3), (5,)),
            make=_make(_tall(5, 3), _u(5)),
            rtol=1e-9,
            atol=1e-11,
            covers=(la.lstsq,),
            diff=False,  # the integer rank: see lstsq.grad
        ),  # fmt: skip
        Op(
            "linalg.lstsq.matrix",
            lambda a, b: la.lstsq(a, b, rcond=1e-10),
            ((5, 3), (5, 2)),
            make=_make(_tall(5, 3), _u(5, 2)),
            rtol=1e-9,
            atol=1e-11,
            diff=False,
        ),
        Op(
            "linalg.lstsq.grad",
            lambda a, b: _no_rank(la.lstsq(a, b)),
            ((5, 3), (5, 2)),
            make=_make(_tall(5, 3), _u(5, 2)),
            rtol=1e-9,
            atol=1e-11,
        ),  # fmt: skip
        Op(
            "linalg.lstsq.wide",
            lambda a, b: _no_rank(la.lstsq(a, b)),
            ((2, 4), (2,)),
            rtol=1e-9,
            atol=1e-11,
        ),  # fmt: skip
        Op(
            "linalg.tensorinv",
            lambda a: la.tensorinv(a, ind=1),
            ((6, 2, 3),),
            make=lambda rng: [(rng.uniform(-1, 1, (6, 6)) + 6 * np.eye(6)).reshape(6, 2, 3)],
            covers=(la.tensorinv,),
        ),  # fmt: skip
        Op(
            "linalg.tensorsolve",
            la.tensorsolve,
            ((2, 3, 6), (2, 3)),
            make=lambda rng: [
                (rng.uniform(-1, 1, (6, 6)) + 6 * np.eye(6)).reshape(2, 3, 6),
                rng.uniform(-1, 1, (2, 3)),
            ],
            covers=(la.tensorsolve,),
        ),  # fmt: skip
        Op(
            "linalg.tensorsolve.axes",
            lambda a, b: la.tensorsolve(a, b, axes=(0,)),
            ((6, 2, 3), (2, 3)),
            make=lambda rng: [
                np.moveaxis((rng.uniform(-1, 1, (6, 6)) + 6 * np.eye(6)).reshape(2, 3, 6), 2, 0),
                rng.uniform(-1, 1, (2, 3)),
            ],
        ),  # fmt: skip
        Op(
            "linalg.multi_dot",
            lambda a, b, c: la.multi_dot([a, b, c]),
            ((4,), (4, 3), (3, 5)),
            covers=(la.multi_dot,),
        ),  # fmt: skip
        Op(
            "linalg.multi_dot.four",
            lambda a, b, c, d: la.multi_dot([a, b, c, d]),
            ((2, 4), (4, 3), (3, 5), (5,)),
        ),  # fmt: skip
        Op("linalg.multi_dot.two", lambda a, b: la.multi_dot([a, b]), ((2, 4), (4,))),
    ]


def _norm_ops() -> list[Op]:
    return [
        Op("linalg.norm", la.norm, ((3, 4),), covers=(la.norm,)),
        Op("linalg.norm.keepdims", lambda x: la.norm(x, keepdims=True), ((2, 3, 4),)),
        Op("linalg.norm.int", la.norm, ((3,),), ("int64",), diff=False),
        Op("linalg.norm.complex", la.norm, ((3,),), ("complex128",), diff=False),
        Op("linalg.norm.ord1_matrix", lambda x: la.norm(x, 1), ((3, 4),), diff=False),
        Op("linalg.norm.ord3_vector", lambda x: la.norm(x, 3), ((4,),)),
        Op("linalg.norm.axis", lambda x: la.norm(x, axis=-1), ((3, 4),)),
        Op("linalg.norm.axes_nuc", lambda x: la.norm(x, "nuc", axis=(2, 0)), ((3, 2, 4),)),
        Op("linalg.vector_norm", la.vector_norm, ((3, 4),), covers=(la.vector_norm,)),
        Op(
            "linalg.vector_norm.keepdims",
            lambda x: la.vector_norm(x, keepdims=True, ord=1),
            ((2, 3),),
        ),  # fmt: skip
        Op("linalg.vector_norm.axes", lambda x: la.vector_norm(x, axis=(0, 2)), ((2, 3, 4),)),
        Op(
            "linalg.vector_norm.axis",
            lambda x: la.vector_norm(x, axis=1, ord=np.inf),
            ((2, 3),),
            diff=False,
        ),  # fmt: skip
    ]


# -- numpy.fft ---------------------------------------------------------------------------


def _fft_ops() -> list[Op]:
    ops = []
    for f in (fft.fft, fft.ifft, fft.rfft, fft.hfft, fft.ihfft):
        ops += [
            Op(f"fft.{f.__name__}", f, ((3, 8),), covers=(f,)),
            Op(
                f"fft.{f.__name__}.n_axis",
                lambda x, f=f: f(x, n=6, axis=0, norm="ortho"),
                ((5, 3),),
            ),  # fmt: skip
        ]
    ops.append(Op("fft.irfft", fft.irfft, ((3, 5),), ("complex128",), covers=(fft.irfft,)))
    for f in (fft.fftn, fft.ifftn, fft.fft2, fft.ifft2, fft.rfftn, fft.rfft2):
        ops += [
            Op(f"fft.{f.__name__}", f, ((2, 4, 6),), covers=(f,)),
            Op(
                f"fft.{f.__name__}.s_axes", lambda x, f=f: f(x, s=(3, 4), axes=(2, 0)), ((2, 4, 6),)
            ),  # fmt: skip
        ]
    ops += [
        Op("fft.irfftn", fft.irfftn, ((2, 4, 4),), ("complex128",), covers=(fft.irfftn,)),
        Op(
            "fft.irfftn.s",
            lambda x: fft.irfftn(x, s=(4, 6), axes=(0, 2)),
            ((2, 4, 4),),
            ("complex128",),
        ),  # fmt: skip
        Op("fft.irfft2", fft.irfft2, ((2, 4, 4),), ("complex128",), covers=(fft.irfft2,)),
        Op("fft.irfft2.s", lambda x: fft.irfft2(x, s=(4, 6)), ((2, 4, 4),), ("complex128",)),
    ]
    ops += [
        Op("fft.fftn.axes_none_s", lambda x: fft.fftn(x, axes=None), ((3, 4),)),
        Op("fft.fft2.axes_none", lambda x: fft.fft2(x, axes=None), ((2, 3, 4),)),
        Op("fft.fftshift", fft.fftshift, ((3, 4),), covers=(fft.fftshift,)),
        Op("fft.fftshift.axis", lambda x: fft.fftshift(x, axes=-1), ((3, 4),)),
        Op(
            "fft.ifftshift",
            lambda x: fft.ifftshift(x, axes=(0,)),
            ((3, 5),),
            covers=(fft.ifftshift,),
        ),  # fmt: skip
        Op("fft.fftfreq", lambda d: fft.fftfreq(6, d), ((),), domain=(0.5, 2.0)),
        Op("fft.rfftfreq", lambda d: fft.rfftfreq(7, d=d), ((),), domain=(0.5, 2.0)),
    ]
    return ops


OPS: list[Op] = [
    *_contraction_ops(),
    *_einsum_ops(),
    *_conv_ops(),
    *_linalg_ops(),
    *_fft_ops(),
]
