"""Mapped arguments that are NumPy array subclasses (`np.ma.MaskedArray`, a user's
subclass): `vmap` runs the loop for them.

A batched run holds plain arrays: a mask or a subclass's own methods and units would be
lost (`np.ma.filled(x, 0)` of a masked example fills its masked entries; of the batch,
nothing), so the examples run one by one, each the subclass's own row, as in the loop.
`np.memmap` (and an outer `vmap`'s unmapped argument, `vmapx._unmapped`) is a plain
array to compute with and batches; `np.matrix` is refused (its rows stay 2-d, `*` is a
matrix product, and NumPy cannot stack matrices).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _core
from ._fallback_memory import Reason
from ._unmapped import UnmappedArray
from .errors import UnsupportedError

__all__ = ["subclass_reason"]

_PLAIN_SUBCLASSES = (np.memmap, UnmappedArray)


def subclass_reason(leaves: list[Any], axes: list[Any]) -> Reason | None:
    """Why the call must run the loop, where a mapped leaf is an ndarray subclass."""
    for x, axis in zip(leaves, axes, strict=True):
        if axis is None or type(x) is np.ndarray or not _core.is_ndarray(x):
            continue
        if isinstance(x, _PLAIN_SUBCLASSES):
            continue
        if isinstance(x, np.matrix):
            raise UnsupportedError(
                "vmap: a mapped argument is an np.matrix, whose rows stay 2-d and whose `*` "
                "is a matrix product; a batched run of plain arrays would not keep that, and "
                "NumPy cannot stack np.matrix results. Pass np.asarray(x)."
            )
        return Reason(
            f"a mapped argument is a {type(x).__name__}, a NumPy array subclass whose "
            "behaviour (a mask, units, its own methods) a batched run of plain arrays "
            "does not keep",
            "pass a plain array (`np.asarray(x)`; for a masked array `np.ma.filled(x, "
            "value)`, or its mask as an argument of its own)",
            "the call",
        )
    return None
