"""Review 6 findings: each test compares vmapx against the per-example loop."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import vmapx
from harness import check_vmap

rng = np.random.default_rng(0)
X = rng.normal(size=(4, 3))


def _ignore_pending(f):
    def g(*args):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PendingDeprecationWarning)
            return f(*args)

    return g


def test_asmatrix_of_a_traced_value_is_a_matrix():
    """`np.asmatrix(x)` (NumPy: `matrix.__new__` takes an ndarray as `data.view(matrix)`)
    now meets a tracer posing as an ndarray, and `Tracer.view` ignores the subclass type:
    the 1-d tracer comes back as itself, not a (1, n) matrix. Also reached by SciPy's
    spmatrix.sum() (`np.sum(np.asmatrix(data))`), e.g. sklearn's add_dummy_feature of a
    sparse matrix with a traced value."""
    with pytest.warns(vmapx.PerformanceWarning, match="view"):  # (now: the loop)
        check_vmap(_ignore_pending(lambda x: np.asarray(np.asmatrix(x))), [X])
    with pytest.warns(vmapx.PerformanceWarning, match="view"):
        check_vmap(lambda x: np.asarray(x.view(np.matrix).sum(axis=1)), [X])


def test_a_generator_seeded_by_a_mapped_seed_draws_as_the_loop():
    """`np.random.default_rng(seed)` of a traced seed: NumPy's SeedSequence refuses the
    tracer with a TypeError (it never asks `__array__`), so the batched run crashes
    instead of running the loop (each example seeds its own generator)."""
    keys = np.arange(4)
    with pytest.warns(vmapx.PerformanceWarning, match="refused a batched value"):
        check_vmap(lambda x, k: x * np.random.default_rng(k).normal(), [X[:, 0], keys])
