"""Cases adapted from PyTorch's functorch vmap tests (BSD-3-Clause).

Source: `test/functorch/test_vmap.py` in pytorch/pytorch (classes `TestVmapAPI`,
`TestVmapOperators`, `TestVmapBatchedGradient`, the manual tests of
`TestVmapOperatorsOpInfo` and `TestRandomness`), Copyright (c) Facebook, Inc. and its
affiliates, BSD-3-Clause.

How they map to NumPy:

- `torch.func.vmap(op, in_dims, out_dims)` is `vmapx.vmap(op, in_axes, out_axes)`; every
  case is written once as `build(vm)`, a function of the vmap implementation, and run both
  with `vmapx.vmap` and with `loop_vmap`, an explicit per-example loop
  (`np.stack([f(x) for x in X], axis=out_axes)`, nested loops where the case nests vmaps).
  Results must agree in container type, shape, dtype and values (exact for integers and
  booleans, up to rounding for floats), and the caller's arrays must be left unchanged.
- PyTorch operators become their NumPy counterparts: `diagonal` -> `np.diagonal`,
  `expand`/`expand_as` -> `np.broadcast_to`, `movedim` -> `np.moveaxis`, `narrow`/`slice`
  -> basic slicing, `select` -> integer indexing / `np.take`, `split`/`chunk`/
  `tensor_split` -> `np.split`/`np.array_split`, `cat` -> `np.concatenate`, `t`/`T`/
  `transpose` -> `.T`/`np.swapaxes`, `unfold` -> `sliding_window_view`, `unbind` ->
  iteration, `clamp` -> `np.clip`/`np.maximum`/`np.minimum`, `mm`/`mv`/`bmm`/`dot` ->
  `np.matmul`/`np.dot`, in-place ops (`Tensor.op_`) -> ufuncs with `out=` and augmented
  assignment, `fill_`/`zero_`/`copy_` -> `ndarray.fill`/`np.copyto`, `one_hot` ->
  comparison with `np.arange`, `torch.linalg` -> `np.linalg`, random ops -> methods of a
  `numpy.random.Generator` argument (`randomness=` as in functorch).
- PyTorch's error cases become checks that vmapx raises (a `vmapx.errors` error for bad
  `in_axes`/`out_axes`/batch sizes; the error NumPy's own loop raises for bad operands).

Tests that expose a defect are marked `xfail(strict=True)` with the defect in `reason`.
"""

from __future__ import annotations

import copy
import functools
import itertools
import warnings
from collections import OrderedDict, namedtuple

import numpy as np
import pytest
from numpy.lib.stride_tricks import as_strided, sliding_window_view

import vmapx
from vmapx import errors

pytestmark = [
    pytest.mark.filterwarnings("ignore::vmapx.PerformanceWarning"),
    pytest.mark.filterwarnings("ignore::vmapx.errors.KeywordArgumentWarning"),
]

B0, B1, B2 = 7, 11, 13


# --------------------------------------------------------------------------------------
# The reference: an explicit per-example loop with vmap's signature
# --------------------------------------------------------------------------------------


def _is_leaf(x):
    return not isinstance(x, (tuple, list, dict))


def _broadcast_axes(axes, tree):
    """Expand a pytree prefix of axes to the full structure of `tree`."""
    if axes is None or isinstance(axes, int):
        if _is_leaf(tree):
            return axes
        if isinstance(tree, dict):
            return {k: _broadcast_axes(axes, v) for k, v in tree.items()}
        return [_broadcast_axes(axes, v) for v in tree]
    if isinstance(tree, dict):
        assert isinstance(axes, dict) and set(axes) == set(tree), (axes, tree)
        return {k: _broadcast_axes(axes[k], tree[k]) for k in tree}
    assert isinstance(axes, (tuple, list)) and not _is_leaf(tree), (axes, tree)
    assert len(axes) == len(tree), (axes, tree)
    return [_broadcast_axes(a, t) for a, t in zip(axes, tree, strict=False)]


def _leaves(tree, axes):
    if _is_leaf(tree):
        return [(tree, axes)]
    if isinstance(tree, dict):
        return [p for k in tree for p in _leaves(tree[k], axes[k])]
    return [p for t, a in zip(tree, axes, strict=False) for p in _leaves(t, a)]


def _map(tree, axes, fn):
    if _is_leaf(tree):
        return fn(tree, axes)
    if isinstance(tree, dict):
        return type(tree)((k, _map(tree[k], axes[k], fn)) for k in tree)
    items = [_map(t, a, fn) for t, a in zip(tree, axes, strict=False)]
    if hasattr(tree, "_fields"):
        return type(tree)(*items)
    return type(tree)(items)


def _readonly(a):
    a = np.array(a, copy=True)
    a.flags.writeable = False
    return a


def loop_vmap(f, in_axes=0, out_axes=0, *, in_dims=None, out_dims=None, **_ignored):
    """The per-example loop that vmap promises to equal."""
    if in_dims is not None:
        in_axes = in_dims
    if out_dims is not None:
        out_axes = out_dims

    def run(*args, **kwargs):
        axes = in_axes
        if isinstance(axes, int) or axes is None:
            axes = (axes,) * len(args)
        axes = _broadcast_axes(tuple(axes), list(args))
        sizes = {
            np.shape(leaf)[ax]
            for leaf, ax in _leaves(list(args), axes)
            if ax is not None and isinstance(leaf, (np.ndarray, np.generic))
        }
        assert len(sizes) == 1, sizes
        (n,) = sizes

        def slicer(i):
            def one(leaf, ax):
                if not isinstance(leaf, (np.ndarray, np.generic)):
                    return leaf
                if ax is None:
                    return _readonly(leaf)
                # As `for x in X`: a 0-d example is a NumPy scalar, others f's own copy.
                v = np.moveaxis(np.asarray(leaf), ax, 0)[i]
                return v.copy() if isinstance(v, np.ndarray) else v

            return one

        if n == 0:
            # The loop has no example; its result's shape is that of any example.
            def dummy(leaf, ax):
                if not isinstance(leaf, (np.ndarray, np.generic)):
                    return leaf
                if ax is None:
                    return _readonly(leaf)
                shape = list(np.shape(leaf))
                del shape[ax]
                return np.zeros(shape, np.asarray(leaf).dtype)

            example = f(*_map(list(args), axes, dummy), **kwargs)
            outs = _broadcast_axes(out_axes, example)
            return _map(
                example,
                outs,
                lambda r, ax: (
                    r
                    if ax is None
                    else np.take(np.expand_dims(np.asarray(r), ax), np.arange(0), axis=ax)
                ),
            )

        results = [f(*_map(list(args), axes, slicer(i)), **kwargs) for i in range(n)]
        outs = _broadcast_axes(out_axes, results[0])

        def stack_at(path_results, ax):
            if ax is None:
                return path_results[0]
            return np.stack([np.asarray(r) for r in path_results], axis=ax)

        flat = [_leaves(r, outs) for r in results]
        stacked = iter(
            [
                stack_at([flat[i][j][0] for i in range(n)], flat[0][j][1])
                for j in range(len(flat[0]))
            ]
        )
        return _map(results[0], outs, lambda _r, _a: next(stacked))

    return run


# --------------------------------------------------------------------------------------
# Comparison
# --------------------------------------------------------------------------------------


def _tol(dtype):
    if dtype in (np.float32, np.complex64):
        return 2e-5
    if dtype == np.float16:
        return 2e-3
    return 1e-10


def assert_same(actual, expected, where="out"):
    if isinstance(expected, (np.ndarray, np.generic)):
        assert isinstance(actual, (np.ndarray, np.generic)), (where, type(actual))
        actual, expected = np.asarray(actual), np.asarray(expected)
        assert actual.shape == expected.shape, (where, actual.shape, expected.shape)
        assert actual.dtype == expected.dtype, (where, actual.dtype, expected.dtype)
        if expected.dtype.kind in "fc":
            rtol = _tol(expected.dtype)
            finite = np.abs(expected[np.isfinite(expected)])
            scale = max(1.0, float(np.max(finite, initial=0.0)))
            np.testing.assert_allclose(
                actual, expected, rtol=rtol, atol=rtol * scale, equal_nan=True, err_msg=where
            )
        else:
            np.testing.assert_array_equal(actual, expected, err_msg=where)
        return
    assert type(actual) is type(expected), (where, type(actual), type(expected))
    if isinstance(expected, dict):
        assert list(actual) == list(expected), where
        for k in expected:
            assert_same(actual[k], expected[k], f"{where}[{k!r}]")
    elif isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected), (where, len(actual), len(expected))
        for i, (a, e) in enumerate(zip(actual, expected, strict=False)):
            assert_same(a, e, f"{where}[{i}]")
    else:
        assert actual == expected, (where, actual, expected)


def _snapshot(args):
    return copy.deepcopy(args)


def _assert_unchanged(args, snap):
    for a, s in zip(args, snap, strict=False):
        if isinstance(s, np.ndarray):
            np.testing.assert_array_equal(a, s, err_msg="vmap wrote into its argument")
        elif isinstance(s, (tuple, list)):
            _assert_unchanged(a, s)
        elif isinstance(s, dict):
            _assert_unchanged(list(a.values()), list(s.values()))


def check(build, *args, **kwargs):
    """build(vm) -> function; compare vm=vmapx.vmap against vm=loop_vmap.

    Where the loop raises, vmap must raise the same kind of error (or a vmapx error)."""
    snap = _snapshot(args)
    try:
        with np.errstate(all="ignore"):
            expected = build(loop_vmap)(*copy.deepcopy(args), **kwargs)
    except Exception as loop_error:
        with pytest.raises(Exception) as info:
            with np.errstate(all="ignore"):
                build(vmapx.vmap)(*args, **kwargs)
        assert isinstance(info.value, (type(loop_error), errors.VmapxError)), (
            loop_error,
            info.value,
        )
        _assert_unchanged(args, snap)
        return None
    with np.errstate(all="ignore"):
        actual = build(vmapx.vmap)(*args, **kwargs)
    _assert_unchanged(args, snap)
    assert_same(actual, expected)
    return actual


def check_op(op, args, in_axes=0, out_axes=0):
    """PyTorch's `_vmap_test(op, inputs, in_dims, out_dims)`."""
    return check(lambda vm: vm(op, in_axes, out_axes), *args)


NUMPY2 = np.lib.NumpyVersion(np.__version__) >= "2.0.0"
# (NumPy 2's API: vecdot, matvec, vecmat, linalg.matmul, .mT, 64 dimensions, flat indexing
# by arrays of indices)
numpy2_only = pytest.mark.skipif(not NUMPY2, reason="NumPy 2's API")


def check_raises_like_loop(build, *args, exc=Exception):
    """The loop raises; vmap must raise too (never return a value)."""
    with pytest.raises(exc):
        build(loop_vmap)(*copy.deepcopy(args))
    with pytest.raises(exc):
        build(vmapx.vmap)(*args)


def rnd(*shape, dtype=np.float64, seed=0, low=None):
    g = np.random.default_rng(seed + sum(shape) * 7 + len(shape))
    if np.dtype(dtype).kind == "c":
        return (g.standard_normal(shape) + 1j * g.standard_normal(shape)).astype(dtype)
    if np.dtype(dtype).kind == "b":
        return g.random(shape) < 0.5
    if np.dtype(dtype).kind in "iu":
        return g.integers(-5 if np.dtype(dtype).kind == "i" else 0, 6, shape).astype(dtype)
    x = g.standard_normal(shape) if low is None else low + g.random(shape)
    return x.astype(dtype)


def rand(*shape, dtype=np.float64):
    return rnd(*shape, dtype=dtype, low=0.0)


def randp1(*shape, dtype=np.float64):
    return rnd(*shape, dtype=dtype, low=1.0)


def noncontig(x, axis=-1):
    """The same values as `x`, in a non-contiguous array."""
    big = np.repeat(np.expand_dims(x, axis), 2, axis=axis)
    idx = [slice(None)] * big.ndim
    idx[axis % big.ndim] = 1
    out = big[tuple(idx)]
    assert not out.flags.c_contiguous or out.size <= 1
    return out


# --------------------------------------------------------------------------------------
# TestVmapAPI
# --------------------------------------------------------------------------------------


def test_reference_loop_is_not_vacuous():
    # The comparison itself must catch a wrong value, shape or dtype.
    x = rnd(3, 2)
    with pytest.raises(AssertionError):
        assert_same(x.astype(np.float32), x)
    with pytest.raises(AssertionError):
        assert_same(x.T, x.copy().reshape(2, 3))
    with pytest.raises(AssertionError):
        assert_same(x + 1e-6, x)
    assert_same(loop_vmap(np.sum, out_axes=0)(x), x.sum(1))


def test_non_array_output_raises_or_matches_loop():
    # functorch: vmap(lambda x: 3.14) raises; NumPy's loop stacks the numbers.
    x = np.ones(3)
    try:
        out = vmapx.vmap(lambda x: 3.14)(x)
    except errors.OutputError:
        return
    assert_same(out, loop_vmap(lambda x: 3.14)(x))


def test_string_output_raises():
    with pytest.raises(errors.VmapxError):
        vmapx.vmap(lambda x: (x, "hello"))(np.ones(3))


@pytest.mark.parametrize(
    "call",
    [
        lambda: vmapx.vmap(np.multiply)(rnd(2), rnd(3)),
        lambda: vmapx.vmap(lambda z: z[0] + z[1], in_axes=((0, 0),))((rnd(2), rnd(3))),
        lambda: vmapx.vmap(lambda z: z["x"] + z["y"], in_axes=({"x": 0, "y": 0},))(
            {"x": rnd(2), "y": rnd(3)}
        ),
        lambda: vmapx.vmap(np.add, in_axes=(0, 1))(rnd(2, 3), rnd(3, 3)),
    ],
)
def test_different_map_dim_size_raises(call):
    with pytest.raises(errors.AxisSizeError):
        call()


def test_func_with_no_inputs():
    with pytest.raises(errors.VmapxError):
        vmapx.vmap(lambda: np.zeros(3))()
    with pytest.raises((errors.VmapxError, TypeError)):
        vmapx.vmap(lambda x: np.zeros(3))()


def test_func_with_no_arrays():
    with pytest.raises(errors.AxisSizeError):
        vmapx.vmap(lambda x: np.zeros(3), (None,))(1)
    with pytest.raises(errors.AxisSizeError):
        vmapx.vmap(lambda x: x, (None,))(np.ones(3))


def test_axis_size_without_mapped_inputs():
    out = vmapx.vmap(lambda x: x * 2, in_axes=None, axis_size=4)(np.arange(3))
    assert_same(out, np.stack([np.arange(3) * 2] * 4))


def test_constant_function():
    check(lambda vm: vm(lambda x: np.array(3.14)), np.ones(3))
    check(lambda vm: vm(lambda x: np.arange(3)), rnd(2, 3))


def test_constant_function_out_axes_none():
    out = vmapx.vmap(lambda x: np.arange(3), out_axes=None)(rnd(2, 3))
    assert_same(out, np.arange(3))


@pytest.mark.parametrize(
    "f",
    [
        lambda x: x * x,
        lambda x: (x * x, x * x * x),
        lambda x: (x, x),
        lambda x: [x, x],
        lambda x: [x],
        lambda x: {"a": x, "b": (x, [x + 1])},
    ],
)
def test_single_input_outputs(f):
    check(lambda vm: vm(f), rnd(2, 3))


def test_multiple_inputs():
    check(lambda vm: vm(np.multiply), rnd(2, 3), rnd(2, 3, seed=1))


def test_nested_with_same_map_dim():
    x, y = rnd(2, 3, 5), rnd(2, 3, 5, seed=1)
    check(lambda vm: vm(vm(np.multiply)), x, y)
    check(lambda vm: vm(vm(vm(np.multiply))), x, y)


def test_nested_with_diag_embed():
    check(lambda vm: vm(vm(np.diag)), rnd(3, 3, 5))


def test_nested_with_different_map_dim():
    x, y, z = rnd(2, 3), rnd(5, 3, seed=1), rnd(7, 3, seed=2)
    out = check(lambda vm: lambda x, y: vm(lambda x: vm(lambda y: x * y)(y))(x), x, y)
    assert out.shape == (2, 5, 3)
    out = check(
        lambda vm: lambda x, y, z: vm(lambda x: vm(lambda y: vm(lambda z: x * y * z)(z))(y))(x),
        x,
        y,
        z,
    )
    assert out.shape == (2, 5, 7, 3)


def test_noop_in_inner_vmap():
    x, y = rnd(3), rnd(5)
    out = check(lambda vm: lambda x, y: vm(lambda x: vm(lambda y: x)(y))(x), x, y)
    assert_same(out, np.broadcast_to(x[:, None], (3, 5)).copy())


def test_out_argument_into_batched_array():
    # functorch refuses `torch.abs(x, out=y)`; NumPy writes into f's own y.
    def out_op(x, y):
        np.abs(x, out=y)
        return y

    check(lambda vm: vm(out_op), rnd(2, 3), rnd(2, 3, seed=1))
    check(lambda vm: vm(out_op, in_axes=(1, 0)), rnd(3, 2), rnd(2, 3, seed=1))


def test_python_bool_output():
    # functorch: vmap(torch.equal) has no batching rule; the loop stacks Python bools.
    x = rnd(3, 4)
    y = x.copy()
    y[1, 2] += 1
    try:
        out = vmapx.vmap(np.array_equal)(x, y)
    except errors.OutputError:
        return
    assert_same(out, loop_vmap(np.array_equal)(x, y))


@pytest.mark.parametrize(
    "shape,out_axes",
    [((2, 3), 1), ((2, 3, 5, 7), 2), ((2, 3, 5, 7), -1), ((2, 3, 5, 7), -2), ((2, 3), -2)],
)
def test_nonzero_out_axes_identity(shape, out_axes):
    x = rnd(*shape)
    check(lambda vm: vm(lambda x: x, out_axes=out_axes), x)
    check(lambda vm: vm(lambda x: x * 1.5, out_axes=out_axes), noncontig(x))


@numpy2_only
def test_out_axes_all_outputs_and_64_dims():
    t, o = rnd(2, 3, 5, 7), rnd(2, 3, 5, 7, seed=1)
    check(lambda vm: vm(lambda x, y: (x, y), out_axes=2), t, o)
    x = rnd(*([2] + [1] * 63))
    out = vmapx.vmap(lambda x: x, out_axes=2)(x)
    assert out.shape == tuple([1, 1, 2] + [1] * 61)
    assert_same(out, np.moveaxis(x, 0, 2))
    check(lambda vm: vm(lambda x, y: (x, x * y, x * y * y), out_axes=1), rnd(2, 3, 5), rnd(2, 3, 5))


