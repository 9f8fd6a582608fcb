"""`vmapx.map`: the loop over a list of differently-shaped examples, computed as one `vmap`
per group of examples with the same shapes and dtypes, results in the loop's order."""

from __future__ import annotations

import builtins
import numbers
import warnings
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from operator import itemgetter
from typing import Any, cast

import numpy as np

from . import _exact_groups, _heap_room, _padded_groups, _padding
from . import _pytree as optree  # optree in vmapx.config.pytree_namespace
from ._api import vmap
from ._config import config
from ._ragged_random import RandomWatch, passed_values
from .errors import (
    AxisSizeError,
    ConcretizationError,
    FallbackError,
    InAxesError,
    PerformanceWarning,
    RaggedInputError,
)

_ERROR_MODE_SENTENCE = " With fallback='error' vmapx does not run the function per example."
# Below this many examples a group runs as plain calls. Measured (2 cores, NumPy 2.4) as the
# time of plain calls over a batched run of one group: for a function of 31 NumPy calls on
# (4, 20) and (4, 300) arrays, 0.56 at 4 examples, 0.82-0.89 at 6, 1.07 at 8, 1.5 at 12;
# for `x.sum() * 2` the plain calls stay faster up to ~30 examples (they cost ~2 us each).
_DEFAULT_MIN_GROUP = 8


def map(  # noqa: A001  (the name users call: `vmapx.map`, like Python's `map`)
    f: Callable[..., Any],
    *xs: Any,
    in_axes: Any = 0,
    pad_axes: Any = None,
    out_pad_axes: Any = None,
    buckets: int | str | Sequence[int] = "auto",
    pad_value: Any = 0,
    check: bool | int = False,
    min_group_size: int = _DEFAULT_MIN_GROUP,
    chunk_size: int | str | None = "auto",
    fallback: str | None = None,
    randomness: str = "error",
    **kwargs: Any,
) -> list[Any]:
    """Apply `f` to every example of a ragged batch: `[f(*ex) for ex in zip(*xs)]`, batched.

    Examples whose arguments have the same shapes and dtypes (their *signature*) form a
    group; each group is stacked and run by one `vmapx.vmap(f)`, and every result goes
    back to its example's place. The result is the loop's list: same order, values,
    shapes and dtypes (each example keeps its own dtype; a result that is 0-d comes back
    as a NumPy scalar, as `np.sum` gives it). Groups smaller than `min_group_size` run as
    plain calls.

    **Arguments:**

    - `f`: a function written for one example.
    - `*xs`: one per positional argument of `f`: a list or tuple of examples (each an
      array, a scalar or a pytree of those, of any shapes), an array (its rows are the
      examples), or a dict / namedtuple whose leaves are such sequences (example `i` is
      the same structure of their `i`-th items). Python numbers and other non-arrays in
      examples are passed as they are and grouped by value.
    - `in_axes`: `0` (the argument is a sequence of examples) or `None` (the same value
      for every example, read-only inside `f`), one for all or a tuple with one entry
      per argument.
    - `pad_axes`: turns on the padded mode (below): the axis of each argument's arrays
      that may be padded, an int for all, or a tuple with one entry per argument (an int,
      `None`, or a pytree prefix of that argument's examples).
    - `out_pad_axes`: padded mode: the axis of each result that has the example's length
      and is cut back to it (an int, `None`, or a pytree prefix of the results).
    - `buckets`: padded mode: each length is padded up to the next bucket size. An int
      k: the k sizes that make this batch's padded arrays the smallest (exact, by dynamic
      programming); `"auto"` (default): the number of sizes (up to 16) that best trades
      padding against one more batched run, which costs about as much as 50 000 more
      elements per NumPy call (measured), a bucket's elements beyond 65 536 (512 KiB of
      float64, past the cache) weighing 2.5 times as much; or a sequence of sizes.
    - `pad_value`: padded mode: the value of padded positions.
    - `check`: padded mode: `True` (8 examples) or a number of examples, the most padded
      of each bucket first, whose results are compared with calling `f` on the unpadded
      example; a difference raises `vmapx.errors.PaddingError`.
    - `min_group_size`: the smallest group run batched (default 8: measured, a batched
      run of a function of a few dozen NumPy calls starts to pay there).
    - `chunk_size`, `fallback`: passed to each group's `vmap`. A group whose function
      cannot stay batched (Python control flow on values where the examples disagree,
      a result shape that depends on the data) runs example by example, with a
      `vmapx.PerformanceWarning` (`fallback="silent"`: quietly, `"error"`: raises).
    - `randomness`: only `"error"`: a draw from a `numpy.random.Generator` argument,
      from one `f` reads from a closure or a global, or from NumPy's legacy global
      functions raises `vmapx.errors.RandomnessError` (the generators' states put back),
      since grouping runs the examples in another order than the loop (draw the numbers
      before the map, in a loop, and map them).
    - `**kwargs`: passed to `f` unbatched (the names above are `map`'s own; bind a
      keyword of `f` with one of those names with `functools.partial`).

    **Padded mode.** With `pad_axes`, examples that differ only in the length of their
    padded axis share a group: each length is rounded up to a bucket size, the arrays are
    padded with `pad_value`, and `f` is called as `f(*args, length, **kwargs)` with the
    true length (a NumPy int) as its last positional argument. The contract: `f` is
    mask-aware, so the result for a padded example equals `f(*example, len)` on the
    unpadded one (equal up to the rounding of sums over the padded axis, whose pairing
    NumPy chooses by length); results with a padded axis name it in `out_pad_axes`. The
    result is `[f(*ex, length(ex)) for ex in zip(*xs)]`. `check=` verifies it on a sample.

    **Returns:** a list with `f`'s result for each example, in order.

    **Example:**

    ```python
    >>> import numpy as np, vmapx
    >>> xs = [np.ones(3), np.ones(5), 2 * np.ones(3)]
    >>> [float(r) for r in vmapx.map(lambda x: x.sum() * 2, xs)]
    [6.0, 10.0, 12.0]
    >>> masked_mean = lambda x, n: np.where(np.arange(x.shape[0]) < n, x, 0).sum() / n
    >>> [float(r) for r in vmapx.map(masked_mean, [np.arange(2.0), np.arange(4.0)], pad_axes=0)]
    [0.5, 1.5]

    ```
    """
    _check_options(f, min_group_size, buckets, check, randomness, fallback)
    axes = _in_axes(in_axes, len(xs))
    plan = _Plan(f, xs, axes, pad_axes, kwargs)
    if not plan.size:
        return []
    plan.group(buckets)
    results: list[Any] = [None] * plan.size
    runner = _GroupRunner(
        plan, min_group_size, chunk_size, fallback, out_pad_axes, pad_value, bool(check)
    )
    runner.watch = watch = RandomWatch(f, passed_values(plan.shared, kwargs))
    for group in plan.groups.values():
        runner.run(group, results)
        watch.check()  # (a draw the groups' vmap cannot see: no loop's numbers)
    if check and plan.padded:
        count = 8 if check is True else int(check)
        sample = _padding.check_sample(runner.padded, count)
        _padding.check_against_loop(sample, results, plan.call)
        watch.check()
    return results


