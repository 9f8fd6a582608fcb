"""Shapes, joins, creation and elementwise helpers beyond the op table: views, what
stays unbatched, NumPy's own errors, calls that must loop, and data-dependent dtypes."""

from __future__ import annotations

import contextlib
import warnings

import numpy as np
import pytest

import vmapx
from harness import check_vmap
from np_compat import NUMPY2, np2, requires_numpy2
from vmapx._batching import BatchTracer

rng = np.random.default_rng(0)
X = rng.uniform(-2, 2, (4, 3, 5))


# -- views and memory ------------------------------------------------------------------


@pytest.mark.parametrize(
    "f",
    [
        np.flip,
        np.fliplr,
        lambda x: np.rot90(x),
        lambda x: np.diagonal(x),
        lambda x: np2.matrix_transpose(x),
        lambda x: np.rollaxis(x, 1),
        lambda x: np.atleast_3d(x),
        lambda x: np.split(x, [1])[1],
        lambda x: np2.unstack(x)[2],
        lambda x: np.broadcast_arrays(x, np.ones((2, 1, 1)))[0],
        lambda x: np.diag(x[:, :3]),
    ],
)
def test_view_functions_return_views(f: object) -> None:
    """Batched as views of their input (no copy); the result `vmap` hands back is
    still the caller's own new array, as the loop's is."""
    views = []

    def g(v: BatchTracer) -> object:
        out = f(v)
        views.append(np.shares_memory(out.val, v.val))
        return out

    out = vmapx.vmap(g)(X)
    assert views == [True]
    assert not np.shares_memory(out, X)
    check_vmap(f, [X])


def _kinds(f: object, *args: object) -> list[bool]:
    """Which outputs of `f` are batched inside the vmap (x batched, y unbatched)."""
    seen: list[bool] = []

    def g(x: object, y: object) -> object:
        out = f(x, y)
        seen.extend(isinstance(o, BatchTracer) for o in out)
        return out

    vmapx.vmap(g, in_axes=(0, None))(*args)
    return seen


def test_unbatched_members_stay_unbatched() -> None:
    x, y = rng.uniform(size=(4, 3)), rng.uniform(size=2)
    assert _kinds(lambda x, y: np.meshgrid(x, y), x, y) == [True, False]
    assert _kinds(lambda x, y: np.meshgrid(x, y, sparse=True), x, y) == [True, False]
    assert _kinds(lambda x, y: np.broadcast_arrays(x[:, None], y), x, y) == [True, False]
    assert _kinds(lambda x, y: np.atleast_2d(x, y), x, y) == [True, False]


def test_block_of_unbatched_members_is_plain() -> None:
    calls = []

    def f(x: object, a: object) -> object:
        calls.append(np.block([[a, a], [a, a]]))  # no batched member: plain NumPy
        return np.block([[a, a], [x, x]])

    out = vmapx.vmap(f, in_axes=(0, None))(rng.uniform(size=(3, 2, 2)), np.ones((2, 2)))
    assert out.shape == (3, 4, 4) and type(calls[0]) is np.ndarray


def test_clip_with_batched_bounds_does_not_copy_the_array() -> None:
    big = rng.uniform(size=(100,))
    lo = rng.uniform(-1, 0, size=(5,))
    check_vmap(lambda lo, x: np.clip(x, lo, 0.5), [lo, big], in_axes=(0, None))


# -- NumPy's own errors, for one example ---------------------------------------------------


