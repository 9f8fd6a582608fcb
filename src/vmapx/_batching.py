"""The batching interpreter: `BatchTracer`, `BatchTrace`, helpers for rules, the loop.

Invariant: a `BatchTracer` holds its value with the batch axis at axis 0, and a value
that does not depend on the batch is never a `BatchTracer`. Batch rules have the
signature `rule(trace, args, kwargs)`: they receive the NumPy call's own arguments,
unwrap this trace's tracers with `unwrap`/`val`, call `np.*` on the values one level
down, and wrap batched results with `trace.wrap`.
"""

from __future__ import annotations

import math
import sys
import warnings
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from . import _config, _core, _frames, _passthrough, _payload
from . import _pytree as optree  # optree in vmapx.config.pytree_namespace
from ._core import ConcretizationSignal, Trace, Tracer, posed_class, user_frame_location
from ._registry import Primitive, ViewTest, builder, each_function, prim_of, register
from ._unmapped import plain_arguments
from .errors import ConcretizationError, FallbackError, PerformanceWarning, UnsupportedError

if TYPE_CHECKING:
    from types import FrameType

BatchRule = Callable[["BatchTrace", tuple[Any, ...], dict[str, Any]], Any]


class BatchTracer(Tracer):
    """A batched value seen per example: `.shape` etc. omit the batch axis (axis 0)."""

    __slots__ = ("val",)
    _trace: BatchTrace
    val: Any  # the batch: a NumPy (or duck) array, the batch axis first

    def __init__(self, trace: BatchTrace, val: Any) -> None:
        self._trace = trace
        self._view = None
        self._version = 0
        self.val = val

    # (annotated locals, not `cast`: a function call on every read of these hot properties)
    @property
    def shape(self) -> tuple[int, ...]:
        shape: tuple[int, ...] = self.val.shape[1:]
        return shape

    @property
    def ndim(self) -> int:
        ndim: int = self.val.ndim - 1
        return ndim

    @property
    def dtype(self) -> np.dtype:
        dtype: np.dtype = self.val.dtype
        return dtype

    @property
    def size(self) -> int:
        return math.prod(self.val.shape[1:])

    @property  # type: ignore[misc]
    def __class__(self) -> type:  # noqa: D105  (the example's class: `Tracer`'s comment)
        # (`isinstance` asks this wherever its real check fails, as `isinstance(x, tuple)`
        # of a tracer in a rule does: the common batch is tested first, cheaply)
        val = self.val
        if type(val) is np.ndarray and val.ndim > 1:
            return np.ndarray
        cls = val.__class__  # (the batch's: an array class, or a duck's)
        return posed_class(self, np.ndarray if issubclass(cls, np.ndarray) else cls)

    def _become(self, other: Tracer) -> None:
        self.val = cast(BatchTracer, other).val
        self._version += 1

    # -- values that must leave the trace (Python control flow): agree, or the loop --
    def _leave_trace(
        self, how: str, convert: Callable[..., Any] | None, args: tuple[Any, ...] = ()
    ) -> Any:
        if how == "array":
            caller = sys._getframe(2)
            _passthrough.learn_caller(caller)  # (a retry may pass `self` there)
            if _frames.indexes_plain_array(caller):
                self._trace.indexed_plain = True
                raise self._trace.concretization(
                    "a plain NumPy array indexed by a batched value (`table[i]`, "
                    "`np.take(table, i)`: NumPy asks the index for one plain array)",
                    "pass the array to the vmapped function as an argument with "
                    "`in_axes=None`, which vmapx indexes batched (an array read from a "
                    "global or a closure, or made inside the function, is NumPy's own); "
                    "for a one-hot row write `np.arange(k) == i`",
                )
            raise self._trace.concretization(
                "`np.asarray`/`np.array` (or a plain NumPy array operation) received a "
                "batched value; a batched value cannot become one plain array",
                "use NumPy functions on the value directly (they batch); to put it into a "
                "new array use `np.zeros_like(x, shape=...)` and index assignment, or "
                "`np.stack`",
            )
        if how == "format":
            if not args[0]:  # (`print(x)`, `f"{x}"`: the batch, see `__repr__`)
                return object.__format__(self, args[0])
            return self._to_concrete(
                cast("Callable[..., Any]", convert),
                f"a format (`{{x:{args[0]}}}`) of a batched value whose examples differ",
                "format the values outside the vmapped function, or print them with "
                "`vmapx.debug.print`",
            )
        if how == "bool":
            if self.size != 1:
                raise ValueError(
                    "The truth value of an array with more than one element is ambiguous. "
                    "Use a.any() or a.all()"
                )
            return self._to_concrete(
                bool,
                "`bool()` (an `if`/`while`/`and`/`or`) of a batched value whose examples differ",
                "use `np.where(cond, a, b)` or `vmapx.cond(pred, true_fn, false_fn, ...)` "
                "so that every example takes its own branch",
            )
        if how == "tolist":
            return self._to_concrete(
                cast("Callable[..., Any]", convert),
                "`.tolist()` of a batched value whose examples differ",
                "keep the value an array",
            )
        if how == "item" and args:  # one element: only it must agree
            return self[args if len(args) > 1 else args[0]].item()
        if how == "index":
            if self.dtype == np.bool_:  # (NumPy 1 asks before it reads a boolean as a mask)
                raise self._trace.concretization(
                    "`operator.index()` of a batched boolean (an index: NumPy 1 reads a "
                    "boolean as a mask, NumPy 2 refuses it)",
                    "index with integers, or select with `np.where`",
                )
            if not np.issubdtype(self.dtype, np.integer):
                raise TypeError("only integer arrays can be converted to an index")
            return self._concrete_scalar(cast("Callable[..., Any]", convert), "operator.index")
        return self._concrete_scalar(
            cast("Callable[..., Any]", convert), how
        )  # float, int, complex, item

    def _to_concrete(self, convert: Callable[..., Any], what: str, fix: str) -> Any:
        """Convert when all examples agree on the value; else fall back to the loop."""
        val = self.val
        if val.shape[0] == 0:
            if _config.shapes_only.get():
                raise ConcretizationError(
                    f"eval_shape: the function reads a value ({what.split(' of ')[0]}), but "
                    "eval_shape has shapes and dtypes only. Compute the shapes by calling "
                    "the function, or keep the value an array (`np.where`, `vmapx.cond`)."
                )
            return convert(np.zeros_like(val, shape=val.shape[1:]))
        first = val[0]
        if bool(np.all(val == first)):
            return convert(first)
        raise self._trace.concretization(what, fix)

    def _concrete_scalar(self, convert: Callable[..., Any], name: str) -> Any:
        if self.size != 1:
            if name == "item":  # (NumPy's own errors: `x.item()` raises ValueError)
                raise ValueError("can only convert an array of size 1 to a Python scalar")
            raise TypeError(f"only size-1 arrays can be converted to Python scalars ({name})")
        return self._to_concrete(
            convert,
            f"`{name}()` of a batched value whose examples differ",
            "keep the value an array (e.g. use `np.where` instead of `if`), or use `vmapx.cond`",
        )