# -- the arguments ----------------------------------------------------------------------


def _check_options(
    f: Callable[..., Any], min_group: Any, buckets: Any, check: Any, randomness: str, fallback: Any
) -> None:
    if not callable(f):
        raise TypeError(f"vmapx.map: `f` must be callable, got {type(f).__name__}")
    if not _positive_int(min_group):
        raise ValueError(f"vmapx.map: `min_group_size` must be a positive int, got {min_group!r}")
    if not (isinstance(buckets, str) and buckets == "auto") and not (
        _positive_int(buckets) or _sizes(buckets)
    ):
        raise ValueError(
            "vmapx.map: `buckets` must be 'auto', a positive int (how many bucket sizes) or "
            f"a sequence of positive ints (the sizes), got {buckets!r}"
        )
    if not (isinstance(check, bool) or (_positive_int(check))):
        raise ValueError(f"vmapx.map: `check` must be True, False or a positive int, got {check!r}")
    if fallback is not None and fallback not in ("warn", "silent", "error"):
        raise ValueError(
            f"vmapx.map: `fallback` must be 'warn', 'silent' or 'error', got {fallback!r}"
        )
    if randomness != "error":
        raise ValueError(
            f"vmapx.map: randomness={randomness!r} cannot hold: examples run grouped by "
            "shape, not in the loop's order, so a generator shared by the examples would "
            "give them other numbers than the loop. Draw the random numbers before the "
            "map, in the loop's order (`noise = [rng.normal(size=x.shape) for x in xs]`), "
            "and pass them as a mapped argument"
        )


