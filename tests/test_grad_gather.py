"""Derivatives of gathers, scatters and sorts beyond the op-table rows: repeated indices,
index modes, repeated values, ties, large partitions, and `vmap(grad(...))` with
indices and masks that differ between examples."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import vmapx
from harness import assert_same
from np_compat import requires_numpy2

RNG = np.random.default_rng(7)


def _copy_then(func: Callable) -> Callable:
    def f(x: Any, *rest: Any) -> Any:
        x = x.copy()
        func(x, *rest)
        return x

    return f


def _vmap_grad_matches_loop(f: Callable, args: list, argnums: tuple) -> None:
    """`vmap(grad(sum f))` over every argument equals a loop of `grad`."""
    g = vmapx.grad(lambda *a: np.sum(f(*a) ** 2), argnums=argnums)
    got = vmapx.vmap(g)(*args)
    loop = [g(*example) for example in zip(*args, strict=True)]
    want = tuple(np.stack([r[k] for r in loop]) for k in range(len(argnums)))
    assert_same(got, want, rtol=1e-9, atol=1e-12)


# -- gathers --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "f",
    [
        lambda x: np.take(x, [1, 1, -11, 3]),
        lambda x: np.take(x, [[0, 2], [2, 2]], axis=1),
        lambda x: np.take(x, [-5, 9, 1], axis=1, mode="clip"),
        lambda x: np.take(x, [-5, 9, 1, 5], axis=0, mode="wrap"),
        lambda x: np.take_along_axis(x, np.array([[0, 0, 3], [1, 1, 1], [-1, 2, 2]]), 1),
        lambda x: np.take_along_axis(x, np.array([4, 4, 0]), None),
        lambda x: np.bincount([0, 3, 3, 1], x[0], minlength=5),
    ],
    ids=["take.repeat", "take.axis", "take.clip", "take.wrap", "along.repeat", "along.none",
         "bincount"],
)  # fmt: skip
def test_gathers_with_repeated_indices(f: Callable) -> None:
    vmapx.check_grads(f, [RNG.normal(size=(3, 4))], order=2)


def test_take_with_float_and_boolean_indices() -> None:
    # `np.take` casts a float scalar (1.7 -> 1), a float list and booleans (True -> 1)
    def f(x: Any, b: Any) -> Any:
        return (np.take(x, b) ** 2 + 3 * np.take(x, b > 1) + np.take(x, [1.7, 0.2, 2.5]) ** 3
                + np.take(x, [True, False, True]))  # fmt: skip

    x = RNG.normal(size=(4, 3))
    b = np.array([-1.5, 0.2, 1.7, 2.99])
    vmapx.check_grads(lambda x: f(x, b[2]), [x[0]], order=2)
    _vmap_grad_matches_loop(f, [x, b], (0,))
    jac = vmapx.vmap(vmapx.jacfwd(f))(x, b)
    assert_same(jac, np.stack([vmapx.jacrev(f)(*e) for e in zip(x, b, strict=True)]))

    def g(x: Any, b: Any) -> Any:  # `np.put` casts them alike
        y = x * 1.0
        np.put(y, np.stack([b > 0, b < 1]), x[::-1][:2] ** 2)
        np.put(y, 1.7, y[0] * 3)
        return y

    vmapx.check_grads(lambda x: g(x, b[2]), [x[0]], order=2)
    _vmap_grad_matches_loop(g, [x, b], (0,))


def test_take_vjp_adds_repeats() -> None:
    x = np.arange(5.0)
    g = vmapx.grad(lambda x: np.sum(np.take(x, [1, 1, 4, -1, 7], mode="wrap")))(x)
    np.testing.assert_array_equal(g, [0, 2, 1, 0, 2])


def test_vmap_grad_gathers_with_batched_indices() -> None:
    x = RNG.normal(size=(3, 4, 5))
    idx = RNG.integers(-5, 5, size=(3, 4, 2))
    _vmap_grad_matches_loop(lambda x, i: np.take_along_axis(x, i, axis=1), [x, idx], (0,))
    _vmap_grad_matches_loop(lambda x, i: np.take(x, i, axis=-1, mode="clip"), [x, idx], (0,))
    w = RNG.normal(size=(3, 6))
    bins = RNG.integers(0, 4, size=(3, 6))
    bins[:, 0] = 3  # the same length for every example
    _vmap_grad_matches_loop(lambda b, w: np.bincount(b, w), [bins, w], (1,))


def test_take_with_indices_of_an_outer_vmap() -> None:
    x = RNG.normal(size=6)
    idx = RNG.integers(0, 6, size=(4, 3))
    g = vmapx.grad(lambda x, i: np.sum(np.take(x, i) ** 2))
    got = vmapx.vmap(g, in_axes=(None, 0))(x, idx)
    want = np.stack([g(x, i) for i in idx])
    assert_same(got, want)


# -- where-like: choose, select ------------------------------------------------------


def test_choose_with_broadcast_choices() -> None:
    a = np.array([[0, 2, 1], [2, 2, 0]])
    vmapx.check_grads(lambda c: np.choose(a, c), [RNG.normal(size=(3, 3))])
    vmapx.check_grads(lambda c: np.choose(a, c), [RNG.normal(size=(3, 2, 1))])
    vmapx.check_grads(lambda c0, c1: np.choose(a % 2, [c0, c1]), [RNG.normal(size=3)] * 2)


def test_select_first_condition_wins() -> None:
    x = np.array([-2.0, -0.2, 0.3, 2.0])
    f = lambda x, d: np.select([x > 0, x > -1], [3 * x, x**2], default=d)  # noqa: E731
    gx, gd = vmapx.grad(lambda x, d: np.sum(f(x, d)), argnums=(0, 1))(x, 5.0)
    np.testing.assert_allclose(gx, [0, -0.4, 3, 3])
    assert gd == 1.0
    vmapx.check_grads(f, [x, np.float64(5.0)])


def test_vmap_grad_where_like_with_batched_picks() -> None:
    a = RNG.integers(0, 3, size=(4, 5))
    c = RNG.normal(size=(4, 3, 5))
    _vmap_grad_matches_loop(lambda a, c: np.choose(a, c), [a, c], (1,))
    x = RNG.normal(size=(4, 5))
    _vmap_grad_matches_loop(
        lambda x: np.select([x > 0.5, x < -0.5], [x, np.sin(x)], x**3), [x], (0,)
    )


# -- compress, extract --------------------------------------------------------------


def test_compress_and_extract() -> None:
    x = RNG.normal(size=(3, 4))
    mask = np.array([[1, 0, 2, 0], [0, 0, 1, 1], [1, 1, 0, 0]])
    vmapx.check_grads(lambda x: np.extract(mask, x), [x])
    vmapx.check_grads(lambda x: np.compress([False, True, True], x, axis=0), [x])
    xs = RNG.normal(size=(2, 3, 4))
    _vmap_grad_matches_loop(lambda x: np.extract(mask, x) * np.compress([1, 0, 1], x)[0], [xs],
                            (0,))  # fmt: skip


# -- writers -------------------------------------------------------------------------


def test_put_last_write_wins() -> None:
    x, v = np.zeros(5), np.array([1.0, 2.0, 3.0, 4.0])
    f = _copy_then(lambda x, v: np.put(x, [1, 3, 1, -2], v))
    gx, gv = vmapx.grad(lambda x, v: np.sum(f(x, v) * np.arange(1.0, 6.0)), argnums=(0, 1))(x, v)
    np.testing.assert_array_equal(gx, [1, 0, 3, 0, 5])
    np.testing.assert_array_equal(gv, [0, 0, 2, 4])


@pytest.mark.parametrize(
    "f, shapes",
    [
        (lambda x, v: np.put(x, [0, 4, 4, 2, 5, 1, 0], v), ((6,), (3,))),  # v repeated
        (lambda x, v: np.put(x, [0, 2], v), ((2, 3), (5,))),  # v longer than the indices
        (lambda x, v: np.put(x, [[9, -9]], v, mode="wrap"), ((2, 2), (2, 1))),
        (lambda x, v: np.put_along_axis(x, np.array([[0, 0], [2, 0]]), v, 1), ((2, 3), (2, 2))),
        (lambda x, v: np.put_along_axis(x, np.array([[1], [1]]), v, 1), ((2, 3), (1,))),
        (lambda x, v: np.place(x, [1, 0, 1, 1, 1], v), ((5,), (2,))),
        (lambda x, v: np.place(x, [[1, 0], [1, 1]], v), ((2, 2), (7,))),
        (lambda x, v: np.putmask(x, [1, 0, 1, 1, 1], v), ((5,), (2,))),
        (lambda x, v: np.putmask(x, [[1, 0], [0, 1]], v), ((2, 2), (7,))),
    ],
    ids=["put.repeat_values", "put.long_values", "put.wrap", "along.repeat", "along.broadcast",
         "place.repeat_values", "place.long_values", "putmask.repeat", "putmask.long"],
)  # fmt: skip
def test_writers(f: Callable, shapes: tuple) -> None:
    vmapx.check_grads(_copy_then(f), [RNG.normal(size=s) for s in shapes])


def test_write_of_a_constant_into_a_traced_target() -> None:
    """The JVP writes zeros where constant values were written (also given by keyword)."""
    f = _copy_then(lambda x: np.put(x, [0, 1], v=[5.0, 6.0]))
    _, t = vmapx.jvp(f, (np.ones(3),), (np.ones(3),))
    np.testing.assert_array_equal(t, [0, 0, 1])
    f = _copy_then(lambda x: np.putmask(x, x > 0, values=[5.0]))
    _, t = vmapx.jvp(f, (np.array([1.0, -1.0]),), (np.ones(2),))
    np.testing.assert_array_equal(t, [0, 1])


def test_vmap_grad_writers_with_batched_indices() -> None:
    x, v = RNG.normal(size=(4, 6)), RNG.normal(size=(4, 3))
    idx = RNG.integers(-6, 6, size=(4, 3))
    mask = RNG.random((4, 6)) < 0.5
    _vmap_grad_matches_loop(_copy_then(np.put), [x, idx, v], (0, 2))
    _vmap_grad_matches_loop(_copy_then(np.place), [x, mask, v], (0, 2))
    _vmap_grad_matches_loop(_copy_then(np.putmask), [x, mask, v], (0, 2))
    along = RNG.integers(0, 6, size=(4, 3))
    f = _copy_then(lambda x, i, v: np.put_along_axis(x, i, v, 0))
    _vmap_grad_matches_loop(f, [x, along, v], (0, 2))


# -- sorts ---------------------------------------------------------------------------


def test_sort_ties_follow_the_stable_order() -> None:
    x = np.array([2.0, 1.0, 2.0, 1.0])
    g = vmapx.grad(lambda x: np.sort(x) @ np.arange(4.0))(x)
    np.testing.assert_array_equal(g, [2, 0, 3, 1])
    _, t = vmapx.jvp(np.sort, (x,), (np.arange(4.0),))
    np.testing.assert_array_equal(t, [1, 3, 0, 2])
    _, t = vmapx.jvp(np.sort, (np.array([3.0, np.nan, -1.0]),), (np.arange(3.0),))
    np.testing.assert_array_equal(t, [2, 0, 1])  # NaN sorts last, its tangent with it


@pytest.mark.parametrize(
    "f, x",
    [
        (lambda x: np.sort(x, axis=0), RNG.normal(size=(4, 3))),
        (lambda x: np.sort(x, axis=None), RNG.normal(size=(3, 3))),
        (np.sort, RNG.normal(size=5) + 1j * RNG.normal(size=5)),
        (lambda x: np.partition(x, [1, 3], axis=0), RNG.normal(size=(6, 2))),
        (lambda x: np.partition(x, 2, axis=None), RNG.normal(size=(3, 3))),
    ],
    ids=["sort.axis0", "sort.none", "sort.complex", "partition.kths",
         "partition.none"],
)  # fmt: skip
def test_sorts(f: Callable, x: np.ndarray) -> None:
    vmapx.check_grads(f, [x])


def test_partition_follows_numpy_arrangement() -> None:
    """NumPy's vectorized partition of a long array arranges elements unlike
    `argpartition`: the derivative follows the arrangement `np.partition` returns."""
    x = RNG.normal(size=1000)
    ans, t = vmapx.jvp(lambda x: np.partition(x, 500), (x,), (x * 3,))
    np.testing.assert_array_equal(ans, np.partition(x, 500))
    np.testing.assert_allclose(t, ans * 3)
    g = vmapx.grad(lambda x: np.partition(x, 500) @ np.arange(1000.0))(x)
    np.testing.assert_array_equal(ans[g.astype(int)], x)  # each element's derivative


def test_vmap_grad_sorts() -> None:
    x = RNG.integers(-2, 3, size=(4, 3, 5)).astype(float)  # ties
    _vmap_grad_matches_loop(lambda x: np.sort(x, axis=1) * np.arange(5.0), [x], (0,))
    _vmap_grad_matches_loop(lambda x: np.partition(x, 1, axis=0) * np.arange(5.0), [x], (0,))
    _vmap_grad_matches_loop(lambda x: np.median(x, axis=-1), [RNG.normal(size=(4, 3, 5))], (0,))


# -- trim_zeros ----------------------------------------------------------------------


@requires_numpy2("trim_zeros of n-d arrays")
def test_trim_zeros() -> None:
    x = np.array([[0.0, 0.0, 0.0, 0.0], [0.0, 1.5, 0.0, -2.0], [0.0, 0.5, 0.0, 0.0]])
    keep = x != 0  # zeros that stay zeros when the differences move `x`
    for trim in ("fb", "f", "b"):
        vmapx.check_grads(lambda x, trim=trim: np.trim_zeros(x * keep, trim), [x])
        vmapx.check_grads(lambda x, trim=trim: np.trim_zeros(x * keep, trim, axis=1), [x])
    g = vmapx.grad(lambda x: np.sum(np.trim_zeros(x, "f") ** 2))(x[1])
    np.testing.assert_array_equal(g, [0, 3, 0, -4])
    g = vmapx.grad(lambda x: np.sum(np.trim_zeros(x)))(np.zeros(3))  # all zeros: empty
    np.testing.assert_array_equal(g, np.zeros(3))


# -- users of the sort and gather rules: quantiles and interp ------------------------

_METHODS = (
    "inverted_cdf", "averaged_inverted_cdf", "closest_observation", "interpolated_inverted_cdf",
    "hazen", "weibull", "linear", "median_unbiased", "normal_unbiased", "lower", "higher",
    "midpoint",
)  # fmt: skip


@pytest.mark.parametrize("method", _METHODS)
def test_quantiles_off_ties(method: str) -> None:
    """Tie-free data and q away from the kinks (the op-table rows have ties)."""
    rng = np.random.default_rng(1)
    x, q = rng.normal(size=(3, 7)), np.array([0.13, 0.47, 0.77])
    vmapx.check_grads(lambda x, q: np.quantile(x, q, method=method), [x, q])
    x[0, 2] = np.nan
    vmapx.check_grads(lambda x, q: np.nanquantile(x, q, axis=-1, method=method), [x, q])


def test_median_and_interp_off_kinks() -> None:
    rng = np.random.default_rng(2)
    x = rng.normal(size=(3, 7))
    vmapx.check_grads(lambda x: np.median(x, axis=-1), [x])
    vmapx.check_grads(lambda x: np.median(x, keepdims=True), [x])
    xp, fp = np.sort(rng.uniform(-2, 2, 6)), rng.normal(size=6)
    xi = rng.uniform(-2.5, 2.5, (3, 4))
    vmapx.check_grads(np.interp, [xi, xp, fp])
    vmapx.check_grads(lambda x, xp, fp: np.interp(x, xp, fp, left=-1.0, right=2.0), [xi, xp, fp])
    vmapx.check_grads(lambda x, xp, fp: np.interp(x, xp, fp, period=5.0), [xi, xp, fp])
    xps = np.sort(rng.uniform(-2, 2, (4, 6)), axis=1)
    args = [rng.uniform(-2.5, 2.5, (4, 3, 4)), xps, rng.normal(size=(4, 6))]
    _vmap_grad_matches_loop(np.interp, args, (0, 1, 2))
