"""What differs between NumPy 1.26 and NumPy 2 (see `vmapx/_numpy/_compat.py`): vmap
gives the installed NumPy's answer, dtypes included."""

from __future__ import annotations

import doctest
import warnings
from collections.abc import Callable

import numpy as np
import pytest

import vmapx
from harness import check_vmap, loop_reference
from np_compat import NUMPY2, numpy1_only
from vmapx import _compat

rng = np.random.default_rng(0)

# 0-d values of each example next to arrays: NumPy 1.26 promotes them by value
PROMOTIONS: list[Callable] = [
    lambda v: v * 2 + v.sum(),
    lambda v: v + v[0],
    lambda v: v * v.max(),
    lambda v: v[0] * v[1],  # only 0-d operands: by type
    lambda v: v[0] * 2.5,
    lambda v: v[0] + 3,
    lambda v: v < v[0],
    lambda v: np.ones(4, np.float32) * v[0],
    lambda v: np.ones(4, np.int8) + v[0],
    lambda v: np.ldexp(np.ones(4, np.float32), v[0].astype(np.int64) % 4),
]


@numpy1_only("0-d values of different dtypes per example")
def test_0d_values_of_different_dtypes_per_example_loop() -> None:
    x = np.array([[100, 100, 100], [100, 27, 0]], dtype=np.int8)  # sums 300 and 127
    with pytest.warns(vmapx.PerformanceWarning, match="different dtypes for different examples"):
        got = vmapx.vmap(lambda v: v * 2 + v.sum())(x)
    assert got.tolist() == [[244, 244, 244], [71, -75, 127]]  # example 1 wraps in int8


@pytest.mark.parametrize("f", PROMOTIONS)
@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32", "float32", "float64", "bool"])
@pytest.mark.parametrize("scale", [1.0, 300.0, 1e5])
def test_dtypes_of_0d_values_follow_the_loop(f: Callable, dtype: str, scale: float) -> None:
    x = (rng.uniform(-scale / 3, scale, (3, 4))).astype(dtype)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        try:
            want = loop_reference(f, [x], 0)
        except TypeError:  # no loop for these types in NumPy either
            return
        if not NUMPY2:  # examples whose values give different dtypes loop
            warnings.simplefilter("ignore", vmapx.PerformanceWarning)
        got = vmapx.vmap(f)(x)
        nested = vmapx.vmap(vmapx.vmap(f))(np.stack([x, x[::-1]]))
    assert got.dtype == want.dtype and nested.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_astype_of_traced_values() -> None:
    x = rng.normal(size=(3, 4))
    check_vmap(lambda v: v.astype(np.float32) + v.astype(int), [x])
    check_vmap(lambda v: _compat.astype(v, np.complex64), [x])
    g = vmapx.grad(lambda v: np.sum(_compat.astype(v, np.float32) ** 2))(x[0])
    np.testing.assert_allclose(g, 2 * x[0], rtol=1e-6)


def test_vecdot_stand_in_matches_numpy() -> None:
    a, b = rng.normal(size=(2, 3, 4)) + 1j * rng.normal(size=(2, 3, 4)), rng.normal(size=(3, 4))
    want = np.sum(np.conjugate(a) * b, axis=-1)
    np.testing.assert_allclose(_compat.vecdot(a, b), want, rtol=1e-12)
    np.testing.assert_allclose(_compat.vecdot(a, b[None], axis=-1), want, rtol=1e-12)


def test_put_into_an_empty_array_raises_numpy_2s_error() -> None:
    for mode in ("raise", "wrap", "clip"):
        with pytest.raises(IndexError, match="cannot replace elements of an empty array"):
            _compat.put(np.zeros(0), [0], [1.0], mode=mode)


@numpy1_only("lstsq's default rcond=-1, announced by a FutureWarning")
def test_lstsq_default_cutoff_warns_like_numpy() -> None:
    a, b = rng.normal(size=(3, 4, 2)), rng.normal(size=(3, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("default")  # the suite ignores this warning
        with pytest.warns(FutureWarning, match="rcond"):
            got = vmapx.vmap(np.linalg.lstsq)(a, b)
    want = [np.linalg.lstsq(ai, bi, rcond=-1) for ai, bi in zip(a, b, strict=True)]
    for i, w in enumerate(want):
        np.testing.assert_allclose(got[0][i], w[0], rtol=1e-10)


def test_meshgrid_gives_numpys_sequence_type() -> None:
    x = rng.normal(size=(2, 3))
    got = vmapx.vmap(lambda v: np.meshgrid(v, v))(x)
    assert type(got) is (tuple if NUMPY2 else list)


def test_compat_docstrings() -> None:
    failures, attempted = doctest.testmod(_compat)
    assert failures == 0 and attempted > 0


@pytest.mark.parametrize("exponent", [2, 2.0, 0.5, -1, 1, 3, np.float64(0.5), np.array(-1.0)])
@pytest.mark.parametrize("dtype", ["f8", "f4", "c16"])
def test_the_power_operator_has_the_bits_of_numpys(exponent, dtype):
    """NumPy's `array ** 2` / `** 0.5` / `** -1` / `** 1` call square / sqrt /
    reciprocal / positive (other bits than `np.power` for complex numbers, and on NumPy
    1.26 for floats, where `(-inf) ** 0.5` is nan). A batched `**` gives the loop's."""
    x = np.concatenate([rng.standard_normal(40), [-np.inf, -0.0, 0.0, np.inf]]).astype(dtype)
    x = x.reshape(4, 11)

    def f(v):
        w = v * 1.0
        w **= exponent  # (in place too)
        return v**exponent, w

    with np.errstate(all="ignore"):
        got = vmapx.vmap(f)(x)
        loop = [np.stack(r) for r in zip(*[f(v) for v in x], strict=True)]
    for g, e in zip(got, loop, strict=True):
        assert g.dtype == e.dtype
        np.testing.assert_array_equal(g, e)
