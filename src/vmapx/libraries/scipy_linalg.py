"""Adapters for `scipy.linalg`: its LAPACK wrappers written with `np.linalg`, which
batches over leading axes and differentiates.

A function that reads one triangle of its matrix (`cholesky`, `solve(assume_a="pos")`)
is given the symmetric matrix that triangle defines, so the result is SciPy's whatever
the other triangle holds.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any

import numpy as np
import scipy.linalg

from .._batching import BatchTracer
from .._core import Tracer
from ..extend import primitive, register_batch_rule
from . import _adapter, _systems
from ._adapter import Unsupported, adapts, batch_by_axis

# the library's own functions, taken before `install` puts the adapters in their place
_LIBRARY_EIGH = scipy.linalg.eigh
_LIBRARY_DET = scipy.linalg.det
_LIBRARY_NORM = scipy.linalg.norm
_LIBRARY_SOLVE = scipy.linalg.solve
_LIBRARY_LU_FACTOR = scipy.linalg.lu_factor

_HERMITIAN = {"her", "hermitian", "pos", "positive definite"}
_SYMMETRIC = {"sym", "symmetric"} | _HERMITIAN
_GENERAL = {None, "gen", "general"}


def _from_triangle(a: Any, lower: bool, hermitian: bool = True) -> Any:
    """The Hermitian (or, `hermitian=False`, complex symmetric) matrix whose `lower` (or
    upper) triangle is `a`'s. LAPACK's Hermitian routines read only the real part of the
    diagonal, and so does this."""
    strict = np.tril(a, -1) if lower else np.triu(a, 1)
    diagonal = np.tril(np.triu(a))
    if hermitian and np.iscomplexobj(a):
        return strict + np.conj(np.swapaxes(strict, -1, -2)) + np.real(diagonal)
    return strict + np.swapaxes(strict, -1, -2) + diagonal


def _check_square(a: Any) -> None:
    if np.ndim(a) != 2 or np.shape(a)[0] != np.shape(a)[1]:
        raise Unsupported


# the dtypes whose results NumPy's linalg and SciPy's LAPACK wrappers give alike (SciPy
# takes 8- and 16-bit integers and float16 as float32, booleans by the function)
_AS_NUMPY = {np.dtype(t) for t in ("f4", "f8", "c8", "c16", "i4", "i8", "u4", "u8")}


def _check_inputs(check_finite: Any, *arrays: Any) -> None:
    """Inputs of other dtypes than `_AS_NUMPY`, and empty ones (SciPy gives their results
    its own dtypes), go to the library; then SciPy's `check_finite`: a NaN or an infinity
    raises ValueError (under `vmap`, examples that disagree run one at a time, each as
    SciPy would)."""
    dtypes = [x.dtype if hasattr(x, "dtype") else np.asarray(x).dtype for x in arrays]
    if any(d not in _AS_NUMPY for d in dtypes) or any(np.size(x) == 0 for x in arrays):
        raise Unsupported
    if check_finite and not all(_finite_batch(x) or np.all(np.isfinite(x)) for x in arrays):
        raise ValueError("array must not contain infs or NaNs")
    if not check_finite and any(_known_not_finite(x) for x in arrays):
        raise Unsupported  # (unchecked: LAPACK's own answer, SciPy's warning, per example)


def _known_not_finite(x: Any) -> bool:
    """Whether the plain values of `x` (as `_finite_batch` reads them) hold a NaN or an
    infinity: NumPy's LAPACK calls give other arrays than SciPy's for those."""
    value = x.val if type(x) is BatchTracer else x
    return type(value) is np.ndarray and not bool(np.isfinite(value).all())


def _finite_batch(x: Any) -> bool:
    """Whether every example of `x` is finite, asked of its plain values without tracing
    (a batch of NumPy arrays, or a constant); False where that is not known so."""
    value = x.val if type(x) is BatchTracer else x
    return type(value) is np.ndarray and bool(np.isfinite(value).all())


@functools.cache
def _library_solves_stacks() -> bool:
    """Whether this SciPy's `solve` solves a stack of systems in one call (SciPy 1.17),
    rather than in a loop of Python (a wrapped function) or not at all: asked once."""
    if hasattr(_LIBRARY_SOLVE, "__wrapped__"):
        return False
    try:
        x = _LIBRARY_SOLVE(np.stack([np.eye(2), 2 * np.eye(2)]), np.ones((2, 2, 1)))
    except Exception:  # (an older SciPy: a stack is not a matrix)
        return False
    return np.shape(x) == (2, 2, 1) and bool(x[1, 0, 0] == 0.5)


def _solve_stack(a: Any, b: Any, lower: Any = False, check_finite: Any = True,
                 assume_a: Any = None, transposed: Any = False, **ignored: Any) -> Any:  # fmt: skip
    """`solve` of a stack of systems: SciPy's own where it solves a stack, each system
    with the LAPACK routine the loop calls and with the loop's errors (`ignored`: the
    overwrite flags, never passed on: the stack is vmapx's, not the caller's); else the
    lowering's NumPy calls on the stack, after its checks asked of every example."""
    if _library_solves_stacks() and assume_a != "banded":
        return _LIBRARY_SOLVE(a, b, lower=lower, check_finite=check_finite,
                              assume_a=assume_a, transposed=transposed)  # fmt: skip
    _check_stack_inputs(check_finite, a, b)
    return _solve(a, b, lower, assume_a, transposed)


