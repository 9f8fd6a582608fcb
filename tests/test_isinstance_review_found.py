"""Defects found reviewing `Tracer.__class__` (a traced value posing as the loop's type).

Each test compares vmapx against the per-example loop (or plain NumPy, or finite
differences) and fails because of the defect named in its docstring.
"""

from __future__ import annotations

import collections.abc
import pickle

import numpy as np
import pytest

import vmapx
from harness import assert_same, check_vmap, type_answers
from vmapx.control_flow import fori_loop, while_loop

X = np.random.default_rng(0).random((3, 4))


def _draws_as_the_loop(f):
    """`vmap(f, randomness="different")` over three examples equals the loop, which draws
    from one generator in turn."""
    M = np.arange(3.0)
    rng = np.random.default_rng(0)
    ref = np.stack([f(m, rng) for m in M])
    got = vmapx.vmap(f, in_axes=(0, None), randomness="different")(M, np.random.default_rng(0))
    assert_same(got, ref)


def test_posed_float_lacks_float_methods():
    """A traced number says `isinstance(s, float)` (it poses as np.float64) but has none of
    float's own methods (`is_integer`, `as_integer_ratio`, `hex`): code that normalises
    an integral float (`if isinstance(n, float) and n.is_integer(): n = int(n)`) now
    raises AttributeError (no loop fallback); HEAD~1 took the other branch and matched
    the loop."""

    def f(x):
        n = np.round(x.sum() * 0 + 3.0)
        if isinstance(n, float) and n.is_integer():
            n = int(n)
        return x * n

    check_vmap(f, (X,))


def test_partitioned_while_loop_carry_loses_scalar_type():
    """`while_loop` with a batched predicate (partitioned): a NumPy-scalar carry is a
    0-d array (isinstance says ndarray) from the second iteration on, and a Python int
    carry comes out as an ndarray; the loop's carry stays np.float64 / int. (The same
    for `fori_loop` with batched bounds, which is a `while_loop`.)"""

    def f(x):
        def body(c):
            k, v = c
            return k + 1, v * (2.0 if isinstance(v, float) else 3.0)

        k, v = while_loop(lambda c: c[1] < 3, body, (0, x[0]))
        return v * (2.0 if isinstance(k, int) else 5.0)

    check_vmap(f, (X,))


def test_fori_loop_batched_bounds_body_sees_array():
    """`fori_loop` with per-example bounds: the body's loop value, an np.float64 in the
    loop, poses as an ndarray after the first step (same root cause as the partitioned
    `while_loop`)."""

    def f(x):
        n = (x[0] * 5).astype(int)
        return fori_loop(0, n, lambda i, v: v * (2.0 if isinstance(v, float) else 3.0), x[1])

    check_vmap(f, (X,))


@pytest.mark.parametrize(
    "transform",
    [
        pytest.param(
            lambda x: vmapx.value_and_grad(lambda t: np.sum(t**3))(x)[0], id="value_and_grad"
        ),
        pytest.param(lambda x: vmapx.jvp(lambda a: a[0] * a[1], (x,), (np.ones(4),))[0], id="jvp"),
        pytest.param(lambda x: vmapx.vjp(lambda a: a[0] * a[1], x)[0], id="vjp"),
        pytest.param(
            lambda x: vmapx.grad(lambda t: (np.sum(t * t), t.sum()), has_aux=True)(x)[1],
            id="grad_aux",
        ),
        pytest.param(
            lambda x: vmapx.checkpoint(lambda a: a.sum())(x),
            id="checkpoint",
            marks=pytest.mark.xfail(strict=True, reason="checkpoint's batched result is unmarked"),
        ),
    ],
)
def test_inner_autodiff_primal_output_loses_scalar_mark(transform):
    """Under vmap, the primal output of an inner AD transform (value_and_grad's value,
    jvp/vjp's output, has_aux's aux, checkpoint's output) is an np.float64 in the loop
    but poses as an ndarray: `_autodiff.strip` returns the ADTracer's primal without its
    NumPy-scalar mark."""
    check_vmap(lambda x: type_answers(transform(x)), (X,))


@pytest.mark.parametrize(
    "transform",
    [
        pytest.param(lambda x: vmapx.grad(lambda t: t * t)(x[0]), id="grad"),
        pytest.param(lambda x: vmapx.value_and_grad(lambda t: t**3)(x[0])[1], id="value_and_grad"),
        pytest.param(lambda x: vmapx.vjp(lambda a: a * a, x[0])[1](1.0)[0], id="vjp"),
    ],
)
def test_grad_wrt_numpy_scalar_poses_as_scalar(transform):
    """`grad` with respect to an np.float64 argument returns a 0-d ndarray in the loop
    (`_diff_leaves` turns the float into an array), but under vmap the traced
    np.float64 is kept as it is, so the gradient poses as np.float64."""
    check_vmap(lambda x: type_answers(transform(x)), (X,))


def test_random_integers_draw_poses_as_ndarray():
    """`rng.integers(n)` under randomness="different" gives an np.int64 per example in
    the loop, but the traced draw is unmarked and poses as an ndarray (so
    `isinstance(k, (int, np.integer))` / `numbers.Integral` checks go the other way)."""

    def f(m, rng):
        return type_answers(rng.integers(5)) + 0 * m

    _draws_as_the_loop(f)


def test_random_choice_of_int_poses_as_numpy_int():
    """`rng.choice(3)` gives a Python int per example in the loop; under vmap the draw
    poses as np.int64."""

    def f(m, rng):
        return type_answers(rng.choice(3)) + 0 * m

    _draws_as_the_loop(f)


