"""Sums of derivative contributions computed into a value the rule has just made.

A forward-mode rule with several traced operands adds their contributions:
`t0 * d0 + t1 * d1` for a product. Each term is a new value, which only the rule holds;
under `vmap` of a Jacobian (`jacfwd`, `hessian`) each is a batch-times-basis-sized array,
and a new array of that size costs more in page faults than the addition itself.
`accumulate_into` adds the second term into the first one's memory instead, as NumPy's
temporary elision does for `a * b + c` on plain arrays.

It applies only where the result is the same: the first term is a plain array, or a
chain of `vmap` tracers of the same live traces down to one, that the caller made and
holds alone (so nothing else can see the write); the other term has the same layers,
the same shape and the same dtype (no broadcasting, no promotion). Anything else gets
None and the caller takes the ordinary path.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _core, _scalars
from ._batching import BatchTrace, BatchTracer


def accumulate_into(ufunc: np.ufunc, own: Any, other: Any) -> Any:
    """`ufunc(own, other)` (`np.add` or `np.subtract`) written into `own`'s array and
    returned as `own`; None where that is not the same as the ordinary operator. `own`
    must be a value the caller made and holds alone."""
    if _scalars.SEEN.weak and _scalars.any_weak((own, other)):
        return None  # (a weakly typed scalar: the operator's promotion decides)
    a, b = own, other
    while type(a) is BatchTracer:
        if type(b) is not BatchTracer or not _plain_live(a, b):
            return None
        a, b = a.val, b.val
    if type(a) is not np.ndarray or type(b) is not np.ndarray or a is b:
        return None
    if a.shape != b.shape or a.dtype != b.dtype or a.dtype.kind not in "fc":
        return None
    if a.base is not None or not a.flags.writeable or np.shares_memory(a, b):
        return None
    ufunc(a, b, out=a)
    return own


def _plain_live(a: BatchTracer, b: BatchTracer) -> bool:
    """Both values of one live `vmap` trace on this thread's stack, with plain (not duck)
    payloads and no view bookkeeping."""
    trace = a._trace
    if b._trace is not trace or type(trace) is not BatchTrace or trace.like is not None:
        return False
    if a._view is not None or b._view is not None:
        return False
    stack, level = _core._state.stack, trace.level
    return bool(trace.alive and level <= len(stack) and stack[level - 1] is trace)
