"""The outputs of a chunked call, written into one array per output of the whole batch.

A chunked `vmap` call (`chunk_size=`, or chunks `"auto"` chose, on one thread or
several: `vmapx._parallel`) allocates each batched output once, for the whole batch,
and every chunk's values go into their slice of it:

- **Computed in place.** Where the output's shape and dtype are known before a chunk
  runs (from the first chunk, or from an earlier call of the same signature that
  `vmapx._autochunk` remembers), the chunk is offered its slices (`offered`): the first
  elementwise operation of the chunk's batch trace whose result has exactly a slice's
  shape and dtype computes into it (`ufunc(..., out=slice)`, `ufunc_destination`).
  Where that operation's value is what the chunk returns, nothing is copied: the chunk
  wrote its results where they belong, in its own thread, as hand-written NumPy with
  `out=` would. An operator on that value as a temporary computes into it too
  (`vmapx._elision`: the slice is made so that its views refer to it, as a new array's
  do, and reference counts tell whether anything else sees it), so that in
  `(img - img.mean()) / img.std()` the difference claims the slice and the quotient is
  computed in it.
- **Copied by the chunk's thread.** Otherwise the chunk copies its results into its
  slices itself (`place`), before its turn to be joined: the threads copy at once,
  and a chunk's results are freed as soon as it is done.
- **Concatenated.** A chunk whose output differs from the slice in dtype or shape (the
  examples of some chunks give another dtype: NumPy's promotion is not associative,
  int8, uint8, float16 examples give float16, where a chunk of the first two, int16,
  and one of float16 give float32) and every later chunk are kept as they are and
  concatenated at the end to the dtype the loop's `np.stack` of every example would
  have, as a call without these slices would.

**Safety.** A slice is offered only to the batch trace of the chunk itself (not to a
`vmap` nested inside `f`, nor to one that `f` runs in the per-example loop: `withheld`)
and claimed by one operation at most, so while `f` runs the slice holds one value, as a
new array would. An offered slice is C-contiguous (outputs with `out_axes=0`), and the
operation computes with the dtypes it would choose itself, so the values are those of a
new array. After `f` returns, a result that is a view of a claimed slice without being
its own slice (a transposed or sliced value, another output's slice) is copied before
any slice is written. An error in a chunk discards the
whole output: nothing partial is returned.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from . import _core
from . import _pytree as optree
from ._compat import NUMPY2
from ._core import Tracer
from .errors import InAxesError, OutputShapeError

try:  # (NumPy 2; NumPy 1's is np.byte_bounds)
    from numpy.lib.array_utils import byte_bounds as _byte_bounds
except ImportError:  # pragma: no cover
    _byte_bounds = np.byte_bounds  # type: ignore[attr-defined]  # (NumPy 1 only)

_local = threading.local()  # `offer`: the slices this thread's chunk may compute into
_count = threading.Lock()
active = 0  # chunks offering slices now, in all threads (a cheap test for the rules)
# chunks whose results come to less than this are not offered slices: their results are
# copied when joined (an offer costs tens of microseconds per chunk; w2's MLP outputs,
# 160 KiB per chunk, measured 8% more CPU time with them)
OFFER_BYTES = 1 << 20
_WEAK = {int: int, float: float, complex: complex, bool: np.dtype(bool)}


class _Offer:
    """The slices offered to one chunk's batch trace (None: claimed, or none for that
    output), the memory they own (weakly: see `offered`), and the byte ranges of those
    claimed."""

    __slots__ = ("slices", "owners", "claimed")

    def __init__(self, regions: list[Any]) -> None:
        self.slices = [_claimable(r) for r in regions]
        self.owners = [weakref.ref(s.base) for s in self.slices if s is not None]
        self.claimed: list[tuple[int, int]] = []


def _claimable(region: Any) -> np.ndarray | None:
    """`region` (a C-contiguous part of an output) as an array that its views refer to
    (their `base`), as a new array's do: so that reference counts tell whether anything
    else sees it (`vmapx._elision` may then compute into it). None where the region
    cannot be offered (not numeric, or empty)."""
    if region is None or region.dtype.kind not in "biufc" or not region.size:
        return None
    flat = np.frombuffer(memoryview(region).cast("B"), dtype=region.dtype)
    return flat.reshape(region.shape)


@contextmanager
def offered(regions: list[Any]) -> Iterator[_Offer]:
    """While the block runs, this thread's outermost batch trace may compute into
    `regions` (see the module). Nothing here holds the offered arrays once claimed:
    the value computed into one is held by its tracer alone, as a new array would be."""
    global active
    previous = getattr(_local, "offer", None)
    offer = _local.offer = _Offer(regions)
    with _count:
        active += 1
    try:
        yield offer
    finally:
        _local.offer = previous
        with _count:
            active -= 1


@contextmanager
def running_chunk() -> Iterator[None]:
    """While the block runs, this thread runs one chunk of a chunked call, whose results
    are copied into the whole batch's outputs where they are not computed in them: rules
    that could lay a result out with the batch axis last should make it in C order (the
    copy would transpose it: `ufuncs.outer_by_columns`)."""
    depth = getattr(_local, "chunks", 0)
    _local.chunks = depth + 1
    try:
        yield
    finally:
        _local.chunks = depth


def in_chunk() -> bool:
    """Whether this thread runs a chunk of a chunked call (`running_chunk`)."""
    return bool(getattr(_local, "chunks", 0))


@contextmanager
def withheld() -> Iterator[None]:
    """While the block runs, nothing is offered to this thread: the per-example loop
    runs `f` on plain examples, where a `vmap` inside `f` is the outermost trace and its
    values are no chunk's outputs (a value it returned, kept by `f`, would be
    overwritten when the chunk's results are placed)."""
    previous = getattr(_local, "offer", None)
    if previous is None:
        yield
        return
    _local.offer = None
    try:
        yield
    finally:
        _local.offer = previous


