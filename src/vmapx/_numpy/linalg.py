"""numpy.linalg: NumPy stacks almost every function over leading axes already.

For those the batch axis is one more stack axis and the rule calls the function once
on the batched value (the same LAPACK routine on the same matrices as the loop, so the
same answers, eigenvector signs included). Arguments that broadcast against the stack
(`rcond=`, `tol=`, `rtol=`) are aligned with it. The rest get their own rules:

- `solve` with an unbatched `a` factorizes it once and solves every example's right-hand
  side as one more column; a vector `b` (NumPy 2: `b.ndim == 1`) stays a vector.
- `solve` of many triangular matrices of up to 12 rows (Cholesky and QR factors) is
  substitution over the batch (`small_matrices`: several times faster than a LAPACK
  call per matrix; the loop's values up to rounding, LAPACK's errors).
- `lstsq` is not stacked in NumPy: with an unbatched `a` it is one call with every
  example's right-hand sides as columns; with a batched `a` it is the SVD minimum-norm
  solution with LAPACK's `rcond` cut-off (what `gelsd` computes).
- `norm`/`vector_norm` with `axis=None` flatten one example, not the batch.
- `multi_dot` picks its multiplication order with the batch size in the costs.

Derivatives (see `vmapx._autodiff`): decompositions get JVP rules (the formulas JAX
uses); their VJPs come from transposing those, which are made of matmul, solve and
elementwise operations. `solve` has both rules (transposing its JVP would need its own
VJP). Everything else is a composition of differentiable NumPy calls. Complex values
follow JAX's convention; the phase of complex eigenvectors of `eigh` and singular
vectors of `svd` is LAPACK's arbitrary choice, which their derivatives hold fixed (as
JAX's do): functions that do not depend on that phase (|v|^2, U S V^H, projections) get
exact derivatives. `eig` keeps LAPACK's rule (unit columns, largest component real) and
is exact.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any, cast

import numpy as np

from .. import _pytree as optree  # optree in vmapx.config.pytree_namespace
from .._autodiff import NoRule, defcomposite, defjvp, defvjp, defzero
from .._batching import (
    BatchTrace,
    align_rank,
    aligned_operands,
    bcast_batch,
    defbatch,
    error_marks,
    example_ndim,
    is_batched,
    unwrap,
    user_stacklevel,
    wrap_tree,
)
from .._compat import NUMPY2, astype, present, vecdot
from .._core import Tracer
from .._payload import moved
from .._registry import builder, get_arg, set_arg
from .._rule_helpers import flat_shape, in_example_order, per_example, shift_axis, shift_one
from .contractions import dot_rule, matmul_vals, operand_parts
from .reductions import has_short_rows, others_product, sum_of_short_rows
from .small_matrices import triangular_solve
from .ufuncs import gufunc_example_error

LinAlgError = np.linalg.LinAlgError


def _numpy_error(
    trace: BatchTrace, func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[Any, Any]
) -> None:
    """Let NumPy raise its own error for invalid per-example shapes: call `func` on
    stand-ins (zeros) of one example."""

    def stand_in(x: Any) -> Any:
        return np.zeros(x.shape, dtype=x.dtype) if is_batched(trace, x) else x

    leaf = lambda x: isinstance(x, Tracer)  # noqa: E731
    func(*optree.tree_map(stand_in, args, is_leaf=leaf, none_is_leaf=True),
         **optree.tree_map(stand_in, kwargs, is_leaf=leaf, none_is_leaf=True))  # fmt: skip


def _check_rank(
    trace: BatchTrace,
    func: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[Any, Any],
    core: int,
) -> None:
    """Examples with fewer than `core` axes raise NumPy's error (a batched value would
    otherwise pass for a stack of smaller ones)."""
    if example_ndim(trace, args[0]) < core:
        _numpy_error(trace, func, args, kwargs)


def _stacked(core: int, params: tuple[tuple[int, str], ...] = ()) -> Callable[..., Any]:
    """Factory of rules for `func(a, ...)` stacked over the axes of `a` before its last
    `core` ones; `params` name the (position, keyword) arguments that broadcast against
    the stack (`rcond=`, `tol=`, ...), batched or not."""

    def factory(func: Callable[..., Any]) -> Callable[..., Any]:
        def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
            a = args[0]
            _check_rank(trace, func, args, kwargs, core)
            va, ba = unwrap(trace, a)
            given = [(i, k, get_arg(args, kwargs, i, k)) for i, k in params]
            given = [(i, k, p) for i, k, p in given if p is not None]
            if given:
                stack = max(example_ndim(trace, a) - core,
                            *(example_ndim(trace, p) for _, _, p in given))  # fmt: skip
                va = align_rank(bcast_batch(trace, a), example_ndim(trace, a), stack + core)
                for i, k, p in given:
                    vp, bp = unwrap(trace, p)
                    if bp:
                        vp = align_rank(vp, example_ndim(trace, p), stack)
                    args, kwargs = set_arg(args, kwargs, i, k, vp)
            return wrap_tree(trace, func(va, *args[1:], **kwargs))

        return rule

    return factory


# each op's batch rule below (`_stacked(2)`) sits beside its derivatives
defbatch([np.linalg.inv, np.linalg.det], _stacked(2))


def _t(x: Any) -> Any:
    return np.swapaxes(x, -1, -2)


def _h(x: Any) -> Any:
    """Conjugate transpose of the last two axes."""
    x = _t(x)
    return np.conjugate(x) if np.iscomplexobj(x) else x


defjvp(np.linalg.inv, lambda t, ans, a: -np.matmul(ans, np.matmul(t, ans)))


def _trace_of_product(p: Any, t: Any) -> Any:
    """trace(p @ t) over the last two axes, without forming the product."""
    return np.sum(_t(p) * t, axis=(-2, -1))


def _det_jvp(t: Any, ans: Any, a: Any) -> Any:
    """d det(a) = tr(adj(a) dA), adj(a) = det(a) inv(a) where `a` is invertible."""
    marks = error_marks()
    try:
        return ans * _trace_of_product(np.linalg.inv(a), t)
    except LinAlgError:  # a singular matrix of the stack: its own adjugate, not an inverse
        for trace, raised in marks:  # (handled here: not an error that `f` caught)
            trace.raised = raised
        singular = (ans == 0)[..., None, None]  # (det's LU is inv's: it has the zero pivot)
        eye = np.eye(a.shape[-1], dtype=a.dtype)
        p = np.where(singular, _adjugate(a), np.linalg.inv(np.where(singular, eye, a)))
        return np.where(singular[..., 0, 0], 1, ans) * _trace_of_product(p, t)


def _adjugate(a: Any) -> Any:
    """adj(a) of square matrices, singular ones too: with a = U S V^H (unitary U, V^H),
    adj(a) = adj(V^H) adj(S) adj(U) = det(V^H) V diag(prod_{j != i} s_j) det(U) U^H."""
    u, s, vh = np.linalg.svd(a)
    scale = (np.linalg.det(u) * np.linalg.det(vh))[..., None, None]
    return scale * np.matmul(_h(vh) * others_product(s, (s.ndim - 1,))[..., None, :], _h(u))


defjvp(np.linalg.det, _det_jvp)


def _slogdet_jvp(t: Any, ans: Any, a: Any) -> Any:
    tr = _trace_of_product(np.linalg.inv(a), t)
    if not np.iscomplexobj(tr):
        return np.zeros_like(ans[0]), tr
    return ans[0] * (tr - np.real(tr)), np.real(tr)


def _transposed(jvp: Callable[..., Any]) -> Callable[..., Any]:
    """The VJP maker of a function of one matrix from its (linear) JVP rule `jvp(t, ans,
    a, ...)`, by reverse mode through it; absent cotangents of several results are zeros."""

    def maker(ans: Any, a: Any, *args: Any, **kwargs: Any) -> Callable[..., Any]:
        from .._ad_api import vjp

        multi = isinstance(ans, tuple)

        def push(t: Any) -> Any:
            out = jvp(t, ans, a, *args, **kwargs)
            if not multi:
                return out
            return tuple(
                np.zeros_like(x) if u is None else u for x, u in zip(ans, out, strict=True)
            )

        def pull(g: Any) -> Any:
            if multi:
                g = tuple(np.zeros_like(x) if c is None else c for x, c in zip(ans, g, strict=True))
            return vjp(push, np.zeros_like(a))[1](g)[0]

        return pull

    return maker


@builder
def _defjvp_multi(func: Callable[..., Any], jvp: Callable[..., Any]) -> None:
    """JVP and transposed VJP of a function of one matrix with several results."""
    defjvp(func, jvp)
    defvjp(func, _transposed(jvp))


defbatch(np.linalg.slogdet, _stacked(2))
_defjvp_multi(np.linalg.slogdet, _slogdet_jvp)


def _lower(n: int, dtype: Any, k: int = 0) -> np.ndarray:
    return np.tri(n, k=k, dtype=dtype)


def _from_triangle(t: Any, upper: bool) -> Any:
    """The Hermitian matrix that a function reading one triangle of `t` (and the real
    part of its diagonal, as LAPACK) sees."""
    n = t.shape[-1]
    if upper:
        t = _h(t)
    strict = t * _lower(n, t.real.dtype, -1)
    diag = (np.real(t) if np.iscomplexobj(t) else t) * np.eye(n, dtype=t.real.dtype)
    return strict + diag + _h(strict)


def _cholesky_jvp(t: Any, ans: Any, a: Any, upper: bool = False) -> Any:
    """dL = L phi(L^-1 dA L^-H), phi: the lower triangle with half the diagonal."""
    low = _h(ans) if upper else ans
    n = low.shape[-1]
    da = _from_triangle(t, upper)
    x = _h(np.linalg.solve(low, _h(np.linalg.solve(low, da))))  # L^-1 dA L^-H
    phi = x * (_lower(n, x.real.dtype, -1) + 0.5 * np.eye(n, dtype=x.real.dtype))
    dl = np.matmul(low, phi)
    return _h(dl) if upper else dl


defbatch(np.linalg.cholesky, _stacked(2))
defjvp(np.linalg.cholesky, _cholesky_jvp)


def _eigh_jvp(t: Any, ans: Any, a: Any, UPLO: str = "L") -> Any:  # noqa: N803 (NumPy's name)
    w, v = ans
    da = _from_triangle(t, UPLO.upper() == "U")
    vdv = np.matmul(_h(v), np.matmul(da, v))
    dw = np.real(_diagonal_impl(vdv))
    gaps = w[..., None, :] - w[..., :, None]
    n = w.shape[-1]
    eye = np.eye(n, dtype=w.dtype)
    f = (1 - eye) / (gaps + eye)  # 1 / (w_j - w_i) off the diagonal
    dv = np.matmul(v, f * vdv)
    return dw, dv


defbatch(np.linalg.eigh, _stacked(2))
_defjvp_multi(np.linalg.eigh, _eigh_jvp)


def _eig_jvp(t: Any, ans: Any, a: Any) -> Any:
    """dw = diag(V^-1 dA V), dV = V (F * V^-1 dA V) kept at LAPACK's normalization: unit
    columns whose largest component is real."""
    w, v = ans
    vdv = np.linalg.solve(v, np.matmul(t, v))
    dw = _diagonal_impl(vdv)
    n = w.shape[-1]
    eye = np.eye(n, dtype=w.dtype)
    dv = np.matmul(v, (1 - eye) / (w[..., None, :] - w[..., :, None] + eye) * vdv)
    dv = dv - v * np.real(np.sum(np.conjugate(v) * dv, axis=-2, keepdims=True))
    if np.iscomplexobj(v):  # turn each column so that its largest component stays real
        big = np.arange(n)[:, None] == np.argmax(np.abs(v), axis=-2)[..., None, :]
        vp = np.sum(v * big, axis=-2, keepdims=True)
        dvp = np.sum(dv * big, axis=-2, keepdims=True)
        dv = dv - 1j * (np.imag(dvp) / np.real(vp)) * v
    return dw, dv


def _eig_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    """`eig`/`eigvals` stacked: NumPy gives an example of a real matrix (a stack of them)
    real eigenvalues where all of them are real, else complex ones. Batched, the types
    must agree among the examples (a later step computes otherwise on them), else the
    loop runs."""
    stacked = _stacked(2)(func)

    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        out = stacked(trace, args, kwargs)
        w = (out[0] if func is np.linalg.eig else out).val
        if w.dtype.kind == "c" and not np.iscomplexobj(unwrap(trace, args[0])[0]):
            if not bool(np.all(np.any(np.reshape(w.imag != 0, (w.shape[0], -1)), axis=1))):
                raise trace.concretization(
                    f"`np.linalg.{func.__name__}` gives complex eigenvalues for some examples "
                    "and real ones for others (their type depends on the values)",
                    "convert the matrices to complex first (`a.astype(complex)`) if complex "
                    "eigenvalues are meant for every example",
                )
        return out

    return rule


defbatch([np.linalg.eig, np.linalg.eigvals], _eig_rule)
_defjvp_multi(np.linalg.eig, _eig_jvp)
defcomposite(np.linalg.eigvals, lambda a: np.linalg.eig(a)[0])


def _eigvalsh_jvp(t: Any, ans: Any, a: Any, UPLO: str = "L") -> Any:  # noqa: N803
    """dw = diag(V^H dA V): the eigenvectors' derivative (undefined where eigenvalues
    repeat) is not needed."""
    v = np.linalg.eigh(a, UPLO)[1]  # type: ignore[call-overload]  # (NumPy checks UPLO)
    da = _from_triangle(t, UPLO.upper() == "U")
    return np.real(_diagonal_impl(np.matmul(_h(v), np.matmul(da, v))))


defbatch(np.linalg.eigvalsh, _stacked(2))
defjvp(np.linalg.eigvalsh, _eigvalsh_jvp)


def _svd_jvp(t: Any, ans: Any, a: Any, full_matrices: bool = True, compute_uv: bool = True,
             hermitian: bool = False) -> Any:  # fmt: skip
    """JAX's `svd_jvp_rule` (reduced factors: a square matrix, or full_matrices=False)."""
    if _svd_undetermined(a, full_matrices, compute_uv):
        raise NoRule(0, "jvp")  # the extra singular vectors are not determined
    m, n = np.shape(a)[-2:]
    if hermitian:  # NumPy reads one triangle (through eigh)
        t = _from_triangle(t, False)
    if compute_uv:
        u, s, vh = ans
    else:
        u, s, vh = np.linalg.svd(a, full_matrices=False, hermitian=hermitian)
    v = _h(vh)
    ds_mat = np.matmul(_h(u), np.matmul(t, v))
    ds = np.real(_diagonal_impl(ds_mat))
    if not compute_uv:
        return ds
    dtype = ds_mat.dtype
    s_row = s[..., None, :]
    diffs = (s_row + _t(s_row)) * (s_row - _t(s_row))
    k = s.shape[-1]
    eye = np.eye(k, dtype=s.dtype)
    f = astype(1 / (diffs + eye) - eye, dtype)
    dss, sds = astype(s_row, dtype) * ds_mat, astype(_t(s_row), dtype) * ds_mat
    zero = astype(s == 0, s.dtype)
    s_inv = 1 / (s + zero) - zero
    dudv_diag = 0.5 * (ds_mat - _h(ds_mat)) * astype(s_inv[..., None, :] * eye, dtype)
    du = np.matmul(u, f * (dss + _h(dss)) + dudv_diag)
    dv = np.matmul(v, f * (sds + _h(sds)))
    if m > n:
        dav = np.matmul(t, v)
        du = du + (dav - np.matmul(u, np.matmul(_h(u), dav))) / astype(s_row, dtype)
    if n > m:
        dahu = np.matmul(_h(t), u)
        dv = dv + (dahu - np.matmul(v, np.matmul(vh, dahu))) / astype(s_row, dtype)
    return du, ds, _h(dv)