def _positive_int(v: Any) -> bool:
    # (cast: typeshed's numbers.Integral does not compare with int)
    return isinstance(v, numbers.Integral) and not isinstance(v, bool) and cast(int, v) >= 1


def _sizes(v: Any) -> bool:
    return isinstance(v, Sequence | np.ndarray) and len(v) > 0 and all(_positive_int(s) for s in v)


def _in_axes(in_axes: Any, nargs: int) -> list[Any]:
    if nargs == 0:
        raise TypeError("vmapx.map: give at least one sequence of examples after `f`")
    axes = list(in_axes) if isinstance(in_axes, tuple | list) else [in_axes] * nargs
    if len(axes) != nargs:
        raise InAxesError(
            f"vmapx.map: `in_axes` has {len(axes)} entries but {nargs} arguments were given; "
            "give one entry (0 or None) per argument"
        )
    for ax in axes:
        if ax is not None and (type(ax) is not int or ax != 0):
            raise InAxesError(
                f"vmapx.map: each `in_axes` entry must be 0 (a sequence of examples) or None "
                f"(the same value for every example), got {ax!r} in in_axes={in_axes!r}"
            )
    if all(ax is None for ax in axes):
        raise InAxesError(
            "vmapx.map: every `in_axes` entry is None, so there are no examples to map over; "
            "give 0 for at least one argument"
        )
    return axes


def _examples(x: Any, where: str) -> list[Any]:
    """The examples of one mapped argument, in order."""
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        if not len(x.shape):
            raise RaggedInputError(
                f"vmapx.map: {where} is a 0-d array, which holds no examples; pass a list "
                "of examples, or in_axes=None for a value every example shares"
            )
        return [x[i] for i in range(x.shape[0])]
    if isinstance(x, list | tuple) and not hasattr(x, "_fields"):
        return list(x)
    if isinstance(x, str | bytes) or x is None:
        raise _not_a_sequence(x, where)
    try:
        children, meta, _, unflatten = optree.tree_flatten_one_level(x)
    except ValueError:
        if isinstance(x, Iterable):
            return list(x)
        raise _not_a_sequence(x, where) from None
    if not children:
        raise _not_a_sequence(x, where)
    columns = [_examples(c, f"{where} (an entry)") for c in children]
    _check_sizes([(f"{where}[{i}]", len(c)) for i, c in enumerate(columns)])
    return [unflatten(meta, list(parts)) for parts in zip(*columns, strict=True)]


def _not_a_sequence(x: Any, where: str) -> RaggedInputError:
    return RaggedInputError(
        f"vmapx.map: {where} must be a sequence of examples (a list, a tuple, an array, or "
        f"a dict/namedtuple of such sequences), got a {type(x).__name__}: {x!r:.60}; pass "
        "in_axes=None for it if every example shares it"
    )


def _check_sizes(sizes: list[Any]) -> None:
    if len({n for _, n in sizes}) > 1:
        lines = "\n".join(f"  * {name} has {n} examples" for name, n in sizes)
        raise AxisSizeError(
            f"vmapx.map got sequences of different lengths (the loop would zip them "
            f"silently):\n{lines}"
        )


def _flatten(example: Any) -> tuple[list[Any], Any]:
    if type(example) is np.ndarray:
        return [example], None
    leaves, treedef = optree.tree_flatten(example)
    return leaves, treedef


def _is_axis(spec: Any) -> bool:
    return spec is None or isinstance(spec, numbers.Integral)


def _is_array(leaf: Any) -> bool:
    return hasattr(leaf, "shape") and hasattr(leaf, "dtype")


def _leaf_key(leaf: Any) -> tuple[Any, ...]:
    if type(leaf) is np.ndarray:
        return leaf.shape, leaf.dtype
    if _is_array(leaf):
        return tuple(leaf.shape), np.dtype(leaf.dtype)
    kind = type(leaf)
    if kind in (int, bool, str, bytes):
        return "value", kind, leaf
    if kind in (float, complex):
        return "value", kind, repr(leaf)  # (tells -0.0 from 0.0, and nan equals nan)
    return "object", kind, id(leaf)  # the same object: the same group


# -- the plan: examples, their signatures, the groups -----------------------------------


