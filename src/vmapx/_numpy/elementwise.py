"""Elementwise helpers (functions built from ufuncs), comparisons of whole arrays,
differences along an axis, and functions that apply a user's function.

Elementwise helpers batch like ufuncs: batched operands get the batch axis at the
front of the broadcast shape. Comparisons that return one Python bool per example
(`allclose`, `array_equal`) return a batched bool array, as the loop would stack.
`apply_along_axis` runs the user's function under `vmap` over the other axes.

Derivatives (see `vmapx._autodiff`): elementwise helpers have partials (`sinc` and `i0`
from series that stay accurate near 0). `clip` is `minimum(maximum(a, lo), hi)`, as in
JAX: where `a` ties with a bound the derivative is shared equally by `a` and the bound
(and by both bounds where they tie). Differences, `gradient`, `cross` are computed as
NumPy computes them, from calls that have rules (slicing, subtraction, concatenate).
`unwrap` adds whole periods: its derivative is the identity in `p` (and the number of
periods added, in `period`). Functions that apply a user's function differentiate that
function.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import _scalars
from .._autodiff import defcomposite, defelementwise, defjvp, defvjp, defzero
from .._batching import (
    BatchTrace,
    align_rank,
    aligned_operands,
    bcast_batch,
    defbatch,
    example_ndim,
    is_batched,
    unwrap,
    wrap_tree,
)
from .._compat import NUMPY2, astype, umath_ufuncs
from .._core import Tracer, bind
from .._differentiate_rule import composite_by_rule, own_impl
from .._payload import is_array, moved
from .._registry import get_arg, primitive, set_arg
from .._rule_helpers import example_shape, flat_shape, per_example, shift_axis, shift_one
from ._tracer_api import IN_PLACE, assign
from .joins import join, promote
from .misc import as_array
from .ufuncs import numpy1_promotion

try:
    from numpy.lib._function_base_impl import _i0A, _i0B  # type: ignore[attr-defined]  # (private: not in the stubs)
except ImportError:  # NumPy 1.x
    from numpy.lib.function_base import _i0A, _i0B  # type: ignore[import-not-found]  # (NumPy 1)

_ABSENT = object()


# NumPy 1.26's `np.clip` is this ufunc (promotion by value: see `_operand_rule`)
_NUMPY1_CLIP = None if NUMPY2 else umath_ufuncs()["clip"]


def _operand_rule(*operands: tuple[int | None, str]) -> Callable[..., Any]:
    """Functions elementwise in the arguments named by `operands` ((position, keyword);
    position None: keyword only). Another batched argument makes the call loop. The
    first operand shapes the result (`nan_to_num`'s `x`): it is broadcast to the batch
    when only another operand is batched."""

    def factory(func: Callable[..., Any]) -> Callable[..., Any]:
        def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
            slots = [(p if p is not None and p < len(args) else None, n) for p, n in operands]
            slots = [(p, n) for p, n in slots if p is not None or n in kwargs]
            taken = {p for p, _ in slots} | {n for _, n in slots}
            rest = [a for i, a in enumerate(args) if i not in taken]
            rest += [a for k, a in kwargs.items() if k not in taken]
            if any(is_batched(trace, a) for a in rest):
                return per_example(trace, func, args, kwargs, "with a batched option")
            values = [kwargs[n] if p is None else args[p] for p, n in slots]
            vals = aligned_operands(trace, values)
            if (
                func is np.clip and _NUMPY1_CLIP is not None and "dtype" not in kwargs
                and all(v is not None for v in values)
            ):  # fmt: skip
                # (NumPy 1.26's clip is a ufunc: a 0-d bound promotes by its value)
                vals = numpy1_promotion(trace, _NUMPY1_CLIP, tuple(values), vals)
            if not is_batched(trace, values[0]):
                rank = max(example_ndim(trace, a) for a in values)
                vals[0] = align_rank(
                    bcast_batch(trace, values[0]), example_ndim(trace, values[0]), rank
                )
            kwargs = dict(kwargs)
            for (p, n), v in zip(slots, vals, strict=True):
                if p is None:
                    kwargs[n] = v
                else:
                    args = (*args[:p], v, *args[p + 1 :])
            return trace.wrap(func(*args, **kwargs))

        return rule

    return factory


_X = ((0, "x"),)
defbatch([np.round, np.around], _operand_rule((0, "a")))


defzero([np.round, np.around])  # piecewise constant, as `floor` and `rint` (and JAX's round)
defbatch([np.fix, np.sinc, np.isneginf, np.isposinf, np.iscomplex, np.isreal], _operand_rule(*_X))
defzero(np.fix)  # piecewise constant, as `np.trunc`


# sinc'(x) = (cos(pi x) - sinc(x)) / x loses digits near 0; there its Maclaurin series
# takes over (odd powers to x^9: every derivative to order 10 is exact at 0), below
# |x| = (2000 eps)^(1/12) where both lose alike (0.09 in float64, 0.5 in float32).
_SINC_SERIES = [
    (-1) ** k * np.pi ** (2 * k) * 2 * k / math.factorial(2 * k + 1) for k in range(1, 6)
]


def _sinc_partial(ans: Any, x: Any) -> Any:
    small = np.abs(x) < (2000 * np.finfo(x.dtype).eps) ** (1 / 12)
    xs = np.where(small, x, 0)  # each branch only sees its own points (no 0/0, no overflow)
    safe = np.where(small, 1, x)
    x2 = xs * xs
    poly = _SINC_SERIES[-1]
    for c in _SINC_SERIES[-2::-1]:
        poly = poly * x2 + c
    return np.where(small, xs * poly, (np.cos(np.pi * safe) - ans) / safe)


defelementwise(np.sinc, _sinc_partial)


def _cephes_series(table: Any) -> Any:
    """A Cephes `chbevl` table as `numpy.polynomial.chebyshev` coefficients."""
    c = np.array(table[::-1], dtype=np.float64)
    c[0] /= 2
    return c


# NumPy's i0 is e^x A(x/4 - 1) on [0, 8] and e^x B(16/x - 1) / sqrt(x) above (Chebyshev
# series in Cephes' tables). Its derivative I1 from the same series, rearranged so that
# nothing cancels: x e^|x| P(|x|/4 - 1) on [0, 8] (A + A'/4 = (x/4 + ...) P: a division
# by 4 + 4 t), sign(x) e^|x| Q(16/|x| - 1) / sqrt|x| above (Q = B (1 - 1/2x) - 32/x^2 B').
@functools.cache
def _i1_series() -> tuple[list[Any], list[Any]]:
    """The coefficients of P and Q (computed on first use: `numpy.polynomial` is slow to
    import)."""
    import numpy.polynomial.chebyshev as cheb

    a, b = _cephes_series(_i0A), _cephes_series(_i0B)
    near = cheb.chebdiv(cheb.chebadd(a, cheb.chebder(a) / 4), [4.0, 4.0])[0].tolist()
    far = cheb.chebsub(
        cheb.chebmul(b, [31 / 32, -1 / 32]), cheb.chebmul(cheb.chebder(b), [1.5, 2.0, 0.5]) / 16
    ).tolist()
    return near, far


def _chebval(t: Any, c: list[Any]) -> Any:
    """`numpy.polynomial.chebyshev.chebval(t, c)` in NumPy calls (Clenshaw's recurrence)."""
    t2 = 2 * t
    b1, b2 = 0.0, 0.0
    for ck in c[:0:-1]:
        b1, b2 = ck + t2 * b1 - b2, b1
    return c[0] + t * b1 - b2


def _i0_partial(ans: Any, x: Any) -> Any:
    """I1(x), the derivative of I0."""
    ax = np.abs(x)
    near = ax <= 8.0
    xn = np.where(near, ax, 0.0)  # each series on its own interval (no 1/0, no overflow)
    xf = np.where(near, 16.0, ax)
    series_near, series_far = _i1_series()
    inner = x * np.exp(xn) * _chebval(xn / 4 - 1, series_near)
    outer = np.sign(x) * np.exp(xf) * _chebval(16 / xf - 1, series_far) / np.sqrt(xf)
    return np.where(near, inner, outer)


defbatch(np.i0, _operand_rule(*_X))
defelementwise(np.i0, _i0_partial)
defbatch(np.angle, _operand_rule((0, "z")))


def _angle_partial(ans: Any, z: Any, deg: bool = False) -> Any:
    """`-i/z`, the gradient of the angle as a real function of `z` (zero for real `z`)."""
    if z.dtype.kind != "c":
        return None
    d = -1j / z
    return d * (180 / np.pi) if deg else d


def _angle_jvp(t: Any, ans: Any, *args: Any, **kwargs: Any) -> Any:
    d = _angle_partial(ans, *args, **kwargs)
    return None if d is None else t * d


def _angle_vjp(ans: Any, *args: Any, **kwargs: Any) -> Callable[..., Any]:
    def pull(g: Any) -> Any:
        d = _angle_partial(ans, *args, **kwargs)
        return None if d is None else g * d

    return pull


defjvp(np.angle, _angle_jvp)
defvjp(np.angle, _angle_vjp)


def _nan_to_num_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    elementwise = _operand_rule(*_X, (2, "nan"), (3, "posinf"), (4, "neginf"))(func)

    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        x = get_arg(args, kwargs, 0, "x")
        fills = [get_arg(args, kwargs, p, n) for p, n in ((2, "nan"), (3, "posinf"), (4, "neginf"))]
        traced = [isinstance(unwrap(trace, f)[0], Tracer) for f in (x, *fills)]
        if traced[0] or not any(traced[1:]):
            return elementwise(trace, args, kwargs)
        # a plain array with fill values of an outer transform
        return _nan_to_num_where(trace, bcast_batch(trace, x), *fills)

    return rule


def _nan_to_num_where(trace: BatchTrace, v: Any, nan: Any, posinf: Any, neginf: Any) -> Any:
    """`nan_to_num` of a plain value with traced fill values (NumPy's version would
    write them into a plain array): the same replacements, by `np.where`."""
    if not np.issubdtype(v.dtype, np.inexact):
        return trace.wrap(v.copy())
    nd = v.ndim - 1
    nan, posinf, neginf = (_aligned_to(trace, f, nd) for f in (nan, posinf, neginf))
    info = np.finfo(v.real.dtype)
    posinf = info.max if posinf is None else posinf
    neginf = info.min if neginf is None else neginf

    def fix(d: Any) -> Any:
        d = np.where(
            np.isnan(d), nan, np.where(np.isposinf(d), posinf, np.where(np.isneginf(d), neginf, d))
        )
        return d.astype(v.real.dtype)

    if not np.issubdtype(v.dtype, np.complexfloating):
        return trace.wrap(fix(v))
    fixed = fix(v.real) + 1j * fix(v.imag)
    return trace.wrap(np.where(np.isfinite(v), v, fixed).astype(v.dtype))


def _aligned_to(trace: BatchTrace, x: Any, nd: int) -> Any:
    v, b = unwrap(trace, x)
    return align_rank(v, v.ndim - 1, nd) if b else x


defbatch(np.nan_to_num, _nan_to_num_rule)


def _nan_to_num(x: Any, copy: bool = True, nan: Any = 0.0, posinf: Any = None,
                neginf: Any = None) -> Any:  # fmt: skip
    """`np.nan_to_num` by `np.where` (differentiable in `x` and in the fill values)."""
    x = as_array(x)
    if not np.issubdtype(x.dtype, np.inexact):
        return np.copy(x)
    if np.iscomplexobj(x):
        real = _nan_to_num(np.real(x), nan=nan, posinf=posinf, neginf=neginf)
        return real + 1j * _nan_to_num(np.imag(x), nan=nan, posinf=posinf, neginf=neginf)
    big = np.finfo(x.dtype).max
    y = np.where(np.isnan(x), nan, x)
    y = np.where(np.isposinf(x), big if posinf is None else posinf, y)
    return astype(np.where(np.isneginf(x), -big if neginf is None else neginf, y), x.dtype)


defcomposite(np.nan_to_num, _nan_to_num)
defbatch(np.clip, _operand_rule((0, "a"), (1, "a_min"), (2, "a_max"), (None, "min"), (None, "max")))


def _clip(a: Any, a_min: Any = _ABSENT, a_max: Any = _ABSENT, out: Any = None, *,
          min: Any = _ABSENT, max: Any = _ABSENT, **kwargs: Any) -> Any:  # fmt: skip
    """`np.clip` as `minimum(maximum(a, lo), hi)`: ties share the derivative (JAX's)."""
    both = (a_min is not _ABSENT and min is not _ABSENT) or (
        a_max is not _ABSENT and max is not _ABSENT
    )
    if out is not None or both or set(kwargs) - {"dtype", "casting"}:
        return NotImplemented  # NumPy's errors, or writes we leave to NumPy
    lo, hi = (min if a_min is _ABSENT else a_min), (max if a_max is _ABSENT else a_max)
    y = a
    if lo is not _ABSENT and lo is not None:
        y = np.maximum(y, lo)
    if hi is not _ABSENT and hi is not None:
        y = np.minimum(y, hi)
    if y is a:
        y = np.copy(a)
    dtype = kwargs.get("dtype")
    return y if dtype is None else astype(y, dtype)


defcomposite(np.clip, _clip)
defbatch(np.isclose, _operand_rule((0, "a"), (1, "b"), (2, "rtol"), (3, "atol")))


def _nan_to_num_in_place(
    x: Any, copy: bool = True, nan: Any = 0.0, posinf: Any = None, neginf: Any = None
) -> Any:
    """`np.nan_to_num(x, copy=False)` writes into `x`: functionally when it is traced."""
    out = bind(primitive(np.nan_to_num), (x,), {"nan": nan, "posinf": posinf, "neginf": neginf})
    if not copy and isinstance(x, Tracer):
        return assign(x, out)
    return _scalars.mark(out)  # (a scalar where 0-d, as NumPy's)


IN_PLACE[np.nan_to_num] = _nan_to_num_in_place


def _real_if_close_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    """Each example is real where all its imaginary parts are close to zero: batched,
    the examples must agree (a later step computes otherwise on a real value than on a
    complex one), else the loop runs."""

    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        x, tol = args[0], get_arg(args, kwargs, 1, "tol", 100)
        v, nd = unwrap(trace, x)[0], example_ndim(trace, x)
        if not np.issubdtype(v.dtype, np.complexfloating) or v.shape[0] == 0:
            return x
        tol = np.finfo(v.dtype).eps * tol if tol > 1 else tol
        close = np.all(np.absolute(v.imag) < tol, axis=tuple(range(1, nd + 1)))
        if bool(np.all(close)):
            return trace.wrap(v.real)
        if not bool(np.any(close)):
            return x
        raise trace.concretization(
            "`np.real_if_close` gives a real result for some examples and a complex one for "
            "others (its type depends on the values)",
            "take `np.real(x)` where a real value is meant, or keep `x` complex",
        )

    return rule


defbatch(np.real_if_close, _real_if_close_rule, may_view=True)
defelementwise(np.real_if_close, 1)


# -- whole-array comparisons: one bool per example -------------------------------------


def _all_per_example(trace: BatchTrace, x: Any) -> Any:
    return trace.wrap(np.all(x, axis=tuple(range(1, x.ndim))))


def _allclose_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        names = ("a", "b", "rtol", "atol")
        present = [(p, n) for p, n in enumerate(names) if len(args) > p or n in kwargs]
        values = aligned_operands(trace, [get_arg(args, kwargs, p, n) for p, n in present])
        close = np.isclose(*values, equal_nan=get_arg(args, kwargs, 4, "equal_nan", False))  # type: ignore[call-overload]  # (two operands)
        return _scalars.mark_weak(_all_per_example(trace, close))  # (a Python bool)

    return rule


def _array_equal_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        a, b = get_arg(args, kwargs, 0, "a1"), get_arg(args, kwargs, 1, "a2")
        sa, sb = example_shape(trace, a), example_shape(trace, b)
        if func is np.array_equal and sa != sb:
            return False
        if func is np.array_equiv:
            try:
                np.broadcast_shapes(sa, sb)
            except ValueError:
                return False
        va, vb = aligned_operands(trace, (a, b))
        same = va == vb
        if get_arg(args, kwargs, 2, "equal_nan", False):
            if not all(np.dtype(_dtype(x)).kind in "iub" for x in (a, b)):
                same = same | (np.isnan(va) & np.isnan(vb))
        return _scalars.mark_weak(_all_per_example(trace, same))  # (a Python bool)

    return rule


def _dtype(x: Any) -> Any:
    return x.dtype if hasattr(x, "dtype") else np.asarray(x).dtype


defbatch(np.allclose, _allclose_rule)
defbatch([np.array_equal, np.array_equiv], _array_equal_rule)


# -- differences and other functions along an axis ---------------------------------------


def _diff_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        x = get_arg(args, kwargs, 0, "a")
        n, axis = get_arg(args, kwargs, 1, "n", 1), get_arg(args, kwargs, 2, "axis", -1)
        if is_batched(trace, n):
            return per_example(trace, func, args, kwargs, "with a batched `n`")
        if n == 0:  # NumPy returns its input itself
            return x
        nd, shape = example_ndim(trace, x), example_shape(trace, x)
        if nd == 0:
            raise ValueError("diff requires input that is at least one dimensional")
        axis = shift_one(axis, nd) - 1
        parts = [x]
        for side, name in ((0, "prepend"), (1, "append")):
            end = get_arg(args, kwargs, 3 + side, name, _ABSENT)
            if end is _ABSENT:
                continue
            if example_ndim(trace, end) == 0:  # a scalar becomes one slice along `axis`
                end = _broadcast_example(trace, end, shape[:axis] + (1,) + shape[axis + 1 :])
            parts.insert(len(parts) * side, end)
        v = join(trace, parts, axis, nd).val if len(parts) > 1 else unwrap(trace, x)[0]
        return trace.wrap(np.diff(v, n, axis=axis + 1))

    return rule


def _broadcast_example(trace: BatchTrace, x: Any, shape: tuple[Any, ...]) -> Any:
    """`np.broadcast_to(x, shape)` of one example, batched or not."""
    v, b = unwrap(trace, x)
    if not b:
        return np.broadcast_to(x, shape)
    return trace.wrap(batch_broadcast(trace, x, shape))


def batch_broadcast(trace: BatchTrace, x: Any, shape: tuple[Any, ...]) -> Any:
    """The value of `x` broadcast to `(batch, *shape)` (a view), batched or not."""
    v, b = unwrap(trace, x)
    if b:
        return np.broadcast_to(align_rank(v, v.ndim - 1, len(shape)), (v.shape[0], *shape))
    return np.broadcast_to(
        np.broadcast_to(moved(x, trace.like), shape)[None], (trace.axis_size, *shape)
    )


def _ediff1d_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        x = get_arg(args, kwargs, 0, "ary")
        flat = bcast_batch(trace, x)
        flat = flat.reshape(flat_shape(flat))
        dtype = flat.dtype
        diffs = trace.wrap(np.subtract(flat[:, 1:], flat[:, :-1]))
        ends = [get_arg(args, kwargs, p, name) for p, name in ((2, "to_begin"), (1, "to_end"))]
        if all(e is None for e in ends):
            return diffs
        parts = [diffs]
        for side, end in enumerate(ends):
            if end is None:
                continue
            if not np.can_cast(_dtype(end), dtype, casting="same_kind"):
                raise TypeError(
                    f"dtype of `{('to_begin', 'to_end')[side]}` must be compatible with "
                    "input `ary` under the `same_kind` rule."
                )
            end = promote(trace, end, (int(np.prod(example_shape(trace, end))),))
            parts.insert(0 if side == 0 else len(parts), end)
        return join(trace, parts, 0, 1, dtype=dtype, casting="unsafe")

    return rule


def _gradient_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        x, spacing = args[0], args[1:]
        if any(is_batched(trace, s) for s in spacing) or not is_batched(trace, x):
            return per_example(trace, func, args, kwargs, "with batched spacing")
        v, nd = unwrap(trace, x)[0], example_ndim(trace, x)
        axis = kwargs.get("axis")
        axis = tuple(axis) if isinstance(axis, list) else axis
        kwargs = {**kwargs, "axis": shift_axis(axis, nd)}
        return wrap_tree(trace, np.gradient(v, *spacing, **kwargs))

    return rule


def _cross_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        a, b = get_arg(args, kwargs, 0, "a"), get_arg(args, kwargs, 1, "b")
        axes = [
            get_arg(args, kwargs, p, n, -1) for p, n in ((2, "axisa"), (3, "axisb"), (4, "axisc"))
        ]
        axis = get_arg(args, kwargs, 5, "axis")
        axisa, axisb, axisc = (axis,) * 3 if axis is not None else axes
        nds = [example_ndim(trace, a), example_ndim(trace, b)]
        if 0 in nds:
            raise ValueError("At least one array has zero dimension")
        moved, dims = [], []
        for x, ax, nd in zip((a, b), (axisa, axisb), nds, strict=True):
            v, batched = unwrap(trace, x)
            if batched:
                v = np.moveaxis(v, shift_one(ax, nd), -1)
            else:
                v = np.moveaxis(x, ax, -1)
            dims.append(v.shape[-1])
            moved.append(trace.wrap(v) if batched else v)
        vals = aligned_operands(trace, moved)
        vector_out = not (dims[0] == 2 and dims[1] == 2)
        valid = dims[0] in (2, 3) and dims[1] in (2, 3)  # else NumPy raises below
        axisc = shift_one(axisc, max(nds) - 1 + vector_out) if vector_out and valid else -1
        return trace.wrap(np.cross(*vals, axisc=axisc))  # type: ignore[call-overload]  # (two operands)

    return rule


def _unwrap_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        x = args[0]
        if any(is_batched(trace, a) for a in (*args[1:], *kwargs.values())):
            return per_example(trace, func, args, kwargs, "with a batched `discont`/`period`")
        v, nd = unwrap(trace, x)[0], example_ndim(trace, x)
        args, kwargs = set_arg(
            (v, *args[1:]), kwargs, 2, "axis", shift_one(get_arg(args, kwargs, 2, "axis", -1), nd)
        )
        return trace.wrap(func(*args, **kwargs))

    return rule


def _bits_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    """`packbits`/`unpackbits`: `axis=None` works on the flattened example."""

    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        v, nd = unwrap(trace, args[0])[0], example_ndim(trace, args[0])
        axis = get_arg(args, kwargs, 1, "axis")
        if axis is None:
            v, axis, nd = v.reshape(flat_shape(v)), 0, 1
        args, kwargs = set_arg((v, *args[1:]), kwargs, 1, "axis", shift_one(axis, nd))
        return trace.wrap(func(*args, **kwargs))

    return rule


defbatch(np.diff, _diff_rule)


def _diff(a: Any, n: int = 1, axis: int = -1, prepend: Any = _ABSENT,
          append: Any = _ABSENT) -> Any:  # fmt: skip
    """`np.diff` as NumPy computes it: neighbouring slices subtracted, `n` times."""
    a = as_array(a)
    if n == 0:
        return a
    nd = a.ndim
    if n < 0 or nd == 0 or not -nd <= axis < nd:
        return NotImplemented  # NumPy's errors
    axis %= nd
    parts = [a]
    for side, end in enumerate((prepend, append)):
        if end is _ABSENT:
            continue
        end = as_array(end)
        if end.ndim == 0:  # a scalar becomes one slice along `axis`
            end = np.broadcast_to(end, a.shape[:axis] + (1,) + a.shape[axis + 1 :])
        parts.insert(len(parts) * side, end)
    if len(parts) > 1:
        a = np.concatenate(parts, axis)
    if a.dtype == np.bool_:
        return NotImplemented  # `not_equal`: nothing to differentiate
    lo, hi = ((slice(None),) * axis + (s,) for s in (slice(None, -1), slice(1, None)))
    for _ in range(n):
        a = np.subtract(a[hi], a[lo])
    return a


defcomposite(np.diff, _diff)
defbatch(np.ediff1d, _ediff1d_rule)


def _ediff1d(ary: Any, to_end: Any = None, to_begin: Any = None) -> Any:
    """`np.ediff1d`: differences of the flattened array between the ends (cast to its type)."""
    flat = np.ravel(as_array(ary))
    parts = [np.subtract(flat[1:], flat[:-1])]
    for side, end in enumerate((to_begin, to_end)):
        if end is None:
            continue
        end = as_array(end)
        if not np.can_cast(end.dtype, flat.dtype, casting="same_kind"):
            return NotImplemented  # NumPy's error
        parts.insert(len(parts) * side, astype(np.ravel(end), flat.dtype))
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


defcomposite(np.ediff1d, _ediff1d)


def _gradient(f: Any, *varargs: Any, axis: Any = None, edge_order: int = 1) -> Any:
    """`np.gradient` as NumPy computes it, each piece (interior, edges) by slices of `f`."""
    f = as_array(f)
    nd = f.ndim
    if axis is None:
        axes = tuple(range(nd))
    else:
        axes = tuple(axis) if isinstance(axis, list | tuple) else (axis,)
        if any(not -nd <= a < nd for a in axes) or len({a % nd for a in axes}) < len(axes):
            return NotImplemented  # NumPy's errors
        axes = tuple(a % nd for a in axes)
    spacing = _spacing(f, axes, varargs)
    kind = f.dtype.kind
    if spacing is None or edge_order not in (1, 2) or kind not in "fciu":
        return NotImplemented
    if kind in "iu":
        f = astype(f, np.float64)
    outs = []
    for ax, dx in zip(axes, spacing, strict=True):
        if f.shape[ax] < edge_order + 1:
            return NotImplemented
        outs.append(astype(_gradient_along(f, ax, dx, edge_order), f.dtype, copy=False))
    return outs[0] if len(outs) == 1 else tuple(outs)


def _spacing(f: Any, axes: tuple[Any, ...], varargs: tuple[Any, ...]) -> list[Any] | None:
    """NumPy's reading of the spacing arguments: a scalar, or the coordinate differences
    (a scalar again where they are all equal); None where NumPy raises."""
    if not varargs:
        return [1.0] * len(axes)
    if len(varargs) == 1 and np.ndim(varargs[0]) == 0:
        return list(varargs) * len(axes)
    if len(varargs) != len(axes):
        return None
    out = []
    for ax, d in zip(axes, varargs, strict=True):
        d = as_array(d)
        if d.ndim == 0:
            out.append(d)
            continue
        if d.ndim != 1 or len(d) != f.shape[ax]:
            return None
        if np.issubdtype(d.dtype, np.integer):
            d = astype(d, np.float64)
        dx = np.diff(d)
        out.append(dx[0] if bool(np.all(dx == dx[0])) else dx)
    return out


def _gradient_along(f: Any, ax: int, dx: Any, edge_order: int) -> Any:
    """The gradient along `ax`: central differences inside, one-sided ones at the ends."""

    def at(i: int, j: int | None = None) -> Any:  # f[i:j] along `ax`, the axis kept
        return f[(slice(None),) * ax + (slice(i, j),)]

    uniform = np.ndim(dx) == 0
    if uniform:
        inside = (at(2) - at(0, -2)) / (2.0 * dx)
    else:
        shape = [1] * f.ndim
        shape[ax] = -1
        dx1, dx2 = dx[:-1], dx[1:]
        a = np.reshape(-dx2 / (dx1 * (dx1 + dx2)), shape)
        b = np.reshape((dx2 - dx1) / (dx1 * dx2), shape)
        c = np.reshape(dx1 / (dx2 * (dx1 + dx2)), shape)
        inside = a * at(0, -2) + b * at(1, -1) + c * at(2)
    if edge_order == 1:
        first = (at(1, 2) - at(0, 1)) / (dx if uniform else dx[0])
        last = (at(-1) - at(-2, -1)) / (dx if uniform else dx[-1])
    else:
        if uniform:
            a, b, c = -1.5 / dx, 2.0 / dx, -0.5 / dx
        else:
            dx1, dx2 = dx[0], dx[1]
            a = -(2.0 * dx1 + dx2) / (dx1 * (dx1 + dx2))
            b = (dx1 + dx2) / (dx1 * dx2)
            c = -dx1 / (dx2 * (dx1 + dx2))
        first = a * at(0, 1) + b * at(1, 2) + c * at(2, 3)
        if uniform:
            a, b, c = 0.5 / dx, -2.0 / dx, 1.5 / dx
        else:
            dx1, dx2 = dx[-2], dx[-1]
            a = dx2 / (dx1 * (dx1 + dx2))
            b = -(dx2 + dx1) / (dx1 * dx2)
            c = (2.0 * dx2 + dx1) / (dx2 * (dx1 + dx2))
        last = a * at(-3, -2) + b * at(-2, -1) + c * at(-1)
    return np.concatenate([first, inside, last], axis=ax)


defbatch(np.gradient, _gradient_rule)
defcomposite(np.gradient, _gradient)
defbatch(np.cross, _cross_rule)


def _cross(a: Any, b: Any, axisa: int = -1, axisb: int = -1, axisc: int = -1,
           axis: int | None = None) -> Any:  # fmt: skip
    """`np.cross` as NumPy computes it, from the components of `a` and `b`."""
    if axis is not None:
        axisa = axisb = axisc = axis
    a, b = as_array(a), as_array(b)
    if a.ndim < 1 or b.ndim < 1 or not (-a.ndim <= axisa < a.ndim and -b.ndim <= axisb < b.ndim):
        return NotImplemented  # NumPy's errors
    a, b = np.moveaxis(a, axisa, -1), np.moveaxis(b, axisb, -1)
    na, nb = a.shape[-1], b.shape[-1]
    if na not in (2, 3) or nb not in (2, 3):
        return NotImplemented
    if 2 in (na, nb) and np.lib.NumpyVersion(np.__version__) >= "2.0.0":
        warnings.warn(
            "Arrays of 2-dimensional vectors are deprecated. Use arrays of "
            "3-dimensional vectors instead. (deprecated in NumPy 2.0)",
            DeprecationWarning,
            stacklevel=3,
        )
    dtype = np.promote_types(a.dtype, b.dtype)
    a, b = astype(a, dtype, copy=False), astype(b, dtype, copy=False)
    a0, a1, b0, b1 = a[..., 0], a[..., 1], b[..., 0], b[..., 1]
    z = a0 * b1 - a1 * b0
    if na == 2 and nb == 2:
        return z
    if na == 2:  # a2 = 0
        x, y = a1 * b[..., 2], -(a0 * b[..., 2])
    elif nb == 2:  # b2 = 0
        x, y = -(a[..., 2] * b1), a[..., 2] * b0
    else:
        a2, b2 = a[..., 2], b[..., 2]
        x, y = a1 * b2 - a2 * b1, a2 * b0 - a0 * b2
    nc = max(z.ndim + 1, 1)
    if not -nc <= axisc < nc:
        return NotImplemented
    return np.moveaxis(np.stack([x, y, z], axis=-1), -1, axisc)


defcomposite(np.cross, _cross)
defbatch(np.unwrap, _unwrap_rule)


def _unwrap_dp(t: Any, ans: Any, *args: Any, **kwargs: Any) -> Any:
    return t


def _unwrap_dperiod(t: Any, ans: Any, p: Any, *args: Any, period: Any, **kwargs: Any) -> Any:
    return t * ((ans - as_array(p)) / period)  # the number of periods added


_UNWRAP_ARGNUMS = (0, 1, "discont", "period")
defjvp(np.unwrap, _unwrap_dp, None, None, _unwrap_dperiod, argnums=_UNWRAP_ARGNUMS)
defvjp(
    np.unwrap,
    lambda ans, *args, **kwargs: lambda g: g,
    None,
    None,
    lambda ans, *args, **kwargs: lambda g: _unwrap_dperiod(g, ans, *args, **kwargs),
    argnums=_UNWRAP_ARGNUMS,
)
defbatch([np.packbits, np.unpackbits], _bits_rule)


# -- functions that apply a user's function --------------------------------------------


def _moveaxis(trace: BatchTrace, x: Any, src: Any, dst: Any) -> Any:
    """`np.moveaxis` of one example, batched or not, without marking `x` as a view."""
    v, b = unwrap(trace, x)
    if not b:
        return np.moveaxis(x, src, dst)
    return trace.wrap(np.moveaxis(v, shift_axis(src, v.ndim - 1), shift_axis(dst, v.ndim - 1)))


def _apply_along_axis_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    """`func1d` runs under `vmap` over every axis but `axis` (no loop); its outputs'
    axes take the place of `axis`, as in NumPy."""

    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        from .._api import vmap

        kwargs = dict(kwargs)
        fixed = [*args[:3], *(kwargs.pop(n) for n in ("func1d", "axis", "arr")[len(args) :])]
        (func1d, axis, arr), rest = fixed, args[3:]
        nd = example_ndim(trace, arr)
        axis = shift_one(axis, nd) - 1
        moved = _moveaxis(trace, arr, axis, -1)
        others = example_shape(trace, moved)[:-1]
        if 0 in others:
            raise ValueError("Cannot apply_along_axis when any iteration dimensions are 0")

        def along(row: Any) -> Any:
            return func1d(row, *rest, **kwargs)

        for _ in others:
            along = vmap(along, fallback=trace.fallback)
        out = along(moved)
        k = len(others)
        m = example_ndim(trace, out) - k
        return _moveaxis(trace, out, tuple(range(k, k + m)), tuple(range(axis, axis + m)))

    return rule


def _apply_over_axes_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    """NumPy's own steps, on the traced value (NumPy's version converts it first)."""

    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        f, a, axes = (get_arg(args, kwargs, i, n) for i, n in enumerate(("func", "a", "axes")))
        return _over_axes(f, a, axes, example_ndim(trace, a))

    return rule


def _over_axes(f: Callable[..., Any], a: Any, axes: Any, n: int) -> Any:
    """`np.apply_over_axes(f, a, axes)` for `a` of `n` axes, step by step as NumPy does."""
    val = a
    for axis in (axes,) if np.ndim(axes) == 0 else axes:
        axis = n + axis if axis < 0 else axis
        res = f(val, axis)
        if np.ndim(res) != np.ndim(val):
            res = np.expand_dims(res, axis)
            if np.ndim(res) != np.ndim(val):
                raise ValueError("function is not returning an array of the correct shape")
        val = res
    return val


defbatch(np.apply_along_axis, _apply_along_axis_rule)


def _apply_along_axis(
    func1d: Callable[..., Any], axis: int, arr: Any, *args: Any, **kwargs: Any
) -> Any:
    """`np.apply_along_axis` by `vmap` over the other axes: `func1d` is differentiated."""
    from .._api import vmap

    arr = as_array(arr)
    nd = arr.ndim
    if not -nd <= axis < nd:
        return NotImplemented  # NumPy's error
    axis %= nd
    moved = np.moveaxis(arr, axis, -1)
    others = moved.shape[:-1]
    if 0 in others:
        return NotImplemented

    def along(row: Any) -> Any:
        return func1d(row, *args, **kwargs)

    for _ in others:
        along = vmap(along)
    out = along(moved)
    k = len(others)
    m = np.ndim(out) - k
    return np.moveaxis(out, tuple(range(k, k + m)), tuple(range(axis, axis + m)))


defcomposite(np.apply_along_axis, _apply_along_axis)
defbatch(np.apply_over_axes, _apply_over_axes_rule)


def _apply_over_axes(func: Callable[..., Any], a: Any, axes: Any) -> Any:
    a = as_array(a)
    return _over_axes(func, a, axes, a.ndim)


defcomposite(np.apply_over_axes, _apply_over_axes)


def _piecewise_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    """Each function receives the selected elements of every example at once, as a
    batched 1-d array, when every example selects as many (always so for unbatched
    conditions); otherwise the call runs once per example."""

    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        x, condlist, funclist = args[:3]
        nd, shape = example_ndim(trace, x), example_shape(trace, x)
        conds = _conditions(trace, condlist, nd)
        if len(conds) == len(funclist) - 1:  # the "otherwise" condition
            other = conds[0]
            for c in conds[1:]:
                other = other | c
            conds.append(~other)
        elif len(conds) != len(funclist):
            n = len(conds)
            raise ValueError(f"with {n} condition(s), either {n} or {n + 1} functions are expected")
        counts: list[Any] = [_selected(trace, c) for c in conds]  # (ints, once None is ruled out)
        if None in counts or any(not callable(f) and np.ndim(f) for f in funclist):
            if own_impl(trace):  # the loop would call `np.piecewise`, which comes back here
                raise trace.concretization("`np.piecewise` by its rule", "")
            return per_example(
                trace,
                func,
                args,
                kwargs,
                "with conditions that select different numbers of elements per "
                "example (use `np.where` or `np.select` for elementwise "
                "functions)",
            )
        xv = bcast_batch(trace, x)
        y = np.zeros_like(xv)
        for cond, f, k in zip(conds, funclist, counts, strict=True):
            if callable(f) and not k:
                continue
            mask = batch_broadcast(trace, cond, shape)
            # a traced mask selects by position (indexing by it has a data-dependent shape)
            where = _positions(mask, k) if callable(f) and isinstance(mask, Tracer) else mask
            if callable(f):
                value = batch_broadcast(
                    trace, f(trace.wrap(_take(xv, where, k)), *args[3:], **kwargs), (k,)
                )
            else:
                value = batch_broadcast(trace, f, shape)
            if isinstance(value, Tracer) and not isinstance(y, Tracer):
                y = _traced_copy(y, value)
            if not callable(f) and isinstance(mask, Tracer):
                y = np.where(mask, value, y).astype(y.dtype)
            elif not callable(f):
                y[mask] = value[mask]
            else:
                y = _put(y, where, value)
        return trace.wrap(y)

    return rule


def _traced_copy(y: Any, like: Any) -> Any:
    """Plain `y` as a value of `like`'s transform, so that traced values can be written."""
    out = np.zeros_like(like, shape=y.shape, dtype=y.dtype)
    out[...] = y
    return out


def _positions(mask: Any, k: int) -> Any:
    """The flat indices (batch, k) of the `k` selected elements of each example, for
    traced masks (indexing with those would have a data-dependent shape)."""
    b, n = mask.shape[0], int(np.prod(mask.shape[1:], dtype=np.intp))
    flat = mask.reshape(b, n)
    slot = np.where(flat, np.cumsum(flat, axis=1) - 1, k)  # rank among the selected
    index = np.zeros_like(slot, shape=(b, k + 1))
    index[np.arange(b)[:, None], slot] = np.arange(n)
    return index[:, :k]


def _take(x: Any, where: Any, k: int) -> Any:
    """The selected elements of each example (batch, k): by mask, or by flat index."""
    b = x.shape[0]
    if where.dtype == bool:
        return x[where].reshape(b, k)
    return x.reshape(b, -1 if b else 0)[np.arange(b)[:, None], where]


def _put(y: Any, where: Any, values: Any) -> Any:
    """`y` with the selected elements set to `values` (batch, k)."""
    if where.dtype == bool:
        y[where] = values.reshape(-1)
        return y
    b = y.shape[0]
    flat = y.reshape(b, -1 if b else 0)
    flat[np.arange(b)[:, None], where] = values
    return flat.reshape(y.shape)


def _conditions(trace: BatchTrace, condlist: Any, nd: int) -> list[Any]:
    """`condlist` as a list of boolean conditions, with NumPy's reading of it."""
    if isinstance(condlist, Tracer):  # one example's array: a stack of conditions if 2-d+
        single = example_ndim(trace, condlist) < 2 and nd != 0
    else:
        first = None if np.isscalar(condlist) else condlist[0]
        single = first is None or (
            not (isinstance(first, list | Tracer) or is_array(first)) and nd != 0
        )
    conds = [condlist] if single else list(condlist)
    conds = [c if isinstance(c, Tracer) or is_array(c) else np.asarray(c) for c in conds]
    return [c if c.dtype == bool else astype(c, bool) for c in conds]


def _selected(trace: BatchTrace, cond: Any) -> int | None:
    """How many elements `cond` selects in each example, or None when examples differ."""
    c, b = unwrap(trace, cond)
    if not b:
        return int(np.count_nonzero(c))
    if c.shape[0] == 0:
        return 0
    counts = np.count_nonzero(c.reshape(flat_shape(c)), axis=1)
    return int(counts[0]) if bool(np.all(counts == counts[0])) else None


defbatch(np.piecewise, _piecewise_rule)


# the rule on a batch of one: it batches each function's call over the selected elements
defcomposite(np.piecewise, composite_by_rule(np.piecewise))