def _svd_undetermined(a: Any, full_matrices: bool, compute_uv: bool) -> bool:
    """Whether `svd` gives singular vectors that its derivative does not determine (the
    extra ones of `full_matrices=True` for a matrix that is not square)."""
    m, n = np.shape(a)[-2:]
    return bool(compute_uv and full_matrices and m != n)


def _svd_vjp(ans: Any, a: Any, full_matrices: bool = True, compute_uv: bool = True,
             hermitian: bool = False) -> Callable[..., Any]:  # fmt: skip
    """The transposed JVP, refused when the VJP is made (the pullback runs later, where
    the rule's refusal would not be turned into a DifferentiationError)."""
    if _svd_undetermined(a, full_matrices, compute_uv):
        raise NoRule(0, "vjp")
    return cast(
        "Callable[..., Any]", _transposed(_svd_jvp)(ans, a, full_matrices, compute_uv, hermitian)
    )


defbatch([np.linalg.svd, *present(np.linalg, "svdvals")], _stacked(2))
defjvp(np.linalg.svd, _svd_jvp)
defvjp(np.linalg.svd, _svd_vjp)
defcomposite(present(np.linalg, "svdvals"), lambda x: np.linalg.svd(x, compute_uv=False))


def _qr_jvp(t: Any, ans: Any, a: Any, mode: str = "reduced") -> Any:
    """JAX's `qr_jvp_rule` for reduced factors; a wide matrix `[X | Y]` is `Q [U | Q^H Y]`
    with `X = Q U` square."""
    if _qr_undetermined(a, mode):
        raise NoRule(0, "jvp")
    m, n = np.shape(a)[-2:]
    q, r = ans
    if m < n:
        y, ty = a[..., m:], t[..., m:]
        dq, du = _qr_jvp(t[..., :m], (q, r[..., :m]), a[..., :m])
        dv = np.matmul(_h(dq), y) + np.matmul(_h(q), ty)
        return dq, np.concatenate([du, dv], axis=-1)
    dx_rinv = _t(np.linalg.solve(_t(r), _t(t)))  # dA @ inv(R)
    qt_dx_rinv = np.matmul(_h(q), dx_rinv)
    low = qt_dx_rinv * _lower(n, qt_dx_rinv.real.dtype, -1)
    do = low - _h(low)
    if np.iscomplexobj(qt_dx_rinv):
        do = do + np.eye(n) * (qt_dx_rinv - np.real(qt_dx_rinv))
    dq = np.matmul(q, do - qt_dx_rinv) + dx_rinv
    dr = np.matmul(qt_dx_rinv - do, r)
    return dq, dr


