"""Elementwise family: every ufunc and each of its methods, and generalized ufuncs.

One rule per ufunc method serves all ufuncs (NumPy's and any library's, such as
`scipy.special`): batched operands get the batch axis at the front of the broadcast
shape, unbatched ones are left alone and broadcast by NumPy (never copied).
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

import numpy as np

from .._batching import (
    BatchTrace,
    align_rank,
    aligned_operands,
    bcast_batch,
    example_ndim,
    is_batched,
    unwrap,
    wrap_tree,
)
from ._dispatch import def_ufunc_rules


def _wrap(trace: BatchTrace, out: Any) -> Any:
    return tuple(trace.wrap(o) for o in out) if isinstance(out, tuple) else trace.wrap(out)


def call_rule(ufunc: np.ufunc) -> Any:
    if ufunc.signature is not None:
        return gufunc_rule(ufunc)

    def rule(trace: BatchTrace, args: tuple, kwargs: dict) -> Any:
        where = kwargs.get("where", True)
        if where is not True:
            *vals, where = aligned_operands(trace, (*args, where))
            kwargs = {**kwargs, "where": where}
        else:
            vals = aligned_operands(trace, args)
        return _wrap(trace, ufunc(*vals, **kwargs))

    return rule


# -- generalized ufuncs (matmul, vecdot, matvec, ...) --------------------------------


@cache
def _parse_signature(signature: str) -> tuple[list[list[tuple[str, bool]]], list]:
    """`"(n?,k),(k,m?)->(n?,m?)"` -> per operand and per output: [(dim, optional)]."""
    ins, outs = signature.replace(" ", "").split("->")

    def groups(s: str) -> list[list[tuple[str, bool]]]:
        return [
            [(d.rstrip("?"), d.endswith("?")) for d in g.split(",") if d]
            for g in re.findall(r"\(([^)]*)\)", s)
        ]

    return groups(ins), groups(outs)


def gufunc_rule(ufunc: np.ufunc) -> Any:
    in_core, out_core = _parse_signature(ufunc.signature)

    def rule(trace: BatchTrace, args: tuple, kwargs: dict) -> Any:
        if kwargs.get("axes") is not None or kwargs.get("axis") is not None:
            return _gufunc_with_axes(trace, ufunc, args, kwargs)
        expanded: set[str] = set()  # optional dims we added (to squeeze afterwards)
        absent: set[str] = set()  # optional dims NumPy drops itself (unbatched operands)
        loop_ranks, vals = [], []
        for x, core in zip(args, in_core, strict=True):
            v, b = unwrap(trace, x)
            nd = example_ndim(trace, x)
            ncore = len(core)
            if nd < ncore:  # optional core dims missing (a 1-d operand of matmul)
                gone = [i for i, (_, opt) in enumerate(core) if opt][: ncore - nd]
                names = {core[i][0] for i in gone}
                if b:
                    for i in gone:
                        v = np.expand_dims(v, v.ndim - ncore + i + 1)
                    expanded |= names
                    nd = ncore
                else:
                    absent |= names
                    ncore = nd
            vals.append((v, b, nd - ncore))
            loop_ranks.append(nd - ncore)
        rank = max(loop_ranks)
        ready = [align_rank(v, r, rank) if b else v for v, b, r in vals]
        out = ufunc(*ready, **kwargs)
        outs = out if isinstance(out, tuple) else (out,)
        fixed = []
        for o, core in zip(outs, out_core, strict=True):
            present = [name for name, _ in core if name not in absent]
            drop = [i for i, name in enumerate(present) if name in expanded]
            axes = tuple(o.ndim - len(present) + i for i in drop)
            fixed.append(np.squeeze(o, axis=axes) if axes else o)
        return _wrap(trace, tuple(fixed) if isinstance(out, tuple) else fixed[0])

    return rule


def _gufunc_with_axes(trace: BatchTrace, ufunc: np.ufunc, args: tuple, kwargs: dict) -> Any:
    """`axes=`/`axis=` name per-example axes: make them absolute, then shift by one."""
    in_core, out_core = _parse_signature(ufunc.signature)
    ranks = [example_ndim(trace, x) for x in args]
    vals = [bcast_batch(trace, x) for x in args]
    kwargs = dict(kwargs)
    if kwargs.get("axis") is not None:
        axis = kwargs.pop("axis")
        kwargs["axes"] = [(axis,) if core else () for core in in_core + out_core]
    axes = kwargs.pop("axes")
    out_rank = max(r - len(c) for r, c in zip(ranks, in_core, strict=True))
    all_ranks = ranks + [out_rank + len(c) for c in out_core]
    shifted = []
    for ax, r in zip(axes, all_ranks, strict=False):
        ax = (ax,) if isinstance(ax, int) else tuple(ax)
        shifted.append(tuple(a % r + 1 if a < 0 else a + 1 for a in ax))
    return _wrap(trace, ufunc(*vals, axes=shifted, **kwargs))


# -- reduce / accumulate / reduceat / outer / at ---------------------------------------


def _shift_axis(axis: Any, ndim: int) -> Any:
    """A per-example axis (or tuple, or None = all) as an axis of the batched value."""
    if axis is None:
        return tuple(range(1, ndim + 1))
    if isinstance(axis, tuple):
        return tuple(_shift_one(a, ndim) for a in axis)
    return _shift_one(axis, ndim)


def _shift_one(axis: int, ndim: int) -> int:
    axis = operator_index(axis)
    if not -ndim <= axis < ndim:
        raise np.exceptions.AxisError(axis, ndim)
    return axis % ndim + 1


def operator_index(a: Any) -> int:
    import operator

    return operator.index(a)


def _reduce_kwargs(args: tuple, kwargs: dict, names: tuple[str, ...]) -> dict:
    """Positional arguments after the array, turned into keywords."""
    kwargs = dict(kwargs)
    for name, value in zip(names, args[1:], strict=False):
        kwargs[name] = value
    return kwargs


def reduce_rule(ufunc: np.ufunc) -> Any:
    def rule(trace: BatchTrace, args: tuple, kwargs: dict) -> Any:
        kwargs = _reduce_kwargs(args, kwargs, ("axis", "dtype", "out", "keepdims", "initial"))
        x = args[0]
        nd = example_ndim(trace, x)
        where = kwargs.get("where", True)
        if where is not True:
            v, kwargs["where"] = aligned_operands(trace, (x, where))
            if not is_batched(trace, x):  # only the mask is batched
                v = bcast_batch(trace, x)
        else:
            v = unwrap(trace, x)[0]
        axis = kwargs.get("axis", 0)
        kwargs["axis"] = _shift_axis(axis, nd)
        return trace.wrap(ufunc.reduce(v, **kwargs))

    return rule


def accumulate_rule(ufunc: np.ufunc) -> Any:
    def rule(trace: BatchTrace, args: tuple, kwargs: dict) -> Any:
        kwargs = _reduce_kwargs(args, kwargs, ("axis", "dtype", "out"))
        v = unwrap(trace, args[0])[0]
        kwargs["axis"] = _shift_one(kwargs.get("axis", 0), example_ndim(trace, args[0]))
        return trace.wrap(ufunc.accumulate(v, **kwargs))

    return rule


def reduceat_rule(ufunc: np.ufunc) -> Any:
    def rule(trace: BatchTrace, args: tuple, kwargs: dict) -> Any:
        kwargs = _reduce_kwargs(args, kwargs, ("indices", "axis", "dtype", "out"))
        indices = kwargs.pop("indices")
        if is_batched(trace, indices):
            raise trace.concretization(
                f"`np.{ufunc.__name__}.reduceat` with batched indices",
                "use unbatched indices, or `np.add.at`/`np.bincount` style scatter",
            )
        v = bcast_batch(trace, args[0])
        kwargs["axis"] = _shift_one(kwargs.get("axis", 0), example_ndim(trace, args[0]))
        return trace.wrap(ufunc.reduceat(v, indices, **kwargs))

    return rule


def outer_rule(ufunc: np.ufunc) -> Any:
    def rule(trace: BatchTrace, args: tuple, kwargs: dict) -> Any:
        a, b = args
        (va, ba), (vb, bb) = unwrap(trace, a), unwrap(trace, b)
        nb = example_ndim(trace, b)
        if ba:  # (B, *a) -> (B, *a, 1...1) so that it meets b's axes at the end
            va = va.reshape(va.shape + (1,) * nb)
        else:
            va = np.reshape(va, np.shape(va) + (1,) * nb)
        if bb:
            vb = align_rank(vb, nb, nb + example_ndim(trace, a))
        return wrap_tree(trace, ufunc(va, vb, **kwargs))

    return rule


def at_rule(ufunc: np.ufunc) -> Any:
    """`ufunc.at(a, indices, b)` in place -> the updated copy of `a` (assigned by caller)."""

    def rule(trace: BatchTrace, args: tuple, kwargs: dict) -> Any:
        from .indexing import batched_index

        a, indices, *rest = args
        base = bcast_batch(trace, a).copy()
        idx, _ = batched_index(trace, example_ndim(trace, a), indices)
        region_rank = None
        extra = []
        if rest:
            b = rest[0]
            vb, bb = unwrap(trace, b)
            if bb:
                region_rank = np.ndim(base[idx]) - 1
                vb = align_rank(vb, example_ndim(trace, b), region_rank)
            extra = [vb]
        ufunc.at(base, idx, *extra)
        return trace.wrap(base)

    return rule


def_ufunc_rules(
    {
        "__call__": call_rule,
        "reduce": reduce_rule,
        "accumulate": accumulate_rule,
        "reduceat": reduceat_rule,
        "outer": outer_rule,
        "at": at_rule,
    }
)
