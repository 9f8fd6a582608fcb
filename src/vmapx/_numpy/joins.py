"""Joins and splits: functions of a sequence of arrays.

Unbatched members of a join are broadcast to the batch (a zero-stride view; the join
copies anyway), because the result is batched as a whole.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .._batching import BatchTrace, bcast_batch, example_ndim
from ._dispatch import defbatch, get_arg, set_arg
from .shapes import flat_shape
from .ufuncs import _shift_one


def _join_rule(*, new_axis: bool) -> Callable:
    def factory(func: Callable) -> Callable:
        def rule(trace: BatchTrace, args: tuple, kwargs: dict) -> Any:
            arrays = list(get_arg(args, kwargs, 0, "arrays"))
            axis = get_arg(args, kwargs, 1, "axis", 0)
            nd = max(example_ndim(trace, a) for a in arrays) + (1 if new_axis else 0)
            vals = [bcast_batch(trace, a) for a in arrays]
            if axis is None:  # concatenate(axis=None) flattens each example first
                vals, axis = [v.reshape(flat_shape(v)) for v in vals], 0
                nd = 1
            args, kwargs = set_arg(args, kwargs, 0, "arrays", vals)
            args, kwargs = set_arg(args, kwargs, 1, "axis", _shift_one(axis, nd))
            return trace.wrap(func(*args, **kwargs))

        return rule

    return factory


defbatch(np.concatenate, _join_rule(new_axis=False))
defbatch(np.stack, _join_rule(new_axis=True))
