"""numpy.linalg and numpy.fft under vmap: what the op table cannot express (values that
decide dtypes and shapes, warnings, errors, every solve/lstsq layout)."""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import vmapx
from harness import check_vmap
from np_compat import np2, numpy1_only, requires_numpy2

la = np2.linalg


def _stack(rng: np.random.Generator, make: Callable, size: int = 3) -> np.ndarray:
    return np.stack([make(rng) for _ in range(size)])


def _well(n: int) -> Callable:
    return lambda rng: rng.uniform(-1, 1, (n, n)) + n * np.eye(n)


def test_eig_with_mixed_real_and_complex_spectra_matches_the_loop() -> None:
    """NumPy gives real results only when every eigenvalue in the call is real: examples
    whose types differ run the loop (a later step computes otherwise on real values than
    on complex ones, `np.iscomplexobj`, `np.sqrt`); the stack is complex."""
    rotation = np.array([[0.0, -1.0], [1.0, 0.0]])  # eigenvalues +-i
    diagonal = np.diag([1.0, 2.0])
    x = np.stack([rotation, diagonal, rotation + diagonal])
    for f in (la.eig, la.eigvals, lambda a: np.float64(np.iscomplexobj(la.eigvals(a)))):
        with pytest.warns(vmapx.PerformanceWarning, match="eigenvalues for some examples"):
            check_vmap(f, [x])
    check_vmap(la.eig, [np.stack([diagonal, 2 * diagonal])])  # all real: float64
    check_vmap(la.eig, [np.stack([rotation, rotation + diagonal])])  # all complex


def test_eigenvectors_are_those_of_the_loop_exactly() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 4, 4))[:4]  # (complex eigenvalues in each: batched)
    got = vmapx.vmap(la.eig)(x)
    for i in range(4):
        one = la.eig(x[i])
        np.testing.assert_array_equal(got.eigenvalues[i], one.eigenvalues)
        np.testing.assert_array_equal(got.eigenvectors[i], one.eigenvectors)
    assert type(got).__name__ == "EigResult"


@pytest.mark.parametrize(
    "shapes",
    [
        ((3, 3), (3,)),
        ((3, 3), (3, 2)),
        pytest.param(((2, 3, 3), (3,)), marks=requires_numpy2("solve with a 1-d b")),
        ((3, 3), (2, 3, 2)),
        pytest.param(((2, 3, 3), (3, 1)), marks=requires_numpy2("solve with a 2-d b")),
        pytest.param(((2, 3, 3), (2, 3)), marks=numpy1_only("solve with stacked vectors")),
    ],
    ids=str,
)
def test_solve_every_layout(shapes: tuple) -> None:
    rng = np.random.default_rng(0)
    a_shape, b_shape = shapes
    for in_axes in [(0, 0), (0, None), (None, 0), (1, 0)]:
        if in_axes[0] == 1 and len(a_shape) < 3:
            continue

        def make_a(rng: np.random.Generator) -> np.ndarray:
            return rng.uniform(-1, 1, a_shape) + 3 * np.eye(3)

        a = _stack(rng, make_a) if in_axes[0] is not None else make_a(rng)
        if in_axes[0] == 1:
            a = np.moveaxis(a, 0, 1)
        b = rng.uniform(-1, 1, (3, *b_shape)) if in_axes[1] is not None else rng.uniform(
            -1, 1, b_shape
        )  # fmt: skip
        check_vmap(la.solve, [a, b], in_axes=in_axes, rtol=1e-10, atol=1e-12)


def test_solve_with_an_unbatched_matrix_factorizes_once() -> None:
    rng = np.random.default_rng(0)
    a, b = _well(4)(rng), rng.random((50, 4))
    got = vmapx.vmap(la.solve, in_axes=(None, 0))(a, b)
    np.testing.assert_allclose(got, la.solve(a, b.T).T, rtol=1e-12)


