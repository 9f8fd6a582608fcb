"""Mapped NumPy array subclasses: a masked array's mask and a subclass's own behaviour
are the loop's (the examples run one by one), `np.memmap` batches, `np.matrix` is refused
with a typed error."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import vmapx
from harness import check_vmap

X = np.arange(12.0).reshape(3, 4)
MASKED = np.ma.masked_array(X, mask=X % 3 == 0)


def _loop_warned(f, *args):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_vmap(f, args)
    assert any(issubclass(w.category, vmapx.PerformanceWarning) for w in caught)


@pytest.mark.parametrize(
    "f",
    [
        lambda v: np.ma.filled(v * 2, -1.0),  # (the batch's mask was dropped: a wrong answer)
        lambda v: v.compressed().sum(),  # (no such method on a batched value: a crash)
        lambda v: np.asarray(v.count()),
        lambda v: np.ma.getmaskarray(v).astype(float) + v.filled(0.0),
    ],
)
def test_a_masked_array_keeps_its_mask(f):
    _loop_warned(f, MASKED)


def test_a_masked_array_unmapped_or_with_fallback_error():
    check_vmap(lambda v, w: v * np.sum(w), (X, MASKED), in_axes=(0, None))
    with pytest.raises(vmapx.errors.ConcretizationError, match="MaskedArray"):
        vmapx.vmap(np.sum, fallback="error")(MASKED)


class Tagged(np.ndarray):
    def doubled(self):
        return np.asarray(self) * 2


def test_a_users_subclass_keeps_its_methods():
    _loop_warned(lambda v: v.doubled(), X.view(Tagged))


def test_a_memmap_batches(tmp_path):
    m = np.memmap(tmp_path / "x.dat", dtype=np.float64, mode="w+", shape=X.shape)
    m[:] = X
    with warnings.catch_warnings():
        warnings.simplefilter("error", vmapx.PerformanceWarning)
        check_vmap(lambda v: np.cumsum(v) * 2, (m,))


def test_a_matrix_is_refused():
    """(NumPy's np.stack of the loop's 1x1 matrices corrupts memory: no loop here.)"""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PendingDeprecationWarning)
        matrix = np.matrix(X)
    with pytest.raises(vmapx.errors.UnsupportedError, match="np.asarray"):
        vmapx.vmap(lambda v: v @ v.T)(matrix)
