"""Set functions: `isin`, `unique` and its array-API forms, `union1d`, `intersect1d`,
`setdiff1d`, `setxor1d`.

`isin` has a fixed output shape: a batched test set is sorted per example and searched.
The others return as many values as the data has distinct ones. They are computed
batched on each example's sorted values (one stable sort for the whole batch, then a
mask of the values to keep), and stay batched when every example keeps the same number
of values; otherwise the whole function runs once per example, with a warning that says
so. Cases that are batched this way (the results equal NumPy's, order included):

- `unique` (`axis=None` or 1-d examples, with any of `return_index`, `return_inverse`,
  `return_counts`, `equal_nan`), `unique_all`, `unique_counts`, `unique_inverse`;
- `union1d`, `intersect1d` (without `return_indices`), `setdiff1d`, `setxor1d` (float
  examples holding NaN loop: NumPy keeps one NaN per input there).

Per-example loops (each with a `PerformanceWarning`): `unique` along an axis of an n-d
example, `unique_values` and `unique(..., sorted=False)` (NumPy returns the values in
hash-table order), `intersect1d(..., return_indices=True)`, object and structured dtypes.

Which of several equal values NumPy returns (0.0 or -0.0, NaN or -NaN) depends on its
hash table or unstable sort; a batch holding such twins loops (`return_index=True`
sorts stably, and is batched: the first occurrence is kept).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .. import _pytree as optree  # optree in vmapx.config.pytree_namespace
from .._batching import (
    BatchTrace,
    bcast_batch,
    defbatch,
    example_ndim,
    held_as_array,
    is_batched,
    loop_rule,
    unwrap,
)
from .._compat import NUMPY2, present
from .._core import Tracer
from .._registry import get_arg, primitive
from .._rule_helpers import flat_shape, shift_one, zero_batch
from .gather import compact
from .sorting import search_rows

_SORTABLE = "biufcmMUS"  # dtype kinds sorted and compared natively


def _loop(
    trace: BatchTrace, func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[Any, Any]
) -> Any:
    return loop_rule(trace, primitive(func), args, kwargs)


def _flat(trace: BatchTrace, x: Any) -> Any:
    v = bcast_batch(trace, x if hasattr(x, "dtype") else np.asarray(x))
    return v.reshape(flat_shape(v))


def _sorted(v: Any) -> tuple[Any, Any]:
    """`(perm, sorted values)` of each row, stable (equal values keep their order)."""
    perm = np.argsort(v, axis=1, kind="stable")
    return perm, np.take_along_axis(v, perm, axis=1)


def _first_of_runs(aux: Any, equal_nan: bool) -> Any:
    """Where each run of equal sorted values starts (all NaNs one run if `equal_nan`)."""
    new = aux[:, 1:] != aux[:, :-1]
    if equal_nan and aux.dtype.kind in "cfmM":
        new = new & ~(np.isnan(aux[:, 1:]) & np.isnan(aux[:, :-1]))
    first = np.ones_like(new, shape=(aux.shape[0], min(aux.shape[1], 1)))
    return np.concatenate([first, new], axis=1)


def _members(trace: BatchTrace, x: Any) -> Any:
    """The set to test membership in: `(B, m)` rows when batched, else one flat set."""
    return _flat(trace, x) if is_batched(trace, x) else np.ravel(x)


def _is_in(v: Any, test: Any) -> Any:
    """Membership of each entry of the `(B, n)` rows `v` in each row of `test` (`(B, m)`)
    or in the one set `test` (1-d): sorted rows searched, hit when the value equals."""
    if test.ndim == 1:
        return np.isin(v, test)
    if test.shape[1] == 0:
        return np.zeros(v.shape, dtype=bool)
    rows = np.sort(test, axis=1)
    at = np.minimum(search_rows(rows, v, "left", check=False), rows.shape[1] - 1)
    return np.take_along_axis(rows, at, axis=1) == v


def _signed_twins(x: Any) -> bool:
    """Whether some equal values differ in their bits (0.0 and -0.0, NaN and -NaN, complex
    NaNs): which one NumPy keeps then depends on its hash table or unstable sort."""
    if x.dtype.kind == "c":
        return bool(np.any(np.isnan(x))) or _signed_twins(np.real(x)) or _signed_twins(np.imag(x))
    if x.dtype.kind != "f":
        return False
    negative = np.signbit(x)
    for special in (x == 0, np.isnan(x)):
        if bool(np.any(special & negative)) and bool(np.any(special & ~negative)):
            return True
    return False


# -- isin ----------------------------------------------------------------------------


def _isin_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        element = held_as_array(args[0])
        test = held_as_array(get_arg(args, kwargs, 1, "test_elements"))
        invert = get_arg(args, kwargs, 3, "invert", False)
        if not is_batched(trace, test):
            el = unwrap(trace, element)[0]
            return trace.wrap(np.isin(el, test, *args[2:], **kwargs))
        kind = kwargs.get("kind")
        dtypes = (np.result_type(element), np.result_type(test))
        if kind not in (None, "sort") or any(d.kind not in _SORTABLE for d in dtypes):
            return _loop(trace, func, args, kwargs)
        el = bcast_batch(trace, element)
        found = _is_in(el.reshape(flat_shape(el)), _flat(trace, test))
        return trace.wrap((~found if invert else found).reshape(el.shape))

    return rule


defbatch(np.isin, _isin_rule)


# -- unique ----------------------------------------------------------------------------


def _unique_batched(
    trace: BatchTrace, x: Any, index: bool, inverse: bool, counts: bool, equal_nan: bool
) -> list[Any]:
    """`np.unique` of each example (flattened) as `[values, index?, inverse?, counts?]`."""
    v = _flat(trace, x)
    perm, aux = _sorted(v)
    keep = _first_of_runs(aux, equal_nan)
    values, cols = compact(trace, aux, keep, "`np.unique`")
    out = [values]
    if index:
        out.append(np.take_along_axis(perm, cols, axis=1))
    if inverse:
        group = np.cumsum(keep, axis=1) - 1
        inv = np.take_along_axis(group, np.argsort(perm, axis=1), axis=1)
        # NumPy 1.26's inverse indexes the flattened example
        out.append(inv.reshape(bcast_batch(trace, x).shape) if NUMPY2 else inv)
    if counts:
        ends = np.concatenate([cols, np.full_like(cols, v.shape[1], shape=(len(cols), 1))], 1)
        out.append(ends[:, 1:] - ends[:, :-1])
    return out


def _unique_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        names = ("return_index", "return_inverse", "return_counts", "axis")
        index, inverse, counts, axis = (
            get_arg(args, kwargs, i + 1, n) for i, n in enumerate(names)
        )
        x = args[0]
        nd = example_ndim(trace, x)
        if axis is not None:
            if nd == 1:
                shift_one(axis, 1)  # NumPy's AxisError for a bad axis
            if nd != 1 or not NUMPY2:  # NumPy 1.26 compares rows by bytes (NaNs differ)
                return _loop(trace, func, args, kwargs)
        hashed = not (index or inverse or counts) and not kwargs.get("sorted", True)
        if hashed or np.result_type(x).kind not in _SORTABLE:
            return _loop(trace, func, args, kwargs)
        if trace.axis_size == 0:
            return zero_batch(trace, func, args, kwargs)
        if not index and _signed_twins(_flat(trace, x)):  # NumPy's pick: loop
            return _loop(trace, func, args, kwargs)
        equal_nan = kwargs.get("equal_nan", True)
        out = _unique_batched(trace, x, bool(index), bool(inverse), bool(counts), equal_nan)
        out = [trace.wrap(o) for o in out]
        return out[0] if len(out) == 1 else tuple(out)

    return rule


def _unique_api_rule(fields: tuple[bool, bool, bool]) -> Callable[..., Any]:
    """`unique_all`/`unique_counts`/`unique_inverse`: `np.unique` with `equal_nan=False`,
    returned as NumPy's named tuples."""

    def factory(func: Callable[..., Any]) -> Callable[..., Any]:
        def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
            x = args[0]
            if np.result_type(x).kind not in _SORTABLE:
                return _loop(trace, func, args, kwargs)
            if trace.axis_size == 0:
                return zero_batch(trace, func, args, kwargs)
            if not fields[0] and _signed_twins(_flat(trace, x)):  # NumPy's pick: loop
                return _loop(trace, func, args, kwargs)
            out = _unique_batched(trace, x, *fields, equal_nan=False)
            result = type(func(np.zeros(1, dtype=np.result_type(x))))
            return result(*(trace.wrap(o) for o in out))

        return rule

    return factory


