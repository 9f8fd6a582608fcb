"""Outer products over the last two axes computed column by column (`vmapx._numpy.ufuncs.
outer_by_columns`): the loop's values bit for bit (every element is the ufunc of the
same two numbers), its dtypes, and the same path into a chunk's output slices."""

from __future__ import annotations

import numpy as np
import pytest

import vmapx
from harness import loop_reference
from vmapx._numpy import ufuncs

B = 600  # (examples x rows x columns above the path's minimum size)


def _spy(monkeypatch: pytest.MonkeyPatch) -> list:
    """Calls that computed an outer product by columns (the ufunc rule's and
    `np.outer`'s: both end in `_by_columns`)."""
    taken = []
    original = ufuncs._by_columns

    def spy(*args):  # noqa: ANN002, ANN202
        out = original(*args)
        taken.append(out is not None)
        return out

    monkeypatch.setattr(ufuncs, "_by_columns", spy)
    return taken


def _same_bits(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    if got.dtype.kind in "fc":
        np.testing.assert_array_equal(np.signbit(got.real), np.signbit(want.real))


# (one NaN: the sign of a NaN made from two may be either operand's, see the function)
_SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e308, -1e-320, 3.0])


@pytest.mark.parametrize(
    "func",
    [
        lambda g, x: g[:, None] * x[None, :],
        lambda g, x: np.outer(g, x),
        lambda g, x: np.subtract(g[:, None], x[None, :]),
        lambda g, x: g[:, None] / x[None, :],
        lambda g, x: g[:, None] > x[None, :],
        lambda g, x: np.maximum(g[:, None], x),
        lambda g, x: np.arctan2(g[:, None], x[None, :]),
    ],
)
@pytest.mark.parametrize(
    ("columns", "chunk_size"), [(2, None), (3, None), (2, 200), (5, 200), (8, 150)]
)
def test_outer_products_are_the_loops_bits(
    func,  # noqa: ANN001
    columns: int,
    chunk_size: int | None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Up to 3 columns in a whole-batch call, up to 8 in a chunk's (whose results go
    into the batch's outputs in C order)."""
    taken = _spy(monkeypatch)
    rng = np.random.default_rng(columns)
    g = rng.choice(_SPECIALS, (B, 64))
    x = rng.choice(_SPECIALS, (B, columns))
    with np.errstate(all="ignore"):
        got = vmapx.vmap(func, chunk_size=chunk_size)(g, x)
        want = loop_reference(func, [g, x], 0)
    _same_bits(got, want)
    assert True in taken


@pytest.mark.parametrize(
    ("left", "right"),
    [
        (np.int8, np.int8),
        (np.int8, np.float32),
        (np.bool_, np.int16),
        (np.float32, np.float64),
        (np.float32, np.float32),
    ],
)
def test_outer_products_keep_numpys_dtypes(left: type, right: type) -> None:
    rng = np.random.default_rng(0)
    g = rng.integers(-100, 100, (B, 40)).astype(left)
    x = rng.integers(-100, 100, (B, 3)).astype(right)

    def f(g: np.ndarray, x: np.ndarray) -> np.ndarray:
        return g[:, None] * x[None, :]

    with np.errstate(all="ignore"):
        _same_bits(vmapx.vmap(f)(g, x), loop_reference(f, [g, x], 0))


def test_more_columns_than_rows_and_small_results_keep_numpys_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    taken = _spy(monkeypatch)
    rng = np.random.default_rng(1)
    f = np.outer
    for g, x in [
        (rng.random((B, 4)), rng.random((B, 8))),
        (rng.random((4, 32)), rng.random((4, 4))),
    ]:
        _same_bits(vmapx.vmap(f)(g, x), loop_reference(f, [g, x], 0))
    assert not any(taken)


@pytest.mark.parametrize("chunk_size", [128, 250])
def test_chunks_compute_outer_products_into_their_output_slices(chunk_size: int) -> None:
    rng = np.random.default_rng(2)
    g, x = rng.standard_normal((B, 32)), rng.standard_normal((B, 4))

    def f(g: np.ndarray, x: np.ndarray) -> tuple:
        return np.outer(g, x), g[:, None] - x

    got = vmapx.vmap(f, chunk_size=chunk_size)(g, x)
    want = loop_reference(f, [g, x], 0)
    for a, b in zip(got, want, strict=True):
        _same_bits(a, b)
        assert a.flags.c_contiguous and a.flags.writeable


def test_per_example_weight_gradients_match_the_loop() -> None:
    rng = np.random.default_rng(3)
    w, xs, ys = rng.standard_normal((16, 4)), rng.standard_normal((B, 4)), rng.standard_normal(B)

    def loss(w: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return (np.tanh(w @ x).sum() - y) ** 2

    grad = vmapx.grad(loss)
    got = vmapx.vmap(grad, in_axes=(None, 0, 0))(w, xs, ys)
    want = np.stack([grad(w, x, y) for x, y in zip(xs, ys, strict=True)])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


def test_jit_of_an_outer_product_replays() -> None:
    """Under `vmapx.jit`'s recording the values are not arrays: NumPy's own multiply
    (recorded), not columns written into an array the recording does not see."""
    rng = np.random.default_rng(4)
    g, x = rng.standard_normal((B, 32)), rng.standard_normal((B, 2))
    jitted = vmapx.jit(vmapx.vmap(np.outer))
    assert "not replayable" not in str(jitted.lower(g, x))
    for _ in range(2):
        _same_bits(jitted(g, x), loop_reference(np.outer, [g, x], 0))
