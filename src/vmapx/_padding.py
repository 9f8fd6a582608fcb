"""The padded mode of `vmapx.map`: the padded axis of each argument, bucket sizes that bound
the padding, padded stacks, results cut back to the true lengths, and the check of a
sample against the unpadded loop."""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from typing import Any, cast

import numpy as np

from . import _pytree as optree  # optree in vmapx.config.pytree_namespace
from ._api import leaf_axes  # (a pytree prefix of axes to one axis per leaf, as in vmap)
from .errors import PaddingError

# the most candidate sizes the bucket search looks at (lengths round up to one of them first)
# (64: the search takes ~0.2 ms over the benchmark's 180 distinct lengths, 128 ~0.5 ms,
# for padding within 0.5% of it)
_MAX_CANDIDATES = 64


# -- which axis of each leaf pads -------------------------------------------------------


def leaf_pad_axes(spec: Any, example: Any, treedef: Any, nleaves: int, where: str) -> list[Any]:
    """The padded axis (int or None) of each leaf of one argument's `example`, from that
    argument's `pad_axes` entry (an int, None, or a pytree prefix of the example)."""
    if spec is None or isinstance(spec, numbers.Integral):
        return [spec] * nleaves
    if treedef is None:
        raise PaddingError(
            f"vmapx.map: the `pad_axes` entry for {where} is {spec!r}, a pytree, but the "
            "examples of that argument are single arrays; give an int or None"
        )
    return leaf_axes(
        spec,
        example,
        lambda e: PaddingError(
            f"vmapx.map: the `pad_axes` entry for {where} ({spec!r}) does not match the "
            f"structure of its examples: {e}"
        ),
    )


def width(leaves: list[Any], axes: list[Any]) -> int:
    """The elements of an example's padded arrays per unit of its length."""
    return sum(
        math.prod(x.shape[:ax]) * math.prod(x.shape[ax + 1 :])
        for x, ax in zip(leaves, axes, strict=True)
        if ax is not None
    )


def example_length(leaves: list[Any], axes: list[Any], index: int) -> tuple[int, list[Any]]:
    """The true length of example `index` (the size of its padded axes, which must agree)
    and each leaf's padded axis made non-negative (None where the leaf is not padded)."""
    length: Any = None
    normal: list[int | None] = []
    for leaf, ax in zip(leaves, axes, strict=True):
        if ax is None or not hasattr(leaf, "shape"):
            normal.append(None)
            continue
        nd = len(leaf.shape)
        if not -nd <= ax < nd:
            raise PaddingError(
                f"vmapx.map: pad axis {ax} is out of range for an array of shape "
                f"{tuple(leaf.shape)} in example {index}; valid axes are {-nd}..{nd - 1}"
                + (" (a 0-d array has no axis to pad: give it None)" if nd == 0 else "")
            )
        size = leaf.shape[ax]
        if length is not None and size != length:
            raise PaddingError(
                f"vmapx.map: the padded axes of example {index} have different sizes "
                f"({length} and {size}); every padded axis of an example must have its one "
                "true length (give the others None in `pad_axes`)"
            )
        length = size
        normal.append(ax % nd)
    if length is None:
        raise PaddingError(
            f"vmapx.map: `pad_axes` selects no array of example {index}, so it has no length "
            "to pad; give a pad axis for at least one array of every example"
        )
    return int(length), normal


# -- bucket sizes ------------------------------------------------------------------------


# "auto" buckets: one more batched group costs vmapx about as much time as this many more
# array elements in each NumPy call (measured on 2 cores: ~25 us of interpretation per call
# and group against ~0.5 ns per float64 element). On the benchmark's skewed lengths this
# picks 10 buckets (6 before the weight of large buckets, `auto_cost`, came in).
GROUP_COST_ELEMENTS = 50_000
MAX_AUTO_BUCKETS = 16
# "auto" buckets: a bucket of more than this many elements (512 KiB of float64) costs
# `OVER_CACHE` times more per element beyond them. Its arrays and NumPy's temporaries no
# longer fit the core's cache (~12 ns per element over the 55 NumPy calls of the
# benchmark's function against ~25-35 ns, 2 cores), and where glibc gives the blocks
# freed at the end of one bucket back to the system, the next bucket faults its pages in
# again (~3 000 faults a call at 6 buckets of ~1 MiB; which sizes fault depends on the
# process's past). `vmapx._heap_room` now keeps those blocks in the heap; with it, 5 to 10
# buckets measure within ~5% of each other on that batch (`benchmarks/ragged.md`).
CACHE_ELEMENTS = 64 << 10
OVER_CACHE = 1.5


