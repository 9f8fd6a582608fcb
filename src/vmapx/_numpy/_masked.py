"""`y[mask] op= value` under `vmap` with a batched boolean mask, without the loop.

Python runs an augmented subscript assignment as `t = y[mask]; t op= value;
y[mask] = t`. Alone, `y[mask]` has a shape that depends on the data (the loop runs),
but here it is only written back where it came from. Where the interpreter is about to
do exactly that (the bytecode duplicates `y` and `mask` before reading `y[mask]`),
`y[mask]` gives a stand-in of `y`'s full shape; the in-place operation computes on it
elementwise (a value of one element per example, else the loop runs), and writing it
back through the same mask is `np.where(mask, t, y)`.
"""

from __future__ import annotations

import dis
import threading
from typing import Any, cast

import numpy as np

from .._batching import BatchTracer
from .._core import Tracer

_COPY = dis.opmap.get("COPY")
_SUBSCRIPT = {dis.opmap[n] for n in ("BINARY_SUBSCR", "BINARY_OP") if n in dis.opmap}
_SLICE = dis.opmap.get("BINARY_SLICE")
_CACHE = dis.opmap.get("CACHE", 0)  # (Python 3.12+: `y[a:b]`, two-element slices)


class _Pending(threading.local):
    def __init__(self) -> None:
        self.stand_ins: dict[int, tuple[BatchTracer, BatchTracer]] = {}


_pending = _Pending()


def _instruction(frame: Any) -> tuple[bytes, int]:
    """`frame`'s code and the offset of the instruction it is executing. A subscript the
    interpreter specialized for a Python `__getitem__` calls it inline, and the frame then
    points past the instruction's inline cache entries (`CACHE`, 0)."""
    code, i = frame.f_code.co_code, frame.f_lasti
    j = i
    while j >= 2 and code[j - 2] == _CACHE and code[j - 1] == 0:
        j -= 2
    return code, (j - 2 if j != i else i)


def _augmented_subscript(frame: Any) -> bool:
    """Whether `frame` is at the read of `y[i] op= v` (`COPY 2; COPY 2; y[i]`)."""
    code, i = _instruction(frame)
    return (
        _COPY is not None and i >= 4 and code[i] in _SUBSCRIPT
        and code[i - 4] == _COPY and code[i - 3] == 2 and code[i - 2] == _COPY
        and code[i - 1] == 2
    )  # fmt: skip


def augmented_read(frame: Any) -> bool:
    """Whether `frame` is at the read of `y[i]` in `y[i] op= v`: the value read is
    written back into `y[i]` as soon as `op=` has computed it (Python 3.12+ reads
    `y[a:b]` by `COPY 3; COPY 3; COPY 3; BINARY_SLICE`)."""
    if _augmented_subscript(frame):
        return True
    code, i = _instruction(frame)
    return (
        _SLICE is not None and i >= 6 and code[i] == _SLICE
        and all(code[i - k] == _COPY and code[i - k + 1] == 3 for k in (6, 4, 2))
    )  # fmt: skip


def stand_in(x: Any, mask: Any, frame: Any) -> BatchTracer | None:
    """The full-shape stand-in for `x[mask]` read by an augmented assignment, or None."""
    if not (
        type(mask) is BatchTracer and type(x) is BatchTracer and mask._trace is x._trace
        and mask.dtype == np.bool_ and mask.shape == x.shape and x.ndim > 0
        and _augmented_subscript(frame)
    ):  # fmt: skip
        return None
    stand_ins = _pending.stand_ins
    for key in [k for k, (t, _) in stand_ins.items() if not t._trace.alive]:
        del stand_ins[key]  # (an assignment that raised midway)
    t = cast(BatchTracer, np.copy(x))  # (a tracer's copy)
    stand_ins[id(t)] = (t, mask)
    return t


def check_operand(t: Any, other: Any) -> None:
    """`t op= other` on a stand-in: elementwise only for one value per example (NumPy
    would broadcast `other` against the selected elements)."""
    size = other.size if isinstance(other, Tracer) else np.size(other)
    if id(t) in _pending.stand_ins and size != 1:
        raise t._trace.concretization(
            "an augmented assignment through a batched boolean mask (`y[mask] += v`) "
            "with more than one value (how many elements it meets depends on the data)",
            "write `y = np.where(mask, y + v, y)` with `v` shaped like `y`",
        )


def written_back(target: Any, idx: Any, value: Any) -> Any:
    """The new value of `target` for `target[idx] = value` when `value` is the stand-in
    read from `target[idx]`; else None."""
    entry = _pending.stand_ins.pop(id(value), None) if _pending.stand_ins else None
    if entry is None:
        return None
    if entry[0] is not value or entry[1] is not idx:
        _pending.stand_ins[id(value)] = entry
        return None
    return np.where(idx, value, target)
