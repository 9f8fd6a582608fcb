"""Structured control flow: `cond`, `switch`, `while_loop`, `fori_loop`, `scan`.

Without a transform these are plain Python. Under `vmap`, a predicate that differs
between examples *partitions* the batch: each branch runs once, batched, on exactly the
examples that take it, and the results are stitched back in example order. A branch no
example takes never runs (it costs nothing and cannot loop forever), unlike a `select`
that runs every branch on every example. `while_loop` keeps iterating only the examples
whose predicate still holds. `scan`, and `fori_loop` with unbatched bounds, have no
data-dependent control flow: they are Python loops of batched NumPy calls.

How a partition runs. The vmap levels involved (the *chain*: the consecutive `vmap`
traces from the outermost one that batches the predicate up to the innermost one among
the arguments) are flattened into one batch of `N = B_1 * ... * B_m` examples. For the
examples of one branch, the chain's stack slots are taken by guards (`_Suspended`), a
fresh `BatchTrace` of that many examples is pushed, and the branch runs on the gathered
operands. Batched values the branch closes over are gathered too (its closure cells
hold the gathered values for the run). Any other use of a chain value inside the branch
hits a guard, and the function then runs once per example (the loop's answer), as it
does when the branch itself cannot stay batched.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable, Sequence
from typing import Any, Final, Literal, cast

import numpy as np

from . import _payload, _scalars
from . import _pytree as optree  # optree in vmapx.config.pytree_namespace
from ._batching import BatchTrace, BatchTracer, bcast_batch, caught_error, is_batched, unwrap
from ._core import ConcretizationSignal, Trace, Tracer, _state, bind
from ._registry import Primitive, register
from .errors import ControlFlowError, TraceMixError
from .random import BatchGenerator, SharedDraws, subbatch_generator

__all__ = ["cond", "fori_loop", "scan", "switch", "while_loop"]

_UNBATCHED, _BATCHED, _GENERATOR = 0, 1, 2
# a batched value used inside a branch that the branch neither received nor closes over
_CAPTURE = types.SimpleNamespace(
    what="a branch or loop body used a batched value it did not receive as an operand "
    "(for example through an object's attribute)",
    fix="pass the value to `cond`/`switch`/`while_loop` as an operand",
)


class _Suspended(Trace):
    """Holds a vmap's stack slot while a branch runs on part of its batch."""

    __slots__ = ("trace",)

    def __init__(self, trace: BatchTrace) -> None:
        super().__init__(trace.transform)
        self.level = trace.level
        self.trace = trace


class _InBranch:
    """The axis name of a branch's sub-batch: the names of the vmaps it stands for,
    which no collective can use there (a collective needs every example), and for each
    name the number of every example of the sub-batch along that axis and its size
    (for `axis_index`, a per-example value)."""

    __slots__ = ("names", "index", "sizes")

    def __init__(self, traces: list[BatchTrace], ix: tuple[Any, ...]) -> None:
        self.index: dict[Any, Any] = {}
        self.sizes: dict[Any, Any] = {}
        for t, i in zip(traces, ix, strict=True):
            if isinstance(t.axis_name, _InBranch):  # a branch inside a branch
                for name, outer in t.axis_name.index.items():
                    self.index[name] = outer[i]
                self.sizes.update(t.axis_name.sizes)
            elif t.axis_name is not None:
                self.index[t.axis_name] = i
                self.sizes[t.axis_name] = t.axis_size
        self.names = list(self.index)


def branch_axis_index(names: tuple[Any, ...]) -> Any:
    """`axis_index(names)` inside the innermost branch whose sub-batch has all these
    axes: each example's number (row-major over the names); None outside one."""
    for t in reversed(_state.stack):
        if type(t) is BatchTrace and isinstance(t.axis_name, _InBranch):
            branch = t.axis_name
            if not all(n in branch.index for n in names):
                return None
            index: Any = 0
            for n in names:
                index = index * branch.sizes[n] + branch.index[n]
            return t.wrap(np.asarray(index, dtype=np.intp))
    return None


def suspended_names(t: Trace) -> list[Any]:
    """The axis names a partition has suspended at stack slot `t`."""
    if isinstance(t, _Suspended):
        return [t.trace.axis_name]
    if type(t) is BatchTrace and isinstance(t.axis_name, _InBranch):
        return t.axis_name.names
    return []


def _batched_levels(x: Any) -> list[int]:
    """The levels of the vmaps that batch `x`, innermost first."""
    levels = []
    while type(x) is BatchTracer:
        levels.append(x._trace.level)
        x = x.val
    return levels


def _level(x: Any) -> int:
    if isinstance(x, Tracer):
        return x._trace.level
    if isinstance(x, BatchGenerator) and x._trace is not None:
        return x._trace.level
    return 0


def _leaves(tree: Any) -> list[Any]:
    return optree.tree_leaves(tree)


# -- closures ------------------------------------------------------------------------


def _traced(value: Any) -> bool:
    return any(isinstance(x, Tracer | BatchGenerator) for x in _leaves(value))


