"""`np.full(shape, traced)` and `np.full_like(plain, traced)` batch.

NumPy's `full` fills an array it makes itself (`copyto` dispatches on the value, but
the array is NumPy's plain one): the batched run used to stop there and the function
ran once per example. The line that called it is learned, and a run again gets
`np.full`s that fill a traced array (`vmapx._passthrough`).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from numpy import full as imported_full

import vmapx
from harness import check_vmap

rng = np.random.default_rng(0)
X = rng.normal(size=(4, 3))
P = np.ones((5, 2))

CASES = {
    "full": lambda x: np.full(3, x.sum()),
    "dtype": lambda x: np.full((2,), x[0], dtype=np.float32),
    "bool": lambda x: np.full((2, 2), x[1] > 0.5),
    "broadcast row": lambda x: np.full((2, 3), x),
    "list of values": lambda x: np.full(2, [x[0], x[1]]),
    "imported name": lambda x: imported_full(2, x[0]),
    "like plain": lambda x: np.full_like(P, x[0]),
    "like int array": lambda x: np.full_like(np.arange(3), x[0] * 10),
    "like with shape": lambda x: np.full_like(P, x[2], shape=(3,)),
    "then written": lambda x: _written(np.full(3, x[0])),
}


def _written(a):
    a[0] = 7.0  # (a new array: its own memory, as NumPy's)
    return a * 2


@pytest.mark.parametrize("name", sorted(CASES))
def test_batches_and_equals_the_loop(name) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", vmapx.PerformanceWarning)
        check_vmap(CASES[name], [X])


def test_a_value_that_does_not_broadcast_raises_numpys_error() -> None:
    with pytest.raises(ValueError, match="broadcast"):
        np.full(2, X[0])
    with pytest.raises(ValueError, match="broadcast"):
        vmapx.vmap(lambda x: np.full(2, x))(X)


def test_plain_fills_are_numpys_own() -> None:
    out = vmapx.vmap(lambda x: x + np.full(3, 2.0) + np.full_like(x, 1))(X)
    np.testing.assert_array_equal(out, X + 3.0)
