"""Contractions: matmul, dot, vdot, inner, outer, tensordot, einsum, kron, convolve.

Under `vmap` the batch axis is one more free axis of a contraction, and the fastest
NumPy formulation depends on which operands carry it:

- batched @ unbatched: the batch folds into the rows of ONE matrix product
  (`(B*n, k) @ (k, m)`), not B small ones;
- unbatched matrix @ batched vector: `x_batch @ W.T` (one GEMM, not B GEMVs);
- both batched: a stacked `np.matmul` over the batch (`np.vecdot` for two vectors);
- no contracted axis (outer products): a broadcasting multiply.

`einsum` gets a batch letter on its batched operands; a two-operand einsum that is a
plain tensor contraction goes through the same contraction code as `tensordot`.

Derivatives (see `vmapx._autodiff`): most contractions are differentiated as
compositions of `np.matmul`, `np.multiply` and reshapes (`defcomposite`); `einsum` and
`convolve` have their own rules: a multilinear JVP, and a VJP that is the same kind of
contraction with the cotangent in the place of the operand (JAX's convention for complex
values: the transpose, no conjugate).
"""

from __future__ import annotations

import math
import string
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .._autodiff import defcomposite, defjvp, defjvp_argnum, defvjp, defvjp_argnum
from .._batching import (
    BatchTrace,
    align_rank,
    aligned_operands,
    defbatch,
    is_batched,
    loop_apply,
    unwrap,
    warn_fallback,
)
from .._chunk_outputs import computed
from .._compat import NUMPY2, present
from .._parallel import on_pool_thread
from .._payload import like
from .._registry import get_arg, register
from .._rule_helpers import flat_shape, in_example_order
from .ufuncs import gufunc_rule, outer_by_columns

_GENERIC_MATMUL = gufunc_rule(np.matmul)
# batched (n, k) @ unbatched (k,): one GEMV over (B*n, k) up to this n*k; above it
# NumPy's stacked loop of GEMVs was as fast or faster
_FOLD_GEMV_MAX = 65536
# batched (n, k) @ unbatched (k, m): one (B*n, k) @ (k, m) GEMM for examples of up to this
# many rows (measured up to 6x faster); with more rows B stacked GEMMs were faster
_FOLD_ROWS_MAX = 8
_MATVEC = getattr(np, "matvec", None)  # NumPy >= 2.2
_VECMAT = getattr(np, "vecmat", None)
_VECDOT = getattr(np, "vecdot", None)


def operand_parts(trace: BatchTrace, x: Any) -> tuple[Any, bool, tuple[int, ...]]:
    """`(value, batched, per-example shape)` of an operand; plain sequences become arrays."""
    v, b = unwrap(trace, x)
    if b:  # (in C order: the loop's order of the sums; see in_example_order)
        return in_example_order(v), True, tuple(v.shape[1:])
    if not hasattr(v, "shape"):
        v = np.asarray(v)
    return v, False, tuple(v.shape)


# -- matrix products of 1-d/2-d examples -------------------------------------------------


def _is_complex(*vals: Any) -> bool:
    return any(np.iscomplexobj(v) for v in vals)


def matmul_vals(
    va: Any, ba: bool, sa: tuple[Any, ...], vb: Any, bb: bool, sb: tuple[Any, ...]
) -> Any:
    """`a @ b` for 1-d/2-d examples, as a batch-front value (at least one is batched)."""
    na, nb = len(sa), len(sb)
    if ba and not bb:
        if na == 2 and (sa[0] <= _FOLD_ROWS_MAX if nb == 2 else sa[0] * sa[1] <= _FOLD_GEMV_MAX):
            # fold the batch into the rows: one GEMM (or GEMV) instead of B
            n = va.shape[0]
            out = np.reshape(va, (n * sa[0], sa[1])) @ vb
            return np.reshape(out, (n, *sa[:1], *sb[1:]))
        return va @ vb
    if bb and not ba:
        if na == 2 and nb == 1:
            return vb @ np.swapaxes(va, 0, 1)  # (B, k) @ (k, n): one GEMM
        return vb @ va if na == 1 and nb == 1 else va @ vb
    # both batched: the stacked gufuncs (vecdot/vecmat conjugate their first operand)
    real = not _is_complex(va, vb)
    if na == 1 and nb == 1:
        return _VECDOT(va, vb) if _VECDOT and real else (va[:, None, :] @ vb[:, :, None])[:, 0, 0]
    if na == 2 and nb == 1:
        return _MATVEC(va, vb) if _MATVEC else (va @ vb[:, :, None])[:, :, 0]
    if na == 1 and nb == 2:
        return _VECMAT(va, vb) if _VECMAT and real else (va[:, None, :] @ vb)[:, 0, :]
    return va @ vb


def _matmul_rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
    if kwargs or len(args) != 2:
        return _GENERIC_MATMUL(trace, args, kwargs)
    (va, ba, sa), (vb, bb, sb) = (operand_parts(trace, x) for x in args)
    if not 1 <= len(sa) <= 2 or not 1 <= len(sb) <= 2 or sa[-1] != sb[0 if len(sb) == 1 else -2]:
        return _GENERIC_MATMUL(trace, args, kwargs)  # stacks, or NumPy's own error
    return trace.wrap(matmul_vals(va, ba, sa, vb, bb, sb))


def _conj(v: Any) -> Any:
    return np.conjugate(v) if _is_complex(v) else v