def _solve(a: Any, b: Any, lower: Any, assume_a: Any, transposed: Any) -> Any:
    """`solve` after its checks, `b` a vector or columns (a stack of either)."""
    if assume_a in _SYMMETRIC:
        a = _from_triangle(a, lower, hermitian=assume_a in _HERMITIAN)
    elif assume_a not in _GENERAL:
        raise Unsupported
    if transposed:
        a = np.swapaxes(a, -1, -2)
    if np.ndim(b) == 1:
        return np.linalg.solve(a, b[:, None])[:, 0]
    return np.linalg.solve(a, b)


@adapts("scipy.linalg", "solve", ("a", "b"),
        batch=_systems.on_systems(_solve_stack, lambda a, b, **kw: solve(a, b, **kw)))  # fmt: skip
def solve(a: Any, b: Any, lower: Any = False, overwrite_a: Any = False, overwrite_b: Any = False,
          check_finite: Any = True,
          assume_a: Any = None, transposed: Any = False) -> Any:  # fmt: skip
    _check_square(a)
    _check_inputs(check_finite, a, b)
    return _solve(a, b, lower, assume_a, transposed)


def _check_stack_inputs(check_finite: Any, *arrays: Any) -> None:
    """`_check_inputs` of plain arrays holding every example (each example has the
    stack's dtype; the caller has seen that no example is empty)."""
    if any(x.dtype not in _AS_NUMPY for x in arrays):
        raise Unsupported
    if check_finite and not all(np.isfinite(x).all() for x in arrays):
        raise ValueError("array must not contain infs or NaNs")
    if not check_finite and not all(np.isfinite(x).all() for x in arrays):
        raise Unsupported  # (unchecked: LAPACK's own answer, SciPy's warning, per example)


def _on_matrices(body: Any, lowering: Any) -> Any:
    """A batch rule: `body(a, **options)`, the lowering of a function of one square
    matrix after its checks, written with NumPy calls that act on the last two axes and
    stack over the leading ones, called once on the batch of matrices: the very calls
    vmap made tracing the lowering. The checks (`_check_inputs`) are asked of every
    example at once."""

    def call(in_batched: list[Any], a: Any, **options: Any) -> Any:
        if type(a) is not np.ndarray or a.ndim != 3 or a.shape[1] != a.shape[2]:
            raise Unsupported
        if a.dtype not in _AS_NUMPY or a.shape[1] == 0:
            raise Unsupported  # (as `_check_inputs`: the library)
        if not np.isfinite(a).all():
            if options.get("check_finite", True):
                raise ValueError("array must not contain infs or NaNs")
            raise Unsupported  # (unchecked: LAPACK's own answer, SciPy's warning, per example)
        return body(a, **options)

    by_axis = batch_by_axis(call, lowering)

    def rule(axis_size: int, in_batched: list[Any], *args: Any, **options: Any) -> Any:
        if axis_size == 0:  # (no matrices: the lowering's answer, as `vmap` traces it)
            from .. import vmap

            return vmap(functools.partial(lowering, **options))(*args), True
        return by_axis(axis_size, in_batched, *args, **options)

    return rule


