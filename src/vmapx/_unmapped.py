"""Arrays passed with `in_axes=None`, inside a batched run: indexable by batched values.

`table[i]`, with `table` a NumPy array and `i` one integer per example, cannot dispatch
to vmapx: `ndarray.__getitem__` asks the index for one plain array (`__array__`), which
a batch cannot give, and the whole function would run once per example (an embedding
lookup `E[token]`, a one-hot row `np.eye(k)[label]`, `np.take(E, i, axis=0)`: NumPy's
`take` dispatches on the array only). So a batched run hands `f` each unmapped array
argument as an `UnmappedArray`: the read-only view it always was, of an ndarray
subclass whose `__getitem__` and `take` give the batched gather where the index holds a
traced value (`vmapx._numpy.indexing`'s rule, as for a traced array). Only functions that
need it get it (`wanted`): a run that meets `plain[traced]` stops there, and when some
unmapped argument was a plain array, runs again with `UnmappedArray`s, which the function
then gets from then on. Everything else is NumPy's own ndarray:

- its views stay `UnmappedArray`s (`E.T[i]`, `E[0][i]` batch too), as do its copies
  (`E.copy()`, `np.sort(E)`), but what ufuncs and reductions compute from it are
  plain arrays and NumPy scalars (`E.sum()` is a NumPy scalar, as in the loop), and so
  is any result with a plain array (its `__array_priority__` is below NumPy's);
- NumPy rules of a `vmap` receive plain views of it (`BatchTrace.process`: their fast
  paths test `type(x) is np.ndarray`), and results that leave `vmap` are plain arrays;
- the loop (`vmapx._api`'s per-example runs) gets plain read-only views: its indices
  are plain, and its results must be what the loop of the caller's own arrays gives.

What it cannot reach: an array `f` reads from a global or a closure, or makes itself
(`np.eye(k)`). Those are plain arrays, and indexing them by a batched value still runs
the loop; the loop's warning then says to pass the array as an argument with
`in_axes=None`.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ._compat import NUMPY2
from ._core import bind, find_top_trace
from ._registry import GETITEM, primitive

__all__ = [
    "UnmappedArray", "learn", "plain_arguments", "plain_array", "unmapped_view", "wanted",
]  # fmt: skip


class UnmappedArray(np.ndarray):
    """A NumPy array whose indexing by traced values dispatches to vmapx (see module)."""

    # below ndarray's 0.0: a result of this and a plain array is a plain array
    __array_priority__ = -1.0

    def __array_wrap__(self, arr: Any, context: Any = None, return_scalar: bool = False) -> Any:
        # ufunc results (reductions too) are what a plain array gives: plain arrays, and
        # NumPy scalars where NumPy 2 asks for one (`E.sum()`; NumPy 1 does not ask: a 0-d
        # result is a scalar there, as NumPy 1 gives for plain arrays)
        if arr is self:  # an `out=` array of this class (NumPy asks it to wrap itself)
            return arr
        arr = arr.view(np.ndarray)
        return arr[()] if return_scalar or (not NUMPY2 and arr.ndim == 0) else arr

    def __getitem__(self, index: Any) -> Any:
        if find_top_trace((index,)) is None:
            return super().__getitem__(index)
        return bind(GETITEM, (self.view(np.ndarray), index), {})

    def __setitem__(self, index: Any, value: Any) -> None:
        # a write with traced values is NumPy's (the loop runs, as for any plain array):
        # NumPy's assignment of a subclass would read `self[index]`, a tracer, and fail
        np.ndarray.__setitem__(self.view(np.ndarray), index, value)

    def take(self, indices: Any, axis: Any = None, out: Any = None, mode: Any = "raise") -> Any:
        if out is not None or find_top_trace((indices,)) is None:
            return super().take(indices, axis=axis, out=out, mode=mode)
        params = {"axis": axis, "mode": mode}
        return bind(primitive(np.take), (self.view(np.ndarray), indices), params)


# Functions (their code objects) whose batched run indexed a plain array by a traced
# value. Only their runs get `UnmappedArray`s: rules then take plain views of them, ~0.5
# us a NumPy call (`plain_arguments`), which other functions need not pay. A function
# learns it from its first such run, which stops at `E[t]`, and runs batched again.
_INDEXING: set[Any] = set()
_MOST_REMEMBERED = 4096  # (keys of callables without code objects are the objects)


def _key(f: Any) -> Any:
    """The code object that stands for `f`: its own, or the wrapped function's (a
    decorator's `wrapper`, `vmapx.grad`'s, a `functools.partial` are shared by many)."""
    for _ in range(64):  # (a chain of wrappers, not a cycle)
        if isinstance(f, functools.partial):
            f = f.func
        elif getattr(f, "__wrapped__", None) is not None:
            f = f.__wrapped__
        else:
            break
    return getattr(f, "__code__", None) or getattr(type(f).__call__, "__code__", f)


def wanted(f: Any) -> bool:
    """Whether `f`'s batched runs give it its unmapped arrays as `UnmappedArray`s."""
    return _key(f) in _INDEXING


def learn(f: Any) -> None:
    """Remember that `f` indexes a plain array by a traced value (see `_INDEXING`)."""
    if len(_INDEXING) >= _MOST_REMEMBERED:
        _INDEXING.clear()
    _INDEXING.add(_key(f))


def unmapped_view(x: np.ndarray) -> UnmappedArray:
    """`x` as `f` sees an unmapped argument in a batched run: a read-only view (the
    caller's array must not change, and one write shared by all examples is not what
    each example's own run does: NumPy says "assignment destination is read-only")."""
    view = x.view(UnmappedArray)
    view.flags.writeable = False
    return view


def plain_array(x: Any) -> Any:
    """`x` as a plain `np.ndarray` view where it is an `UnmappedArray`, else `x`."""
    return x.view(np.ndarray) if type(x) is UnmappedArray else x


def plain_arguments(
    args: tuple[Any, ...], kwargs: dict[Any, Any]
) -> tuple[tuple[Any, ...], dict[Any, Any]]:
    """`args` and `kwargs` with every `UnmappedArray` in them (and in the lists and tuples
    among them, one level deep: `np.concatenate([E, x])`) as a plain view."""
    # hot path (every NumPy call of a `vmap` that has unmapped arrays): plain loops
    for a in args:
        if type(a) is UnmappedArray or (type(a) in _SEQUENCES and _holds(a)):
            args = tuple([_plain_item(a) for a in args])
            break
    if kwargs:
        for v in kwargs.values():
            if type(v) is UnmappedArray or (type(v) in _SEQUENCES and _holds(v)):
                kwargs = {k: _plain_item(v) for k, v in kwargs.items()}
                break
    return args, kwargs


_SEQUENCES = (list, tuple)


def _holds(seq: Any) -> bool:
    for v in seq:
        if type(v) is UnmappedArray:
            return True
    return False


def _plain_item(a: Any) -> Any:
    kind = type(a)
    if kind is UnmappedArray:
        return a.view(np.ndarray)
    if kind in _SEQUENCES:
        return kind([v.view(np.ndarray) if type(v) is UnmappedArray else v for v in a])
    return a