def test_multiple_out_axes():
    x, y = rnd(2, 3, 5), rnd(2, 3, 5, seed=1)
    check(lambda vm: vm(lambda x: (x, x), out_axes=(0, 1)), x)
    check(lambda vm: vm(lambda x, y: (x, x, x, x * y), out_axes=(-1, 0, 1, 2)), x, y)


def test_out_dims_alias():
    x = rnd(2, 3, 5)
    out = vmapx.vmap(lambda x: x * 2, in_dims=1, out_dims=2)(x)
    assert_same(out, loop_vmap(lambda x: x * 2, 1, 2)(x))


def test_nested_out_axes():
    y = rnd(2, 3, 5, 7)
    out = check(lambda vm: vm(lambda y: vm(lambda x: x, out_axes=1)(y)), y)
    assert out.shape == (2, 5, 3, 7)
    out = check(lambda vm: vm(lambda y: vm(lambda x: x, out_axes=1)(y), out_axes=1), y)
    assert out.shape == (5, 2, 3, 7)
    out = check(lambda vm: vm(lambda y: vm(lambda x: x, out_axes=-1)(y), out_axes=-1), y)
    assert out.shape == (5, 7, 3, 2)
    x, y = rnd(2, 3), rnd(5, 3, seed=1)
    out = check(
        lambda vm: lambda x, y: vm(lambda y: vm(lambda x: x * y, out_axes=1)(x), out_axes=-1)(y),
        x,
        y,
    )
    assert out.shape == (3, 2, 5)


def test_out_axes_single_element_tuple():
    x = rnd(2, 3)
    try:
        out = vmapx.vmap(lambda x: x, out_axes=(1,))(x)
    except errors.InAxesError:
        return
    assert_same(out, x.T.copy())


def test_out_axes_none_tuple():
    # functorch passes a non-array output with out_dims=None through; vmapx (as JAX)
    # refuses non-array outputs with a clear error.
    x = rnd(2, 3)
    try:
        out = vmapx.vmap(lambda x: (x, "hello world"), out_axes=(0, None))(x)
    except errors.OutputError:
        return
    assert out[1] == "hello world"
    assert_same(out[0], x)


def test_out_axes_none_on_batched_output_raises():
    with pytest.raises(errors.InAxesError):
        vmapx.vmap(lambda x: x, out_axes=None)(rnd(2, 3))
    with pytest.raises(errors.InAxesError):
        vmapx.vmap(lambda x: (x, x.sum()), out_axes=(0, None))(rnd(2, 3))
    # An output batched only by an enclosing vmap is unbatched for the inner one.
    check(lambda vm: vm(lambda x: vm(lambda y: x, out_axes=None)(x)), rnd(2, 3))
    with pytest.raises(errors.InAxesError):
        vmapx.vmap(lambda x: vmapx.vmap(lambda y: x * y, out_axes=None)(x))(rnd(2, 3))


def test_out_axes_none_unbatched_output():
    def foo(x):
        x += 1
        return np.arange(3.0)

    out = vmapx.vmap(foo, out_axes=None)(rnd(2, 3))
    assert_same(out, np.arange(3.0))


def test_pytree_returns():
    x = rnd(2, 3)
    check(lambda vm: vm(lambda x: (np.sin(x), (np.sin(x), np.sin(x)), [np.sin(x), (x, x)])), x)


def test_pytree_odict_returns():
    def f(t):
        return OrderedDict([("sin", np.sin(t)), ("cos", np.cos(t))])

    out = check(lambda vm: vm(f), rnd(2, 3))
    assert isinstance(out, OrderedDict)


def test_namedtuple_returns():
    Point = namedtuple("Point", ["x", "y"])
    out = check(lambda vm: vm(lambda x, y: Point(x=x, y=y)), rnd(2, 5), rnd(2, 3))
    assert isinstance(out, Point)


@pytest.mark.parametrize("out_axes", [(0, (0, 1)), 1, (0, 1), (1, (0, -1))])
def test_pytree_returns_out_axes(out_axes):
    check(lambda vm: vm(lambda x: (np.sin(x), (np.sin(x), x)), out_axes=out_axes), rnd(2, 3))


@pytest.mark.parametrize("out_axes", ["lol", ("lol",), 1.5, [0, "a"]])
def test_out_axes_must_be_int_or_collection(out_axes):
    with pytest.raises((errors.InAxesError, errors.ArgumentError)):
        vmapx.vmap(lambda x: x, out_axes=out_axes)(rnd(2, 3))


@pytest.mark.parametrize(
    "f,out_axes",
    [
        (lambda x: x, (0, 0)),
        (lambda x: (x, x, x), (0, 0, 0, 0)),
        (lambda x: (x, x), (0,)),
        (lambda x: (x, x, x), (0, 0)),
        (lambda x: {"a": x}, {"b": 0}),
    ],
)
def test_out_axes_and_num_outputs_mismatch(f, out_axes):
    with pytest.raises(errors.InAxesError):
        vmapx.vmap(f, out_axes=out_axes)(rnd(2, 3, 5))


@pytest.mark.parametrize("out_axes", [3, -4, 10])
def test_out_axis_out_of_bounds(out_axes):
    with pytest.raises(errors.InAxesError):
        vmapx.vmap(lambda x: x, out_axes=out_axes)(rnd(2, 3, 5))


def test_non_zero_in_axes():
    t = rnd(2, 3, 5)
    check(lambda vm: vm(lambda x: x, (1,)), t)
    x, y = rnd(2, 3), rnd(3, 2)
    check(lambda vm: vm(np.multiply, (0, 1)), x, y)
    check(lambda vm: vm(np.multiply, (1, 0)), y, x)


def test_none_in_axes():
    x, y = rnd(2, 3), rnd(2, 3, seed=1)
    out = check(lambda vm: vm(np.multiply, (0, None)), x, y)
    assert out.shape == (2, 2, 3)
    check(lambda vm: vm(np.multiply, (0, None)), x, 2)
    check(lambda vm: vm(np.multiply, (None, 0)), 2.5, x.astype(np.float32))


def test_nested_non_default_in_axes():
    x, y = rand(5, 2, 3), rand(3, 5, 2)
    check(lambda vm: vm(vm(vm(np.multiply), (1, 0)), (1, 2)), x, y)


def test_negative_in_axes():
    out = check(lambda vm: vm(np.multiply, (-1, -1)), rnd(2, 3), rnd(2, 3, seed=1))
    assert out.shape == (3, 2)
    check(lambda vm: vm(vm(np.multiply, (-1, -2)), (-3, 0)), rnd(4, 3, 2), rnd(4, 2, 3))


@pytest.mark.parametrize("in_axes,out_axes", [(1, 1), (2, 1), (0, 2), (-1, -1), (-2, 0)])
def test_non_default_in_axes_out_axes(in_axes, out_axes):
    x = rnd(2, 3, 5)
    check(lambda vm: vm(lambda x: x, in_axes=in_axes, out_axes=out_axes), x)
    check(lambda vm: vm(lambda x: x * 2, in_axes=in_axes, out_axes=out_axes), x)
    check(lambda vm: vm(vm(lambda x: x * 2, in_axes, 1), in_axes, out_axes), rnd(2, 3, 5, 4))


def test_item_falls_back_to_loop():
    check(lambda vm: vm(lambda x: x.item()), rnd(3))
    check(lambda vm: vm(lambda x: float(x) * np.ones(2)), rnd(3))


def test_data_dependent_control_flow():
    def f(x):
        if x:
            return x
        return 0

    check(lambda vm: vm(f), np.array([1.0, 0.0, 2.0]))
    check(lambda vm: vm(f), np.array([1.0, 3.0, 2.0]))

    def g(x):
        if x.sum() > 0:
            return x * 2
        return -x

    check(lambda vm: vm(g), rnd(6, 3))


def test_data_dependent_control_flow_error_mode():
    def f(x):
        if x:
            return x
        return x * 0

    with pytest.raises(errors.ConcretizationError):
        vmapx.vmap(f, fallback="error")(np.array([1.0, 0.0, 2.0]))


def test_accepts_nested_inputs():
    x, y = rnd(2, 3), rnd(2, 3, seed=1)
    for in_axes in [0, (0,), ((0, 0),)]:
        check(lambda vm, a=in_axes: vm(lambda z: z[0] + z[1], in_axes=a), (x, y))
    for in_axes in [0, (0,), ([0, 0],)]:
        check(lambda vm, a=in_axes: vm(lambda z: z[0] + z[1], in_axes=a), [x, y])
    for in_axes in [0, (0,), ({"x": 0, "y": 0},)]:
        check(lambda vm, a=in_axes: vm(lambda z: z["x"] + z["y"], in_axes=a), {"x": x, "y": y})
    check(
        lambda vm: vm(lambda z: z["x"][0] + z["x"][1][0] + z["y"][0] + z["y"][1]),
        {"x": [x, (x,)], "y": [y, y]},
    )
    check(
        lambda vm: vm(lambda z: z["x"][0] * z["y"], in_axes=({"x": [1, None], "y": None},)),
        {"x": [x.T.copy(), 3.0], "y": y[0]},
    )


def test_in_axes_list_is_accepted_like_tuple():
    # functorch refuses a list of in_dims; vmapx accepts it as the tuple.
    check(lambda vm: vm(np.multiply, [0, None]), rnd(3), rnd(3))


@pytest.mark.parametrize("in_axes", [{0}, "lol", 1.0, {"a": 0}])
def test_in_axes_wrong_type(in_axes):
    with pytest.raises((errors.InAxesError, errors.ArgumentError)):
        vmapx.vmap(np.multiply, in_axes)(rnd(3), rnd(3))


@pytest.mark.parametrize(
    "f,in_axes,args",
    [
        (np.multiply, (0,), (rnd(3), rnd(3))),
        (np.multiply, (0, 0, 0), (rnd(3), rnd(3))),
        (lambda z: z[0] + z[1], ([0],), ([rnd(3), rnd(3)],)),
        (lambda z: z[0] + z[1], ([0, 0, 0],), ([rnd(3), rnd(3)],)),
        (lambda z: z["a"], ({"b": 0},), ({"a": rnd(3)},)),
    ],
)
def test_not_enough_in_axes(f, in_axes, args):
    with pytest.raises(errors.InAxesError):
        vmapx.vmap(f, in_axes)(*args)


@pytest.mark.parametrize(
    "f,in_axes,args",
    [
        (np.sum, 0, (rnd(2, 3), 0)),
        (np.sum, (0, 0), (rnd(2, 3), 0)),
        (lambda z: z[0] + z[1], ([0, 0],), ([rnd(2, 3), 1],)),
        (lambda x, s: x * s, (0, 0), (rnd(2, 3), "ab")),
    ],
)
def test_integer_in_axis_for_non_array_input(f, in_axes, args):
    with pytest.raises(errors.InAxesError):
        vmapx.vmap(f, in_axes)(*args)


def test_none_in_axis_for_non_array_input():
    check(lambda vm: vm(np.sum, (0, None)), rnd(2, 3), 0)
    check(lambda vm: vm(lambda x, s: x.sum(axis=s), (0, None)), rnd(2, 3, 4), (0, 1))


@pytest.mark.parametrize(
    "in_axes,args",
    [
        (0, (np.float64(1.0),)),
        (0, (np.array(1.0),)),
        ((0,), (np.array(1.0),)),
        ((-3,), (rnd(2, 3),)),
        ((2,), (rnd(2, 3),)),
    ],
)
def test_in_axis_not_in_array(in_axes, args):
    with pytest.raises(errors.InAxesError):
        vmapx.vmap(lambda x: x * x, in_axes=in_axes)(*args)


def test_in_axis_not_in_array_nested():
    with pytest.raises(errors.InAxesError):
        vmapx.vmap(lambda z: z[0] + z[1], in_axes=([3, 0],))([rnd(2, 3), rnd(2, 3)])


@pytest.mark.parametrize("op", [np.copysign, np.arctan2, np.hypot, np.nextafter])
def test_binary_fallback_ops(op):
    check_op(op, (rnd(5, 7, 11), rnd(5, 7, 11, seed=1)))
    check_op(op, (rnd(7, 11, 5), rnd(5, 7, 11, seed=1)), in_axes=(2, 0))
    check(lambda vm: vm(vm(op), (2, 0)), rnd(7, 11, 5), rnd(5, 7, 11, seed=1))
    check(lambda vm: vm(vm(vm(op))), rnd(10, 3, 4, 5), rnd(10, 3, 4, seed=1))


@pytest.mark.parametrize("in_axes", [(0, None), (None, 0), 0])
def test_size_zero_batch(in_axes):
    # functorch refuses batches of size 0 in its fallback; the loop's result is empty.
    x = rnd(0, 11)
    y = rnd(11) if in_axes != 0 else rnd(0, 11)
    args = (y, x) if in_axes == (None, 0) else (x, y)
    for op in (np.copysign, np.multiply, lambda a, b: np.dot(a, b) + a.sum()):
        check_op(op, args, in_axes=in_axes)
    x, y = rnd(0, 3, 11), rnd(3, 11)
    check(lambda vm: vm(vm(np.copysign), (0, None)), x, y)
    check(lambda vm: vm(vm(np.copysign), (None, 1)), y, np.moveaxis(x, 0, 1))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.bool_, np.complex128])
def test_size_zero_and_one_batch_dtypes(dtype):
    for n in (0, 1):
        x = rnd(n, 3, dtype=dtype)
        check(lambda vm: vm(lambda v: v * 2), x)
        check(lambda vm: vm(lambda v: v.sum(), out_axes=0), x)
        check(lambda vm: vm(lambda v: np.stack([v, v]), in_axes=1, out_axes=-1), x.T.copy())


def test_fallback_multiple_returns():
    def var_mean(x):
        return np.var(x), np.mean(x)

    check(lambda vm: vm(var_mean), rnd(2, 10))
    check(lambda vm: vm(vm(var_mean)), rnd(2, 3, 10))
    check(lambda vm: vm(vm(vm(var_mean))), rnd(2, 3, 37, 10))


@pytest.mark.parametrize(
    "op",
    [
        lambda x: np.arccos(x, out=x),
        lambda x: np.sin(x, out=x),
        lambda x: x.__iadd__(1.5),
        lambda x: x.__imul__(x),
        lambda x: np.negative(x, out=x),
    ],
)
def test_inplace_unary(op):
    def f(x):
        op(x)
        return x

    x = rand(2, 5)
    check(lambda vm: vm(f), x)
    check(lambda vm: vm(f, out_axes=(1,) if False else 1), x)
    check(lambda vm: vm(vm(f)), rand(2, 3, 5))
    check(lambda vm: vm(vm(vm(f))), rand(2, 3, 50, 5))
    check(lambda vm: vm(vm(f, in_axes=1), in_axes=2), rand(3, 5, 2))


def test_inplace_nary_same_levels():
    def f(x, y):
        np.arctan2(x, y, out=x)
        return x

    check(lambda vm: vm(f, (2, 0)), rnd(7, 11, 5), rnd(5, 7, 11))
    check(lambda vm: vm(vm(f), (2, 0)), rnd(7, 11, 5), rnd(5, 7, 11))
    check(lambda vm: vm(vm(vm(f))), rnd(10, 3, 4, 5), rnd(10, 3, 4))


def test_inplace_nary_different_levels():
    def f(x, y):
        x += y
        return x

    x, y = rand(2, 7), rand(7)
    check(lambda vm: vm(f, in_axes=(0, None)), x, y)
    check(lambda vm: vm(vm(f, in_axes=(0, None))), rand(2, 3, 7), rand(2, 7))
    # Writing a batched value into an unmapped (read-only) argument is refused.
    with pytest.raises(ValueError):
        vmapx.vmap(f, in_axes=(None, 0))(rand(7), rand(2, 7))
    # functorch refuses the nested forms; in vmapx a mapped example is f's own value, so
    # the inner function may write into it a value batched by the outer vmap too.
    check(lambda vm: vm(vm(f, in_axes=(0, None)), in_axes=(None, 0)), rand(3, 7), rand(2, 7))
    check(lambda vm: vm(vm(f, in_axes=(0, None)), in_axes=(None, 1)), rand(3, 7), rand(7, 2))
    # x is the outer vmap's own example but unmapped by the inner one: either refused (as
    # at one level) or the literal loop, where every inner example updates the same x.
    x, y = rand(2, 7), rand(2, 3, 7)
    try:
        out = vmapx.vmap(vmapx.vmap(f, in_axes=(None, 0)))(x, y)
    except ValueError:
        return
    shared = x + y.sum(1)
    assert_same(out, np.stack([np.stack([s] * 3) for s in shared]))


def test_inplace_into_value_of_smaller_batch():
    # x is batched by the inner vmap only; y by both.
    def f(x, y):
        x += y
        x[0] = y[1]
        return x

    check(lambda vm: vm(vm(f), in_axes=(None, 0)), rand(3, 7), rand(2, 3, 7))
    check(lambda vm: vm(vm(f, in_axes=(1, 0)), in_axes=(None, 2)), rand(7, 3), rand(3, 7, 2))


def test_batched_gradient_basic():
    n = 3
    x, y = rnd(n), rnd(n, seed=1)
    _, vjp_fn = vmapx.vjp(lambda x: x * y, x)
    jac = vmapx.vmap(vjp_fn)(np.eye(n))[0]
    assert_same(jac, np.diag(y))


def test_functools_partial():
    x, y = rnd(3), rnd(2, 3)
    check(lambda vm: vm(functools.partial(np.multiply, x)), y)
    check(lambda vm: vm(functools.partial(np.sum, axis=0)), rnd(2, 3, 4))


def test_batch_rule_with_no_batched_input():
    def f(x, y):
        res = np.dot(y, np.ones(2))
        return x + res

    check(lambda vm: vm(vm(f, in_axes=(0, None)), in_axes=(None, 0)), rnd(7, 5), rnd(3, 2, seed=1))


def test_escaped_tracer():
    escaped = []

    def f(x):
        escaped.append(x)
        return x**2

    vmapx.vmap(f)(rnd(3, 3))
    with pytest.raises(errors.EscapedTracerError):
        np.sin(escaped[0])
    with pytest.raises(errors.EscapedTracerError):
        escaped[0] + 1


# --------------------------------------------------------------------------------------
# TestVmapOperators
# --------------------------------------------------------------------------------------


