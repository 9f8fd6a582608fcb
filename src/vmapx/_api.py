"""`vmap` and `vectorized_map`: argument checking, in/out axes, chunking, the loop."""

from __future__ import annotations

import contextlib
import functools
import inspect
import numbers
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any, ParamSpec, cast

import numpy as np

from . import (
    _autochunk,
    _chunk_outputs,
    _config,
    _core,
    _dask,
    _fallback_memory,
    _kwargs_notice,
    _legacy_random,
    _parallel,
    _passthrough,
    _payload,
    _scalars,
    _subclasses,
    _unmapped,
)  # fmt: skip
from . import _pytree as optree  # optree in vmapx.config.pytree_namespace
from ._batching import BatchTrace, BatchTracer, caught_error, user_stacklevel
from ._chunk_outputs import slice_axis as _slice_axis
from ._core import ConcretizationSignal, Tracer, is_ndarray, pop_trace, push_trace
from ._elision import CONSUMED
from ._unmapped import UnmappedArray, plain_array, unmapped_view
from ._vmap_arguments import check_vmap_arguments
from .errors import (
    AxisSizeError,
    ConcretizationError,
    InAxesError,
    OutputError,
    OutputShapeError,
    PerformanceWarning,
    raise_own_cause,
)

_SENTINEL = object()
# hooks that swap special arguments (random generators) for batch-aware proxies
ARGUMENT_ADAPTERS: list[Callable[[BatchTrace, Any], Any]] = []
# hooks that replace special arguments (random generators) once per vmap call, before any
# chunking: `prepare(leaf, randomness) -> replacement or None`. A replacement is never
# mapped: each batched run gets its ARGUMENT_ADAPTERS form, and example `i` of the
# per-example loop gets `replacement._vmapx_example(i)` (see `vmapx.random`).
CALL_ADAPTERS: list[Callable[[Any, str], Any]] = []


P = ParamSpec("P")


def vmap(
    f: Callable[P, Any],
    in_axes: Any = 0,
    out_axes: Any = 0,
    *,
    axis_size: int | None = None,
    axis_name: Any = None,
    randomness: str = "error",
    chunk_size: int | str | None = "auto",
    fallback: str | None = None,
    workers: int | None = None,
    progress: bool = False,
    in_dims: Any = _SENTINEL,
    out_dims: Any = _SENTINEL,
) -> Callable[P, Any]:
    """Vectorize `f`, written for one example, over a batch axis of its arguments.

    `vmap(f)(X)` returns what `np.stack([f(x) for x in X])` returns, computed with
    batched NumPy calls. Where vmapx cannot batch something it runs it per example and
    emits a `vmapx.PerformanceWarning` (or raises, with `fallback="error"`).

    **Arguments:**

    - `f`: a function of arrays (and pytrees of arrays) written for one example.
    - `in_axes`: which axis of each positional argument is the batch axis: an int,
      `None` (not mapped: every example sees the same array, read-only: write into a
      copy), or a pytree prefix of the arguments (a tuple with one entry
      per argument, dicts, ...). Negative axes count from the end. Alias: `in_dims`.
    - `out_axes`: where the batch axis goes in each output (int, `None` for an output
      that does not depend on the batch, or a pytree prefix). Alias: `out_dims`.
    - `axis_size`: the batch size, needed only when no argument is mapped.
    - `axis_name`: a name for collectives (`vmapx.psum(x, name)`, ...).
    - `randomness`: `"error"`, `"different"` or `"same"`: how a
      `numpy.random.Generator` argument draws under the map.
    - `chunk_size`: run at most this many examples at once (bounds peak memory;
      the results are the same, up to rounding where NumPy orders a sum differently
      for fewer examples). `"auto"` (the default): a batch whose intermediates
      were tens of megabytes and much larger than its results in an earlier call, or
      whose megabytes of temporaries page-faulted in again at each call, runs in
      cache-sized chunks (faster, less memory; see `vmapx._autochunk`), never with
      `axis_name` or a random generator argument. `None`: always the whole batch. `f`
      is called once per chunk.
    - `fallback`: `"warn"`, `"silent"` or `"error"` (default: `vmapx.config.fallback`).
    - `workers`: threads that run the chunks of a chunked call at once (default:
      `vmapx.config.workers`, else the cores this process may use; `1`: one after the
      other; always so with `randomness` other than `"error"`). With
      `chunk_size="auto"`, a whole-batch call of a millisecond or more of CPU runs
      split among them after its second call, if that is faster. `f`'s calls then
      overlap in time: see `vmapx._parallel` for what runs concurrently.
    - `progress`: show a `tqdm` progress bar over the chunks of a chunked call (a call
      that runs whole shows none: give `chunk_size=` to follow a long batch). Dask
      arrays compute later: wrap `.compute()` in `dask.diagnostics.ProgressBar()`.

    Keyword arguments of the returned function are passed to `f` unbatched.

    **Returns:** the batched function.

    **Example:**

    ```python
    >>> import numpy as np, vmapx
    >>> x, y = np.ones((3, 5)), np.arange(5.0)
    >>> vmapx.vmap(np.dot, in_axes=(0, None))(x, y)
    array([10., 10., 10.])

    ```
    """
    if in_dims is not _SENTINEL:
        in_axes = in_dims
    if out_dims is not _SENTINEL:
        out_axes = out_dims
    check_vmap_arguments(
        f, in_axes, out_axes, axis_size=axis_size, axis_name=axis_name, randomness=randomness,
        chunk_size=chunk_size, fallback=fallback, workers=workers,
    )  # fmt: skip
    auto = chunk_size == "auto"
    if auto:
        chunk_size = None
    autochunk = _autochunk.AutoChunk() if auto and axis_name is None else None
    options = _Options(
        in_axes, out_axes, axis_size, axis_name, randomness, chunk_size, fallback, autochunk,
        workers, progress,
    )  # fmt: skip

    @functools.wraps(f)
    def batched(*args: Any, **kwargs: Any) -> Any:
        return _vmap_call(f, options, args, kwargs)

    return batched