def test_lstsq_rank_deficient_and_wide() -> None:
    rng = np.random.default_rng(0)
    deficient = np.stack([rng.random((5, 2)) @ rng.random((2, 3)) for _ in range(3)])
    b = rng.random((3, 5))
    for in_axes in [(0, 0), (0, None)]:
        args = [deficient, b if in_axes[1] == 0 else b[0]]
        check_vmap(lambda a, b: la.lstsq(a, b, rcond=None), args, in_axes=in_axes, rtol=1e-8,
                   atol=1e-10)  # fmt: skip
    check_vmap(lambda a, b: la.lstsq(a, b, rcond=-1), [rng.random((3, 2, 4)), rng.random((3, 2))],
               rtol=1e-8, atol=1e-10)  # fmt: skip


@pytest.mark.parametrize("rcond", [0, False, True, 1.0, 2.0, np.inf, -1, 1e-3, 0.5])
def test_lstsq_and_polyfit_take_rcond_as_lapack_does(rcond: Any) -> None:
    # LAPACK's gelsd takes machine precision for an rcond <= 0 or >= 1 (it kept none
    # of the singular values for rcond >= 1, and a rank-deficient matrix's smallest for 0)
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(3, 4, 3)), rng.normal(size=(3, 4))
    a[:, :, 2] = 2 * a[:, :, 0]
    check_vmap(lambda a, b: la.lstsq(a, b, rcond=rcond)[:3], [a, b], rtol=1e-8, atol=1e-10)
    y = rng.normal(size=(3, 5))
    fit = np.polynomial.polynomial.polyfit
    with warnings.catch_warnings():  # (0.5: the fit is poorly conditioned, in the loop too)
        warnings.filterwarnings("ignore", message=".*poorly conditioned")
        check_vmap(lambda y: np.polyfit(np.arange(5.0), y, 2, rcond=rcond), [y], rtol=1e-8)
        check_vmap(lambda x: fit(x, np.arange(5.0), 2, rcond=rcond), [y], rtol=1e-8)


def test_lstsq_with_mixed_ranks_gives_the_loops_answer() -> None:
    """Residuals exist only for full-rank examples: their shapes differ, so vmap runs
    the function per example (as the loop would fail to stack, it raises the same)."""
    rng = np.random.default_rng(0)
    a = np.stack([rng.random((5, 3)), rng.random((5, 1)) @ rng.random((1, 3))])
    b = rng.random((2, 5))
    with pytest.warns(vmapx.PerformanceWarning, match="lstsq"), pytest.raises(ValueError):
        vmapx.vmap(la.lstsq)(a, b)
    with pytest.warns(vmapx.PerformanceWarning, match="pinv"):
        x = vmapx.vmap(lambda a, b: la.lstsq(a, b)[0])(a, b)
    np.testing.assert_allclose(x, [la.lstsq(a[i], b[i])[0] for i in range(2)], rtol=1e-9)


def test_lstsq_rcond_batched_and_zero_batch() -> None:
    rng = np.random.default_rng(0)
    a, b, r = rng.random((3, 6, 3)), rng.random((3, 6, 2)), np.array([1e-3, 1e-2, 1e-4])
    check_vmap(lambda a, b, r: la.lstsq(a, b, rcond=r), [a, b, r], rtol=1e-8, atol=1e-10)
    for in_axes in [(0, 0), (None, 0)]:
        args = [a[:0] if in_axes[0] == 0 else a[0], b[:0]]
        x, res, rank, s = vmapx.vmap(la.lstsq, in_axes=in_axes)(*args)
        assert x.shape == (0, 3, 2) and res.shape == (0, 2) and rank.shape == (0,)
        assert s.shape == (0, 3) and rank.dtype == np.int32


