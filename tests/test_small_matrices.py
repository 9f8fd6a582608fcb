"""A batch of small matrices factored and solved entry by entry (`vmapx._numpy.
small_matrices`): the loop's values up to rounding, and LAPACK's own answers, errors and
NaNs wherever the entry-by-entry path does not apply. The batches are large enough for
that path (512 examples or more)."""

from __future__ import annotations

import numpy as np
import pytest

import vmapx
from harness import check_vmap
from np_compat import requires_numpy2
from vmapx._numpy import small_matrices

B = small_matrices._MIN_BATCH


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


@pytest.mark.parametrize("n", [2, 3, 4, 6])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_cholesky_matches_the_loop(n: int, dtype: type, monkeypatch: pytest.MonkeyPatch) -> None:
    taken = _spy(monkeypatch, "small_cholesky")
    a = _spd(np.random.default_rng(n), n, dtype=dtype)
    a[:, 0, n - 1] = 1e30  # (NumPy reads the lower triangle only)
    got = vmapx.vmap(np.linalg.cholesky)(a)
    want = _loop(np.linalg.cholesky, a)
    assert taken == [True]
    assert got.dtype == want.dtype and got.shape == want.shape
    tol = 1e-5 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())
    assert not np.triu(got, 1).any()


def test_cholesky_of_a_matrix_not_positive_definite_raises_like_the_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    taken = _spy(monkeypatch, "small_cholesky")
    a = _spd(np.random.default_rng(0), 3)
    a[7] = np.diag([1.0, -1.0, 1.0])
    with pytest.raises(np.linalg.LinAlgError) as want:
        _loop(np.linalg.cholesky, a)
    with pytest.raises(np.linalg.LinAlgError) as got:
        vmapx.vmap(np.linalg.cholesky)(a)
    assert str(got.value) == str(want.value)
    assert taken == [False]


def test_cholesky_of_a_nearly_singular_matrix_is_lapacks(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pivot within the margin of zero: LAPACK decides (its rounding, not ours)."""
    taken = _spy(monkeypatch, "small_cholesky")
    a = _spd(np.random.default_rng(1), 2)
    a[3] = [[1.0, 1.0], [1.0, 1.0 + 1e-15]]
    got = vmapx.vmap(np.linalg.cholesky)(a)
    np.testing.assert_array_equal(got, np.linalg.cholesky(a))
    assert taken == [False]


def test_cholesky_with_nan_or_inf_gives_the_loops_values(monkeypatch: pytest.MonkeyPatch) -> None:
    taken = _spy(monkeypatch, "small_cholesky")
    a = _spd(np.random.default_rng(2), 3)
    a[5, 2, 0] = np.nan
    a[9, 1, 1] = np.inf
    got = vmapx.vmap(np.linalg.cholesky)(a)
    np.testing.assert_array_equal(got, np.linalg.cholesky(a))
    assert taken == [False]


@pytest.mark.parametrize("n", [2, 5, 16])
@pytest.mark.parametrize("columns", [None, 1, 3])
@pytest.mark.parametrize("lower", [True, False])
def test_triangular_solve_matches_the_loop(
    n: int, columns: int | None, lower: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    taken = _spy(monkeypatch, "triangular_solve")
    rng = np.random.default_rng(n)
    low = np.linalg.cholesky(_spd(rng, n))
    a = low if lower else np.swapaxes(low, 1, 2)
    b = rng.standard_normal((B, n) if columns is None else (B, n, columns))
    got = vmapx.vmap(np.linalg.solve)(a, b)
    want = _loop(np.linalg.solve, a, b)
    assert taken == [True]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * np.abs(want).max())


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
def test_solve_of_what_is_not_a_triangular_system_is_lapacks(
    spoil,
    monkeypatch: pytest.MonkeyPatch,  # noqa: ANN001
) -> None:
    taken = _spy(monkeypatch, "triangular_solve")
    rng = np.random.default_rng(4)
    a = np.linalg.cholesky(_spd(rng, 4))
    b = rng.standard_normal((B, 4, 1))
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
    taken = _spy(monkeypatch, "small_cholesky")
    rng = np.random.default_rng(5)
    few = _spd(rng, 3, size=8)
    np.testing.assert_array_equal(vmapx.vmap(np.linalg.cholesky)(few), np.linalg.cholesky(few))
    z = _spd(rng, 3).astype(np.complex128)
    np.testing.assert_array_equal(vmapx.vmap(np.linalg.cholesky)(z), np.linalg.cholesky(z))
    assert taken == [False, False]


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


@requires_numpy2("cholesky(upper=True)")
def test_cholesky_upper_keeps_lapack(monkeypatch: pytest.MonkeyPatch) -> None:
    taken = _spy(monkeypatch, "small_cholesky")
    a = _spd(np.random.default_rng(7), 3)
    got = vmapx.vmap(lambda m: np.linalg.cholesky(m, upper=True))(a)
    np.testing.assert_array_equal(got, np.linalg.cholesky(a, upper=True))
    assert taken == []
