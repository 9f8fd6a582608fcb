"""`vmapx.jit`: the signature of a call, the cache of recordings, static arguments,
and `Jitted.lower` to read a recording (the recording itself is `vmapx._jit`).

A signature holds the shapes, dtypes and strides of the array arguments, which
arguments are the same array, the types of the number arguments (on NumPy 1.26 also
the smallest dtype their value fits, which NumPy 1.26 promotes by), and the values of
every other argument: static ones (`static_argnums`, `static_argnames`), bools,
strings, ... and numbers that Python code in `f` read while recording. Values are
compared exactly (`_exact`): a float by its bits (0.0 is not -0.0, a NaN matches
itself), with its type (1 is not 1.0 nor True).
"""

from __future__ import annotations

import functools
import inspect
import struct
import threading
import warnings
from collections.abc import Callable, Iterable
from typing import Any, Generic, ParamSpec, TypeVar, cast

import numpy as np

from . import _core
from . import _pytree as optree  # optree in vmapx.config.pytree_namespace
from ._compat import NUMPY2
from ._core import Tracer
from ._jit import (
    RECORD_AGAIN,
    GeneratedProgram,
    NotReplayable,
    ShapeChanged,
    record,
    run_plainly,
)  # fmt: skip
from .errors import PerformanceWarning

# NumPy 2 keeps its error state (`np.errstate`) in a context variable, a new object per
# change; NumPy 1.26 has none (`np.geterr()` on every check)
_ERRSTATE: Any = getattr(
    getattr(getattr(np, "_core", None), "_multiarray_umath", None), "_extobj_contextvar", None
)

P = ParamSpec("P")
R = TypeVar("R")

MAX_SIGNATURES = 64  # recordings kept per function; further signatures run `f`

_NUMBER_TYPES = (int, float, complex, np.integer, np.floating, np.complexfloating)


class Program:
    """What `vmapx.jit` replays for one signature: `str(program)` is the generated
    Python function (one line per NumPy call); or, where calls of that signature run
    `f`, why (`replayable` is False then)."""

    __slots__ = ("replayable", "text", "why")

    def __init__(self, recorded: Any) -> None:
        self.replayable = isinstance(recorded, GeneratedProgram)
        self.text = recorded.text if self.replayable else ""
        self.why = "" if self.replayable else recorded.why

    def __str__(self) -> str:
        if self.replayable:
            return self.text
        return f"# not replayable: every call of this signature runs f ({self.why})"

    def __repr__(self) -> str:
        return f"Program(\n{self}\n)"


