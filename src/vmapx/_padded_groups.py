"""The padded groups of `vmapx.map` found with array operations, for the common batch: each
example of each mapped argument is one NumPy array, and the examples of an argument differ
only in the length of their padded axis (one dtype, one number of dimensions, the same
other dimensions).

The general path of `vmapx._ragged` groups the examples by their exact signature first (a
dict over every example, then Python work per group), which costs ~1 us per example and
~8 us per distinct length: on 4096 sequences of 180 lengths, about an eighth of a padded
run. Here the lengths are read once into an array and the groups come from sorting it.
Batches that do not fit the case (pytrees, mixed dtypes, other dimensions that differ,
axes out of range, padded axes that disagree) go the general way, which also explains
any error; both ways give the same groups and bucket sizes."""

from __future__ import annotations

import math
import numbers
from operator import attrgetter, itemgetter
from typing import Any, NamedTuple

import numpy as np

_shape = attrgetter("shape")
_dtype = attrgetter("dtype")


class Lengths(NamedTuple):
    """Each example's true length, the padded axis of each mapped argument (None: not
    padded), and the elements each unit of length adds to one example's arrays."""

    lengths: np.ndarray
    pads: list[Any]
    width: int


def plain_lengths(columns: list[Any], specs: list[Any]) -> Lengths | None:
    """The `Lengths` of a batch whose mapped arguments are `columns` (one list of NumPy
    arrays per argument) with the `pad_axes` entries `specs`, or None where the batch is
    not the simple case (see the module's docstring). Each example's shape is read once;
    the checks look at the distinct shapes only."""
    lengths: np.ndarray | None = None
    pads: list[Any] = []
    width = 0
    for column, spec in zip(columns, specs, strict=True):
        if len(set(map(_dtype, column))) != 1:
            return None
        shapes = list(map(_shape, column))
        distinct = set(shapes)
        if spec is None:
            if len(distinct) != 1:
                return None
            pads.append(None)
            continue
        axis = _axis(spec, distinct)
        if axis is None:
            return None
        others = {shape[:axis] + shape[axis + 1 :] for shape in distinct}
        if len(others) != 1:
            return None
        at = np.fromiter(map(itemgetter(axis), shapes), np.int64, len(shapes))
        if lengths is None:
            lengths = at
        elif not np.array_equal(lengths, at):
            return None
        pads.append(axis)
        width += math.prod(others.pop())
    if lengths is None:
        return None
    return Lengths(lengths, pads, width)


def _axis(spec: Any, shapes: set[Any]) -> int | None:
    """`spec` made non-negative for `shapes` of one number of dimensions; None where
    the shapes have several, or `spec` is not an int in range."""
    if type(spec) is bool or not isinstance(spec, numbers.Integral):
        return None
    ndims = set(map(len, shapes))
    if len(ndims) != 1:
        return None
    (nd,) = ndims
    axis = int(spec)
    return axis % nd if -nd <= axis < nd else None


class Bucket(NamedTuple):
    """One padded group: its bucket size, its examples (by length, in order within a
    length) and their lengths."""

    size: int
    idxs: list[int]
    lengths: np.ndarray


def bucket_groups(lengths: np.ndarray, sizes_of: Any) -> tuple[np.ndarray, list[Bucket]]:
    """Each example's bucket size, and the groups by increasing size.
    `sizes_of(values, counts)` gives the bucket size of each distinct length `values`
    (sorted) held by `counts` examples. One stable sort by length gives both the
    distinct lengths and the groups (sizes grow with lengths); examples of one length
    next to each other stack as one (`_padding.stack_padded`)."""
    order = np.argsort(lengths, kind="stable")
    ordered = lengths[order]
    starts = np.flatnonzero(ordered[1:] != ordered[:-1]) + 1
    firsts = np.concatenate([[0], starts]).astype(np.intp)
    counts = np.diff(np.append(firsts, len(ordered)))
    tops = np.asarray(sizes_of(ordered[firsts], counts), dtype=np.int64)
    sizes = np.empty_like(ordered)
    sizes[order] = np.repeat(tops, counts)
    heads = np.concatenate([[0], np.flatnonzero(tops[1:] != tops[:-1]) + 1]).astype(np.intp)
    every = order.tolist()
    bounds = [*firsts[heads].tolist(), len(ordered)]
    return sizes, [
        Bucket(top, every[a:b], ordered[a:b])
        for top, a, b in zip(tops[heads].tolist(), bounds[:-1], bounds[1:], strict=True)
    ]