def _test_unary(op, getter, dtype=np.float64):
    """PyTorch's `_test_unary`: single and doubly nested vmaps, various in/out axes."""
    g = functools.partial(getter, dtype=dtype)
    check_op(op, (g(B0, 3),))
    check_op(op, (g(2, 5, B0, 3),), in_axes=2)
    check_op(op, (g(2, 5, B0, 3),), in_axes=2, out_axes=2)
    check_op(op, (noncontig(g(2, 5, B0, 3)),), in_axes=-2, out_axes=-1)
    check(lambda vm: vm(vm(op)), g(B0, B1))  # 0-d examples (NumPy scalars in the loop)
    check(lambda vm: vm(vm(op), in_axes=2), g(B1, 2, 5, B0, 3))
    check(lambda vm: vm(vm(op, in_axes=2), in_axes=2, out_axes=2), g(2, 5, B0, B1, 3))


UNARY = [
    (np.abs, rnd),
    (np.arccos, rand),
    (np.arcsin, rand),
    (np.arctan, rand),
    (np.ceil, rnd),
    (np.cos, rand),
    (np.cosh, rand),
    (np.exp, rnd),
    (np.expm1, rnd),
    (np.floor, rnd),
    (lambda x: np.modf(x)[0], rnd),
    (np.log, randp1),
    (np.log10, randp1),
    (np.log1p, randp1),
    (np.log2, randp1),
    (np.negative, rnd),
    (np.reciprocal, randp1),
    (lambda x: np.maximum(x, 0), rnd),
    (np.round, rnd),
    (lambda x: 1 / np.sqrt(x), randp1),
    (lambda x: 1 / (1 + np.exp(-x)), rnd),
    (np.sign, rnd),
    (np.sin, rand),
    (np.sinh, rand),
    (np.sqrt, rand),
    (np.tan, rand),
    (np.tanh, rand),
    (np.trunc, rnd),
    (np.copy, rnd),
    (np.ascontiguousarray, rnd),
    (lambda x: x.copy(order="F"), rnd),
    (np.conj, rnd),
    (np.isnan, rnd),
    (np.isfinite, rnd),
    (np.signbit, rnd),
    (np.square, rnd),
    (np.cbrt, rnd),
    (np.rint, rnd),
    (np.fix, rnd),
    (np.degrees, rnd),
    (np.spacing, rnd),
]


@pytest.mark.parametrize("op,getter", UNARY, ids=lambda c: getattr(c, "__name__", None))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_unary_pointwise(op, getter, dtype):
    _test_unary(op, getter, dtype)


_INPLACE_UFUNCS = [np.abs, np.arccos, np.sin, np.exp, np.floor, np.sqrt, np.negative, np.tanh]


@pytest.mark.parametrize("ufunc", _INPLACE_UFUNCS, ids=lambda u: u.__name__)
def test_unary_pointwise_inplace(ufunc):
    def op(x):
        ufunc(x, out=x)
        return x

    _test_unary(op, rand)

    def op_view(x):
        v = x[..., ::2]
        ufunc(v, out=v)
        return x

    _test_unary(op_view, rand)


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_conj(dtype):
    _test_unary(np.conj, rnd, dtype)
    _test_unary(np.conjugate, rnd, dtype)
    _test_unary(lambda x: x.conj(), rnd, dtype)


def test_weird_matmul_case():
    check(lambda vm: vm(vm(np.matmul, in_axes=(None, 0))), rnd(5, 2, 2, 2), rnd(5, 7, 2))


@pytest.mark.parametrize("which", ["min", "max"])
def test_clamp_inplace_variant(which):
    ufunc = np.maximum if which == "min" else np.minimum

    def op(x, y):
        ufunc(x, y, out=x)
        return x

    check_op(op, (rnd(B0, 3), rnd(B0, 3, seed=1)))
    check_op(op, (rnd(B0), rnd(B0, seed=1)))
    check_op(op, (rnd(2, B0, 3), rnd(2, B0, 3, seed=1)), in_axes=(1, 1))
    check_op(op, (rnd(B0, 2, 3), rnd(2, B0, 3, seed=1)), in_axes=(0, 1), out_axes=1)
    check_op(op, (rnd(B0, 2, 3), rnd(1, 1, seed=1)), in_axes=(0, None))
    check(lambda vm: vm(vm(op)), rnd(B0, B1, 2, 3), rnd(B0, B1, 1, 3, seed=1))
    number = float(rnd(1)[0])
    _test_unary(lambda t: op(t, number), rnd)


@pytest.mark.parametrize("op", [np.maximum, np.minimum, np.fmax, np.fmin])
def test_clamp_variant(op):
    check_op(op, (rnd(B0, 3), rnd(B0, 3, seed=1)))
    check_op(op, (rnd(B0), rnd(B0, 2, 3, seed=1)))
    check_op(op, (rnd(B0), rnd(2, B0, 3, seed=1)), in_axes=(0, 1))
    check_op(op, (rnd(B0), rnd(2, B0, 3, seed=1)), in_axes=(0, 1), out_axes=1)
    check_op(op, (rnd(B0), rnd(2, 3, seed=1)), in_axes=(0, None))
    check_op(op, (rnd(2, 3), rnd(B0, 3, seed=1)), in_axes=(None, 0))
    check(lambda vm: vm(vm(op)), rnd(B0, B1, 2, 3), rnd(B0, B1, 3, seed=1))
    check(
        lambda vm: vm(vm(op, in_axes=(None, 0)), in_axes=(0, None)),
        rnd(B0, 2, 3),
        rnd(B1, 3, seed=1),
    )
    number = float(rnd(1)[0])
    _test_unary(lambda t: op(t, number), rnd)


@pytest.mark.parametrize(
    "op",
    [
        lambda t: np.clip(t, -0.5, None),
        lambda t: np.clip(t, None, 0.5),
        lambda t: np.clip(t, -0.5, 0.5),
        lambda t: t.clip(min=-0.5),
        lambda t: t.clip(max=0.5),
        lambda t: np.clip(t, -0.5, 0.5, out=t),
    ],
)
def test_clamp(op):
    _test_unary(op, rnd)


def test_clip_with_batched_bounds():
    check_op(np.clip, (rnd(B0, 3), rnd(B0, 1, seed=1) - 1, rnd(B0, 3, seed=2) + 1))
    check_op(np.clip, (rnd(B0, 3), rnd(3) - 1, rnd(B0, seed=2) + 1), in_axes=(0, None, 0))
    check_op(np.clip, (rnd(3), rnd(B0, 3) - 1, 0.5), in_axes=(None, 0, None))
    check_op(np.clip, (rnd(3, B0, dtype=np.float32), -0.5, rnd(B0)), in_axes=(1, None, 0))
    check_op(np.clip, (rnd(B0, 3, dtype=np.int64), -1, rnd(B0, dtype=np.int64)), (0, None, 0))


def test_copyto():
    def op(x, y):
        np.copyto(x, y)
        return x

    check_op(op, (rnd(B0, 3), rnd(B0, 3, seed=1)))
    check_op(op, (rnd(3, 2), rnd(3, seed=1)), in_axes=(1, None))
    check_op(op, (rnd(B0, 2, 3), rnd(B0, 3, seed=1)))
    check_op(op, (rnd(B0, 3), rnd(B0, 3, dtype=np.int64)))
    with pytest.raises(ValueError):
        vmapx.vmap(op, in_axes=(None, 0))(rnd(3), rnd(2, 3))

    def op_where(x, y, m):
        np.copyto(x, y, where=m)
        return x

    check_op(op_where, (rnd(B0, 3), rnd(B0, 3, seed=1), rnd(B0, 3, dtype=np.bool_)))
    check_op(op_where, (rnd(B0, 3), rnd(3, seed=1), rnd(B0, 3, dtype=np.bool_)), (0, None, 0))


