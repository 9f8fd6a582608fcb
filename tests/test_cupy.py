"""The op table on CuPy arrays (GPU): every row under `vmap` and `vmap(grad)` gives CuPy
arrays equal to the host loop. Skipped unless CuPy imports and a CUDA device exists
(`pip install vmapx[cupy]` on a machine with an NVIDIA GPU)."""

from __future__ import annotations

import numpy as np
import optree
import pytest

from duck_table import Device, check_duck_vmap, check_duck_vmap_grad, mapped
from op_table import OPS, Op

cupy = pytest.importorskip("cupy")


def _device_count() -> int:
    try:
        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:  # CuPy without a driver raises its own runtime error
        return 0


if _device_count() < 1:
    pytest.skip("no CUDA device", allow_module_level=True)


def _to(tree: object) -> object:
    return optree.tree_map(
        lambda v: cupy.asarray(v) if isinstance(v, np.ndarray) else v,
        tree,
        is_leaf=lambda v: isinstance(v, np.ndarray),
    )


def _back(tree: object) -> object:
    return optree.tree_map(
        lambda v: cupy.asnumpy(v) if isinstance(v, cupy.ndarray) else v,
        tree,
        is_leaf=lambda v: isinstance(v, cupy.ndarray),
    )


CUPY = Device("cupy", _to, _back, cupy.ndarray)


# rows CuPy cannot run, with the reason (to be filled in on a GPU: none is known yet)
CUPY_EXPECTED_FAILURES: dict[str, str] = {}


def _param(op: Op) -> object:
    marks = ()
    if op.name in CUPY_EXPECTED_FAILURES:
        marks = (pytest.mark.xfail(strict=True, reason=CUPY_EXPECTED_FAILURES[op.name]),)
    return pytest.param(op, id=op.name, marks=marks)


@pytest.mark.parametrize("op", [_param(op) for op in OPS])
def test_cupy_vmap(op: Op) -> None:
    for in_axes in mapped(op):
        check_duck_vmap(op, in_axes, device=CUPY)


@pytest.mark.parametrize("op", [_param(op) for op in OPS if op.diff])
def test_cupy_vmap_grad(op: Op) -> None:
    check_duck_vmap_grad(op, device=CUPY)