def _qr_undetermined(a: Any, mode: str) -> bool:
    """Whether `qr` gives factors that its derivative does not determine: the extra
    columns of Q of `mode="complete"` for a tall matrix, or `mode="raw"`'s reflectors."""
    m, n = np.shape(a)[-2:]
    return mode not in ("reduced", "complete") or (mode == "complete" and m > n)


def _qr_vjp(ans: Any, a: Any, mode: str = "reduced") -> Callable[..., Any]:
    if _qr_undetermined(a, mode):
        raise NoRule(0, "vjp")  # (here, where the engine names it, not in the pullback)
    return cast("Callable[..., Any]", _transposed(_qr_jvp)(ans, a, mode))


def _qr_impl(a: Any, mode: str = "reduced") -> Any:
    return np.linalg.qr(a)[1] if mode == "r" else NotImplemented


defbatch(np.linalg.qr, _stacked(2))
defjvp(np.linalg.qr, _qr_jvp)
defvjp(np.linalg.qr, _qr_vjp)
defcomposite(np.linalg.qr, _qr_impl)


def _plain_ord(ord: Any) -> Any:  # noqa: A002
    """A norm's order as the plain number it is for the example: an order that differs
    between examples picks another formula for each, which Python's `float` of the
    traced value leaves to the loop (a derivative's rule sees the batch's tracer)."""
    return float(ord) if isinstance(ord, Tracer) else ord


