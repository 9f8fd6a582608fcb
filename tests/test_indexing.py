"""`x[idx]` and `x[idx] = v` under vmap: hypothesis-generated indices against the loop."""

from __future__ import annotations

import os
import warnings
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import vmapx
from harness import check_vmap, loop_reference

# -- index expressions -----------------------------------------------------------------
#
# An index is a template: a tuple of components where ("B", j) stands for the j-th
# batched index array (an argument of the mapped function, one per example).


@st.composite
def index_case(draw: Any) -> tuple:
    """`(shape, template, batched_arrays, batch)`: one example's shape, an index
    template valid for it, and the batched index arrays (batch axis first)."""
    batch = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
    adv_shape = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    use_mask = draw(st.booleans()) and draw(st.booleans())
    comps: list = []
    batched: list = []
    axis = 0
    while axis < len(shape):
        n = shape[axis]
        kind = draw(st.sampled_from(["int", "slice", "array", "batched", "stop", "mask"]))
        if kind == "stop":
            break
        if kind == "int":
            comps.append(draw(st.integers(-n, n - 1)))
        elif kind == "slice":
            start = draw(st.none() | st.integers(-n - 1, n + 1))
            stop = draw(st.none() | st.integers(-n - 1, n + 1))
            step = draw(st.none() | st.sampled_from([1, 2, -1, -2]))
            comps.append(slice(start, stop, step))
        elif kind == "mask" and use_mask:
            k = draw(st.integers(1, len(shape) - axis))
            comps.append(np.array(draw(_bools(shape[axis : axis + k]))))
            use_mask = False
            axis += k - 1
        elif kind in ("array", "batched", "mask"):
            a_shape = _broadcastable(draw, adv_shape, use_mask)
            if kind == "batched":
                size = int(np.prod((batch, *a_shape)))
                vals = draw(st.lists(st.integers(-n, n - 1), min_size=size, max_size=size))
                batched.append(np.array(vals, dtype=np.intp).reshape(batch, *a_shape))
                comps.append(("B", len(batched) - 1))
            else:
                size = int(np.prod(a_shape))
                vals = draw(st.lists(st.integers(-n, n - 1), min_size=size, max_size=size))
                comps.append(np.array(vals, dtype=np.intp).reshape(a_shape))
        axis += 1
        if draw(st.integers(0, 5)) == 0:
            comps.append(None)
        if draw(st.integers(0, 9)) == 0:
            comps.append(draw(st.booleans()))
    if draw(st.booleans()):
        at = draw(st.integers(0, len(comps)))
        # Ellipsis stands for the full slices at its place
        comps.insert(at, Ellipsis)
    return shape, tuple(comps), batched, batch


def _bools(shape: tuple) -> Any:
    size = int(np.prod(shape))
    return st.lists(st.booleans(), min_size=size, max_size=size).map(
        lambda v: np.array(v, dtype=bool).reshape(shape)
    )


def _broadcastable(draw: Any, adv_shape: tuple, with_mask: bool) -> tuple:
    if with_mask:  # a mask broadcasts as (count,): keep the others of size 1
        return draw(st.sampled_from([(), (1,)]))
    cut = draw(st.integers(0, len(adv_shape)))
    return tuple(1 if draw(st.booleans()) else d for d in adv_shape[cut:])


def _index(template: tuple, arrays: tuple) -> tuple:
    return tuple(arrays[c[1]] if isinstance(c, tuple) else c for c in template)


def _valid(shape: tuple, template: tuple, batched: list) -> bool:
    """NumPy accepts the index structure (Ellipsis placement, broadcasting) for the
    first example; whether each example's values are in bounds is tested separately."""
    try:
        np.zeros(shape)[_index(template, tuple(b[0] for b in batched))]
    except IndexError:
        return False
    return True


def _check_or_same_error(f: Any, args: list, in_axes: tuple) -> None:
    """vmap equals the loop, or raises the error the loop raises."""
    try:
        loop_reference(f, args, in_axes)
    except (IndexError, ValueError) as e:
        with pytest.raises(type(e)) as got:
            vmapx.vmap(f, in_axes=in_axes)(*args)
        assert str(got.value) == str(e)
        return
    check_vmap(f, args, in_axes=in_axes)


