"""Temporary elision: operators on batched temporaries compute into their memory."""

from __future__ import annotations

import numpy as np
import pytest

import vmapx
from harness import check_vmap, peak_bytes
from vmapx import _elision, vmap

RNG = np.random.default_rng(3)

pytestmark = pytest.mark.skipif(
    not _elision.enabled(), reason="temporary elision is off on this Python/NumPy"
)


def _peak(f, *args):
    return peak_bytes(lambda: f(*args))


@pytest.fixture
def no_elision():
    vmapx.config.elide = False
    yield
    vmapx.config.elide = True


EXPRESSIONS = {
    "scalar right": lambda x, y: (x * 3.0) ** 2 - 1,
    "scalar left": lambda x, y: 2.0 / (x + 1.5) - 1.0,
    "batched other": lambda x, y: (x - y) * (x + y),
    "reflected": lambda x, y: 1.0 - (x * y) + np.ones(3),
    "unbatched array": lambda x, y: (x + 1) * np.arange(3.0),
    "broadcast up": lambda x, y: (x[0] + 1.0) + y,
    "promotion": lambda x, y: (x.astype(np.float32) * 2) * np.float64(3.0),
    "integers": lambda x, y: (np.arange(3) + 1) * (x > 0) + 0.5,
    "complex": lambda x, y: (x + 1j) * (y - 1j),
    "power": lambda x, y: (x + 2.0) ** y,
    "reflected power of 2": lambda x, y: 2 ** (x + 1.0) + 2.0 ** (y * 1.0),
}


@pytest.mark.parametrize("case", list(EXPRESSIONS))
def test_operators_on_temporaries_equal_the_loop(case):
    x, y = RNG.standard_normal((5, 3)), RNG.uniform(0.5, 2.0, (5, 3))
    x0, y0 = x.copy(), y.copy()
    check_vmap(EXPRESSIONS[case], (x, y))
    np.testing.assert_array_equal(x, x0)  # the caller's arrays are untouched
    np.testing.assert_array_equal(y, y0)


def test_a_named_value_is_not_overwritten():
    def f(x):
        y = x * 2.0  # named: later operators must not write into it
        z = y * 3.0
        w = (y + 0.0) * 5.0  # `y + 0.0` is a temporary, `y` stays
        return y, z, w

    x = RNG.standard_normal((4, 3))
    y, z, w = vmap(f)(x)
    np.testing.assert_array_equal(y, x * 2.0)
    np.testing.assert_array_equal(z, x * 2.0 * 3.0)
    np.testing.assert_array_equal(w, (x * 2.0 + 0.0) * 5.0)


def test_a_view_and_its_base_are_not_overwritten():
    def f(x):
        t = x * 2.0
        v = t[::2]
        u = (t[1:] * 1.0) + 1.0
        return v + 0.0, u, t

    x = RNG.standard_normal((4, 6))
    np.testing.assert_array_equal(vmap(f)(x)[0], (x * 2.0)[:, ::2])
    np.testing.assert_array_equal(vmap(f)(x)[2], x * 2.0)


def test_the_result_of_an_inner_vmap_or_grad_is_handled():
    x = RNG.standard_normal((3, 4, 2))
    check_vmap(lambda x: vmap(lambda r: (r * 2.0) + 1.0)(x) * 3.0, (x,))
    g = vmap(vmapx.grad(lambda v: np.sum((v * 2.0 + 1.0) ** 2)))
    np.testing.assert_allclose(g(x[0]), 4.0 * (2.0 * x[0] + 1.0), rtol=1e-12)


def test_peak_memory_of_an_expression_is_one_temporary():
    x = RNG.standard_normal((100_000, 4))
    out = 100_000 * 8
    assert _peak(vmap(lambda x: x.sum() * 2.0), x) < 1.2 * out
    ys = RNG.standard_normal((64, 3))
    dist = vmap(lambda x, ys: np.sqrt(((ys - x) ** 2).sum(-1)), in_axes=(0, None))
    xs = RNG.standard_normal((2048, 3))
    big = 2048 * 64 * 3 * 8
    assert _peak(dist, xs, ys) < 1.2 * (big + big // 3)  # hand NumPy: the same


def test_switching_elision_off(no_elision):
    x = RNG.standard_normal((100_000, 4))
    f = vmap(lambda x: x.sum() * 2.0)
    np.testing.assert_array_equal(f(x), x.sum(axis=1) * 2.0)
    assert _peak(f, x) > 1.8 * 100_000 * 8  # two output-sized arrays again


def test_a_tracer_consumed_through_an_object_array_raises_instead_of_lying():
    def f(x):
        held = np.empty(1, dtype=object)
        held[0] = x * 1.0  # only the object array holds it: CPython's count says dead
        doubled = held * 2.0  # NumPy's object loop calls our operator on the element
        return doubled[0] + held[0]

    with pytest.raises(RuntimeError, match="temporary elision"):
        vmap(f)(RNG.standard_normal((3, 2)))

    def returned(x):  # the consumed value as the result itself
        held = np.empty(1, dtype=object)
        held[0] = x * 1.0
        held * 2.0
        return held[0]

    with pytest.raises(RuntimeError, match="temporary elision"):
        vmap(returned)(RNG.standard_normal((3, 2)))


# -- random expressions: elision must change nothing but memory -------------------------

_OPS = ("+", "-", "*", "/", "**2")


def _program(draw_ops: list[tuple[str, int, int, bool]]):
    """A function of one example `x` (and `y`) that builds values step by step: each
    step combines two earlier values with an operator, as a named value or inline."""

    def f(x, y):
        named = [x, y, x * 1.5 + 0.25]  # (the third one is a fresh temporary, named)
        for op, i, j, inline in draw_ops:
            a, b = named[i % len(named)], named[j % len(named)]
            # inline: the operands are temporaries returned by a call (elision's case)
            fresh = (lambda v: v * 1.0) if inline else (lambda v: v)
            if op == "**2":
                value = (fresh(a) - 0.5) ** 2
            elif op == "+":
                value = fresh(a) + fresh(b)
            elif op == "-":
                value = fresh(a) - fresh(b)
            elif op == "*":
                value = fresh(a) * fresh(b)
            else:
                value = fresh(a) / (fresh(b) * fresh(b) + 1.0)
            named.append(value)
        return tuple(named)  # every value made: none may have been overwritten

    return f


def test_random_expressions_give_the_same_bits_with_and_without_elision():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    step = st.tuples(st.sampled_from(_OPS), st.integers(0, 20), st.integers(0, 20), st.booleans())

    @settings(max_examples=60, deadline=None)
    @given(st.lists(step, min_size=1, max_size=8), st.sampled_from([(3,), (4, 5), ()]))
    def run(steps, shape):
        f = _program(steps)
        x = RNG.standard_normal((4, *shape))
        y = RNG.standard_normal((4, *shape))
        x0, y0 = x.copy(), y.copy()
        with_elision = vmap(f)(x, y)
        vmapx.config.elide = False
        try:
            without = vmap(f)(x, y)
        finally:
            vmapx.config.elide = True
        for a, b in zip(with_elision, without, strict=True):
            np.testing.assert_array_equal(a, b)
        check_vmap(f, (x, y))
        np.testing.assert_array_equal(x, x0)
        np.testing.assert_array_equal(y, y0)

    run()