def _vector_gufunc_rule(
    ufunc: np.ufunc, ndims: set[Any], conj_first: bool, b_axis: int
) -> Callable[..., Any]:
    """`np.vecdot`/`np.matvec`/`np.vecmat` on 1-d/2-d examples as matrix products
    (`vecdot(A, x)` of a matrix is `conj(A) @ x`); stacks and keywords: the gufunc rule.
    `b_axis` is the axis of the second operand summed with the first's last one."""
    generic = gufunc_rule(ufunc)

    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        (va, ba, sa), (vb, bb, sb) = (operand_parts(trace, x) for x in args)
        if kwargs or (len(sa), len(sb)) not in ndims or sa[-1] != sb[b_axis]:
            return generic(trace, args, kwargs)
        if conj_first:
            va = _conj(va)
        if ufunc is _VECDOT and len(sb) == 2:  # vecdot(x, A) = A @ conj(x)
            return trace.wrap(matmul_vals(vb, bb, sb, va, ba, sa))
        return trace.wrap(matmul_vals(va, ba, sa, vb, bb, sb))

    return rule


# -- general tensor contraction ---------------------------------------------------------


def contract_vals(
    va: Any, ba: bool, sa: tuple[Any, ...], vb: Any, bb: bool, sb: tuple[Any, ...],
    a_axes: Sequence[int],
    b_axes: Sequence[int],
) -> Any:  # fmt: skip
    """Per example `np.tensordot(a, b, (a_axes, b_axes))` (axes non-negative), as a
    batch-front value: free axes of `a`, then free axes of `b`."""
    a_free = [i for i in range(len(sa)) if i not in a_axes]
    b_free = [i for i in range(len(sb)) if i not in b_axes]
    if not a_axes:
        return _outer_vals(va, ba, sa, vb, bb, sb)
    if len(a_axes) == 1 and len(sa) <= 2 and len(sb) <= 2:  # a matrix product
        if a_axes[0] != len(sa) - 1:  # contracted axis last in a, first in b (views)
            va, sa = np.swapaxes(va, -1, -2), sa[::-1]
        if b_axes[0] != 0:
            vb, sb = np.swapaxes(vb, -1, -2), sb[::-1]
        return matmul_vals(va, ba, sa, vb, bb, sb)
    if ba and not bb:
        return np.tensordot(va, vb, ([i + 1 for i in a_axes], list(b_axes)))
    if bb and not ba:
        if not a_free:
            return np.tensordot(va, vb, (list(a_axes), [i + 1 for i in b_axes]))
        # batched operand first, so the batch stays the outer axis of the product
        out = np.tensordot(vb, va, ([i + 1 for i in b_axes], list(a_axes)))
        nbf, naf = len(b_free), len(a_free)
        return np.moveaxis(out, range(1 + nbf, 1 + nbf + naf), range(1, 1 + naf))
    n = va.shape[0]
    m = math.prod(sa[i] for i in a_free)
    k = math.prod(sa[i] for i in a_axes)
    p = math.prod(sb[i] for i in b_free)
    am = np.reshape(np.transpose(va, [0, *(i + 1 for i in a_free), *(i + 1 for i in a_axes)]),
                    (n, m, k))  # fmt: skip
    bm = np.reshape(np.transpose(vb, [0, *(i + 1 for i in b_axes), *(i + 1 for i in b_free)]),
                    (n, k, p))  # fmt: skip
    out = am @ bm
    return np.reshape(out, (n, *(sa[i] for i in a_free), *(sb[i] for i in b_free)))


def _outer_vals(
    va: Any, ba: bool, sa: tuple[Any, ...], vb: Any, bb: bool, sb: tuple[Any, ...]
) -> Any:
    """Every product `a[i...] * b[j...]`, shape `(B, *sa, *sb)`."""
    if len(sa) + len(sb) < len(_LABELS):
        a_labels, b_labels = _labels(len(sa), len(sb))
        return _products(va, ba, a_labels, vb, bb, b_labels, a_labels + b_labels)
    if ba:  # more axes than einsum has labels: broadcast
        va = np.reshape(va, (va.shape[0], *sa, *(1,) * len(sb)))
    else:
        va = np.reshape(va, (*sa, *(1,) * len(sb)))
    return np.multiply(va, align_rank(vb, len(sb), len(sa) + len(sb)) if bb else vb)


def _labels(na: int, nb: int) -> tuple[str, str]:
    """Distinct einsum labels for two operands (`_LABELS[0]` is left for the batch)."""
    return _LABELS[1 : 1 + na], _LABELS[1 + na : 1 + na + nb]


def _products(va: Any, ba: bool, a: str, vb: Any, bb: bool, b: str, out: str) -> Any:
    """Elementwise products laid out by labels (`a` and `b` share none, each in its own
    order in `out`) with one broadcasting multiply (einsum would add each product to a
    zero: -0.0 becomes 0.0, where NumPy's outer and kron keep it)."""

    def spread(v: Any, batched: bool, labels: str) -> Any:
        sizes = dict(zip(labels, np.shape(v)[int(batched) :], strict=True))
        return np.reshape(v, (*np.shape(v)[: int(batched)], *(sizes.get(x, 1) for x in out)))

    va, vb = spread(va, ba, a), spread(vb, bb, b)
    if ba != bb:  # (the unbatched operand: a leading axis of one for the batch)
        va, vb = (va, vb[None]) if ba else (va[None], vb)
    by_columns = outer_by_columns(None, np.multiply, va, vb)  # (few columns)
    if by_columns is not None:
        return by_columns
    return computed(np.multiply, va, vb)  # (into a chunk's output slice where one fits)


def _normalize_axes(axes: Any, ndim: int) -> list[int]:
    axes = [axes] if isinstance(axes, int | np.integer) else list(axes)
    out = []
    for ax in axes:
        if not -ndim <= ax < ndim:
            raise np.exceptions.AxisError(ax, ndim)
        out.append(int(ax) % ndim)
    return out