def _python_number_as_array(x: Any) -> Any:
    """A Python (or NumPy) float or complex as a 0-d array; anything else (a tracer,
    whose `__class__` may say `float`) unchanged."""
    if not isinstance(x, Tracer) and isinstance(x, float | complex):
        return np.asarray(x)
    return x


def _traced_cells(fn: Any) -> list[types.CellType]:
    """The closure cells of `fn` (and of functions it closes over) holding traced values."""
    found: list[Any] = []
    seen: set[Any] = set()

    def visit(f: Any) -> None:
        if id(f) in seen:
            return
        seen.add(id(f))
        if isinstance(f, functools.partial):
            visit(f.func)
        elif isinstance(f, types.MethodType):
            visit(f.__func__)
        for cell in getattr(f, "__closure__", None) or ():
            try:
                value = cell.cell_contents
            except ValueError:  # a variable not assigned yet
                continue
            if isinstance(value, types.FunctionType | functools.partial | types.MethodType):
                visit(value)
            elif _traced(value):
                found.append(cell)

    visit(fn)
    return found


def _captured_leaves(fns: Sequence[Callable[..., Any]]) -> list[Any]:
    leaves = []
    for fn in fns:
        leaves += [x for cell in _traced_cells(fn) for x in _leaves(cell.cell_contents)]
        if isinstance(fn, functools.partial):
            leaves += _leaves((fn.args, fn.keywords))
    return leaves


# -- the chain of vmap levels a partition flattens ---------------------------------


