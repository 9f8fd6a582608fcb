"""The exact groups of `vmapx.map` for the common batch, where each example of each mapped
argument is one NumPy array: the examples' indices grouped by signature (each argument's
shape and dtype), read with C-level passes over the arguments (~0.3 us an example on 2
cores, against ~0.6 us for a key built and a dict entry looked up per example)."""

from __future__ import annotations

from operator import attrgetter
from typing import Any

import numpy as np

_shape = attrgetter("shape")
_dtype = attrgetter("dtype")


def exact_groups(columns: list[Any]) -> list[list[int]]:
    """The indices of the examples of `columns` (one list of NumPy arrays per mapped
    argument, all of one length) grouped by signature: groups in the order of their
    first example, indices in order within a group."""
    parts: list[Any] = []
    for column in columns:
        parts.append(list(map(_shape, column)))
        dtypes = list(map(_dtype, column))
        if len(set(dtypes)) > 1:  # (one dtype, the common case: the shapes decide)
            parts.append(dtypes)
    keys = parts[0] if len(parts) == 1 else list(zip(*parts, strict=True))
    first = dict.fromkeys(keys)  # (the signatures, in the order of their first example)
    if len(first) == 1:
        return [list(range(len(keys)))]
    code = {key: i for i, key in enumerate(first)}
    ids = np.fromiter(map(code.__getitem__, keys), np.intp, len(keys))
    order = np.argsort(ids, kind="stable").tolist()
    bounds = np.cumsum(np.bincount(ids)).tolist()
    return [order[a:b] for a, b in zip([0, *bounds[:-1]], bounds, strict=True)]