def _tensordot_axes(axes: Any, na: int, nb: int) -> tuple[list[int], list[int]]:
    """NumPy's `axes=` argument of `tensordot` as two lists of non-negative axes."""
    try:
        iter(axes)
    except TypeError:
        n = int(axes)
        if n < 0 or n > na or n > nb:
            raise ValueError("shape-mismatch for sum") from None
        return list(range(na - n, na)), list(range(n))
    axes_a, axes_b = axes
    return _normalize_axes(axes_a, na), _normalize_axes(axes_b, nb)


def _tensordot_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        (va, ba, sa), (vb, bb, sb) = (operand_parts(trace, x) for x in args[:2])
        axes = get_arg(args, kwargs, 2, "axes", 2)
        a_axes, b_axes = _tensordot_axes(axes, len(sa), len(sb))
        if len(a_axes) != len(b_axes) or any(
            sa[i] != sb[j] for i, j in zip(a_axes, b_axes, strict=True)
        ):
            raise ValueError("shape-mismatch for sum")
        return trace.wrap(contract_vals(va, ba, sa, vb, bb, sb, a_axes, b_axes))

    return rule


def dot_rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
    (va, ba, sa), (vb, bb, sb) = (operand_parts(trace, x) for x in args[:2])
    na, nb = len(sa), len(sb)
    if na == 0 or nb == 0:
        return trace.wrap(np.multiply(*aligned_operands(trace, args[:2])))
    b_axis = max(nb - 2, 0)
    if sa[-1] != sb[b_axis]:
        np.dot(*(_stand_in(trace, x) for x in args[:2]))  # NumPy's own error
    if na <= 2 and nb <= 2:
        return trace.wrap(matmul_vals(va, ba, sa, vb, bb, sb))
    return trace.wrap(contract_vals(va, ba, sa, vb, bb, sb, [na - 1], [b_axis]))


def _inner_rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
    (va, ba, sa), (vb, bb, sb) = (operand_parts(trace, x) for x in args[:2])
    na, nb = len(sa), len(sb)
    if na == 0 or nb == 0:
        return trace.wrap(np.multiply(*aligned_operands(trace, args[:2])))
    if sa[-1] != sb[-1]:
        np.inner(*(_stand_in(trace, x) for x in args[:2]))  # NumPy's own error
    return trace.wrap(contract_vals(va, ba, sa, vb, bb, sb, [na - 1], [nb - 1]))


def _flat(v: Any, b: bool, shape: tuple[Any, ...]) -> tuple[Any, tuple[Any, ...]]:
    """An operand flattened per example (C order)."""
    size = math.prod(shape)
    return (np.reshape(v, flat_shape(v)) if b else np.reshape(v, (size,))), (size,)


def _vdot_rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
    (va, ba, sa), (vb, bb, sb) = (operand_parts(trace, x) for x in args[:2])
    (va, sa), (vb, sb) = _flat(va, ba, sa), _flat(vb, bb, sb)
    if sa != sb:
        raise ValueError("vdot: vectors have different lengths")
    if _is_complex(va):
        va = np.conjugate(va)
    return trace.wrap(matmul_vals(va, ba, sa, vb, bb, sb))


def _outer_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    """`np.outer` flattens its operands; `np.linalg.outer` requires 1-d ones."""

    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        (va, ba, sa), (vb, bb, sb) = (operand_parts(trace, x) for x in args[:2])
        if func is getattr(np.linalg, "outer", None) and (len(sa) != 1 or len(sb) != 1):
            raise ValueError(
                "Input arrays must be one-dimensional, but they are "
                f"x1.ndim={len(sa)} and x2.ndim={len(sb)}."
            )
        (va, sa), (vb, sb) = _flat(va, ba, sa), _flat(vb, bb, sb)
        return trace.wrap(_outer_vals(va, ba, sa, vb, bb, sb))

    return rule


def _kron_rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
    """Kronecker product: products with the axes of `a` and `b` interleaved (the shorter
    shape padded with leading ones), each pair of axes then merged."""
    (va, ba, sa), (vb, bb, sb) = (operand_parts(trace, x) for x in args[:2])
    if not sa or not sb:
        return trace.wrap(np.multiply(*aligned_operands(trace, args[:2])))
    nd = max(len(sa), len(sb))
    pa, pb = (1,) * (nd - len(sa)) + sa, (1,) * (nd - len(sb)) + sb
    n = trace.axis_size
    if len(sa) + len(sb) < len(_LABELS):
        a_labels, b_labels = _labels(len(sa), len(sb))
        a_pad, b_pad = " " * (nd - len(sa)) + a_labels, " " * (nd - len(sb)) + b_labels
        interleaved = "".join(x + y for x, y in zip(a_pad, b_pad, strict=True)).replace(" ", "")
        out = _products(va, ba, a_labels, vb, bb, b_labels, interleaved)
    else:  # more axes than einsum has labels: a's axes at even places, b's at odd ones
        va = np.reshape(va, (*va.shape[: int(ba)], *(d for s in pa for d in (s, 1))))
        vb = np.reshape(vb, (*vb.shape[: int(bb)], *(d for s in pb for d in (1, s))))
        out = np.multiply(va, vb)
    return trace.wrap(np.reshape(out, (n, *(x * y for x, y in zip(pa, pb, strict=True)))))


# -- einsum ----------------------------------------------------------------------------

# NumPy's sublist labels: 0..25 are 'A'..'Z', 26..51 are 'a'..'z' (ASCII order)
_LABELS = string.ascii_uppercase + string.ascii_lowercase


def _sublist(sub: Sequence[Any]) -> str:
    return "".join("..." if s is Ellipsis else _LABELS[s] for s in sub)


