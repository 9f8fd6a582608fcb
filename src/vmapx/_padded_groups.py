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

import itertools
import math
import numbers
from operator import attrgetter
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
    not the simple case (see the module's docstring)."""
    lengths: np.ndarray | None = None
    pads: list[Any] = []
    width = 0
    for column, spec in zip(columns, specs, strict=True):
        if len(set(map(_dtype, column))) != 1:
            return None
        shapes = list(map(_shape, column))
        if spec is None:
            if len(set(shapes)) != 1:
                return None
            pads.append(None)
            continue
        if type(spec) is bool or not isinstance(spec, numbers.Integral):
            return None
        dims = _dims(shapes)
        if dims is None or not -dims.shape[1] <= spec < dims.shape[1]:
            return None
        axis = int(spec) % dims.shape[1]
        other = np.delete(dims, axis, axis=1)
        if (other != other[0]).any():
            return None
        if lengths is None:
            lengths = dims[:, axis]
        elif not np.array_equal(lengths, dims[:, axis]):
            return None
        pads.append(axis)
        width += math.prod(other[0].tolist())
    if lengths is None:
        return None
    return Lengths(lengths, pads, width)


def _dims(shapes: list[Any]) -> np.ndarray | None:
    """The shapes as an (examples, ndim) int array; None where the ndims differ."""
    ndims = set(map(len, shapes))
    if len(ndims) != 1:
        return None
    (nd,) = ndims
    flat = np.fromiter(itertools.chain.from_iterable(shapes), np.int64, nd * len(shapes))
    return flat.reshape(len(shapes), nd)


def bucket_groups(lengths: np.ndarray, sizes_of: Any) -> tuple[np.ndarray, list[Any]]:
    """Each example's bucket size, and the groups: (size, example indices by length, in
    order within a length) by increasing size. `sizes_of(values, counts)` gives the
    bucket size of each distinct length `values` (sorted) held by `counts` examples."""
    values, inverse, counts = np.unique(lengths, return_inverse=True, return_counts=True)
    sizes = np.asarray(sizes_of(values, counts), dtype=np.int64)[inverse.ravel()]
    # (by length: then by size too, as sizes grow with lengths; examples of one length
    # next to each other stack as one, `_padding.stack_padded`)
    order = np.argsort(lengths, kind="stable")
    tops, starts = np.unique(sizes[order], return_index=True)
    parts = np.split(order, starts[1:])
    return sizes, [(int(top), part.tolist()) for top, part in zip(tops, parts, strict=True)]
