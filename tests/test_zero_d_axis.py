"""Axis 0 or -1 of a 0-d example: NumPy lets a single integer 0 or -1 through on a 0-d
array for its ufunc reductions (no axis reduced) and for the functions that view a 0-d
array as 1-d (`argmax`, `cumsum`, `argsort`, `take`, `repeat`, ...); others raise its
AxisError. `vmap` over a batch of 0-d examples (NumPy scalars, or 0-d arrays) must do
exactly as the loop does: the same values, dtype and shape, or the same exception type."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import vmapx

# func(v, axis) for every function under test (each, with a 0-d `v`, either returns or
# raises as NumPy does: the tests read which from the loop itself)
OPS: dict[str, Callable[[Any, Any], Any]] = {
    "sum": lambda v, a: np.sum(v, axis=a),
    "prod": lambda v, a: np.prod(v, axis=a),
    "max": lambda v, a: np.max(v, axis=a),
    "min": lambda v, a: np.min(v, axis=a),
    "amax": lambda v, a: np.amax(v, axis=a),
    "amin": lambda v, a: np.amin(v, axis=a),
    "ptp": lambda v, a: np.ptp(v, axis=a),
    "any": lambda v, a: np.any(v, axis=a),
    "all": lambda v, a: np.all(v, axis=a),
    "argmax": lambda v, a: np.argmax(v, axis=a),
    "argmin": lambda v, a: np.argmin(v, axis=a),
    "nanargmax": lambda v, a: np.nanargmax(v, axis=a),
    "nanargmin": lambda v, a: np.nanargmin(v, axis=a),
    "nansum": lambda v, a: np.nansum(v, axis=a),
    "nanprod": lambda v, a: np.nanprod(v, axis=a),
    "nanmax": lambda v, a: np.nanmax(v, axis=a),
    "nanmin": lambda v, a: np.nanmin(v, axis=a),
    "nanmean": lambda v, a: np.nanmean(v, axis=a),
    "nanvar": lambda v, a: np.nanvar(v, axis=a),
    "nanstd": lambda v, a: np.nanstd(v, axis=a),
    "count_nonzero": lambda v, a: np.count_nonzero(v, axis=a),
    "take": lambda v, a: np.take(v, 0, axis=a),
    "take_list": lambda v, a: np.take(v, [0, -1, 0], axis=a),
    "cumsum": lambda v, a: np.cumsum(v, axis=a),
    "cumprod": lambda v, a: np.cumprod(v, axis=a),
    "nancumsum": lambda v, a: np.nancumsum(v, axis=a),
    "nancumprod": lambda v, a: np.nancumprod(v, axis=a),
    "argsort": lambda v, a: np.argsort(v, axis=a),
    "argpartition": lambda v, a: np.argpartition(v, 0, axis=a),
    "repeat": lambda v, a: np.repeat(v, 2, axis=a),
    "compress": lambda v, a: np.compress([True], v, axis=a),
    "squeeze": lambda v, a: np.squeeze(v, axis=a),
    "add.reduce": lambda v, a: np.add.reduce(v, axis=a),
    "maximum.reduce": lambda v, a: np.maximum.reduce(v, axis=a),
    "multiply.reduce": lambda v, a: np.multiply.reduce(v, axis=a),
    "logical_or.reduce": lambda v, a: np.logical_or.reduce(v, axis=a),
    "add.accumulate": lambda v, a: np.add.accumulate(v, axis=a),
    "add.reduceat": lambda v, a: np.add.reduceat(v, [0], axis=a),
    # NumPy raises for these (AxisError, or its own error for a 0-d operand)
    "mean": lambda v, a: np.mean(v, axis=a),
    "var": lambda v, a: np.var(v, axis=a),
    "std": lambda v, a: np.std(v, axis=a),
    "average": lambda v, a: np.average(v, axis=a),
    "sort": lambda v, a: np.sort(v, axis=a),
    "partition": lambda v, a: np.partition(v, 0, axis=a),
    "flip": lambda v, a: np.flip(v, axis=a),
    "roll": lambda v, a: np.roll(v, 1, axis=a),
    "median": lambda v, a: np.median(v, axis=a),
    "quantile": lambda v, a: np.quantile(v, 0.5, axis=a),
    "nanmedian": lambda v, a: np.nanmedian(v, axis=a),
    "norm": lambda v, a: np.linalg.norm(v, axis=a),
    "take_along_axis": lambda v, a: np.take_along_axis(v, np.zeros((), np.intp), axis=a),
    "moveaxis": lambda v, a: np.moveaxis(v, a, a),
    "diff": lambda v, a: np.diff(v, axis=a),
    # methods of the example
    "v.sum": lambda v, a: v.sum(a),
    "v.prod": lambda v, a: v.prod(a),
    "v.max": lambda v, a: v.max(axis=a),
    "v.min": lambda v, a: v.min(axis=a),
    "v.any": lambda v, a: v.any(a),
    "v.all": lambda v, a: v.all(a),
    "v.argmax": lambda v, a: v.argmax(a),
    "v.argmin": lambda v, a: v.argmin(axis=a),
    "v.cumsum": lambda v, a: v.cumsum(a),
    "v.cumprod": lambda v, a: v.cumprod(axis=a),
    "v.argsort": lambda v, a: v.argsort(a),
    "v.take": lambda v, a: v.take(0, axis=a),
    "v.repeat": lambda v, a: v.repeat(3, axis=a),
    "v.squeeze": lambda v, a: v.squeeze(a),
    "v.compress": lambda v, a: v.compress([True], axis=a),
    "v.mean": lambda v, a: v.mean(a),
    "v.var": lambda v, a: v.var(a),
    "v.std": lambda v, a: v.std(a),
}
if hasattr(np, "cumulative_sum"):  # NumPy 2: a 0-d array is viewed as 1-d
    OPS["cumulative_sum"] = lambda v, a: np.cumulative_sum(v, axis=a)
    OPS["cumulative_prod"] = lambda v, a: np.cumulative_prod(v, axis=a, include_initial=True)

AXES = [0, -1, 1, -2, (0,), None]

DATA = {
    "float64": np.array([2.5, -1.0, 0.0, 3.0, -0.0]),
    "float32": np.array([2.5, -1.0, 0.0, 3.0, 7.0], np.float32),
    "int64": np.array([3, -1, 0, 7, 2]),
    "int8": np.array([3, -1, 0, 7, 2], np.int8),
    "bool": np.array([True, False, True, True, False]),
    "complex128": np.array([1 + 2j, -1j, 0, 3, 2 - 1j]),
}

# 0-d examples as the loop sees them: NumPy scalars, or 0-d arrays (`v[...]`)
KINDS: dict[str, Callable[[Any], Any]] = {"scalar": lambda v: v, "array": lambda v: v[...]}


def _loop(f: Callable[[Any], Any], x: np.ndarray) -> Any:
    return np.stack([np.asarray(f(v)) for v in x])


def check(f: Callable[[Any], Any], x: np.ndarray, *, jit: bool = False) -> None:
    """`vmap(f)(x)` is the loop's result exactly (no per-example fallback), or raises
    the exception type the loop raises."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (NumPy's own warnings: the loop's, not vmap's)
        try:
            expected = _loop(f, x)
        except Exception as e:  # noqa: BLE001  # (any of NumPy's errors)
            error: type[BaseException] | None = type(e)
        else:
            error = None
    mapped = vmapx.jit(vmapx.vmap(f)) if jit else vmapx.vmap(f)
    if error is not None:  # (a fallback to the loop may raise it too)
        with warnings.catch_warnings(), pytest.raises(error):
            warnings.simplefilter("ignore")
            mapped(x)
        return
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a fallback to the loop warns: fail on it
        warnings.simplefilter("ignore", RuntimeWarning)  # (NumPy's, as in the loop)
        got = mapped(x)
    assert isinstance(got, np.ndarray)
    assert (got.shape, got.dtype) == (expected.shape, expected.dtype)
    np.testing.assert_array_equal(got, expected, strict=True)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("axis", AXES, ids=repr)