def computed(ufunc: np.ufunc, *vals: Any) -> Any:
    """`ufunc(*vals)` in a batching rule without its trace (operands one level down),
    into an offered slice where one fits (see `ufunc_destination`)."""
    if active:
        out = ufunc_destination(None, ufunc, vals)
        if out is not None:
            return ufunc(*vals, out=out)
    return ufunc(*vals)


def ufunc_destination(trace: Any, ufunc: np.ufunc, vals: Any) -> np.ndarray | None:
    """An offered slice for `ufunc(*vals)` (plain operands; `trace`: the batch trace
    whose rule computes it, None: the only trace on this thread's stack) to compute
    into: one of the result's exact shape and dtype, claimed now; else None."""
    offer = getattr(_local, "offer", None)
    if offer is None or ufunc.nout != 1 or not NUMPY2:
        return None
    if (trace.level if trace is not None else len(_core._state.stack)) != 1:
        return None  # (a `vmap` inside `f`: its values are not the chunk's outputs)
    shapes, dtypes = [], []
    for v in vals:
        if type(v) is np.ndarray or (not isinstance(v, Tracer) and isinstance(v, np.generic)):
            shapes.append(v.shape)
            dtypes.append(v.dtype)
        elif type(v) in _WEAK:  # (a Python number: weak in NumPy 2's promotion)
            shapes.append(())
            dtypes.append(_WEAK[type(v)])
        else:
            return None
    try:
        shape = np.broadcast_shapes(*shapes)
        if not any(s is not None and s.shape == shape for s in offer.slices):
            return None
        dtype = ufunc.resolve_dtypes((*dtypes, None))[-1]
    except (TypeError, ValueError):  # (NumPy raises the error itself, without a slice)
        return None
    for i, s in enumerate(offer.slices):
        if s is not None and s.shape == shape and s.dtype == dtype:
            offer.slices[i] = None
            start = s.__array_interface__["data"][0]
            offer.claimed.append((start, start + s.nbytes))
            return s  # type: ignore[no-any-return]
    return None


def is_offered(owner: Any) -> bool:
    """Whether `owner` is the memory of a slice offered to this thread's chunk (an
    operator may then compute into a temporary held in it: `vmapx._elision`)."""
    offer = getattr(_local, "offer", None)
    return offer is not None and any(ref() is owner for ref in offer.owners)


def slice_axis(x: Any, axis: int | None, start: int, stop: int) -> Any:
    """`x[start:stop]` along `axis` (None: `x` itself, unmapped)."""
    if axis is None:
        return x
    index = [slice(None)] * np.ndim(x)
    index[axis] = slice(start, stop)
    return x[tuple(index)]


def _same_memory(a: Any, b: np.ndarray) -> bool:
    """Whether `a` is the array `b` (the same memory, shape, strides and dtype)."""
    return (
        type(a) is np.ndarray
        and a.shape == b.shape
        and a.strides == b.strides
        and a.dtype == b.dtype
        and a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
    )


