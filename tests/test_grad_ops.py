"""Every differentiable op-table row: derivatives against central differences (to order
2, forward and reverse), and `vmap(grad(...))` against a loop of `grad`.

Rows whose functions have no derivative rule yet are listed in `PENDING_DERIVATIVES`
(strict expected failures: a row that starts passing must be taken off the list).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import vmapx
from harness import assert_same, float_total
from op_table import OPS, Op

# rows (by name) whose functions have no derivative rule yet
PENDING_DERIVATIVES: set[str] = {
    'sliding_window_view', 'sliding_window_view.axis',
}  # fmt: skip

DIFF_OPS = [op for op in OPS if op.diff]


class PendingDerivative(Exception):  # noqa: N818
    """A pending row failed (re-raised with a one-frame traceback: reports stay fast)."""


def _param(op: Op) -> object:
    marks = ()
    if op.name in PENDING_DERIVATIVES:
        reason = "no derivative rule yet"
        marks = (pytest.mark.xfail(strict=True, raises=PendingDerivative, reason=reason),)
    return pytest.param(op, id=op.name, marks=marks)


def _run(op: Op, check: Callable[[], None]) -> None:
    if op.name not in PENDING_DERIVATIVES:
        check()
        return
    try:
        check()
    except Exception as e:
        raise PendingDerivative(f"{type(e).__name__}: {e}") from None


PARAMS = [_param(op) for op in DIFF_OPS]


def _float_args(args: list) -> tuple[int, ...]:
    return tuple(i for i, a in enumerate(args) if np.asarray(a).dtype.kind in "fc")


@pytest.mark.parametrize("op", PARAMS)
def test_derivatives(op: Op) -> None:
    """check_grads to order 2 in both modes, then vmap(grad(sum of f)) against a loop."""
    _run(op, lambda: _check_row(op))


def _check_row(op: Op) -> None:
    rng = np.random.default_rng(0)
    vmapx.check_grads(op.fn, op.example_args(rng), order=2, rtol=1e-5, atol=1e-5)
    examples = [op.example_args(rng) for _ in range(3)]
    argnums = _float_args(examples[0])
    if not argnums:
        return
    g = vmapx.grad(lambda *a: float_total(op.fn(*a)), argnums=argnums)
    batched = [np.stack([e[j] for e in examples]) for j in range(len(examples[0]))]
    got = vmapx.vmap(g)(*batched)
    loop = [g(*e) for e in examples]
    want = tuple(np.stack([r[k] for r in loop]) for k in range(len(argnums)))
    assert_same(got, want, rtol=1e-9, atol=1e-12)


def test_pending_rows_exist() -> None:
    names = {op.name for op in DIFF_OPS}
    assert not PENDING_DERIVATIVES - names, PENDING_DERIVATIVES - names