def _einsum_form(args: tuple[Any, ...]) -> tuple[str, list[Any]]:
    """`(subscripts, operands)` of either calling form of `np.einsum`."""
    if isinstance(args[0], str):
        return args[0].replace(" ", ""), list(args[1:])
    pairs = len(args) // 2
    operands = [args[2 * i] for i in range(pairs)]
    subscripts = ",".join(_sublist(args[2 * i + 1]) for i in range(pairs))
    if len(args) % 2:
        subscripts += "->" + _sublist(args[-1])
    return subscripts, operands


def _implicit_output(inputs: list[str]) -> str:
    """NumPy's implicit output: broadcast axes, then the labels used once, sorted."""
    labels = "".join(inputs).replace(".", "")
    ellipsis = "..." if any("..." in s for s in inputs) else ""
    return ellipsis + "".join(sorted(c for c in set(labels) if labels.count(c) == 1))


def _pair_contraction(inputs: list[str], output: str, ops: list[Any]) -> Any:
    """A two-operand einsum that is a tensor contraction (each label in one operand and
    the output, or in both operands and not the output) as `contract_vals`; else None."""
    x, y = inputs
    (va, ba, sa), (vb, bb, sb) = ops
    labels = (x, y, output)
    if "." in x + y + output or any(len(set(s)) != len(s) for s in labels):
        return None
    if len(x) != len(sa) or len(y) != len(sb) or not set(output) <= set(x + y):
        return None
    if any((c in y) == (c in output) for c in x) or any(c not in x and c not in output for c in y):
        return None  # a label kept from both operands (a stack axis) or summed out alone
    contracted = [c for c in x if c in y]
    a_axes, b_axes = [x.index(c) for c in contracted], [y.index(c) for c in contracted]
    if any(sa[i] != sb[j] for i, j in zip(a_axes, b_axes, strict=True)):
        return None  # NumPy's error (or size-1 broadcasting) from einsum itself
    out = contract_vals(va, ba, sa, vb, bb, sb, a_axes, b_axes)
    free = [c for c in x if c not in y] + [c for c in y if c not in x]
    perm = [0, *(1 + free.index(c) for c in output)]
    return out if perm == sorted(perm) else np.transpose(out, perm)


def _einsum_rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
    subscripts, operands = _einsum_form(args)
    ins, arrow, output = subscripts.partition("->")
    inputs = ins.split(",")
    if not arrow:
        output = _implicit_output(inputs)
    spare = [c for c in _LABELS if c not in subscripts]
    if not spare:  # all 52 labels taken: none left for the batch
        warn_fallback(trace, "`np.einsum` using all 52 subscript labels")
        return loop_apply(trace, np.einsum, args, kwargs, "np.einsum")
    if len(inputs) != len(operands):
        np.einsum(subscripts, *(_stand_in(trace, x) for x in operands))  # NumPy's own error
    ops = [operand_parts(trace, x) for x in operands]
    if len(ops) == 2 and set(kwargs) <= {"optimize"}:
        out = _pair_contraction(inputs, output, ops)
        if out is not None:
            return trace.wrap(out)
    z = spare[0]  # the batch label
    spec = ",".join(z + s if b else s for s, (_, b, _) in zip(inputs, ops, strict=True))
    return trace.wrap(np.einsum(f"{spec}->{z}{output}", *(v for v, _, _ in ops), **kwargs))


def _stand_in(trace: BatchTrace, x: Any) -> Any:
    """A batched operand as one example's zeros (a free broadcast view)."""
    if not is_batched(trace, x):
        return x
    return np.broadcast_to(np.zeros((), dtype=x.dtype, like=like(x)), x.shape)


def _einsum_path_rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
    """Metadata: the path for one example, from stand-ins of the per-example shapes."""
    return np.einsum_path(*(_stand_in(trace, a) for a in args), **kwargs)


# -- convolve / correlate ----------------------------------------------------------------

_MODES = {"valid": "valid", "same": "same", "full": "full", 0: "valid", 1: "same", 2: "full"}
# both operands batched: sliding windows and one einsum up to this many products per
# example; above it NumPy's per-example kernel (cache-resident rows) is faster
_WINDOWS_MAX = 1 << 14


def _conv_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    """`np.convolve(a, v, mode="full")` and `np.correlate(a, v, mode="valid")` on 1-d
    examples, computed in full mode and cut to `mode` (NumPy's offsets)."""
    conv = func is np.convolve
    default = "full" if conv else "valid"
    if conv:
        empty = ("a cannot be empty", "v cannot be empty")
    else:
        empty = ("first array argument cannot be empty", "second array argument cannot be empty")

    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        mode = get_arg(args, kwargs, 2, "mode", default)
        if mode not in _MODES:  # NumPy's own error (NumPy 1.26: a warning, and the mode)
            mode = {4: "full", 3: "same", 2: "valid"}[len(func(np.ones(3), np.ones(2), mode))]
        mode = _MODES[mode]
        (va, ba, sa), (vv, bv, sv) = (operand_parts(trace, x) for x in args[:2])
        if len(sa) > 1 or len(sv) > 1:
            raise ValueError("object too deep for desired array")
        if not conv and (not sa or not sv):
            raise ValueError("object of too small depth for desired array")
        va, vv = _as_1d(va, ba, sa), _as_1d(vv, bv, sv)
        n, m = math.prod(sa), math.prod(sv)
        # NumPy 1.26's convolve swaps a shorter `a` with `v` before checking
        sizes = (m, n) if conv and m > n and not NUMPY2 else (n, m)
        for size, msg in zip(sizes, empty, strict=True):
            if size == 0:
                raise ValueError(msg)
        if trace.axis_size == 0:
            like = va if ba else vv
            dtype = np.result_type(va.dtype, vv.dtype)
            return trace.wrap(np.zeros_like(like, shape=(0, _mode_len(mode, n, m)), dtype=dtype))
        if not _batchable_values(va, vv, min(n, m)):
            rows = (
                zip(va, vv, strict=True)
                if ba and bv
                else ((x, vv) for x in va)
                if ba
                else ((va, y) for y in vv)
            )
            return trace.wrap(np.stack([func(x, y, mode) for x, y in rows]))
        if ba and bv:
            full = _full_both(func, va, vv, n, m)
            if full is None:  # long rows: NumPy's kernel row by row is the fastest
                return trace.wrap(np.stack([func(x, y, mode) for x, y in zip(va, vv, strict=True)]))
        else:
            full = _full_one(conv, va, ba, vv, n, m)
        offset = _mode_offset(mode, conv, n, m)
        return trace.wrap(full[:, offset : offset + _mode_len(mode, n, m)])

    return rule