def _inv(a: Any, *, assume_a: Any = None, lower: Any = False, **ignored: Any) -> Any:
    """`inv` after its checks (`ignored`: its options that change no value)."""
    if assume_a in _SYMMETRIC:
        a = _from_triangle(a, lower, hermitian=assume_a in _HERMITIAN)
    elif assume_a not in _GENERAL:
        raise Unsupported
    return np.linalg.inv(a)


@adapts("scipy.linalg", "inv", ("a",), batch=_on_matrices(_inv, lambda a, **kw: inv(a, **kw)))
def inv(
    a: Any,
    overwrite_a: Any = False,
    check_finite: Any = True,
    *,
    assume_a: Any = None,
    lower: Any = False,
) -> Any:
    _check_square(a)
    _check_inputs(check_finite, a)
    return _inv(a, assume_a=assume_a, lower=lower)


@functools.lru_cache(maxsize=64)
def _det_dtype(dtype: Any) -> Any:
    return np.result_type(_LIBRARY_DET(np.eye(1, dtype=dtype)))  # SciPy's, not NumPy's


def _det(a: Any, **ignored: Any) -> Any:
    return np.linalg.det(a).astype(_det_dtype(a.dtype))


@adapts("scipy.linalg", "det", ("a",), batch=_on_matrices(_det, lambda a, **kw: det(a, **kw)))
def det(a: Any, overwrite_a: Any = False, check_finite: Any = True) -> Any:
    _check_square(a)
    _check_inputs(check_finite, a)
    return _det(a)


def _cholesky_factor(a: Any, lower: bool) -> Any:
    _check_square(a)
    return _cholesky(a, lower)


# NumPy 2's `cholesky(a, upper=...)`: LAPACK's potrf with SciPy's triangle, which it reads
# alone (and only the real part of its diagonal), as SciPy does
_CHOLESKY_HAS_UPPER = np.lib.NumpyVersion(np.__version__) >= "2.0.0"


def _cholesky(a: Any, lower: Any = False, **ignored: Any) -> Any:
    if _CHOLESKY_HAS_UPPER and type(a) is np.ndarray:  # (plain values: the batch rule)
        return np.linalg.cholesky(a, upper=not lower)
    factor = np.linalg.cholesky(_from_triangle(a, lower))
    return factor if lower else np.conj(np.swapaxes(factor, -1, -2))


@adapts("scipy.linalg", "cholesky", ("a",),
        batch=_on_matrices(_cholesky, lambda a, **kw: cholesky(a, **kw)))  # fmt: skip
def cholesky(a: Any, lower: Any = False, overwrite_a: Any = False, check_finite: Any = True) -> Any:
    _check_inputs(check_finite, a)
    return _cholesky_factor(a, lower)


@functools.cache
@functools.lru_cache(maxsize=32)
def _cho_factor_keeps_other_triangle(dtype: np.dtype[Any]) -> bool:
    """Whether this SciPy's `cho_factor` of a `dtype` matrix leaves the other triangle as
    it was (LAPACK's output; SciPy 1.17) or zeroes it (SciPy 1.18 for floating matrices,
    not for integer ones, which it converts first): asked of SciPy itself, once per dtype."""
    original = getattr(scipy.linalg.cho_factor, "original", scipy.linalg.cho_factor)
    c, _ = original(np.array([[4, 1], [1, 4]], dtype=dtype), lower=False)
    return bool(c[1, 0] != 0)


