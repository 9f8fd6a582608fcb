"""The equivalence harness: `vmap(f)` must equal the explicit per-example loop."""

from __future__ import annotations

import itertools
import numbers
import tracemalloc
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import optree

import vmapx


def peak_bytes(fn: Callable[[], Any], warm: bool = True) -> int:
    """Peak bytes allocated while `fn()` runs (after one untimed warm-up call)."""
    if warm:
        fn()
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _is_leaf(x: Any) -> bool:
    return isinstance(x, np.ndarray)


def loop_reference(f: Callable, args: Sequence, in_axes: Any, out_axes: Any = 0) -> Any:
    """`np.stack([f(*example_i) for i in range(B)])`, moved to `out_axes`."""
    axes = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)
    sizes = {np.shape(a)[ax] for a, ax in zip(args, axes, strict=True) if ax is not None}
    assert len(sizes) == 1, sizes
    (size,) = sizes
    results = []
    for i in range(size):
        example = [
            a if ax is None else np.take(a, i, axis=ax) for a, ax in zip(args, axes, strict=True)
        ]
        results.append(f(*example))
    leaves, treedef = optree.tree_flatten(results[0], is_leaf=_is_leaf)
    columns = [treedef.flatten_up_to(r) for r in results]
    stacked = [np.stack([c[j] for c in columns]) for j in range(len(leaves))]
    out_ax = out_axes if isinstance(out_axes, tuple) else (out_axes,) * len(stacked)
    moved = [np.moveaxis(s, 0, ax) for s, ax in zip(stacked, out_ax, strict=True)]
    return optree.tree_unflatten(treedef, moved)


def assert_same(got: Any, expected: Any, rtol: float = 1e-7, atol: float = 1e-9) -> None:
    """Same tree structure, and per leaf the same shape, dtype and values."""
    g_leaves, g_def = optree.tree_flatten(got, is_leaf=_is_leaf)
    e_leaves, e_def = optree.tree_flatten(expected, is_leaf=_is_leaf)
    assert g_def == e_def, f"structure {g_def} != {e_def}"
    for g, e in zip(g_leaves, e_leaves, strict=True):
        assert isinstance(g, np.ndarray), f"vmap returned {type(g).__name__}, not an ndarray"
        e = np.asarray(e)
        assert g.shape == e.shape, f"shape {g.shape} != {e.shape}"
        assert g.dtype == e.dtype, f"dtype {g.dtype} != {e.dtype}"
        if e.dtype.kind in "fc":
            np.testing.assert_allclose(g, e, rtol=rtol, atol=atol, equal_nan=True)
        else:
            np.testing.assert_array_equal(g, e)


def float_total(out: Any) -> Any:
    """The sum of every float output (the real part of complex ones): a scalar loss."""
    total = 0.0
    for leaf in optree.tree_leaves(out, is_leaf=lambda x: hasattr(x, "dtype")):
        dtype = getattr(leaf, "dtype", None)
        if dtype is not None and dtype.kind in "fc":
            total = total + np.sum(np.real(leaf) if dtype.kind == "c" else leaf)
    return total


def check_vmap(
    f: Callable, args: Sequence, in_axes: Any = 0, out_axes: Any = 0, rtol: float = 1e-7,
    atol: float = 1e-9,
) -> Any:  # fmt: skip
    """Assert `vmap(f, in_axes, out_axes)(*args)` equals the loop; return the result."""
    got = vmapx.vmap(f, in_axes=in_axes, out_axes=out_axes)(*args)
    assert_same(got, loop_reference(f, args, in_axes, out_axes), rtol, atol)
    return got


def check_zero_batch(f: Callable, args: Sequence, in_axes: Any, data_dtype: bool = False) -> None:
    """A zero-size batch gives outputs of shape (0, *per-example shape)."""
    axes = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)
    empty = [
        a if ax is None else np.take(a, np.arange(0), axis=ax)
        for a, ax in zip(args, axes, strict=True)
    ]
    one = [
        a if ax is None else np.take(a, np.arange(1), axis=ax)
        for a, ax in zip(args, axes, strict=True)
    ]
    got = vmapx.vmap(f, in_axes=in_axes)(*empty)
    ref = loop_reference(f, one, in_axes)
    g_leaves = optree.tree_leaves(got, is_leaf=_is_leaf)
    r_leaves = optree.tree_leaves(ref, is_leaf=_is_leaf)
    for g, r in zip(g_leaves, r_leaves, strict=True):
        assert g.shape == (0, *r.shape[1:]), f"{g.shape} vs {(0, *r.shape[1:])}"
        same = g.dtype.kind == r.dtype.kind if data_dtype else g.dtype == r.dtype
        assert same, f"{g.dtype} vs {r.dtype}"


def in_axes_placements(ndims: Sequence[int]) -> list[tuple]:
    """Every way to map the arguments: each mapped at its first or last axis, or not
    mapped; at least one mapped."""
    options = [[None, 0, nd] if nd > 0 else [None, 0] for nd in ndims]
    return [p for p in itertools.product(*options) if any(a is not None for a in p)]


def batched_args(make: Callable, in_axes: tuple, size: int, rng: np.random.Generator) -> list:
    """Arguments for a batch of `size` examples, each made by `make(rng)` (a list of
    per-example arrays); mapped ones are stacked along their in_axes, unmapped ones
    are taken from the first example."""
    examples = [make(rng) for _ in range(max(size, 1))]
    out = []
    for j, ax in enumerate(in_axes):
        if ax is None:
            out.append(examples[0][j])
            continue
        stacked = np.stack([e[j] for e in examples], axis=ax)
        out.append(stacked if size else np.take(stacked, np.arange(0), axis=ax))
    return out


def counting(f):
    """`(f counted, calls)`: `calls` gets an entry per call of the counted `f`."""
    calls = []

    def counted(*args, **kwargs):
        calls.append(1)
        return f(*args, **kwargs)

    return counted, calls


def type_answers(v: Any) -> np.ndarray:
    """The type questions code asks of a value (`isinstance`, `np.isscalar`), answered as
    numbers: code that branches on them takes a branch per answer."""
    return np.array(
        [
            isinstance(v, np.ndarray),
            isinstance(v, np.generic),
            isinstance(v, np.floating),
            isinstance(v, np.integer),
            isinstance(v, np.bool_),
            isinstance(v, float),
            isinstance(v, int),
            isinstance(v, numbers.Number),
            isinstance(v, numbers.Real),
            np.isscalar(v),
        ],
        dtype=float,
    )
