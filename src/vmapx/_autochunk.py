"""Automatic chunking: a batch whose intermediates dwarf the cache runs in chunks.

A batched NumPy expression materialises every intermediate for the whole batch. When
those are tens of megabytes, each NumPy call streams them through main memory, and a
fresh large array costs the kernel's page zeroing too; the same calls on cache-sized
chunks of the batch run from the cache and reuse freed memory. `((ys - x) ** 2).sum(-1)`
over 2 048 examples of (512, 3) makes 24 MiB intermediates: in chunks of ~2 MiB it runs
about 2x faster, and its peak memory drops from 32 MiB to the 8 MiB result.

A `vmap` with `chunk_size="auto"` (the default) learns from its calls: the batch trace
records the largest batched value it made. When a call, for one batch size and argument
shapes, made values of at least `MIN_BYTES` and at least `RESULT_RATIO` times its
largest result (copying results out of chunks is not free), the next calls with that
signature run in chunks of about `CHUNK_BYTES` of intermediates each. A chunked call
that turns out slower than the whole-batch call it replaced switches chunking off
for that signature. Results are identical either way: chunks are independent examples.
"""

from __future__ import annotations

from typing import Any

import numpy as np

MIN_BYTES = 16 << 20
CHUNK_BYTES = 2 << 20
RESULT_RATIO = 2
SLOWER = 1.1  # a chunked call this much slower than the whole batch: chunking off
_MAX_SIGNATURES = 64


class _Seen:
    __slots__ = ("chunk", "whole_seconds")

    def __init__(self, chunk: int | None, whole_seconds: float) -> None:
        self.chunk = chunk
        self.whole_seconds = whole_seconds


class AutoChunk:
    """What one vmapped function learned about its calls, per signature."""

    __slots__ = ("seen",)

    def __init__(self) -> None:
        self.seen: dict[Any, _Seen] = {}

    def chunk_for(self, key: Any) -> int | None:
        entry = self.seen.get(key)
        return None if entry is None else entry.chunk

    def observe_whole(
        self, key: Any, size: int, largest: int, result_bytes: int, seconds: float
    ) -> None:
        """A whole-batch call made values of up to `largest` bytes and results of
        `result_bytes` (the largest), in `seconds`."""
        chunk = None
        if largest >= MIN_BYTES and largest >= RESULT_RATIO * result_bytes:
            chunk = max(1, size * CHUNK_BYTES // largest)
            if 2 * chunk > size:
                chunk = None
        if len(self.seen) >= _MAX_SIGNATURES:
            self.seen.clear()
        self.seen[key] = _Seen(chunk, seconds)

    def observe_chunked(self, key: Any, seconds: float) -> None:
        entry = self.seen.get(key)
        if entry is not None and seconds > SLOWER * entry.whole_seconds:
            entry.chunk = None


def signature(size: int, leaves: list, axes: list) -> tuple:
    """What a call's chunking decision depends on: batch size and mapped shapes."""
    return (size, *(np.shape(x) for x, ax in zip(leaves, axes, strict=True) if ax is not None))


def largest_result(results: list) -> int:
    return max((r.nbytes for r in results if type(r) is np.ndarray), default=0)
