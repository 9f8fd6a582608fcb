"""Defects found by trying vmapx as a new user would (data-science snippets, library calls,
compositions of transforms), each with the case that showed it: vmap must equal the loop
(values, shape, dtype), derivatives must match finite differences."""

from __future__ import annotations

import numpy as np
import pytest

import vmapx

RNG = np.random.default_rng(5)


def _with_nan(x):
    return np.where(x > 1, np.nan, x) ** 2  # a NaN entry whose tangent is NaN too


@pytest.mark.parametrize(
    "reduce",
    [np.nansum, np.nanmean, np.nanmax, np.nanmin, np.nanprod,
     lambda v: np.nansum(v, where=v > 0.1), lambda v: np.nanmean(v, keepdims=True)[0]],
)  # fmt: skip
def test_nan_reductions_leave_out_the_tangents_of_nan_elements(reduce):
    # forward mode gave NaN: the NaN element's NaN tangent times its zero weight
    x = np.array([2.0, -2.5, 0.4, -0.6, -0.45])
    vmapx.check_grads(lambda x: reduce(_with_nan(x)), (x,), order=2)
    np.testing.assert_allclose(
        vmapx.jacfwd(lambda x: reduce(_with_nan(x)))(x),
        vmapx.jacrev(lambda x: reduce(_with_nan(x)))(x),
    )