class _Chain:
    """Consecutive vmap traces whose batches are flattened into one of `size` examples."""

    __slots__ = ("traces", "sizes", "size", "lo", "scalars")

    def __init__(self, traces: list[BatchTrace]) -> None:
        self.traces = traces
        self.sizes = tuple(t.axis_size for t in traces)
        self.size = int(np.prod(self.sizes, dtype=np.int64))
        self.lo = traces[0].level
        # ids of the results (`run`'s values) that are numbers for each example, and
        # their marks (`vmapx._scalars`: True for a NumPy scalar, else a Python type)
        self.scalars: dict[int, Any] = {}

    def peel(self, x: Any) -> tuple[Any, list[int]]:
        """`x` below the chain, and the chain positions of its leading (batch) axes."""
        present = []
        for j in range(len(self.traces) - 1, -1, -1):
            if type(x) is BatchTracer and x._trace is self.traces[j]:
                x = x.val
                present.append(j)
        return x, present[::-1]

    def index(self, idx: np.ndarray) -> tuple[Any, ...]:
        """Flat example numbers as one index array per chain level."""
        return np.unravel_index(idx, self.sizes) if len(self.sizes) > 1 else (idx,)

    def gather(self, x: Any, ix: tuple[Any, ...]) -> tuple[Any, int]:
        """`(value, kind)`: the examples `ix` of `x` (batch-front, below the chain)."""
        if isinstance(x, BatchGenerator):
            return x, _GENERATOR if any(x._trace is t for t in self.traces) else _UNBATCHED
        v, present = self.peel(x)
        if not present:
            return x, _UNBATCHED
        return v[_payload.onto(tuple(ix[j] for j in present), _payload.like(v))], _BATCHED

    def flat(self, x: Any, what: str) -> np.ndarray:
        """The concrete per-example scalars of `x` over the flattened batch: `(size,)`."""
        v, present = self.peel(x)
        v = _payload.concrete(v)  # a value traced below the chain asks its own trace
        if v.ndim != len(present):
            raise TypeError(
                f"{what} must be a scalar for each example, got per-example shape "
                f"{v.shape[len(present) :]}"
            )
        shape = [s if j in present else 1 for j, s in enumerate(self.sizes)]
        return np.broadcast_to(v.reshape(shape), self.sizes).reshape(-1)

    def wrap(self, flat: Any) -> Any:
        """A `(size, ...)` value below the chain as the batched value of every level."""
        v = flat.reshape(self.sizes + tuple(flat.shape[1:]))
        for t in self.traces:
            v = t.wrap(v)
        return v

    # -- running a function on part of the batch -------------------------------------

    def run(
        self,
        fn: Callable[..., Any],
        inputs: list[Any],
        treedef: Any,
        ix: tuple[Any, ...],
        what: str,
        marks: list[Any] | None = None,
    ) -> tuple[Any, ...]:
        """`fn(*args)` on the examples `ix`; `inputs` are the gathered argument leaves as
        `(value, kind)`, `marks` how each is a number for each example (`_scalar_mark`).
        Returns the output leaves as `(value, batched)` and their treedef."""
        top = self.traces[-1]
        sub = BatchTrace(len(ix[0]), _InBranch(self.traces, ix), top.fallback, top.randomness)
        sub.like = top.like
        # the sub-batch takes the chain's innermost slot (traces above keep their levels)
        sub.level = top.level
        stack = _state.stack
        span = slice(self.lo - 1, top.level)
        saved = cast(list[BatchTrace], stack[span])  # (the chain's traces hold these slots)
        stack[span] = [*(_Suspended(t) for t in saved[:-1]), sub]
        failure: ConcretizationSignal | types.SimpleNamespace | None = None
        try:
            fn, undo = self._capture(fn, ix, sub)
            try:
                marks = marks or [None] * len(inputs)
                entered = [
                    self._enter(sub, v, k, m) for (v, k), m in zip(inputs, marks, strict=True)
                ]
                out = fn(*treedef.unflatten(entered))
            finally:
                undo()
        except ConcretizationSignal as signal:
            if signal.trace is not sub:
                raise
            failure = signal
        except TraceMixError:
            failure = _CAPTURE
        except Exception:
            if sub.pending is None:
                raise
        finally:
            stack[span] = saved
            sub.alive = False
        failure = failure or sub.pending
        if failure is None and sub.raised is not None:  # `fn` caught a NumPy error
            what, fix = caught_error(sub.raised)
            failure = types.SimpleNamespace(what=what, fix=fix)
        if failure is None:
            leaves, out_def = optree.tree_flatten(out)
            pairs = [self._exit(sub, x, what) for x in leaves]
            if None not in pairs:
                return pairs, out_def
            failure = _CAPTURE
        raise top.concretization(failure.what, failure.fix)

    def _enter(self, sub: BatchTrace, v: Any, kind: int, mark: Any = None) -> Any:
        if kind == _BATCHED:
            x = sub.wrap(v)
            if mark:  # (the loop's value is a number: `isinstance`, `s += y` rebinding)
                x._scalar = mark
            return x
        if kind == _GENERATOR:
            return subbatch_generator(v, self.traces, sub)
        return v

    def _exit(self, sub: BatchTrace, x: Any, what: str) -> tuple[Any, ...] | None:
        if type(x) is BatchTracer and x._trace is sub:
            if _scalars.is_scalar(x):
                self.scalars[id(x.val)] = x._scalar
            return x.val, True
        mark = _scalar_mark(x)
        if mark:
            self.scalars[id(x)] = mark
        if isinstance(x, BatchGenerator):
            raise ControlFlowError(f"{what}: a random generator cannot be a result or carry")
        if isinstance(x, Tracer) and x._trace.level >= self.lo:
            return None  # a chain value the branch reached some other way
        return x, False

    def _capture(
        self, fn: Callable[..., Any], ix: tuple[Any, ...], sub: BatchTrace
    ) -> tuple[Callable[..., Any], Callable[..., Any]]:
        """Give the closure cells of `fn` the examples `ix` of their batched values;
        returns the function to call and the undo."""

        def convert(tree: Any) -> Any:
            return optree.tree_map(lambda x: self._enter(sub, *self.gather(x, ix)), tree)

        swapped = []
        for cell in _traced_cells(fn):
            old = cell.cell_contents
            cell.cell_contents = convert(old)
            swapped.append((cell, old))
        if isinstance(fn, functools.partial) and _traced((fn.args, fn.keywords)):
            fn = functools.partial(fn.func, *convert(fn.args), **convert(fn.keywords))

        def undo() -> None:
            for cell, old in swapped:
                cell.cell_contents = old

        return fn, undo

    def stitch(self, parts: list[Any], what: str) -> Any:
        """Put the results of the parts (`(idx, pairs, treedef)`, the examples of each)
        back in example order, as the batched values of every chain level."""
        treedef = parts[0][2]
        for _, _, other in parts[1:]:
            if other != treedef:
                raise ControlFlowError(
                    f"{what}: the branches return different structures ({treedef} and "
                    f"{other}); every branch must return the same structure"
                )
        columns = zip(*(pairs for _, pairs, _ in parts), strict=True)
        idxs = [idx for idx, _, _ in parts]
        return treedef.unflatten([self._joined(c, idxs, what) for c in columns])

    def _joined(self, pieces: Sequence[Any], idxs: list[Any], what: str) -> Any:
        out = self.wrap(self._join(pieces, idxs, what))
        marks = {self.scalars.get(id(v)) for v, _ in pieces}
        if len(marks) == 1 and isinstance(out, Tracer) and out.ndim == 0:  # (numbers alike)
            (out._scalar,) = marks  # (`s += y` rebinds a scalar; `isinstance` as the loop's)
        return out

    def _join(self, pieces: Sequence[Any], idxs: list[Any], what: str) -> Any:
        ref = _payload.like(*(v for v, _ in pieces))
        pieces = [
            (v, b) if b or isinstance(v, Tracer) else (np.asarray(v, like=ref), b)
            for v, b in pieces
        ]
        shapes = {tuple(v.shape[1:] if b else v.shape) for v, b in pieces}
        if len(shapes) > 1:
            raise ControlFlowError(
                f"{what}: the examples' results have different shapes {sorted(shapes)}; "
                "every branch (and every iteration of a loop) must give the same shape"
            )
        (shape,) = shapes
        if len({v.dtype for v, _ in pieces}) > 1:  # (what follows could depend on it)
            raise self.traces[-1].concretization(
                f"{what}: the examples' results have different dtypes "
                f"({', '.join(sorted({str(v.dtype) for v, _ in pieces}))}), which one "
                "batched value cannot hold",
                "give every branch (and every iteration) the same dtype, e.g. with `.astype(...)`",
            )
        if not any(isinstance(v, Tracer) for v, _ in pieces):  # plain arrays: scatter
            out = np.empty((self.size, *shape), pieces[0][0].dtype, like=ref)
            for (v, _), idx in zip(pieces, idxs, strict=True):
                out[_payload.moved(idx, ref)] = v
            return out
        full = [
            v if b else np.broadcast_to(v, (len(i), *shape))
            for (v, b), i in zip(pieces, idxs, strict=True)
        ]
        order = np.argsort(np.concatenate(idxs), kind="stable")
        return np.concatenate(full)[_payload.moved(order, ref)]


