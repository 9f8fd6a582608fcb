"""Elementwise arithmetic on batched values without the dispatch, for the engine's own use.

The backward pass of `vmap(grad(f))` multiplies each batched cotangent by a batched
partial and adds cotangents where paths meet: elementwise products and sums of two values
of one `vmap` trace, of one shape and dtype. For these, `bind` would pick that trace and
its ufunc rule would apply the ufunc to the two batch-front arrays; `direct_binary` does
just that, skipping the operator, `bind` and the rule (a few microseconds per call, for
the same values, dtype and scalar marking). Anything else (another kind of value, a view,
a weakly typed scalar, a duck payload, differing shapes or dtypes, a trace not on this
thread's stack) gets None, and the caller takes the ordinary path.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _core, _scalars
from ._batching import BatchTracer


def direct_binary(ufunc: np.ufunc, a: Any, b: Any) -> BatchTracer | None:
    """`ufunc(a, b)` for two same-shaped, same-dtype values of one live `vmap` trace,
    computed on their batch-front arrays; None where that shortcut does not apply."""
    if type(a) is not BatchTracer or type(b) is not BatchTracer:
        return None
    trace = a._trace
    if b._trace is not trace or a._view is not None or b._view is not None:
        return None
    av, bv = a.val, b.val
    if type(av) is not np.ndarray or type(bv) is not np.ndarray:
        return None  # (a duck payload, or a recording's value: the rule knows those)
    if av.shape != bv.shape or av.dtype != bv.dtype or trace.like is not None:
        return None
    if _scalars.SEEN.weak and _scalars.any_weak((a, b)):
        return None
    stack, level = _core._state.stack, trace.level
    if not (trace.alive and level <= len(stack) and stack[level - 1] is trace):
        return None  # (the ordinary path says what is wrong)
    out = trace.wrap(ufunc(av, bv))
    out._scalar = True  # as `_scalars.mark` does for every ufunc result
    return out