@pytest.mark.parametrize("dtype", [np.float32, np.complex128, np.int64])
def test_lstsq_dtypes(dtype: type) -> None:
    rng = np.random.default_rng(0)
    a = (rng.random((3, 5, 3)) * 4).astype(dtype) + np.eye(5, 3, dtype=dtype) * 3
    b = (rng.random((3, 5)) * 4).astype(dtype)
    tol = {"rtol": 1e-4, "atol": 1e-5} if dtype == np.float32 else {"rtol": 1e-9, "atol": 1e-10}
    for in_axes in itertools.product((0, None), repeat=2):
        if in_axes != (None, None):
            args = [a if in_axes[0] == 0 else a[0], b if in_axes[1] == 0 else b[0]]
            check_vmap(la.lstsq, args, in_axes=in_axes, **tol)


def test_multi_dot_orders_by_batched_cost() -> None:
    rng = np.random.default_rng(0)
    w1, w2, x = rng.random((50, 40)), rng.random((40, 30)), rng.random((20, 30))
    # batched x: (w1 @ w2) once, then one product with the batch
    check_vmap(lambda w1, w2, x: la.multi_dot([w1, w2, x]), [w1, w2, x], in_axes=(None, None, 0),
               rtol=1e-10)  # fmt: skip
    with pytest.raises(ValueError, match="at least two"):
        vmapx.vmap(lambda x: la.multi_dot([x]))(x)


@pytest.mark.parametrize(
    ("func", "error"),
    [
        (la.inv, la.LinAlgError),
        (la.det, la.LinAlgError),
        (la.eigh, la.LinAlgError),
        (la.matrix_transpose, ValueError),
        (la.diagonal, ValueError),
        (lambda x: la.matrix_power(x, 2), la.LinAlgError),
        (lambda x: la.tensorinv(x, ind=0), ValueError),
    ],
)
def test_too_few_axes_raise_numpys_error(func: Callable, error: type) -> None:
    """A batch of vectors must not pass for one stack of matrices."""
    x = np.ones((3, 4))
    with pytest.raises(error) as expected:
        func(x[0])
    with pytest.raises(error) as got:
        vmapx.vmap(func)(x)
    assert str(got.value) == str(expected.value)


def test_singular_matrix_raises_like_the_loop() -> None:
    x = np.stack([np.eye(2), np.zeros((2, 2))])
    with pytest.raises(la.LinAlgError, match="Singular"):
        vmapx.vmap(la.inv)(x)


def test_norm_orders_and_axes() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 4, 5))
    cases = [(None, None), ("fro", (0, 1)), (2, (1, 0)), (-2, (0, 1)), (np.inf, 1),
             (-np.inf, None), (0, -1), (1, (0, 1)), (-1, (0, 1)), ("nuc", (0, 1))]  # fmt: skip
    for ord_, axis in cases:
        if axis is None and ord_ is not None:
            check_vmap(lambda x, o=ord_: la.norm(x, o), [x[:, 0]])
            continue
        check_vmap(lambda x, o=ord_, a=axis: la.norm(x, o, a, keepdims=True), [x])
    with pytest.raises(ValueError, match="Improper number of dimensions"):
        vmapx.vmap(lambda x: la.norm(x, 1))(x[None])