def _cho_factor_array(
    a: Any, lower: Any = False, overwrite_a: Any = False, check_finite: Any = True
) -> Any:
    _check_square(a)
    return _cho_factor_stack(a, lower)


def _cho_factor_stack(a: Any, lower: Any = False, **ignored: Any) -> Any:
    """`cho_factor`'s matrix (or stack of them) after its checks."""
    factor = _cholesky(a, lower)
    if not _cho_factor_keeps_other_triangle(np.result_type(a)):
        return factor
    other = np.triu(a, 1) if lower else np.tril(a, -1)
    return factor + other


_cho_factor_prim = primitive(_cho_factor_array, name="scipy.linalg.cho_factor")
_cho_factor_matrices = _on_matrices(_cho_factor_stack, lambda a, **kw: cho_factor(a, **kw)[0])


def _cho_factor_rule(axis_size: int, in_batched: list[Any], a: Any, lower: Any = False,
                     **options: Any) -> Any:  # fmt: skip
    """`cho_factor`'s batch rule: the stack of matrices in one call, `lower` as given."""
    c, batched = _cho_factor_matrices(axis_size, in_batched, a, lower=lower, **options)
    return (c, lower), (batched, False)


@adapts("scipy.linalg", "cho_factor", ("a",), batch=_cho_factor_rule)
def cho_factor(
    a: Any, lower: Any = False, overwrite_a: Any = False, check_finite: Any = True
) -> Any:
    _check_inputs(check_finite, a)
    return _cho_factor_prim(a, lower=lower), lower


def _triangular_solve(c: Any, b: Any, lower: bool, trans: int = 0, unit: bool = False) -> Any:
    t = np.tril(c) if lower else np.triu(c)
    if unit:
        eye = np.eye(t.shape[-1], dtype=np.result_type(t))
        t = t - t * eye + eye
    if trans in (1, "T"):
        t = np.swapaxes(t, -1, -2)
    elif trans in (2, "C"):
        t = np.conj(np.swapaxes(t, -1, -2))
    elif trans not in (0, "N"):
        raise Unsupported
    if np.ndim(b) == 1:
        return np.linalg.solve(t, b[:, None])[:, 0]
    return np.linalg.solve(t, b)


def _cho_solve_stack(c: Any, b: Any, lower: bool, check_finite: Any = True,
                     **ignored: Any) -> Any:  # fmt: skip
    """`cho_solve` of a stack of systems after its checks, asked of every example at
    once (`ignored`: `overwrite_b`, which changes no value)."""
    _check_stack_inputs(check_finite, c, b)
    y = _triangular_solve(c, b, lower, trans=0 if lower else 2)
    return _triangular_solve(c, y, lower, trans=2 if lower else 0)


_cho_solve_systems = _systems.on_systems(
    _cho_solve_stack, lambda c, b, lower, **kw: cho_solve((c, lower), b, **kw)
)


def _is_plain_flag(lower: Any) -> bool:
    """Whether `lower` of a `cho_factor` result is one plain boolean (SciPy 1.18 gives a
    0-d boolean array, earlier versions a bool)."""
    if type(lower) is np.ndarray:
        return bool(lower.shape == () and lower.dtype == np.bool_)
    return not isinstance(lower, Tracer) and isinstance(lower, bool | np.bool_)


def _cho_solve_rule(axis_size: int, in_batched: list[Any], c_and_lower: Any, b: Any,
                    **options: Any) -> Any:  # fmt: skip
    """`cho_solve`'s batch rule: the factors' stack (or one factor) and the right-hand
    sides solved in one call, where `lower` is a plain boolean, not batched."""
    flags = in_batched[0]
    if type(flags) not in (tuple, list) or len(flags) != 2 or flags[1] is not False:
        raise Unsupported  # (the library: the loop's answer)
    c, lower = c_and_lower
    if type(flags[0]) is not bool or not _is_plain_flag(lower):
        raise Unsupported
    return _cho_solve_systems(axis_size, [flags[0], in_batched[1]], c, b, lower=bool(lower),
                              **options)  # fmt: skip


