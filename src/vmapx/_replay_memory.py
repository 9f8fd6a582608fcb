"""Which steps of a `vmapx.jit` replay may write their result into a dead operand.

A replay runs NumPy calls whose results are fresh arrays, and nothing else holds them:
when an elementwise ufunc's operand is never read again, its memory can take the
result (`np.add(a, b, out=a)`), as NumPy's own temporary elision does, and the replay
allocates (and the kernel zeroes) one array less per step. For `x.sum() * 2` over
100 000 examples that is the difference between four 800 kB allocations per call and
one.

Safety comes from knowing all memory the replay touches. At recording time each slot
(each array a step made) is described by `Layout`: whether its array owns its memory,
else which slot's array it is a view of (found through `.base`, with a weak reference
so that a freed array whose id was reused is never mistaken for it), its shape, dtype
and whether it is writable. Inputs, and views of inputs or of constants, belong to no
slot and are never written. `plan` then walks the steps in order, with the slots that
share memory at replay grouped (a result written into an operand joins that operand's
group), and lets a step write into an operand only if every slot of that operand's
group is read for the last time by this step and none is a result of the program.
"""

from __future__ import annotations

import warnings
import weakref
from typing import Any, cast

import numpy as np

from ._compat import NUMPY2


class Layout:
    """What `plan` needs to know of one slot's array at recording time."""

    __slots__ = ("owned", "owner", "shape", "dtype", "writeable", "contiguous")

    def __init__(self, owned: bool, owner: int | None, value: Any) -> None:
        self.owned = owned  # the array owns its memory (made by a step)
        self.owner = owner  # else: the slot whose array it views (None: not the program's)
        self.shape = np.shape(value)
        self.dtype = value.dtype
        self.writeable = type(value) is np.ndarray and _writeable(value)
        self.contiguous = type(value) is np.ndarray and value.flags.c_contiguous


def _writeable(value: np.ndarray) -> bool:
    """Whether a replay may write into `value`: writable, and no element seen twice (a
    zero stride: `np.broadcast_arrays` gives such views writable, with a warning)."""
    with warnings.catch_warnings():  # (NumPy warns on reading that view's flag)
        warnings.simplefilter("ignore", FutureWarning)
        writeable = value.flags.writeable
    return writeable and all(s or n <= 1 for s, n in zip(value.strides, value.shape, strict=True))


class Owners:
    """The arrays that own their memory, by id, to find the slot a view looks into."""

    def __init__(self) -> None:
        self._by_id: dict[int, tuple[weakref.ref[Any], int]] = {}

    def layout(self, value: Any, slot: int, fresh: bool = True) -> Layout:
        """The layout of a step's result `value`, stored in `slot`; `fresh`: False where
        the step returned one of its operands itself (memory it did not make)."""
        if type(value) is not np.ndarray:
            return Layout(False, None, value)
        if value.base is None and fresh:
            self._by_id[id(value)] = (weakref.ref(value), slot)
            return Layout(True, slot, value)
        root = value
        while type(root.base) is np.ndarray:
            root = root.base
        entry = self._by_id.get(id(root))
        owner = entry[1] if entry is not None and entry[0]() is root else None
        return Layout(False, owner, value)


def plan(steps: list[Any], layouts: list[Layout | None], results: list[int]) -> dict[int, bool]:
    """Set `step.into` (the slot whose array takes the result, or None) for each step.
    `layouts[s]` is an input slot's too (not the program's memory: owner None);
    `results` are the slots returned. Returns,
    for each returned slot, whether its array at replay is always new memory of its
    own (the program's, shared with no other result, writable, without zero strides),
    which then needs no copy to be handed out."""
    last_read: dict[int, int] = {}
    for i, step in enumerate(steps):
        for s in step.reads:
            last_read[s] = i
    never = len(steps)
    for s in results:
        last_read[s] = never
    group: dict[int, int | None] = {}  # slot -> its memory at replay (None: not ours)
    members: dict[int, list[int]] = {}
    for i, step in enumerate(steps):
        step.into = _operand_to_reuse(step, i, layouts, group, members, last_read)
        for o in step.outs:
            if o is None:
                continue
            if step.into is not None:
                g = group[step.into]
            else:  # (an owner not in `group`: its step was left out; not ours, then)
                layout = layouts[o]
                g = o if layout.owned else group.get(layout.owner)
            group[o] = g
            if g is not None:
                members.setdefault(g, []).append(o)
    groups = [group.get(s) for s in results]
    return {
        s: g is not None and groups.count(g) == 1 and _plain_memory(cast(Layout, layouts[s]))
        for s, g in zip(results, groups, strict=True)
    }


def _plain_memory(layout: Layout) -> bool:
    return layout.writeable and layout.contiguous


def _operand_to_reuse(
    step: Any,
    i: int,
    layouts: list[Any],
    group: dict[Any, Any],
    members: dict[Any, Any],
    last_read: dict[Any, Any],
) -> int | None:
    impl = step.impl
    if type(impl) is not np.ufunc or impl.nout != 1 or impl.signature is not None:
        return None
    if step.kwargs is not None or step.single is None:
        return None
    result = layouts[step.single]
    if not NUMPY2 and any(layouts[s].shape == () for s in step.positional):
        return None  # NumPy 1.26 picks the result's dtype by a 0-d operand's value
    for s in step.positional:
        g = group.get(s)
        layout = layouts[s]
        if g is None or not layout.writeable:
            continue
        if layout.shape != result.shape or layout.dtype != result.dtype:
            continue
        if all(last_read.get(t, -1) <= i for t in members[g]):
            return cast("int | None", s)
    return None
