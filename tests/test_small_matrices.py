"""`solve` of a batch of triangular matrices by substitution (`vmapx._numpy.
small_matrices`: entry by entry up to 12 rows, row by row up to 128): the loop's values
up to rounding, and LAPACK's own answers, errors and NaNs wherever substitution would
differ. The batches are large enough for those paths."""

from __future__ import annotations

import numpy as np
import pytest

import vmapx
from harness import check_vmap
from vmapx._numpy import small_matrices

B = small_matrices._MIN_BATCH
ROWS = 20  # a size for the row-by-row path...


def _batch(n: int) -> int:  # ...and a batch large enough for the path of size n
    return B if n <= small_matrices._MAX_N else -(-small_matrices._MIN_WORK // (n * n)) + 3


def _embedded(a: np.ndarray, n: int) -> np.ndarray:
    """The matrices `a` (..., m, m) as the top left block of identity matrices (n, n)."""
    out = np.zeros((*a.shape[:-2], n, n), a.dtype) + np.eye(n, dtype=a.dtype)
    out[..., : a.shape[-2], : a.shape[-1]] = a
    return out


def _spd(rng: np.random.Generator, n: int, size: int = B, dtype: type = np.float64) -> np.ndarray:
    g = rng.standard_normal((size, n, n))
    return (g @ np.swapaxes(g, 1, 2) + n * np.eye(n)).astype(dtype)


def _loop(f, *args):  # noqa: ANN001, ANN202
    return np.stack([f(*example) for example in zip(*args, strict=True)])


def _spy(monkeypatch: pytest.MonkeyPatch, name: str) -> list:
    """Calls of `small_matrices.<name>` that took the entry-by-entry path."""
    taken = []
    original = getattr(small_matrices, name)

    def spy(*args):  # noqa: ANN002, ANN202
        out = original(*args)
        taken.append(out is not None)
        return out

    monkeypatch.setattr(small_matrices, name, spy)
    import vmapx._numpy.linalg as linalg

    monkeypatch.setattr(linalg, name, spy)
    return taken


@pytest.mark.parametrize("n", [2, 5, 12, 13, 40, 128])
@pytest.mark.parametrize("columns", [None, 1, 2])
@pytest.mark.parametrize("lower", [True, False])
def test_triangular_solve_matches_the_loop(
    n: int, columns: int | None, lower: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    taken = _spy(monkeypatch, "triangular_solve")
    rng = np.random.default_rng(n)
    size = _batch(n)
    low = np.linalg.cholesky(_spd(rng, n, size) + n * n * np.eye(n))  # (no LU row swap)
    a = low if lower else np.swapaxes(low, 1, 2)
    b = rng.standard_normal((size, n) if columns is None else (size, n, columns))
    got = vmapx.vmap(np.linalg.solve)(a, b)
    want = _loop(np.linalg.solve, a, b)
    assert taken == [True]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * np.abs(want).max())
    assert got.flags.c_contiguous


@pytest.mark.parametrize("n", [5, 40])
def test_triangular_solve_in_float32(n: int, monkeypatch: pytest.MonkeyPatch) -> None:
    taken = _spy(monkeypatch, "triangular_solve")
    rng = np.random.default_rng(n)
    size = _batch(n)
    low = np.linalg.cholesky(_spd(rng, n, size) + n * n * np.eye(n)).astype(np.float32)
    b = rng.standard_normal((size, n)).astype(np.float32)
    for a in (low, np.swapaxes(low, 1, 2)):
        got = vmapx.vmap(np.linalg.solve)(a, b)
        want = _loop(np.linalg.solve, a, b)
        assert got.dtype == want.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    assert taken == [True, True]


def test_triangular_solve_row_by_row_needs_enough_work(monkeypatch: pytest.MonkeyPatch) -> None:
    taken = _spy(monkeypatch, "triangular_solve")
    rng = np.random.default_rng(2)
    low = np.linalg.cholesky(_spd(rng, ROWS, 8) + ROWS**2 * np.eye(ROWS))
    b = rng.standard_normal((8, ROWS))
    got = vmapx.vmap(np.linalg.solve)(low, b)
    np.testing.assert_array_equal(got, _loop(np.linalg.solve, low, b))
    assert taken == [False]


def test_triangular_solve_with_a_shared_right_hand_side(monkeypatch: pytest.MonkeyPatch) -> None:
    taken = _spy(monkeypatch, "triangular_solve")
    rng = np.random.default_rng(3)
    a = np.linalg.cholesky(_spd(rng, 4))
    b = rng.standard_normal((4, 2))
    check_vmap(np.linalg.solve, [a, b], in_axes=(0, None), rtol=1e-12)
    assert taken == [True]


@pytest.mark.parametrize(
    "spoil",
    [
        lambda a, b: a.__setitem__((9, 2, 2), 0.0),  # singular: LAPACK's error
        lambda a, b: a.__setitem__((9, 0, 3), 1.0),  # not triangular (not the first)
        lambda a, b: a.__setitem__((0, 0, 3), 1.0),  # not triangular (the first)
        lambda a, b: a.__setitem__((9, 3, 0), np.nan),
        lambda a, b: b.__setitem__((9, 1), np.inf),
    ],
)
@pytest.mark.parametrize("n", [4, ROWS])
def test_solve_of_what_is_not_a_triangular_system_is_lapacks(
    spoil,  # noqa: ANN001
    n: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    taken = _spy(monkeypatch, "triangular_solve")
    rng = np.random.default_rng(4)
    a = np.linalg.cholesky(_spd(rng, n, _batch(n)) + n * n * np.eye(n))
    b = rng.standard_normal((_batch(n), n, 1))
    spoil(a, b)
    try:
        want = np.linalg.solve(a, b)
    except np.linalg.LinAlgError as error:
        with pytest.raises(np.linalg.LinAlgError, match=str(error)):
            vmapx.vmap(np.linalg.solve)(a, b)
    else:
        np.testing.assert_array_equal(vmapx.vmap(np.linalg.solve)(a, b), want)
    assert taken == [False]


def test_small_batches_and_other_dtypes_keep_lapack(monkeypatch: pytest.MonkeyPatch) -> None:
    taken = _spy(monkeypatch, "triangular_solve")
    rng = np.random.default_rng(5)
    low = np.linalg.cholesky(_spd(rng, 3))
    b = rng.standard_normal((B, 3, 1))
    few = vmapx.vmap(np.linalg.solve)(low[:8], b[:8])
    np.testing.assert_array_equal(few, np.linalg.solve(low[:8], b[:8]))
    z = low.astype(np.complex128)
    np.testing.assert_array_equal(vmapx.vmap(np.linalg.solve)(z, b), np.linalg.solve(z, b))
    assert taken == [False, False]


# one example each, repeated: where LU's pivoting, subnormal values or an overflow make
# LAPACK's answer (or error) differ from substitution's by more than rounding
_LAPACKS_OWN = {
    "a row swap, then a zero pivot": ([[1e-8, 0, 0], [1, 1e-16, 0], [2, 3, 1]], [1, 1, 1]),
    "a row swap that loses digits": ([[1e-12, 0, 0], [2, 1e-12, 0], [3, -7, 3]], [1, 0.7, -0.3]),
    "a result that overflows to inf": (np.diag([1e-200, 1.0]), [1e200, 1.0]),
    "a result that overflows to nan": (np.diag([1.0, 1e-200]), [1.0, 1e200]),
    "subnormal values": ([[2e-310, 0], [1e-310, 3e-310]], [1e-300, 1e-300]),
    "a subnormal pivot": ([[3.97221075e-312, 0], [-7.81908462e-311, -2.57192241e-311]], [1, 1]),
}


@pytest.mark.parametrize("case", list(_LAPACKS_OWN))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n", [None, ROWS])
def test_where_lapack_differs_from_substitution_the_loops_answer_is_given(
    case: str, dtype: type, n: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    taken = _spy(monkeypatch, "triangular_solve")
    a, b = (np.asarray(x, dtype=np.float64) for x in _LAPACKS_OWN[case])
    if dtype == np.float32:  # (the same cases, scaled into float32's range)
        a, b = a / np.abs(a).max(), b / np.abs(b).max()
        a[np.abs(a) < 1e-30] *= 0  # (float32's subnormals: dropped, not tested)
    if n is not None:  # (the case in the first rows of a larger system)
        a, b = _embedded(a, n), np.concatenate([b, np.ones(n - b.shape[0])])
    size = _batch(a.shape[-1])
    a, b = np.stack([a] * size).astype(dtype), np.stack([b] * size).astype(dtype)
    with np.errstate(all="ignore"):
        try:
            want = _loop(np.linalg.solve, a, b)
        except np.linalg.LinAlgError as error:
            with pytest.raises(np.linalg.LinAlgError, match=str(error)):
                vmapx.vmap(np.linalg.solve)(a, b)
        else:
            got = vmapx.vmap(np.linalg.solve)(a, b)
            if taken == [True]:  # (float32, scaled: substitution may apply)
                np.testing.assert_allclose(got, want, rtol=1e-5)
            else:
                np.testing.assert_array_equal(got, want)
    if dtype == np.float64:
        assert taken == [False]


def test_results_are_c_ordered_like_the_loops() -> None:
    rng = np.random.default_rng(8)
    low = np.linalg.cholesky(_spd(rng, 2))
    got = vmapx.vmap(np.linalg.solve)(low, rng.standard_normal((B, 2, 2)))
    assert got.flags.c_contiguous
    got.view(np.complex128)  # (needs a contiguous last axis)


def test_cholesky_and_solves_under_grad_match_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    taken = _spy(monkeypatch, "triangular_solve")
    rng = np.random.default_rng(6)
    a, b = _spd(rng, 3), rng.standard_normal((B, 3, 1))

    def loss(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        low = np.linalg.cholesky(a)
        return np.sum(np.linalg.solve(low.T, np.linalg.solve(low, b)) ** 2)

    grad = vmapx.grad(loss, argnums=(0, 1))
    got = vmapx.vmap(grad)(a, b)
    for i in (0, 17, B - 1):
        one = grad(a[i], b[i])
        np.testing.assert_allclose(got[0][i], one[0], rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(got[1][i], one[1], rtol=1e-10, atol=1e-12)
    assert any(taken)
    vmapx.check_grads(loss, (a[0], b[0]), order=1)


@pytest.mark.parametrize("n", [4, ROWS])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_solution_entry_below_the_normal_range_is_lapacks(
    n: int, dtype: type, monkeypatch: pytest.MonkeyPatch
) -> None:
    # x_0 = 1e-21 / 1e300 is subnormal: multiplied back by 1e300 it has lost digits that
    # LU's (a_10 / a_00) * y_0 keeps (0.2% off)
    taken = _spy(monkeypatch, "triangular_solve")
    big, small = (1e300, 1e-21) if dtype == np.float64 else (1e20, 1e-24)
    size = _batch(n)
    a = np.tile(np.eye(n, dtype=dtype), (size, 1, 1))
    a[:, 0, 0] = a[:, 1, 0] = big
    b = np.ones((size, n), dtype)
    b[:, 0], b[:, 1] = small, 2 * small
    np.testing.assert_array_equal(vmapx.vmap(np.linalg.solve)(a, b), _loop(np.linalg.solve, a, b))
    assert taken == [False]
