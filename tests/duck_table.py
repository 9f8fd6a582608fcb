"""The op-table checks on a device array type: the strict duck array
(`strict_array.StrictArray`, on a CPU) or CuPy's (on a GPU).

A row runs with its inputs on the device and must give device arrays equal to the host
loop's result (values, shape, dtype); the tests list the rows that cannot pass, each
with its reason.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import optree

import vmapx
from harness import assert_same, batched_args, float_total, loop_reference
from op_spec import Op
from strict_array import StrictArray, host, strict


@dataclass(frozen=True)
class Device:
    """An array type to run the table on: `to` moves a pytree of host arrays there,
    `back` brings one back, `array` is its array type."""

    name: str
    to: Callable[[Any], Any]
    back: Callable[[Any], Any]
    array: type


STRICT = Device("strict", strict, host, StrictArray)


def check_duck_vmap(
    op: Op, in_axes: tuple, size: int = 3, seed: int = 0, device: Device = STRICT
) -> None:
    """`vmap(op.fn)` on device arrays gives device arrays equal to the host loop."""
    rng = np.random.default_rng(seed)
    args = batched_args(op.example_args, in_axes, size, rng)
    want = loop_reference(op.fn, args, in_axes)
    with warnings.catch_warnings():
        if op.needs_batched:  # may loop (examples can agree)
            warnings.simplefilter("ignore", vmapx.PerformanceWarning)
        got = vmapx.vmap(op.fn, in_axes=in_axes)(*device.to(args))
    assert_on_device(got, device.array)
    assert_same(device.back(got), want, op.rtol, op.atol)


def check_duck_vmap_grad(op: Op, seed: int = 0, device: Device = STRICT) -> bool:
    """`vmap(grad(sum of op.fn))` on device arrays equals the host loop of `grad`;
    False when the row has no float argument to differentiate."""
    rng = np.random.default_rng(seed)
    examples = [op.example_args(rng) for _ in range(3)]
    argnums = tuple(i for i, a in enumerate(examples[0]) if a.dtype.kind in "fc")
    if not argnums:
        return False
    g = vmapx.grad(lambda *a: float_total(op.fn(*a)), argnums=argnums)
    batched = [np.stack([e[j] for e in examples]) for j in range(len(examples[0]))]
    got = vmapx.vmap(g)(*device.to(batched))
    loop = [g(*e) for e in examples]
    want = tuple(np.stack([r[k] for r in loop]) for k in range(len(argnums)))
    assert_on_device(got, device.array)
    assert_same(device.back(got), want, rtol=1e-9, atol=1e-12)
    return True


def assert_on_device(tree: Any, array: type = StrictArray) -> None:
    """Every leaf of `tree` is a device array (nothing was moved to the host)."""
    leaves = optree.tree_leaves(tree, is_leaf=lambda x: isinstance(x, array))
    for leaf in leaves:
        assert isinstance(leaf, array), f"a {type(leaf).__name__} came back, not a {array}"


def mapped(op: Op) -> list[tuple]:
    """The in_axes to check a row with: every argument mapped, and for rows of several
    arguments, the first mapped and the others not (constants on the device)."""
    n = len(op.example_args(np.random.default_rng(0)))
    placements = [(0,) * n]
    if n > 1 and not set(op.needs_batched) - {0}:
        placements.append((0,) + (None,) * (n - 1))
    return placements
