"""Indexing family: `x[idx]`, `x[idx] = v` (functional), gather and scatter.

The heart is `batched_index`: it turns one example's index into an index of the
batched value, and says how to permute the result so the batch axis is at the front
and the other axes are where NumPy puts them for one example (NumPy moves advanced
index dimensions to the front when the advanced indices are not adjacent).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._batching import (
    BatchTrace,
    align_rank,
    aligned_operands,
    batch_rules,
    bcast_batch,
    example_ndim,
    is_batched,
    unwrap,
)
from .._core import Tracer
from ._dispatch import defbatch
from ._tracer_api import GETITEM, SETITEM


def _is_array(c: Any) -> bool:
    return isinstance(c, np.ndarray | Tracer)


def _is_int(c: Any) -> bool:
    return isinstance(c, int | np.integer) and not isinstance(c, bool | np.bool_)


def _is_bool_array(c: Any) -> bool:
    return _is_array(c) and c.dtype == np.bool_


def _components(trace: BatchTrace, ndim: int, idx: Any) -> list:
    """One example's index as a list of components, one per consumed axis or `None`.

    Ellipsis is expanded, lists become arrays, unbatched boolean masks become the
    integer arrays of their `nonzero()`.
    """
    if not isinstance(idx, tuple):
        idx = (idx,)
    comps = [np.asarray(c) if isinstance(c, list) else c for c in idx]
    consumed = sum(
        c.ndim if _is_bool_array(c) else 0 if c is None or c is Ellipsis else 1 for c in comps
    )
    out: list = []
    for c in comps:
        if c is Ellipsis:
            out.extend([slice(None)] * (ndim - consumed))
        elif _is_bool_array(c) and not is_batched(trace, c):
            out.extend(np.nonzero(c) if c.ndim else [c])
        else:
            out.append(c)
    if not any(c is Ellipsis for c in comps):
        out.extend([slice(None)] * (ndim - consumed))
    return out


def _result_dims(c: Any) -> int:
    """How many result axes a basic component makes (a slice or `None`: one)."""
    return 1 if isinstance(c, slice) or c is None else 0


def batched_index(trace: BatchTrace, ndim: int, idx: Any) -> tuple[tuple, tuple | None]:
    """`(index, perm)`: index the batched value with `index`, then transpose the
    result by `perm` (when not None) to get the batch-front per-example layout."""
    comps = _components(trace, ndim, idx)
    if any(is_batched(trace, c) and c.dtype == np.bool_ for c in comps):
        raise trace.concretization(
            "indexing with a batched boolean mask (the result's shape depends on the data)",
            "use `np.where(mask, x, fill)` to keep the shape, or `np.compress`/`np.nonzero` "
            "outside the vmapped function",
        )
    has_arrays = any(_is_array(c) for c in comps)
    adv = [i for i, c in enumerate(comps) if _is_array(c) or (has_arrays and _is_int(c))]
    adjacent = not adv or adv[-1] - adv[0] + 1 == len(adv)
    if not any(is_batched(trace, c) for c in comps):
        if has_arrays and not adjacent:  # NumPy put the advanced dims before the batch
            adv_nd = max(np.ndim(comps[i]) for i in adv)
            perm = (adv_nd, *range(adv_nd), *range(adv_nd + 1, _result_ndim(comps, adv) + 1))
            return (slice(None), *comps), perm
        return (slice(None), *comps), None
    rank = max(example_ndim(trace, comps[i]) for i in adv)
    arange = np.arange(trace.axis_size).reshape((-1,) + (1,) * rank)
    for i in adv:
        v, b = unwrap(trace, comps[i])
        comps[i] = align_rank(v, example_ndim(trace, comps[i]), rank) if b else v
    index = (arange, *comps)
    if not adjacent or adv[0] == 0:
        return index, None
    before = sum(_result_dims(c) for c in comps[: adv[0]])
    total = 1 + rank + sum(_result_dims(c) for c in comps)
    perm = (
        0,
        *range(1 + rank, 1 + rank + before),
        *range(1, 1 + rank),
        *range(1 + rank + before, total),
    )
    return index, perm


def _result_ndim(comps: list, adv: list) -> int:
    adv_nd = max(np.ndim(comps[i]) for i in adv) if adv else 0
    return adv_nd + sum(_result_dims(c) for c in comps)


def getitem_rule(trace: BatchTrace, args: tuple, kwargs: dict) -> Any:
    x, idx = args
    index, perm = batched_index(trace, example_ndim(trace, x), idx)
    out = bcast_batch(trace, x)[index]
    return trace.wrap(out if perm is None else out.transpose(perm))


def setitem_rule(trace: BatchTrace, args: tuple, kwargs: dict) -> Any:
    x, idx, value = args
    nd = example_ndim(trace, x)
    mask = _batched_mask(trace, idx)
    if mask is not None:
        return _masked_update(trace, x, mask, value)
    index, perm = batched_index(trace, nd, idx)
    out = bcast_batch(trace, x).copy()
    v, vb = unwrap(trace, value)
    if perm is None and not vb:
        out[index] = v
        return trace.wrap(out)
    # the written region's batched shape; a broadcast dummy makes basic indexing free
    region = np.broadcast_to(np.zeros((), dtype=np.bool_), out.shape)[index].shape
    desired = region if perm is None else tuple(region[p] for p in perm)
    if vb:
        v = align_rank(v, example_ndim(trace, value), len(desired) - 1)
    if perm is not None:
        v = np.broadcast_to(v, desired).transpose(np.argsort(perm))
    out[index] = v
    return trace.wrap(out)


def _batched_mask(trace: BatchTrace, idx: Any) -> Any:
    comps = idx if isinstance(idx, tuple) else (idx,)
    if any(is_batched(trace, c) and c.dtype == np.bool_ for c in comps):
        if len(comps) != 1:
            raise trace.concretization(
                "index assignment with a batched boolean mask combined with other indices",
                "use `x = np.where(mask, value, x)`",
            )
        return comps[0]
    return None


def _masked_update(trace: BatchTrace, x: Any, mask: Any, value: Any) -> Any:
    """`x[mask] = value` with a batched mask: `np.where` when `value` is a scalar."""
    if np.size(value) != 1:
        raise trace.concretization(
            "index assignment of an array through a batched boolean mask (how many values "
            "are taken depends on the data)",
            "use `x = np.where(mask, values, x)` with `values` shaped like `x`",
        )
    nd = example_ndim(trace, x)
    m = mask.val.reshape(mask.val.shape + (1,) * (nd - mask.ndim))
    v, vb = unwrap(trace, value)
    if vb:
        v = v.reshape((-1,) + (1,) * nd)
    else:
        v = np.reshape(v, ())
    xv = bcast_batch(trace, x)
    return trace.wrap(np.where(m, v, xv).astype(xv.dtype, copy=False))


batch_rules[GETITEM] = getitem_rule
batch_rules[SETITEM] = setitem_rule


def _where_rule(func: Any) -> Any:
    def rule(trace: BatchTrace, args: tuple, kwargs: dict) -> Any:
        if len(args) == 1:  # np.where(cond) is np.nonzero(cond)
            return np.nonzero(args[0])
        return trace.wrap(np.where(*aligned_operands(trace, args)))

    return rule


defbatch(np.where, _where_rule)
