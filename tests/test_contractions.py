"""Contractions under vmap against the loop: every formulation branch (which operands
are batched, dtypes, lengths), hypothesis-generated einsum and tensordot calls, errors."""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import vmapx
from harness import check_vmap, check_zero_batch, loop_reference
from np_compat import np2, numpy1_only, requires_numpy2

DTYPES = ("float64", "complex128", "int64", "float32")


def _example(rng: np.random.Generator, shape: tuple, dtype: str) -> np.ndarray:
    if dtype == "int64":
        return rng.integers(-3, 4, shape)
    x = rng.standard_normal(shape)
    if dtype == "complex128":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def _args(rng: np.random.Generator, shapes: list, dtype: str, in_axes: tuple, size: int) -> list:
    out = []
    for shape, ax in zip(shapes, in_axes, strict=True):
        if ax is None:
            out.append(_example(rng, shape, dtype))
        else:
            out.append(np.stack([_example(rng, shape, dtype) for _ in range(size)], axis=ax))
    return out


def _tol(dtype: str) -> dict:
    return {"rtol": 1e-5, "atol": 1e-5} if dtype == "float32" else {"rtol": 1e-10, "atol": 1e-10}


def _check_all(f: Callable, shapes: list, dtype: str, size: int = 3) -> None:
    """vmap == loop for every mapped/unmapped combination (at least one mapped)."""
    rng = np.random.default_rng(0)
    for in_axes in itertools.product((0, None), repeat=len(shapes)):
        if all(ax is None for ax in in_axes):
            continue
        check_vmap(f, _args(rng, shapes, dtype, in_axes, size), in_axes=in_axes, **_tol(dtype))