class _Plan:
    """The flattened examples of one call and their groups by signature."""

    def __init__(
        self,
        f: Callable[..., Any],
        xs: tuple[Any, ...],
        axes: list[Any],
        pad_axes: Any,
        kwargs: dict[Any, Any],
    ) -> None:
        self.f, self.axes, self.kwargs = f, axes, kwargs
        self.shared = [None if ax is not None else x for x, ax in zip(xs, axes, strict=True)]
        columns = [
            (f"argument {p}", _examples(x, f"argument {p} of `f`"))
            for p, (x, ax) in enumerate(zip(xs, axes, strict=True))
            if ax is not None
        ]
        _check_sizes([(name, len(c)) for name, c in columns])
        self.size = len(columns[0][1])
        # per example: the leaves of its mapped arguments (a list, or `_Rows`), and
        # (treedef, leaf count) per mapped argument
        self.leaves: Any
        self.specs: list[Any]
        self.plain = all(set(builtins.map(type, c)) <= {np.ndarray} for _, c in columns)
        self.columns = [c for _, c in columns] if self.plain else None  # (leaf k: column k)
        if self.columns is not None:  # (the common case: each example of each argument an array)
            self.leaves = _Rows(self.columns)
            self.specs = [((None, 1),) * len(columns)] * self.size
        else:
            self.leaves, self.specs = _flat_examples([c for _, c in columns])
        self.padded = pad_axes is not None
        self.pad_axes = self._pad_specs(pad_axes, xs) if self.padded else None
        # per example (padded mode): length, bucket size
        self.lengths: np.ndarray | None = None
        self.sizes: np.ndarray | None = None
        self.has_generator = self._has_generator()

    def _pad_specs(self, pad_axes: Any, xs: tuple[Any, ...]) -> list[Any]:
        specs = list(pad_axes) if type(pad_axes) in (tuple, list) else [pad_axes] * len(xs)
        if len(specs) != len(xs):
            raise InAxesError(
                f"vmapx.map: `pad_axes` has {len(specs)} entries but {len(xs)} arguments were "
                "given; give one entry per argument (an int, None, or a pytree prefix)"
            )
        for p, (spec, ax) in enumerate(zip(specs, self.axes, strict=True)):
            if ax is None and spec is not None and type(pad_axes) in (tuple, list):
                raise InAxesError(
                    f"vmapx.map: argument {p} is shared (in_axes None) and cannot be padded; "
                    "give it None in `pad_axes`"
                )
            for leaf in optree.tree_leaves(spec, none_is_leaf=True):
                if leaf is not None and (type(leaf) is bool or not isinstance(leaf, int)):
                    raise InAxesError(
                        f"vmapx.map: `pad_axes` entries must be ints, None or pytrees of those; "
                        f"got {leaf!r} in pad_axes={pad_axes!r}"
                    )
        return [s for s, ax in zip(specs, self.axes, strict=True) if ax is not None]

    def _has_generator(self) -> bool:
        """Whether a random generator is among the arguments: such groups always run
        under `vmap`, which refuses draws, never as plain calls that would draw."""
        shared = optree.tree_leaves([self.shared, self.kwargs])
        if any(isinstance(v, np.random.Generator) for v in shared):
            return True
        return not self.plain and any(
            isinstance(v, np.random.Generator)
            for flat in self.leaves
            for v in flat
            if type(v) is not np.ndarray
        )

    def group(self, buckets: Any) -> None:
        """Group the examples by signature; in the padded mode, merge the groups whose
        signatures are equal once each length is rounded up to its bucket's size."""
        if self.padded and self.plain and self._group_by_length(buckets):
            return
        if self.columns is not None:  # (plain)
            exact = dict(enumerate(_exact_groups.exact_groups(self.columns)))
        else:
            exact = {}
            for e, key in enumerate(_keys(self)):
                exact.setdefault(key, []).append(e)
        self.groups: dict[Any, Any] = {key: _Group(idxs) for key, idxs in exact.items()}
        if self.padded:
            self._merge_padded(buckets)

    def _merge_padded(self, buckets: Any) -> None:
        """Each exact group's length and padded axes (the same for all its examples), its
        bucket size, and the groups merged by padded signature."""
        exact = list(self.groups.values())
        for group in exact:
            group.length, group.pads = self._length(group.idxs[0])
        counts = [len(g.idxs) for g in exact]
        lengths = [g.length for g in exact]
        weights = [  # (the elements that each unit of padding adds to the group's arrays)
            len(g.idxs) * _padding.width(self.leaves[g.idxs[0]], g.pads) for g in exact
        ]
        sizes = _padding.bucket_sizes(lengths, buckets, weights)
        order = np.concatenate([g.idxs for g in exact])  # (one conversion for all examples)
        self.lengths = np.empty(self.size, dtype=np.int64)
        self.sizes = np.empty(self.size, dtype=np.int64)
        self.lengths[order] = np.repeat(lengths, counts)
        self.sizes[order] = np.repeat(sizes, counts)
        self.groups = {}
        for group, size in zip(exact, sizes.tolist(), strict=True):
            e = group.idxs[0]
            pads = zip(self.leaves[e], group.pads, strict=True)
            key = (self.specs[e], tuple(_padded_key(x, ax, size) for x, ax in pads))
            merged = self.groups.setdefault(key, _Group([], size, group.pads))
            merged.idxs += group.idxs

    def _group_by_length(self, buckets: Any) -> bool:
        """The padded groups found with array operations, where every example is plain
        arrays that differ only in their padded length (`_padded_groups`); False where
        the batch is not that case."""
        assert self.columns is not None and self.pad_axes is not None  # (plain, padded)
        found = _padded_groups.plain_lengths(self.columns, self.pad_axes)
        if found is None:
            return False
        self.lengths = found.lengths
        self.sizes, groups = _padded_groups.bucket_groups(
            found.lengths,
            lambda values, counts: _padding.bucket_sizes(values, buckets, counts * found.width),
        )
        self.groups = {b.size: _Group(b.idxs, b.size, found.pads, b.lengths) for b in groups}
        return True

    def _length(self, e: int) -> tuple[int, list[Any]]:
        """Example `e`'s true length and the padded axis of each of its leaves."""
        flat, axes, start = self.leaves[e], [], 0
        assert self.pad_axes is not None  # (the padded mode)
        for p, (treedef, count) in enumerate(self.specs[e]):
            example = (
                flat[start]
                if treedef is None
                else optree.tree_unflatten(treedef, list(flat[start : start + count]))
            )
            where = f"mapped argument {p}"
            axes += _padding.leaf_pad_axes(self.pad_axes[p], example, treedef, count, where)
            start += count
        return _padding.example_length(flat, axes, e)

    def arguments(
        self, spec: tuple[Any, ...], flat: Sequence[Any], shared: Sequence[Any]
    ) -> list[Any]:
        """`f`'s positional arguments from the mapped leaves `flat` and the `shared` values."""
        return _arguments(self.axes, spec, flat, shared)

    def call(self, e: int) -> Any:
        """`f` on example `e` alone: its own (copied) arrays, the shared values read-only."""
        flat = [leaf.copy() if type(leaf) is np.ndarray else leaf for leaf in self.leaves[e]]
        shared = [None if v is None else optree.tree_map(_read_only, v) for v in self.shared]
        args = self.arguments(self.specs[e], flat, shared)
        if self.padded:
            assert self.lengths is not None  # (set by `group` in the padded mode)
            args.append(np.int64(self.lengths[e]))
        return self.f(*args, **self.kwargs)