class _Options:
    __slots__ = ("in_axes", "out_axes", "axis_size", "axis_name", "randomness", "chunk_size",
                 "fallback", "autochunk", "workers", "progress", "kwargs_noticed")  # fmt: skip
    in_axes: Any
    out_axes: Any
    axis_size: int | None
    axis_name: Any
    randomness: str
    chunk_size: Any
    fallback: str | None
    autochunk: Any
    workers: int | None
    progress: Any
    kwargs_noticed: bool

    def __init__(self, *values: Any) -> None:
        for name, value in zip(self.__slots__[:-1], values, strict=True):
            setattr(self, name, value)
        self.kwargs_noticed = False  # (see `_kwargs_notice`: said once per function)


# -- one call -----------------------------------------------------------------------


def _vmap_call(
    f: Callable[..., Any], opts: _Options, args: tuple[Any, ...], kwargs: dict[Any, Any]
) -> Any:
    plain = None if kwargs else _plain_call(opts, args)
    if plain is not None:  # the common case, without the general walk (see _plain_call)
        axes, size = plain
        leaves, treedef, special = list(args), None, False
    else:
        leaves, treedef, axes = _flatten_args(f, opts.in_axes, args)
        if _dask.any_dask(leaves, kwargs):  # a lazy Dask array, block by block
            size = _batch_size(leaves, axes, lambda i: _leaf_name(f, args, i), opts.axis_size)
            return _dask.vmap_blocks(f, opts, leaves, treedef, axes, kwargs, size)
        special = False
        if CALL_ADAPTERS:
            leaves, axes, kwargs, special = _prepare_special(leaves, axes, kwargs, opts.randomness)
        size = _batch_size(leaves, axes, lambda i: _leaf_name(f, args, i), opts.axis_size)
        subclass = _subclasses.subclass_reason(leaves, axes)
        if subclass is not None:  # (a mask, np.matrix: only the loop keeps them)
            return _loop_for_reason(f, opts, leaves, treedef, axes, kwargs, size, subclass)
        if kwargs and not opts.kwargs_noticed:
            opts.kwargs_noticed = _kwargs_notice.notice(f, kwargs, size, user_stacklevel() + 1)
    if opts.chunk_size is not None and size > opts.chunk_size:
        workers = 1 if special else _workers(opts)
        return _chunked(f, opts, leaves, treedef, axes, kwargs, size, opts.chunk_size, workers)
    if opts.autochunk is not None and not special:  # (chunks would change random draws)
        return _auto_chunked(f, opts, leaves, treedef, axes, kwargs, size)
    return _run(f, opts, leaves, treedef, axes, kwargs, size)


def _loop_for_reason(
    f: Callable[..., Any], opts: _Options, leaves: list[Any], treedef: Any, axes: list[Any],
    kwargs: dict[Any, Any], size: int, reason: _fallback_memory.Reason,
) -> Any:  # fmt: skip
    """The whole-function loop for `reason`, known before any batched run (or, with
    `fallback="error"`, the error that says so)."""
    if (opts.fallback or _config.config.fallback) == "error":
        raise ConcretizationError(
            f"vmap: {reason.what}. With fallback='error' vmapx does not run the function "
            f"per example. Fix: {reason.fix}."
        )
    return _whole_function_loop(f, opts, leaves, treedef, axes, kwargs, size, reason)


def _plain_call(opts: _Options, args: tuple[Any, ...]) -> tuple[list[Any], int] | None:
    """`(axes, batch size)` of a call whose arguments are NumPy arrays mapped along axis 0
    (or not mapped) with one batch size, else None (the general path then checks and
    explains). The time spent around `f` counts beyond its warm cost: over large arrays
    the CPU caches no longer hold vmapx's code and objects (each large NumPy call evicts
    them), and a call measured ~260 us so against ~20 us warm before this path (~145 and
    ~10 us with it)."""
    in_axes = opts.in_axes
    if type(in_axes) is int and in_axes == 0:
        axes = [0] * len(args)
    elif type(in_axes) is tuple and len(in_axes) == len(args):
        axes = list(in_axes)
    else:
        return None
    size = -1
    for a, ax in zip(args, axes, strict=True):
        if type(a) is not np.ndarray:
            return None
        if ax is None:
            continue
        if type(ax) is not int or ax != 0 or not a.ndim or (size >= 0 and a.shape[0] != size):
            return None
        size = a.shape[0]
    if size < 0 or (opts.axis_size is not None and opts.axis_size != size):
        return None
    return axes, size


def _auto_chunked(
    f: Callable[..., Any],
    opts: _Options,
    leaves: list[Any],
    treedef: Any,
    axes: list[Any],
    kwargs: dict[Any, Any],
    size: int,
) -> Any:
    """The call in chunks where earlier calls showed it pays (`_autochunk`), else whole;
    whole-batch calls with large intermediates are recorded."""
    auto = opts.autochunk
    key = _autochunk.signature(size, leaves, axes) if auto.seen else None
    chunk = None if key is None else auto.chunk_for(key)
    if chunk is not None:
        # (values of an outer transform or of a `jit` recording: chunk after chunk, in
        # this thread, whose trace stack they belong to)
        traced = any(isinstance(x, Tracer) for x in leaves)
        workers = _workers(opts) if auto.threaded(key) and not traced else 1
        spent: list[Any] = []  # (CPU time: see _parallel.CpuTime; and wall time)
        spec = auto.outputs(key) if opts.out_axes == 0 else None
        wall = time.perf_counter()
        out = _chunked(f, opts, leaves, treedef, axes, kwargs, size, chunk, workers, spent, spec)
        auto.observe_chunked(key, *spent[-1], wall=time.perf_counter() - wall)
        auto.remember_outputs(key, _chunk_outputs.spec_of(out) if opts.out_axes == 0 else None)
        return out
    check = key is not None and auto.counts_faults(key)
    faulted = _autochunk.faults() if check else 0
    recalled = _recall(f, opts, leaves, treedef, axes, kwargs, size)
    if recalled[2] is not None:  # fell back before: the loop, with nothing to observe
        return _whole_function_loop(f, opts, leaves, treedef, axes, kwargs, size, recalled[2])
    made: list[Any] = []
    cpu = time.thread_time()  # (whether to split among threads: the work, not the wait)
    process = time.process_time()  # (and with BLAS's own threads: see remember_outputs)
    wall = time.perf_counter()  # (and what a split must beat)
    out = _run(f, opts, leaves, treedef, axes, kwargs, size, made, recalled=recalled)
    wall = time.perf_counter() - wall
    large = bool(made) and made[0].made >= _autochunk.MIN_BYTES
    if not large and wall < _autochunk.PARALLEL_SECONDS / 2:
        # (a thread's CPU time is at most the wall time: the CPU clocks, ~0.6 us each,
        # are read again only where the call may have taken PARALLEL_SECONDS of it)
        return out
    cpu = time.thread_time() - cpu
    process = time.process_time() - process
    if made and (large or cpu >= _autochunk.PARALLEL_SECONDS):
        auto.observe_whole(
            key if key is not None else _autochunk.signature(size, leaves, axes),
            size,
            made[0],
            optree.tree_leaves(out, is_leaf=_is_leaf),
            cpu,  # (judged by CPU time, as the chunked calls: see _parallel.CpuTime)
            _autochunk.faults() - faulted if check else None,
            _workers(opts),
            cpu,
            wall,
        )
        if opts.out_axes == 0:  # (where chunks may compute into the outputs)
            key = key if key is not None else _autochunk.signature(size, leaves, axes)
            auto.remember_outputs(key, _chunk_outputs.spec_of(out), process)
    return out