class Jitted(Generic[P, R]):
    """`f` with its NumPy calls recorded once per signature and replayed afterwards
    (see `vmapx.jit`)."""

    def __init__(
        self, f: Callable[P, R], static_argnums: Iterable[int], static_argnames: Iterable[str],
        trace_numbers: bool = False,
    ) -> None:  # fmt: skip
        functools.update_wrapper(self, f)
        self._f = f
        self._trace_numbers = trace_numbers
        self._static_nums, self._static_names = _static_arguments(
            f, tuple(static_argnums), tuple(static_argnames)
        )
        self._recordings: dict[Any, Any] = {}
        # per argument structure: the positions of number leaves that `f` reads
        self._read_numbers: dict[Any, frozenset[Any]] = {}
        self._lock = threading.Lock()
        self._warned = False
        self._again: dict[Any, int] = {}  # signatures recorded again so far: how often
        self._warned_large = False

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        if _core._state.stack:  # inside a transform: the arguments may be tracers
            return self._f(*args, **kwargs)
        if not kwargs and not self._static_nums and all(type(a) is np.ndarray for a in args):
            leaves, treedef = list(args), _flat_treedef(len(args))
            static: frozenset[Any] = frozenset()
        else:
            leaves, treedef, static = self._flatten(args, kwargs)
        key, numbers = self._signature(leaves, treedef, static)
        inputs = [x for i, x in enumerate(leaves) if type(x) is np.ndarray or i in numbers]
        recorded = None if key is None else self._recordings.get(key)
        if type(recorded) is GeneratedProgram:
            if recorded.pruned and _errors_raise():  # a step it leaves out could raise
                return run_plainly(self._f, args, kwargs, inputs)  # type: ignore[no-any-return]
            try:
                return recorded.run(inputs)  # type: ignore[no-any-return]
            except ShapeChanged:  # a shape Python read differs on these values: run `f`
                return run_plainly(self._f, args, kwargs, inputs)  # type: ignore[no-any-return]
            except Exception:  # a NumPy call raised on these values, which `f` may catch:
                # `f` gives the call's answer (or raises)
                return run_plainly(self._f, args, kwargs, inputs)  # type: ignore[no-any-return]
        if type(recorded) is NotReplayable and recorded.again:
            return self._record_again(cast("tuple[Any, ...]", key), leaves, treedef, numbers)  # type: ignore[no-any-return]
        if key is None or recorded is not None or not self._room(key, leaves):
            return run_plainly(self._f, args, kwargs, inputs)  # type: ignore[no-any-return]
        return self._record(key, leaves, treedef, numbers)[1]  # type: ignore[no-any-return]

    def lower(self, *args: P.args, **kwargs: P.kwargs) -> Program:
        """The program that calls with these arguments replay (recorded now, running
        `f`, if this signature has none yet): `print(jitted.lower(x))` shows it.

        **Example:**

        ```python
        >>> import numpy as np, vmapx
        >>> step = vmapx.jit(lambda w, lr: w - lr * np.tanh(w))
        >>> print(step.lower(np.ones(3), np.full(3, 0.1)))
        def replay(v0, v1):
            v2 = np.tanh(v0)
            v3 = np.multiply(v1, v2, out=v2)
            v4 = np.subtract(v0, v3, out=v3)
            return [v4]

        ```
        """
        leaves, treedef, static = self._flatten(args, kwargs)
        key, numbers = self._signature(leaves, treedef, static)
        if key is None:
            return Program(NotReplayable("an argument is a random generator, or unhashable"))
        recorded = self._recordings.get(key)
        if recorded is None:
            recorded = self._record(key, leaves, treedef, numbers)[0]
        return Program(recorded)

    # -- signatures ----------------------------------------------------------------------
    def _flatten(
        self, args: tuple[Any, ...], kwargs: dict[Any, Any]
    ) -> tuple[list[Any], Any, frozenset[Any]]:
        """The leaves of `(args, kwargs)`, their structure, the positions of static ones."""
        paths, leaves, treedef = optree.tree_flatten_with_path((args, kwargs), none_is_leaf=True)
        nums, names = self._static_nums, self._static_names
        static = frozenset(
            i for i, path in enumerate(paths)
            if (path[0] == 0 and path[1] in nums) or (path[0] == 1 and path[1] in names)
        )  # fmt: skip
        return leaves, treedef, static

    def _signature(
        self, leaves: list[Any], treedef: Any, static: frozenset[Any]
    ) -> tuple[tuple[Any, ...] | None, frozenset[Any]]:
        """What a recording depends on (None where nothing can be recorded), and the
        positions of the number leaves it traces."""
        parts: list[Any] = [treedef]
        read = self._read_numbers.get(treedef, frozenset())
        numbers = []
        first: dict[int, int] = {}
        for i, x in enumerate(leaves):
            t = type(x)
            if i in static:
                parts.append(_hashable(x, i))
            elif t is np.ndarray:
                # (strides too: whether a NumPy call returns a view or a copy depends on them)
                parts.append((x.shape, x.dtype.str, x.strides, first.setdefault(id(x), i)))
            elif (
                self._trace_numbers and t is not bool and not isinstance(x, Tracer)
                and isinstance(x, _NUMBER_TYPES)
                and i not in read
            ):  # fmt: skip
                numbers.append(i)
                parts.append((t,) if NUMPY2 else (t, np.min_scalar_type(x).str))
            elif isinstance(x, Tracer | np.random.Generator | np.random.BitGenerator):
                return None, frozenset()
            else:
                try:
                    hash(x)
                except TypeError:
                    return None, frozenset()
                parts.append(_exact(x))
        return tuple(parts), frozenset(numbers)

    # -- recordings ----------------------------------------------------------------------
    def _record(
        self, key: tuple[Any, ...], leaves: list[Any], treedef: Any, numbers: frozenset[Any]
    ) -> tuple[Any, ...]:
        try:
            recorded, out = record(self._f, leaves, treedef, numbers)
        except Exception:
            if not numbers:
                raise
            # `f` could not take a number as a traced value (`isinstance(n, int)`, a dict
            # key, ...): from now on such numbers are constants of the recording
            self._read_numbers[treedef] = self._read_numbers.get(treedef, frozenset()) | numbers
            args, kwargs = optree.tree_unflatten(treedef, leaves)
            return NotReplayable("f raised on a traced number"), self._f(*args, **kwargs)
        if isinstance(recorded, NotReplayable) and recorded.static:
            # Python read these numbers: record them as constants from the next call on
            with self._lock:
                read = self._read_numbers.get(treedef, frozenset())
                self._read_numbers[treedef] = read | recorded.static
            return recorded, out
        with self._lock:
            self._recordings[key] = recorded
        return recorded, out

    def _record_again(
        self, key: tuple[Any, ...], leaves: list[Any], treedef: Any, numbers: frozenset[Any]
    ) -> Any:
        """A later call of a signature whose recording held large intermediates: the
        `vmap` inside may run in chunks by now, whose recording replays. After
        `RECORD_AGAIN` such calls the signature runs `f`, with a warning (once)."""
        with self._lock:
            tries = self._again[key] = self._again.get(key, 0) + 1
        recorded, out = self._record(key, leaves, treedef, numbers)
        if type(recorded) is NotReplayable and recorded.again and tries >= RECORD_AGAIN:
            with self._lock:
                self._recordings[key] = NotReplayable(recorded.why)
            if not self._warned_large:
                self._warned_large = True
                warnings.warn(
                    f"jit({_name(self._f)}): calls with these arguments are not replayed, "
                    f"they run the function: {recorded.why} (a whole-batch replay would "
                    "stream them through memory; vmap runs such calls in cache-sized "
                    "chunks). Wrap the function in vmapx.vmap (chunk_size='auto', the "
                    "default) so that the recording is of its chunks.",
                    PerformanceWarning,
                    stacklevel=4,
                )
        return out

    def _room(self, key: tuple[Any, ...], leaves: list[Any]) -> bool:
        """Whether another signature may be recorded; warns once where not."""
        if len(self._recordings) < MAX_SIGNATURES:
            return True
        if not self._warned:
            self._warned = True
            warnings.warn(
                f"jit({_name(self._f)}): {MAX_SIGNATURES} signatures recorded; calls with "
                f"a new one run the function without recording (each signature records "
                f"once). {_what_changes(key, list(self._recordings)[-1])} A number that "
                "changes on every call (a learning rate) can be traced: "
                "`vmapx.jit(f, trace_numbers=True)`; else pass arrays of fixed shapes, or "
                "fewer distinct values of static arguments.",
                PerformanceWarning,
                stacklevel=3,
            )
        return False