def _vector_norm(x: Any, ord: Any, axis: Any) -> Any:  # noqa: A002
    ord = _plain_ord(ord)  # noqa: A001
    absx = np.abs(x)
    if ord == np.inf:  # (0 for an empty vector, as NumPy 2's; NumPy 1.26 raises)
        return np.max(absx, axis=axis, **({"initial": 0} if NUMPY2 else {}))  # type: ignore[call-overload]  # (NumPy 2 only)
    if ord == -np.inf:
        return np.min(absx, axis=axis)
    if ord == 0:
        return np.sum(astype(absx != 0, absx.dtype), axis=axis)
    if ord == 1:
        return np.sum(absx, axis=axis)
    if ord == 2:
        re = np.real(x) if np.iscomplexobj(x) else x
        sq = re * re if not np.iscomplexobj(x) else re * re + np.imag(x) * np.imag(x)
        return np.sqrt(np.sum(sq, axis=axis))
    return np.sum(absx**ord, axis=axis) ** (1.0 / ord)


def _matrix_norm(x: Any, ord: Any, axis: tuple[Any, ...]) -> Any:  # noqa: A002
    ord = _plain_ord(ord)  # noqa: A001
    x = np.moveaxis(x, axis, (-2, -1))
    if ord in ("fro", "f"):
        return _vector_norm(x, 2, (-2, -1))
    if ord in ("nuc", 2, -2):
        s = np.linalg.svd(x, compute_uv=False)
        return np.sum(s, axis=-1) if ord == "nuc" else (np.max if ord == 2 else np.min)(s, -1)
    if ord in (1, -1):
        sums = np.sum(np.abs(x), axis=-2)
    elif ord in (np.inf, -np.inf):
        sums = np.sum(np.abs(x), axis=-1)
    else:
        return NotImplemented
    if ord in (1, np.inf):  # (0 for an empty matrix, as NumPy 2's; NumPy 1.26 raises)
        return np.max(sums, axis=-1, **({"initial": 0} if NUMPY2 else {}))  # type: ignore[call-overload]  # (NumPy 2 only)
    return np.min(sums, axis=-1)


def _matrix_norm_impl(x: Any, keepdims: bool = False, ord: Any = "fro") -> Any:  # noqa: A002
    out = _matrix_norm(x, ord, (-2, -1))
    return out[..., None, None] if keepdims else out


def _cond_impl(x: Any, p: Any = None) -> Any:
    if p is None or p in (2, -2):
        s = np.linalg.svd(x, compute_uv=False)
        return s[..., 0] / s[..., -1] if p != -2 else s[..., -1] / s[..., 0]
    return _matrix_norm(x, p, (-2, -1)) * _matrix_norm(np.linalg.inv(x), p, (-2, -1))


def _matrix_power_impl(a: Any, n: int) -> Any:
    n = int(n)
    if n == 0:
        return np.zeros_like(a) + np.eye(np.shape(a)[-1], dtype=a.dtype)
    if n < 0:
        a, n = np.linalg.inv(a), -n
    out = None
    while n:  # binary powering, as NumPy
        if n & 1:
            out = a if out is None else np.matmul(out, a)
        n >>= 1
        if n:
            a = np.matmul(a, a)
    return out


def _diagonal_impl(x: Any, offset: int = 0) -> Any:
    rows, cols = np.shape(x)[-2:]
    start_r, start_c = max(-offset, 0), max(offset, 0)
    k = max(min(rows - start_r, cols - start_c), 0)
    idx = np.arange(k)
    return x[..., idx + start_r, idx + start_c]


defbatch(
    [np.linalg.cond, np.linalg.matrix_power, *present(np.linalg, "matrix_norm", "trace")],
    _stacked(2),
)
defcomposite(present(np.linalg, "matrix_norm"), _matrix_norm_impl)
defcomposite(np.linalg.cond, _cond_impl)
defcomposite(np.linalg.matrix_power, _matrix_power_impl)
defcomposite(present(np.linalg, "trace"), lambda x, offset=0, dtype=None: np.sum(
    _diagonal_impl(x, offset), axis=-1, dtype=dtype))  # fmt: skip
defbatch(present(np.linalg, "diagonal", "matrix_transpose"), _stacked(2), may_view=True)


defcomposite(present(np.linalg, "diagonal"), _diagonal_impl)
defcomposite(present(np.linalg, "matrix_transpose"), lambda x: np.swapaxes(x, -1, -2))
defbatch(np.linalg.pinv, _stacked(2, ((1, "rcond"), (3, "rtol"))))


_NOVALUE = np._NoValue  # NumPy's "not given" default of `pinv(rtol=)`


def _pinv_jvp(t: Any, ans: Any, a: Any, rcond: Any = None, hermitian: bool = False, *,
              rtol: Any = _NOVALUE) -> Any:  # fmt: skip
    """Golub and Pereyra's derivative of P = pinv(A) where no singular value is cut off
    (no singular vectors, so repeated singular values are fine):
    -P dA P + P P^H dA^H (I - A P) + (I - P A) dA^H P^H P."""
    if hermitian:  # NumPy reads one triangle (through eigh)
        a, t = _from_triangle(a, False), _from_triangle(t, False)
    p = ans
    m, n = np.shape(a)[-2:]
    ap = np.matmul(a, p)  # the projector onto the kept left singular vectors
    if not bool(np.all(np.real(np.trace(ap, axis1=-2, axis2=-1)) > min(m, n) - 0.5)):
        return _truncated_pinv_jvp(t, a, rcond, hermitian, rtol)
    th = _h(t)
    left = np.eye(m, dtype=p.dtype) - ap
    right = np.eye(n, dtype=p.dtype) - np.matmul(p, a)
    return (
        -np.matmul(p, np.matmul(t, p))
        + np.matmul(np.matmul(p, _h(p)), np.matmul(th, left))
        + np.matmul(right, np.matmul(th, np.matmul(_h(p), p)))
    )