def _flatten_args(
    f: Callable[..., Any], in_axes: Any, args: tuple[Any, ...]
) -> tuple[list[Any], Any, list[Any]]:
    """Leaves of the arguments, their structure (None where the leaves are the
    positional arguments themselves) and the batch axis of each (`None` = unmapped)."""
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    if all(type(a) is np.ndarray for a in args):  # the common case: no pytrees to walk
        if type(in_axes) is int or in_axes is None:
            return list(args), None, [in_axes] * len(args)
        if type(in_axes) is tuple and len(in_axes) == len(args):
            if all(type(ax) is int or ax is None for ax in in_axes):
                return list(args), None, list(in_axes)
    if isinstance(in_axes, tuple) and len(in_axes) != len(args):
        raise InAxesError(
            f"vmap: in_axes is a tuple of length {len(in_axes)} but the function was called "
            f"with {len(args)} positional arguments; give one entry per argument (or a "
            "single int/None for all)"
        )
    prefix = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)
    leaves, treedef = optree.tree_flatten(args, is_leaf=_is_leaf)
    axes: list[Any] = []
    for i, (p, a) in enumerate(zip(prefix, args, strict=True)):
        axes += leaf_axes(
            p,
            a,
            lambda e, i=i, p=p, a=a: InAxesError(  # type: ignore[misc]  # (defaults: no inferred type)
                f"vmap: in_axes entry for {_arg_name(f, i)} ({p!r}) does not match the "
                f"structure of the argument (a {type(a).__name__}): {e}"
            ),
        )
    return leaves, treedef, axes


def leaf_axes(prefix: Any, tree: Any, mismatch: Callable[[ValueError], Exception]) -> list[Any]:
    """The axis of every leaf of `tree`, given a pytree `prefix` of axes."""
    try:
        subtrees = optree.tree_structure(prefix, none_is_leaf=True).flatten_up_to(tree)
    except ValueError as e:
        raise mismatch(e) from None
    axes: list[Any] = []
    for ax, sub in zip(optree.tree_leaves(prefix, none_is_leaf=True), subtrees, strict=True):
        axes.extend([ax] * len(optree.tree_leaves(sub, is_leaf=_is_leaf)))
    return axes


def _is_leaf(x: Any) -> bool:
    return isinstance(x, Tracer | np.ndarray)


def _arguments(treedef: Any, leaves: list[Any]) -> Any:
    """The positional arguments from their leaves; `treedef` None: the leaves are the
    arguments (no pytrees among them)."""
    return leaves if treedef is None else optree.tree_unflatten(treedef, leaves)