@pytest.mark.parametrize(
    "op",
    [
        pytest.param(lambda r: round(r, 2), id="round"),
        pytest.param(lambda r: r.conjugate(), id="conjugate"),
        pytest.param(lambda r: divmod(r, 0.3)[0], id="divmod"),
    ],
)
def test_python_float_draw_becomes_numpy_scalar(op):
    """A Python float drawn per example (`rng.random()`) stays a Python float through
    `round(r, 2)`, `r.conjugate()`, `divmod(r, y)` in the loop; under vmap the result
    poses as np.float64 (the weak Python-number mark is not kept)."""

    def f(m, rng):
        v = op(rng.random())
        return np.array([isinstance(v, np.floating), isinstance(v, np.generic)], float) + 0 * m

    _draws_as_the_loop(f)


@pytest.mark.parametrize(
    "fn",
    [
        pytest.param(lambda x: np.isclose(x[0], x[1]), id="isclose_scalars"),
        pytest.param(
            lambda x: np.real_if_close(x[0]),
            id="real_if_close_scalar",
            marks=pytest.mark.xfail(
                strict=True, reason="its passthrough result takes np.real's mark"
            ),
        ),
        pytest.param(lambda x: np.kron(x[0], x[1]), id="kron_scalars"),
        pytest.param(lambda x: x[0].view(np.int64), id="scalar_view"),
        pytest.param(lambda x: np.choose(0, [x[0], x[1]]), id="choose_scalars"),
        pytest.param(lambda x: np.emath.sqrt(x[0]), id="emath_sqrt_scalar"),
    ],
)
def test_numpy_function_result_type_differs_under_vmap(fn):
    """NumPy functions whose result for NumPy-scalar operands is a NumPy scalar (or a
    0-d array) pose as the other one under vmap: np.isclose(s, t) is np.bool_ in the
    loop (vmap: ndarray), np.real_if_close(s) a 0-d array (vmap: np.float64),
    np.kron/np.choose/np.emath.sqrt of scalars and `s.view(dtype)` NumPy scalars (vmap:
    ndarray). The scalar marks (`vmapx._scalars`) do not follow NumPy for these."""
    check_vmap(lambda x: type_answers(fn(x)), (X,))


def test_einsum_optimize_result_poses_as_scalar():
    """np.einsum(..., optimize=True) with a 0-d result returns a 0-d ndarray in NumPy;
    `np.einsum` is in `_scalars.SCALAR_FUNCTIONS` unconditionally, so the traced result
    poses as np.float64 under vmap, and under jit too, although the recorded value
    (`RecordTracer.value`) is the 0-d ndarray (the mark wins in `posed_class`)."""

    def f(x):
        r = np.einsum("i,i->", x, x, optimize=True)
        return r * (2.0 if isinstance(r, np.ndarray) else 3.0)

    expected = f(X[0])
    np.testing.assert_allclose(vmapx.jit(f)(X[0]), expected)
    check_vmap(f, (X,))


@pytest.mark.parametrize(
    "fn",
    [
        pytest.param(lambda x: np.cov(x), id="cov"),
        pytest.param(
            lambda x: np.piecewise(x[0], [x[0] > 0.5], [lambda v: v * 2, lambda v: v * 3]),
            id="piecewise",
        ),
        pytest.param(lambda x: np.apply_along_axis(np.sum, 0, x), id="apply_along_axis"),
    ],
)
@pytest.mark.xfail(strict=True, reason="these functions' primals under grad are NumPy scalars")
def test_grad_primal_poses_as_scalar_where_numpy_gives_0d_array(fn):
    """Under grad, np.cov of a 1-d array, np.piecewise of a scalar and
    np.apply_along_axis to a 0-d result give an np.float64 primal marked as a scalar,
    where NumPy gives a 0-d ndarray: `isinstance(c, np.ndarray)` in the function
    differs, and the gradient is silently wrong."""

    def f(x):
        c = fn(x)
        return c * (2.0 if isinstance(c, np.ndarray) else 3.0)

    x = np.array([0.3, 0.7, 1.1, 0.2])
    eps = 1e-6
    fd = np.array([(f(x + eps * e) - f(x - eps * e)) / (2 * eps) for e in np.eye(4)])
    np.testing.assert_allclose(vmapx.grad(f)(x), fd, rtol=1e-5, atol=1e-7)


@pytest.mark.xfail(strict=True, reason="ABCs test type(s), whose class defines __len__/__iter__")
def test_scalar_tracer_is_a_sized_iterable():
    """A traced NumPy scalar poses as np.float64 for `isinstance(s, float)`, but
    `isinstance(s, collections.abc.Iterable)` / `Sized` and `hasattr(s, "__len__")` are
    True (ABCMeta also tests `type(s)`, the tracer class, which defines `__iter__` and
    `__len__`); for the loop's np.float64 they are False, so "is it a sequence?" checks
    take the sequence branch."""

    def f(x):
        s = x.sum()
        seq = isinstance(s, collections.abc.Iterable) or isinstance(s, collections.abc.Sized)
        return s * (2.0 if seq or hasattr(s, "__len__") else 3.0)

    check_vmap(f, (X,))


def test_pickle_of_traced_value():
    """`pickle.dumps` of a traced value raises PicklingError ("args[0] from __newobj__
    args has the wrong class": the reduce gives the tracer class, `__class__` says
    ndarray) where the loop pickles the example's array; it neither works nor runs
    the loop (HEAD~1 failed too, with TraceMixError). Now: the loop, with its warning."""
    with pytest.warns(vmapx.PerformanceWarning, match="pickled"):
        check_vmap(lambda x: pickle.loads(pickle.dumps(x)) * 2, (X,))