@adapts("scipy.linalg", "cho_solve", ("c_and_lower", "b"), batch=_cho_solve_rule)
def cho_solve(c_and_lower: Any, b: Any, overwrite_b: Any = False, check_finite: Any = True) -> Any:
    c, lower = c_and_lower
    _check_inputs(check_finite, c, b)
    if not _is_plain_flag(lower):
        raise Unsupported
    lower = bool(lower)
    y = _triangular_solve(c, b, lower, trans=0 if lower else 2)
    return _triangular_solve(c, y, lower, trans=2 if lower else 0)


def _solve_triangular_stack(a: Any, b: Any, trans: Any = 0, lower: Any = False,
                            unit_diagonal: Any = False, check_finite: Any = True,
                            **ignored: Any) -> Any:  # fmt: skip
    """`solve_triangular` of a stack of systems after its checks, asked of every example
    at once (`ignored`: `overwrite_b`, which changes no value)."""
    _check_stack_inputs(check_finite, a, b)
    return _triangular_solve(a, b, lower, trans, unit_diagonal)


@adapts("scipy.linalg", "solve_triangular", ("a", "b"),
        batch=_systems.on_systems(_solve_triangular_stack,
                                  lambda a, b, **kw: solve_triangular(a, b, **kw)))  # fmt: skip
def solve_triangular(a: Any, b: Any, trans: Any = 0, lower: Any = False,
                     unit_diagonal: Any = False, overwrite_b: Any = False,
                     check_finite: Any = True) -> Any:  # fmt: skip
    _check_square(a)
    _check_inputs(check_finite, a, b)
    return _triangular_solve(a, b, lower, trans, unit_diagonal)


def _library_eigenvectors(a: Any, lower: bool = True, driver: Any = None) -> Any:
    """SciPy's eigenvectors of each matrix in a stack (plain values)."""
    flat = np.reshape(a, (-1, *np.shape(a)[-2:]))
    vectors = [_LIBRARY_EIGH(m, lower=lower, driver=driver)[1] for m in flat]
    return np.reshape(np.stack(vectors), np.shape(a)) if vectors else np.zeros_like(a)


_library_eigenvectors_prim = primitive(_library_eigenvectors, name="scipy.linalg.eigh eigenvectors")
register_batch_rule(
    _library_eigenvectors_prim,
    lambda n, in_batched, a, **kw: (_library_eigenvectors(a, **kw), in_batched[0]),
)


def _as_library_eigenvectors(a: Any, v: Any, lower: bool, driver: Any) -> Any:
    """`v` (NumPy's eigenvectors) with SciPy's signs (phases), and SciPy's exact values:
    LAPACK's drivers choose them differently. The derivative is `v`'s, rotated alike."""
    from .. import stop_gradient

    library = _library_eigenvectors_prim(stop_gradient(a), lower=lower, driver=driver)
    dots = stop_gradient(np.sum(np.conj(v) * library, axis=-2, keepdims=True))
    v = v * np.where(np.abs(dots) > 0, dots / np.where(dots == 0, 1, np.abs(dots)), 1)
    return v + stop_gradient(library - v)


@adapts("scipy.linalg", "eigh", ("a",))
def eigh(a: Any, b: Any = None, *, lower: Any = True, eigvals_only: Any = False,
         overwrite_a: Any = False, overwrite_b: Any = False,
         type: Any = 1, check_finite: Any = True, subset_by_index: Any = None,
         subset_by_value: Any = None,
         driver: Any = None) -> Any:  # fmt: skip
    if b is not None or subset_by_index is not None or subset_by_value is not None:
        raise Unsupported
    _check_square(a)
    _check_inputs(check_finite, a)
    h = _from_triangle(a, lower)
    if eigvals_only:
        return np.linalg.eigvalsh(h)
    w, v = np.linalg.eigh(h)
    return w, _as_library_eigenvectors(a, v, lower, driver)