_MIXED: Final = "mixed"  # `_plan`: another transform's trace lies among the levels involved


def _plan(
    pred: Any, trees: Sequence[Any], fns: Sequence[Callable[..., Any]]
) -> _Chain | Literal["mixed"] | None:
    """The chain for a partition by `pred`; None when `pred` is not batched, `_MIXED` when
    a trace of another transform lies between the levels involved (`vmap(grad(f))`)."""
    levels = _batched_levels(pred)
    if not levels:
        return None
    leaves = [x for tree in trees for x in _leaves(tree)] + _captured_leaves(fns)
    hi = max([*levels, *(_level(x) for x in leaves)])
    traces = _state.stack[min(levels) - 1 : hi]
    if all(type(t) is BatchTrace for t in traces):
        return _Chain(cast(list[BatchTrace], traces))
    return _MIXED


def _mixed(pred: BatchTracer, what: str) -> BaseException:
    return pred._trace.concretization(
        f"`{what}` on a batched predicate whose operands are also traced by another "
        "transform applied inside the vmap (for example `vmap(grad(f))`)",
        "apply the other transform outside the vmap (`grad(lambda x: vmap(f)(x).sum())`), "
        "or use `np.where` on both results",
    )


# -- under another transform inside the vmap: `switch` as a primitive ----------------
#
# When the trace of another transform lies between the vmap levels of the index and of
# the operands (`vmap(grad(f))`, `vmap(jvp(f))`), the partition cannot run on the values
# the user holds. `switch` then becomes the primitive `SWITCH` on flat leaves, with the
# rules of JAX's `cond`: its batch rule partitions (or, for a vmap that does not batch
# the index, runs `SWITCH` one level down with branches that re-enter that vmap), its JVP
# is the switch of the branches' JVPs and its VJP the switch of their VJPs (see the end
# of this module). Values the branches close over become explicit operands, so that
# derivatives flow through them too.