def _batchable_values(a: Any, b: Any, terms: int) -> bool:
    """Whether the batched forms below give what NumPy's kernel gives row by row: NumPy
    arrays (False for others: their values are not read) of finite numbers whose sums of
    `terms` products cannot overflow. NumPy's kernel sums only the products of
    overlapping elements; the batched forms multiply zeros of padding too (an inf or NaN
    becomes NaN where NumPy's result is finite, and leaks into the next row laid end to
    end), and sum in other orders, BLAS's with fused multiply-adds (an overflowing sum
    stays inf where NumPy's makes NaN). Elsewhere the rule runs NumPy's kernel row by
    row. One bound covers both: an inf or NaN makes it inf or NaN, never below the
    dtype's largest value."""
    if type(a) is not np.ndarray or type(b) is not np.ndarray:
        return False
    if a.dtype.kind not in "biufc" or b.dtype.kind not in "biufc":
        return False  # (objects: NumPy's kernel adds Python numbers, in its order)
    if a.dtype.kind in "biu" and b.dtype.kind in "biu" or not a.size or not b.size:
        return True  # (integers wrap the same in any order)
    largest = [
        float(np.abs(v).max()) if v.dtype.kind == "c" else max(float(v.max()), -float(v.min()))
        for v in (a, b)
    ]
    top = float(np.finfo(np.result_type(a.dtype, b.dtype, np.float16)).max)
    return largest[0] * largest[1] * terms * 4 < top


def _as_1d(v: Any, batched: bool, shape: tuple[Any, ...]) -> Any:
    if len(shape) == 1:
        return v
    return np.reshape(v, (v.shape[0], 1) if batched else (1,))


def _mode_len(mode: str, n: int, m: int) -> int:
    return {"full": n + m - 1, "same": max(n, m), "valid": max(n, m) - min(n, m) + 1}[mode]


def _mode_offset(mode: str, conv: bool, n: int, m: int) -> int:
    s = min(n, m)
    if mode == "valid":
        return s - 1
    if mode == "same":
        return s // 2 if not conv and n < m else (s - 1) // 2
    return 0


def _padded(v: Any, pad: int) -> Any:
    """Zeros on both sides of the last axis."""
    z = np.zeros_like(v, shape=(*v.shape[:-1], pad))
    return np.concatenate([z, v, z], axis=-1)


def _full_one(conv: bool, va: Any, ba: bool, vv: Any, n: int, m: int) -> Any:
    """Full-mode result when exactly one operand is batched, shape (B, n + m - 1)."""
    if not conv and _is_complex(va, vv):
        if ba:  # correlate(a, v) = sum a[j + k] conj(v[j]): fold the conj into v
            return _full_one(True, va, True, np.conjugate(vv)[::-1], n, m)
        # correlate(a, v)[t] = conj(correlate(v, a))[L - 1 - t]
        return np.conjugate(_full_one(False, vv, True, va, m, n)[:, ::-1])
    if not conv:  # real correlate(a, v) = convolve(a, v[::-1])
        if ba:
            return _full_one(True, va, True, vv[::-1], n, m)
        return _full_one(True, vv, True, va[::-1], m, n)[:, ::-1]
    xb, k, nx, nk = (va, vv, n, m) if ba else (vv, va, m, n)  # convolution commutes
    length = nx + nk - 1
    if (
        _TOEPLITZ_MAX_KERNEL >= nk >= _TOEPLITZ_MIN_KERNEL
        and nx >= nk
        and _gemm_ready(xb, k, length)
    ):
        return _blocked_toeplitz(xb, k, nx, nk)
    if nx >= nk:
        # rows with nk - 1 trailing zeros laid end to end: one full convolution of that
        # long vector holds every row's full convolution (NumPy's own kernel, one copy)
        rows = xb.shape[0]
        padded = np.concatenate([xb, np.zeros_like(xb, shape=(rows, nk - 1))], axis=1)
        out = np.convolve(np.reshape(padded, (rows * length,)), k, "full")
        return np.reshape(out[: rows * length], (rows, length))
    # short batched rows, long kernel: one GEMM with the (nx, length) Toeplitz matrix
    idx = np.arange(length, like=like(k))[None, :] - np.arange(nx, like=like(k))[:, None] + (nx - 1)
    with np.errstate(all="ignore"):  # (NumPy's convolve reports no overflow: matmul would)
        return xb @ _padded(k, nx - 1)[idx]


_TOEPLITZ_MIN_KERNEL = 16  # kernel taps (at most `_TOEPLITZ_MAX_KERNEL`: the Toeplitz
_TOEPLITZ_MAX_KERNEL = 64  # matrix grows as their square; nk=128 took 5.9 ms against 2.4)...
_TOEPLITZ_MIN_OUTPUTS = 1 << 14  # ...and outputs of the whole batch for the blocked GEMM
_GEMM_DTYPES = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.complex64, np.complex128))


