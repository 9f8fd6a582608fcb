"""Noticing NumPy's legacy global random functions (`np.random.normal`, ...) in `vmap`.

vmapx cannot batch them: called once for the whole batch, they would give every example
the same numbers. `vmap` takes a snapshot of the global generator's state before a
batched run; where the run moved it, the state goes back and the examples run as the
loop (which draws the loop's numbers). `np.random.get_state()` copies the whole state
(about 60 us); the snapshot reads its memory instead: the MT19937 words and position,
and the cached Gaussian of the legacy `RandomState`, whose place in the object is found
once, by setting known values on a private `RandomState` (about 1 us per call in all).
"""

from __future__ import annotations

import ctypes
import struct
import sys

import numpy as np

_MT_BYTES = 624 * 4 + 4  # mt19937_state: uint32 key[624]; int pos


def _find_gauss_cache() -> int | None:
    """The offset of `{int has_gauss; double gauss}` in a `RandomState`, or None."""
    rs = np.random.RandomState(0)
    head = rs.get_state()[:3]
    size = sys.getsizeof(rs)
    found = set()
    for value in (0.123456789, -987.654321):
        rs.set_state((*head, 1, value))
        found.add(ctypes.string_at(id(rs), size).find(struct.pack("d", value)))
    (offset,) = found if len(found) == 1 else (-1,)
    if offset < 8:
        return None
    for flag in (0, 1):
        rs.set_state((*head, flag, 0.5))
        if ctypes.string_at(id(rs) + offset - 8, 4) != struct.pack("i", flag):
            return None
    return offset - 8


_GAUSS = _find_gauss_cache()
_mtrand = np.random.mtrand
# the global RandomState and views of its state's memory (MT19937 words and position,
# the cached Gaussian)
_cache: list = [None, None, None]


def _views(rand: np.random.RandomState) -> list:
    if _cache[0] is not rand:
        mt = (ctypes.c_char * _MT_BYTES).from_address(rand._bit_generator.ctypes.state_address)
        gauss = (ctypes.c_char * (16 if _GAUSS is not None else 0)).from_address(
            id(rand) + (_GAUSS or 0)
        )
        _cache[:] = [rand, memoryview(mt), memoryview(gauss)]
    return _cache


def snapshot() -> tuple:
    """The global legacy generator's state, as raw bytes (cheap)."""
    rand = _mtrand._rand
    _, mt, gauss = _cache if _cache[0] is rand else _views(rand)
    return rand, mt.tobytes(), gauss.tobytes()


def moved(saved: tuple) -> bool:
    """Whether the global legacy generator left the state `saved` by `snapshot`."""
    rand, mt, gauss = _cache
    return (
        rand is not saved[0] or _mtrand._rand is not rand or mt.tobytes() != saved[1]
        or gauss.tobytes() != saved[2]
    )  # fmt: skip


def restore(saved: tuple) -> None:
    """Put the global legacy generator back in the state `saved` by `snapshot`."""
    _, mt, aug = saved
    key = np.frombuffer(mt[: 624 * 4], np.uint32).copy()
    pos = struct.unpack("i", mt[624 * 4 :])[0]
    if _GAUSS is None:
        has_gauss, gauss = np.random.get_state()[3:]
    else:
        has_gauss, gauss = struct.unpack("i", aug[:4])[0], struct.unpack("d", aug[8:])[0]
    np.random.set_state(("MT19937", key, pos, has_gauss, gauss))