def _static_arguments(
    f: Callable[..., Any], nums: tuple[int, ...], names: tuple[str, ...]
) -> tuple[frozenset[Any], frozenset[Any]]:
    """`static_argnums` and `static_argnames`, each completed from the other where `f`'s
    signature names its positional parameters (as `jax.jit` does). A negative index
    counts from the end of those parameters (whatever a call passes: an omitted
    argument with a default moves nothing); without such a signature (`*args`, a
    builtin) it is refused."""
    n: object  # (an int, then a str: each is checked)
    for n in nums:
        if type(n) is not int:
            raise TypeError(f"jit: `static_argnums` must be ints, got {n!r}")
    for n in names:
        if type(n) is not str:
            raise TypeError(f"jit: `static_argnames` must be strings, got {n!r}")
    try:
        params = list(inspect.signature(f).parameters.values())
    except (TypeError, ValueError):
        params = None
    if params is None or any(p.kind is p.VAR_POSITIONAL for p in params):
        negative = [n for n in nums if n < 0]
        if negative:
            raise ValueError(
                f"jit: static_argnums={negative[0]} counts from the end of `f`'s positional "
                f"parameters, but `{_name(f)}` has "
                + ("`*args`" if params is not None else "no signature Python can read")
                + ", so the end depends on the call. Pass a non-negative index."
            )
        if params is None:
            return frozenset(nums), frozenset(names)
    positional = [
        p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]  # fmt: skip
    for n in nums:
        if n < -len(positional):
            raise ValueError(
                f"jit: static_argnums={n}, but `{_name(f)}` has only {len(positional)} "
                "positional parameters"
            )
    resolved = {n + len(positional) if n < 0 else n for n in nums}
    all_nums = resolved | {positional.index(n) for n in names if n in positional}
    all_names = set(names) | {positional[n] for n in resolved if n < len(positional)}
    return frozenset(all_nums), frozenset(all_names)


def _hashable(x: Any, i: int) -> Any:
    """A static argument as the signature holds it (`_exact`)."""
    try:
        hash(x)
    except TypeError:
        raise TypeError(
            f"jit: a static argument must be hashable (it is part of the signature), but "
            f"leaf {i} of the arguments is a {type(x).__name__}. Pass it as a tuple, or do "
            "not mark it static."
        ) from None
    return _exact(x)


def _exact(x: Any) -> Any:
    """`x` as a signature holds it: compared by `==`, Python would take 0.0 for -0.0
    (`math.copysign` tells them apart), 1 for 1.0 and True, and never a NaN for a NaN.
    So a float is its type and bits; a tuple or frozenset, its items so."""
    t = type(x)
    if t is float:
        return (t, struct.pack("<d", x))
    if t is complex:
        return (t, struct.pack("<dd", x.real, x.imag))
    if isinstance(x, np.floating | np.complexfloating):
        return (t, x.tobytes())
    if t is tuple or t is frozenset:
        return (t, t(_exact(v) for v in x))
    return (t, x)