def _gemm_ready(xb: Any, k: Any, length: int) -> bool:
    return (
        xb.shape[0] * length >= _TOEPLITZ_MIN_OUTPUTS
        and not on_pool_thread()  # (see `_blocked_toeplitz`)
        and type(xb) is np.ndarray  # (windows are strided views: NumPy's arrays only)
        and type(k) is np.ndarray
        and xb.dtype in _GEMM_DTYPES
        and k.dtype == xb.dtype
    )


_TOEPLITZ_ROWS_BYTES = 1 << 17  # the rows one GEMM reads at a time


def _blocked_toeplitz(xb: np.ndarray, k: np.ndarray, nx: int, nk: int) -> np.ndarray:
    """Full convolutions of the rows of `xb` (B, nx) with a shared kernel `k` (nk <= nx)
    in blocks of `2 nk` outputs: each block is one row of a GEMM, the `3 nk - 1` inputs it
    reads (a window of the zero-padded row) times the Toeplitz matrix of `k`. BLAS runs
    it ~2.8x faster than NumPy's kernel on the rows laid end to end (B=500, nx=1024,
    nk=32: 1.9 against 5.3 ms, BLAS on both cores); for short kernels it is slower (nk=8:
    1.1 against 0.9), so those keep the long convolution, as chunks on the pool's threads
    do (one BLAS thread each: twice the arithmetic then loses). A few rows at a time
    (`_TOEPLITZ_ROWS_BYTES` of them), written into the result: temporaries of the whole
    batch (the padded rows, their windows, the products) are megabytes of new memory at
    every call where the allocator gives large blocks back, whose page faults cost more
    than BLAS gains (5-10 ms against 6.5 for the long convolution in a fresh process).
    Sums in BLAS's order: the loop's values up to rounding (as the Toeplitz GEMM for
    short rows below)."""
    from numpy.lib.stride_tricks import sliding_window_view

    rows, length, block = xb.shape[0], nx + nk - 1, 2 * nk
    blocks = -(-length // block)
    width = blocks * block + nk - 1
    # output u of a block reads window entry r with the kernel's tap u + nk - 1 - r
    tap = np.arange(block)[None, :] + (nk - 1) - np.arange(block + nk - 1)[:, None]
    toeplitz = np.where((tap >= 0) & (tap < nk), k[np.clip(tap, 0, nk - 1)], 0).astype(k.dtype)
    out = np.empty((rows, blocks * block), dtype=xb.dtype)
    step = max(1, _TOEPLITZ_ROWS_BYTES // (width * xb.itemsize))
    padded = np.zeros((min(step, rows), width), dtype=xb.dtype)
    for start in range(0, rows, step):  # (no overflow: `_batchable_values`; none to report)
        part = xb[start : start + step]
        here = padded[: len(part)]
        here[:, nk - 1 : nk - 1 + nx] = part
        windows = sliding_window_view(here, block + nk - 1, axis=1)[:, ::block]
        flat = np.reshape(windows, (len(part) * blocks, block + nk - 1))
        np.matmul(flat, toeplitz, out=np.reshape(out[start : start + len(part)], (-1, block)))
    return out[:, :length]


def _full_both(func: Callable[..., Any], va: Any, vv: Any, n: int, m: int) -> Any:
    """Full-mode result when both operands are batched: windows of the longer operand
    times the shorter one (one einsum); None when the rows are too long for that."""
    plain = type(va) is np.ndarray and type(vv) is np.ndarray  # windows are views
    if not plain or (n + m) * min(n, m) > _WINDOWS_MAX:
        return None
    conv = func is np.convolve
    if not conv:
        if n < m:  # correlate(a, v)[t] = conj(correlate(v, a))[L - 1 - t]
            out = _full_both(func, vv, va, m, n)
            return (np.conjugate(out) if _is_complex(out) else out)[:, ::-1]
        return _windows_dot(va, np.conjugate(vv) if _is_complex(vv) else vv, m)
    if n < m:
        va, vv, n, m = vv, va, m, n
    return _windows_dot(va, vv[:, ::-1], m)


def _windows_dot(x: Any, k: Any, m: int) -> Any:
    from numpy.lib.stride_tricks import sliding_window_view

    windows = sliding_window_view(_padded(x, m - 1), m, axis=-1)
    return np.einsum("blm,bm->bl", windows, k)


defbatch(np.dot, lambda f: dot_rule)


def _tensordot_impl(a: Any, b: Any, axes: Any = 2) -> Any:
    sa, sb = np.shape(a), np.shape(b)
    a_axes, b_axes = _tensordot_axes(axes, len(sa), len(sb))
    a_free = [i for i in range(len(sa)) if i not in a_axes]
    b_free = [i for i in range(len(sb)) if i not in b_axes]
    k = math.prod(sa[i] for i in a_axes)
    am = np.reshape(np.transpose(a, a_free + a_axes), (math.prod(sa[i] for i in a_free), k))
    bm = np.reshape(np.transpose(b, b_axes + b_free), (k, math.prod(sb[i] for i in b_free)))
    return np.reshape(np.matmul(am, bm), [sa[i] for i in a_free] + [sb[i] for i in b_free])


def _dot_impl(a: Any, b: Any, out: Any = None) -> Any:
    na, nb = np.ndim(a), np.ndim(b)
    if na == 0 or nb == 0:
        return np.multiply(a, b)
    if na <= 2 and nb <= 2:
        return np.matmul(a, b)
    return _tensordot_impl(a, b, ([na - 1], [max(nb - 2, 0)]))


defcomposite(np.dot, _dot_impl)
defbatch(np.inner, lambda f: _inner_rule)


def _inner_impl(a: Any, b: Any) -> Any:
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return np.multiply(a, b)
    return _tensordot_impl(a, b, ([np.ndim(a) - 1], [np.ndim(b) - 1]))


defcomposite(np.inner, _inner_impl)
defbatch(np.vdot, lambda f: _vdot_rule)


def _vdot_impl(a: Any, b: Any) -> Any:
    a = np.ravel(np.conjugate(a) if _is_complex(a) else a)
    return np.matmul(a, np.ravel(b))


defcomposite(np.vdot, _vdot_impl)
defbatch([np.outer, *present(np.linalg, "outer")], _outer_rule)


def _outer_impl(a: Any, b: Any, out: Any = None) -> Any:
    return np.multiply(np.reshape(a, (-1, 1)), np.reshape(b, (1, -1)))


defcomposite([np.outer, *present(np.linalg, "outer")], _outer_impl)
defbatch([np.tensordot, *present(np.linalg, "tensordot")], _tensordot_rule)


defcomposite(np.tensordot, _tensordot_impl)
defcomposite(present(np.linalg, "tensordot"), lambda a, b, axes=2: _tensordot_impl(a, b, axes))
defbatch(np.kron, lambda f: _kron_rule)


def _kron_impl(a: Any, b: Any) -> Any:
    sa, sb = np.shape(a), np.shape(b)
    if not sa or not sb:
        return np.multiply(a, b)
    nd = max(len(sa), len(sb))
    pa, pb = (1,) * (nd - len(sa)) + sa, (1,) * (nd - len(sb)) + sb
    a = np.reshape(a, tuple(d for s in pa for d in (s, 1)))
    b = np.reshape(b, tuple(d for s in pb for d in (1, s)))
    return np.reshape(np.multiply(a, b), tuple(x * y for x, y in zip(pa, pb, strict=True)))


defcomposite(np.kron, _kron_impl)


def _einsum_gives_a_view(args: tuple[Any, ...], kwargs: dict[Any, Any]) -> bool:
    """NumPy's einsum of one operand that sums over no label (a transpose or a diagonal,
    `'ij->ji'`, `'ii->i'`) returns a view of it: a later write into either is seen by
    the other."""
    if kwargs.get("out") is not None:
        return False
    try:
        subscripts, operands = _einsum_form(args)
    except (TypeError, ValueError):
        return False  # (the rule gives NumPy's error)
    ins, arrow, output = subscripts.partition("->")
    if len(operands) != 1 or "," in ins:
        return False
    if not arrow:
        output = _implicit_output([ins])
    return set(ins) - {"."} <= set(output)


defbatch(np.einsum, lambda f: _einsum_rule, may_view=_einsum_gives_a_view)


def _explicit_einsum(args: tuple[Any, ...]) -> tuple[list[str], str, list[Any]]:
    """`(inputs, output, operands)` of an einsum call with every axis labelled:
    broadcast (`...`) axes get spare labels, an implicit output is made explicit."""
    subscripts, operands = _einsum_form(args)
    ins, arrow, output = subscripts.partition("->")
    inputs = ins.split(",")
    if not arrow:
        output = _implicit_output(inputs)
    spare = [c for c in _LABELS if c not in subscripts]
    ranks = [np.ndim(x) - len(s.replace("...", "")) for s, x in zip(inputs, operands, strict=True)]
    wide = max((r for s, r in zip(inputs, ranks, strict=True) if "..." in s), default=0)
    labels = "".join(spare[:wide])
    inputs = [s.replace("...", labels[wide - r :]) for s, r in zip(inputs, ranks, strict=True)]
    return inputs, output.replace("...", labels), operands


def _einsum_jvp(
    argnum: Any, t: Any, ans: Any, args: tuple[Any, ...], kwargs: dict[Any, Any]
) -> Any:
    new_args = list(args)
    new_args[argnum] = t
    return np.einsum(*new_args, **kwargs)


def _einsum_vjp(
    argnum: Any, ans: Any, args: tuple[Any, ...], kwargs: dict[Any, Any]
) -> Callable[..., Any]:
    """The cotangent of operand `i` is the einsum of the cotangent with the other
    operands into `i`'s labels; a label repeated in `i` (a diagonal) takes an identity
    operand, a label only `i` has (summed away) takes ones."""
    inputs, output, operands = _explicit_einsum(args)
    i = argnum - 1 if isinstance(args[0], str) else argnum // 2
    x = operands[i]
    target, extra_specs, extras = "", [], []
    spare = iter(c for c in _LABELS if c not in "".join(inputs) + output)
    elsewhere = set(output + "".join(s for j, s in enumerate(inputs) if j != i))
    for c, size in zip(inputs[i], np.shape(x), strict=True):
        if c in target:  # a diagonal: an identity ties the new label to the first
            new = next(spare)
            extra_specs.append(c + new)
            extras.append(np.eye(size, dtype=x.dtype))
            c = new
        elif c not in elsewhere:
            extra_specs.append(c)
            extras.append(np.ones(size, dtype=x.dtype))
        target += c
    others = [(s, v) for j, (s, v) in enumerate(zip(inputs, operands, strict=True)) if j != i]
    spec = ",".join([output, *(s for s, _ in others), *extra_specs]) + "->" + target
    optimize = kwargs.get("optimize", False)
    return lambda g: np.einsum(spec, g, *(v for _, v in others), *extras, optimize=optimize)


defjvp_argnum(np.einsum, _einsum_jvp)
defvjp_argnum(np.einsum, _einsum_vjp)
defbatch(np.einsum_path, lambda f: _einsum_path_rule)


def _einsum_path_impl(*args: Any, **kwargs: Any) -> Any:
    """Metadata: a path from stand-ins of the operands' shapes."""
    stand_ins = [np.zeros(np.shape(a), dtype=a.dtype) if hasattr(a, "dtype") else a for a in args]
    return np.einsum_path(*stand_ins, **kwargs)


defcomposite(np.einsum_path, _einsum_path_impl)
defbatch([np.convolve, np.correlate], _conv_rule)


def _conv_impl(a: Any, v: Any, mode: Any = "full") -> Any:
    """Every mode as a slice of the full convolution (whose rules are below)."""
    if mode in ("full", 2):
        return NotImplemented
    if mode not in _MODES:
        return NotImplemented  # NumPy's error from the function itself
    n, m = max(np.size(a), 1), max(np.size(v), 1)
    mode = _MODES[mode]
    start = _mode_offset(mode, True, n, m)
    return np.convolve(a, v, "full")[start : start + _mode_len(mode, n, m)]


def _correlate_impl(a: Any, v: Any, mode: Any = "valid") -> Any:
    """correlate(a, v) = convolve(a, reversed conj(v)), cut to the mode's offsets."""
    if mode not in _MODES or np.ndim(a) != 1 or np.ndim(v) != 1:
        return NotImplemented  # NumPy's error from the function itself
    n, m = np.size(a), np.size(v)
    mode = _MODES[mode]
    start = _mode_offset(mode, False, n, m)
    full = np.convolve(a, (_conj(v))[::-1], "full")
    return full[start : start + _mode_len(mode, n, m)]


def _conv_ct(g: Any, other: Any, shape: tuple[Any, ...]) -> Any:
    """Cotangent of one operand of a full convolution: a valid convolution of the
    cotangent with the other operand reversed."""
    return np.reshape(np.convolve(g, np.ravel(other)[::-1], "valid"), shape)


defcomposite(np.convolve, _conv_impl)
defcomposite(np.correlate, _correlate_impl)
defjvp(
    np.convolve,
    lambda t, ans, a, v, mode="full": np.convolve(t, v, mode),
    lambda t, ans, a, v, mode="full": np.convolve(a, t, mode),
)
defvjp(
    np.convolve,
    lambda ans, a, v, mode="full": lambda g: _conv_ct(g, v, np.shape(a)),
    lambda ans, a, v, mode="full": lambda g: _conv_ct(g, a, np.shape(v)),
)
defbatch(present(np.linalg, "matmul"), lambda f: _matmul_rule)


defcomposite(present(np.linalg, "matmul"), lambda a, b: np.matmul(a, b))
register(np.matmul, "batch", _matmul_rule)  # over the generic gufunc rule (a default)


# matmul and the other contractions among the gufuncs: derivatives
def _matmul_ct_a(g: Any, a: Any, b: Any) -> Any:
    if b.ndim == 1:
        return g * b if a.ndim == 1 else g[..., None] * b
    bt = np.swapaxes(b, -1, -2)
    if a.ndim == 1:
        return np.matmul(b, g) if b.ndim == 2 else np.matmul(g[..., None, :], bt)[..., 0, :]
    return np.matmul(g, bt)


def _matmul_ct_b(g: Any, a: Any, b: Any) -> Any:
    if a.ndim == 1:
        return g * a if b.ndim == 1 else a[:, None] * g[..., None, :]
    at = np.swapaxes(a, -1, -2)
    if b.ndim == 1:
        return np.matmul(g, a) if a.ndim == 2 else np.matmul(at, g[..., None])[..., 0]
    if at.shape[-1] == 1:  # an outer product: elementwise is faster than matmul
        return at * g
    return np.matmul(at, g)


def _matmul_axes(a: Any, b: Any, **kwargs: Any) -> Any:
    """`matmul(..., axes=...)` as moveaxis around a plain matmul (2-d operands' axes)."""
    axes = kwargs.pop("axes", None)
    if axes is None or len(axes) != 3 or any(len(ax) != 2 for ax in axes):
        return NotImplemented
    (a0, a1), (b0, b1), (o0, o1) = axes
    a = np.moveaxis(a, (a0, a1), (-2, -1))
    out = np.matmul(a, np.moveaxis(b, (b0, b1), (-2, -1)), **kwargs)
    return np.moveaxis(out, (-2, -1), (o0, o1))


defcomposite(np.matmul, _matmul_axes)
defjvp(
    np.matmul,
    lambda t, ans, a, b, **kw: np.matmul(t, b, **kw),
    lambda t, ans, a, b, **kw: np.matmul(a, t, **kw),
)
defvjp(
    np.matmul,
    lambda ans, a, b, **kw: lambda g: _matmul_ct_a(g, a, b),
    lambda ans, a, b, **kw: lambda g: _matmul_ct_b(g, a, b),
)
_VECTOR_GUFUNCS = [  # (name, per-example ndims, conjugates its first operand, b_axis)
    ("vecdot", {(1, 1), (2, 1), (1, 2)}, True, -1),
    ("matvec", {(2, 1)}, False, -1),
    ("vecmat", {(1, 2)}, True, -2),
]
for _name, _ndims, _conj_first, _b_axis in _VECTOR_GUFUNCS:
    if hasattr(np, _name):
        _rule = _vector_gufunc_rule(getattr(np, _name), _ndims, _conj_first, _b_axis)
        register(getattr(np, _name), "batch", _rule)


def _vecdot(a: Any, b: Any, axis: int = -1, **kwargs: Any) -> Any:
    if kwargs.get("axes") is not None:
        return NotImplemented
    return np.sum(np.conjugate(a) * b, axis=axis)


defcomposite(present(np, "vecdot"), _vecdot)
if hasattr(np, "matvec"):
    defcomposite(np.matvec, lambda a, v, **kw: np.matmul(a, v[..., None])[..., 0] if not kw
                 else NotImplemented)  # fmt: skip
    defcomposite(np.vecmat, lambda v, a, **kw: np.matmul(np.conjugate(v)[..., None, :], a)[
        ..., 0, :] if not kw else NotImplemented)  # fmt: skip
