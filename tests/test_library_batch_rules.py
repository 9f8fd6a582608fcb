"""The one-call batch rules of library adapters (and the adapters' argument binding)
give the loop's answer: batched and unbatched arguments mixed, every metric, options
by position and by keyword, and under `grad` (the lowering's path)."""

from __future__ import annotations

import numpy as np
import pytest

import vmapx
from harness import check_vmap

sd = pytest.importorskip("scipy.spatial.distance")
pytest.importorskip("vmapx.libraries.scipy_spatial")

RNG = np.random.default_rng(3)
PTS = RNG.normal(size=(5, 4, 3))
OTHER = RNG.normal(size=(6, 3))
VEC = RNG.normal(size=(5, 4))
METRICS = ("euclidean", "sqeuclidean", "cityblock", "chebyshev", "cosine", "correlation",
           "braycurtis", "canberra", "minkowski")  # fmt: skip


@pytest.mark.parametrize("metric", METRICS)
@pytest.mark.parametrize("in_axes", [(0, 0), (0, None), (None, 0)])
def test_cdist_batch_rule_matches_the_loop(metric, in_axes):
    XB = PTS[::-1] if in_axes == (0, 0) else OTHER if in_axes[1] is None else PTS
    XA = PTS if in_axes[0] == 0 else OTHER
    check_vmap(lambda a, b: sd.cdist(a, b, metric), (XA, XB), in_axes=in_axes)


@pytest.mark.parametrize("metric", METRICS)
def test_pdist_and_squareform_batch_rules_match_the_loop(metric):
    check_vmap(lambda x: sd.pdist(x, metric), (PTS,))
    check_vmap(lambda x: sd.squareform(sd.pdist(x, metric=metric)), (PTS,))


def test_squareform_of_no_distances_matches_the_loop():
    check_vmap(sd.squareform, (np.zeros((3, 0)),))


@pytest.mark.parametrize("name", METRICS)
@pytest.mark.parametrize("in_axes", [(0, 0), (0, None), (None, 0)])
def test_vector_metric_batch_rules_match_the_loop(name, in_axes):
    f = getattr(sd, name)
    u = VEC if in_axes[0] == 0 else VEC[0]
    v = VEC[::-1] if in_axes[1] == 0 else VEC[1]
    check_vmap(f, (u, v), in_axes=in_axes)


@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_vector_metrics_keep_the_library_dtype(dtype):
    u, v = (RNG.integers(-3, 4, (5, 4)).astype(dtype) for _ in range(2))
    for name in ("euclidean", "cityblock", "cosine"):
        check_vmap(getattr(sd, name), (u, v), rtol=1e-5)


def test_minkowski_order_by_position_and_keyword():
    check_vmap(lambda u, v: sd.minkowski(u, v, 3), (VEC, VEC[::-1]))
    check_vmap(lambda u, v: sd.minkowski(u, v, p=1.5), (VEC, VEC[::-1]))
    check_vmap(lambda u, v: sd.cdist(u, v, "minkowski", p=3), (PTS, PTS[::-1]))


@pytest.mark.filterwarnings("ignore::vmapx.PerformanceWarning")
def test_options_the_batch_rule_leaves_to_the_library_give_the_loop_answer():
    w = np.abs(VEC[0]) + 0.5
    check_vmap(lambda u, v: sd.euclidean(u, v, w), (VEC, VEC[::-1]))
    check_vmap(lambda x: sd.cdist(x, x, lambda a, b: np.abs(a - b).sum()), (PTS,))
    check_vmap(lambda x: sd.pdist(x, "hamming"), (PTS > 0,))


def test_an_argument_the_lowering_does_not_take_goes_to_the_library():
    with pytest.raises(TypeError):
        vmapx.vmap(lambda u, v: sd.euclidean(u, v, nonsense=1))(VEC, VEC)


@pytest.mark.parametrize("name", ["euclidean", "cosine"])
def test_vector_metrics_under_grad_take_the_lowering(name):
    f = getattr(sd, name)
    loss = lambda u: f(u, VEC[0] + 3.0) ** 2  # noqa: E731
    vmapx.check_grads(loss, (VEC[1],), order=1)
    check_vmap(vmapx.grad(loss), (VEC,))
    check_vmap(lambda u: vmapx.grad(lambda x: sd.cdist(x, OTHER).sum())(u), (PTS,))