def test_irfftn_s_without_axes_warns_like_numpy() -> None:
    x = np.ones((3, 2, 4, 4), dtype=complex)
    with pytest.warns(DeprecationWarning, match="`axes` should not be `None`"):
        got = vmapx.vmap(lambda x: np.fft.irfftn(x, s=(4, 6)))(x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        expected = np.stack([np.fft.irfftn(e, s=(4, 6)) for e in x])
    np.testing.assert_allclose(got, expected)


def test_fft_axis_out_of_range() -> None:
    with pytest.raises(np.exceptions.AxisError):
        vmapx.vmap(lambda x: np.fft.fft(x, axis=1))(np.ones((3, 4)))


# -- derivatives ----------------------------------------------------------------------------


def _phase_free(result: tuple) -> tuple:
    """Values and |vector entries|^2 (unchanged by each vector's phase)."""
    return tuple(np.abs(r) ** 2 if r.ndim == 2 else r for r in result)


def _hermitian(rng: np.random.Generator, n: int) -> np.ndarray:
    a = rng.standard_normal((n, n)) + 1j * rng.standard_normal((n, n))
    return a @ a.conj().T + n * np.eye(n)


@pytest.mark.parametrize(
    "func",
    [
        la.cholesky,
        pytest.param(
            lambda a: la.cholesky(a, upper=True), marks=requires_numpy2("cholesky(upper=)")
        ),
        lambda a: _phase_free(la.eigh(a)),
        lambda a: _phase_free(la.eigh(a, UPLO="U")),
        la.eigvalsh,
        la.inv,
        la.det,
        la.slogdet,
        lambda a: _phase_free(la.svd(a)),
        lambda a: la.pinv(a, hermitian=True),
        la.qr,
        la.eig,
    ],
)
def test_complex_derivatives(func: Callable) -> None:
    """Complex inputs (JAX's convention), reading one triangle where NumPy does. The
    phase of complex eigen- and singular vectors is LAPACK's choice: their derivatives
    keep it fixed (as JAX's), so phase-free functions of them are checked."""
    rng = np.random.default_rng(0)
    a = _hermitian(rng, 3) + 0.3j * rng.standard_normal((3, 3))
    vmapx.check_grads(func, (a,), order=1, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape", [(3, 5), (5, 3), (4, 4)])
def test_qr_and_svd_derivatives_of_every_shape(shape: tuple) -> None:
    rng = np.random.default_rng(1)
    a = rng.standard_normal(shape)
    vmapx.check_grads(la.qr, (a,), order=2)
    vmapx.check_grads(lambda a: la.svd(a, full_matrices=False), (a,), order=2)
    vmapx.check_grads(la.svdvals, (a,), order=2)


def test_full_svd_of_a_rectangular_matrix_has_no_derivative() -> None:
    with pytest.raises(vmapx.errors.DifferentiationError, match="svd"):
        vmapx.jacfwd(la.svd)(np.ones((3, 2)))


def test_solve_and_lstsq_derivatives_under_vmap() -> None:
    rng = np.random.default_rng(2)
    a = rng.standard_normal((4, 3, 3)) + 3 * np.eye(3)
    b = rng.standard_normal((4, 3))

    def loss(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        x = la.solve(a, b)
        y, res, _, s = la.lstsq(np.concatenate([a, a * 2]), np.concatenate([b, b]))
        return np.sum(x**2) + np.sum(y) + np.sum(res) + np.sum(s)

    grad = vmapx.grad(loss, argnums=(0, 1))
    got = vmapx.vmap(grad)(a, b)
    for i in range(4):
        one = grad(a[i], b[i])
        np.testing.assert_allclose(got[0][i], one[0], rtol=1e-9)
        np.testing.assert_allclose(got[1][i], one[1], rtol=1e-9)
    vmapx.check_grads(loss, (a[0], b[0]), order=2)


@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
@pytest.mark.parametrize(
    "func",
    [
        lambda x, norm: np.fft.fft(x, n=5, norm=norm),
        lambda x, norm: np.fft.ifft(x, n=11, axis=0, norm=norm),
        lambda x, norm: np.fft.rfft(np.real(x), n=7, norm=norm),
        lambda x, norm: np.fft.irfft(x, n=9, norm=norm),
        lambda x, norm: np.fft.hfft(x, norm=norm),
        lambda x, norm: np.fft.ihfft(np.real(x), norm=norm),
        lambda x, norm: np.fft.rfftn(np.real(x), s=(5, 6), axes=(1, 0), norm=norm),
        lambda x, norm: np.fft.irfftn(x, s=(4, 7), axes=(0, 1), norm=norm),
        lambda x, norm: np.fft.fft2(x, s=(3, 9), norm=norm),
    ],
)
def test_fft_derivatives(func: Callable, norm: str | None) -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((6, 8)) + 1j * rng.standard_normal((6, 8))
    vmapx.check_grads(lambda x: func(x, norm), (x,), order=2)