def auto_cost(elements: Any) -> Any:
    """The cost that "auto" buckets weigh for buckets of `elements` padded elements (a
    number or an array), before `GROUP_COST_ELEMENTS` for each bucket."""
    return elements + OVER_CACHE * np.maximum(np.asarray(elements) - CACHE_ELEMENTS, 0)


def bucket_sizes(
    lengths: Sequence[int] | np.ndarray, buckets: int | str | Sequence[int],
    weights: Sequence[float] | np.ndarray | None = None,
) -> np.ndarray:  # fmt: skip
    """The padded size of each length: the length rounded up to a bucket size.

    `buckets` an int k: the k sizes that make the total padded size the least, each
    length weighted by `weights` (its examples' elements per unit of length; 1 if None),
    found exactly by dynamic programming over the distinct lengths (beyond 64 of them,
    each first rounded up to one of 64 spread evenly over them). `"auto"`: the number of
    sizes (at most 16) that makes the padded size plus `GROUP_COST_ELEMENTS` per bucket the
    least (each bucket's size weighed by `auto_cost`). A sequence: those sizes (a length
    beyond the largest keeps its own size)."""
    lengths = np.asarray(lengths, dtype=np.int64)
    if not len(lengths):
        return lengths
    if isinstance(buckets, numbers.Integral | str):
        weights = np.ones(len(lengths)) if weights is None else np.asarray(weights, np.float64)
        sizes = _optimal_sizes(lengths, weights, buckets)
    else:
        sizes = np.unique(np.asarray(buckets, dtype=np.int64))
    slot = np.searchsorted(sizes, lengths)
    inside = slot < len(sizes)
    return np.where(inside, sizes[np.minimum(slot, len(sizes) - 1)], lengths)


def _optimal_sizes(lengths: np.ndarray, weights: np.ndarray, k: int | str) -> np.ndarray:
    values, slot = np.unique(lengths, return_inverse=True)
    counts = np.bincount(slot.ravel(), weights=weights, minlength=len(values))
    kmax = MAX_AUTO_BUCKETS if k == "auto" else int(k)
    if len(values) == 1 or (k != "auto" and len(values) <= kmax):
        return values
    if len(values) > _MAX_CANDIDATES:  # round up to quantiles of the distinct lengths first
        pick = np.unique(np.linspace(0, len(values) - 1, _MAX_CANDIDATES).round().astype(int))
        slot = np.searchsorted(values[pick], values)
        values, counts = values[pick], np.bincount(slot, weights=counts, minlength=len(pick))
    enough = GROUP_COST_ELEMENTS if k == "auto" else None
    totals, choices = _best_splits(
        values.astype(np.float64), counts, min(kmax, len(values)), enough, k == "auto"
    )
    if k == "auto":
        k = 1 + int(np.argmin(totals + GROUP_COST_ELEMENTS * np.arange(1, len(totals) + 1)))
    return values[_tops(choices[: int(k) - 1], len(values))]