defbatch(np.unique, _unique_rule)
defbatch(present(np, "unique_all"), _unique_api_rule((True, True, True)))
defbatch(present(np, "unique_counts"), _unique_api_rule((False, False, True)))
defbatch(present(np, "unique_inverse"), _unique_api_rule((False, True, False)))


# -- union1d, intersect1d, setdiff1d, setxor1d ------------------------------------------


def _setop_rule(keep: Callable[..., Any]) -> Callable[..., Any]:
    """A set function of two arrays: `keep(a, b, a_set, b_set, assume_unique)` gives
    `(values, mask)`, the `(B, n)` candidate values (sorted) and which form the result;
    `a`/`b` are the flattened examples, `a_set`/`b_set` what membership is tested in."""

    def factory(func: Callable[..., Any]) -> Callable[..., Any]:
        def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
            a, b = (_array_operand(x) for x in (args[0], get_arg(args, kwargs, 1, "ar2")))
            if a is None or b is None:  # (a list holding traced values)
                return _loop(trace, func, args, kwargs)
            assume_unique = bool(get_arg(args, kwargs, 2, "assume_unique", False))
            dtypes = (np.result_type(a), np.result_type(b))
            if get_arg(args, kwargs, 3, "return_indices", False) or any(
                d.kind not in _SORTABLE for d in dtypes
            ):
                return _loop(trace, func, args, kwargs)
            if trace.axis_size == 0:
                return zero_batch(trace, func, args, kwargs)
            av, bv = _flat(trace, a), _flat(trace, b)
            both = np.concatenate([av, bv], axis=1)
            if _signed_twins(both):  # NumPy's pick (also 0.0 in `a`, -0.0 in `b`): loop
                return _loop(trace, func, args, kwargs)
            sets = (_members(trace, a), _members(trace, b))
            vals, mask = keep(av, bv, *sets, assume_unique)
            if vals is None:  # NaN in a float set: loop
                return _loop(trace, func, args, kwargs)
            return trace.wrap(compact(trace, vals, mask, f"`np.{func.__name__}`")[0])

        return rule

    return factory