class BranchFn:
    """A branch made here: a callable whose closure the closure scan does not enter."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn

    def __call__(self, *args: Any) -> Any:
        return self.fn(*args)


class _Flat:
    """Branches as functions of flat leaves (their closure values first, then the
    operands) returning flat tuples; `out_def` is the structure of their results."""

    def __init__(self, branches: tuple[Any, ...], operands: tuple[Any, ...], name: str) -> None:
        self.cells = list({id(c): c for b in branches for c in _traced_cells(b)}.values())
        captured, self.cap_def = optree.tree_flatten([c.cell_contents for c in self.cells])
        ops, self.op_def = optree.tree_flatten(operands)
        self.n_cap = len(captured)
        self.leaves = captured + ops
        self.name = name
        self.out_def: optree.PyTreeSpec | None = None
        self.branches = tuple(BranchFn(functools.partial(self.call, b)) for b in branches)

    def call(self, branch: Callable[..., Any], *leaves: Any) -> tuple[Any, ...]:
        old = [c.cell_contents for c in self.cells]
        captured = self.cap_def.unflatten(leaves[: self.n_cap])
        for cell, value in zip(self.cells, captured, strict=True):
            cell.cell_contents = value
        try:
            out = branch(*self.op_def.unflatten(leaves[self.n_cap :]))
        finally:
            for cell, value in zip(self.cells, old, strict=True):
                cell.cell_contents = value
        out_leaves, out_def = optree.tree_flatten(out)
        if self.out_def is not None and out_def != self.out_def:
            raise ControlFlowError(
                f"{self.name}: the branches return different structures ({self.out_def} and "
                f"{out_def}); every branch must return the same structure"
            )
        self.out_def = out_def
        return tuple(out_leaves)


def _switch_impl(
    index: Any, *leaves: Any, branches: tuple[Callable[..., tuple[Any, ...]], ...], name: str
) -> tuple[Any, ...]:
    return branches[_branch_index(index, len(branches), name)](*leaves)


SWITCH = Primitive("vmapx.switch", _switch_impl)


def _switch_rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
    index, *leaves = args
    branches, name = kwargs["branches"], kwargs["name"]
    if is_batched(trace, index):
        return _select(index, branches, tuple(leaves), name, nested=True)
    # the index does not depend on this vmap: one level down, with branches re-entering it
    pairs = [unwrap(trace, x) for x in leaves]

    def reenter(branch: Callable[..., Any]) -> BranchFn:
        def run(*lower: Any) -> tuple[Any, ...]:
            ins = [trace.wrap(v) if b else v for v, (_, b) in zip(lower, pairs, strict=True)]
            return tuple(bcast_batch(trace, o) for o in branch(*ins))

        return BranchFn(run)

    kwargs = {"branches": tuple(reenter(b) for b in branches), "name": name}
    out = bind(SWITCH, (index, *(v for v, _ in pairs)), kwargs)
    return tuple(trace.wrap(o) for o in out)


register(SWITCH, "batch", _switch_rule)


# -- the public functions ----------------------------------------------------------


def switch(index: Any, branches: Sequence[Callable[..., Any]], *operands: Any) -> Any:
    """Apply `branches[index]` to `operands`, batched per example under `vmap`.

    The index is clamped to `0 .. len(branches) - 1` (as in JAX). Without a transform
    this is `branches[index](*operands)`. Under `vmap` with an index that differs
    between examples, each branch runs once on exactly the examples that select it,
    and only branches some example selects run at all.

    **Arguments:**

    - `index`: an integer scalar per example.
    - `branches`: a sequence of functions, each taking `*operands` and returning the
      same structure of arrays with the same per-example shapes.
    - `operands`: the arguments of the branch (arrays or pytrees of arrays).

    **Returns:** the result of the selected branch.

    **Example:**

    ```python
    >>> import numpy as np, vmapx
    >>> branches = [np.negative, np.square, np.sqrt]
    >>> vmapx.vmap(lambda i, x: vmapx.switch(i, branches, x))(np.array([0, 1, 2]), np.full(3, 4.0))
    array([-4., 16.,  2.])

    ```
    """
    branches = tuple(branches)
    if not branches or not all(callable(b) for b in branches):
        raise TypeError("switch: `branches` must be a non-empty sequence of functions")
    return _select(index, branches, operands, "switch")


def cond(
    pred: Any, true_fn: Callable[..., Any], false_fn: Callable[..., Any], *operands: Any
) -> Any:
    """`true_fn(*operands)` if `pred` else `false_fn(*operands)`, per example under `vmap`.

    Without a transform this is a Python `if`. Under `vmap` with a predicate that
    differs between examples, `true_fn` runs once on exactly the examples whose
    predicate holds and `false_fn` on the others; a branch that no example takes
    never runs (so it costs nothing, and cannot fail or loop forever on inputs it was
    not meant for). The branches must return the same structure and per-example shapes;
    where the examples' branches give different dtypes, they run one by one (as a loop).

    **Arguments:**

    - `pred`: a boolean (or number) scalar per example.
    - `true_fn`, `false_fn`: functions of `*operands`. They may also use values from
      the enclosing function (closures); passing them as operands is the sure way.
    - `operands`: the arguments of the branches.

    **Returns:** the result of the branch taken.

    **Example:**

    ```python
    >>> import numpy as np, vmapx
    >>> def safe_log(x):
    ...     return vmapx.cond(x > 0, np.log, lambda x: np.full_like(x, -np.inf), x)
    >>> vmapx.vmap(safe_log)(np.array([1.0, 0.0, np.e]))
    array([  0., -inf,   1.])

    ```
    """
    if not (callable(true_fn) and callable(false_fn)):
        raise TypeError("cond: `true_fn` and `false_fn` must be functions")
    return _select(pred, (false_fn, true_fn), operands, "cond")


def _select(
    index: Any,
    branches: tuple[Any, ...],
    operands: tuple[Any, ...],
    name: str,
    nested: bool = False,
) -> Any:
    """`branches[index](*operands)`, partitioned where `index` is batched. `nested`: called
    by the batch rule of `SWITCH` (which must not bind `SWITCH` again)."""
    chain = _plan(index, (operands,), branches)
    if chain is None:
        return branches[_branch_index(index, len(branches), name)](*operands)
    if chain == _MIXED:
        if nested:
            raise _mixed(index, name)
        flat_branches = _Flat(branches, operands, name)
        kwargs = {"branches": flat_branches.branches, "name": name}
        out = bind(SWITCH, (index, *flat_branches.leaves), kwargs)
        assert flat_branches.out_def is not None  # (set by the branch that ran)
        return flat_branches.out_def.unflatten(out)
    what = "the predicate of `cond`" if name == "cond" else "the index of `switch`"
    flat = chain.flat(index, what)
    flat = flat.astype(bool).astype(np.intp) if name == "cond" else _clamp(flat, len(branches))
    taken = np.flatnonzero(np.bincount(flat, minlength=len(branches)))
    if len(taken) <= 1:  # every example agrees: the branch runs on the batch as it is
        return branches[int(taken[0]) if len(taken) else 0](*operands)
    leaves, treedef = optree.tree_flatten(operands)
    shared = SharedDraws(leaves + _captured_leaves(branches), chain.traces)
    parts = []
    for b in taken:
        idx = np.flatnonzero(flat == b)
        ix = chain.index(idx)
        inputs = [chain.gather(x, ix) for x in leaves]
        shared.begin()
        pairs, out_def = chain.run(branches[b], inputs, treedef, ix, name)
        shared.end()
        parts.append((idx, pairs, out_def))
    shared.settle()
    return chain.stitch(parts, name)


def _branch_index(index: Any, n: int, name: str) -> int:
    i = int(bool(index)) if name == "cond" else int(index)
    return min(max(i, 0), n - 1)


def _clamp(flat: np.ndarray, n: int) -> np.ndarray:
    if not np.issubdtype(flat.dtype, np.integer) and flat.dtype != np.bool_:
        raise TypeError(f"switch: the index must be an integer, got dtype {flat.dtype}")
    return cast(np.ndarray, np.clip(flat, 0, n - 1).astype(np.intp))


def while_loop(cond_fun: Callable[..., Any], body_fun: Callable[..., Any], init_val: Any) -> Any:
    """Repeat `val = body_fun(val)` while `cond_fun(val)`; per example under `vmap`.

    Without a transform this is a Python `while` loop. Under `vmap`, while every
    example agrees the body runs on the whole batch; once they disagree, only the
    examples still running are iterated (the active set shrinks) and the loop ends when
    the last one stops, so each example gets exactly the iterations it would get alone.
    Differentiable with `jvp` and with the reverse-mode transforms (the tape records
    the iterations actually run).

    **Arguments:**

    - `cond_fun`: a function of the loop value returning a boolean scalar.
    - `body_fun`: a function of the loop value returning the next one (same
      structure and per-example shapes).
    - `init_val`: the initial loop value (an array or a pytree of arrays).

    **Returns:** the final loop value.

    **Example:**

    ```python
    >>> import numpy as np, vmapx
    >>> def collatz_steps(n):          # the number of steps to reach 1
    ...     def body(s):
    ...         n, k = s
    ...         return np.where(n % 2 == 0, n // 2, 3 * n + 1), k + 1
    ...     return vmapx.while_loop(lambda s: s[0] != 1, body, (n, 0))[1]
    >>> vmapx.vmap(collatz_steps)(np.array([1, 6, 27]))
    array([  0,   8, 111])

    ```
    """
    return _unaliased(_while(cond_fun, body_fun, init_val), init_val)


def _unaliased(out: Any, init_val: Any) -> Any:
    """The loop's value with none of `init_val`'s arrays in it (copies): where no
    iteration ran (or the body returned its input), the Python loop's value *is*
    `init_val`, which `f` may then write in place, while a batched loop's examples that
    ran are new arrays; the loops give new arrays, as JAX's do."""
    given = {id(x) for x in optree.tree_leaves(init_val) if isinstance(x, np.ndarray | Tracer)}
    if not given:
        return out
    return optree.tree_map(lambda x: x.copy() if id(x) in given else x, out)


