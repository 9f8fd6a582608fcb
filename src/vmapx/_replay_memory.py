"""Which steps of a `vmapx.jit` replay may write their result into a dead operand.

A replay runs NumPy calls whose results are fresh arrays, and nothing else holds them:
when an elementwise ufunc's operand is never read again, its memory can take the
result (`np.add(a, b, out=a)`), as NumPy's own temporary elision does, and the replay
allocates (and the kernel zeroes) one array less per step. For `x.sum() * 2` over
100 000 examples that is the difference between four 800 kB allocations per call and
one.

Safety comes from knowing all memory the replay touches. At recording time each slot
(each array a step made) is described by `Layout`: whether its array owns its memory,
else which slot's array it is a view of (found through `.base`, also through the
objects that are no arrays between them, such as the `DummyArray` under
`sliding_window_view`, with a weak reference so that a freed array whose id was reused
is never mistaken for it; where the chain ends at an object NumPy does not describe,
by which of our arrays' memory it lies in, and where that could be several, no step
writes into an operand at all), its shape, dtype and whether it is writable. Inputs,
and views of inputs or of constants, belong to no slot and are never written (and a
result among them is copied on every call). `plan` then walks the steps in order, with
the slots that share memory at replay grouped (a result written into an operand joins
that operand's group), and lets a step write into an operand only if every slot of
that operand's group is read for the last time by this step and none is a result of
the program.
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
        # a view whose memory could be several slots' (plan then writes into none)
        self.unknown = False

    def layout(self, value: Any, slot: int, fresh: bool = True) -> Layout:
        """The layout of a step's result `value`, stored in `slot`; `fresh`: False where
        the step returned one of its operands itself (memory it did not make)."""
        if type(value) is not np.ndarray:
            return Layout(False, None, value)
        if value.base is None and fresh:
            self._by_id[id(value)] = (weakref.ref(value), slot)
            return Layout(True, slot, value)
        root = memory_root(value)
        entry = self._by_id.get(id(root))
        if entry is not None and entry[0]() is root:
            return Layout(False, entry[1], value)
        if type(root) is np.ndarray and root.flags.owndata:  # memory the program did not make
            return Layout(False, None, value)
        # memory NumPy does not describe (a buffer, an object exporting one, a pointer):
        # ours if it lies in one of our arrays' memory
        owners = {
            s for ref, s in self._by_id.values()
            if (a := ref()) is not None and np.may_share_memory(a, value)
        }  # fmt: skip
        if len(owners) > 1:
            self.unknown = True
        return Layout(False, owners.pop() if len(owners) == 1 else None, value)


def memory_root(value: Any) -> Any:
    """The object at the end of `value`'s chain of bases: through arrays, and through
    the objects NumPy keeps between them (`as_strided`'s `DummyArray`, under
    `sliding_window_view`) or a memoryview's exporter."""
    root = value
    for _ in range(64):  # (a chain is short; a cycle of odd objects must not hang)
        after = root.obj if type(root) is memoryview else getattr(root, "base", None)
        if after is None or after is root:
            break
        root = after
    return root


def plan(
    steps: list[Any], layouts: list[Layout | None], results: list[int], unknown: bool = False
) -> dict[int, bool | None]:
    """Set `step.into` (the slot whose array takes the result, or None) for each step.
    `layouts[s]` is an input slot's too (not the program's memory: owner None);
    `results` are the slots returned; `unknown`: some view's memory could not be told
    (`Owners.unknown`): no step writes into an operand. Returns, for each returned
    slot, whether its array at replay is always new memory of its own (the program's,
    shared with no other result, writable, without zero strides), which then needs no
    copy to be handed out; None where it is not the program's memory at all (an
    argument's, or a constant's the program holds: it is copied on every call)."""
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
        if not unknown:
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
        s: None if g is None else groups.count(g) == 1 and _plain_memory(cast(Layout, layouts[s]))
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