@pytest.mark.parametrize("name", OPS)
def test_float64(name: str, axis: Any, kind: str) -> None:
    op, as_kind = OPS[name], KINDS[kind]
    check(lambda v: op(as_kind(v), axis), DATA["float64"])


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("axis", [0, -1, (0,)], ids=repr)
@pytest.mark.parametrize("dtype", [d for d in DATA if d != "float64"])
@pytest.mark.parametrize("name", OPS)
def test_dtypes(name: str, dtype: str, axis: Any, kind: str) -> None:
    if name == "quantile" and dtype == "complex128":
        pytest.skip("NumPy's TypeError for complex comes before the axis: not an axis case")
    op, as_kind = OPS[name], KINDS[kind]
    check(lambda v: op(as_kind(v), axis), DATA[dtype])


NAN = np.array([np.nan, 1.0, -np.nan, 2.0])


@pytest.mark.parametrize("axis", [0, -1], ids=repr)
@pytest.mark.parametrize(
    "name",
    ["nansum", "nanprod", "nanmax", "nanmin", "nanmean", "nanvar", "nanstd", "nancumsum",
     "nancumprod", "max", "sum", "argmax", "argsort"],
)  # fmt: skip
def test_nan(name: str, axis: Any) -> None:
    op = OPS[name]
    check(lambda v: op(v, axis), NAN)