def _eigvalsh(a: Any, b: Any = None, *, lower: Any = True, subset_by_index: Any = None,
              subset_by_value: Any = None, **ignored: Any) -> Any:  # fmt: skip
    if b is not None or subset_by_index is not None or subset_by_value is not None:
        raise Unsupported
    return np.linalg.eigvalsh(_from_triangle(a, lower))


@adapts("scipy.linalg", "eigvalsh", ("a",),
        batch=_on_matrices(_eigvalsh, lambda a, **kw: eigvalsh(a, **kw)))  # fmt: skip
def eigvalsh(a: Any, b: Any = None, *, lower: Any = True, overwrite_a: Any = False,
             overwrite_b: Any = False, type: Any = 1,
             check_finite: Any = True, subset_by_index: Any = None, subset_by_value: Any = None,
             driver: Any = None) -> Any:  # fmt: skip
    if b is not None or subset_by_index is not None or subset_by_value is not None:
        raise Unsupported
    _check_square(a)
    _check_inputs(check_finite, a)
    return _eigvalsh(a, lower=lower)


@adapts("scipy.linalg", "svd", ("a",))
def svd(a: Any, full_matrices: Any = True, compute_uv: Any = True, overwrite_a: Any = False,
        check_finite: Any = True,
        lapack_driver: Any = "gesdd") -> Any:  # fmt: skip
    if lapack_driver != "gesdd":  # (another driver: other signs than NumPy's)
        raise Unsupported
    _check_inputs(check_finite, a)
    if compute_uv:
        u, s, vh = np.linalg.svd(a, full_matrices=full_matrices)
        return u, s, vh
    return np.linalg.svd(a, compute_uv=False)


@adapts("scipy.linalg", "svdvals", ("a",))
def svdvals(a: Any, overwrite_a: Any = False, check_finite: Any = True) -> Any:
    _check_inputs(check_finite, a)
    return np.linalg.svd(a, compute_uv=False)


@adapts("scipy.linalg", "qr", ("a",))
def qr(
    a: Any,
    overwrite_a: Any = False,
    lwork: Any = None,
    mode: Any = "full",
    pivoting: Any = False,
    check_finite: Any = True,
) -> Any:
    if pivoting or mode not in ("full", "r", "economic"):
        raise Unsupported
    _check_inputs(check_finite, a)
    q, r = np.linalg.qr(a, mode="complete" if mode in ("full", "r") else "reduced")
    return (r,) if mode == "r" else (q, r)


def _norm_rule(axis_size: int, in_batched: list[Any], a: Any, ord: Any = None, axis: Any = None,
               keepdims: Any = False, check_finite: Any = True) -> Any:  # fmt: skip
    """`norm`'s batch rule for its default (the 2-norm of a vector, the Frobenius norm of
    a matrix): every example's sum of squares in one call, the checks asked of every
    example at once; other calls take the lowering under `vmap`."""
    if (axis_size == 0 or type(a) is not np.ndarray or a.ndim not in (2, 3) or ord is not None
            or axis is not None or keepdims is not False or a.dtype not in _AS_NUMPY
            or a[0].size == 0):  # fmt: skip
        from .. import vmap

        options = {"ord": ord, "axis": axis, "keepdims": keepdims, "check_finite": check_finite}
        return vmap(functools.partial(norm, **options))(a), True
    if check_finite and not np.isfinite(a).all():
        raise ValueError("array must not contain infs or NaNs")
    flat = np.reshape(a, (a.shape[0], -1))
    if flat.dtype.kind in "iu":
        flat = flat.astype(float)
    squares = (
        flat.real * flat.real + flat.imag * flat.imag if flat.dtype.kind == "c" else flat * flat
    )
    out = np.sqrt(np.sum(squares, axis=1))
    return out.astype(_norm_dtype(a.dtype, a.ndim - 1, None, None, False), copy=False), True


@adapts("scipy.linalg", "norm", ("a",), batch=_norm_rule)
def norm(
    a: Any, ord: Any = None, axis: Any = None, keepdims: Any = False, check_finite: Any = True
) -> Any:
    _check_inputs(check_finite, a)
    dtype = _norm_dtype(np.result_type(a), np.ndim(a), ord, axis, keepdims)
    out = np.linalg.norm(a, ord=ord, axis=axis, keepdims=keepdims)
    return out if out.dtype == dtype else out.astype(dtype)