ARITH = [
    (np.add, rnd),
    (lambda x, y: x + y, rnd),
    (np.subtract, rnd),
    (lambda x, y: x - y, rnd),
    (np.multiply, rnd),
    (lambda x, y: x * y, rnd),
    (np.divide, randp1),
    (lambda x, y: x / y, randp1),
    (np.power, randp1),
    (lambda x, y: x**y, randp1),
    (lambda x, y: x // y, randp1),
    (lambda x, y: x % y, randp1),
    (np.arctan2, rnd),
    (np.logaddexp, rnd),
]


@pytest.mark.parametrize("op,getter", ARITH)
def test_arithmetic(op, getter):
    g = getter
    check_op(op, (g(B0, 3), g(B0, 3)))
    check_op(op, (g(B0), g(B0, 2, 3)))
    check_op(op, (g(B0), g(2, B0, 3)), in_axes=(0, 1))
    check_op(op, (g(B0), g(2, B0, 3)), in_axes=(0, 1), out_axes=1)
    check_op(op, (g(B0), g(2, 3)), in_axes=(0, None))
    check_op(op, (g(2, 3), g(B0, 3)), in_axes=(0, None))
    check(lambda vm: vm(vm(op)), g(B0, B1, 2, 3), g(B0, B1, 3))
    check(lambda vm: vm(vm(op, in_axes=(None, 0)), in_axes=(0, None)), g(B0, 2, 3), g(B1, 3))
    number = float(g(1)[0])
    _test_unary(lambda t: op(t, number), g)
    _test_unary(lambda t: op(number, t), g)
    _test_unary(lambda t: op(t, number), g, np.float32)
    # Type promotion: per-example scalars and arrays of different dtypes.
    for d1, d2 in [(np.float32, np.float64), (np.float64, np.float32), (np.float32, np.float32)]:
        check_op(op, (g(B0, dtype=d1), g(B0, dtype=d2)))
        check_op(op, (g(B0, 2, dtype=d1), g(B0, dtype=d2)))
        check_op(op, (g(B0, dtype=d1), g(B0, 2, dtype=d2)))
        check_op(op, (g(B0, dtype=d1), g(dtype=d2)), in_axes=(0, None))
        check_op(op, (g(dtype=d1), g(B0, 2, dtype=d2)), in_axes=(None, 0))


INT_ARITH = [
    lambda x, y: x + y,
    lambda x, y: x * y,
    lambda x, y: x - y,
    lambda x, y: x & y,
    lambda x, y: x | y,
    lambda x, y: x ^ y,
    lambda x, y: x << (y & 3),
    lambda x, y: x == y,
    lambda x, y: x < y,
]


@pytest.mark.parametrize("op", INT_ARITH)
@pytest.mark.parametrize(
    "d1,d2",
    [
        (np.int64, np.int64),
        (np.int8, np.int64),
        (np.uint8, np.int8),
        (np.bool_, np.int32),
        (np.bool_, np.bool_),
        (np.int32, np.uint32),
    ],
)
def test_integer_and_bool_arithmetic(op, d1, d2):
    if d1 is np.bool_ and d2 is np.bool_ and op(True, True) is not None:
        try:
            op(np.True_, np.True_)
        except TypeError:
            return
    check_op(op, (rnd(B0, 3, dtype=d1), rnd(B0, 3, dtype=d2)))
    check_op(op, (rnd(B0, dtype=d1), rnd(B0, 3, dtype=d2)))
    check_op(op, (rnd(B0, dtype=d1), rnd(3, dtype=d2)), in_axes=(0, None))
    check_op(op, (rnd(B0, dtype=d1), rnd(B0, dtype=d2)))
    check_op(lambda x: op(x, 3), (rnd(B0, dtype=d1),))
    check_op(lambda x: op(x, 3), (rnd(B0, 2, dtype=d1),))
    check_op(lambda x: op(x.sum(), x), (rnd(B0, 2, dtype=d1),))
    check_op(lambda x, y: op(x.sum(), y[0]), (rnd(B0, 2, dtype=d1), rnd(B0, 2, dtype=d2)))


def test_comparison_ops():
    ops = (
        np.equal,
        lambda x, y: x == y,
        np.greater,
        lambda x, y: x > y,
        np.greater_equal,
        lambda x, y: x <= y,
        np.less,
        lambda x, y: x != y,
    )
    for op in ops:
        check_op(op, (rnd(B0, 3), rnd(B0, 3, seed=1)))
        check_op(op, (rnd(B0), rnd(B0, 2, 3, seed=1)))
        check_op(op, (rnd(B0), rnd(2, B0, 3, seed=1)), in_axes=(0, 1))
        check_op(op, (rnd(B0), rnd(2, B0, 3, seed=1)), in_axes=(0, 1), out_axes=1)
        check_op(op, (rnd(B0), rnd(2, 3, seed=1)), in_axes=(0, None))
        check(lambda vm, op=op: vm(vm(op)), rnd(B0, B1, 2, 3), rnd(B0, B1, 3, seed=1))
        number = float(rnd(1)[0])
        _test_unary(lambda t, op=op, number=number: op(t, number), rnd)


def _matmul_family(op, left, right):
    """PyTorch's test_bmm/test_mm/test_mv/test_dot layout for op(left, right)."""
    check_op(op, (rand(B0, *left), rand(*right)), in_axes=(0, None))
    check(
        lambda vm: vm(vm(op, in_axes=(0, None)), in_axes=(1, None)),
        rand(B1, B0, *left),
        rand(*right),
    )
    check_op(op, (rand(*left), rand(B0, *right)), in_axes=(None, 0))
    check(
        lambda vm: vm(vm(op, in_axes=(None, 0)), in_axes=(None, 1)),
        rand(*left),
        rand(B1, B0, *right),
    )
    check_op(op, (rand(B0, *left), rand(B0, *right)))
    check(lambda vm: vm(vm(op), in_axes=(1, 0)), rand(B1, B0, *left), rand(B0, B1, *right))
    check(
        lambda vm: vm(vm(op, in_axes=(0, None)), in_axes=(None, 0)),
        rand(B1, *left),
        rand(B0, *right),
    )
    check_op(op, (noncontig(rand(*left, B0)), rand(B0, *right)), in_axes=(-1, 0), out_axes=-1)


@pytest.mark.parametrize(
    "op,left,right",
    [
        (np.matmul, (2, 3, 5), (2, 5, 3)),
        (lambda a, b: a @ b, (2, 3, 5), (2, 5, 3)),
        (np.matmul, (2, 5), (5, 2)),
        (np.dot, (2, 5), (5, 2)),
        (np.matmul, (2, 5), (5,)),
        (np.dot, (2, 5), (5,)),
        (np.dot, (5,), (5,)),
        (np.vdot, (5,), (5,)),
        (np.inner, (2, 5), (3, 5)),
        (np.outer, (2,), (3,)),
        (np.dot, (2, 3, 5), (4, 5, 2)),
        (np.matmul, (5,), (5, 3)),
        (lambda a, b: np.tensordot(a, b, axes=([1, 0], [0, 1])), (2, 5), (5, 2)),
        (lambda a, b: np.tensordot(a, b, axes=1), (2, 5), (5, 3)),
        (lambda a, b: np.tensordot(a, b, axes=0), (2,), (3,)),
        (lambda a, b: np.einsum("ij,jk->ik", a, b), (2, 5), (5, 3)),
        (lambda a, b: np.einsum("ij,ij", a, b), (2, 5), (2, 5)),
        (lambda a, b: np.kron(a, b), (2, 2), (3, 1)),
        (np.cross, (2, 3), (2, 3)),
        (np.linalg.solve, (3, 3), (3, 2)),
        (np.linalg.solve, (3, 3), (3,)),
    ],
)
def test_matmul_family(op, left, right):
    _matmul_family(op, left, right)


@pytest.mark.parametrize("dtype", [np.int64, np.complex128, np.float32, np.bool_])
@pytest.mark.parametrize("op", [np.matmul, np.dot, np.vdot, lambda a, b: np.einsum("i,i->", a, b)])
def test_matmul_dtypes(op, dtype):
    check_op(op, (rnd(B0, 4, dtype=dtype), rnd(B0, 4, dtype=dtype, seed=1)))
    check_op(op, (rnd(B0, 4, dtype=dtype), rnd(4, dtype=dtype, seed=1)), in_axes=(0, None))


@pytest.mark.parametrize(
    "op,args,in_axes",
    [
        (np.matmul, (rnd(B0, 2, 2, 2), rnd(B0, 3)), 0),
        (np.matmul, (rnd(B0, 3, 3, 2), rnd(3, 2)), (0, None)),
        (np.dot, (rnd(B0, 2), rnd(3, 2)), (0, None)),
        (np.dot, (rnd(2, 3), rnd(B0, 2)), (None, 0)),
        (np.vdot, (rnd(B0, 2), rnd(B0, 3)), 0),
        (np.inner, (rnd(B0, 2), rnd(B0, 3)), 0),
        (np.cross, (rnd(B0, 4), rnd(B0, 4)), 0),
    ],
)
def test_matmul_shape_mismatch_raises(op, args, in_axes):
    check_raises_like_loop(lambda vm: vm(op, in_axes), *args, exc=ValueError)


def test_cross_batch_size_three():
    check_op(np.cross, (rand(3, 2, 3), rand(3, 2, 3)))
    check(
        lambda vm: vm(vm(np.cross, in_axes=(0, None)), in_axes=(None, 1)),
        rand(3, 3, 2, 3),
        rand(3, 3, 2, 3),
    )
    check_op(lambda a, b: np.cross(a, b, axis=0), (rand(3, 3, 2), rand(3, 3, 2)))
    check_op(lambda a, b: np.cross(a, b, axisa=0, axisb=1), (rand(3, 3, 4), rand(3, 4, 3)))
    check_op(np.cross, (rand(3, 3, 2), rand(3, 3, 2)), in_axes=1)


def _cat(axis):
    def op(*arrays):
        return np.concatenate(arrays, axis=axis)

    return op


def test_cat():
    check_op(_cat(0), (rand(5, 2), rand(5, 3)))
    check_op(_cat(0), (rand(5, 0), rand(5, 0)))
    check_op(_cat(0), (rand(2), rand(5, 0)), in_axes=(None, 0))
    check_op(_cat(1), (rand(2, 5), rand(5, 2, 0), rand(2, 3)), in_axes=(None, 0, None))
    check_op(_cat(0), (rand(0), rand(5, 2), rand(5, 0)), in_axes=(None, 0, 0))
    check_op(_cat(0), (rand(2), rand(5, 3)), in_axes=(None, 0))
    check_op(_cat(0), (rand(2, 17), rand(3, 17, 5)), in_axes=(None, 2))
    check_op(_cat(-1), (rand(17, 2), rand(17, 3, 5)), in_axes=(None, 2))
    check_op(_cat(None), (rand(17, 2), rand(3, 5, 4)), in_axes=(None, 1))
    check(lambda vm: vm(vm(_cat(0), in_axes=(0, None)), in_axes=(None, 0)), rand(B1, 2), rand(5, 3))
    check(
        lambda vm: vm(vm(_cat(0), in_axes=(0, 0)), in_axes=(None, 0)), rand(B1, 2), rand(5, B1, 3)
    )
    check_op(_cat(0), (rand(5, 2), rand(5, 3, dtype=np.float32).astype(np.int64)))
    check_op(lambda x: np.concatenate([x, x[::-1]]), (rand(5, 3),))
    check_op(lambda x: np.hstack([x, x]), (rand(5, 3, 2),))
    check_op(lambda x: np.vstack([x, x]), (rand(5, 3),))
    check_op(lambda x: np.column_stack([x, x]), (rand(5, 3),))
    check_op(lambda x: np.block([[x, x], [x, x]]), (rand(5, 2, 2),))
    check_op(lambda x: np.append(x, 1.0), (rand(5, 2, 2),))
    check_op(lambda x, y: np.append(x, y, axis=0), (rand(5, 2, 2), rand(2, 2)), (0, None))


def _stack(axis):
    def op(*arrays):
        return np.stack(arrays, axis=axis)

    return op


def test_stack():
    check_op(_stack(0), (rand(5, 3), rand(5, 3)))
    check_op(_stack(0), (rand(3), rand(5, 3)), in_axes=(None, 0))
    check_op(_stack(0), (rand(2, 17), rand(2, 17, 5)), in_axes=(None, 2))
    check_op(_stack(-1), (rand(2, 17), rand(2, 17, 5)), in_axes=(None, 2))
    check_op(_stack(1), (rand(2, 17), rand(2, 17, 5)), in_axes=(None, 2), out_axes=2)
    check(
        lambda vm: vm(vm(_stack(0), in_axes=(0, None)), in_axes=(None, 0)), rand(B1, 2), rand(5, 2)
    )
    check(
        lambda vm: vm(vm(_stack(0), in_axes=(0, 0)), in_axes=(None, 0)), rand(B1, 2), rand(5, B1, 2)
    )
    check_op(lambda x: np.stack(list(x)), (rand(5, 3, 2),))
    check_op(lambda x: np.stack([x.sum(), x.max()]), (rand(5, 3, 2),))
    check_op(lambda x: np.array([x.sum(), x.max()]), (rand(5, 3, 2),))
    check_op(lambda x: np.array([x, x]), (rand(5, 3, 2),))
    check_op(lambda x: np.dstack([x, x]), (rand(5, 3, 2),))


@pytest.mark.parametrize(
    "args,in_axes,out_axes",
    [
        ((1, 0, 1), 0, 0),
        ((0, 2, -1), 0, 0),
        ((2, 1, 2), 1, 0),
        ((0, -2, -1), 1, 1),
        ((-1, 0, 2), 4, -1),
    ],
)
def test_diagonal(args, in_axes, out_axes):
    t = rnd(3, 5, 7, 11, 13)
    check_op(lambda x: np.diagonal(x, *args), (t,), in_axes, out_axes)
    check_op(lambda x: x.diagonal(*args), (noncontig(t, 2),), in_axes, out_axes)


def test_diagonal_nested():
    t = rnd(3, 5, 7, 11, 13)
    check(lambda vm: vm(vm(lambda x: np.diagonal(x, 0, 0, -1)), in_axes=1, out_axes=1), t)
    check(
        lambda vm: vm(
            vm(vm(lambda x: np.diagonal(x, 0, 0, 1), in_axes=1), in_axes=3), in_axes=1, out_axes=1
        ),
        t,
    )
    check_op(np.diag, (rnd(4, 3, 5),))
    check_op(lambda x: np.diag(x, k=-1), (rnd(4, 5),))
    check_op(lambda x: np.diag(x, k=2), (rnd(4, 5),), in_axes=1)
    check_op(np.diagflat, (rnd(4, 2, 2),))
    check_op(lambda x: np.fill_diagonal(x, 3.0) or x, (rnd(4, 3, 3),))
    check_op(lambda x: np.fill_diagonal(x, 3.0, wrap=True) or x, (rnd(4, 7, 3),), in_axes=2)


def test_expand_as_broadcast_to():
    op = lambda x, y: np.broadcast_to(x, y.shape)  # noqa: E731
    check_op(op, (rand(B0, 1, 5), rand(B0, 2, 3, 5)))
    check_op(op, (rand(B0, 1, 5), rand(2, 3, 5)), in_axes=(0, None))
    check_op(op, (rand(1, 5), rand(B0, 2, 3, 5)), in_axes=(None, 0))
    check(lambda vm: vm(vm(op)), rand(B0, B1, 1, 5), rand(B0, B1, 2, 3, 5))
    check(lambda vm: vm(vm(op), in_axes=(0, 1)), rand(B0, B1, 1, 5), rand(B1, B0, 2, 3, 5))
    check(lambda vm: vm(vm(op), in_axes=(0, None)), rand(B0, B1), rand(B1, 2, 3, 5))
    check(lambda vm: vm(vm(vm(op))), rand(B0, B1, B2), rand(B0, B1, B2, 2, 3, 5))
    check_op(lambda x: np.broadcast_to(x, (5, 5, 2, 3)), (rand(B0, 2, 3),))
    check_op(lambda x: np.broadcast_to(x, (5, 5, 2, 3)), (rand(2, 3, B0),), 2, 1)
    check_op(lambda x, y: np.broadcast_arrays(x, y), (rand(B0, 3, 1), rand(B0, 4)))
    check_op(lambda x: np.broadcast_to(x, (2, 3)) + 0, (rand(B0, 3, dtype=np.int64),))
    check_raises_like_loop(
        lambda vm: vm(lambda x: np.broadcast_to(x, (2, 4))), rand(B0, 3), exc=ValueError
    )


@pytest.mark.parametrize(
    "op",
    [
        lambda t: t.fill(0.1) or t,
        lambda t: t.__setitem__(Ellipsis, 0.2) or t,
        lambda t: t.fill(np.float64(0.2)) or t,
        lambda t: t.__setitem__(slice(None), 0) or t,
        lambda t: np.zeros_like(t),
        lambda t: np.ones_like(t, dtype=np.int32),
        lambda t: np.full_like(t, 7),
        lambda t: np.empty_like(t).shape and np.zeros(t.shape),
        lambda t: np.zeros_like(t, shape=(2, 3)),
    ],
)
def test_fill_and_zero_inplace(op):
    check_op(op, (rnd(B0, 3),))
    check_op(op, (rnd(2, 5, B0, 3),), in_axes=2)
    check_op(op, (rnd(2, 5, B0, 3),), in_axes=2, out_axes=2)
    check(lambda vm: vm(vm(op)), rnd(B0, B1, 3))
    check(lambda vm: vm(vm(op), in_axes=2), rnd(B1, 2, 5, B0, 3))
    check(lambda vm: vm(vm(op, in_axes=2), in_axes=2, out_axes=2), rnd(2, 5, B0, B1, 3))


def test_fill_with_batched_value():
    check_op(lambda t, v: t.fill(v) or t, (rnd(3, 5), rnd(3)))
    check_op(lambda t, v: t.__setitem__(Ellipsis, v) or t, (rnd(3, 5), rnd(3)))
    check_op(lambda t, v: t.fill(v) or t, (rnd(5, 3), rnd(3)), in_axes=(-1, 0))
    check_op(lambda t, v: t.fill(v) or t, (rnd(5, 3), np.float64(1.5)), in_axes=(-1, None))
    check_op(lambda t, v: np.full_like(t, v), (rnd(3, 5), rnd(3)))
    check_op(lambda t, v: np.full(t.shape, v), (rnd(3, 5), rnd(3)))
    check_op(lambda t, v: np.full((2,), v, dtype=t.dtype), (rnd(3, 5), rnd(3)))
    with pytest.raises(ValueError):
        vmapx.vmap(lambda t, v: t.fill(v) or t, (None, 0))(rnd(3, 5), rnd(3))


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
@pytest.mark.parametrize(
    "op",
    [
        np.real,
        np.imag,
        lambda x: x.real,
        lambda x: x.imag,
        lambda x: np.stack([x.real, x.imag], -1),
        np.angle,
        np.abs,
        lambda x: x.view(np.float32 if x.dtype == np.complex64 else np.float64),
    ],
)
def test_complex_views(op, dtype):
    def g(*shape):
        return rnd(*shape, dtype=dtype)

    check_op(op, (g(B0, 3),))
    check_op(op, (g(3, B0),), in_axes=1)
    check_op(op, (g(2, 5, B0, 3),), in_axes=2)
    check_op(op, (g(2, 5, B0, 3),), in_axes=2, out_axes=2)
    check(lambda vm: vm(vm(op)), g(B0, B1, 2))
    check(lambda vm: vm(vm(op), in_axes=4), g(B1, 2, 5, 3, B0))
    check(lambda vm: vm(vm(op, in_axes=2), in_axes=2, out_axes=2), g(2, 5, B0, B1, 3))


def test_real_imag_inplace():
    def f(x):
        x.real *= 2
        x.imag[...] = 0
        return x

    check_op(f, (rnd(B0, 3, dtype=np.complex128),))
    check_op(f, (rnd(3, B0, dtype=np.complex128),), in_axes=1)


@pytest.mark.parametrize("attr", ["real", "imag"])
def test_real_imag_attribute_assignment(attr):
    def f(x):
        setattr(x, attr, 0)
        return x

    check_op(f, (rnd(B0, 3, dtype=np.complex128),))


@pytest.mark.xfail(
    strict=True,
    reason="assigning x.shape of a batched value raises AttributeError (no fallback)",
)
def test_shape_attribute_assignment():
    def f(x):
        x = x.copy()
        x.shape = (3, 2)
        return x

    check_op(f, (rnd(B0, 6),))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_view_as_complex(dtype):
    cdt = np.complex64 if dtype == np.float32 else np.complex128

    def op(x):
        return x.view(cdt)[..., 0]

    def g(*shape):
        return rnd(*shape, dtype=dtype)

    check_op(op, (g(B0, 3, 2),))
    check_op(op, (g(2, 5, B0, 3, 2),), in_axes=2)
    check_op(op, (g(2, 5, B0, 3, 2),), in_axes=2, out_axes=2)
    check(lambda vm: vm(vm(op)), g(B0, B1, 2))
    check(lambda vm: vm(vm(op), in_axes=2), g(B1, 2, 5, B0, 3, 2))
    check_op(op, (g(3, B0, 2),), in_axes=1)
    check(lambda vm: vm(vm(op, in_axes=1), in_axes=2), g(3, B1, B0, 2))
    # Batch axis last: functorch refuses (the last axis of a view is not contiguous);
    # in vmapx an example is f's own value, as a copy in the loop.
    check_op(op, (g(2, B0),), in_axes=1)
    check(lambda vm: vm(vm(op, in_axes=1), in_axes=1), g(2, B0, B1))
    # Examples whose last axis is contiguous although the batch axis is last in order.
    check_op(op, (g(B0, 2).T,), in_axes=1)


def test_dtype_view_changes_last_axis():
    check_op(lambda x: x.view(np.int32), (rnd(B0, 4, dtype=np.int64),))
    check_op(lambda x: x.view(np.int64), (rnd(B0, 4, dtype=np.int32),))
    check_op(lambda x: x.view(np.uint8), (rnd(B0, 3, 2, dtype=np.float32),))
    check_op(lambda x: x.view(np.int32), (rnd(4, B0, dtype=np.int64),), in_axes=1)
    check_op(lambda x: x.view(np.int16), (rnd(3, 4, B0, dtype=np.int64),), in_axes=0)


def test_is_complex_is_floating_point():
    def foo(x):
        return np.array(1) if np.iscomplexobj(x) else np.array(0)

    check_op(foo, (rnd(3, dtype=np.complex64),))
    check_op(foo, (rnd(3),))

    def bar(x):
        return np.array(1) if np.issubdtype(x.dtype, np.floating) else np.array(0)

    check_op(bar, (rnd(3),))
    check_op(bar, (rnd(3, dtype=np.int64),))
    check_op(lambda x: np.array(x.ndim), (rnd(3, 4, 5),))
    check_op(lambda x: np.array(x.size), (rnd(3, 4, 5),), in_axes=2)
    check_op(lambda x: np.array(x.shape), (rnd(3, 4, 5),), in_axes=1)
    check_op(lambda x: np.array(len(x)), (rnd(3, 4, 5),), in_axes=-1)
    check_op(lambda x: np.array(x.itemsize), (rnd(3, 4, dtype=np.float32),))


def test_is_contiguous():
    # functorch's test_is_contiguous: the loop's `x.flags` of each example.
    def foo(x):
        return np.array(1.0) if x.flags.c_contiguous else np.array(0.0)

    check_op(foo, (rnd(3, 2, 7),))
    check_op(foo, (rnd(2, 3, 7),), in_axes=1)
    check_op(foo, (rnd(2, 7, 3),), in_axes=2)
    check(lambda vm: vm(vm(foo)), rnd(3, 5, 3))
    check(lambda vm: vm(vm(foo, in_axes=1)), rnd(3, 3, 5))


def test_unsqueeze():
    op = np.expand_dims
    for axis in (0, 2, -1, (0, -1)):
        check_op(op, (rand(B0, 2, 5), axis), in_axes=(0, None))
        check_op(op, (rand(2, B0, 5), axis), in_axes=(1, None))
    check(lambda vm: vm(vm(lambda x: np.expand_dims(x, 0))), rand(B0, B1, 2))
    check(lambda vm: vm(vm(lambda x: np.expand_dims(x, -1))), rand(B0, B1, 2))
    check(lambda vm: vm(vm(lambda x: np.expand_dims(x, 0)), in_axes=2), rand(B1, 2, B0))
    check(lambda vm: vm(vm(lambda x: np.expand_dims(x, 0), in_axes=1), in_axes=2), rand(2, B1, B0))
    check(lambda vm: vm(vm(lambda x: x[None, ..., None]), in_axes=2), rand(B1, 2, B0))
    check(lambda vm: vm(vm(lambda x: x[:, None], in_axes=1), in_axes=2), rand(2, B1, B0, 3))


def test_movedim():
    op = np.moveaxis
    check_op(op, (rand(B0, 2, 5), 0, 1), in_axes=(0, None, None))
    check_op(op, (rand(2, B0, 5), 0, 1), in_axes=(1, None, None))
    check(
        lambda vm: vm(vm(op, in_axes=(0, None, None)), in_axes=(2, None, None)),
        rand(B1, 2, B0, 5),
        0,
        1,
    )
    check(
        lambda vm: vm(
            vm(vm(op, in_axes=(2, None, None)), in_axes=(0, None, None)), in_axes=(2, None, None)
        ),
        rand(B1, 2, B0, 5, B2),
        0,
        1,
    )
    check_op(op, (rand(B0, 2, 3, 5), [1, 0], [0, 2]), in_axes=(0, None, None))
    check_op(op, (rand(2, 3, B0, 5), [1, 0], [0, 2]), in_axes=(2, None, None))
    check_op(op, (rand(2, 3, B0, 5), [-1, 0], [0, -2]), in_axes=(2, None, None))
    check(
        lambda vm: vm(vm(op, in_axes=(0, None, None)), in_axes=(2, None, None)),
        rand(B1, 2, B0, 5),
        [0, 1],
        [1, 0],
    )
    check_op(np.rollaxis, (rand(2, 3, B0, 5), 2), in_axes=(2, None))
    check_op(lambda x: np.transpose(x, (2, 0, 1)), (rand(2, 3, B0, 5),), in_axes=2)
    check_op(lambda x: x.transpose(1, 0, 2), (rand(2, 3, B0, 5),), in_axes=-2, out_axes=-1)
    check_op(lambda x: np.permute_dims(x, (1, 0)), (rand(2, 3, B0),), in_axes=-1, out_axes=1)


def _narrow(t, dim, start, length):
    idx = [slice(None)] * t.ndim
    idx[dim] = slice(start, start + length)
    return t[tuple(idx)]


def test_narrow():
    op = _narrow
    check_op(op, (rand(B0, 2, 5), -1, 1, 3), in_axes=(0, None, None, None))
    check_op(op, (rand(2, B0, 5), 1, 1, 3), in_axes=(1, None, None, None))
    check(
        lambda vm: vm(vm(op, in_axes=(0, None, None, None)), in_axes=(2, None, None, None)),
        rand(B1, 2, B0, 5),
        1,
        0,
        0,
    )
    check(
        lambda vm: vm(
            vm(vm(op, in_axes=(2, None, None, None)), in_axes=(0, None, None, None)),
            in_axes=(2, None, None, None),
        ),
        rand(B1, 2, B0, 5, B2),
        -1,
        2,
        3,
    )
    check_op(lambda t: np.take(t, np.arange(1, 4), axis=-1), (rand(B0, 2, 5),))
    check_op(lambda t: np.take(t, [[0, 1], [2, 0]], axis=1), (rand(2, B0, 5),), in_axes=1)


def test_new_empty_and_zeros():
    out = vmapx.vmap(lambda x: np.empty_like(x, shape=(2, 3)))(rnd(B0))
    assert out.shape == (B0, 2, 3) and out.dtype == np.float64
    out = vmapx.vmap(vmapx.vmap(lambda x: np.empty((2, 3), x.dtype)))(rnd(B0, B1, dtype=np.float32))
    assert out.shape == (B0, B1, 2, 3) and out.dtype == np.float32
    check_op(lambda x: np.zeros((2, 3), dtype=x.dtype), (rand(B0, dtype=np.float32),))
    check_op(lambda x: np.zeros((), dtype=x.dtype), (rand(B0),))
    check(lambda vm: vm(vm(lambda x: np.zeros((3, 5)))), rand(B0, B1))
    check_op(lambda x: np.zeros(x.shape[0]), (rand(B0, 4),))
    check_op(lambda x: np.ones(x.shape, dtype=bool) & (x > 0), (rnd(B0, 4),))
    check_op(lambda x: np.eye(x.shape[-1], dtype=x.dtype) * x, (rnd(4, 3, B0),), in_axes=-1)
    check_op(lambda x: np.arange(x.shape[0]) * x, (rnd(B0, 4, dtype=np.int64),))


def test_select():
    check_op(lambda t, i, d: np.take(t, i, axis=d), (rand(B0, 2, 5), 0, 0), in_axes=(0, None, None))
    check_op(lambda t, i, d: np.take(t, i, axis=d), (rand(2, B0, 5), 1, 1), in_axes=(1, None, None))
    check(lambda vm: vm(vm(lambda t: t[:, 1])), rand(B1, 2, B0, 5))
    check(lambda vm: vm(vm(lambda t: t[:, 1]), in_axes=2), rand(B1, 2, B0, 5))
    check(lambda vm: vm(vm(lambda t: t[:, 1], in_axes=1), in_axes=2), rand(B1, 2, B0, B2, 5))
    check_op(lambda t: t[-1], (rand(B0, 2, 5),), in_axes=2)
    check_op(lambda t: t[..., -2], (rand(B0, 2, 5),), in_axes=1, out_axes=1)
    check_op(lambda t: t[1, 2], (rand(B0, 2, 5),), in_axes=1)
    check_op(lambda t: t[1][2], (rand(B0, 2, 5),), in_axes=1)
    check_op(lambda t, i: t[i], (rand(B0, 5), np.arange(B0) % 5), in_axes=(0, 0))
    check_op(lambda t, i: t[:, i], (rand(B0, 3, 5), np.arange(B0) % 5), in_axes=(0, 0))
    check_op(lambda t, i: t[i, 1:], (rand(B0, 3, 5), np.arange(B0) % 3), in_axes=(1, 0))


@pytest.mark.parametrize(
    "op",
    [
        lambda t: np.roll(t, 2),
        lambda t: np.roll(t, 3, axis=0),
        lambda t: np.roll(t, -1, axis=-1),
        lambda t: np.roll(t, (1, 2), axis=(0, 1)),
        lambda t: np.flip(t),
        lambda t: np.flip(t, 0),
        lambda t: np.flip(t, -1),
        lambda t: np.fliplr(t),
        lambda t: np.flipud(t),
        lambda t: t[::-1],
        lambda t: t[:, ::-2],
        lambda t: np.rot90(t),
        lambda t: np.rot90(t, k=3, axes=(1, 0)),
    ],
)
def test_roll_flip(op):
    check_op(op, (rand(B0, 2, 5),))
    check_op(op, (rand(2, B0, 5),), in_axes=1)
    check(lambda vm: vm(vm(op), in_axes=2), rand(B1, 2, B0, 5, 3))
    check(lambda vm: vm(vm(op, in_axes=1), in_axes=2), rand(B1, 2, B0, B2, 5))


def test_roll_with_batched_shift():
    check_op(np.roll, (rand(B0, 2, 5), np.arange(B0)), in_axes=(0, 0))
    check_op(lambda t, s: np.roll(t, s, axis=1), (rand(B0, 2, 5), np.arange(B0)), in_axes=(0, 0))
    check_op(lambda t, s: np.roll(t, s, axis=1), (rand(2, 5), np.arange(B0)), in_axes=(None, 0))


def test_slice():
    check_op(lambda t: t[0:1], (rand(B0, 3, 5),))
    check_op(lambda t: t[:, 1:3], (rand(3, 5, B0),), in_axes=2)
    check(lambda vm: vm(vm(lambda t: t[:, 0:1], in_axes=2), in_axes=2), rand(3, 5, B0, B1))
    check(
        lambda vm: vm(vm(vm(lambda t: t[0:1], in_axes=2), in_axes=2), in_axes=2),
        rand(3, 5, B0, B1, B2),
    )
    check_op(lambda t: t[..., 1:3], (rand(3, 5, B0),), in_axes=-1, out_axes=-1)
    check_op(lambda t: t[-3:-1, ::2], (rand(4, 5, B0),), in_axes=-1, out_axes=1)
    check_op(lambda t: t[5:], (rand(4, 5, B0),), in_axes=-1)
    check_op(lambda t: t[1:3][::-1], (noncontig(rand(B0, 5, 3)),))


@pytest.mark.parametrize(
    "op,min_ndim",
    [
        (np.squeeze, 1),
        (lambda x: np.squeeze(x, axis=0), 2),  # 0-d: see test_axis_zero_on_zero_d_examples
        (lambda x: np.squeeze(x, axis=1), 2),
        (lambda x: np.squeeze(x, axis=-1), 2),
        (lambda x: np.squeeze(x, axis=-2), 3),
        (lambda x: x.squeeze(), 1),
    ],
)
@pytest.mark.parametrize("b0", [1, 3])
def test_squeeze(op, min_ndim, b0):
    # Batch sizes of 1: the batch axis must never be squeezed. Where NumPy refuses the
    # axis (it is not of size 1), vmap must raise too.
    b1 = 11
    if min_ndim <= 1:
        check_op(op, (rand(b0),))
        check_op(op, (rand(b1),))
        check(lambda vm: vm(vm(op)), rand(b0, b1, 1))
        check(lambda vm: vm(vm(op), in_axes=2), rand(b1, 1, b0))
    check_op(op, (rand(b0, 3, 5),))
    check_op(op, (rand(1, b0, 5),), in_axes=1)
    check_op(op, (rand(b0, 0, 1, 5, 1),))
    check_op(op, (rand(b0, 1, 1, 1, 1),))
    check(lambda vm: vm(vm(op)), rand(b0, b1, 1, 3, 4))
    check(lambda vm: vm(vm(op), in_axes=2), rand(b1, 1, b0, 4, 5))
    check(lambda vm: vm(vm(op), in_axes=2), rand(1, 1, b0, 1, 1))


def test_squeeze_bad_axis_raises():
    check_raises_like_loop(lambda vm: vm(lambda x: np.squeeze(x, axis=1)), rand(10))
    check_raises_like_loop(lambda vm: vm(lambda x: np.squeeze(x, axis=0)), rand(10, 2))
    check_raises_like_loop(lambda vm: vm(lambda x: np.squeeze(x, axis=0), in_axes=1), rand(2, 1))
    check_raises_like_loop(lambda vm: vm(vm(lambda x: np.squeeze(x, axis=1))), rand(1, 1, 1, 2))


_ZERO_D_AXIS_OPS = {
    "sum0": lambda x: np.sum(x, 0),
    "sum-1": lambda x: x.sum(-1),
    "max0": lambda x: np.max(x, 0),
    "min0": lambda x: x.min(axis=0),
    "prod0": lambda x: np.prod(x, 0),
    "all0": lambda x: np.all(x, 0),
    "any0": lambda x: x.any(0),
    "argmax0": lambda x: np.argmax(x, 0),
    "cumsum0": lambda x: np.cumsum(x, 0),
    "squeeze0": lambda x: np.squeeze(x, 0),
    "count_nonzero0": lambda x: np.count_nonzero(x, axis=0),
    "add.reduce0": lambda x: np.add.reduce(x, 0),
}


@pytest.mark.parametrize("name", list(_ZERO_D_AXIS_OPS))
def test_axis_zero_on_zero_d_examples(name):
    # functorch's test_sum_scalar: vmap(lambda x: x.sum(0))(tensor([10.])).
    op = _ZERO_D_AXIS_OPS[name]
    op(np.array(10.0))  # NumPy accepts axis 0 of a 0-d array here
    check_op(op, (np.array([10.0, -2.0, 3.0]),))


REDUCTIONS = {
    "sum": np.sum,
    "mean": np.mean,
    "var": np.var,
    "std": lambda x, axis=None: np.std(x, axis=axis, ddof=1),
    "max": np.max,
    "min": np.min,
    "prod": np.prod,
    "argmax": np.argmax,
    "argmin": np.argmin,
    "cumsum": np.cumsum,
    "cumprod": np.cumprod,
    "median": np.median,
    "ptp": np.ptp,
    "all": lambda x, axis=None: np.all(x > 0, axis=axis),
    "any": lambda x, axis=None: np.any(x > 1, axis=axis),
    "count_nonzero": lambda x, axis=None: np.count_nonzero(x > 0, axis=axis),
    "logsumexp": lambda x, axis=None: np.log(np.sum(np.exp(x), axis=axis)),
    "norm": lambda x, axis=None: np.linalg.norm(x, axis=axis),
    "nanmean": np.nanmean,
    "average": np.average,
    "quantile": lambda x, axis=None: np.quantile(x, 0.3, axis=axis),
    "sort": lambda x, axis=-1: np.sort(x, axis=axis),
    "argsort": lambda x, axis=-1: np.argsort(x, axis=axis, kind="stable"),
    "diff": lambda x, axis=-1: np.diff(x, axis=axis),
    "gradient": lambda x, axis=None: (
        np.gradient(x, axis=axis) if x.ndim == 1 or axis is not None else np.gradient(x, axis=0)
    ),
}


@pytest.mark.parametrize("name", list(REDUCTIONS))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_reduction_full(name, dtype):
    # functorch's _test_sum_mean
    op = REDUCTIONS[name]
    if name in ("sort", "argsort", "diff"):
        op = functools.partial(op, axis=-1)
    g = functools.partial(rnd, dtype=dtype)
    if name not in ("sort", "argsort", "diff", "gradient"):
        check_op(op, (g(5),))
    check_op(op, (g(5, 3),))
    check_op(op, (g(2, 5, 5, 3),), in_axes=2)
    check_op(op, (noncontig(g(2, 5, 5, 3)),), in_axes=-2, out_axes=-1)
    check(lambda vm: vm(vm(op)), g(5, 7, 3))
    check(lambda vm: vm(vm(op)), g(7, 2, 5, 5, 3))
    check(lambda vm: vm(vm(op), in_axes=2), g(2, 5, 5, 7, 3))


@pytest.mark.parametrize("name", list(REDUCTIONS))
def test_reduction_dim(name):
    # functorch's _test_mean_sum_dim, with the NumPy axis keyword
    op = REDUCTIONS[name]
    check_op(lambda x: op(x, axis=0), (rnd(5, 3),))
    check_op(lambda x: op(x, axis=-1), (rnd(2, 5, 5, 3),), in_axes=2)
    check_op(lambda x: op(x, axis=2), (rnd(2, 5, 5, 3, 4),), in_axes=2, out_axes=2)
    check(lambda vm: vm(vm(lambda x: op(x, axis=0))), rnd(5, 7, 3))
    check(lambda vm: vm(vm(lambda x: op(x, axis=-1))), rnd(5, 7, 3))
    check(lambda vm: vm(vm(lambda x: op(x, axis=-2)), in_axes=2), rnd(7, 2, 5, 5, 3))
    check(
        lambda vm: vm(vm(lambda x: op(x, axis=2), in_axes=2), in_axes=2, out_axes=2),
        rnd(2, 5, 5, 7, 3, 4),
    )
    check_op(lambda x: op(x, axis=1), (rnd(5, 3, 0),))
    if name not in (
        "sort",
        "argsort",
        "diff",
        "cumsum",
        "cumprod",
        "gradient",
        "argmax",
        "argmin",
        "median",
        "quantile",
        "ptp",
        "average",
        "count_nonzero",
    ):
        check_op(lambda x: op(x, axis=(0, -1)), (rnd(5, 3, 4, 2),), in_axes=1)


@pytest.mark.parametrize(
    "dtype", [np.int64, np.bool_, np.int8, np.uint8, np.complex128, np.float16]
)
@pytest.mark.parametrize(
    "op",
    [
        np.sum,
        lambda x: np.sum(x, axis=0),
        lambda x: x.sum(axis=-1, keepdims=True),
        np.prod,
        np.cumsum,
        lambda x: np.cumsum(x, axis=0),
        np.mean,
        lambda x: np.max(x, axis=0),
        lambda x: np.sort(x, axis=0),
        lambda x: x.sum(dtype=np.int32),
        lambda x: np.add.reduce(x, axis=1),
        lambda x: np.add.accumulate(x, axis=1),
        lambda x: np.trace(x),
        lambda x: x.mean(axis=0, dtype=np.float32),
    ],
)
def test_reduction_dtypes(op, dtype):
    check_op(op, (rnd(5, 3, 4, dtype=dtype),))
    check_op(op, (rnd(3, 5, 4, dtype=dtype),), in_axes=1)
    check_op(op, (rnd(3, 4, 1, dtype=dtype),), in_axes=-1)


def test_reduction_keepdims_and_where():
    check_op(lambda x: np.sum(x, axis=1, keepdims=True), (rnd(5, 3, 4),), in_axes=2, out_axes=-1)
    check_op(lambda x: np.max(x, keepdims=True), (rnd(5, 3, 4),), in_axes=1)
    check_op(lambda x, m: np.sum(x, where=m), (rnd(5, 3, 4), rnd(5, 3, 4, dtype=np.bool_)))
    check_op(
        lambda x, m: np.max(x, axis=0, where=m, initial=-10.0),
        (rnd(5, 3, 4), rnd(3, 4, dtype=np.bool_)),
        (0, None),
    )
    check_op(
        lambda x, m: np.mean(x, axis=-1, where=m),
        (rnd(5, 3, 4), rnd(5, 3, 4, dtype=np.bool_)),
        (1, 1),
    )
    check_op(lambda x: np.sum(x, initial=3.0), (rnd(5, 3, 4),))
    check_op(
        lambda x, w: np.average(x, axis=0, weights=w), (rnd(5, 3, 4), rand(5, 3) + 0.1), (0, 0)
    )


def test_argmax_dim():
    for op in (
        np.argmax,
        lambda x: np.argmax(x, 0),
        lambda x: np.argmax(x, -1),
        lambda x: np.argmax(x, 1),
    ):
        check_op(op, (rnd(5, 2, 3),))
        check_op(op, (rnd(2, 5, 3),), in_axes=1)
    check_op(np.argmax, (rnd(5),))
    check_op(lambda x: np.argmax(x, axis=1, keepdims=True), (rnd(5, 2, 3),), in_axes=2)
    check_op(np.argmax, (np.array([[1.0, 1.0, 0.0], [0.0, 2.0, 2.0], [np.nan, 1.0, np.nan]]),))
    check_raises_like_loop(lambda vm: vm(lambda x: np.argmax(x, 2)), rnd(5, 2, 3))


def test_repeat_tile():
    check_op(lambda x: np.tile(x, (2, 3)), (rand(B0, 1, 1),))
    check_op(lambda x: np.tile(x, (2, 3)), (rand(1, B0, 1),), in_axes=1)
    check_op(lambda x: np.tile(x, 2), (rand(B0, 3, 2),), in_axes=1)
    check_op(lambda x: np.tile(x, (2, 1, 1, 3)), (rand(B0, 3, 2),), in_axes=2)
    check_op(lambda x: np.repeat(x, 2), (rand(B0, 3, 2),))
    check_op(lambda x: np.repeat(x, 2, axis=0), (rand(B0, 3, 2),), in_axes=1)
    check_op(lambda x: np.repeat(x, [1, 0, 2], axis=-1), (rand(B0, 2, 3),))
    check_op(lambda x, r: np.repeat(x, r, axis=0), (rand(B0, 3), np.array([1, 0, 2])), (0, None))


def test_slogdet():
    op = np.linalg.slogdet
    for x, in_axes in [
        (rand(B0, 1, 1), 0),
        (rand(B0, 2, 2), 0),
        (rand(B0, 3, 2, 2), 0),
        (rand(3, 2, 2, B0), 3),
    ]:
        out = check_op(op, (x,), in_axes)
        assert type(out).__name__ == type(op(np.eye(2))).__name__


def _reshape_as(x, y):
    return x.reshape(y.shape)


def test_reshape():
    op = np.reshape
    check_op(op, (rand(B0, 2 * 5), [2, 5]), in_axes=(0, None))
    check_op(op, (rand(2, B0, 5), [1, 1, 10]), in_axes=(1, None))
    check(lambda vm: vm(vm(lambda t: t.reshape([-1]))), rand(B0, B1, 2, 5))
    check(
        lambda vm: vm(vm(lambda t: t.reshape([-1]), in_axes=2), in_axes=1),
        rand(3, B1, 2, B2, 5, B0),
    )
    check(
        lambda vm: vm(vm(lambda t: t.reshape(-1, 2), in_axes=2), in_axes=5),
        rand(3, B1, 2, B2, 5, B0),
    )
    check_op(lambda t: t.reshape(2, 5, order="F"), (rand(10, B0),), in_axes=1)
    check_op(lambda t: np.reshape(t, (5, 2), order="F"), (rand(2, B0, 5),), in_axes=1)
    check_op(lambda t: t.ravel(), (rand(2, B0, 5),), in_axes=1)
    check_op(lambda t: t.ravel(order="F"), (rand(2, B0, 5),), in_axes=1)
    check_op(lambda t: t.flatten(), (rand(2, 3, 5),), in_axes=-1)
    check_op(lambda t: t.reshape(()), (rand(1, B0, 1),), in_axes=1)
    check_op(lambda t: t.reshape(3, 0), (rand(B0, 0),))
    check_op(_reshape_as, (rand(B0, 2 * 5), rand(B0, 2, 5)))
    check_op(_reshape_as, (rand(2 * 5), rand(B0, 2, 5)), in_axes=(None, 0))
    check_op(_reshape_as, (rand(B0, 2 * 5), rand(2, 5)), in_axes=(0, None))
    check_op(_reshape_as, (rand(2, B0, 5), rand(1, 1, 10)), in_axes=(1, None))
    check(lambda vm: vm(vm(_reshape_as)), rand(B0, B1, 2, 5), rnd(B0, B1, 10))
    check(
        lambda vm: vm(vm(_reshape_as, in_axes=(2, None)), in_axes=(1, None)),
        rand(3, B1, 2, B2, 5, B0),
        rand(B0, 3 * 2 * 5),
    )
    check_raises_like_loop(lambda vm: vm(lambda t: t.reshape(3, 4)), rand(B0, 10), exc=ValueError)


def test_flatten_group_norm():
    check_op(lambda x: x.reshape(x.shape[0], -1), (rnd(2, 3, 4, 5),))

    def group_norm(x, groups, weight, bias):
        n, c = x.shape[:2]
        g = x.reshape(n, groups, -1)
        g = (g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-5)
        return g.reshape(x.shape) * weight[:, None, None] + bias[:, None, None]

    check_op(group_norm, (rnd(2, 3, 24, 5, 7), 3, rnd(24), rnd(24)), in_axes=(0, None, None, None))
    check_op(group_norm, (rnd(2, 3, 24, 5, 7), 4, rnd(2, 24), rnd(2, 24)), in_axes=(0, None, 0, 0))


def _result_type(*args):
    return np.ones((), dtype=np.result_type(*args))


def test_result_type():
    op = _result_type
    f32, f64, i64 = np.float32, np.float64, np.int64
    check_op(op, (rnd(2, dtype=f32), rnd(2, dtype=f64)))
    check_op(op, (rnd(2, dtype=f32), rnd(2, dtype=i64)))
    check_op(lambda x: op(x, 1), (rnd(2, dtype=f32),))
    check_op(lambda x: op(x, 1.6), (rnd(2, dtype=f32),))
    check_op(lambda x: op(x, np.array(1)), (rnd(2, dtype=f32),))
    check_op(lambda x: op(x, np.array(1.6, dtype=f64)), (rnd(2, dtype=f32),))
    check_op(op, (rnd(2, 2, dtype=f32), rnd(2, 2, dtype=f64)))
    check_op(op, (rnd(2, 2, dtype=f32), rnd(2, 2, dtype=i64)))
    check_op(lambda x: op(x, 1), (rnd(2, 2, dtype=f32),))
    check_op(lambda x: op(x, 1.6), (rnd(2, 2, dtype=f32),))
    check_op(op, (rnd(2, 2, dtype=f32), rnd(2, dtype=f64)))
    check_op(op, (rnd(2, 2, dtype=f32), rnd(2, dtype=i64)))
    check_op(lambda x: op(x, np.int8(3)), (rnd(2, 2, dtype=np.uint8),))
    check_op(lambda x: op(x, 300), (rnd(2, 2, dtype=np.int8),))
    check_op(lambda x: op(x.sum(), np.float32(2)), (rnd(2, 2, dtype=np.int16),))


@pytest.mark.parametrize(
    "op,args,in_axes",
    [
        (np.array_split, (rand(B0, 2, 64), 5, -1), (0, None, None)),
        (np.array_split, (rand(2, B0, 64), 15, 1), (1, None, None)),
        (np.array_split, (rand(2, B0, 64), 70, 1), (1, None, None)),
        (np.array_split, (rand(B0, 2, 64), [5, 10, 37, 50], -1), (0, None, None)),
        (np.array_split, (rand(2, B0, 64), [5, 10, 21, 34, 0, 37, 50], 1), (1, None, None)),
        (np.split, (rand(B0, 2, 64), 4, -1), (0, None, None)),
        (np.split, (rand(2, B0, 64), [10, 20, 30], 1), (1, None, None)),
        (np.split, (rand(B0, 2, 60), list(range(6, 60, 6)), -1), (0, None, None)),
        (np.hsplit, (rand(B0, 2, 6), 3), (0, None)),
        (np.vsplit, (rand(6, B0, 6), 2), (1, None)),
        (np.dsplit, (rand(2, 3, B0, 4), [1, 3]), (2, None)),
    ],
)
def test_split_chunk_tensor_split(op, args, in_axes):
    check_op(op, args, in_axes)


def test_split_nested():
    check(
        lambda vm: vm(vm(np.array_split, in_axes=(0, None, None)), in_axes=(2, None, None)),
        rand(B1, 103, B0, 5),
        25,
        0,
    )
    check(
        lambda vm: vm(vm(lambda t: np.array_split(t, 4, 1), in_axes=2), in_axes=2),
        rand(B1, 2, B0, 64, B2),
    )
    check(
        lambda vm: vm(vm(lambda t: np.split(t, [4, 8, 9, 34, 29], 1), in_axes=2), in_axes=2),
        rand(B1, 2, B0, 64, B2),
    )
    check_raises_like_loop(
        lambda vm: vm(lambda t: np.split(t, 3, axis=-1)), rand(B0, 2, 64), exc=ValueError
    )


def test_trace():
    check_op(np.trace, (rand(B0, 2, 5),))
    check_op(np.trace, (rand(2, B0, 5),), in_axes=1)
    check(lambda vm: vm(vm(np.trace), in_axes=2), rand(B1, 2, B0, 5))
    check(lambda vm: vm(vm(np.trace, in_axes=2), in_axes=2), rand(B1, 2, B0, 5, B2))
    check_op(lambda x: np.trace(x, offset=1), (rand(B0, 4, 5),))
    check_op(lambda x: np.trace(x, offset=-1, axis1=1, axis2=2), (rand(3, B0, 4, 5),), in_axes=1)
    check_op(lambda x: np.trace(x, axis1=-1, axis2=0), (rand(3, 4, B0, 3),), in_axes=2, out_axes=1)
    check_op(np.trace, (rnd(B0, 3, 3, dtype=np.int8),))
    check_op(np.trace, (rnd(B0, 3, 3, dtype=np.bool_),))


def test_transpose():
    op = np.swapaxes
    check_op(lambda x: op(x, 0, 1), (rand(B0, 2, 5),))
    check_op(lambda x: op(x, -1, -2), (rand(B0, 2, 5),))
    check_op(lambda x: op(x, 3, 1), (rand(B0, 2, 5, 4, 6),))
    check_op(lambda x: op(x, 1, 0), (rand(2, B0, 5),), in_axes=1)
    check(lambda vm: vm(vm(lambda x: op(x, 0, 1)), in_axes=2), rand(B1, 2, B0, 5))
    check(lambda vm: vm(vm(lambda x: op(x, 0, 1), in_axes=2), in_axes=2), rand(B1, 2, B0, 5, B2))
    # functorch's scalar special case: NumPy refuses axes of a 0-d array.
    for d1, d2 in itertools.product([0, -1], [0, -1]):
        check_op(lambda x, d1=d1, d2=d2: op(x, d1, d2), (rand(B0, 1),))
        check_raises_like_loop(lambda vm, d1=d1, d2=d2: vm(lambda x: op(x, d1, d2)), rand(B0))


@numpy2_only
def test_t_and_T():
    for op in (np.transpose, lambda t: t.T, lambda t: t.mT, lambda t: np.matrix_transpose(t)):
        check_op(op, (rand(B0, 2, 5),))
        check_op(op, (rand(2, B0, 5),), in_axes=1)
        check(lambda vm, op=op: vm(vm(op), in_axes=2), rand(B1, 2, B0, 5))
        check(lambda vm, op=op: vm(vm(op, in_axes=2), in_axes=2), rand(B1, 2, B0, 5, B2))
    for op in (lambda t: t.T, np.transpose):
        check_op(op, (rand(B0, 2, 3, 5),))
        check_op(op, (rand(2, B0, 3, 5),), in_axes=1)
        check(lambda vm, op=op: vm(vm(op), in_axes=2), rand(B1, 2, B0, 3, 5))
        check(lambda vm, op=op: vm(vm(op, in_axes=2), in_axes=2), rand(B1, 2, B0, 3, B2, 5))
        check_op(op, (rand(B0),))
        check_op(op, (rand(B0, 4),))


@pytest.mark.parametrize(
    "op",
    [
        lambda t: t.astype(np.float64),
        lambda t: t.astype(np.float32),
        lambda t: t.astype(np.int32),
        lambda t: t.astype(np.int64),
        lambda t: t.astype(bool),
        lambda t: t.astype(np.complex128),
        lambda t: np.asarray(t, dtype=np.float16),
        lambda t: np.astype(t, np.uint8),
        lambda t: t.astype("f4") + np.float64(1),
        lambda t: np.float32(2) * t,
        lambda t: t * np.float32(2),
        lambda t: t.real.astype(np.int16) + np.int16(1),
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.bool_, np.complex128])
def test_to_astype(op, dtype):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
        check_op(op, (rnd(B0, dtype=dtype),))
        check_op(op, (rnd(B0, 3, dtype=dtype),), in_axes=1)
        check(lambda vm: vm(vm(op)), rnd(B0, B1, 3, dtype=dtype))


def test_to_other_dtype():
    check_op(lambda t, o: t.astype(o.dtype), (rand(B0), rnd(B0, dtype=np.float32)))
    check_op(lambda t, o: t.astype(o.dtype), (rand(B0), rnd(B0, dtype=np.int8)), in_axes=(0, None))
    check_op(
        lambda t, o: np.asarray(t, dtype=o.dtype) + o, (rand(B0, 2), rnd(B0, 2, dtype=np.float32))
    )


def _unfold(t, dim, size, step):
    dim = dim % t.ndim
    w = sliding_window_view(t, size, axis=dim)
    idx = [slice(None)] * w.ndim
    idx[dim] = slice(None, None, step)
    return w[tuple(idx)]


def test_unfold_sliding_window_view():
    op = _unfold
    n = (None, None, None)
    check_op(op, (rand(3, 7, 11), 0, 2, 1), in_axes=(0, *n))
    check_op(op, (rand(7, 3, 11), 1, 4, 2), in_axes=(1, *n))
    check(lambda vm: vm(vm(op, in_axes=(0, *n)), in_axes=(2, *n)), rand(2, 7, 3, 11), 1, 5, 1)
    check(
        lambda vm: vm(vm(vm(op, in_axes=(2, *n)), in_axes=(0, *n)), in_axes=(2, *n)),
        rand(2, 7, 3, 11, 5),
        -1,
        2,
        4,
    )
    check_op(lambda t: sliding_window_view(t, (2, 3)), (rand(3, 4, 5),), in_axes=1)
    check_op(lambda t: sliding_window_view(t, 3, axis=-1).sum(-1), (rand(3, 4, 5),), in_axes=0)
    check_op(lambda t: sliding_window_view(t, 2, axis=(0, 0)), (rand(3, 4, 5),), in_axes=2)


def test_unbind():
    check_op(lambda t, d: tuple(np.moveaxis(t, d, 0)), (rand(B0, 2, 64), -1), in_axes=(0, None))
    check_op(lambda t: list(t), (rand(B0, 2, 0),))
    check_op(lambda t: tuple(t), (rand(2, B0, 7),), in_axes=1)
    check_op(lambda t: [r for r in t], (rand(2, B0, 7),), in_axes=1)
    check_op(lambda t: tuple(np.unstack(t, axis=1)), (rand(2, 5, B0),), in_axes=2)
    check(
        lambda vm: vm(vm(lambda t: tuple(np.unstack(t, axis=1)), in_axes=2), in_axes=2),
        rand(B1, 2, B0, 4, B2),
    )
    check_op(lambda t: sum(t), (rand(B0, 3, 4),), in_axes=1)
    check_op(
        lambda t: np.array([a * b for a, b in zip(t, t[::-1], strict=False)]),
        (rand(B0, 3, 4),),
        in_axes=2,
    )


def test_one_hot():
    def one_hot_cmp(idx, n=4):
        return (idx[..., None] == np.arange(n)).astype(np.int64)

    def one_hot_eye(idx, n=4):
        return np.eye(n, dtype=np.int64)[idx]

    idx0 = np.random.default_rng(0).integers(0, 3, (5,))
    idx3 = np.random.default_rng(1).integers(0, 4, (5, 2, 3, 4))
    for op in (one_hot_cmp, one_hot_eye):
        check_op(op, (idx0,))
        check_op(op, (idx3,))
        check_op(op, (idx3,), in_axes=2, out_axes=-1)
        check(lambda vm, op=op: vm(vm(op), in_axes=1), idx3)

    def scatter_one_hot(idx):
        out = np.zeros(idx.shape + (4,), np.int64)
        np.put_along_axis(out, idx[..., None], 1, axis=-1)
        return out

    check_op(scatter_one_hot, (idx3,), in_axes=1)


def test_as_strided():
    # functorch's test_as_strided: strides read from the example inside f.
    def expand(t):
        s0, s1 = t.strides
        return as_strided(t, (5, 5, 2, 3), (0, 0, s0, s1))

    def transpose(t):
        s0, s1 = t.strides
        return as_strided(t, (3, 2), (s1, s0))

    def diagonal(t):
        s0, s1 = t.strides
        return as_strided(t, (2,), (s0 + s1,))

    tensors = [
        rnd(5, 2, 3),
        rnd(5, 3, 2).transpose(0, 2, 1),
        np.moveaxis(rnd(3, 2, 5), -1, 0).transpose(0, 2, 1),
        rnd(2, 5, 2, 3)[1],
        np.moveaxis(rnd(2, 2, 5, 3)[1], 1, 0),
        rnd(5, 2, 4, 3, 7)[:, :, 0, :, 0],
        rnd(5, 2, 4, 3, 7)[:, :, 2, :, 1],
    ]
    for x in tensors:
        for op in (expand, transpose, diagonal):
            check_op(op, (x,))
            check_op(op, (np.moveaxis(x, 0, -1),), in_axes=-1)


def test_nll_loss():
    def nll_loss(y, t, reduction="mean"):
        picked = -np.take_along_axis(y, t[:, None], axis=1)[:, 0]
        return {"mean": picked.mean(), "sum": picked.sum(), "none": picked}[reduction]

    y, t = rnd(3, 2, 5), np.random.default_rng(0).integers(0, 5, (3, 2))
    for red in ("mean", "sum", "none"):
        op = functools.partial(nll_loss, reduction=red)
        check_op(op, (y, t))
        check_op(op, (y, t[0]), in_axes=(0, None))
        check_op(op, (y[0], t), in_axes=(None, 0))


def test_avg_pool():
    def pool(x):  # 2x2 average pooling of the last two axes
        h, w = x.shape[-2] // 2 * 2, x.shape[-1] // 2 * 2
        x = x[..., :h, :w]
        return x.reshape(*x.shape[:-2], h // 2, 2, w // 2, 2).mean(axis=(-3, -1))

    x = rnd(3, 5, 7, 9, 11)
    check_op(pool, (x,))
    check_op(pool, (x,), in_axes=1)
    check_op(pool, (x,), in_axes=4)


def test_convolve():
    check_op(lambda x, w: np.convolve(x, w, mode="valid"), (rnd(5, 15), rnd(5, 3)))
    check_op(lambda x, w: np.convolve(x, w), (rnd(5, 15), rnd(3)), (0, None))
    check_op(lambda x, w: np.correlate(x, w, mode="same"), (rnd(15), rnd(3, 5)), (None, 1))

    def conv2d(x, w):  # x (C, H, W), w (O, C, kh, kw)
        win = sliding_window_view(x, w.shape[-2:], axis=(1, 2))
        return np.einsum("chwij,ocij->ohw", win, w)

    check_op(conv2d, (rnd(2, 4, 15, 20), rnd(8, 4, 3, 3)), (0, None))
    check_op(conv2d, (rnd(4, 15, 20), rnd(2, 8, 4, 3, 3)), (None, 0))
    check_op(conv2d, (rnd(4, 15, 2, 20), rnd(8, 4, 3, 3, 2)), (2, -1))


def test_pad():
    check_op(lambda x: np.pad(x, 1), (rnd(B0, 3, 4),))
    check_op(lambda x: np.pad(x, ((1, 0), (0, 2))), (rnd(3, B0, 4),), in_axes=1)
    check_op(lambda x: np.pad(x, 2, mode="reflect"), (rnd(3, 4, B0),), in_axes=-1, out_axes=1)
    check_op(lambda x: np.pad(x, (1, 2), mode="edge"), (rnd(B0, 3, 4),))
    check_op(lambda x: np.pad(x, 1, mode="wrap"), (rnd(B0, 3, 4),))
    check_op(lambda x: np.pad(x, 1, constant_values=(4, 5)), (rnd(B0, 3, dtype=np.int64),))
    check_op(lambda x, v: np.pad(x, 1, constant_values=v), (rnd(B0, 3), rnd(B0)))


@pytest.mark.parametrize("k", [0, 1, -1])
def test_tril_triu(k):
    for op in (np.tril, np.triu):
        check_op(lambda x, op=op: op(x, k), (rnd(B0, 3, 4),))
        check_op(lambda x, op=op: op(x, k), (rnd(3, B0, 4),), in_axes=1)
        check_op(lambda x, op=op: op(x, k), (rnd(3, 4, 2, B0),), in_axes=-1)
        check_op(lambda x, op=op: op(x, k), (rnd(B0, 4),))
    check_op(lambda x: x[np.tril_indices(3, k)], (rnd(B0, 3, 3),))
    check_op(lambda x: x[np.triu_indices_from(x, k)], (rnd(3, B0, 3),), in_axes=1)


def test_diag_embed():
    def diag_embed(v):
        return v[..., None] * np.eye(v.shape[-1], dtype=v.dtype)

    check_op(diag_embed, (rnd(3, 3, 5),))
    check(lambda vm: vm(vm(diag_embed)), rnd(3, 3, 5))
    check_op(diag_embed, (rnd(3, 3, 5),), in_axes=1)

    def diag_embed_setitem(v):
        out = np.zeros(v.shape + v.shape[-1:], v.dtype)
        i = np.arange(v.shape[-1])
        out[..., i, i] = v
        return out

    check_op(diag_embed_setitem, (rnd(3, 3, 5),))
    check_op(diag_embed_setitem, (rnd(3, 3, 5, dtype=np.int64),), in_axes=2)


@pytest.mark.parametrize(
    "op",
    [
        lambda c, x, y: np.where(c, x, y),
        lambda c, x, y: np.where(c > 0.5, x, 0.0),
        lambda c, x, y: np.where(c, x, y.astype(np.float32)),
        lambda c, x, y: np.where(x > 0, x, np.nan),
        lambda c, x, y: np.select([x > 0, y > 0], [x, y], default=-1.0),
        lambda c, x, y: np.piecewise(x, [x < 0, x >= 0], [-1.0, lambda v: v * 2]),
        lambda c, x, y: np.ma.filled(np.ma.masked_where(c, x), 0.0),
        lambda c, x, y: np.putmask(x, c, y) or x,
        lambda c, x, y: np.place(x, c, [9.0]) or x,
    ],
)
def test_where_masked_fill(op):
    c, x, y = rnd(B0, 3, 2, dtype=np.bool_), rnd(B0, 3, 2), rnd(B0, 3, 2, seed=3)
    check_op(op, (c, x, y))
    check_op(op, (c[0], x, y), in_axes=(None, 0, 0))
    check_op(op, (c, x[0], y), in_axes=(0, None, 0))
    check_op(op, (np.moveaxis(c, 0, -1), x, np.moveaxis(y, 0, 1)), in_axes=(-1, 0, 1), out_axes=-1)
    check(
        lambda vm: vm(vm(op), in_axes=(0, 1, None)),
        rnd(B0, 3, 2, dtype=np.bool_),
        rnd(3, B0, 2),
        y[0],
    )


def test_masked_fill_scalar_and_boolean_index():
    check_op(lambda x, m: np.where(m, 0.0, x), (rnd(B0, 5), rnd(B0, 5, dtype=np.bool_)))

    def masked_fill_setitem(x, m):
        x[m] = -1.0
        return x

    check_op(masked_fill_setitem, (rnd(B0, 5), rnd(B0, 5, dtype=np.bool_)))
    check_op(masked_fill_setitem, (rnd(B0, 5), rnd(5, dtype=np.bool_)), (0, None))
    check_op(lambda x: x[x > 0].sum(), (rnd(B0, 5),))
    check_op(lambda x: np.nonzero(x > 0)[0].size, (rnd(B0, 5),))


# --------------------------------------------------------------------------------------
# TestVmapOperatorsOpInfo: the manual tests (indexing, index_put, linalg, return types)
# --------------------------------------------------------------------------------------


def _all_in_axes(args, batch=3):
    """functorch's generate_vmap_inputs: every argument batched at 0 / at -1 / unbatched."""
    for choice in itertools.product([None, 0, -1], repeat=len(args)):
        if all(c is None for c in choice):
            continue
        new = []
        for a, c in zip(args, choice, strict=False):
            if c is None:
                new.append(a)
            else:
                stacked = np.stack([a + (i if a.dtype.kind == "f" else 0) for i in range(batch)])
                new.append(np.moveaxis(stacked, 0, c) if c == -1 else stacked)
        yield tuple(new), choice


def _exhaustive(op, args):
    for new_args, in_axes in _all_in_axes(args):
        check_op(op, new_args, in_axes)


def test_advanced_indexing():
    def f(x, idx):
        return x[:, idx]

    def f2(x, idx):
        return x[idx, :]

    def f3(x, idx):
        return x[:, :, idx]

    def f4(x, idx):
        return x[..., idx, 1:]

    def f5(x, idx):
        return x[idx, :, idx]

    inps = (rnd(5, 5, 5), rnd(5, 5, 5, 5))
    idxes = (
        np.array([0, 1, 2]),
        np.array([0, 1, 2]).reshape(3, 1),
        np.array([0, 1, 2]).reshape(3, 1, 1),
    )
    for inp, idx in itertools.product(inps, idxes):
        for op in (f, f2, f3, f4, f5):
            _exhaustive(op, (inp, idx))


@numpy2_only
def test_take_along_axis_and_take():
    x = rnd(4, 5)
    idx = np.random.default_rng(0).integers(0, 5, (4, 3))
    _exhaustive(lambda x, i: np.take_along_axis(x, i, axis=1), (x, idx))
    _exhaustive(lambda x, i: np.take_along_axis(x, i.T[:, :4] % 4, axis=0), (x, idx))
    _exhaustive(lambda x, i: np.take(x, i), (x, idx))
    _exhaustive(lambda x, i: np.take(x, i, axis=-1), (x, idx))
    _exhaustive(lambda x, i: np.take(x, i, axis=0, mode="wrap"), (x, idx))
    _exhaustive(lambda x, i: np.take(x, i - 2, axis=1, mode="clip"), (x, idx))
    _exhaustive(lambda x, i: x.flat[i], (x, idx))
    _exhaustive(lambda x, i: np.choose(i % 2, [x[:, :3], -x[:, :3]]), (x, idx))
    _exhaustive(lambda x, i: np.compress(i[0] > 2, x, axis=1), (x, idx))


def test_put_along_axis_scatter():
    x = rnd(4, 5)
    idx = np.random.default_rng(0).integers(0, 5, (4, 3))
    v = rnd(4, 3, seed=4)

    def scatter(x, i, v):
        np.put_along_axis(x, i, v, axis=1)
        return x

    def put(x, i, v):
        np.put(x, i, v)
        return x

    def add_at(x, i, v):
        np.add.at(x, (np.arange(4)[:, None], i), v)
        return x

    def setitem(x, i, v):
        x[np.arange(4)[:, None], i] = v
        return x

    def iadd_fancy(x, i, v):
        x[np.arange(4)[:, None], i] += v
        return x

    for op in (scatter, put, setitem, iadd_fancy):
        _exhaustive(op, (x, idx, v))
    # add_at into a mapped x (x unmapped: see test_ufunc_at_into_unmapped_argument)
    for new_args, in_axes in _all_in_axes((x, idx, v)):
        if in_axes[0] is not None:
            check_op(add_at, new_args, in_axes)


@pytest.mark.parametrize("ufunc", [np.add, np.multiply])
def test_ufunc_at_into_unmapped_argument(ufunc):
    # vmapx: an in_axes=None array is read-only inside f and the caller's array is never
    # written; np.put/np.put_along_axis/x[i] = v raise "read-only" there. NumPy's ufunc.at
    # does not check the writeable flag, so vmap must not hand it the caller's memory.
    def f(x, v):
        ufunc.at(x, [0, 0, 2], v)
        return x

    x = np.ones(3)
    try:
        vmapx.vmap(f, in_axes=(None, 0))(x, np.array([2.0, 10.0]))
    except ValueError:
        pass
    np.testing.assert_array_equal(x, np.ones(3))


def test_index_put():
    def f(x, y, z):
        x[y] = z
        return x

    x = rnd(3, 4, 5)
    y = np.zeros((3, 2), np.int64)
    z = rnd(3, 2, 5)
    for in_axes in [(0, 0, 0), (0, None, None), (0, None, 0), (0, 0, None)]:
        a = tuple(arr if ax == 0 else arr[0] for arr, ax in zip((x, y, z), in_axes, strict=False))
        check_op(f, a, in_axes)

    def f_inner(t, idx, values):
        t[:, idx] = values
        return t

    t = np.zeros((3, 2, 3))
    values = np.ones((3, 1, 2))
    idx = np.broadcast_to(np.array([[1, 2]]), (3, 2)).copy()
    for in_axes in [(0, 0, 0), (0, None, None), (0, None, 0), (0, 0, None)]:
        a = tuple(
            arr if ax == 0 else arr[0] for arr, ax in zip((t, idx, values), in_axes, strict=False)
        )
        check_op(f_inner, a, in_axes)

    def f_middle(t, idx, values):
        t[:, idx, :] = values
        return t

    t = np.zeros((3, 2, 3, 3))
    values = np.ones((3, 1, 2, 3))
    idx = np.broadcast_to(np.array([[0, 2]]), (3, 2)).copy()
    for in_axes in [(0, 0, 0), (0, None, None), (0, None, 0), (0, 0, None)]:
        a = tuple(
            arr if ax == 0 else arr[0] for arr, ax in zip((t, idx, values), in_axes, strict=False)
        )
        check_op(f_middle, a, in_axes)

    def f_slices(t, values):
        t[:, :2, :] = values
        return t

    check_op(f_slices, (t, values), (0, 0))
    check_op(f_slices, (t, values[0]), (0, None))

    def index_put(t, idx, v):
        t[(np.array([[0], [1], [2]]),) + tuple(idx)] = v
        return t

    tensor, value = np.zeros((3, 3, 4)), np.ones((3, 2))
    idxs = (np.array([[0]]), np.array([1, 2]))
    check_op(index_put, (tensor, idxs, value), (0, (None, None), 0))
    check_op(index_put, (tensor, idxs, value[0]), (0, (None, None), None))


def test_nested_advanced_indexing():
    e = rand(7, 4)
    idx = np.array([0, 1]).reshape(2, 1)

    def with_vmap(vm):
        def g(idx_):
            def f(e_):
                return e_[idx_]

            return vm(f, in_axes=1)(e)

        return vm(g)

    check(with_vmap, idx)


def test_inplace_on_view():
    def func(leaf):
        base = leaf * leaf
        view = base.T
        view[2:4, 2:4] *= 2
        d = view[0:2, 0:2].diagonal()
        view[0:2, 0:2][np.arange(2), np.arange(2)] = np.sin(d)
        view = view[1:3, 1:3]
        np.cos(view, out=view)
        return view, base

    for args, in_axes in _all_in_axes((rnd(4, 4),)):
        check_op(func, args, in_axes)


LINALG_2D = {
    "inv": np.linalg.inv,
    "det": np.linalg.det,
    "slogdet": np.linalg.slogdet,
    "eigvals": np.linalg.eigvals,
    "eigvalsh": np.linalg.eigvalsh,
    "cholesky": np.linalg.cholesky,
    "qr_r": lambda a: np.linalg.qr(a, mode="r"),
    "svdvals": lambda a: np.linalg.svd(a, compute_uv=False),
    "pinv": np.linalg.pinv,
    "matrix_power": lambda a: np.linalg.matrix_power(a, 3),
    "matrix_rank": np.linalg.matrix_rank,
    "cond": np.linalg.cond,
    "norm_fro": lambda a: np.linalg.norm(a, "fro"),
    "norm_2": lambda a: np.linalg.norm(a, 2),
    "norm_nuc": lambda a: np.linalg.norm(a, "nuc"),
    "tensorinv": lambda a: np.linalg.tensorinv(a, ind=1),
}
# NumPy 2's array-API spellings
LINALG_2D.update(
    {
        name: getattr(np.linalg, name)
        for name in ("matrix_norm", "trace", "diagonal")
        if hasattr(np.linalg, name)
    }
)


def _spd(*batch, n=3, seed=0):
    a = rnd(*batch, n, n, seed=seed)
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


@pytest.mark.parametrize("name", list(LINALG_2D))
def test_linalg_ops(name):
    op = LINALG_2D[name]
    check_op(op, (_spd(B0),))
    check_op(op, (np.moveaxis(_spd(B0), 0, -1),), in_axes=-1)
    check_op(op, (np.moveaxis(_spd(B0), 0, 1),), in_axes=1, out_axes=-1)
    check(lambda vm: vm(vm(op), in_axes=1), _spd(3, B0))
    if name not in ("cholesky", "eigvalsh"):
        check_op(op, (rnd(B0, 3, 3, dtype=np.float32) + 3 * np.eye(3, dtype=np.float32),))


@pytest.mark.parametrize("name", list(LINALG_2D))
def test_linalg_failure_1d_input(name):
    # functorch's test_vmap_linalg_failure_1D_input: examples are 1-D, so NumPy refuses;
    # vmap must not treat the batch as one matrix.
    op = LINALG_2D[name]
    if name in (
        "matrix_rank",
        "cond",
        "trace",
        "diagonal",
        "tensorinv",
        "norm_fro",
        "norm_2",
        "norm_nuc",
    ):
        pass
    check(lambda vm: vm(op), _spd(n=3))


def test_linalg_decompositions():
    def eigh_abs(a):
        w, v = np.linalg.eigh(a)
        return w, np.abs(v)  # sign-fix the eigenvectors

    def qr_fixed(a):
        q, r = np.linalg.qr(a)
        s = np.sign(np.diagonal(r))
        return q * s, r * s[:, None]

    def svd_fixed(a):
        u, s, vh = np.linalg.svd(a)
        return np.abs(u), s, np.abs(vh)

    def lstsq(a, b):
        return np.linalg.lstsq(a, b)[0]

    for op in (eigh_abs, qr_fixed, svd_fixed):
        check_op(op, (_spd(B0),))
        check_op(op, (np.moveaxis(_spd(B0), 0, 2),), in_axes=2)
    check_op(lstsq, (rnd(B0, 5, 3), rnd(B0, 5)))
    check_op(lstsq, (rnd(5, 3), rnd(5, B0)), in_axes=(None, 1))
    check_op(np.linalg.solve, (_spd(B0), rnd(3, 2)), in_axes=(0, None))
    check_op(np.linalg.solve, (_spd(), rnd(B0, 3)), in_axes=(None, 0))
    check_op(lambda a, b: np.linalg.tensorsolve(a, b), (_spd(B0), rnd(B0, 3)))


def test_linalg_namedtuple_return_types():
    t = _spd(3, n=2)
    for op in (np.linalg.eigh, np.linalg.slogdet, lambda a: np.linalg.svd(a), np.linalg.qr):
        out = vmapx.vmap(op)(t)
        assert type(out) is type(op(t[0])), (type(out), type(op(t[0])))
    out = vmapx.vmap(np.linalg.eig)(t)
    assert type(out) is type(np.linalg.eig(t[0]))
    assert_same(np.sort(out.eigenvalues.real, -1), np.sort(np.linalg.eigvals(t).real, -1))


def test_multi_dot():
    check_op(np.linalg.multi_dot, ([rnd(3, 2, 3), rnd(3, 3, 4), rnd(3, 4)],))
    check_op(np.linalg.multi_dot, ([rnd(3, 3), rnd(3, 3, 4), rnd(3, 4, 2)],), in_axes=([0, 0, 0],))
    check_op(
        np.linalg.multi_dot, ([rnd(3, 3), rnd(3, 3, 4), rnd(4, 2)],), in_axes=([None, 0, None],)
    )


def test_multi_dot_failure_1d_input():
    inputs = [rnd(3, 3), rnd(3, 3), rnd(3, 3)]
    check_raises_like_loop(lambda vm: vm(np.linalg.multi_dot), inputs, exc=ValueError)


@pytest.mark.parametrize(
    "op",
    [
        np.fft.fft,
        np.fft.ifft,
        np.fft.rfft,
        lambda x: np.fft.irfft(x, n=6),
        np.fft.fft2,
        lambda x: np.fft.fftn(x, axes=(0,)),
        lambda x: np.fft.fft(x, n=8, axis=0),
        lambda x: np.fft.rfft2(x, s=(3, 4)),
        np.fft.fftshift,
        lambda x: np.fft.ifftshift(x, axes=0),
        lambda x: np.fft.hfft(x, axis=0),
        lambda x: np.fft.fft(x, norm="ortho"),
    ],
)
@pytest.mark.parametrize("dtype", [np.float64, np.complex128, np.float32])
def test_fft(op, dtype):
    check_op(op, (rnd(B0, 4, 5, dtype=dtype),))
    check_op(op, (rnd(4, B0, 5, dtype=dtype),), in_axes=1)
    check_op(op, (rnd(4, 5, B0, dtype=dtype),), in_axes=-1, out_axes=-1)
    check(lambda vm: vm(vm(op), in_axes=1), rnd(4, B0, 3, 5, dtype=dtype))


# --------------------------------------------------------------------------------------
# TestVmapBatchedGradient: vmap over vjp (batched cotangents) and over grad
# --------------------------------------------------------------------------------------


def _batched_grad_test(op, args, argnums=0, batch=3):
    """vmap of a VJP over batched cotangents equals the loop of VJPs."""
    out, vjp_fn = vmapx.vjp(op, *args)
    outs = out if isinstance(out, tuple) else (out,)
    for contig in (True, False):
        vs = []
        for o in outs:
            if contig:
                vs.append(rnd(batch, *np.shape(o), seed=len(vs)))
            else:  # functorch's construct_v: batch axis last in memory
                vs.append(np.moveaxis(rnd(*np.shape(o), batch, seed=len(vs)), -1, 0))

        def vjp_of(*vectors):
            ct = vectors if isinstance(out, tuple) else vectors[0]
            return vjp_fn(ct)

        check(lambda vm: vm(vjp_of), *vs)


def _batched_grad_grad_test(op, args):
    """vmap over the VJP of a gradient (Hessian-vector products) equals the loop."""

    def first(*a):
        return vmapx.grad(lambda *b: np.sum(op(*b)), argnums=tuple(range(len(a))))(*a)

    g = first(*args)
    _, vjp_fn = vmapx.vjp(first, *args)
    vs = [rnd(3, *np.shape(gi), seed=i) for i, gi in enumerate(g)]
    check(lambda vm: vm(lambda *v: vjp_fn(tuple(v))), *vs)


def _rand_no_zeros(*shape):
    return np.maximum(rand(*shape), 0.1)


BATCHED_GRAD_BINARY = [
    np.add,
    lambda x, y: x + y,
    np.subtract,
    lambda x, y: x - y,
    np.multiply,
    lambda x, y: x * y,
    np.divide,
    lambda x, y: x / y,
]


@pytest.mark.parametrize("op", BATCHED_GRAD_BINARY)
def test_batched_grad_arithmetic(op):
    x, y = rnd(2, 3), _rand_no_zeros(2, 3)
    _batched_grad_test(op, (x, y))
    _batched_grad_test(lambda y: op(3.14, y), (y,))
    _batched_grad_test(lambda x: op(x, 3.14), (x,))
    _batched_grad_grad_test(op, (x, y))


def _log_softmax(x):
    m = x.max(-1, keepdims=True)
    return x - m - np.log(np.sum(np.exp(x - m), axis=-1, keepdims=True))


BATCHED_GRAD_UNARY = {
    "bce": lambda x: -np.mean(0.3 * np.log(x) + 0.7 * np.log(1 - x)),
    "log_softmax": _log_softmax,
    "expand": lambda x: np.broadcast_to(x, (5, 5, 2, 3)),
    "index": lambda x: (x * x)[np.array([[0, 0], [1, 1]])],
    "log": np.log,
    "logsumexp": lambda x: np.log(np.sum(np.exp(x), axis=-1)),
    "log1p": np.log1p,
    "max": np.max,
    "median": np.median,
    "min": np.min,
    "permute": lambda x: np.transpose(x.reshape(2, 3, 1) * np.ones(5), (2, 0, 1)),
    "reshape": lambda x: x.reshape(3, 2),
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "select": lambda x: x[1],
    "select_axis": lambda x: x[:, 2],
    "slice": lambda x: x[0:1],
    "slice2": lambda x: x[:, 1:3],
    "slice3": lambda x: x[..., 1:3],
    "trace": np.trace,
    "threshold": lambda x: np.where(x > 0.5, x, 0.0),
    "diagonal": lambda x: np.diagonal(x, 1, 0, 1),
    "inplace_view": lambda x: np.cos((x * x)[0]),
    "sort": lambda x: np.sort(x, axis=-1),
    "cumsum": lambda x: np.cumsum(x, axis=0),
    "norm": lambda x: np.linalg.norm(x),
    "det": lambda x: np.linalg.det(x[:, :2]),
    "stack": lambda x: np.stack([x, x * 2]),
    "concat": lambda x: np.concatenate([x, x[:, :1]], axis=1),
    "clip": lambda x: np.clip(x, 0.2, 0.7),
    "take_along": lambda x: np.take_along_axis(x, np.array([[2, 0], [1, 1]]), axis=1),
    "matmul": lambda x: x @ x.T,
    "mean_var": lambda x: (np.mean(x, 0), np.var(x, 1)),
}


@pytest.mark.parametrize("name", list(BATCHED_GRAD_UNARY))
def test_batched_grad_unary(name):
    op = BATCHED_GRAD_UNARY[name]
    x = _rand_no_zeros(2, 3) * 0.9
    _batched_grad_test(op, (x,))
    if name not in (
        "expand",
        "reshape",
        "select",
        "select_axis",
        "slice",
        "slice2",
        "slice3",
        "permute",
        "stack",
        "concat",
        "take_along",
        "trace",
        "diagonal",
        "mean_var",
    ):
        _batched_grad_grad_test(op, (x,))


def test_batched_grad_stack():
    _batched_grad_test(lambda x, y: np.stack([x, y]), (rnd(2, 3), rnd(2, 3, seed=1)))


def test_batched_grad_inplace_view():
    def func(leaf):
        base = leaf * leaf
        view = base[0]
        np.cos(view, out=view)
        return view

    def func_many(leaf):
        base = leaf * leaf
        view = base.transpose(2, 1, 0)[1]
        d = np.diagonal(view)[::2]
        return np.cos(d)

    # functorch supports in-place ops on views under autograd; vmapx refuses them with a
    # clear error (a documented limit).
    with pytest.raises(errors.ConcretizationError):
        _batched_grad_test(func, (rnd(4, 5),))
    _batched_grad_test(func_many, (rnd(4, 4, 5),))


def test_vmap_grad_trace_is_zero():
    def sum_grad_trace(x):
        return vmapx.grad(np.trace)(x).sum()

    x = rnd(3, 2, 2)
    out = check(lambda vm: vm(vmapx.grad(sum_grad_trace)), x)
    assert_same(out, np.zeros_like(x))


def test_unrelated_output():
    x, y = rnd(1)[0], rnd(1, seed=1)[0]

    def vjp(v):
        _, fn = vmapx.vjp(lambda x: y * 1.0, x)
        return fn(v)[0]

    out = vmapx.vmap(vjp)(rnd(3))
    assert_same(np.asarray(out), np.zeros(3))


def test_unsafe_view_grad_matmul():
    def baz(x, y):
        return (x @ y).sum()

    check(lambda vm: vm(vmapx.grad(baz)), rnd(2, 2, 3, 3), rnd(2, 3, 3))
    check(
        lambda vm: vm(vmapx.grad(baz, argnums=(0, 1)), in_axes=(0, None)),
        rnd(2, 2, 3, 3),
        rnd(3, 3),
    )


def test_vmap_with_anomaly_like_nan():
    check(lambda vm: vm(vmapx.grad(lambda x: x.sum())), np.zeros(3) - 1)
    check(lambda vm: vm(vmapx.grad(lambda x: np.sqrt(x).sum())), np.zeros((3, 2)) - 1)


@pytest.mark.parametrize(
    "transform",
    [
        vmapx.jacfwd,
        vmapx.jacrev,
        lambda f: vmapx.hessian(lambda x: np.sum(f(x))),
    ],
)
@pytest.mark.parametrize(
    "f",
    [
        lambda x: np.sin(x) * x[::-1],
        lambda x: np.cumsum(x**2),
        lambda x: np.outer(x, x).ravel(),
        lambda x: np.linalg.norm(x) * x,
        lambda x: np.sort(x) * np.arange(x.size),
        lambda x: np.where(x > 0, x**3, -x),
    ],
)
def test_vmap_of_jacobians(transform, f):
    x = rnd(4, 3)
    check(lambda vm: vm(transform(f)), x)
    check(lambda vm: vm(transform(f), in_axes=1, out_axes=-1), x.T.copy())
    check(lambda vm: vm(vm(transform(f))), rnd(2, 4, 3))


# --------------------------------------------------------------------------------------
# TestRandomness (a numpy.random.Generator argument) and chunk_size
# --------------------------------------------------------------------------------------

SEED = 1234567

FACTORY_OPS = {
    "standard_normal": lambda _, shape, rng: rng.standard_normal(shape),
    "random": lambda _, shape, rng: rng.random(shape),
    "integers": lambda _, shape, rng: rng.integers(100, size=shape),
    "integers_lo_hi": lambda _, shape, rng: rng.integers(5, 100, size=shape),
    "normal": lambda _, shape, rng: rng.normal(0.0, 1.0, shape),
    "uniform": lambda _, shape, rng: rng.uniform(-1, 1, size=shape),
    "exponential": lambda _, shape, rng: rng.exponential(size=shape),
    "random_f32": lambda _, shape, rng: rng.random(shape, dtype=np.float32),
    "scalar": lambda _, shape, rng: rng.normal(),
}


@pytest.mark.parametrize("name", list(FACTORY_OPS))
@pytest.mark.parametrize("randomness", ["error", "same", "different"])
def test_random_factory_ops(name, randomness):
    op = FACTORY_OPS[name]
    passed, shape = rnd(4), (3, 3)
    f = vmapx.vmap(op, in_axes=(0, None, None), randomness=randomness)
    if randomness == "error":
        with pytest.raises(errors.RandomnessError):
            f(passed, shape, np.random.default_rng(SEED))
        return
    out = f(passed, shape, np.random.default_rng(SEED))
    ref = np.random.default_rng(SEED)
    if randomness == "different":
        expected = np.stack([np.asarray(op(p, shape, ref)) for p in passed])
        assert not all(np.array_equal(out[0], out[i]) for i in range(1, 4))
    else:
        one = np.asarray(op(None, shape, ref))
        expected = np.stack([one] * 4)
    assert_same(out, expected)


@pytest.mark.parametrize("randomness", ["same", "different"])
def test_randperm(randomness):
    f = vmapx.vmap(lambda _, rng: rng.permutation(10), in_axes=(0, None), randomness=randomness)
    out = f(rnd(4), np.random.default_rng(SEED))
    ref = np.random.default_rng(SEED)
    if randomness == "different":
        expected = np.stack([ref.permutation(10) for _ in range(4)])
    else:
        expected = np.stack([ref.permutation(10)] * 4)
    assert_same(out, expected)


def _get_image(batched_input, batch):
    if batched_input == "first":
        return np.ones((batch, 3, 3, 14, 14))
    if batched_input == "last":
        return np.ones((3, 3, 14, 14, batch))
    return np.ones((3, 3, 14, 14))


def _in_axes(batched_input):
    return ({"first": 0, "last": -1, "none": None}[batched_input], 0, None)


@pytest.mark.parametrize("randomness", ["error", "same", "different"])
@pytest.mark.parametrize("batched_input", ["first", "last", "none"])
def test_dropout_and_like_functions(randomness, batched_input):
    def dropout(t, _ignored, rng):
        return np.ones_like(t) * (rng.random(t.shape) < 0.5) / 0.5

    def randint_like(t, _ignored, rng):
        return rng.integers(0, 20, size=t.shape)

    def randn_like(t, _ignored, rng):
        return rng.standard_normal(t.shape, dtype=np.float32)

    def feature_dropout(t, _ignored, rng):  # dropout2d: whole channels
        return t * (rng.random(t.shape[:2] + (1, 1)) < 0.5)

    b = 4
    passed = _get_image(batched_input, b)
    always = rnd(b)
    for op in (dropout, randint_like, randn_like, feature_dropout):
        f = vmapx.vmap(op, in_axes=_in_axes(batched_input), randomness=randomness)
        if randomness == "error":
            with pytest.raises(errors.RandomnessError):
                f(passed, always, np.random.default_rng(SEED))
            continue
        out = f(passed, always, np.random.default_rng(SEED))
        ref = np.random.default_rng(SEED)
        example = (
            passed
            if batched_input == "none"
            else np.moveaxis(passed, -1 if batched_input == "last" else 0, 0)[0]
        )
        if randomness == "different":
            expected = np.stack([op(example, None, ref) for _ in range(b)])
        else:
            expected = np.stack([op(example, None, ref)] * b)
        assert_same(out, expected)


@pytest.mark.parametrize("randomness", ["same", "different"])
@pytest.mark.parametrize("batched_input", ["first", "last", "none"])
def test_random_inplace(randomness, batched_input):
    # functorch's test_random_unary_inplace: Generator methods with out= write in place.
    ops = [
        lambda t, rng: rng.random(out=t),
        lambda t, rng: rng.standard_normal(out=t),
        lambda t, rng: rng.standard_exponential(out=t),
    ]
    b = 4
    for op in ops:

        def f(t, _ignored, rng, op=op):
            op(t, rng)
            return t

        passed = (
            _get_image(batched_input, b)[..., :2, :3]
            if batched_input != "last"
            else _get_image(batched_input, b)[..., :2, :3, :]
        )
        passed = np.ascontiguousarray(passed)
        g = vmapx.vmap(f, in_axes=_in_axes(batched_input), randomness=randomness)
        if batched_input == "none":
            # Writing into an unmapped (read-only) argument is refused.
            with pytest.raises(ValueError):
                g(passed, rnd(b), np.random.default_rng(SEED))
            continue
        out = g(passed, rnd(b), np.random.default_rng(SEED))
        ref = np.random.default_rng(SEED)
        example = np.moveaxis(passed, -1 if batched_input == "last" else 0, 0)[0]
        if randomness == "different":
            expected = np.stack([f(example.copy(), None, ref) for _ in range(b)])
        else:
            expected = np.stack([f(example.copy(), None, ref)] * b)
        assert_same(out, expected)


@pytest.mark.parametrize("batched_probability", ["first", "last", "none"])
@pytest.mark.parametrize("randomness", ["same", "different"])
def test_bernoulli_batched_probability(batched_probability, randomness):
    b = 4
    p = rand(b, 3, 5) if batched_probability != "none" else rand(3, 5)
    if batched_probability == "last":
        p = np.moveaxis(p, 0, -1)
    in_axes = ({"first": 0, "last": -1, "none": None}[batched_probability], 0, None)

    def op(p, _ignored, rng):
        return rng.binomial(1, p)

    if randomness == "same" and batched_probability != "none":
        # one shared draw is impossible with per-example parameters: the loop's answer or
        # a clear error
        try:
            out = vmapx.vmap(op, in_axes=in_axes, randomness=randomness)(
                p, rnd(b), np.random.default_rng(SEED)
            )
        except errors.VmapxError:
            return
        assert out.shape == (b, 3, 5)
        return
    out = vmapx.vmap(op, in_axes=in_axes, randomness=randomness)(
        p, rnd(b), np.random.default_rng(SEED)
    )
    ref = np.random.default_rng(SEED)
    examples = [p] * b if batched_probability == "none" else list(np.moveaxis(p, in_axes[0], 0))
    if randomness == "different":
        expected = np.stack([op(e, None, ref) for e in examples])
    else:
        one = op(p, None, ref)
        expected = np.stack([one] * b)
    assert_same(out, expected)


@pytest.mark.parametrize("outer_in,inner_in", [(0, 0), (1, 0), (0, 1), (-1, -1)])
def test_nested_randomness_different(outer_in, inner_in):
    # functorch's test_mode_key: nested vmaps with randomness="different" draw the
    # loop's numbers in the loop's order.
    def f(x, rng):
        return x + rng.standard_normal()

    x = rnd(2, 3, 4)
    inner = vmapx.vmap(f, in_axes=(inner_in, None), randomness="different")
    out = vmapx.vmap(inner, in_axes=(outer_in, None), randomness="different")(
        x, np.random.default_rng(SEED)
    )
    ref = np.random.default_rng(SEED)
    expected = loop_vmap(loop_vmap(f, in_axes=(inner_in, None)), in_axes=(outer_in, None))(x, ref)
    assert_same(out, expected)


@pytest.mark.parametrize("in_axis", [0, 1, 2])
@pytest.mark.parametrize("out_axis", [0, 1, 2])
@pytest.mark.parametrize("randomness", ["error", "same", "different"])
def test_vmap_chunk_size(in_axis, out_axis, randomness):
    x, y = rnd(4, 5, 6), rnd(4, 5, 6, seed=1)

    def noise(z, rng):
        return z if randomness == "error" else z + rng.random(z.shape)

    def f(x, rng):
        return noise(np.sin(x), rng)

    def f1(pair, rng):
        a, b = pair
        return noise(np.sin(a) + np.cos(b), rng)

    def f2(x, rng):
        y = noise(np.sin(x), rng)
        return {"out": y, "out1": y + 2}

    def f3(d, rng):
        z = noise(np.sin(d["inp"]) + np.cos(d["inp1"]), rng)
        return {"z": z, "tuple": (z, z + 1)}

    def f4(d, rng):
        z = noise(d["inp"] + np.cos(d["inp1"]), rng)
        return {"z": z, "tuple": (z, z + 1)}

    x0 = np.take(x, 0, axis=in_axis)
    cases = [
        (f, (x,), (in_axis, None)),
        (f1, ((x, y),), ((in_axis, in_axis), None)),
        (f2, (x,), (in_axis, None)),
        (f3, ({"inp": x0, "inp1": y},), ({"inp": None, "inp1": in_axis}, None)),
        (f4, ({"inp": 2.0, "inp1": y},), ({"inp": None, "inp1": in_axis}, None)),
    ]
    for fn, args, in_axes in cases:
        expected = vmapx.vmap(
            fn, in_axes=in_axes, out_axes=out_axis, randomness=randomness, chunk_size=None
        )(*args, np.random.default_rng(SEED))
        if randomness != "same":
            ref = loop_vmap(fn, in_axes=in_axes, out_axes=out_axis)(
                *args, np.random.default_rng(SEED)
            )
            assert_same(expected, ref)
        for chunk_size in (1, 2, 3, 4, 7, 100):
            out = vmapx.vmap(
                fn, in_axes=in_axes, out_axes=out_axis, randomness=randomness, chunk_size=chunk_size
            )(*args, np.random.default_rng(SEED))
            assert_same(out, expected)


@pytest.mark.parametrize("chunk_size", [-1, 0, 1.5, "big"])
def test_vmap_chunk_size_error(chunk_size):
    with pytest.raises((errors.ArgumentError, ValueError, TypeError)):
        vmapx.vmap(np.sin, chunk_size=chunk_size)(rnd(4, 5))


def test_vmap_chunk_size_out_axes_mismatch():
    with pytest.raises(errors.InAxesError):
        vmapx.vmap(np.sin, out_axes=(0, 0), chunk_size=2)(rnd(4, 5))


@pytest.mark.parametrize("in_axis", [0, 1])
@pytest.mark.parametrize("out_axis", [0, 1])
@pytest.mark.parametrize("chunk_size", [1, 2, 3, 4, 7, 16])
def test_vmap_chunk_size_composition(in_axis, out_axis, chunk_size):
    x, y = rnd(4, 5, 6), rnd(4, 5, 6, seed=1)

    def f3(d):
        z = np.sin(d["inp"]) + np.cos(d["inp1"])
        return {"z": z, "tuple": (z, z + 1)}

    for fn, args in (
        (np.sin, (x,)),
        (lambda p: np.sin(p[0]) + np.cos(p[1]), ((x, y),)),
        (f3, ({"inp": x, "inp1": y},)),
    ):
        expected = loop_vmap(loop_vmap(fn, in_axis, out_axis), in_axis, out_axis)(*args)
        out = vmapx.vmap(
            vmapx.vmap(fn, in_axes=in_axis, out_axes=out_axis, chunk_size=chunk_size),
            in_axes=in_axis,
            out_axes=out_axis,
            chunk_size=chunk_size,
        )(*args)
        assert_same(out, expected)


@pytest.mark.parametrize("chunk_size", [1, 3, 5])
def test_chunk_size_with_size_zero_and_one(chunk_size):
    for n in (0, 1, 2):
        x = rnd(n, 3)
        out = vmapx.vmap(lambda v: (v * 2, v.sum()), chunk_size=chunk_size, out_axes=(1, 0))(x)
        assert_same(out, loop_vmap(lambda v: (v * 2, v.sum()), out_axes=(1, 0))(x))


# --------------------------------------------------------------------------------------
# Defects found while porting (each: the loop's answer, and what vmap does instead)
# --------------------------------------------------------------------------------------

_UNDER_DIMENSIONED = {
    # examples have fewer axes than the gufunc's core signature needs: NumPy refuses
    "matmul_0d": (lambda v: np.matmul(v[0], v[1]), (3, 2)),
    "matmul_op_0d": (lambda v: v[0] @ v[1], (3, 2)),
    "linalg_matmul_0d": (lambda v: np.linalg.matmul(v[0], v[1]), (3, 2)),
    "vecdot_0d": (lambda v: np.vecdot(v[0], v[1]), (3, 2)),
    "matvec_1d_matrix": (lambda v: np.matvec(v, v), (3, 2)),
    "vecmat_1d_matrix": (lambda v: np.vecmat(v[0], v), (3, 2)),
}


_SCALAR_MATMUL = pytest.mark.xfail(
    strict=True,
    reason="`@` of two NumPy scalars: the loop raises TypeError (scalars have no `@`), vmap "
    "raises matmul's ValueError",
)


@numpy2_only
@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=_SCALAR_MATMUL) if n == "matmul_op_0d" else n
        for n in _UNDER_DIMENSIONED
    ],
)
def test_gufunc_with_under_dimensioned_examples(name):
    op, shape = _UNDER_DIMENSIONED[name]
    check_raises_like_loop(lambda vm: vm(op), rnd(*shape), exc=ValueError)