def _arg_name(f: Callable[..., Any], index: int) -> str:
    try:
        params = [
            p.name
            for p in inspect.signature(f).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        if index < len(params):
            return f"argument `{params[index]}`"
    except (TypeError, ValueError):
        pass
    return f"argument {index}"


def _leaf_name(f: Callable[..., Any], args: tuple[Any, ...], i: int) -> str:
    """`argument `x`['w']`: the i-th leaf of the arguments, for messages only."""
    path = optree.tree_paths(args, is_leaf=_is_leaf)[i]
    name = _arg_name(f, path[0])
    return name + "".join(f"[{k!r}]" for k in path[1:])


def _describe(x: Any) -> str:
    return f"{np.result_type(x) if hasattr(x, 'dtype') else type(x).__name__}{list(np.shape(x))}"


def _batch_size(
    leaves: list[Any], axes: list[Any], name_of: Callable[..., Any], axis_size: int | None
) -> int:
    sizes = []
    for i, (leaf, ax) in enumerate(zip(leaves, axes, strict=True)):
        if ax is None:
            continue
        if not (hasattr(leaf, "shape") or isinstance(leaf, numbers.Number)):
            raise InAxesError(
                f"vmap: {name_of(i)} is a {type(leaf).__name__}, which has no axis to map over; "
                "give it in_axes=None (or pass it as a keyword argument)"
            )
        nd = np.ndim(leaf)
        if not -nd <= ax < max(nd, 0) or nd == 0:
            raise InAxesError(
                f"vmap: in_axes={ax} is out of range for {name_of(i)} of shape "
                f"{tuple(np.shape(leaf))} (ndim {nd}); valid axes are {-nd}..{nd - 1}"
                + (" and a 0-d value cannot be mapped: use in_axes=None" if nd == 0 else "")
            )
        sizes.append((np.shape(leaf)[ax], ax, i, leaf))
    if not sizes:
        if axis_size is None:
            raise AxisSizeError(
                "vmap: no argument is mapped (all in_axes are None), so the batch size is "
                "unknown; pass `axis_size=` or map at least one argument"
            )
        return int(axis_size)
    distinct = {s for s, *_ in sizes}
    if len(distinct) > 1 or (axis_size is not None and axis_size not in distinct):
        lines = "\n".join(
            f"  * {name_of(i)} of type {_describe(leaf)} has size {s} along axis {ax}"
            for s, ax, i, leaf in sizes
        )
        extra = f"\n  * axis_size={axis_size} was given" if axis_size is not None else ""
        raise AxisSizeError(
            f"vmap got inconsistent sizes for the array axes to be mapped:\n{lines}{extra}"
        )
    return cast(int, sizes[0][0])


def _run(
    f: Callable[..., Any], opts: _Options, leaves: list[Any], treedef: Any, axes: list[Any],
    kwargs: dict[Any, Any], size: int,
    made: list[Any] | None = None, dtypes: list[Any] | None = None, watch_hidden: bool = True,
    recalled: tuple[Any, ...] | None = None,
) -> Any:  # fmt: skip
    """One batched run of `f` (or the whole-function loop); `made` (if given) gets the
    run's trace, which counts the bytes of the batched arrays it made, and `dtypes` (if
    given) the dtypes of each output's examples where the loop ran. `watch_hidden`:
    whether this run checks the generators `f` reads from closures and globals (a caller
    running chunks on several threads checks them around all of its chunks instead);
    `recalled`: what `_recall` said for this call, where the caller asked it."""
    fallback = opts.fallback or _config.config.fallback
    call, memo, reason = recalled or _recall(f, opts, leaves, treedef, axes, kwargs, size)
    if reason is not None:  # fell back before with this signature: the loop directly
        return _whole_function_loop(f, opts, leaves, treedef, axes, kwargs, size, reason, dtypes)
    untrusted = _passthrough.untrusted(f)
    trace = push_trace(BatchTrace(size, opts.axis_name, fallback, opts.randomness))
    try:
        views = _unmapped.wanted(f)
        inputs = [_to_batched(trace, x, ax, views) for x, ax in zip(leaves, axes, strict=True)]
        trace.like = _payload.like(*leaves)
        legacy = _legacy_random.snapshot()
        hidden = _hidden_generator_states(f, opts, leaves, kwargs) if watch_hidden else []
        try:
            out = _passthrough.call(
                trace, f, _arguments(treedef, inputs), _special_kwargs(trace, kwargs)
            )
            _check_outputs_fresh(trace, out)
            if _legacy_random.moved(legacy):
                _legacy_random.restore(legacy)  # the loop draws the loop's numbers
                raise trace.concretization(*_LEGACY_RANDOM)
            if trace.aware:
                hidden = [(g, state) for g, state in hidden if id(g) not in trace.aware]
            if hidden and _legacy_random.hidden_moved(hidden):
                _legacy_random.restore_hidden(hidden)  # likewise
                raise trace.concretization(*_HIDDEN_RANDOM)
        except ConcretizationSignal as signal:
            if signal.trace is not trace:
                raise
        except Exception as error:
            if trace.pending is None:
                _passthrough.check_untrusted(trace, error)
            if trace.pending is None and trace.raised and trace.raised[2] != id(error):
                _caught_error(trace)  # (`f` caught a NumPy error, then raised another)
            if trace.pending is None and _refuses_tracer(error):
                refused = trace.concretization(
                    f"Python or C code refused a batched value ({_first_line(error)})",
                    "give that code the plain values it needs outside the vmap, or NumPy "
                    "functions inside it",
                )
                if not isinstance(refused, ConcretizationSignal):  # (fallback="error")
                    raise refused from error
            # (fallback="error": a table met, or the converters just found)
            if _indexes_unmapped(f, trace, leaves, axes) or (
                trace.pending is None and _passthrough.retry(f)
            ):
                pop_trace(trace)
                trace = None  # type: ignore[assignment]  # (popped: the finally must not pop it again)
                _undo_hidden_draws(legacy, hidden)
                return _rerun(f, opts, leaves, treedef, axes, kwargs, size, made, dtypes)
            if trace.pending is None:
                _explain_read_only(error, axes)
                raise_own_cause(error)
                raise
        if trace.pending is None and trace.raised is not None:  # `f` caught a NumPy error
            _caught_error(trace)
        if trace.pending is not None:  # raised, and maybe swallowed or converted
            pending = trace.pending
            pending.__traceback__ = None  # (its frames hold `f` and the arguments)
            again = _indexes_unmapped(f, trace, leaves, axes)
            pop_trace(trace)
            trace = None  # type: ignore[assignment]  # (popped: the finally must not pop it again)
            _undo_hidden_draws(legacy, hidden)  # the abandoned run's draws
            if again or _passthrough.retry(f):  # with tracers passing the converters just found
                return _rerun(f, opts, leaves, treedef, axes, kwargs, size, made, dtypes)
            if _passthrough.untrusted(f) == untrusted:  # (else the next run differs)
                reason = _fallback_memory.Reason(pending.what, pending.fix, pending.location)
                _fallback_memory.remember(f, memo or _fallback_memory.signature(f, *call), reason)
            return _whole_function_loop(
                f, opts, leaves, treedef, axes, kwargs, size, pending, dtypes
            )
        if made is not None:
            made.append(trace)
        _fallback_memory.forget(f, memo)  # (a re-try that batched)
        return _unbatch_outputs(trace, out, opts.out_axes, size, leaves)
    finally:
        if trace is not None:
            pop_trace(trace)


def _indexes_unmapped(
    f: Callable[..., Any], trace: BatchTrace, leaves: list[Any], axes: list[Any]
) -> bool:
    """Whether the batched run that just stopped at `plain[traced]` should run again with
    the unmapped arrays as `UnmappedArray`s (learned for `f`: see `vmapx._unmapped`):
    there are such arrays, and this run did not have them already."""
    if not trace.indexed_plain or trace.unmapped:
        return False
    if not any(ax is None and type(x) is np.ndarray for x, ax in zip(leaves, axes, strict=True)):
        return False
    _unmapped.learn(f)
    return True


def _refuses_tracer(error: Exception) -> bool:
    """Whether `error` is a `TypeError` of code that takes NumPy arrays or scalars but not
    a batched value (`np.ndarray.sum(x)`, `{0: a}[x]`, `struct.pack("d", x)`; NumPy's
    `SeedSequence` names the value itself: `not BatchTracer(int64[], ...)`), which the
    loop's values pass."""
    if type(error) is not TypeError:
        return False
    message = str(error)
    return "'BatchTracer'" in message or "BatchTracer(" in message


def _first_line(error: Exception) -> str:
    line = str(error).split("\n", 1)[0]
    return line if len(line) <= 120 else line[:117] + "..."


def _caught_error(trace: BatchTrace) -> None:
    """A NumPy call raised for the whole batch and `f` went on (an `except`): the loop
    runs (or, with `fallback="error"`, a `ConcretizationError` says so)."""
    raised = cast("tuple[str, str, int]", trace.raised)
    what, fix = caught_error(raised)
    where = raised[1]
    if trace.fallback == "error":
        raise ConcretizationError(
            f"vmap: {what} at {where}. With fallback='error' vmapx does not run the function "
            f"per example. Fix: {fix}."
        )
    trace.pending = ConcretizationSignal(trace, what, fix, where)


def _recall(
    f: Callable[..., Any],
    opts: _Options,
    leaves: list[Any],
    treedef: Any,
    axes: list[Any],
    kwargs: dict[Any, Any],
    size: int,
) -> tuple[Any, ...]:
    """`(call, key, reason)`: `_fallback_memory.recall` for this call, and its arguments
    (`call`) for `remember`."""
    fallback = opts.fallback or _config.config.fallback
    call = (fallback, opts, leaves, treedef, axes, kwargs, size)
    return (call, *_fallback_memory.recall(f, *call))


def _rerun(f: Callable[..., Any], opts: _Options, leaves: list[Any], *rest: Any) -> Any:
    """`_run` again, with the random generators among the arguments as they were
    before the run that is abandoned."""
    for leaf in optree.tree_leaves([leaves, rest[2]], is_leaf=_is_leaf):
        rewind = getattr(type(leaf), "_vmapx_rewind", None)
        if rewind is not None:
            rewind(leaf)
    return _run(f, opts, leaves, *rest)


_LEGACY_RANDOM = (
    "NumPy's legacy global random functions (`np.random.normal`, ...) drew inside the "
    "batched run: called once for the whole batch, they would give every example the "
    "same numbers",
    "pass a `numpy.random.Generator` (`np.random.default_rng(seed)`) as an argument and "
    "draw from it, with vmap(..., randomness='different')",
)
_HIDDEN_RANDOM = (
    "a random generator that the function reads from a closure or a global (not an "
    "argument) drew inside the batched run: called once for the whole batch, it would "
    "give every example the same numbers",
    "pass the generator as an argument and draw from it, with "
    "vmap(..., in_axes=(..., None), randomness='different')",
)


def _undo_hidden_draws(legacy: tuple[Any, ...], hidden: list[Any]) -> None:
    """Put back the generators vmap cannot batch (NumPy's legacy global one, those `f`
    reads from closures and globals) where an abandoned batched run drew from them: the
    run again, or the loop, then draws the loop's numbers."""
    if _legacy_random.moved(legacy):
        _legacy_random.restore(legacy)
    if hidden and _legacy_random.hidden_moved(hidden):
        _legacy_random.restore_hidden(hidden)


def _hidden_generator_states(
    f: Callable[..., Any], opts: _Options, leaves: list[Any], kwargs: dict[Any, Any]
) -> list[Any]:
    """The states of the generators `f` reads from closures and globals (not passed).
    None under randomness="same": one draw for the whole batch is what that asks for."""
    if opts.randomness == "same":
        return []
    generators = _legacy_random.hidden_generators(f, [*leaves, *kwargs.values()])
    return _legacy_random.snapshot_hidden(generators)


def _check_outputs_fresh(trace: BatchTrace, out: Any) -> None:
    """Signal the loop where an output is a view whose base was written after it was
    taken (NumPy's view would show the write; the batched one holds the old values)."""
    if type(out) is BatchTracer:
        if out._view is not None:
            out._check_fresh()
        return
    for leaf in optree.tree_leaves(out, is_leaf=_is_leaf):
        if type(leaf) is BatchTracer and leaf._trace is trace and leaf._view is not None:
            leaf._check_fresh()


def _to_batched(trace: BatchTrace, x: Any, axis: int | None, views: bool = False) -> Any:
    """Argument `x` as `f` sees it in a batched run: mapped (`axis`), a `BatchTracer`;
    unmapped, read-only (`views`: an `UnmappedArray`, see `vmapx._unmapped`)."""
    if type(x) is not np.ndarray:  # (adapters replace special arguments, never arrays)
        for adapt in ARGUMENT_ADAPTERS:
            adapted = adapt(trace, x)
            if adapted is not None:
                return adapted
        if axis is not None and not hasattr(x, "shape"):
            x = np.asarray(x)
    elif axis is None:
        if not views:
            return _read_only(x)
        trace.unmapped = True
        return unmapped_view(x)
    if axis is None:
        if type(x) is UnmappedArray:  # (an outer vmap's unmapped argument, unmapped again)
            trace.unmapped = True
        return _read_only_tracer(x)
    x = plain_array(x)  # (an outer vmap's unmapped argument, mapped here)
    if axis % x.ndim != 0:
        x = np.moveaxis(x, axis, 0)
    out = BatchTracer(trace, x)
    nd = x.ndim if type(x) is np.ndarray else np.ndim(x)  # (NumPy's dispatch: ~0.3 us)
    if nd == 1 and x.dtype.kind != "O":  # the loop's `x[i]` is a NumPy scalar
        _scalars.mark(out)
    return out


def _read_only_tracer(x: Any) -> Any:
    """`x`, or where it is a traced plain array (`jit`'s recording: it has
    `read_only_view`) the same value read-only, as `_read_only` makes a plain array."""
    view = getattr(x, "read_only_view", None) if isinstance(x, Tracer) else None
    return x if view is None else view()


def _read_only(x: np.ndarray) -> np.ndarray:
    """An unmapped array argument as `f` sees it in a batched run: the caller's array
    must not be written, and one write shared by all examples would not be what each
    example's own run does (`w += 1` per example); NumPy then says "assignment
    destination is read-only" (see `_explain_read_only`)."""
    if not x.flags.writeable:
        return x
    view = x.view()
    view.flags.writeable = False
    return view


def _explain_read_only(error: Exception, axes: list[Any]) -> None:
    """Add to NumPy's "read-only" error what an unmapped argument is inside `f`."""
    if isinstance(error, ValueError) and "read-only" in str(error) and None in axes:
        message = (
            "vmap: if the array written is an argument with in_axes=None, it is read-only "
            "inside the mapped function (the caller's array must not change, and each "
            "example sees it as passed); write into a copy instead: `w = w.copy()`"
        )
        if hasattr(error, "add_note"):  # (Python >= 3.11)
            error.add_note(message)


def _unbatch_outputs(
    trace: BatchTrace, out: Any, out_axes: Any, size: int, inputs: Sequence[Any] = ()
) -> Any:
    if type(out) is BatchTracer and out._trace is trace and out_axes == 0:
        return _own(_as_stacked(out), inputs)  # the common case: one batched array
    leaves, treedef = optree.tree_flatten(out, is_leaf=_is_leaf)
    axes = output_axes(out_axes, out, treedef)
    results = []
    for i, (leaf, ax) in enumerate(zip(leaves, axes, strict=True)):
        batched = isinstance(leaf, BatchTracer) and leaf._trace is trace
        if not batched:
            _check_output_leaf(leaf, i)
        if ax is None:
            if batched:
                raise InAxesError(
                    f"vmap: out_axes is None for output {i}, but that output depends on the "
                    "mapped axis; give it an integer out_axes"
                )
            results.append(leaf)
            continue
        val = (
            _as_stacked(leaf) if batched
            else _broadcast_output(_payload.moved(leaf, trace.like), size)
        )  # fmt: skip
        nd = np.ndim(val)
        if not -nd <= ax < nd:
            raise InAxesError(
                f"vmap: out_axes={ax} is out of range for output {i} of per-example shape "
                f"{tuple(np.shape(val))[1:]}; valid axes are {-nd}..{nd - 1}"
            )
        results.append(np.moveaxis(val, 0, ax) if ax % nd else val)
    return optree.tree_unflatten(treedef, fresh_arrays(results, inputs))


def _as_stacked(out: BatchTracer) -> Any:
    """The batched value of `out`, as `np.stack` gives the examples' values (Python
    numbers per example, a random draw's `float`, stack as float64)."""
    dtype = _scalars.stacked_dtype(out)
    return out.val if dtype is None or dtype == out.val.dtype else out.val.astype(dtype)


def _own(val: Any, inputs: Sequence[Any]) -> Any:
    """The loop returns a fresh writable array: copy a result that is a read-only
    broadcast (`np.zeros_like(x)` returned as it is) or shares the caller's memory."""
    val = plain_array(val)  # (an unmapped argument, or computed from one alone)
    if type(val) is not np.ndarray:
        if val is CONSUMED:  # (an operator reused its array: see `_elision`)
            CONSUMED._fail()
        return val
    if (val.base is None and not any(val is x for x in inputs)) or not val.itemsize:
        return val  # owns its memory: a new array (or has no memory: empty strings)
    root = memory_owner(val)
    if _repeats(val) or any(root is memory_owner(x) for x in inputs if type(x) is np.ndarray):
        return val.copy()
    with warnings.catch_warnings():  # NumPy warns on reading a broadcast_arrays flag
        warnings.simplefilter("ignore", FutureWarning)
        writeable = val.flags.writeable
    return val if writeable else val.copy()


def _repeats(val: np.ndarray) -> bool:
    """Whether `val` shows one element at several places (a zero stride: a broadcast)."""
    strides = val.strides
    return 0 in strides and any(not s and n > 1 for s, n in zip(strides, val.shape, strict=True))


def fresh_arrays(
    results: list[Any], inputs: Sequence[Any], copy: list[Any] | None = None
) -> list[Any]:
    """`results` as a caller may keep and write them: each array that is (a view of) one
    of `inputs`, read-only, broadcast (a zero stride), sharing memory with an earlier
    result, or marked in `copy`, is copied (gradients of `x + y` are one array)."""
    seen: set[Any] = set()
    out = []
    for k, r in enumerate(results):
        r = plain_array(r)
        if (
            type(r) is np.ndarray
            and r.itemsize
            and ((copy is not None and copy[k]) or id(memory_owner(r)) in seen)
        ):
            r = r.copy()
        else:
            r = _own(r, inputs)
        if type(r) is np.ndarray:
            seen.add(id(memory_owner(r)))
        out.append(r)
    return out


def memory_owner(x: np.ndarray) -> Any:
    """The object that owns the memory a view looks into."""
    while is_ndarray(x) and x.base is not None:
        x = x.base
    return x


def output_axes(out_axes: Any, out: Any, treedef: Any) -> list[Any]:
    if isinstance(out_axes, int) or out_axes is None:
        return [out_axes] * treedef.num_leaves
    if isinstance(out_axes, list) and type(out) is not list:  # (a list output: a list prefix)
        out_axes = tuple(out_axes)
    return leaf_axes(
        out_axes,
        out,
        lambda e: InAxesError(
            f"vmap: out_axes={out_axes!r} does not match the structure of the function's "
            f"output ({type(out).__name__}): {e}"
        ),
    )


def _check_output_leaf(leaf: Any, i: int) -> None:
    if isinstance(leaf, Tracer | np.ndarray | np.generic | numbers.Number):
        return
    if hasattr(leaf, "__array_function__") and hasattr(leaf, "shape"):
        return
    raise OutputError(
        f"vmap: the function must return arrays (or pytrees of arrays), but output {i} is a "
        f"{type(leaf).__name__}: {leaf!r:.80}"
    )


def _broadcast_output(leaf: Any, size: int) -> Any:
    """An output that does not depend on the batch, repeated as the loop would give it."""
    if not hasattr(leaf, "shape"):
        leaf = np.asarray(leaf)
    leaf = plain_array(leaf)
    out = np.empty_like(leaf, shape=(size, *leaf.shape))
    out[...] = leaf
    return out


# -- chunks and the whole-function loop --------------------------------------------


def _chunked(
    f: Callable[..., Any], opts: _Options, leaves: list[Any], treedef: Any, axes: list[Any],
    kwargs: dict[Any, Any], size: int,
    chunk: int, workers: int = 1, spent: list[Any] | None = None, spec: Any = None,
) -> Any:  # fmt: skip
    """The call in chunks of `chunk` examples, on up to `workers` threads (`_parallel`),
    written into the whole batch's outputs (`_chunk_outputs`; `spec`: theirs in an
    earlier call); `spent`: a list to append the call's `_parallel.CpuTime` to."""
    joined = _chunk_outputs.Joined(opts.out_axes, size, spec)

    def run(start: int, stop: int) -> tuple[Any, ...]:
        part = [_slice_axis(x, ax, start, stop) for x, ax in zip(leaves, axes, strict=True)]
        dtypes: list[Any] = []
        slices = None if _core._state.stack else joined.slices(start, stop)
        offer = contextlib.nullcontext() if slices is None else _chunk_outputs.offered(list(slices))
        with offer as offered, _chunk_outputs.running_chunk():  # (computed in place)
            out = _run(
                f, opts, part, treedef, axes, kwargs, stop - start, dtypes=dtypes,
                watch_hidden=workers == 1,
            )  # fmt: skip
        if offered is None:  # (nothing offered: the results are placed when joined)
            return out, dtypes or None
        return joined.place(out, slices, offered.claimed), dtypes or None

    def join(result: tuple[Any, ...], start: int, stop: int) -> None:
        joined.add(result[0], start, stop, result[1])

    legacy = _legacy_random.snapshot() if workers > 1 else None
    hidden = _hidden_generator_states(f, opts, leaves, kwargs) if workers > 1 else []
    cpu = _parallel.run_chunks(run, join, size, chunk, workers, opts.progress)
    if (
        legacy is not None
        and _legacy_random.moved(legacy)
        or (hidden and _legacy_random.hidden_moved(hidden))
    ):
        # (`f` drew from NumPy's legacy global generator, or one it reads from a closure
        # or a global, in several threads at once: again, chunk after chunk, each chunk
        # checking, for the loop's numbers)
        if legacy is not None:
            _legacy_random.restore(legacy)
        _legacy_random.restore_hidden(hidden)
        workers = 1
        joined = _chunk_outputs.Joined(opts.out_axes, size, spec)
        cpu = _parallel.run_chunks(run, join, size, chunk, 1, opts.progress)
    if spent is not None:
        spent.append(cpu)
    return joined.result()


def _workers(opts: _Options) -> int:
    """Threads for the chunks of a call: one where `f` may draw random numbers (chunk
    after chunk is how draws continue the loop's stream, see `vmapx.random`)."""
    return 1 if opts.randomness != "error" else _parallel.resolve_workers(opts.workers)


def _whole_function_loop(
    f: Callable[..., Any],
    opts: _Options,
    leaves: list[Any],
    treedef: Any,
    axes: list[Any],
    kwargs: dict[Any, Any],
    size: int,
    signal: ConcretizationSignal | _fallback_memory.Reason,
    dtypes: list[Any] | None = None,
) -> Any:
    """Re-run `f` once per example and stack: the answer of the loop, by the loop
    (`dtypes`, if given, gets the dtypes of each output's examples). `signal` says why."""
    fallback = opts.fallback or _config.config.fallback
    if fallback == "warn":
        warnings.warn(
            f"vmap: {signal.what} at {signal.location}; vmapx re-runs the function once per "
            f"example ({size} calls). To stay batched: {signal.fix}.",
            PerformanceWarning,
            stacklevel=user_stacklevel(),
        )
    if size == 0:
        raise AxisSizeError(
            f"vmap: the function needs a per-example loop ({signal.what} at "
            f"{signal.location}) and the batch is empty, so the output shape is unknown"
        )

    with _chunk_outputs.withheld():  # (a chunk's slices: not for a vmap inside `f`)
        results = _run_examples(f, leaves, treedef, axes, kwargs, size)
    if dtypes is None and opts.out_axes == 0 and _plain_output(results[0]):
        return _stack_column(results, 0)  # (what `_stack_outputs` gives for one array output)
    stacked = _stack_outputs(results, dtypes)
    return _place_axes(stacked, opts.out_axes)


def _run_examples(
    f: Callable[..., Any], leaves: list[Any], treedef: Any, axes: list[Any],
    kwargs: dict[Any, Any], size: int,
) -> list[Any]:  # fmt: skip
    """`f`'s result for each example, in order."""
    examples = _plain_examples(leaves, treedef, axes, kwargs, size)
    if examples is not None:  # the common case: arrays mapped on axis 0, no keywords
        return [f(*example) for example in examples]
    results = []
    for i in range(size):
        example = [
            _special_example(x, i) if ax is None else _take(x, ax, i)
            for x, ax in zip(leaves, axes, strict=True)
        ]
        example_kwargs = (
            optree.tree_map(lambda x: _special_example(x, i), kwargs)  # noqa: B023
            if kwargs else kwargs
        )  # fmt: skip
        results.append(f(*_arguments(treedef, example), **example_kwargs))
    return results


_PLAIN_OUTPUTS = (np.ndarray, np.generic, float, int, complex)


def _plain_output(x: Any) -> bool:
    return not isinstance(x, Tracer) and isinstance(x, _PLAIN_OUTPUTS)


def _plain_examples(
    leaves: list[Any], treedef: Any, axes: list[Any], kwargs: dict[Any, Any], size: int
) -> Any:  # fmt: skip
    """The loop's examples, one argument tuple each, where the arguments are NumPy arrays
    mapped along axis 0 (or not mapped) and there are no keyword arguments; else None.
    Each mapped array is copied once (`f` may write into its example, as a batched run
    may; the caller's array must not see it) and example `i` is its `[i]`, as the loop's
    `x[i]`; an unmapped one is read-only, as `_special_example` gives it."""
    if kwargs or treedef is not None:
        return None
    columns: list[list[Any]] = []
    for x, ax in zip(leaves, axes, strict=True):
        if type(x) is not np.ndarray or ax not in (0, None):
            return None
        columns.append([_read_only(x)] * size if ax is None else list(x.copy()))
    return zip(*columns, strict=True)


def _take(x: Any, axis: int, i: int) -> Any:
    """Example `i` of `x`: a copy where it is an array (`f` may write into its example,
    as a batched run may; the caller's array must not see it)."""
    index: list[Any] = [slice(None)] * np.ndim(x)
    index[axis] = i
    example = plain_array(x)[tuple(index)]
    return example.copy() if type(example) is np.ndarray else example


def _stack_outputs(results: list[Any], dtypes: list[Any] | None = None) -> Any:
    leaves0, treedef = optree.tree_flatten(results[0], is_leaf=_is_leaf)
    columns: list[list[Any]] = []
    for k, r in enumerate(results):
        try:
            columns.append(treedef.flatten_up_to(r))
        except ValueError as e:
            raise OutputShapeError(
                f"vmap: the function's result for example {k} has another structure than "
                f"for example 0 ({e}), so the results cannot be stacked. Return the same "
                "structure for every example."
            ) from None
    for i, leaf in enumerate(leaves0):
        _check_output_leaf(leaf, i)
    if dtypes is not None:
        dtypes.extend({np.result_type(c[j]) for c in columns} for j in range(len(leaves0)))
    return optree.tree_unflatten(
        treedef, [_stack_column([c[j] for c in columns], j) for j in range(len(leaves0))]
    )


def _stack_column(column: list[Any], i: int) -> Any:
    """`np.stack` of output `i` of every example, or an error that says which differ."""
    shapes = [np.shape(x) for x in column]
    k = next((k for k, s in enumerate(shapes) if s != shapes[0]), None)
    if k is None:
        return np.stack(column)
    raise OutputShapeError(
        f"vmap: output {i} of the function has shape {shapes[0]} for example 0 but "
        f"{shapes[k]} for example {k}, so the results cannot be stacked into one array (as "
        "`np.stack` of the loop's results cannot). Return results of one shape (pad them, "
        "with a mask if needed), or use `vmapx.map`, which returns a list of the results."
    )


def _place_axes(stacked: Any, out_axes: Any) -> Any:
    leaves, treedef = optree.tree_flatten(stacked, is_leaf=_is_leaf)
    axes = output_axes(out_axes, stacked, treedef)
    moved = []
    for i, (leaf, ax) in enumerate(zip(leaves, axes, strict=True)):
        if ax is None:
            if not all(np.array_equal(leaf[0], leaf[k]) for k in range(len(leaf))):
                raise InAxesError(
                    f"vmap: out_axes is None for output {i}, but that output differs "
                    "between examples; give it an integer out_axes"
                )
            moved.append(leaf[0])
        else:
            moved.append(np.moveaxis(leaf, 0, ax))
    return optree.tree_unflatten(treedef, moved)


# -- special arguments (random generators; see `vmapx.random`) ---------------------


def _prepare_special(
    leaves: list[Any], axes: list[Any], kwargs: dict[Any, Any], randomness: str
) -> tuple[Any, ...]:
    """Arguments with special meaning (random generators) replaced by their batch-aware
    stand-ins; the last item says whether any was."""
    replaced = []

    def prepare(x: Any) -> Any:
        for hook in CALL_ADAPTERS:
            replacement = hook(x, randomness)
            if replacement is not None:
                replaced.append(x)
                return replacement
        return x

    prepared = [prepare(x) for x in leaves]
    axes = [ax if p is x else None for x, p, ax in zip(leaves, prepared, axes, strict=True)]
    if kwargs:
        kwargs = optree.tree_map(prepare, kwargs)
    return prepared, axes, kwargs, bool(replaced)


def _special_kwargs(trace: BatchTrace, kwargs: dict[Any, Any]) -> dict[Any, Any]:
    if not kwargs or not ARGUMENT_ADAPTERS:
        return kwargs
    return cast("dict[Any, Any]", optree.tree_map(lambda x: _to_batched(trace, x, None), kwargs))


def _special_example(x: Any, i: int) -> Any:
    """Example `i`'s value of an unmapped argument: an array read-only, as in a batched
    run (`_read_only`: a write raises there, so it must here), the generator stand-in of
    a special argument."""
    x = plain_array(x)  # (an outer vmap's unmapped argument: the loop's are plain)
    if type(x) is np.ndarray:
        return _read_only(x)
    if isinstance(x, Tracer):
        return _read_only_tracer(x)
    example = getattr(type(x), "_vmapx_example", None)
    return x if example is None else example(x, i)


# -- the TensorFlow form -----------------------------------------------------------


def vectorized_map(
    fn: Callable[..., Any], elems: Any, fallback_to_loop: bool = True, warn: bool = True
) -> Any:
    """TensorFlow's `tf.vectorized_map` for NumPy code: map `fn` over axis 0 of `elems`.

    `fn` receives ONE argument with the structure of `elems` (e.g. a tuple), each array
    unpacked along its first axis. With `fallback_to_loop=False` a construct that cannot
    be batched raises instead of looping; `warn=False` silences the loop's warning.

    **Example:**

    ```python
    >>> import numpy as np, vmapx
    >>> a = np.ones((100, 4, 4))
    >>> vmapx.vectorized_map(lambda a: np.tensordot(a, a, 0), a).shape
    (100, 4, 4, 4, 4)

    ```
    """
    mode = ("warn" if warn else "silent") if fallback_to_loop else "error"
    return vmap(fn, fallback=mode)(elems)