def _truncated_pinv_jvp(t: Any, a: Any, rcond: Any, hermitian: bool, rtol: Any) -> Any:
    """The derivative of V diag(1/s) U^H with the singular values at most
    `rcond * s_max` dropped, through the SVD's."""
    if rcond is None:
        if rtol is _NOVALUE:
            rcond = 1e-15
        elif rtol is None:
            rcond = max(np.shape(a)[-2:]) * np.finfo(a.dtype).eps
        else:
            rcond = rtol
    ans = np.linalg.svd(a, full_matrices=False, hermitian=hermitian)
    du, ds, dvh = _svd_jvp(t, ans, a, full_matrices=False)
    u, s, vh = ans
    keep = s > np.expand_dims(rcond, -1) * np.max(s, axis=-1, keepdims=True)
    safe = np.where(keep, s, 1)
    inv_s, d_inv = np.where(keep, 1 / safe, 0), np.where(keep, -ds / (safe * safe), 0)
    v, dv = _h(vh), _h(dvh)
    return (
        np.matmul(dv, inv_s[..., None] * _h(u))
        + np.matmul(v, d_inv[..., None] * _h(u))
        + np.matmul(v, inv_s[..., None] * _h(du))
    )


defjvp(np.linalg.pinv, _pinv_jvp, None, None, None, argnums=(0, 1, "rcond", "rtol"))


def _matrix_rank_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    stacked = _stacked(2, ((1, "tol"), (3, "rtol")))(func)

    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        a = args[0]
        if example_ndim(trace, a) >= 2 or not is_batched(trace, a):
            return stacked(trace, args, kwargs)
        # NumPy: a vector (or scalar) has rank 1 unless it is all zeros
        va = np.reshape(a.val, flat_shape(a.val))
        return trace.wrap(astype(np.any(va != 0, axis=1), np.asarray(1).dtype))

    return rule


defbatch(np.linalg.matrix_rank, _matrix_rank_rule)


defzero([np.linalg.matrix_rank])


# -- solve / lstsq / tensor versions ---------------------------------------------------------


def _solve_vals(
    va: Any, ba: bool, sa: tuple[Any, ...], vb: Any, bb: bool, sb: tuple[Any, ...]
) -> Any:
    """Per example `np.linalg.solve(a, b)` as a batch-front value."""
    n_batch = (va if ba else vb).shape[0]
    if ba and len(sa) == 2 and len(sb) in (1, 2):  # one matrix per example
        x = triangular_solve(va, vb if bb else np.broadcast_to(vb, (n_batch, *sb)))
        if x is not None:
            return x
    if len(sb) == 1:  # b is one vector per example
        if not ba:  # one factorization; the examples' b are its right-hand sides
            return np.moveaxis(np.linalg.solve(va, np.swapaxes(vb, 0, 1)), -1, 0)
        vb = np.reshape(vb, (*vb.shape, 1))
        vb = align_rank(vb, 2, len(sa)) if bb else _full_rank(vb, va.ndim)
        return np.linalg.solve(va, vb)[..., 0]
    if not ba and len(sa) == 2 and len(sb) == 2:  # one factorization, all columns
        n, k = sb
        cols = np.reshape(np.moveaxis(vb, 0, 1), (n, n_batch * k))
        x = np.reshape(np.linalg.solve(va, cols), (n, n_batch, k))
        return np.moveaxis(x, 1, 0)
    rank = max(len(sa), len(sb))
    if ba:
        va = align_rank(va, len(sa), rank)
    vb = align_rank(vb, len(sb), rank) if bb else _full_rank(vb, va.ndim)
    return np.linalg.solve(va, vb)


def _full_rank(b: Any, ndim: int) -> Any:
    """An unbatched `b` with leading axes up to `a`'s rank: a stack of matrices for every
    NumPy (1.26 takes a `b` of one axis fewer than `a` for vectors)."""
    return np.reshape(b, (1,) * (ndim - np.ndim(b)) + np.shape(b))


def _vector_b(nd_a: int, nd_b: int) -> bool:
    """Whether `solve(a, b)` takes `b` as vectors: NumPy 2 when it is 1-d, NumPy 1.26
    when it has one axis fewer than `a`."""
    return nd_b == 1 if NUMPY2 else nd_b == nd_a - 1


def _solve_rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
    a, b = get_arg(args, kwargs, 0, "a"), get_arg(args, kwargs, 1, "b")
    (va, ba, sa), (vb, bb, sb) = operand_parts(trace, a), operand_parts(trace, b)
    vector = _vector_b(len(sa), len(sb))
    k = 1 if vector else 2  # b's axis that meets a's: its last (vectors) or second to last
    if len(sa) < 2 or len(sb) < k or sa[-1] != sa[-2] or sb[-k] != sa[-1]:
        _numpy_error(trace, np.linalg.solve, args, kwargs)
    if vector and len(sb) > 1:  # NumPy 1.26's stacked vectors: one-column matrices
        return trace.wrap(_solve_vals(va, ba, sa, vb[..., None], bb, (*sb, 1))[..., 0])
    return trace.wrap(_solve_vals(va, ba, sa, vb, bb, sb))


defbatch(np.linalg.solve, lambda f: _solve_rule)


def _solve_vec(a: Any, b: Any, vector: bool) -> Any:
    """`solve(a, b)` where `b` holds vectors (see `_vector_b`)."""
    if vector and np.ndim(b) > 1:
        return np.linalg.solve(a, b[..., None])[..., 0]
    return np.linalg.solve(a, b)


def _solve_ct_a(g: Any, a: Any, b: Any, x: Any) -> Any:
    vector = _vector_b(np.ndim(a), np.ndim(b))
    ct_b = _solve_vec(_t(a), g, vector)
    if vector:
        return -ct_b[..., :, None] * x[..., None, :]
    return -np.matmul(ct_b, _t(x))


def _solve_jvp_a(t: Any, x: Any, a: Any, b: Any) -> Any:
    vector = _vector_b(np.ndim(a), np.ndim(b))
    return -_solve_vec(a, _matvec(t, x, vector), vector)


defjvp(
    np.linalg.solve,
    _solve_jvp_a,
    lambda t, x, a, b: _solve_vec(a, t, _vector_b(np.ndim(a), np.ndim(b))),
)
defvjp(
    np.linalg.solve,
    lambda x, a, b: lambda g: _solve_ct_a(g, a, b, x),
    lambda x, a, b: lambda g: _solve_vec(_t(a), g, _vector_b(np.ndim(a), np.ndim(b))),
)


def _matvec(m: Any, v: Any, vector: bool) -> Any:
    return np.matmul(m, v[..., None])[..., 0] if vector else np.matmul(m, v)


def _inexact(dtype: np.dtype) -> np.dtype:
    return dtype if np.issubdtype(dtype, np.inexact) else np.dtype(np.float64)


_RCOND_WARNING = (
    "`rcond` parameter will change to the default of machine precision times ``max(M, N)`` "
    "where M and N are the input matrix dimensions.\nTo use the future default and silence "
    "this warning we advise to pass `rcond=None`, to keep using the old, explicitly pass "
    "`rcond=-1`."
)