@pytest.mark.parametrize(
    ("f", "shape", "error", "match"),
    [
        (np.fliplr, (3,), ValueError, "Input must be >= 2-d"),
        (np.diag, (2, 2, 2), ValueError, "Input must be 1- or 2-d"),
        (np2.matrix_transpose, (3,), ValueError, "at least 2-dimensional"),
        (lambda x: np.vsplit(x, 1), (3,), ValueError, "vsplit only works on arrays of 2"),
        (lambda x: np.split(x, 2), (3,), ValueError, "equal division"),
        (lambda x: np.concatenate([x, x]), (), ValueError, "zero-dimensional"),
        (lambda x: np.concatenate([x, np.ones((2, 2))]), (2,), ValueError, "dimensions"),
        (lambda x: np2.unstack(x), (), ValueError, "at least 1-d"),
        (lambda x: np.block([x, [x]]), (2,), ValueError, "List depths are mismatched"),
        (lambda x: np.block((x, x)), (2,), TypeError, "is a tuple"),
        (lambda x: np.rot90(x, axes=(0, 0)), (2, 2), ValueError, "Axes must be different"),
        (lambda x: np.rollaxis(x, 0, 5), (2, 2), np.exceptions.AxisError, "start"),
        (lambda x: np.diagonal(x), (3,), ValueError, "at least two dimensions"),
        (lambda x: np.diff(x), (), ValueError, "at least one dimensional"),
        (lambda x: np.resize(x, (-1, 2)), (3,), ValueError, "non-negative"),
        (lambda x: np.cross(x, x), (4,), ValueError, "incompatible dimensions"),
        (lambda x: np.ediff1d(x, to_begin=np.ones(1)), (3,), TypeError, "same_kind"),
        (lambda x: np.pad(x, -1), (3,), ValueError, "negative"),
        (lambda x: np.flip(x, 2), (3, 3), np.exceptions.AxisError, "out of bounds"),
    ],
)
def test_errors_are_numpys(f: object, shape: tuple, error: type, match: str) -> None:
    x = np.ones((2, *shape), dtype=np.int64 if "same_kind" in match else np.float64)
    with pytest.raises(error, match=match):
        f(x[0])  # NumPy itself, for one example
    with pytest.raises(error, match=match):
        vmapx.vmap(f)(x)


# -- arguments that decide shapes: batched ones loop, with a warning ------------------------


@pytest.mark.parametrize(
    ("f", "args"),
    [
        (lambda x, r: np.tile(x, r), [X[:, 0], np.array([2, 2, 2, 2])]),
        (lambda x, r: np.repeat(x, r), [X[:, 0], np.array([2, 2, 2, 2])]),
        (lambda x, i: np.insert(x, i, 0.0), [X[:, 0], np.array([0, 1, 2, 3])]),
        (lambda x, i: np.delete(x, i), [X[:, 0], np.array([0, 1, 2, 3])]),
        (lambda x, i: np.split(x, i), [X[:, 0], np.array([[1], [1], [1], [1]])]),
        (lambda x, k: np.rot90(x, k), [X, np.array([0, 2, 4, 2])]),
        (lambda x, n: np.diff(x, n), [X[:, 0], np.array([2, 2, 2, 2])]),
        (
            lambda x: np.piecewise(x, [x < 0, x >= 0], [lambda v: -v, lambda v: 2 * v]),
            [X[:, 0]],
        ),
        (lambda x: np.pad(x, 1, mode=lambda v, w, i, kw: None), [X[:, 0]]),
    ],
)
def test_shape_arguments_that_are_batched_loop(f: object, args: list) -> None:
    with pytest.warns(vmapx.PerformanceWarning):
        check_vmap(f, args)


def test_piecewise_loop_names_the_fix() -> None:
    f = lambda x: np.piecewise(x, [x < 0], [lambda v: -v, lambda v: v])  # noqa: E731
    with pytest.warns(vmapx.PerformanceWarning, match="np.where"):
        vmapx.vmap(f)(X[:, 0])
    with pytest.raises(vmapx.errors.FallbackError, match="np.piecewise"):
        vmapx.vmap(f, fallback="error")(X[:, 0])


def test_ascontiguousarray_without_like_stays_batched() -> None:
    """NumPy converts the argument of these before any dispatch; while a vmap runs the
    converter passes the traced value through (see test_passthrough.py)."""
    check_vmap(lambda x: np.ascontiguousarray(x) * 2, [X])


# -- results whose dtype or kind depends on the data ----------------------------------------


@pytest.mark.parametrize("tiny", [(True, True), (False, False), (True, False)])
def test_real_if_close_gives_the_loops_dtype(tiny: tuple) -> None:
    z = rng.uniform(size=(2, 3)) + 1j * np.array([[1e-17], [1e-17]]) * rng.uniform(size=(2, 3))
    z[~np.array(tiny)] += 0.5j
    mixed = len(set(tiny)) > 1  # (each example's own type: the loop runs)
    with pytest.warns(vmapx.PerformanceWarning) if mixed else contextlib.nullcontext():
        out = check_vmap(np.real_if_close, [z])
    assert out.dtype == (np.float64 if all(tiny) else np.complex128)


def test_allclose_and_array_equal_give_bool_arrays() -> None:
    a = rng.uniform(size=(3, 4))
    b = a.copy()
    b[1] += 1.0
    for f in (np.allclose, np.array_equal, np.array_equiv):
        out = check_vmap(f, [a, b])
        assert out.dtype == np.bool_ and out.tolist() == [True, False, True]