@functools.lru_cache(maxsize=256)
def _norm_dtype(dtype: Any, ndim: int, ord: Any, axis: Any, keepdims: Any) -> Any:
    """The dtype of SciPy's `norm` for these options: a vector's 2-norm and some matrix
    norms come from BLAS/LAPACK as a Python float (float64 whatever the input's)."""
    with np.errstate(all="ignore"):  # (a negative order's reciprocals of zeros)
        made = _LIBRARY_NORM(np.ones((2,) * ndim, dtype=dtype), ord=ord, axis=axis,
                             keepdims=keepdims)  # fmt: skip
    return np.result_type(made)


@adapts("scipy.linalg", "pinv", ("a",))
def pinv(
    a: Any,
    *,
    atol: Any = None,
    rtol: Any = None,
    return_rank: Any = False,
    check_finite: Any = True,
) -> Any:
    if atol is not None or rtol is not None or return_rank:
        raise Unsupported
    _check_inputs(check_finite, a)
    return np.linalg.pinv(a, rcond=max(np.shape(a)) * np.finfo(np.result_type(a, 1.0)).eps)


@adapts("scipy.linalg", "lstsq", ("a", "b"))
def lstsq(a: Any, b: Any, cond: Any = None, overwrite_a: Any = False, overwrite_b: Any = False,
          check_finite: Any = True,
          lapack_driver: Any = None) -> None:  # fmt: skip
    raise Unsupported  # (residues, rank, singular values: SciPy's own conventions)


def _expm_batched(in_batched: list[Any], a: Any) -> Any:
    return scipy.linalg.expm(a)  # SciPy's expm takes a stack of matrices


def _expm(A: Any) -> None:
    raise Unsupported  # differentiated: the library function (loop)


@adapts("scipy.linalg", "expm", ("A",), batch=batch_by_axis(_expm_batched, _expm))
def expm(A: Any) -> Any:
    return _expm(A)


def _lu_factor_batched(in_batched: list[Any], a: Any, overwrite_a: Any = False,
                       check_finite: Any = True) -> Any:  # fmt: skip
    """SciPy's own `lu_factor` of the stack of matrices (it factors over leading axes;
    `overwrite_a`: never passed on, the stack may be the caller's array)."""
    if a.ndim != 3:
        raise Unsupported  # (a vector or a stack per example: the library's own answer)
    lu, piv = _LIBRARY_LU_FACTOR(a, check_finite=check_finite)
    return lu, piv


def _lu_factor_lowering(a: Any, overwrite_a: Any = False, check_finite: Any = True) -> None:
    raise Unsupported


_lu_factor_by_axis = batch_by_axis(_lu_factor_batched, _lu_factor_lowering)


def _lu_factor_rule(axis_size: int, in_batched: list[Any], a: Any, **options: Any) -> Any:
    """`lu_factor`'s batch rule; no matrices: the factors of one nonsingular matrix of
    their shape and dtype (zeros would be singular, which SciPy warns of), cut to none."""
    if axis_size == 0 and type(a) is np.ndarray and a.ndim == 3:
        with warnings.catch_warnings():  # (no matrix is factored: no warning either,
            warnings.simplefilter("ignore")  # such as SciPy 1.18's for bool and float16)
            lu, piv = _LIBRARY_LU_FACTOR(np.eye(*a.shape[1:], dtype=a.dtype))
        return (lu[None][:0], piv[None][:0]), True
    return _lu_factor_by_axis(axis_size, in_batched, a, **options)


@adapts("scipy.linalg", "lu_factor", ("a",), batch=_lu_factor_rule)
def lu_factor(a: Any, overwrite_a: Any = False, check_finite: Any = True) -> Any:
    return _lu_factor_lowering(a)


def install() -> None:
    _adapter.install("scipy.linalg")