def _while(
    cond_fun: Callable[..., Any], body_fun: Callable[..., Any], val: Any, nested: bool = False
) -> Any:
    """`while_loop`; `nested`: called by the batch rule of `WHILE` (no binding it again)."""
    while True:
        c = cond_fun(val)
        chain = _plan(c, (val,), (cond_fun, body_fun))
        if chain == _MIXED:
            if nested:
                raise _mixed(c, "while_loop")
            return _bind_while(cond_fun, body_fun, val, c._trace)
        if chain is None:
            if not c:
                return val
            val = body_fun(val)
            continue
        go = chain.flat(c, "the result of `cond_fun`").astype(bool)
        if not go.any():  # (also an empty batch)
            return val
        if go.all():
            val = body_fun(val)
        else:
            return _while_partitioned(chain, go, cond_fun, body_fun, val)


def _while_partitioned(
    chain: _Chain,
    go: np.ndarray,
    cond_fun: Callable[..., Any],
    body_fun: Callable[..., Any],
    val: Any,
) -> Any:
    """The loop with an active set: finished examples are set aside as they finish."""
    leaves, treedef = optree.tree_flatten(val)
    args_def = optree.tree_structure((val,))  # the leaves of `(val,)`, as `run` takes them
    active = np.arange(chain.size)
    state = [chain.gather(x, chain.index(active)) for x in leaves]
    if any(k == _GENERATOR for _, k in state):
        raise ControlFlowError("while_loop: a random generator cannot be part of the loop value")
    parts = []
    # which leaves are NumPy scalars for each example (`s += y` rebinds a scalar)
    scalar = [_scalar_mark(x) for x in leaves]
    finished_scalars: dict[int, Any] = {}  # (ids of values alive in `parts`: their marks)
    while True:
        if not go.all():
            done, keep = np.flatnonzero(~go), np.flatnonzero(go)
            finished = [(v[_payload.moved(done, v)], True) if k else (v, False) for v, k in state]
            finished_scalars.update(
                (id(v), s) for (v, _), s in zip(finished, scalar, strict=True) if s
            )  # fmt: skip
            parts.append((active[done], finished, treedef))
            active = active[keep]
            state = [(v[_payload.moved(keep, v)], k) if k else (v, k) for v, k in state]
        chain.scalars = dict(finished_scalars)  # (an earlier iteration's ids may be reused)
        if not len(active):
            return chain.stitch(parts, "while_loop")
        ix = chain.index(active)
        pairs, out_def = chain.run(body_fun, state, args_def, ix, "while_loop", scalar)
        if out_def != treedef:
            raise ControlFlowError(
                f"while_loop: `body_fun` must return the structure of the loop value "
                f"({treedef}), got {out_def}"
            )
        state = [(v, int(b)) for v, b in pairs]
        scalar = [chain.scalars.get(id(v)) for v, _ in pairs]
        (c, c_batched), *rest = chain.run(cond_fun, state, args_def, ix, "while_loop", scalar)[0]
        if rest:
            raise TypeError("while_loop: `cond_fun` must return a boolean scalar")
        if c_batched:
            go = _concrete(c, "the result of `cond_fun`").astype(bool)
        else:
            go = np.full(len(active), bool(c))


