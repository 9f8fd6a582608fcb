"""Which calls of a function fell back to the per-example loop, so that later calls with
the same signature go to the loop directly instead of repeating a batched run that would
be abandoned.

A batched run that ends in the loop costs its own work before the loop's (often several
times the loop's: the library code ran on batched values until it needed a plain one).
This module remembers, per function (weakly: a function that is gone takes its entries
with it) and per *signature* (the arguments' structure, shapes, dtypes and batch axes,
the options that change the batched run, and the user's line that called), the
fallback's reason, and `_api._run` then runs the loop at once, warning as the batched
run would have (the same message, from the same line).

**Why values never change.** The loop *is* the reference: every path of vmap must give
what the per-example loop gives, so going to the loop directly gives the same values,
shapes, dtypes, random draws and exceptions as the batched run that would have fallen
back. An abandoned batched run puts back the random draws it made and its writes stay in
copies, so skipping it changes nothing the caller can see, other than fewer calls of
`f` (the loop's count).

**Why it re-tries.** Some fallbacks depend on the data, not on the signature: a Python
`if` on a value the examples disagree on, data-dependent shapes (`np.nonzero`), a rank
or a root set that differs between examples. With other data the same function may batch.
So a remembered fallback is re-tried: the batched run runs again after `FIRST_WAIT`
calls that went to the loop directly, then after twice as many each time it falls back
again (at most `MAX_WAIT`), which bounds the re-tries' cost to a few percent; a re-try
that batches forgets the entry. Only calls outside every other transform (no tracers in
the arguments, none on the trace stack), with NumPy arrays as arguments and no keyword
arguments, are remembered: there the signature says all that the batched run sees from
the caller.
"""

from __future__ import annotations

import sys
import threading
import weakref
from collections.abc import Callable
from types import FrameType
from typing import Any, NamedTuple

import numpy as np

from ._core import _is_library_file, current_level

FIRST_WAIT = 16  # calls that go to the loop directly before the first re-try
MAX_WAIT = 1024  # the longest wait between re-tries
PER_FUNCTION = 32  # signatures remembered per function (the oldest is dropped)


class Reason(NamedTuple):
    """What made the batched run fall back (as `ConcretizationSignal` says it)."""

    what: str
    fix: str
    location: str


class _Record:
    __slots__ = ("reason", "wait", "left")

    def __init__(self, reason: Reason) -> None:
        self.reason, self.wait, self.left = reason, FIRST_WAIT, FIRST_WAIT


_lock = threading.Lock()
# f -> {signature: _Record}
_memory: weakref.WeakKeyDictionary[Any, dict[Any, _Record]] = weakref.WeakKeyDictionary()
# functions that cannot be referred to weakly (SciPy's `scipy.fft.fft`, C functions): held,
# at most `HELD` of them (the oldest is dropped)
_held: dict[Any, dict[Any, _Record]] = {}
HELD = 256


def _call_site() -> Any:
    """`(code, line)` of the innermost frame outside vmapx and NumPy: the user's line."""
    frame: FrameType | None = sys._getframe(2)
    while frame is not None and _is_library_file(frame.f_code.co_filename):
        frame = frame.f_back
    return None if frame is None else (frame.f_code, frame.f_lineno)


def signature(
    f: Callable[..., Any], fallback: str, opts: Any, leaves: list[Any], treedef: Any,
    axes: list[Any], kwargs: dict[Any, Any], size: int,
) -> tuple[Any, ...] | None:  # fmt: skip
    """The key under which this call's fallback is remembered, or None where it is not
    (keyword arguments, non-array leaves, another transform running, `fallback="error"`):
    the arguments' structure, batch axes, shapes and dtypes, the options that change the
    batched run, and the user's line that called (a warning names it)."""
    if kwargs or fallback == "error" or current_level():
        return None
    arrays = []
    for leaf in leaves:
        if type(leaf) is not np.ndarray:
            return None
        arrays.append((leaf.shape, leaf.dtype))
    if opts.axis_name is not None:
        try:
            hash(opts.axis_name)
        except TypeError:
            return None
    site = _call_site()
    return (treedef, tuple(axes), size, tuple(arrays), fallback, opts.randomness,
            opts.axis_name, site)  # fmt: skip


def _records(f: Callable[..., Any]) -> dict[Any, _Record] | None:
    try:
        return _memory.get(f)
    except TypeError:  # (not weakly referable, or unhashable)
        try:
            return _held.get(f)
        except TypeError:
            return None


def _new_records(f: Callable[..., Any]) -> dict[Any, _Record] | None:
    """The (new) records of `f`, or None where `f` cannot be a key (unhashable)."""
    try:
        return _memory.setdefault(f, {})
    except TypeError:
        pass
    try:
        records = _held.get(f)
    except TypeError:
        return None
    if records is None:
        if len(_held) >= HELD:
            del _held[next(iter(_held))]
        records = _held[f] = {}
    return records


def recall(f: Callable[..., Any], *call: Any) -> tuple[tuple[Any, ...] | None, Reason | None]:
    """`(key, reason)` for a call of `f` (`call`: `signature`'s arguments after `f`): the
    remembered reason to go to the loop directly, or None where the batched run should
    run (nothing remembered, or a re-try is due). `key` is None where nothing is
    remembered for `f` at all (the common case costs one dictionary look-up)."""
    records = _records(f)
    if records is None:
        return None, None
    key = signature(f, *call)
    if key is None:
        return None, None
    with _lock:
        record = records.get(key)
        if record is None:
            return key, None
        if record.left <= 0:  # a re-try: if it falls back, the next wait is longer
            record.wait = min(2 * record.wait, MAX_WAIT)
            record.left = record.wait
            return key, None
        record.left -= 1
        return key, record.reason


def remember(f: Callable[..., Any], key: tuple[Any, ...] | None, reason: Reason) -> None:
    """Note that the batched run of `f` under `key` (from `signature`) fell back."""
    if key is None:
        return
    with _lock:
        records = _new_records(f)
        if records is None:
            return
        record = records.get(key)
        if record is not None:
            record.reason = reason
            return
        if len(records) >= PER_FUNCTION:
            del records[next(iter(records))]
        records[key] = _Record(reason)


def forget(f: Callable[..., Any], key: tuple[Any, ...] | None) -> None:
    """The batched run of `f` under `key` succeeded: batch from now on."""
    if key is None:
        return
    with _lock:
        records = _records(f)
        if records:
            records.pop(key, None)