def _quiet(f: Any) -> Any:
    """vmap `f` with the loop fallback silenced (for cases that may legitimately loop)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", vmapx.PerformanceWarning)
        return f()


_SETTINGS = settings(
    max_examples=int(os.environ.get("VMAPX_HYPOTHESIS_EXAMPLES", "100")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@_SETTINGS
@given(index_case())
def test_getitem_matches_loop(case: tuple) -> None:
    shape, template, batched, batch = case
    if not _valid(shape, template, batched):
        return
    x = np.arange(batch * int(np.prod(shape)), dtype=float).reshape(batch, *shape)

    def f(x: Any, *arrays: Any) -> Any:
        return x[_index(template, arrays)]

    _check_or_same_error(f, [x, *batched], (0,) * (1 + len(batched)))


@_SETTINGS
@given(index_case(), st.sampled_from(["scalar", "batched_scalar", "region", "batched_region"]))
def test_setitem_matches_loop(case: tuple, value_kind: str) -> None:
    shape, template, batched, batch = case
    if not _valid(shape, template, batched):
        return
    region = np.zeros(shape)[_index(template, tuple(b[0] for b in batched))].shape
    x = np.arange(batch * int(np.prod(shape)), dtype=float).reshape(batch, *shape)
    values = {
        "scalar": (np.float64(-1.0), None),
        "batched_scalar": (-np.arange(1.0, batch + 1), 0),
        "region": (-np.arange(1.0, 1 + np.prod(region)).reshape(region), None),
        "batched_region": (-np.arange(1.0, 1 + batch * np.prod(region)).reshape(batch, *region), 0),
    }
    value, v_axis = values[value_kind]

    def f(x: Any, v: Any, *arrays: Any) -> Any:
        x = x.copy()
        x[_index(template, arrays)] = v
        return x

    _check_or_same_error(f, [x, value, *batched], (0, v_axis) + (0,) * len(batched))


# -- hand-picked cases --------------------------------------------------------------------


def test_batched_int_in_every_position() -> None:
    x = np.arange(60.0).reshape(5, 3, 4)  # 5 examples of (3, 4)... and index arrays
    i = np.array([0, 2, 1, 0, 2])
    j = np.array([[3, 0], [1, 1], [2, 0], [0, 3], [1, 2]])
    check_vmap(lambda x, i: x[i], [x, i])
    check_vmap(lambda x, i: x[:, i], [x, j])
    check_vmap(lambda x, i, j: x[i, j], [x, i, j])
    check_vmap(lambda x, i, j: x[j, i], [x, i, j % 3])
    check_vmap(lambda x, i: x[None, ..., i], [x, j])
    check_vmap(lambda x, i: x[i, None, 1], [x, i])


def test_unmapped_traced_value_batched_index() -> None:
    """An outer-vmap value (unbatched for the inner vmap) indexed by an inner-batched
    index is a gather, not a loop."""
    tables = np.arange(24.0).reshape(2, 4, 3)
    idx = np.array([[0, 3], [2, 2], [1, 0]])
    got = vmapx.vmap(lambda t: vmapx.vmap(lambda i: t[i])(idx))(tables)
    np.testing.assert_array_equal(got, np.stack([t[idx] for t in tables]))


def test_plain_array_batched_index_loops() -> None:
    """`plain[batched]`: the value must leave its trace, so vmap loops and says so."""
    table = np.arange(12.0).reshape(4, 3)
    idx = np.array([0, 3, 1])
    with pytest.warns(vmapx.PerformanceWarning, match="re-runs the function"):
        got = vmapx.vmap(lambda i: table[i])(idx)
    np.testing.assert_array_equal(got, table[idx])


def test_index_from_outer_vmap() -> None:
    """An index array traced by an outer vmap indexes an inner-batched value."""
    x = np.arange(24.0).reshape(2, 3, 4)  # inner batch 2 of (3, 4)
    idx = np.array([[0, 2], [1, 1], [2, 0]])  # outer batch 3 of (2,)

    def inner(x: Any, i: Any) -> Any:
        return x[i, 1:]

    def outer(i: Any) -> Any:
        return vmapx.vmap(inner, in_axes=(0, None))(x, i)

    got = vmapx.vmap(outer)(idx)
    expected = np.stack([np.stack([xe[i, 1:] for xe in x]) for i in idx])
    np.testing.assert_array_equal(got, expected)

    def outer_set(i: Any) -> Any:
        def write(x: Any) -> Any:
            x = x.copy()
            x[i] = -1.0
            x[:, i[0]] = i[1]
            return x

        return vmapx.vmap(write)(x)

    expected = []
    for i in idx:
        rows = []
        for xe in x:
            xe = xe.copy()
            xe[i] = -1.0
            xe[:, i[0]] = i[1]
            rows.append(xe)
        expected.append(np.stack(rows))
    np.testing.assert_array_equal(vmapx.vmap(outer_set)(idx), np.stack(expected))


def test_value_from_outer_vmap() -> None:
    x = np.arange(24.0).reshape(2, 3, 4)
    vals = np.arange(3.0) * 10

    def outer(v: Any) -> Any:
        def write(x: Any) -> Any:
            x = x.copy()
            x[1, ::2] = v
            return x

        return vmapx.vmap(write)(x)

    expected = []
    for v in vals:
        y = x.copy()
        y[:, 1, ::2] = v
        expected.append(y)
    np.testing.assert_array_equal(vmapx.vmap(outer)(vals), np.stack(expected))


def test_batched_mask_getitem_loops_with_message() -> None:
    x = np.array([[1.0, -2.0, 3.0], [-1.0, -2.0, 3.0]])
    with pytest.warns(vmapx.PerformanceWarning, match="batched boolean mask"):
        got = vmapx.vmap(lambda x: np.sum(x[x > 0]))(x)
    np.testing.assert_array_equal(got, [4.0, 3.0])
    with pytest.raises(vmapx.errors.ConcretizationError, match="batched boolean mask"):
        vmapx.vmap(lambda x: x[x > 0], fallback="error")(x)


@pytest.mark.parametrize(
    "write",
    [
        lambda x, v: x.__setitem__(x > 0, 0.0),
        lambda x, v: x.__setitem__(x > 0, v),
        lambda x, v: x.__setitem__((Ellipsis, (x > 0)[0]), v),
        lambda x, v: x.__setitem__((slice(None), (x > 0)[0]), 7),
        lambda x, v: x.__setitem__((x > 0)[:, 0], v),
        lambda x, v: x.__setitem__((x > 0)[0, 0], v),
    ],
)
def test_batched_mask_setitem_scalar(write: Any) -> None:
    x = np.random.default_rng(0).normal(size=(4, 3, 3))

    def f(x: Any, v: Any) -> Any:
        x = x.copy()
        write(x, v)
        return x

    check_vmap(f, [x, np.arange(4.0)])
    check_vmap(f, [x, np.array(5.0)], in_axes=(0, None))
    check_vmap(f, [x, np.arange(4.0).reshape(4, 1)])


def test_full_mask_write_of_2d_value_raises_like_numpy() -> None:
    fixed = np.ones((3, 3), bool)

    def f(x: Any, v: Any, batched_mask: bool) -> Any:
        x = x.copy()
        x[x > 0 if batched_mask else fixed] = v
        return x

    x = np.ones((2, 3, 3))
    for batched_mask in (True, False):
        for v, v_axis in ((np.ones((2, 1, 1)), 0), (np.ones((1, 1)), None)):
            with pytest.raises(TypeError, match="requires a 0 or 1-dimensional input"):
                vmapx.vmap(f, in_axes=(0, v_axis, None))(x, v, batched_mask)


def test_batched_mask_setitem_int_target_casts_like_numpy() -> None:
    x = np.arange(12).reshape(3, 4)

    def f(x: Any) -> Any:
        x = x.copy()
        x[x % 2 == 0] = 2.7
        return x

    check_vmap(f, [x])


def test_batched_mask_setitem_array_loops() -> None:
    x = np.array([[1.0, -2.0, 3.0], [-1.0, -2.0, 3.0]])

    def f(x: Any) -> Any:
        x = x.copy()
        x[x > 0] = x[x > 0] * 2
        return x

    with pytest.warns(vmapx.PerformanceWarning):
        got = vmapx.vmap(f)(x)
    np.testing.assert_array_equal(got, loop_reference(f, [x], 0))


def test_zero_d_batched_int() -> None:
    x = np.arange(12.0).reshape(3, 4)
    i = np.array([3, -1, 0])
    check_vmap(lambda x, i: x[i], [x, i])
    check_vmap(lambda x, i: x[i, None], [x, i])

    def f(x: Any, i: Any) -> Any:
        x = x.copy()
        x[i] = 100.0
        return x

    check_vmap(f, [x, i])


def _errors(f: Any, args: list, in_axes: Any = 0) -> tuple:
    with pytest.raises(Exception) as got:  # noqa: B017 (the type is compared below)
        vmapx.vmap(f, in_axes=in_axes)(*args)
    with pytest.raises(Exception) as expected:  # noqa: B017
        loop_reference(f, args, in_axes)
    return got.value, expected.value


@pytest.mark.parametrize(
    "f, args",
    [
        (lambda x: x[3], [np.zeros((2, 3))]),
        (lambda x: x[:, -5], [np.zeros((2, 3, 4))]),
        (lambda x: x[0, 0, 0], [np.zeros((2, 3, 4))]),
        (lambda x: x[np.array([0, 4])], [np.zeros((2, 3))]),
        (lambda x: x[np.array([True, False])], [np.zeros((2, 3))]),
        (lambda x: x[np.array([0, 1]), np.array([0, 1, 2])], [np.zeros((2, 3, 4))]),
        (lambda x: x[..., ...], [np.zeros((2, 3))]),
        (lambda x, i: x[i], [np.zeros((3, 4)), np.array([0, 4, 1])]),
        (lambda x, i: x[:, i], [np.zeros((3, 2, 4)), np.array([[0, 1], [2, 4], [1, 1]])]),
        (lambda x: x[1.0], [np.zeros((2, 3))]),
        (lambda x, i: x[i], [np.zeros((3, 4)), np.array([0.0, 1.0, 1.0])]),
    ],
)
def test_index_errors_match_numpy(f: Any, args: list) -> None:
    got, expected = _errors(f, args)
    assert type(got) is type(expected)
    assert str(got) == str(expected)


@pytest.mark.parametrize(
    "index, value",
    [
        (5, 1.0),
        ((slice(None), np.array([0, 7])), 1.0),
        (np.array([True, False]), 1.0),
        (slice(0, 2), np.zeros(3)),
        (0, np.zeros((2, 4))),
    ],
)
def test_setitem_errors_match_numpy(index: Any, value: Any) -> None:
    def f(x: Any) -> Any:
        x = x.copy()
        x[index] = value
        return x

    got, expected = _errors(f, [np.zeros((2, 3, 4))])
    assert type(got) is type(expected)
    assert str(got) == str(expected)


def test_setitem_value_with_leading_ones() -> None:
    def f(x: Any, v: Any) -> Any:
        x = x.copy()
        x[0] = v
        return x

    x = np.zeros((3, 2, 4))
    check_vmap(f, [x, np.ones((3, 1, 1, 4))])
    check_vmap(f, [x, np.ones((1, 1, 4))], in_axes=(0, None))


def test_list_index_of_batched_scalars() -> None:
    x = np.arange(24.0).reshape(2, 3, 4)
    i = np.array([0, 2])
    j = np.array([1, 1])
    check_vmap(lambda x, i, j: x[[i, j], 0], [x, i, j])
    check_vmap(lambda x: x[[], 0], [x])


@pytest.mark.parametrize("target", ["copy", "plain zeros_like"])
def test_a_ufunc_with_out_and_where_keeps_out_off_the_mask(target):
    def f(x):
        o = x.copy() if target == "copy" else np.zeros_like(x)
        np.add(x, 100.0, out=o, where=x > 1)
        np.sin(x, out=o, where=x < 0.5)
        return o

    check_vmap(f, (np.linspace(-2.0, 3.0, 12).reshape(4, 3),))


def _flat_write(x):
    x = x.copy()
    x.flat[3] = -1.0
    return x


def _put_method(x):
    x = x.copy()
    x.put([0, 1], [5.0, 6.0])
    return x


@pytest.mark.parametrize(
    "f",
    [_flat_write, _put_method, lambda x: np.frombuffer(x.tobytes()), lambda x: x.strides[0]],
    ids=["flat", "put", "tobytes", "strides"],
)
def test_ndarray_memory_attributes_run_the_loop_and_methods_batch(f):
    x = np.arange(12.0).reshape(2, 6)
    if f is _put_method:
        check_vmap(f, (x,))  # batched: np.put has a rule
        return
    with pytest.warns(vmapx.PerformanceWarning, match="memory of an array"):
        got = vmapx.vmap(f)(x)
    np.testing.assert_array_equal(got, loop_reference(f, (x,), 0))
