"""Derivatives of shapes, joins and splits beyond the op table: every mode of `np.pad`
(wide pads padded chunk by chunk, odd reflections, ramps, statistics), structural
functions whose positions depend on batched arguments, cached position maps, and
multi-output functions."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import vmapx
from np_compat import np2

rng = np.random.default_rng(0)

PAD_MODES = [
    ("constant", {"constant_values": (1.5, -2.0)}),
    ("edge", {}),
    ("wrap", {}),
    ("reflect", {}),
    ("symmetric", {}),
    ("reflect", {"reflect_type": "odd"}),
    ("symmetric", {"reflect_type": "odd"}),
    ("linear_ramp", {}),
    ("linear_ramp", {"end_values": (1.0, -2.0)}),
    ("mean", {}),
    ("median", {"stat_length": 3}),
    ("maximum", {"stat_length": ((1, 5), (2, 1))}),
    ("minimum", {}),
]
PAD_CASES = [
    ((3, 4), ((1, 2), (2, 1))),
    ((3, 2), ((7, 5), (4, 9))),  # wider than the array: padded chunk by chunk
    ((1, 3), ((2, 2), (0, 4))),  # a singleton axis
]


def _check(f: Callable, x: np.ndarray) -> None:
    """Both modes to order 2 against differences; vmap(grad) against a loop of grad."""
    vmapx.check_grads(f, (x,), order=2, rtol=1e-5, atol=1e-5)
    xs = x + rng.normal(size=(3, *x.shape)) * 0.1
    got = vmapx.vmap(vmapx.grad(f))(xs)
    want = np.stack([vmapx.grad(f)(e) for e in xs])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("mode,kw", PAD_MODES, ids=[f"{m}{k}" for m, k in PAD_MODES])
@pytest.mark.parametrize("shape,width", PAD_CASES, ids=["narrow", "wide", "singleton"])
def test_pad_modes(mode: str, kw: dict, shape: tuple, width: Any) -> None:
    # distinct, well separated values: statistics have a derivative there
    x = rng.permutation(np.arange(np.prod(shape))).reshape(shape) + rng.uniform(0, 0.3, shape)
    want = np.pad(x, width, mode=mode, **kw)
    primal, _ = vmapx.jvp(lambda x: np.pad(x, width, mode=mode, **kw), (x,), (np.ones_like(x),))
    np.testing.assert_allclose(primal, want, rtol=1e-13, atol=1e-13)
    weights = rng.normal(size=want.shape)
    _check(lambda x: np.sum(np.pad(x, width, mode=mode, **kw) * weights), x)


def test_pad_traced_end_values_and_empty() -> None:
    x, ends = rng.normal(size=(2, 3)), np.array([0.5, -1.5])
    f = lambda x, e: np.pad(x, ((1, 2), (3, 1)), mode="linear_ramp", end_values=e)  # noqa: E731
    vmapx.check_grads(f, (x, ends), order=2, rtol=1e-5, atol=1e-5)
    # `empty` leaves the pad area undefined: its tangent there is zero
    _, t = vmapx.jvp(lambda x: np.pad(x, 1, mode="empty"), (x,), (np.ones_like(x),))
    np.testing.assert_array_equal(t, np.pad(np.ones_like(x), 1))


def test_positions_from_batched_arguments() -> None:
    """Indices that differ per example give positions per example (the call loops)."""
    xs, obj = rng.normal(size=(3, 5)), np.array([0, 2, 4])
    f = lambda x, i: np.sum(np.delete(x, i) ** 2 * np.arange(4.0))  # noqa: E731
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", vmapx.PerformanceWarning)
        got = vmapx.vmap(vmapx.grad(f))(xs, obj)
    want = np.stack([vmapx.grad(f)(x, i) for x, i in zip(xs, obj, strict=True)])
    np.testing.assert_allclose(got, want)


def test_cached_positions_follow_static_arguments() -> None:
    """Calls that differ only in static arguments never share a position map."""
    x = rng.normal(size=(4, 3))
    for obj, axis in [(1, 0), (2, 0), ([0, 0], 1), (slice(0, 2), None), (1, 0)]:
        g = vmapx.grad(lambda x, o=obj, a=axis: np.sum(np.insert(x, o, 7.0, axis=a) ** 3))
        np.testing.assert_allclose(g(x), 3 * x**2)


@pytest.mark.parametrize(
    "f",
    [
        lambda x: np.split(x, [1, 1, 3], axis=1),  # with an empty piece
        lambda x: np.array_split(x, 3, axis=1),
        lambda x: np2.unstack(x, axis=-1),
        lambda x: np.broadcast_arrays(x, np.ones((2, 1, 1))),
        lambda x: np.meshgrid(x[0], x[1, :2], indexing="ij"),
        lambda x: np.atleast_3d(x, x[0]),
    ],
)
def test_several_results(f: Callable) -> None:
    x = rng.normal(size=(3, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # broadcast views warn when asked if writeable
        _check(lambda x: sum(np.sum(np.sin(p) * (k + 1)) for k, p in enumerate(f(x))), x)


def test_repeats_and_tiles() -> None:
    x = rng.normal(size=(2, 3))
    for f in [
        lambda x: np.repeat(x, 3),
        lambda x: np.repeat(x, [2], axis=0),
        lambda x: np.repeat(x, [0, 3, 1], axis=-1),
        lambda x: np.tile(x, (2, 1, 3)),
        lambda x: np.resize(x, (4, 4)),
    ]:
        w = rng.normal(size=np.shape(f(x)))
        _check(lambda x, f=f, w=w: np.sum(np.sin(f(x)) * w), x)
