"""Every row of the op table: vmap equals the loop over every in_axes placement."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import vmapx
from harness import batched_args, check_vmap, check_zero_batch, in_axes_placements
from op_table import OPS, Op


def _tol(op: Op) -> dict:
    return {"rtol": op.rtol, "atol": op.atol}


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
def test_vmap_equals_loop(op: Op) -> None:
    rng = np.random.default_rng(0)
    example = op.example_args(rng)
    for in_axes in in_axes_placements([a.ndim for a in example]):
        for size in (1, 3):
            args = batched_args(op.example_args, in_axes, size, rng)
            if any(in_axes[i] is None for i in op.needs_batched):
                with warnings.catch_warnings():  # may loop (examples can agree)
                    warnings.simplefilter("ignore", vmapx.PerformanceWarning)
                    check_vmap(op.fn, args, in_axes=in_axes, **_tol(op))
            else:
                check_vmap(op.fn, args, in_axes=in_axes, **_tol(op))


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
def test_zero_size_batch(op: Op) -> None:
    rng = np.random.default_rng(1)
    example = op.example_args(rng)
    in_axes = (0,) * len(example)
    args = batched_args(op.example_args, in_axes, 2, rng)
    check_zero_batch(op.fn, args, in_axes, op.data_dtype)


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
def test_nested_vmap(op: Op) -> None:
    """vmap(vmap(f)) over two batch axes equals the double loop; the first argument
    is mapped by both, the others by the inner vmap only (mixing levels)."""
    rng = np.random.default_rng(2)
    example = op.example_args(rng)
    inner_axes = (0,) * len(example)
    rows = [batched_args(op.example_args, inner_axes, 2, rng) for _ in range(3)]
    outer = [np.stack([r[0] for r in rows])] + rows[0][1:]
    outer_axes = (0,) + (None,) * (len(example) - 1)
    inner = vmapx.vmap(op.fn, in_axes=inner_axes)
    check_vmap(inner, outer, in_axes=outer_axes, **_tol(op))