def _best_splits(
    values: np.ndarray, counts: np.ndarray, kmax: int, enough: float | None = None,
    weigh: bool = False,
) -> tuple[Any, ...]:  # fmt: skip
    """The least sum(count * top) over sorted `values` with at most 1..kmax buckets, and
    `choices[t][j]`: where the last bucket starts when values[0..j] use t + 2 buckets (-1
    where fewer do as well). With `enough`, it stops at the first bucket that saves no
    more than that: the cost of a bucket, `count * top` summed over its values, has the
    Monge property (`cost(i, j) + cost(i', j') <= cost(i, j') + cost(i', j)` for `i < i'`,
    `j < j'`, as `top` and the counts before grow), so the least total is convex in the
    number of buckets and later buckets save no more."""
    m = len(values)
    before = np.concatenate([[0.0], np.cumsum(counts)])
    i, j = np.arange(m)[:, None], np.arange(m)[None, :]
    cost = values[None, :] * (before[1:][None, :] - before[:-1][:, None])
    if weigh:  # ("auto": large buckets weighed by `auto_cost`)
        cost = auto_cost(cost)
    cost = np.where(i <= j, cost, np.inf)
    best, choices = cost[0].copy(), []  # best[j]: the least total for values[0..j]
    totals = [best[-1]]
    for _ in range(kmax - 1):
        total = best[:-1, None] + cost[1:]  # row i - 1: the last bucket starts at i
        start = np.argmin(total, axis=0)
        split = total[start, np.arange(m)]
        choices.append(np.where(split < best, start + 1, -1))
        best = np.minimum(best, split)
        totals.append(best[-1])
        if enough is not None and totals[-2] - totals[-1] <= enough:
            break
    return np.array(totals), choices


def _tops(choices: list[Any], m: int) -> list[Any]:
    """Indices of the bucket tops, from the choices for up to `len(choices) + 1` buckets."""
    tops, top = [], m - 1
    for choice in reversed(choices):
        if choice[top] >= 0:
            tops.append(top)
            top = choice[top] - 1
    return sorted([*tops, top])


# -- padded stacks and trimmed results ----------------------------------------------------


def stack_padded(
    leaves: Sequence[Any], axis: int, size: int, pad_value: Any, lengths: np.ndarray
) -> Any:
    """The examples `leaves` stacked on a new axis 0, each padded with `pad_value` at the
    end of `axis` to `size`; `lengths`: each example's size along `axis`."""
    first = leaves[0]
    shape = list(first.shape)
    shape[axis] = size
    if set(map(type, leaves)) == {np.ndarray}:
        stacked = (len(leaves), *shape)
        # (typeshed's Number defines no `==` with int; pad_value is any number here)
        zero = isinstance(pad_value, numbers.Number) and cast(Any, pad_value) == 0
        # (zeros: pages the kernel gives zeroed, touched only where examples are written)
        out = np.zeros(stacked, first.dtype) if zero else np.full(stacked, pad_value, first.dtype)
        _write_runs(out, leaves, axis, lengths)
        return out
    return np.stack([_pad_one(x, axis, size, pad_value) for x in leaves])


def _write_runs(out: np.ndarray, leaves: Sequence[Any], axis: int, lengths: np.ndarray) -> None:
    """Write the arrays `leaves` into the rows of `out`, each at the start of `axis`.
    Examples of one length next to each other (a run: the groups list them by length)
    are written by one `np.concatenate` straight into `out` (one copy, ~3 us a run
    against ~1 us an example written alone): 4096 examples of 180 lengths stack in ~3/4
    of the time of a joined run copied into place, ~1/2 of example by example."""
    head = (slice(None),) * axis
    ends = (np.flatnonzero(lengths[1:] != lengths[:-1]) + 1).tolist()
    for start, stop in zip([0, *ends], [*ends, len(leaves)], strict=True):
        n = leaves[start].shape[axis]
        if stop - start < 2:
            for i in range(start, stop):
                at: tuple[int | slice, ...] = (i, *head, slice(0, n))
                out[at] = leaves[i]
            continue
        into = out[(slice(start, stop), *head, slice(0, n))]
        merged = into.reshape((stop - start) * into.shape[1], *into.shape[2:]) if axis else None
        if merged is not None and merged.base is out:  # (rows merged with each example's axis 0)
            np.concatenate(leaves[start:stop], out=merged)
        else:  # (axis 0: no such view)
            np.stack(leaves[start:stop], out=into)