class Joined:
    """The outputs of the chunks of one call joined along their batch axes (see the
    module). `spec`: the flattened outputs of an earlier call of this signature (their
    structure, and per leaf its shape and dtype), whose arrays are then allocated
    before any chunk runs; None: after the first chunk joined."""

    def __init__(self, out_axes: Any, size: int, spec: Any = None) -> None:
        self.out_axes, self.size = out_axes, size
        self.treedef: Any = None
        self.columns: list[Any] = []  # per leaf: a whole-batch array, a list of parts, or None
        self.axes: list[Any] = []
        self.first: list[Any] = []
        self.dtypes: list[Any] = []  # per leaf: the dtypes of its examples
        self.lock = threading.Lock()
        self.ready: list[Any] | None = None  # the whole-batch arrays, once allocated
        self.spec = spec
        if spec is not None and out_axes == 0:
            self.ready = [np.empty((size, *shape[1:]), dtype) for shape, dtype in spec[1]]

    def slices(self, start: int, stop: int) -> list[Any] | None:
        """The parts for examples `start:stop` of each output (None for one that is not
        an array), where the arrays are allocated; else None."""
        with self.lock:
            ready = self.ready
        if ready is None:
            return None
        whole = sum(0 if c is None else c.nbytes for c in ready)
        if whole * (stop - start) < OFFER_BYTES * self.size:
            return None  # (small results: copied at the join, without the offer's cost)
        return [None if c is None else c[start:stop] for c in ready]

    def place(self, out: Any, slices: list[Any] | None, claimed: list[tuple[int, int]]) -> Any:
        """A chunk's outputs, with each array that fits its slice copied into it (in the
        chunk's thread) and given as that slice; views of claimed slices (`claimed`: their
        byte ranges) copied first."""
        if slices is None:
            return out
        leaves, treedef = optree.tree_flatten(out, is_leaf=_is_leaf)
        if len(leaves) != len(slices):
            return out  # (another structure than the slices': joined as it is)
        placed = [
            s is not None and _same_memory(leaf, s) for leaf, s in zip(leaves, slices, strict=True)
        ]
        if claimed:
            leaves = [
                leaf.copy() if not p and type(leaf) is np.ndarray and _overlaps(leaf, claimed)
                else leaf
                for leaf, p in zip(leaves, placed, strict=True)
            ]  # fmt: skip
        for j, (leaf, s) in enumerate(zip(leaves, slices, strict=True)):
            if s is not None and not placed[j] and type(leaf) is np.ndarray:
                if leaf.shape == s.shape and leaf.dtype == s.dtype:
                    s[...] = leaf
                    leaves[j] = s
        return optree.tree_unflatten(treedef, leaves)

    def add(self, out: Any, start: int, stop: int, dtypes: list[Any] | None = None) -> None:
        """A chunk's outputs, for examples `start:stop` (the chunks in order); `dtypes`:
        per output, those of its examples, where they may differ (the loop ran)."""
        if self.treedef is None:
            self._first(out)
        try:
            leaves = self.treedef.flatten_up_to(out)
        except ValueError as e:
            raise OutputShapeError(
                f"vmap: the function's results for examples {start}:{stop} have another "
                f"structure than for the first examples ({e}), so they cannot be stacked. "
                "Return the same structure for every example."
            ) from None
        for j, (leaf, ax) in enumerate(zip(leaves, self.axes, strict=True)):
            self.dtypes[j] |= dtypes[j] if dtypes else {getattr(leaf, "dtype", None)}
            column = self.columns[j]
            if ax is None:  # one value for the batch: every chunk must have found it
                if not _same_output(self.first[j], leaf):
                    raise InAxesError(
                        f"vmap: out_axes is None for output {j}, but that output differs "
                        "between examples; give it an integer out_axes"
                    )
                continue
            _check_example_shape(self.first[j], leaf, ax, j, start)
            if type(column) is list:
                column.append(leaf)
            elif _fits(column, leaf, ax, stop - start):
                target = slice_axis(column, ax, start, stop)
                if not _same_memory(leaf, target):  # (else the chunk wrote it there)
                    target[...] = leaf
            else:  # parts so far, then this one: concatenated at the end
                self.columns[j] = [slice_axis(column, ax, 0, start), leaf] if start else [leaf]

    def _first(self, out: Any) -> None:
        """The outputs' structure and axes, and their whole-batch arrays, from the
        first chunk's outputs (or the `spec`'s arrays, where they match)."""
        from ._api import output_axes

        self.first, self.treedef = optree.tree_flatten(out, is_leaf=_is_leaf)
        self.axes = output_axes(self.out_axes, out, self.treedef)
        ready = self.ready if self._as_spec_says() else None
        if ready is None and self.spec is not None:
            with self.lock:  # (another call's outputs: not offered from now on)
                self.ready = None
        self.columns = [
            None if ax is None else ready[j] if ready is not None
            else _whole_like(leaf, ax, self.size) if type(leaf) is np.ndarray
            else []  # (a tracer of an outer transform)
            for j, (leaf, ax) in enumerate(zip(self.first, self.axes, strict=True))
        ]  # fmt: skip
        self.dtypes = [set() for _ in self.first]
        if self.ready is None and all(ax == 0 for ax in self.axes):
            with self.lock:  # (later chunks may compute into these from now on)
                self.ready = [c if type(c) is np.ndarray else None for c in self.columns]

    def _as_spec_says(self) -> bool:
        """Whether the first chunk's outputs are the `spec`'s (but for the batch size)."""
        if self.spec is None or self.ready is None or self.spec[0] != self.treedef:
            return False
        return all(
            type(leaf) is np.ndarray and leaf.shape[1:] == shape[1:] and leaf.dtype == dtype
            for leaf, (shape, dtype) in zip(self.first, self.spec[1], strict=True)
        )

    def result(self) -> Any:
        leaves = [
            leaf if ax is None else _concatenate(c, ax, d) if type(c) is list else c
            for leaf, ax, c, d in zip(self.first, self.axes, self.columns, self.dtypes, strict=True)
        ]  # fmt: skip
        return optree.tree_unflatten(self.treedef, leaves)