def test_all_nan_arg_raises_as_numpy() -> None:
    """NumPy's `nanargmax` of an all-NaN slice: its ValueError."""
    check(lambda v: np.nanargmax(v, axis=0), NAN)


@pytest.mark.parametrize("axis", [0, -1], ids=repr)
@pytest.mark.parametrize(
    "call",
    [
        lambda v, a: np.sum(v, axis=a, keepdims=True),
        lambda v, a: np.max(v[...], axis=a, keepdims=True),
        lambda v, a: np.argmax(v, axis=a, keepdims=True),
        lambda v, a: np.argmin(v[...], axis=a, keepdims=True),
        lambda v, a: np.nanargmax(v, axis=a, keepdims=True),
        lambda v, a: np.count_nonzero(v, axis=a, keepdims=True),
        lambda v, a: np.ptp(v, axis=a, keepdims=True),
        lambda v, a: np.nanvar(v, axis=a, keepdims=True),
        lambda v, a: np.nanmean(v, axis=a, keepdims=True, dtype=np.float32),
        lambda v, a: np.add.reduce(v, axis=a, keepdims=True),
        lambda v, a: np.sum(v, axis=a, dtype=np.float32),
        lambda v, a: np.prod(v, axis=a, dtype=np.complex64),
        lambda v, a: np.cumsum(v, axis=a, dtype=np.float32),
        lambda v, a: np.sum(v, axis=a, initial=5.0),
        lambda v, a: np.sum(v, axis=a, where=False),
        lambda v, a: np.max(v, axis=a, where=v > 0, initial=-1.0),
        lambda v, a: np.maximum.reduce(v, axis=a, where=False, initial=0.0),
        lambda v, a: np.max(v, axis=a, where=False),
        lambda v, a: np.add.reduce(v, axis=a, dtype=np.int16),
        lambda v, a: np.nanvar(v, axis=a, ddof=1),
        lambda v, a: np.take(v, 1, axis=a),
        lambda v, a: np.take(v, 5, axis=a, mode="wrap"),
        lambda v, a: np.take(v, [3, -3], axis=a, mode="clip"),
        lambda v, a: np.repeat(v, [3], axis=a),
        lambda v, a: np.repeat(v, 0, axis=a),
        lambda v, a: np.compress([False], v, axis=a),
        lambda v, a: np.compress([True, True], v, axis=a),
        lambda v, a: np.argpartition(v, 1, axis=a),
        lambda v, a: np.argsort(v, axis=a, kind="stable"),
        lambda v, a: np.sum(v, axis=np.int64(a)),
        lambda v, a: np.argmax(v, axis=np.int8(a)),
    ],
)
def test_arguments(call: Callable[[Any, Any], Any], axis: Any) -> None:
    check(lambda v: call(v, axis), DATA["float64"])


@pytest.mark.parametrize("axis", [0, -1, 1], ids=repr)
@pytest.mark.parametrize(
    "call",
    [
        lambda v, a: np.argsort(v),  # (NumPy's default axis -1)
        lambda v, a: np.argpartition(v, 0),
        lambda v, a: np.sort(v),
        lambda v, a: np.partition(v, 0),
        lambda v, a: v.argsort(),
        lambda v, a: np.sum(v * 2.0 + 1.0, axis=a) * 3.0,
        lambda v, a: np.cumsum(np.sin(v), axis=a) + np.max(v, axis=a),
    ],
)
def test_traced(call: Callable[[Any, Any], Any], axis: Any) -> None:
    check(lambda v: call(v, axis), DATA["float64"])


@pytest.mark.parametrize("axis", [0, -1], ids=repr)
def test_take_from_unbatched(axis: Any) -> None:
    """Batched indices into one 0-d table (`in_axes=None`) along its axis 0 or -1."""
    table = np.array(4.0)
    idx = np.array([0, -1, 0])
    expected = np.stack([np.take(table, i, axis=axis) for i in idx])
    got = vmapx.vmap(lambda t, i: np.take(t, i, axis=axis), in_axes=(None, 0))(table, idx)
    np.testing.assert_array_equal(got, expected, strict=True)


def test_batched_where() -> None:
    """A batched `where=` mask reduced along no axis."""
    x, mask = DATA["float64"], DATA["bool"]
    expected = np.stack([np.sum(v, axis=0, where=m) for v, m in zip(x, mask, strict=True)])
    got = vmapx.vmap(lambda v, m: np.sum(v, axis=-1, where=m))(x, mask)
    np.testing.assert_array_equal(got, expected, strict=True)


@pytest.mark.parametrize("axis", [0, -1, 1], ids=repr)
@pytest.mark.parametrize(
    "name", ["sum", "max", "argmax", "cumsum", "take", "argsort", "repeat", "squeeze",
             "add.reduce", "nanmean", "mean", "nanvar"],
)  # fmt: skip
def test_jit(name: str, axis: Any) -> None:
    op = OPS[name]
    check(lambda v: op(v, axis), DATA["float64"], jit=True)