def _flat_examples(columns: list[Any]) -> tuple[list[Any], list[Any]]:
    """The leaves of each example of `columns` (one list of examples per mapped argument)
    and its structure: (treedef, leaf count) per argument."""
    leaves, specs = [], []
    for example in zip(*columns, strict=True):
        flat, spec = [], []
        for part in example:
            parts, treedef = _flatten(part)
            flat += parts
            spec.append((treedef, len(parts)))
        leaves.append(flat)
        specs.append(tuple(spec))
    return leaves, specs


def _arguments(
    axes: list[Any], spec: tuple[Any, ...], flat: Sequence[Any], shared: Sequence[Any]
) -> list[Any]:
    """`f`'s positional arguments (`axes`: each one's `in_axes` entry) from the mapped
    leaves `flat`, of the structure `spec`, and the `shared` values."""
    args, start, parts = [], 0, iter(spec)
    for p, ax in enumerate(axes):
        if ax is None:
            args.append(shared[p])
            continue
        treedef, count = next(parts)
        leaves = flat[start : start + count]
        args.append(leaves[0] if treedef is None else optree.tree_unflatten(treedef, leaves))
        start += count
    return args


def _gather(plan: _Plan, k: int, idxs: list[Any]) -> list[Any] | tuple[Any, ...]:
    """Leaf `k` of the examples `idxs`."""
    if plan.columns is not None and len(idxs) > 1:
        return cast(tuple[Any, ...], itemgetter(*idxs)(plan.columns[k]))  # (2 or more items)
    return [plan.leaves[e][k] for e in idxs]