def _pad_one(x: Any, axis: int, size: int, pad_value: Any) -> Any:
    """`x` (a traced value: differentiable) padded to `size` along `axis`."""
    shape = list(x.shape)
    shape[axis] = size - shape[axis]
    return np.concatenate([x, np.full(shape, pad_value, dtype=x.dtype)], axis=axis)


def trim(result: Any, axis: int | None, length: int) -> Any:
    """A padded result cut back to the example's true length along `axis`."""
    if axis is None:
        return result
    nd = np.ndim(result)
    if not -nd <= axis < nd:
        raise PaddingError(
            f"vmapx.map: out_pad_axes={axis} is out of range for a result of shape "
            f"{tuple(np.shape(result))}"
        )
    return result[(slice(None),) * (axis % nd) + (slice(0, length),)]


def output_pad_axes(spec: Any, out: Any, nleaves: int) -> list[Any]:
    """The padded axis of each output leaf, from `out_pad_axes` (int, None or a prefix)."""
    if spec is None or isinstance(spec, numbers.Integral):
        return [spec] * nleaves
    return leaf_axes(
        spec,
        out,
        lambda e: PaddingError(
            f"vmapx.map: `out_pad_axes` ({spec!r}) does not match the structure of the "
            f"function's results: {e}"
        ),
    )


# -- the check against the unpadded loop ----------------------------------------------


def check_sample(padded: list[Any], count: int) -> list[Any]:
    """Up to `count` of the padded examples, `padded` a list of (group, padding, index):
    the most padded example of each group first, then the next most padded of each."""
    ranked: dict[Any, Any] = {}
    for group, _pad, index in sorted(padded, key=lambda t: (t[0], -t[1])):
        ranked.setdefault(group, []).append(index)
    order = sorted(
        ((rank, group, index) for group, ids in ranked.items() for rank, index in enumerate(ids))
    )
    return [index for _, _, index in order[:count]]


def check_against_loop(
    indices: list[Any], results: list[Any], reference: Callable[[int], Any]
) -> None:
    """Raise `PaddingError` where a padded result differs from the unpadded call's."""
    for index in indices:
        problem = _difference(results[index], reference(index))
        if problem is not None:
            raise PaddingError(
                f"vmapx.map(check=...): the padded run of example {index} differs from "
                f"calling the function on the unpadded example: {problem}. The padded mode "
                "needs a mask-aware function: its results must not depend on the values or "
                "the number of padded positions (use the length argument, e.g. "
                "`mask = np.arange(x.shape[0]) < length`, and `np.where(mask, ...)` in sums, "
                "means and maxima), and a result with a padded axis needs `out_pad_axes`"
            )


def _difference(got: Any, want: Any) -> str | None:
    got_leaves, got_def = optree.tree_flatten(got)
    want_leaves, want_def = optree.tree_flatten(want)
    if got_def != want_def:
        return f"the results have different structures ({got_def} and {want_def})"
    for k, (g, w) in enumerate(zip(got_leaves, want_leaves, strict=True)):
        g, w = np.asarray(g), np.asarray(w)
        if g.shape != w.shape or g.dtype != w.dtype:
            return (
                f"result leaf {k} is {g.dtype}{list(g.shape)} padded but {w.dtype}"
                f"{list(w.shape)} unpadded"
            )
        if not _close(g, w):
            return f"result leaf {k} differs by up to {np.max(np.abs(g - w))}"
    return None


def _close(got: np.ndarray, want: np.ndarray) -> bool:
    """Equal, up to the rounding of sums whose pairing depends on the padded length."""
    if not np.issubdtype(want.dtype, np.inexact):
        return bool(np.array_equal(got, want))
    if not want.size:
        return True
    finite = np.isfinite(want)
    if not np.array_equal(finite, np.isfinite(got)) or not np.array_equal(
        got[~finite], want[~finite], equal_nan=True
    ):
        return False
    scale = np.max(np.abs(want[finite]), initial=0.0)
    tol = 1000 * np.finfo(want.dtype).eps * scale
    return bool(np.all(np.abs(got[finite] - want[finite]) <= tol))