def _lstsq_rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
    a, b = get_arg(args, kwargs, 0, "a"), get_arg(args, kwargs, 1, "b")
    rcond = get_arg(args, kwargs, 2, "rcond", None if NUMPY2 else "warn")
    if isinstance(rcond, str) and rcond == "warn":  # NumPy 1.26's default: the old cutoff
        warnings.warn(_RCOND_WARNING, FutureWarning, stacklevel=user_stacklevel())
        rcond = -1
    (va, ba, sa), (vb, bb, sb) = operand_parts(trace, a), operand_parts(trace, b)
    if len(sa) != 2 or len(sb) not in (1, 2) or sa[0] != sb[0]:
        _numpy_error(trace, np.linalg.lstsq, args, kwargs)
    vector = len(sb) == 1
    if vector:
        vb = np.reshape(vb, (*np.shape(vb), 1))
    if not ba and not is_batched(trace, rcond):
        return _lstsq_columns(trace, va, vb, rcond, vector)
    return _lstsq_svd(trace, va, ba, vb, bb, rcond, vector)


def _lstsq_columns(
    trace: BatchTrace, va: Any, vb: Any, rcond: Any, vector: bool
) -> tuple[Any, ...]:
    """Unbatched `a`: one LAPACK call with every example's right-hand sides as columns;
    the rank and singular values belong to `a` alone (unbatched results)."""
    n_batch, m, k = vb.shape
    n = va.shape[1]
    cols = np.reshape(np.moveaxis(vb, 0, 1), (m, n_batch * k))
    x, res, rank, s = np.linalg.lstsq(va, cols, rcond=rcond)
    x = np.moveaxis(np.reshape(x, (n, n_batch, k)), 1, 0)
    full = m > n and bool(rank == n)  # NumPy gives residuals only then
    res = np.reshape(res, (n_batch, k)) if full else np.zeros_like(s, shape=(n_batch, 0))
    return trace.wrap(x[..., 0] if vector else x), trace.wrap(res), rank, s


def gelsd_kept(s: Any, rcond: Any) -> Any:
    """Which singular values `s` (..., k), largest first, LAPACK's `gelsd` keeps: those
    above `rcond` times the largest, where `0 < rcond < 1`; else machine precision
    (`dlamch("E")`, 2**-53: NumPy computes in double precision) stands for `rcond`. A
    NaN `rcond` keeps them all (LAPACK drops where `s <= tol`)."""
    eps = np.finfo(np.float64).eps / 2
    if not isinstance(rcond, Tracer) and isinstance(rcond, float | int | np.number):  # one for all
        rcond = eps if rcond <= 0 or rcond >= 1 else float(rcond)
    else:  # (one per example, in the library of `s`)
        rcond = np.where((np.less_equal(rcond, 0)) | (np.greater_equal(rcond, 1)), eps, rcond)
    return ~(s <= rcond * s[..., :1])


def _lstsq_svd(trace: BatchTrace, va: Any, ba: bool, vb: Any, bb: bool, rcond: Any,
               vector: bool) -> tuple[Any, ...]:  # fmt: skip
    """Batched `a`: the minimum-norm solution from the SVD, singular values at most
    `rcond * s_max` treated as zero (LAPACK `gelsd`), in double precision like NumPy."""
    if not ba:
        va = bcast_batch(trace, va)
    m, n = va.shape[1:]
    result_t = np.result_type(_inexact(va.dtype), _inexact(vb.dtype))
    real_t = np.finfo(result_t).dtype
    compute_t = np.complex128 if result_t.kind == "c" else np.float64
    a64, b64 = astype(va, compute_t), astype(vb, compute_t)
    if not bb:
        b64 = b64[None]
    u, s, vh = np.linalg.svd(a64, full_matrices=False)
    if rcond is None:
        rcond = np.finfo(np.float64).eps * max(m, n)
    rcond, rb = unwrap(trace, rcond)
    rcond = moved(np.asarray(rcond), s)
    if rb:
        rcond = np.reshape(rcond, (-1, 1))
    keep = gelsd_kept(s, rcond)
    inv_s = np.where(keep, 1 / np.where(keep, s, 1), 0)
    x = np.swapaxes(vh, -1, -2).conj() @ (inv_s[..., None] * (np.swapaxes(u, -1, -2).conj() @ b64))
    rank = astype(np.sum(keep, axis=-1), np.int32)
    if m > n and bool(np.all(rank == n)):
        res = np.sum(np.abs(b64 - a64 @ x) ** 2, axis=-2)
    elif m > n and bool(np.any(rank == n)):
        raise trace.concretization(
            "`np.linalg.lstsq` residuals have different shapes for different examples "
            "(some matrices have full rank, some do not)",
            "use `np.linalg.pinv(a) @ b`, whose shape does not depend on the rank",
        )
    else:
        res = np.zeros_like(s, shape=(s.shape[0], 0))
    x = astype(x, result_t)
    return (trace.wrap(x[..., 0] if vector else x), trace.wrap(astype(res, real_t)),
            trace.wrap(rank), trace.wrap(astype(s, real_t)))  # fmt: skip


defbatch(np.linalg.lstsq, lambda f: _lstsq_rule)


# -- compositions ---------------------------------------------------------------------


def _lstsq_impl(a: Any, b: Any, rcond: Any = None if NUMPY2 else -1) -> tuple[Any, ...]:
    """The minimum-norm solution through the SVD (what `gelsd` computes); NumPy 1.26's
    default cutoff is the old one (`rcond=-1`)."""
    m, n = np.shape(a)
    vector = np.ndim(b) == 1
    bm = b[:, None] if vector else b
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    eps = np.finfo(np.float64).eps
    rcond = eps * max(m, n) if rcond is None else (eps / 2 if rcond < 0 else rcond)
    keep = s > rcond * s[:1]
    inv_s = np.where(keep, 1 / np.where(keep, s, 1), 0)
    x = np.matmul(_h(vh), inv_s[:, None] * np.matmul(_h(u), bm))
    rank = np.int32(int(np.sum(keep)))
    if rank == n and m > n:
        res = np.sum(np.abs(bm - np.matmul(a, x)) ** 2, axis=0)
    else:
        res = np.zeros_like(s, shape=(0,))
    return (x[:, 0] if vector else x), res, rank, s


defcomposite(np.linalg.lstsq, _lstsq_impl)