_payload.INNER[BatchTracer] = lambda t: t.val


class BatchTrace(Trace):
    """The trace of one `vmap` call."""

    __slots__ = ("axis_size", "axis_name", "fallback", "randomness", "pending", "largest",
                 "made", "like", "aware", "raised", "unmapped", "indexed_plain")  # fmt: skip

    def __init__(
        self, axis_size: int, axis_name: Any, fallback: str, randomness: str = "error"
    ) -> None:
        super().__init__("vmap")
        self.axis_size = axis_size
        self.axis_name = axis_name
        self.fallback = fallback
        self.randomness = randomness
        # the last concretization signal raised: if code between us and `f`'s caller
        # swallows or converts it (NumPy turns some into ValueError), `vmap` still
        # sees that the batched run is not valid and loops instead
        self.pending: ConcretizationSignal | None = None
        # for auto-chunking: bytes of the largest batched array made, and of all of
        # them (views and arrays computed in place too: they measure the work done on
        # large arrays, whose temporaries, NumPy's own included, chunks keep small)
        self.largest = 0
        self.made = 0
        # ids of the generators `f` made batch-aware (`vmapx.random.batch_aware`): their
        # draws are this trace's, not hidden from it (see vmapx._legacy_random)
        self.aware: set[int] | None = None
        # a duck payload (CuPy, ...) when the inputs live outside NumPy: host arrays met
        # by this trace's rules are moved to its array type (vmapx._payload)
        self.like: Any = None
        # (what, where) of the first NumPy error of a batched call: raised for the whole
        # batch, where the loop raises for some examples only; if `f` catches it and
        # returns, its result is not the loop's (see `vmapx._api`)
        self.raised: tuple[str, str, int] | None = None  # (and the error's id)
        # whether `f` got unmapped arrays as `UnmappedArray`s: rules get plain views of
        # them (their fast paths test `type(x) is np.ndarray`; see vmapx._unmapped)
        self.unmapped = False
        # whether the run stopped at `plain[traced]` (it may run again with them)
        self.indexed_plain = False

    def wrap(self, val: Any) -> BatchTracer:
        if _config.config.checks:
            assert val.shape[0] == self.axis_size, (val.shape, self.axis_size)
        if type(val) is np.ndarray:
            n = val.nbytes
            self.made += n
            if n > self.largest:
                self.largest = n
        return BatchTracer(self, val)

    def process(self, prim: Primitive, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        rule = prim.rules.batch
        if self.like is not None:
            args, kwargs = _payload.onto(args, self.like), _payload.onto(kwargs, self.like)
        if self.unmapped:
            args, kwargs = plain_arguments(args, kwargs)
        try:
            if rule is None:
                out = loop_rule(self, prim, args, kwargs)
            else:
                out = rule(self, args, kwargs)
        except Exception as error:
            if self.raised is None and not type(error).__module__.startswith("vmapx"):
                what = f"`{prim.name}` raised {type(error).__name__}"
                self.raised = (what, _frames.location(), id(error))
            raise
        return out

    def concretization(self, what: str, fix: str) -> BaseException:
        """The exception for a value that must leave this trace: an error in
        `fallback="error"` mode, else the signal that re-runs `f` per example."""
        if not self.alive:
            _core._check_trace(self)  # an escaped tracer: say so
        location = _frames.location()
        if self.fallback == "error":
            return ConcretizationError(
                f"vmap: {what} at {location}. With fallback='error' vmapx does not run "
                f"the function per example. Fix: {fix}."
            )
        self.pending = ConcretizationSignal(self, what, fix, location)
        return self.pending


# -- helpers for rules -------------------------------------------------------------


def is_batched(trace: BatchTrace, x: Any) -> bool:
    return type(x) is BatchTracer and x._trace is trace


def unwrap(trace: BatchTrace, x: Any) -> tuple[Any, bool]:
    """`(value, batched)`: the batch-front value of this trace's tracer, or `x` itself."""
    if type(x) is BatchTracer and x._trace is trace:
        return x.val, True
    return x, False


def held_as_array(x: Any) -> Any:
    """`x`, a (nested) list or tuple holding tracers, as the one tracer `np.asarray`
    makes of it; any other value as it is. For rules of functions that take array-likes
    (`np.isin([x[0], 3.0], t)`): a list's tracers are not seen by `unwrap`."""
    if type(x) in (list, tuple) and _passthrough.has_tracer(x):
        return _passthrough.convert("asarray", x, None, None, 0)
    return x


_SCALARS = (float, int, bool, complex)


def _ndim(x: Any) -> int:
    """`np.ndim(x)` without NumPy's dispatch for the common cases (hot path)."""
    if type(x) in _SCALARS:
        return 0
    nd = getattr(x, "ndim", None)
    return np.ndim(x) if nd is None else nd


def example_ndim(trace: BatchTrace, x: Any) -> int:
    """Number of axes of `x` as one example sees it."""
    if type(x) is BatchTracer and x._trace is trace:
        ndim: int = x.val.ndim - 1
        return ndim
    return _ndim(x)


def bcast_batch(trace: BatchTrace, x: Any) -> Any:
    """`x` as a batch-front value: this trace's value, or a broadcast view (no copy)."""
    if type(x) is BatchTracer and x._trace is trace:
        return x.val
    shape = np.shape(x)
    if not hasattr(x, "shape"):
        x = np.asarray(x)
    return np.broadcast_to(x[None], (trace.axis_size, *shape))


def align_rank(val: Any, example_rank: int, rank: int) -> Any:
    """Insert axes after the batch axis so a batched value broadcasts at `rank`."""
    if example_rank == rank:
        return val
    return val.reshape(val.shape[:1] + (1,) * (rank - example_rank) + val.shape[1:])


def aligned_operands(trace: BatchTrace, operands: Any) -> list[Any]:
    """Operands ready for broadcasting NumPy calls: batched ones get the batch axis
    at the front of the broadcast shape, unbatched ones stay as they are (no copy)."""
    # hot path (every ufunc call): one pass, and no reshape when ranks already agree
    vals, batched_ranks, rank = [], [], 0
    for x in operands:
        if type(x) is BatchTracer and x._trace is trace:
            v = x.val
            r = v.ndim - 1
            batched_ranks.append(r)
        else:
            v = x
            r = _ndim(x)
            batched_ranks.append(-1)
        vals.append(v)
        if r > rank:
            rank = r
    for i, r in enumerate(batched_ranks):
        if 0 <= r < rank:
            vals[i] = align_rank(vals[i], r, rank)
    return vals


def wrap_tree(trace: BatchTrace, tree: Any) -> Any:
    """Wrap every array leaf of a NumPy result as batched."""
    if isinstance(tree, tuple) and not hasattr(tree, "_fields"):
        return tuple(wrap_tree(trace, t) for t in tree)
    if isinstance(tree, list):
        return [wrap_tree(trace, t) for t in tree]
    if hasattr(tree, "_fields"):
        return type(tree)(*(wrap_tree(trace, t) for t in tree))
    return trace.wrap(tree)


def error_marks() -> list[tuple[BatchTrace, Any]]:
    """The `raised` marks of this thread's running vmaps: vmapx code that handles a NumPy
    error itself puts them back (the error is then not one that `f` caught)."""
    return [(t, t.raised) for t in _core._state.stack if isinstance(t, BatchTrace)]


def caught_error(raised: tuple[str, str, int]) -> tuple[str, str]:
    """`(what, fix)` for a NumPy error raised for a whole batch (`BatchTrace.raised`) that
    `f` caught and went on: in the loop only some examples may raise, so the batched
    result is not the loop's."""
    return (
        f"{raised[0]} for the batch, and the function caught it",
        "test for the condition instead of catching the error (`np.where`, or "
        "`vmapx.cond`), so that each example takes its own branch",
    )


# -- the loop fallback ---------------------------------------------------------------


def _example(trace: BatchTrace, tree: Any, i: int) -> Any:
    def take(x: Any) -> Any:
        return x.val[i] if is_batched(trace, x) else x

    return optree.tree_map(take, tree, is_leaf=lambda x: isinstance(x, Tracer), none_is_leaf=True)


def warn_fallback(trace: BatchTrace, what: str) -> None:
    if trace.fallback == "error":
        raise FallbackError(
            f"vmap: {what} has no batching rule, and fallback='error' forbids running it "
            f"per example (at {user_frame_location()}). Use another NumPy function, "
            "give a batched implementation with `vmapx.custom_vmap`, or allow the loop "
            "with fallback='warn'."
        )
    if trace.fallback == "warn":
        warnings.warn(
            f"vmap: {what} has no batching rule; it runs once per example "
            f"({trace.axis_size} calls) and the results are stacked.",
            PerformanceWarning,
            stacklevel=user_stacklevel(),
        )


def user_stacklevel() -> int:
    """The stacklevel of the innermost frame outside vmapx and NumPy."""
    is_library_file = _core._is_library_file
    frame: FrameType | None = sys._getframe(1)
    level = 1
    while frame is not None and is_library_file(frame.f_code.co_filename):
        frame, level = frame.f_back, level + 1
    return level


def loop_rule(
    trace: BatchTrace, prim: Primitive, args: tuple[Any, ...], kwargs: dict[Any, Any]
) -> Any:
    """Run `prim` once per example and stack: correct for any function, but slow."""
    warn_fallback(trace, f"`{prim.name}`")
    return loop_apply(trace, prim.impl, args, kwargs, prim.name)


def loop_apply(
    trace: BatchTrace,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[Any, Any],
    name: str,
) -> Any:
    n = trace.axis_size
    if n == 0:
        return _loop_zero(trace, fn, args, kwargs)
    results = [fn(*_example(trace, args, i), **_example(trace, kwargs, i)) for i in range(n)]
    return stack_results(trace, results, name)


def stack_results(trace: BatchTrace, results: list[Any], name: str) -> Any:
    """Stack per-example results; results whose shapes differ between examples (data-
    dependent shapes such as `np.nonzero`'s) cannot be one batched value: loop `f`."""
    first = results[0]
    if first is None:
        return None
    leaves0, treedef = optree.tree_flatten(first, none_is_leaf=True)
    fix = (
        "keep shapes fixed (e.g. `np.where(mask, x, 0)` instead of `x[mask]`, "
        "`np.sort` instead of `np.unique`)"
    )
    try:
        columns: list[list[Any]] = [treedef.flatten_up_to(r) for r in results]
    except ValueError:  # (lists of different lengths: `np.array_split` by a batched count)
        what = f"`{name}` gives results of different structures for different examples"
        raise trace.concretization(what, fix) from None
    for j in range(len(leaves0)):
        if len({np.shape(c[j]) for c in columns}) > 1:
            what = f"`{name}` gives results of different shapes for different examples"
            raise trace.concretization(what, fix)
    stacked = [np.stack([c[j] for c in columns]) for j in range(len(leaves0))]
    return optree.tree_unflatten(treedef, [trace.wrap(s) for s in stacked])


def _loop_zero(
    trace: BatchTrace, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[Any, Any]
) -> Any:
    """A zero-size batch: run one dummy example to learn the output shapes."""

    def dummy(x: Any) -> Any:
        if is_batched(trace, x):
            return np.ones_like(x.val, shape=x.val.shape[1:])
        return x

    is_leaf = lambda x: isinstance(x, Tracer)  # noqa: E731
    example = fn(
        *optree.tree_map(dummy, args, is_leaf=is_leaf, none_is_leaf=True),
        **optree.tree_map(dummy, kwargs, is_leaf=is_leaf, none_is_leaf=True),
    )
    return optree.tree_map(lambda r: trace.wrap(np.zeros_like(r, shape=(0, *np.shape(r)))), example)


# -- registering batch rules ---------------------------------------------------------


@builder
def defbatch(
    funcs: Callable[..., Any] | Iterable[Callable[..., Any]], rule: Callable[..., Any], *,
    may_view: bool | ViewTest = False,
    replace: bool = False,
) -> None:  # fmt: skip
    """Register `rule(func)` as the batch rule of each function in `funcs`.

    `rule` is a factory: it receives the function and returns the
    `rule(trace, args, kwargs)` callable, so one family helper serves many functions.
    """
    for func in each_function(funcs):
        prim = prim_of(func)
        if may_view:
            prim.may_view = may_view
        register(prim, "batch", rule(func), replace=replace)


@builder
def refuse(func: Callable[..., Any], why: str) -> None:
    """Mark a function as impossible on traced values, with the reason."""
    prim = prim_of(func)

    def rule(trace: Any, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        raise UnsupportedError(f"vmap: `{prim.name}` cannot be used on batched values: {why}")

    register(prim, "batch", rule)
    register(prim, "refused", why)