def spec_of(out: Any) -> Any:
    """What `Joined` needs of an earlier call's outputs to allocate before the chunks
    run: their structure, and per leaf its shape and dtype (None unless every leaf is a
    NumPy array)."""
    leaves, treedef = optree.tree_flatten(out, is_leaf=_is_leaf)
    if not leaves or any(type(leaf) is not np.ndarray or not leaf.ndim for leaf in leaves):
        return None
    return treedef, [(leaf.shape, leaf.dtype) for leaf in leaves]


def _is_leaf(x: Any) -> bool:
    return isinstance(x, Tracer | np.ndarray)


def _overlaps(leaf: np.ndarray, claimed: list[tuple[int, int]]) -> bool:
    low, high = _byte_bounds(leaf)
    return any(low < end and start < high for start, end in claimed)


def _check_example_shape(first: Any, leaf: Any, ax: int, j: int, start: int) -> None:
    """A chunk's output `j` has the first chunk's per-example shape, or an error says
    that the examples' results differ (the loop's `np.stack` cannot stack them)."""
    a, b = list(np.shape(first)), list(np.shape(leaf))
    del a[ax], b[ax]
    if a != b:
        raise OutputShapeError(
            f"vmap: output {j} of the function has shape {tuple(a)} for the first examples "
            f"but {tuple(b)} for example {start} on, so the results cannot be stacked into "
            "one array (as `np.stack` of the loop's results cannot). Return results of one "
            "shape (pad them, with a mask if needed), or use `vmapx.map`, which returns a "
            "list of the results."
        )


def _concatenate(parts: list[Any], axis: int, dtypes: set[Any]) -> Any:
    if None in dtypes or any(isinstance(p, Tracer) for p in parts):
        return np.concatenate(parts, axis=axis)  # (an outer transform's values)
    return np.concatenate(parts, axis=axis, dtype=np.result_type(*dtypes))


def _same_output(a: Any, b: Any) -> bool:
    """Whether two chunks' values of an unmapped output agree (values of an outer
    transform's tracers cannot be compared: each chunk computed them alike)."""
    if a is b or isinstance(a, Tracer) or isinstance(b, Tracer):
        return True
    try:
        return bool(np.array_equal(a, b, equal_nan=True))
    except TypeError:  # (no NaN in this dtype)
        return bool(np.array_equal(a, b))


def _whole_like(leaf: np.ndarray, ax: int, size: int) -> np.ndarray:
    shape = list(leaf.shape)
    shape[ax] = size
    return np.empty(shape, dtype=leaf.dtype)


def _fits(column: np.ndarray, leaf: Any, ax: int, n: int) -> bool:
    shape = list(column.shape)
    shape[ax] = n
    return type(leaf) is np.ndarray and leaf.dtype == column.dtype and list(leaf.shape) == shape