def _tensorinv_rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
    a = args[0]
    ind = get_arg(args, kwargs, 1, "ind", 2)
    if ind <= 0:
        raise ValueError("Invalid ind argument.")
    va, shape = unwrap(trace, a)[0], a.shape
    prod = math.prod(shape[ind:])
    if prod == 0 or math.prod(shape) % prod:
        _numpy_error(trace, np.linalg.tensorinv, args, kwargs)
    inv = np.linalg.inv(np.reshape(va, (va.shape[0], prod, math.prod(shape) // prod)))
    return trace.wrap(np.reshape(inv, (va.shape[0], *shape[ind:], *shape[:ind])))


defbatch(np.linalg.tensorinv, lambda f: _tensorinv_rule)


def _tensorinv_impl(a: Any, ind: int = 2) -> Any:
    shape = np.shape(a)
    rows = math.prod(shape[ind:])
    inv = np.linalg.inv(np.reshape(a, (rows, math.prod(shape) // rows)))
    return np.reshape(inv, shape[ind:] + shape[:ind])


defcomposite(np.linalg.tensorinv, _tensorinv_impl)


def _tensorsolve_rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
    a, b = get_arg(args, kwargs, 0, "a"), get_arg(args, kwargs, 1, "b")
    axes = get_arg(args, kwargs, 2, "axes")
    (va, ba, sa), (vb, bb, sb) = operand_parts(trace, a), operand_parts(trace, b)
    if axes is not None:  # the named axes of `a` go to the end, in order
        order = [i for i in range(len(sa)) if i not in [ax % len(sa) for ax in axes]]
        order += [ax % len(sa) for ax in axes]
        va = np.transpose(va, [0, *(i + 1 for i in order)] if ba else order)
        sa = tuple(sa[i] for i in order)
    x_shape = sa[len(sb) :]
    prod = math.prod(x_shape)
    if math.prod(sa) != prod**2:
        _numpy_error(trace, np.linalg.tensorsolve, args, kwargs)
    n_batch = (va if ba else vb).shape[0]
    va = np.reshape(va, (n_batch, prod, prod) if ba else (prod, prod))
    vb = np.reshape(vb, (n_batch, prod) if bb else (prod,))
    x = _solve_vals(va, ba, (prod, prod), vb, bb, (prod,))
    return trace.wrap(np.reshape(x, (n_batch, *x_shape)))


defbatch(np.linalg.tensorsolve, lambda f: _tensorsolve_rule)


def _tensorsolve_impl(a: Any, b: Any, axes: Any = None) -> Any:
    nd = np.ndim(a)
    if axes is not None:
        order = [i for i in range(nd) if i not in [ax % nd for ax in axes]]
        a = np.transpose(a, order + [ax % nd for ax in axes])
    x_shape = np.shape(a)[np.ndim(b) :]
    prod = math.prod(x_shape)
    x = np.linalg.solve(np.reshape(a, (prod, prod)), np.ravel(b))
    return np.reshape(x, x_shape)


defcomposite(np.linalg.tensorsolve, _tensorsolve_impl)


# -- norms -----------------------------------------------------------------------------------


def _norm_rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
    x = args[0]
    ord_ = get_arg(args, kwargs, 1, "ord")
    axis = get_arg(args, kwargs, 2, "axis")
    keepdims = get_arg(args, kwargs, 3, "keepdims", False)
    if isinstance(ord_, Tracer):  # (which norm: the example's choice)
        return per_example(trace, np.linalg.norm, args, kwargs, "with a batched `ord`")
    v, nd = unwrap(trace, x)[0], example_ndim(trace, x)
    if axis is None:
        if ord_ is None or (ord_ in ("f", "fro") and nd == 2) or (ord_ == 2 and nd == 1):
            out = _flat_two_norm(v)
            return trace.wrap(np.reshape(out, (out.shape[0], *(1,) * nd)) if keepdims else out)
        if nd not in (1, 2):
            raise ValueError("Improper number of dimensions to norm.")
        axis = tuple(range(nd))
    axis = shift_axis(axis if isinstance(axis, tuple) else int(axis), nd)
    if ord_ in (None, 2) and has_short_rows(v, axis):
        # NumPy's steps, `sqrt(add.reduce(x * x))`, with the sum by columns: the loop's bits
        return trace.wrap(np.sqrt(sum_of_short_rows(v * v, keepdims)))
    return trace.wrap(np.linalg.norm(in_example_order(v), ord_, axis, keepdims))


def _flat_two_norm(v: Any) -> Any:
    """sqrt(sum |x|^2) over one example's elements, as NumPy's `x.dot(x)`."""
    flat = in_example_order(np.reshape(v, flat_shape(v)))
    if not np.issubdtype(flat.dtype, np.inexact):
        flat = astype(flat, float)
    if np.iscomplexobj(flat):
        re, im = np.real(flat), np.imag(flat)
        return np.sqrt(vecdot(re, re) + vecdot(im, im))
    return np.sqrt(vecdot(flat, flat))


def _vector_norm_rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
    x = args[0]
    axis, keepdims = kwargs.get("axis"), kwargs.get("keepdims", False)
    ord_ = kwargs.get("ord", 2)
    v, nd = unwrap(trace, x)[0], example_ndim(trace, x)
    if axis is None:
        flat = in_example_order(np.reshape(v, flat_shape(v)))
        out = np.linalg.vector_norm(flat, axis=1, ord=ord_)
        return trace.wrap(np.reshape(out, (out.shape[0], *(1,) * nd)) if keepdims else out)
    axis = shift_axis(tuple(axis), nd) if isinstance(axis, tuple) else shift_one(axis, nd)
    out = np.linalg.vector_norm(in_example_order(v), axis=axis, keepdims=keepdims, ord=ord_)
    return trace.wrap(out)


defbatch(np.linalg.norm, lambda f: _norm_rule)


def _norm_impl(x: Any, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Any:  # noqa: A002
    ord = _plain_ord(ord)  # noqa: A001
    nd = np.ndim(x)
    if axis is None:
        if ord is None or (ord in ("f", "fro") and nd == 2) or (ord == 2 and nd == 1):
            out = _vector_norm(np.ravel(x), 2, 0)
            return np.reshape(out, (1,) * nd) if keepdims else out
        axis = tuple(range(nd))
    axis = (axis,) if not isinstance(axis, tuple) else axis
    if len(axis) == 1:
        out = _vector_norm(x, 2 if ord is None else ord, axis[0])
    elif len(axis) == 2:
        out = _matrix_norm(x, "fro" if ord is None else ord, axis)
    else:
        return NotImplemented  # NumPy's error
    if keepdims:
        out = np.expand_dims(out, tuple(a % nd for a in axis))
    return out


defcomposite(np.linalg.norm, _norm_impl)
defbatch(present(np.linalg, "vector_norm"), lambda f: _vector_norm_rule)


def _vector_norm_impl(x: Any, axis: Any = None, keepdims: bool = False, ord: Any = 2) -> Any:  # noqa: A002
    nd = np.ndim(x)
    if axis is None:
        out = _vector_norm(np.ravel(x), ord, 0)
        return np.reshape(out, (1,) * nd) if keepdims else out
    out = _vector_norm(x, ord, axis)
    return np.expand_dims(out, axis) if keepdims else out


defcomposite(present(np.linalg, "vector_norm"), _vector_norm_impl)


# -- multi_dot, cross, vecdot ------------------------------------------------------------------


def _chain_order(shapes: list[tuple[int, ...]], batched: list[bool], size: int) -> Any:
    """The cheapest parenthesization (a nested tuple of indices) of a matrix chain when
    products of batched operands cost `size` times as much."""
    n = len(shapes)
    best: dict[tuple[int, int], tuple[float, Any, bool]] = {
        (i, i): (0.0, i, batched[i]) for i in range(n)
    }
    for length in range(2, n + 1):
        for i in range(n - length + 1):
            j = i + length - 1
            for s in range(i, j):
                cl, tl, bl = best[(i, s)]
                cr, tr, br = best[(s + 1, j)]
                flops = shapes[i][0] * shapes[s][1] * shapes[j][1] * (size if bl or br else 1)
                cost = cl + cr + flops
                if (i, j) not in best or cost < best[(i, j)][0]:
                    best[(i, j)] = (cost, (tl, tr), bl or br)
    return best[(0, n - 1)][1]


def _multi_dot_rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
    arrays = list(get_arg(args, kwargs, 0, "arrays"))
    if len(arrays) < 2:
        raise ValueError("Expecting at least two arrays.")
    if len(arrays) == 2:
        return dot_rule(trace, tuple(arrays), {})
    ops = [operand_parts(trace, x) for x in arrays]
    first, last = len(ops[0][2]), len(ops[-1][2])
    if first == 1:
        v, b, s = ops[0]
        ops[0] = (np.reshape(v, (v.shape[0], 1, s[0]) if b else (1, s[0])), b, (1, s[0]))
    if last == 1:
        v, b, s = ops[-1]
        ops[-1] = (np.reshape(v, (v.shape[0], s[0], 1) if b else (s[0], 1)), b, (s[0], 1))
    for _, _, s in ops:
        if len(s) != 2:
            raise LinAlgError(f"{len(s)}-dimensional array given. Array must be two-dimensional")
    order = _chain_order([s for _, _, s in ops], [b for _, b, _ in ops], trace.axis_size)

    def product(node: Any) -> tuple[Any, ...]:
        if isinstance(node, int):
            return ops[node]
        (va, ba, sa), (vb, bb, sb) = product(node[0]), product(node[1])
        if not ba and not bb:
            return va @ vb, False, (sa[0], sb[1])
        return matmul_vals(va, ba, sa, vb, bb, sb), True, (sa[0], sb[1])

    out = product(order)[0]
    if first == 1 and last == 1:
        return trace.wrap(out[:, 0, 0])
    if first == 1:
        return trace.wrap(out[:, 0, :])
    return trace.wrap(out[..., 0] if last == 1 else out)


defbatch(np.linalg.multi_dot, lambda f: _multi_dot_rule)


def _multi_dot_impl(arrays: Any, *, out: Any = None) -> Any:
    arrays = list(arrays)
    first, last = np.ndim(arrays[0]), np.ndim(arrays[-1])
    if first == 1:
        arrays[0] = arrays[0][None, :]
    if last == 1:
        arrays[-1] = arrays[-1][:, None]
    result = arrays[0]
    for x in arrays[1:]:
        result = np.matmul(result, x)
    if first == 1 and last == 1:
        return result[0, 0]
    if first == 1:
        return result[0]
    return result[:, 0] if last == 1 else result


defcomposite(np.linalg.multi_dot, _multi_dot_impl)


def _per_operand_axis(axis: int, ndims: list[int]) -> list[int]:
    """A per-example axis as a negative axis of each operand (robust to alignment)."""
    out = []
    for nd in ndims:
        if not -nd <= axis < nd:
            raise np.exceptions.AxisError(axis, nd)
        out.append(axis - nd if axis >= 0 else axis)
    return out


def _cross_rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
    x1, x2 = args[:2]
    axis = kwargs.get("axis", -1)
    d1, d2 = np.shape(x1)[axis], np.shape(x2)[axis]  # (NumPy's IndexError for a bad axis)
    ndims = [example_ndim(trace, x) for x in (x1, x2)]
    ax1, ax2 = _per_operand_axis(axis, ndims)
    if d1 != 3 or d2 != 3:
        raise ValueError(
            "Both input arrays must be (arrays of) 3-dimensional vectors, "
            f"but they are {d1} and {d2} dimensional instead."
        )
    v1, v2 = aligned_operands(trace, (x1, x2))
    if ax1 == ax2:
        return trace.wrap(np.linalg.cross(v1, v2, axis=ax1))
    out_axis = axis - max(ndims) if axis >= 0 else axis
    return trace.wrap(np.cross(v1, v2, axisa=ax1, axisb=ax2, axisc=out_axis))


def _vecdot_rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
    x1, x2 = args[:2]
    axis = kwargs.get("axis", -1)
    try:
        ax1, ax2 = _per_operand_axis(axis, [example_ndim(trace, x) for x in (x1, x2)])
    except np.exceptions.AxisError as e:  # NumPy checks core dims first (a 0-d operand)
        raise (gufunc_example_error(np.vecdot, (x1, x2), {"axis": axis}) or e) from None
    v1, v2 = aligned_operands(trace, (x1, x2))
    return trace.wrap(np.vecdot(v1, v2, axes=[(ax1,), (ax2,), ()]))  # type: ignore[list-item]


defbatch(present(np.linalg, "cross"), lambda f: _cross_rule)


def _cross_impl(x1: Any, x2: Any, axis: int = -1) -> Any:
    a, b = np.moveaxis(x1, axis, -1), np.moveaxis(x2, axis, -1)
    c0 = a[..., 1] * b[..., 2] - a[..., 2] * b[..., 1]
    c1 = a[..., 2] * b[..., 0] - a[..., 0] * b[..., 2]
    c2 = a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]
    return np.moveaxis(np.stack([c0, c1, c2], axis=-1), -1, axis)


defcomposite(present(np.linalg, "cross"), _cross_impl)
defbatch(present(np.linalg, "vecdot"), lambda f: _vecdot_rule)


defcomposite(present(np.linalg, "vecdot"), lambda x1, x2, axis=-1: np.vecdot(x1, x2, axis=axis))  # type: ignore[call-overload]