def _array_operand(x: Any) -> Any:
    """An operand as an array where it is a list or tuple of numbers (`np.union1d(x,
    [3])`: np.result_type would read a list as a dtype); None where it holds tracers."""
    if type(x) not in (list, tuple):
        return x
    if any(isinstance(v, Tracer) for v in optree.tree_leaves(x)):
        return None
    return np.asarray(x)


def _union(a: Any, b: Any, a_set: Any, b_set: Any, assume_unique: bool) -> tuple[Any, ...]:
    aux = _sorted(np.concatenate([a, b], axis=1))[1]
    return aux, _first_of_runs(aux, equal_nan=True)


def _intersect(a: Any, b: Any, a_set: Any, b_set: Any, assume_unique: bool) -> tuple[Any, ...]:
    if assume_unique:  # NumPy's own rule: a value equal to the next sorted one
        aux = _sorted(np.concatenate([a, b], axis=1))[1]
        return aux[:, :-1], aux[:, 1:] == aux[:, :-1]
    aux = _sorted(a.astype(np.result_type(a, b), copy=False))[1]
    return aux, _first_of_runs(aux, equal_nan=True) & _is_in(aux, b_set)


def _setdiff(a: Any, b: Any, a_set: Any, b_set: Any, assume_unique: bool) -> tuple[Any, ...]:
    if assume_unique:  # `a` keeps its order
        return a, ~_is_in(a, b_set)
    aux = _sorted(a)[1]
    return aux, _first_of_runs(aux, equal_nan=True) & ~_is_in(aux, b_set)


def _setxor(a: Any, b: Any, a_set: Any, b_set: Any, assume_unique: bool) -> tuple[Any, ...]:
    aux = _sorted(np.concatenate([a, b], axis=1))[1]
    if aux.dtype.kind in "cfmM" and bool(np.any(np.isnan(aux))):
        return None, None
    if assume_unique:  # NumPy's own rule: a value unequal to both sorted neighbours
        edge = np.ones_like(aux, shape=(aux.shape[0], 1), dtype=bool)
        differs = np.concatenate([edge, aux[:, 1:] != aux[:, :-1], edge], axis=1)
        return aux, differs[:, 1:] & differs[:, :-1]
    in_a, in_b = _is_in(aux, a_set), _is_in(aux, b_set)
    return aux, _first_of_runs(aux, equal_nan=False) & (in_a != in_b)


defbatch(np.union1d, _setop_rule(_union))
defbatch(np.intersect1d, _setop_rule(_intersect))
defbatch(np.setdiff1d, _setop_rule(_setdiff))
defbatch(np.setxor1d, _setop_rule(_setxor))