MATMUL_SHAPES = [
    [(4,), (4,)],
    [(3, 4), (4,)],
    [(4,), (4, 3)],
    [(3, 4), (4, 2)],
    [(300, 250), (250,)],  # past the single-GEMV fold
    [(2, 3, 4), (4, 2)],
    [(4,), (2, 4, 3)],
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shapes", MATMUL_SHAPES, ids=str)
@pytest.mark.parametrize("func", [np.matmul, np.dot, np2.linalg.matmul], ids=lambda f: f.__name__)
def test_matrix_products(func: Callable, shapes: list, dtype: str) -> None:
    if func is np.dot and len(shapes[1]) > 2:
        shapes = [shapes[0], shapes[1][1:]]
    _check_all(func, shapes, dtype)


VECTOR_GUFUNCS = [
    (np2.vecdot, [[(4,), (4,)], [(3, 4), (4,)], [(4,), (3, 4)], [(2, 4), (2, 4)]]),
    (np2.matvec, [[(3, 4), (4,)], [(2, 3, 4), (4,)]]),
    (np2.vecmat, [[(4,), (4, 3)], [(4,), (2, 4, 3)]]),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("func", "shapes"),
    [(f, s) for f, cases in VECTOR_GUFUNCS for s in cases],
    ids=lambda x: getattr(x, "__name__", str(x)),
)
def test_vector_gufuncs(func: Callable, shapes: list, dtype: str) -> None:
    _check_all(func, shapes, dtype)


@requires_numpy2("arrays of more than 32 dimensions")
def test_outer_products_past_einsum_labels() -> None:
    """More axes than einsum has labels: the broadcasting form."""
    shape = (2,) + (1,) * 25
    _check_all(lambda a, b: np.tensordot(a, b, 0), [shape, shape], "float64", size=2)
    _check_all(np.kron, [shape, shape], "float64", size=2)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shapes", [[(4,), (4,)], [(2, 4), (3, 4)], [(2, 3, 4), (5, 4)], [(), (3,)]], ids=str
)
def test_inner(shapes: list, dtype: str) -> None:
    _check_all(np.inner, shapes, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_vdot_conjugates_the_first_operand(dtype: str) -> None:
    _check_all(np.vdot, [(2, 3), (3, 2)], dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shapes", [[(2, 3), (4,)], [(), (3,)], [(3,), (3,)]], ids=str)
def test_outer_and_kron(shapes: list, dtype: str) -> None:
    _check_all(np.outer, shapes, dtype)
    _check_all(np.kron, shapes, dtype)


# -- convolve / correlate ---------------------------------------------------------------------

LENGTHS = [(7, 3), (3, 7), (4, 4), (6, 1), (1, 5), (9, 2), (2, 9)]


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("lengths", LENGTHS, ids=str)
@pytest.mark.parametrize("func", [np.convolve, np.correlate], ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", ["float64", "complex128", "int64"])
def test_convolve_correlate(func: Callable, lengths: tuple, mode: str, dtype: str) -> None:
    n, m = lengths
    _check_all(lambda a, v: func(a, v, mode), [(n,), (m,)], dtype)


@pytest.mark.parametrize("func", [np.convolve, np.correlate], ids=lambda f: f.__name__)
@pytest.mark.parametrize("lengths", [(200, 130), (130, 200)], ids=str)
def test_convolve_long_rows_both_batched(func: Callable, lengths: tuple) -> None:
    """Long rows with both operands batched use NumPy's kernel row by row."""
    n, m = lengths
    for mode in ("full", "same", "valid"):
        _check_all(lambda a, v, mode=mode: func(a, v, mode), [(n,), (m,)], "complex128")


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("func", [np.convolve, np.correlate], ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", ["float64", "float32", "complex128"])
@pytest.mark.parametrize("kernel_first", [False, True])
def test_convolve_with_a_long_shared_kernel_by_blocked_gemm(
    func: Callable, mode: str, dtype: str, kernel_first: bool
) -> None:
    """A shared kernel of 16 taps or more and enough outputs: blocks of outputs by a
    Toeplitz GEMM (`_blocked_toeplitz`), the loop's values up to rounding."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((80, 300)).astype(dtype)
    k = rng.standard_normal(21).astype(dtype)
    if dtype == "complex128":
        x, k = x + 1j * x[:, ::-1], k - 0.5j * k[::-1]

    def f(x: np.ndarray, k: np.ndarray) -> np.ndarray:
        return func(k, x, mode) if kernel_first else func(x, k, mode)

    got = vmapx.vmap(f, in_axes=(0, None))(x, k)
    want = np.stack([f(row, k) for row in x])
    assert got.dtype == want.dtype and got.shape == want.shape
    rtol = 1e-5 if dtype == "float32" else 1e-13
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * np.abs(want).max())


@pytest.mark.parametrize("scale", [1e200, 1e150])
def test_convolve_whose_products_overflow_is_the_loops(scale: float) -> None:
    """Finite values whose products (or their sums) overflow: row by row, as the loop
    (the batched forms would turn NumPy's NaN into inf, or leak NaN across rows), and no
    overflow reported where NumPy's kernel reports none."""
    x = np.full((512, 32), scale)
    x[:, 1::2] *= -1
    k = np.full(16, scale)
    with np.errstate(all="raise"):
        want = np.stack([np.convolve(r, k) for r in x])
        got = vmapx.vmap(lambda r: np.convolve(r, k), chunk_size=None)(x)
    if scale > 1e154:  # (products overflow: row by row, NumPy's own values)
        np.testing.assert_array_equal(got, want)
    else:  # (no overflow: the sums cancel, equal up to rounding of their terms)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13 * scale * scale)


def test_convolve_with_a_very_long_shared_kernel_keeps_numpys_kernel(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The Toeplitz matrix grows as the square of the kernel: none past 64 taps."""
    import vmapx._numpy.contractions as contractions

    def refuse(*args: object) -> None:
        raise AssertionError("the blocked GEMM ran for a 300-tap kernel")

    monkeypatch.setattr(contractions, "_blocked_toeplitz", refuse)
    rng = np.random.default_rng(3)
    x, k = rng.standard_normal((64, 400)), rng.standard_normal(300)
    got = vmapx.vmap(np.convolve, in_axes=(0, None))(x, k)
    want = np.stack([np.convolve(r, k) for r in x])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * np.abs(want).max())


@pytest.mark.parametrize("in_axes", [(0, None), (None, 0), (0, 0)])
def test_convolve_of_object_arrays_is_the_loops(in_axes: tuple) -> None:
    """Python numbers in object arrays: NumPy's kernel row by row (it raised before)."""
    x = np.arange(12.0).reshape(3, 4).astype(object)
    k = np.array([1.0, 2.5], dtype=object)
    args = [x if ax == 0 else x[0] for ax in in_axes[:1]] + [
        np.stack([k] * 3) if in_axes[1] == 0 else k
    ]
    got = vmapx.vmap(np.convolve, in_axes=in_axes)(*args)
    want = loop_reference(np.convolve, args, in_axes)
    assert got.dtype == want.dtype == object
    np.testing.assert_array_equal(got, want)


def test_convolve_with_a_long_shared_kernel_and_an_inf_is_the_loops() -> None:
    rng = np.random.default_rng(2)
    x, k = rng.standard_normal((80, 300)), rng.standard_normal(20)
    x[3, 7] = np.inf
    with np.errstate(invalid="ignore"):
        got = vmapx.vmap(np.convolve, in_axes=(0, None))(x, k)
        np.testing.assert_array_equal(got, np.stack([np.convolve(r, k) for r in x]))


@pytest.mark.parametrize("func", [np.convolve, np.correlate], ids=lambda f: f.__name__)
def test_convolve_zero_batch(func: Callable) -> None:
    rng = np.random.default_rng(0)
    for in_axes in [(0, None), (None, 0), (0, 0)]:
        args = _args(rng, [(5,), (3,)], "float64", in_axes, 2)
        check_zero_batch(lambda a, v: func(a, v, "same"), args, in_axes)


def test_convolve_mode_spellings() -> None:
    rng = np.random.default_rng(0)
    args = _args(rng, [(5,), (3,)], "float64", (0, None), 3)
    for mode in (0, 1, 2):
        check_vmap(lambda a, v, mode=mode: np.convolve(a, v, mode), args, in_axes=(0, None))


@pytest.mark.parametrize(
    "mode", [pytest.param("f", marks=requires_numpy2("inexact mode names refused")), "x"]
)
def test_convolve_bad_modes(mode: str) -> None:
    args = _args(np.random.default_rng(0), [(5,), (3,)], "float64", (0, None), 3)
    with pytest.raises(ValueError, match="mode"):
        vmapx.vmap(lambda a, v: np.convolve(a, v, mode), in_axes=(0, None))(*args)


@numpy1_only("inexact mode names deprecated")
def test_convolve_inexact_mode_names_warn_like_numpy() -> None:
    args = _args(np.random.default_rng(0), [(5,), (3,)], "float64", (0, None), 3)
    with pytest.warns(DeprecationWarning, match="inexact matches"):
        got = vmapx.vmap(lambda a, v: np.convolve(a, v, "f"), in_axes=(0, None))(*args)
    np.testing.assert_allclose(got, [np.convolve(a, args[1]) for a in args[0]], rtol=1e-12)


@pytest.mark.parametrize(
    ("func", "shapes", "message"),
    [
        pytest.param(
            np.convolve, [(0,), (3,)], "a cannot be empty", marks=requires_numpy2("check order")
        ),
        pytest.param(
            np.convolve, [(0,), (3,)], "v cannot be empty", marks=numpy1_only("check order")
        ),
        (np.correlate, [(3,), (0,)], "second array argument cannot be empty"),
        (np.convolve, [(2, 3), (3,)], "too deep"),
        (np.correlate, [(), (3,)], "too small depth"),
    ],
)
def test_convolve_errors_are_numpys(func: Callable, shapes: list, message: str) -> None:
    args = [np.ones((3, *s)) for s in shapes]
    with pytest.raises(ValueError, match=message):
        func(*(a[0] for a in args))
    with pytest.raises(ValueError, match=message):
        vmapx.vmap(func)(*args)


# -- einsum and tensordot, generated ------------------------------------------------------------


@st.composite
def einsum_case(draw: Any) -> tuple:
    """`(spec, shapes)`: an einsum call over 1-3 operands with shared labels, optional
    ellipsis (broadcast dims) and an explicit or implicit output."""
    labels = draw(st.lists(st.sampled_from("ijkAB"), min_size=1, max_size=4, unique=True))
    sizes = {c: draw(st.integers(1, 3)) for c in labels}
    n_ops = draw(st.integers(1, 3))
    ell = draw(st.integers(0, 2)) if draw(st.booleans()) else None
    ell_shape = tuple(draw(st.integers(1, 2)) for _ in range(ell or 0))
    subs, shapes = [], []
    for _ in range(n_ops):
        sub = draw(st.lists(st.sampled_from(labels), min_size=0, max_size=3))
        shape = tuple(sizes[c] for c in sub)
        if ell is not None and draw(st.booleans()):
            k = draw(st.integers(0, len(ell_shape)))
            sub, shape = ["...", *sub], (*ell_shape[len(ell_shape) - k :], *shape)
        subs.append("".join(sub))
        shapes.append(shape)
    spec = ",".join(subs)
    if draw(st.booleans()):
        used = sorted(set("".join(subs).replace(".", "")))
        out = draw(st.permutations(used))[: draw(st.integers(0, len(used)))]
        if any("..." in s for s in subs):
            out = ["...", *out] if draw(st.booleans()) else out
        spec += "->" + "".join(out)
    return spec, shapes


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(einsum_case(), st.data())
def test_einsum_generated(case: tuple, data: Any) -> None:
    spec, shapes = case
    try:
        np.einsum(spec, *(np.ones(s) for s in shapes))
    except ValueError:
        return  # not a valid call for NumPy either (e.g. ellipsis dims summed away)
    in_axes = tuple(data.draw(st.sampled_from([0, None])) for _ in shapes)
    if all(ax is None for ax in in_axes):
        in_axes = (0, *in_axes[1:])
    optimize = data.draw(st.sampled_from([False, True, "greedy"]))
    args = _args(np.random.default_rng(1), shapes, "float64", in_axes, 3)
    check_vmap(lambda *ops: np.einsum(spec, *ops, optimize=optimize), args, in_axes=in_axes)


@st.composite
def tensordot_case(draw: Any) -> tuple:
    a_shape = tuple(draw(st.lists(st.integers(1, 3), max_size=3)))
    k = draw(st.integers(0, len(a_shape)))
    a_axes = draw(st.permutations(range(len(a_shape))))[:k]
    b_free = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    b_shape = list(b_free)
    b_axes = []
    for ax in a_axes:  # each contracted axis of a lands somewhere in b
        pos = draw(st.integers(0, len(b_shape)))
        b_shape.insert(pos, a_shape[ax])
        b_axes = [p + (p >= pos) for p in b_axes] + [pos]
    negative = draw(st.booleans())
    if negative:
        a_axes = [ax - len(a_shape) for ax in a_axes]
    return a_shape, tuple(b_shape), (list(a_axes), b_axes)


@settings(max_examples=100, deadline=None)
@given(tensordot_case(), st.sampled_from([(0, 0), (0, None), (None, 0)]))
def test_tensordot_generated(case: tuple, in_axes: tuple) -> None:
    a_shape, b_shape, axes = case
    args = _args(np.random.default_rng(2), [a_shape, b_shape], "float64", in_axes, 3)
    check_vmap(lambda a, b: np.tensordot(a, b, axes), args, in_axes=in_axes)


def test_tensordot_int_axes_and_dot_nd() -> None:
    for axes in (0, 1, 2):
        shapes = [(2, 3, 4), (*(2, 3, 4)[3 - axes :], 2)]
        _check_all(lambda a, b, axes=axes: np.tensordot(a, b, axes), shapes, "float64")
    _check_all(np.dot, [(2, 3, 4), (5, 4, 2)], "complex128")


@requires_numpy2("arrays of more than 32 dimensions")
def test_einsum_with_all_labels_taken_loops_with_a_warning() -> None:
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    x = np.ones((3,) + (1,) * 52)
    spec = letters + "->" + letters[:2]
    with pytest.warns(vmapx.PerformanceWarning, match="52 subscript labels"):
        got = vmapx.vmap(lambda x: np.einsum(spec, x))(x)
    assert got.shape == (3, 1, 1)


# -- errors and keywords --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("func", "shapes"),
    [
        (np.dot, [(3, 4), (3,)]),
        (np.inner, [(3, 4), (3,)]),
        (np.tensordot, [(3, 4), (4, 3)]),
        (lambda a, b: np.einsum("ij,j", a, b), [(3, 4), (3,)]),
        (np.matmul, [(3, 4), (3,)]),
    ],
)
def test_shape_mismatch_raises_like_numpy(func: Callable, shapes: list) -> None:
    args = [np.ones(s) for s in shapes]
    with pytest.raises(ValueError) as expected:
        func(*args)
    with pytest.raises(ValueError) as got:
        vmapx.vmap(func, in_axes=(0, None))(args[0][None], args[1])
    if func in (np.dot, np.inner, np.tensordot):
        assert str(got.value) == str(expected.value)


def test_out_argument_and_einsum_dtype() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.random((3, 2, 4)), rng.random((4, 5))

    def f(a: Any, b: Any) -> Any:
        out = np.zeros_like(a, shape=(2, 5))
        np.dot(a, b, out=out)
        return out, np.einsum("ij,jk->ik", a, b, dtype=np.complex128)

    check_vmap(f, [a, b], in_axes=(0, None), rtol=1e-6)


def test_dot_of_unbatched_matrix_and_batched_vector_is_one_product() -> None:
    """The MLP layer: `W @ x` for a batch of x equals `X @ W.T` exactly."""
    rng = np.random.default_rng(0)
    w, x = rng.random((64, 32)), rng.random((100, 32))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = vmapx.vmap(lambda w, x: w @ x, in_axes=(None, 0))(w, x)
    np.testing.assert_array_equal(got, x @ w.T)


# -- derivatives ----------------------------------------------------------------------------


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(einsum_case())
def test_einsum_derivatives_generated(case: tuple) -> None:
    """Diagonals, broadcast axes, labels summed away in one operand, implicit outputs."""
    spec, shapes = case
    try:
        np.einsum(spec, *(np.ones(s) for s in shapes))
    except ValueError:
        return
    rng = np.random.default_rng(4)
    args = [rng.standard_normal(s) for s in shapes]
    vmapx.check_grads(lambda *ops: np.einsum(spec, *ops), args, order=2)


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("func", [np.convolve, np.correlate], ids=lambda f: f.__name__)
@pytest.mark.parametrize("lengths", [(6, 3), (3, 6), (4, 4), (1, 3)], ids=str)
def test_convolve_derivatives_complex(func: Callable, lengths: tuple, mode: str) -> None:
    rng = np.random.default_rng(5)
    a, v = (rng.standard_normal(n) + 1j * rng.standard_normal(n) for n in lengths)
    vmapx.check_grads(lambda a, v: func(a, v, mode), (a, v), order=2)


@pytest.mark.parametrize(
    ("func", "shapes"),
    [
        (np.vdot, [(2, 3), (6,)]),
        (np.kron, [(2, 3), (3,)]),
        (np.outer, [(2, 2), (3,)]),
        (lambda a, b: np.tensordot(a, b, ([1, 0], [0, 2])), [(3, 2), (2, 4, 3)]),
        (np.inner, [(2, 3), (4, 3)]),
    ],
)
def test_complex_contraction_derivatives(func: Callable, shapes: list) -> None:
    rng = np.random.default_rng(6)
    args = [_example(rng, s, "complex128") for s in shapes]
    vmapx.check_grads(func, args, order=2)