class _Rows:
    """The leaves of each example where every mapped argument is a list of arrays
    (`_Plan.columns`): example `e`'s are the `e`-th of each, read when asked for."""

    __slots__ = ("columns",)

    def __init__(self, columns: list[Any]) -> None:
        self.columns = columns

    def __getitem__(self, e: int) -> tuple[Any, ...]:
        return tuple([column[e] for column in self.columns])

    def __len__(self) -> int:
        return len(self.columns[0])


def _rows(leaf: Any, n: int) -> list[Any]:
    return list(leaf) if type(leaf) is np.ndarray else [leaf[j] for j in range(n)]


def _keys(plan: _Plan) -> list[Any]:
    """The signature of each example: its structure and each leaf's key."""
    return [
        (spec, tuple([_leaf_key(leaf) for leaf in flat]))
        for flat, spec in zip(plan.leaves, plan.specs, strict=True)
    ]


def _padded_key(leaf: Any, axis: int | None, size: int) -> tuple[Any, ...]:
    key = _leaf_key(leaf)
    if axis is None:
        return key
    shape = key[0]
    return (*shape[:axis], size, *shape[axis + 1 :]), key[1], axis


def _stack(column: Sequence[Any]) -> Any:
    """The examples `column` (equal shapes and dtypes) stacked on a new axis 0."""
    first = column[0]
    if type(first) is np.ndarray and first.ndim and set(builtins.map(type, column)) == {np.ndarray}:
        return np.concatenate(column).reshape(len(column), *first.shape)  # (faster)
    return np.stack(column)


class _Group:
    """Examples run together: their indices, and in the padded mode their bucket size and
    the padded axis of each leaf (None where a leaf is not padded)."""

    __slots__ = ("idxs", "size", "pads", "length", "lengths")

    def __init__(
        self, idxs: list[Any], size: int | None = None, pads: list[Any] | None = None,
        lengths: np.ndarray | None = None,
    ) -> None:  # fmt: skip
        self.idxs, self.size, self.pads, self.length = idxs, size, pads, None
        self.lengths = lengths  # (padded mode: the examples' lengths, where known already)


def _read_only(v: Any) -> Any:
    if type(v) is not np.ndarray or not v.flags.writeable:
        return v
    view = v.view()
    view.flags.writeable = False
    return view


# -- running one group ----------------------------------------------------------------