# -- in-place functions ----------------------------------------------------------------------


def test_nan_to_num_in_place_writes_the_traced_value() -> None:
    def f(x: object) -> object:
        y = x * 1.0
        same = np.nan_to_num(y, copy=False)
        assert same is y
        return y

    check_vmap(f, [np.where(X > 1, np.nan, X)])


def test_fill_diagonal_into_a_view_loops() -> None:
    def f(x: object) -> object:
        y = x.copy()
        np.fill_diagonal(y[:2], 0.0)  # writes through a view of y
        return y

    with pytest.warns(vmapx.PerformanceWarning, match="view"):
        check_vmap(f, [X])


# -- functions that apply a user's function ---------------------------------------------------


def test_apply_along_axis_sees_batched_values_it_closes_over() -> None:
    w = rng.uniform(size=(4, 5))

    def f(x: object, w: object) -> object:
        return np.apply_along_axis(lambda r: np.sort(r * w) / r.sum(), 1, x)

    with warnings.catch_warnings():
        warnings.simplefilter("error", vmapx.PerformanceWarning)
        check_vmap(f, [X, w])
        check_vmap(f, [X, w[0]], in_axes=(0, None))


def test_apply_along_axis_keeps_the_error_mode() -> None:
    def f(x: object) -> object:
        return np.apply_along_axis(lambda r: r * float(r[0] > 0), 1, x)

    with pytest.raises(vmapx.errors.ConcretizationError):
        vmapx.vmap(f, fallback="error")(X)
    with pytest.warns(vmapx.PerformanceWarning):
        check_vmap(f, [X])


def test_apply_along_axis_rejects_empty_iteration_dims() -> None:
    with pytest.raises(ValueError, match="iteration dimensions are 0"):
        vmapx.vmap(lambda x: np.apply_along_axis(np.sum, 0, x))(np.ones((2, 3, 0)))


def test_writing_after_taking_a_view_gives_the_loops_answer() -> None:
    """The view sees the write in NumPy; vmap's writes are functional, so it loops."""

    def f(x: object) -> object:
        y = x.copy()
        d = np.diagonal(y)
        y[0, 0] = 5.0
        return d * 1.0

    with pytest.warns(vmapx.PerformanceWarning, match="view"):
        out = check_vmap(f, [X])
    assert (out[:, 0] == 5.0).all()


def test_diff_of_order_zero_is_its_input() -> None:
    def f(x: object) -> object:
        assert np.diff(x, 0) is x
        return x * 2

    check_vmap(f, [X])


@pytest.mark.parametrize(
    "f",
    [
        lambda x, s: np.roll(x, s),  # `int(shift)`: 1.7 -> 1, -1.5 -> -1
        lambda x, s: np.roll(x, s * 1e19, axis=0),  # (exact, however large)
        lambda x, s: np.roll(x, np.stack([s, -3 * s]), axis=(1, 1)),
        lambda x, s: np.roll(x, s.astype(np.float32) * 5, axis=-1),
        lambda x, s: np.roll(x, s > 0),
    ],
    ids=["float", "large", "summed", "float32", "bool"],
)
def test_roll_by_float_and_boolean_shifts_per_example(f) -> None:  # noqa: ANN001
    x = rng.normal(size=(4, 3, 5))
    s = np.array([-1.5, 0.2, 1.7, 2.99])
    if not NUMPY2 and any(_raises(f, *e) for e in zip(x, s, strict=True)):
        with warnings.catch_warnings():  # (NumPy 1.26 slices by a float shift: the loop)
            warnings.simplefilter("ignore", vmapx.PerformanceWarning)
            with pytest.raises(TypeError):
                vmapx.vmap(f)(x, s)
        return
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # batched: no loop
        check_vmap(f, [x, s])


def _raises(f, *args) -> bool:  # noqa: ANN001
    try:
        f(*args)
    except TypeError:
        return True
    return False


@requires_numpy2("np.roll by a float shift")
def test_roll_by_a_non_finite_shift_raises_as_the_loop_does() -> None:
    x = rng.normal(size=(3, 4))
    for bad, error in ((np.nan, ValueError), (np.inf, OverflowError)):
        s = np.array([1.0, bad, 2.0])
        with pytest.raises(error):
            np.roll(x[1], s[1])
        with pytest.warns(vmapx.PerformanceWarning), pytest.raises(error):
            vmapx.vmap(np.roll)(x, s)