def _scalar_mark(x: Any) -> Any:
    """How `x` is a number for each example, as `vmapx._scalars` marks tracers: True
    for a NumPy scalar, the type of a Python number, else None (an array)."""
    if isinstance(x, Tracer):
        return x._scalar if _scalars.is_scalar(x) else None
    if isinstance(x, np.generic):
        return True
    return _scalars.weak_type(x)


def _concrete(v: Any, what: str) -> np.ndarray:
    host = _payload.concrete(v)
    if host.ndim != 1:
        raise TypeError(f"{what} must be a scalar for each example, got shape {host.shape[1:]}")
    return host


def fori_loop(lower: Any, upper: Any, body_fun: Callable[..., Any], init_val: Any) -> Any:
    """`for i in range(lower, upper): val = body_fun(i, val)`; per example under `vmap`.

    With bounds that do not depend on the batch this is a Python loop of batched
    NumPy calls. With batched bounds it is a `while_loop` on `(i, val)`, so each
    example runs its own number of iterations.

    **Arguments:**

    - `lower`, `upper`: integer bounds (scalars per example).
    - `body_fun`: a function `(i, val) -> val`.
    - `init_val`: the initial loop value.

    **Returns:** the final loop value.

    **Example:**

    ```python
    >>> import numpy as np, vmapx
    >>> partial_sum = lambda n: vmapx.fori_loop(0, n, lambda i, s: s + i, 0)
    >>> vmapx.vmap(partial_sum)(np.array([3, 0, 5]))
    array([ 3,  0, 10])

    ```
    """
    if not (_batched_levels(lower) or _batched_levels(upper)):
        val = init_val
        for i in range(int(lower), int(upper)):
            val = body_fun(i, val)
        return _unaliased(val, init_val)

    trace = (lower if _batched_levels(lower) else upper)._trace

    def body(carry: tuple[Any, ...]) -> tuple[Any, ...]:
        i, val = carry
        new = body_fun(i, val)
        _check_index_promotion(trace, val, new)
        return i + 1, new

    return while_loop(lambda carry: carry[0] < upper, body, (lower, init_val))[1]


def _check_index_promotion(trace: Trace, val: Any, new: Any) -> None:
    """With batched bounds the index is an integer array, not the loop's Python int
    (which NumPy promotes weakly: float32 + int is float32). Where the body changed the
    dtype of the value, the array index may be why: the examples run as the loop."""
    old_leaves, new_leaves = optree.tree_leaves(val), optree.tree_leaves(new)
    if len(old_leaves) == len(new_leaves) and all(
        np.result_type(a) == np.result_type(b) for a, b in zip(old_leaves, new_leaves, strict=True)
    ):
        return
    raise trace.concretization(
        "`fori_loop` with bounds that differ between examples gives `body_fun` the index "
        "as an integer array, not a Python int, and `body_fun` changed the dtype of the "
        "loop value (NumPy promotes an integer array, not a Python int, with float32)",
        "give the loop value the dtype it keeps, e.g. `c + np.float32(i)` or "
        "`(c + i).astype(c.dtype)`",
    )