class _GroupRunner:
    """Runs each group (batched or as plain calls) and puts its results in place."""

    def __init__(
        self, plan: _Plan, min_group: int, chunk_size: Any, fallback: Any, out_pad: Any,
        pad_value: Any, record: bool = False,
    ) -> None:  # fmt: skip
        self.plan, self.chunk_size, self.out_pad, self.pad_value = (
            plan, chunk_size, out_pad, pad_value
        )  # fmt: skip
        self.min_group = 1 if plan.has_generator else min_group
        self.fallback = fallback or config.fallback
        self.record = record  # keep `padded` (for `check`)
        self.padded: list[Any] = []  # (group number, padding, example) of padded batched runs
        self.count = 0  # groups run batched so far
        self.watch: RandomWatch | None = None  # (the random generators' states at the start)

    def run(self, group: _Group, results: list[Any]) -> None:
        idxs = group.idxs
        if len(idxs) < self.min_group:
            for e in idxs:
                results[e] = self.plan.call(e)
            return
        try:
            out = self._batched(group, "error")
        except FallbackError:  # a NumPy function without a rule: vmap loops over just it
            if self.fallback == "error":
                raise
            out = self._batched(group, self.fallback)
        except ConcretizationError as error:  # cannot stay batched: the group's own loop
            if self.fallback == "error":
                raise
            for e in idxs:
                results[e] = self.plan.call(e)
            if self.watch is not None:  # (a random draw made it loop: an error, not a warning)
                self.watch.check()
            self._warn_loop(idxs, error)
            return
        self._scatter(out, idxs, results)
        self.count += 1

    def _batched(self, group: _Group, fallback: str) -> Any:
        plan, idxs = self.plan, group.idxs
        spec = plan.specs[idxs[0]]
        flat0 = plan.leaves[idxs[0]]
        values: list[Any] = []
        axes: list[int | None] = []
        lengths = group.lengths  # (the padded mode)
        if lengths is None and plan.lengths is not None:
            lengths = plan.lengths[idxs]
        for k, leaf in enumerate(flat0):
            if not _is_array(leaf):  # a non-array, equal in every example of the group
                values.append(leaf)
                axes.append(None)
                continue
            column = _gather(plan, k, idxs)
            ax = cast(list[Any], group.pads)[k] if plan.padded else None  # (set when padded)
            if ax is None:
                values.append(_stack(column))
            else:
                assert group.size is not None and lengths is not None  # (a padded group)
                padded = _padding.stack_padded(column, ax, group.size, self.pad_value, lengths)
                values.append(padded)
            axes.append(0)
        nflat = len(values)
        # (the run's temporaries from the heap, not fresh pages each run: `_heap_room`)
        _heap_room.make_room(sum(v.nbytes for v in values if type(v) is np.ndarray))
        # (only the shared arguments' values: the mapped ones' None entries would take
        # `vmap` off its path for plain arrays)
        shared_at = [p for p, ax in enumerate(plan.axes) if ax is None]
        values += [plan.shared[p] for p in shared_at]
        axes += [None] * len(shared_at)
        if plan.padded:
            values.append(lengths)
            axes.append(0)

        nshared = len(shared_at)
        # (what `one_example` holds: not the plan, whose attributes `vmap`'s search for
        # random generators in closures would walk on every group, ~25 us; the plan holds
        # no generator that is not an argument, and `f` is searched as before)
        f, in_axes = plan.f, plan.axes

        def one_example(*vals: Any, **kwargs: Any) -> Any:
            shared: list[Any] = [None] * len(in_axes)
            for p, v in zip(shared_at, vals[nflat : nflat + nshared], strict=True):
                shared[p] = v
            args = _arguments(in_axes, spec, vals[:nflat], shared)
            return f(*args, *vals[nflat + nshared :], **kwargs)

        mapped = vmap(
            one_example, in_axes=tuple(axes), chunk_size=self.chunk_size, fallback=fallback,
            axis_size=len(idxs),  # (examples of Python numbers only: nothing else tells it)
        )  # fmt: skip
        return mapped(*values, **plan.kwargs)

    def _scatter(self, out: Any, idxs: list[Any], results: list[Any]) -> None:
        plan = self.plan
        if plan.padded and self.record:
            assert plan.sizes is not None and plan.lengths is not None  # (set by `group`)
            padding = (plan.sizes[idxs] - plan.lengths[idxs]).tolist()
            self.padded += [
                (self.count, pad, e) for pad, e in zip(padding, idxs, strict=True) if pad
            ]
        if type(out) is np.ndarray and (not plan.padded or self.out_pad is None):
            # (`results[e] = row` for each example, by `map`: no Python loop)
            deque(builtins.map(results.__setitem__, idxs, out), maxlen=0)
            return
        leaves, treedef = optree.tree_flatten(out)
        columns = [_rows(leaf, len(idxs)) for leaf in leaves]
        if not columns:  # (`f` returned no arrays: `None`, `{}`, `()` for every example)
            for e in idxs:
                results[e] = treedef.unflatten([])
            return
        if not plan.padded:
            for e, parts in zip(idxs, zip(*columns, strict=True), strict=True):
                results[e] = treedef.unflatten(parts)
            return
        # `out_pad_axes` is a prefix of one example's results
        first = treedef.unflatten([column[0] for column in columns])
        axes = _padding.output_pad_axes(self.out_pad, first, len(leaves))
        assert plan.lengths is not None  # (set by `group` in the padded mode)
        for e, parts in zip(idxs, zip(*columns, strict=True), strict=True):
            n = int(plan.lengths[e])
            results[e] = treedef.unflatten(
                [_padding.trim(part, ax, n) for part, ax in zip(parts, axes, strict=True)]
            )

    def _warn_loop(self, idxs: list[Any], error: Exception) -> None:
        # (the group ran with fallback="error" to find out; the caller's mode is "warn")
        cause = str(error).replace(_ERROR_MODE_SENTENCE, "")
        if self.fallback == "warn":
            warnings.warn(
                PerformanceWarning(
                    f"vmapx.map: a group of {len(idxs)} example{'s' * (len(idxs) != 1)} runs "
                    f"example by example, because it cannot stay batched: {cause}"
                ),
                stacklevel=4,
            )