# -- derivatives: a scalar example's axis 0 or -1 under `grad`, against finite differences


GRAD_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "sum": lambda v, a: np.sum(v**2, axis=a),
    "prod": lambda v, a: np.prod(v * 3.0, axis=a),
    "max": lambda v, a: np.max(v**3, axis=a),
    "amin": lambda v, a: np.amin(np.sin(v), axis=a),
    "ptp": lambda v, a: np.ptp(v, axis=a) + v,
    "nansum": lambda v, a: np.nansum(v**2, axis=a),
    "nanprod": lambda v, a: np.nanprod(v * v, axis=a),
    "nanmax": lambda v, a: np.nanmax(np.exp(v), axis=a),
    "nanmean": lambda v, a: np.nanmean(v**2, axis=a),
    "nanvar": lambda v, a: np.nanvar(v, axis=a) + v,
    "cumsum": lambda v, a: np.sum(np.cumsum(v**2, axis=a)),
    "cumprod": lambda v, a: np.sum(np.cumprod(v**2, axis=a)),
    "nancumsum": lambda v, a: np.sum(np.nancumsum(v**2, axis=a)),
    "nancumprod": lambda v, a: np.sum(np.nancumprod(v**2, axis=a)),
    "take": lambda v, a: np.take(v**2, 0, axis=a),
    "repeat": lambda v, a: np.sum(np.repeat(v**2, 3, axis=a)),
    "compress": lambda v, a: np.sum(np.compress([True], v**2, axis=a)),
    "squeeze": lambda v, a: np.squeeze(v**2, axis=a),
    "add.reduce": lambda v, a: np.add.reduce(v**2, axis=a),
    "multiply.reduce": lambda v, a: np.multiply.reduce(v**2, axis=a),
    "maximum.reduce": lambda v, a: np.maximum.reduce(v**2, axis=a),
    "argmax": lambda v, a: v * np.argmax(v, axis=a),
    "v.sum": lambda v, a: (v**2).sum(a),
    "v.cumsum": lambda v, a: (v**2).cumsum(a).sum(),
    "v.max": lambda v, a: (v**2).max(axis=a),
}
if hasattr(np, "cumulative_sum"):
    GRAD_OPS["cumulative_sum"] = lambda v, a: np.sum(
        np.cumulative_sum(v**2, axis=a, include_initial=True)
    )


def _finite_difference(f: Callable[[Any], Any], x: float, h: float = 1e-6) -> float:
    return float((f(x + h) - f(x - h)) / (2 * h))


@pytest.mark.parametrize("axis", [0, -1], ids=repr)
@pytest.mark.parametrize("name", GRAD_OPS)
def test_grad(name: str, axis: Any) -> None:
    op = GRAD_OPS[name]
    f = lambda v: op(v, axis)  # noqa: E731
    xs = np.array([0.7, -1.3, 2.1])
    expected = np.array([_finite_difference(f, x) for x in xs])
    grads = np.array([vmapx.grad(f)(x) for x in xs])
    np.testing.assert_allclose(grads, expected, rtol=1e-5, atol=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (no per-example fallback)
        batched = vmapx.vmap(vmapx.grad(f))(xs)
    assert batched.shape == xs.shape and batched.dtype == xs.dtype
    np.testing.assert_allclose(batched, grads, rtol=1e-12, atol=0)


@pytest.mark.parametrize("axis", [1, (0,)], ids=repr)
@pytest.mark.parametrize("name", ["sum", "max", "cumsum", "take", "squeeze", "add.reduce"])
def test_grad_raises_as_numpy(name: str, axis: Any) -> None:
    op = GRAD_OPS[name]
    f = lambda v: op(v, axis)  # noqa: E731
    with pytest.raises(Exception) as numpy_error:  # noqa: PT011  # (the loop's type, below)
        f(np.float64(0.7))
    with pytest.raises(numpy_error.type):
        vmapx.grad(f)(np.float64(0.7))
    with pytest.raises(numpy_error.type):
        vmapx.vmap(vmapx.grad(f))(np.array([0.7, 1.2]))


@pytest.mark.parametrize("name", ["mean", "var", "std", "v.mean", "median", "sort", "flip"])
def test_grad_counting_reductions_raise(name: str) -> None:
    """`mean`, `var`, `std`, ... count the elements along the axis: AxisError."""
    op = OPS[name]
    f = lambda v: np.sum(op(v, 0))  # noqa: E731
    with pytest.raises(np.exceptions.AxisError):
        f(np.float64(0.7))
    with pytest.raises(np.exceptions.AxisError):
        vmapx.grad(f)(np.float64(0.7))