_quiet: list[Any] = [None]  # the last error state (`_ERRSTATE`) seen raising for nothing


def _errors_raise() -> bool:
    """Whether NumPy's error state raises (or calls a function, or logs) for some
    error: a replay that leaves out a step `f` makes would not do so where `f` does."""
    state = _ERRSTATE.get() if _ERRSTATE is not None else None
    if state is not None and state is _quiet[0]:
        return False
    raising = any(v in ("raise", "call", "log") for v in np.geterr().values())
    if not raising and state is not None:
        _quiet[0] = state  # (held here: its id is never another state's)
    return raising


def _what_changes(key: tuple[Any, ...], last: tuple[Any, ...]) -> str:
    if len(key) != len(last) or key[0] != last[0]:
        return "The structure of the arguments changes between calls."
    changed = [i for i, (a, b) in enumerate(zip(key[1:], last[1:], strict=True)) if a != b]
    return f"The last new signature differs in argument leaves {changed}."


def _name(f: Callable[..., Any]) -> str:
    return getattr(f, "__name__", type(f).__name__)


@functools.lru_cache(maxsize=32)
def _flat_treedef(n: int) -> Any:
    """The structure of `(args, kwargs)` for `n` arrays and no keywords."""
    return optree.tree_structure(((np.empty(0),) * n, {}), none_is_leaf=True)


def jit(
    f: Callable[P, R],
    *,
    static_argnums: int | Iterable[int] = (),
    static_argnames: str | Iterable[str] = (),
    trace_numbers: bool = False,
) -> Jitted[P, R]:
    """`f` with its NumPy calls recorded once per signature and replayed afterwards.

    For repeated calls of a function of small arrays (per-example gradients, Jacobian
    rows), whose time is mostly vmapx's per-call interpretation: the replay runs only
    the NumPy calls. The result is always what `f` returns; where replaying could
    differ (Python code that reads a value, random generator arguments, ...), `f`
    runs. Python state other than the arguments (globals, closures) is read once, when
    a signature is recorded. See `vmapx._jit` for the rules.

    A signature is the shapes, dtypes and strides of the array arguments and the
    values of the other arguments, numbers included: each value of a number records
    once. At most 64 signatures are recorded per function; further ones run `f`, with
    a `PerformanceWarning` (once) that says why.

    With `trace_numbers=True`, numbers (Python and NumPy numbers, not bools) are values
    of the replay instead, so a learning rate that changes on every call replays one
    recording. A traced number is not a Python number: Python code that looks at it
    could take another path than `f` does with the number itself. vmapx catches what it
    can see: a number that Python code reads (`range(n)`, `if lr > 0`, `float(lr)`) or
    that sets a shape or an axis (`x.reshape(n, -1)`) is recorded as a constant from the
    next call on, and so is every number argument of a function whose code looks at
    types (`isinstance`, `type`, `hasattr`). It cannot see `n is DEFAULT`, `match n:
    case int():`, a `try` that catches what only a traced number raises (a dict lookup
    `table[n]`), `n * [0]`, or a type check in a function NumPy calls back
    (`np.apply_along_axis`): trace numbers only where `f` just computes with them.

    **Arguments:**

    - `f`: any function of arrays and pytrees of arrays, usually a vmapx transform
      (`vmapx.jit(vmapx.vmap(vmapx.grad(loss)))`).
    - `static_argnums`, `static_argnames`: positional arguments (by index) and keyword
      arguments (by name) whose values are part of the signature, as in `jax.jit`:
      numbers that select a program (a number of steps, a mode); they must be hashable.
      A negative index counts from the end of `f`'s positional parameters. (With
      `trace_numbers=True`: numbers that stay constants.)
    - `trace_numbers`: trace number arguments (see above); default False.

    **Returns:** a function with the same arguments and results as `f`;
    `.lower(*args, **kwargs)` gives the program those arguments replay.

    **Example:**

    ```python
    >>> import numpy as np, vmapx
    >>> per_example = vmapx.jit(vmapx.vmap(vmapx.grad(lambda w, x: np.sum((x @ w) ** 2)),
    ...                                    in_axes=(None, 0)))
    >>> per_example(np.ones(3), np.ones((2, 3))).shape
    (2, 3)

    ```
    """
    if not callable(f):
        raise TypeError(f"jit: `f` must be callable, got {type(f).__name__}")
    nums = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
    names = (static_argnames,) if isinstance(static_argnames, str) else tuple(static_argnames)
    return Jitted(f, nums, names, bool(trace_numbers))