def scan(
    f: Callable[..., Any],
    init: Any,
    xs: Any = None,
    length: int | None = None,
    reverse: bool = False,
) -> tuple[Any, Any]:
    """Loop `carry, y = f(carry, x)` over the leading axis of `xs`, stacking the `y`s.

    The semantics of `jax.lax.scan`: returns the final carry and the stacked outputs.
    It is a Python loop over the steps; under `vmap` each step is batched, and it is
    differentiable in both modes.

    **Arguments:**

    - `f`: a function `(carry, x) -> (carry, y)`.
    - `init`: the initial carry (array or pytree).
    - `xs`: the values to scan over (a pytree of arrays with the same leading size), or
      None with `length` given.
    - `length`: the number of steps (needed when `xs` is None).
    - `reverse`: scan from the end (the `y`s stay in the order of `xs`).

    **Returns:** `(final_carry, ys)`.

    **Example:**

    ```python
    >>> import numpy as np, vmapx
    >>> cumsum = lambda x: vmapx.scan(lambda c, v: (c + v, c + v), 0.0, x)[1]
    >>> vmapx.vmap(cumsum)(np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]))
    array([[ 1.,  3.,  6.],
           [ 4.,  9., 15.]])

    ```
    """
    x_leaves, x_def = optree.tree_flatten(xs)
    lengths = {int(np.shape(x)[0]) if np.ndim(x) else -1 for x in x_leaves}
    if -1 in lengths or len(lengths) > 1:
        raise ValueError(
            f"scan: every leaf of `xs` needs the same leading axis size, got "
            f"{[np.shape(x) for x in x_leaves]}"
        )
    if length is not None and lengths and lengths != {length}:
        raise ValueError(f"scan: `length`={length} but `xs` has leading size {lengths.pop()}")
    if length is None:
        if not lengths:
            raise ValueError("scan: give `xs` or `length`")
        (length,) = lengths
    carry, ys = init, []
    for i in reversed(range(length)) if reverse else range(length):
        carry, y = _pair(f(carry, x_def.unflatten([x[i] for x in x_leaves])))
        ys.append(y)
    if not ys:
        return carry, _empty_ys(f, init, x_leaves, x_def)
    if reverse:
        ys.reverse()
    y_leaves, y_def = optree.tree_flatten(ys[0])
    columns = zip(*(y_def.flatten_up_to(y) for y in ys), strict=True)
    return carry, y_def.unflatten([np.stack(c) for c in columns])


def _pair(out: Any) -> tuple[Any, ...]:
    if not (isinstance(out, tuple) and len(out) == 2):
        raise TypeError(f"scan: `f` must return a pair `(carry, y)`, got {type(out).__name__}")
    return out


def _empty_ys(f: Callable[..., Any], init: Any, x_leaves: list[Any], x_def: Any) -> Any:
    """Zero steps: the `y`s have length 0; one call on zeros tells their shapes."""
    x = x_def.unflatten([np.zeros_like(v, shape=np.shape(v)[1:]) for v in x_leaves])
    _, y = _pair(f(init, x))
    return optree.tree_map(lambda v: np.zeros_like(v, shape=(0, *np.shape(v))), y)


class _FlatLoop:
    """A loop on flat state: the closure values of `cond_fun`/`body_fun` (carried
    unchanged), then the leaves of the loop value."""

    def __init__(
        self, cond_fun: Callable[..., Any], body_fun: Callable[..., Any], val: Any
    ) -> None:
        fns = (cond_fun, body_fun)
        self.cells = list({id(c): c for f in fns for c in _traced_cells(f)}.values())
        captured, self.cap_def = optree.tree_flatten([c.cell_contents for c in self.cells])
        carry, self.carry_def = optree.tree_flatten(val)
        # a Python float carried may come to depend on the inputs: give it a dtype
        carry = [_python_number_as_array(x) for x in carry]
        self.n_cap = len(captured)
        self.leaves = captured + carry
        self.cond = BranchFn(functools.partial(self.call, cond_fun, False))
        self.body = BranchFn(functools.partial(self.call, body_fun, True))

    def call(self, fn: Callable[..., Any], is_body: bool, *leaves: Any) -> Any:
        old = [c.cell_contents for c in self.cells]
        captured = self.cap_def.unflatten(leaves[: self.n_cap])
        for cell, value in zip(self.cells, captured, strict=True):
            cell.cell_contents = value
        try:
            out = fn(self.carry_def.unflatten(leaves[self.n_cap :]))
        finally:
            for cell, value in zip(self.cells, old, strict=True):
                cell.cell_contents = value
        if not is_body:
            return out
        out_leaves, out_def = optree.tree_flatten(out)
        if out_def != self.carry_def:
            raise ControlFlowError(
                f"while_loop: `body_fun` must return the structure of the loop value "
                f"({self.carry_def}), got {out_def}"
            )
        return (*leaves[: self.n_cap], *out_leaves)


def _while_impl(
    *state: Any, cond: Callable[..., Any], body: Callable[..., Any], trace: BatchTrace
) -> tuple[Any, ...]:
    while cond(*state):
        state = body(*state)
    return tuple(state)


WHILE = Primitive("vmapx.while_loop", _while_impl)


def _bind_while(
    cond_fun: Callable[..., Any], body_fun: Callable[..., Any], val: Any, trace: BatchTrace
) -> Any:
    loop = _FlatLoop(cond_fun, body_fun, val)
    kwargs = {"cond": loop.cond, "body": loop.body, "trace": trace}
    out = bind(WHILE, tuple(loop.leaves), kwargs)
    return loop.carry_def.unflatten(out[loop.n_cap :])


def _while_rule(
    trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]
) -> tuple[Any, ...]:
    cond, body = kwargs["cond"], kwargs["body"]
    return tuple(_while(lambda s: cond(*s), lambda s: tuple(body(*s)), tuple(args), True))


register(WHILE, "batch", _while_rule)
