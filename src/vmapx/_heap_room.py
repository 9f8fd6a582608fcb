"""Room in the heap for the temporaries of `vmapx.map`'s batched runs (glibc).

glibc serves a block of at least its *mmap threshold* with a fresh mapping of its own,
which `free` gives back to the system at once, and it gives the top of its heap back
(trims it) once more than the *trim threshold* (twice the other) is free there. Both
start low (128 KiB) and rise on their own: freeing a mapped block of S bytes (up to
32 MiB) raises the mmap threshold to S for the rest of the process. Until they have
risen, every batched run of a group of a few hundred KiB gets its temporaries from new
pages, which the kernel faults in and zeroes: on the benchmark's skewed batch (10 groups
of <= 512 KiB) ~5 000 page faults a call, ~20-30% of its time (the same for the
hand-written padded NumPy), or none, by chance of what the process freed before.

`make_room(nbytes)`, before a group of `nbytes` of stacked arrays runs, frees one block of
`HEADROOM` times that (at most 32 MiB; never written, so it costs one `mmap` and one
`munmap`, ~10 us), which raises the thresholds as freeing any such array in the process
would: the temporaries then come from the heap, kept between runs. Nothing else changes
(the heap may keep up to twice that much free memory rather than give it back), and
where the thresholds are already that high, or the C library is not glibc, it does
nothing (nor where the environment sets them, `MALLOC_TRIM_THRESHOLD_` or
`MALLOC_MMAP_THRESHOLD_`, as Dask does for its workers: glibc then keeps them fixed).
Once per size: the thresholds never go down.
"""

from __future__ import annotations

import os
import threading

import numpy as np

# glibc's largest dynamic mmap threshold (DEFAULT_MMAP_THRESHOLD_MAX, 64-bit): freeing a
# larger block does not raise it
MAX_BYTES = 32 << 20
# glibc's first mmap threshold: below it, blocks come from the heap anyway
MIN_BYTES = 128 << 10
# a group's temporaries, live at once, measured as a multiple of its stacked arrays (the
# benchmark's function: ~4-6), with room to spare
HEADROOM = 8


def _glibc() -> bool:
    try:
        return (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc")
    except (AttributeError, ValueError, OSError):  # (no confstr, or no such name here)
        return False


_GLIBC = _glibc()
_lock = threading.Lock()
_made = [0]  # the largest block freed so far


def make_room(nbytes: int) -> None:
    """Raise glibc's thresholds (see the module's docstring) for the temporaries of a
    batched run over `nbytes` of stacked arrays."""
    size = min(MAX_BYTES, HEADROOM * int(nbytes))
    if not _GLIBC or size <= MIN_BYTES or size <= _made[0]:
        return
    with _lock:
        if size <= _made[0]:
            return
        try:
            block = np.empty(size, np.uint8)  # (never written: no page is touched)
        except MemoryError:
            return
        del block
        _made[0] = size