@numpy2_only
def test_gufunc_with_under_dimensioned_examples_linalg():
    # the same cases through np.linalg functions do raise (functorch's 1-D input test)
    for op in (np.linalg.det, np.linalg.inv, np.linalg.cholesky, np.linalg.svdvals):
        check_raises_like_loop(lambda vm, op=op: vm(op), _spd(n=3))
        check_raises_like_loop(lambda vm, op=op: vm(vm(op)), _spd(2, n=3))


@pytest.mark.parametrize("in_axes", [((0, None), (None, 0)), ((None, 0), (0, None))])
def test_linalg_vecdot_nested_outer(in_axes):
    inner, outer = in_axes
    check(
        lambda vm: vm(vm(np.linalg.vecdot, in_axes=inner), in_axes=outer),
        rnd(3, 2),
        rnd(3, 2, seed=1),
    )


@numpy2_only
def test_vecdot_nested_outer_other_spellings():
    a, b = rnd(3, 2), rnd(3, 2, seed=1)
    for op in (np.vecdot, np.dot, np.inner, lambda x, y: np.sum(x * y, axis=-1)):
        check(lambda vm, op=op: vm(vm(op, in_axes=(0, None)), in_axes=(None, 0)), a, b)


def test_out_arguments_of_reductions_and_contractions():
    def sum_out(x, y):
        np.sum(x, axis=0, out=y)
        return y

    def ufunc_where(x, m):
        out = np.zeros_like(x)
        np.add(x, 1, out=out, where=m)
        return out

    def matmul_out(x, y, z):
        np.matmul(x, y, out=z)
        return z

    def argmax_out(x, y):
        np.argmax(x, axis=0, out=y)
        return y

    check_op(sum_out, (rnd(4, 3, 2), rnd(4, 2)))
    check_op(sum_out, (rnd(4, 3, 2), rnd(2)), in_axes=(0, None))
    check_op(ufunc_where, (rnd(4, 3), rnd(4, 3, dtype=np.bool_)))
    check_op(ufunc_where, (rnd(3), rnd(4, 3, dtype=np.bool_)), in_axes=(None, 0))
    check_op(matmul_out, (rnd(4, 2, 3), rnd(3, 2), rnd(4, 2, 2)), in_axes=(0, None, 0))
    check_op(argmax_out, (rnd(4, 3, 2), np.zeros((4, 2), np.int64)))


def test_axis_size_errors():
    with pytest.raises(errors.AxisSizeError):
        vmapx.vmap(lambda v: v, axis_size=5)(rnd(4, 3))
    with pytest.raises(errors.ArgumentError):
        vmapx.vmap(lambda v: v, axis_size=-1, in_axes=None)(rnd(3))
    out = vmapx.vmap(lambda v: v * 2, in_axes=None, axis_size=0)(rnd(3))
    assert_same(out, np.zeros((0, 3)))
