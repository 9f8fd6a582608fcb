"""Random draws under vmap: "different" equals the per-example loop's numbers bit for bit
(chunked or not), "same" draws once, "error" raises."""

from __future__ import annotations

import doctest
import warnings

import numpy as np
import pytest

import vmapx
from vmapx.errors import RandomnessError, UnsupportedError

B = 7


def loop_draws(f, xs, seed, **kwargs):
    """The per-example loop with one generator, and that generator's final state."""
    gen = np.random.default_rng(seed)
    out = np.stack([np.asarray(f(x, gen, **kwargs)) for x in xs])
    return out, gen.bit_generator.state


def check_like_loop(f, xs, seed=0, in_axes=(0, None), **vmap_kwargs):
    gen = np.random.default_rng(seed)
    got = vmapx.vmap(f, in_axes=in_axes, randomness="different", **vmap_kwargs)(xs, gen)
    expected, state = loop_draws(f, xs, seed)
    np.testing.assert_array_equal(got, expected)
    assert got.dtype == expected.dtype
    assert gen.bit_generator.state == state  # the stream continues where the loop's does
    return got


DRAWS = {
    "normal": lambda x, g: x + g.normal(size=3),
    "normal-batched-params": lambda x, g: g.normal(loc=x, scale=np.abs(x) + 1.0, size=3),
    "random": lambda x, g: g.random(3) + x,
    "random-float32": lambda x, g: g.random((2, 3), dtype=np.float32),
    "random-scalar": lambda x, g: g.random() * x,
    "standard_normal": lambda x, g: g.standard_normal((2, 2)),
    "standard_normal-float32": lambda x, g: g.standard_normal(3, dtype=np.float32),
    "integers": lambda x, g: g.integers(0, 10, size=4),
    "integers-batched-high": lambda x, g: g.integers(0, np.abs(x * 10).astype(int) + 1),
    "integers-int32-endpoint": lambda x, g: g.integers(-5, 5, 3, dtype=np.int32, endpoint=True),
    "integers-int8": lambda x, g: g.integers(0, 100, size=5, dtype=np.int8),
    "uniform": lambda x, g: g.uniform(x, x + 1, size=2),
    "exponential": lambda x, g: g.exponential(np.abs(x) + 0.5),
    "binomial": lambda x, g: g.binomial(10, 1 / (1 + np.exp(-x)), size=3),
    "poisson": lambda x, g: g.poisson(np.abs(x) * 5, size=2),
    "gamma": lambda x, g: g.gamma(np.abs(x) + 0.2, size=2),
    "beta": lambda x, g: g.beta(2.0, 3.0, size=3),
    "standard_t": lambda x, g: g.standard_t(3.0),
    "choice": lambda x, g: g.choice(5, size=3),
    "choice-no-replace-p": lambda x, g: g.choice(6, 3, replace=False, p=np.full(6, 1 / 6)),
    "choice-batched-array": lambda x, g: g.choice(np.stack([x, 2 * x, 3 * x]), size=2),
    "permutation": lambda x, g: g.permutation(6),
    "permutation-batched": lambda x, g: g.permutation(np.stack([x, x + 1, x + 2, x + 3])),
    "multivariate_normal": lambda x, g: g.multivariate_normal(np.zeros(2), np.eye(2)) + x,
    "dirichlet": lambda x, g: g.dirichlet([1.0, 2.0, 3.0]),
    "multinomial": lambda x, g: g.multinomial(10, [0.2, 0.3, 0.5]),
}


@pytest.mark.parametrize("name", list(DRAWS))
@pytest.mark.parametrize("chunk_size", [None, 3])
def test_different_equals_loop(name, chunk_size):
    xs = np.random.default_rng(1).normal(size=B)
    check_like_loop(DRAWS[name], xs, chunk_size=chunk_size)


def test_different_with_generator_mapped_or_as_keyword():
    xs = np.arange(5.0)
    f = DRAWS["normal"]
    check_like_loop(f, xs, in_axes=0)  # a generator's in_axes (0 or None) is ignored
    got = vmapx.vmap(lambda x, rng: f(x, rng), randomness="different")(
        xs, rng=np.random.default_rng(3)
    )
    np.testing.assert_array_equal(got, loop_draws(f, xs, 3)[0])


def test_generator_inside_a_pytree():
    def f(x, p):
        return x + p["rng"].normal(size=2) * p["scale"]

    gen = np.random.default_rng(4)
    got = vmapx.vmap(f, in_axes=(0, {"rng": None, "scale": None}), randomness="different")(
        np.zeros(3), {"rng": gen, "scale": 2.0}
    )
    ref = np.random.default_rng(4)
    np.testing.assert_array_equal(got, [f(0.0, {"rng": ref, "scale": 2.0}) for _ in range(3)])


def test_shuffle_equals_loop():
    def f(x, g):
        y = x * 1.0  # a batched array of this example's own
        g.shuffle(y)
        return y

    check_like_loop(f, np.random.default_rng(2).normal(size=(B, 5)))
    check_like_loop(f, np.random.default_rng(2).normal(size=(B, 3, 4)), chunk_size=2)

    def g_axis(x, g):
        y = x + 0.0
        g.shuffle(y, axis=1)
        return y

    check_like_loop(g_axis, np.random.default_rng(2).normal(size=(B, 3, 4)))


def test_two_draws_per_example_are_the_loop_numbers_in_another_order():
    def f(x, g):
        return np.concatenate([g.normal(size=2), g.normal(size=2)])

    got = vmapx.vmap(f, in_axes=(0, None), randomness="different")(
        np.zeros(3), np.random.default_rng(0)
    )
    loop, _ = loop_draws(f, np.zeros(3), 0)
    assert sorted(got.ravel()) == sorted(loop.ravel())
    np.testing.assert_array_equal(got[:, :2].ravel(), np.random.default_rng(0).normal(size=6))


def test_nested_vmaps_draw_the_double_loop_numbers():
    def f(x, g):
        return x + g.normal(size=2)

    xs = np.zeros((3, 4))
    inner = vmapx.vmap(f, in_axes=(0, None), randomness="different")
    got = vmapx.vmap(inner, in_axes=(0, None), randomness="different")(xs, np.random.default_rng(5))
    gen = np.random.default_rng(5)
    expected = np.stack([np.stack([f(x, gen) for x in row]) for row in xs])
    np.testing.assert_array_equal(got, expected)
    # same inside, different outside: rows differ, entries within a row agree
    inner_same = vmapx.vmap(f, in_axes=(0, None), randomness="same")
    got = vmapx.vmap(inner_same, in_axes=(0, None), randomness="different")(
        xs, np.random.default_rng(5)
    )
    assert np.all(got == got[:, :1]) and len(np.unique(got[:, 0, 0])) == 3
    np.testing.assert_array_equal(got[:, 0], np.random.default_rng(5).normal(size=(3, 2)))


# -- "same" ---------------------------------------------------------------------------------


@pytest.mark.parametrize("chunk_size", [None, 2])
def test_same_gives_identical_rows(chunk_size):
    def f(x, g):
        return x + g.normal(size=3) + g.integers(0, 5, size=3)

    gen = np.random.default_rng(0)
    got = vmapx.vmap(f, in_axes=(0, None), randomness="same", chunk_size=chunk_size)(
        np.zeros(5), gen
    )
    assert np.all(got == got[0])
    ref = np.random.default_rng(0)
    np.testing.assert_array_equal(got[0], ref.normal(size=3) + ref.integers(0, 5, size=3))
    assert gen.bit_generator.state == ref.bit_generator.state  # drawn once


def test_same_with_batched_parameters_shares_the_noise():
    def f(mu, g):
        return g.normal(loc=mu, size=2)

    mu = np.array([0.0, 10.0, 20.0])
    got = vmapx.vmap(f, in_axes=(0, None), randomness="same")(mu, np.random.default_rng(0))
    noise = np.random.default_rng(0).normal(size=2)
    np.testing.assert_array_equal(got, mu[:, None] + noise)
    perm = vmapx.vmap(lambda x, g: g.permutation(x), in_axes=(0, None), randomness="same")(
        np.arange(12).reshape(3, 4), np.random.default_rng(0)
    )
    assert np.all(np.argsort(perm, axis=1) == np.argsort(perm[0]))


# -- "error" and the limits -------------------------------------------------------------


def test_error_mode_raises_naming_the_call():
    def f(x, g):
        return x + g.normal(size=2)

    with pytest.raises(RandomnessError, match=r"`normal\(\)`.*randomness='error'"):
        vmapx.vmap(f, in_axes=(0, None))(np.zeros(3), np.random.default_rng(0))
    with pytest.raises(RandomnessError, match="randomness='different'"):
        vmapx.vmap(lambda x, rng: x + rng.random(), randomness="error")(
            np.zeros(3), rng=np.random.default_rng()
        )
    # passing a generator without drawing from it is fine
    vmapx.vmap(lambda x, g: x * 2, in_axes=(0, None))(np.zeros(3), np.random.default_rng(0))


def test_per_example_loop_fallback_keeps_the_semantics():
    def f(x, g):
        noise = g.normal(size=2)
        if x > 0:  # examples disagree: vmap re-runs f once per example
            return noise + 1
        return noise

    xs = np.array([1.0, -1.0, 2.0])
    gen = np.random.default_rng(0)
    with pytest.warns(vmapx.PerformanceWarning):
        got = vmapx.vmap(f, in_axes=(0, None), randomness="different")(xs, gen)
    expected, state = loop_draws(f, xs, 0)
    np.testing.assert_array_equal(got, expected)  # the batched attempt's draws are undone
    assert gen.bit_generator.state == state
    with pytest.warns(vmapx.PerformanceWarning):
        same = vmapx.vmap(f, in_axes=(0, None), randomness="same")(xs, np.random.default_rng(0))
    np.testing.assert_array_equal(same[[0, 2]], np.broadcast_to(same[1] + 1, (2, 2)))

    def g(x, rng):
        if x > 0:
            return x
        return x + rng.normal()

    with pytest.warns(vmapx.PerformanceWarning), pytest.raises(RandomnessError):
        vmapx.vmap(g, in_axes=(0, None))(xs, np.random.default_rng(0))


def test_closed_over_generator_with_batch_aware():
    gen = np.random.default_rng(0)

    def f(x):
        return x + vmapx.random.batch_aware(gen).normal(size=2)

    got = vmapx.vmap(f, randomness="different")(np.zeros(4))
    np.testing.assert_array_equal(got, np.random.default_rng(0).normal(size=(4, 2)))
    with pytest.raises(RandomnessError):
        vmapx.vmap(f)(np.zeros(4))
    assert vmapx.random.batch_aware(gen) is gen  # outside vmap


def test_empty_batch_draws_nothing():
    gen = np.random.default_rng(0)
    start = gen.bit_generator.state
    for f in (DRAWS["normal"], DRAWS["choice"]):
        out = vmapx.vmap(f, in_axes=(0, None), randomness="different")(np.zeros(0), gen)
        assert out.shape == (0, 3)
    assert gen.bit_generator.state == start


def test_unsupported():
    with pytest.raises(UnsupportedError, match="RandomState"):
        vmapx.vmap(lambda x, r: x, in_axes=(0, None))(np.zeros(2), np.random.RandomState(0))
    with pytest.raises(UnsupportedError, match="spawn"):
        vmapx.vmap(lambda x, g: g.spawn(2), in_axes=(0, None), randomness="different")(
            np.zeros(2), np.random.default_rng(0)
        )


def test_draws_inside_a_partitioned_branch_are_per_example():
    def f(x, g):
        return vmapx.cond(x > 0, lambda g: g.normal(), lambda g: 0.0, g)

    xs = np.array([1.0, -1.0, 1.0, 1.0])
    got = vmapx.vmap(f, in_axes=(0, None), randomness="different")(xs, np.random.default_rng(0))
    assert got[1] == 0.0 and len(np.unique(got[[0, 2, 3]])) == 3
    same = vmapx.vmap(f, in_axes=(0, None), randomness="same")(xs, np.random.default_rng(0))
    assert same[0] == same[2] == same[3] != 0.0


def test_docstring_examples():
    failures, _ = doctest.testmod(vmapx.random)
    assert failures == 0


# -- a generator that `f` reads from a closure or a global runs as the loop ------------

_global_rng = np.random.default_rng(11)


def _draw_from_the_global(x):
    return x + _global_rng.normal(size=x.shape)


def _reaches_the_global_through_a_helper(x):
    return _draw_from_the_global(x) * 2


def _loop_then_vmap(f, xs, reset, **vmap_kwargs):
    """The loop's draws and vmap's, each from the same starting state (`reset()`)."""
    reset()
    expected = np.stack([f(x) for x in xs])
    reset()
    with pytest.warns(vmapx.PerformanceWarning, match="closure or a global"):
        got = vmapx.vmap(f, **vmap_kwargs)(xs)
    return expected, got


@pytest.mark.parametrize("randomness", ["error", "different"])
def test_closed_over_generator_gives_the_loops_numbers(randomness):
    rng = np.random.default_rng(5)

    def g(x):
        return x + rng.normal(size=2)

    def reset_g():
        rng.bit_generator.state = np.random.default_rng(5).bit_generator.state

    xs = np.zeros((4, 2))
    expected, got = _loop_then_vmap(g, xs, reset_g, randomness=randomness)
    np.testing.assert_array_equal(got, expected)
    after_vmap = rng.bit_generator.state
    reset_g()
    for x in xs:
        g(x)
    assert rng.bit_generator.state == after_vmap  # the loop's state afterwards too


def test_global_generator_reached_through_a_helper_gives_the_loops_numbers():
    def reset():
        _global_rng.bit_generator.state = np.random.default_rng(11).bit_generator.state

    xs = np.arange(6.0).reshape(3, 2)
    for f in (_draw_from_the_global, _reaches_the_global_through_a_helper):
        expected, got = _loop_then_vmap(f, xs, reset)
        np.testing.assert_array_equal(got, expected)


def test_generator_bound_by_partial_gives_the_loops_numbers():
    import functools

    def f(x, rng):
        return x + rng.random()

    rng = np.random.default_rng(3)
    g = functools.partial(f, rng=rng)

    def reset():
        rng.bit_generator.state = np.random.default_rng(3).bit_generator.state

    expected, got = _loop_then_vmap(g, np.zeros(5), reset)
    np.testing.assert_array_equal(got, expected)


def test_closed_over_generator_with_workers_gives_the_loops_numbers():
    rng = np.random.default_rng(8)

    def f(x):
        return x + rng.normal()

    def reset():
        rng.bit_generator.state = np.random.default_rng(8).bit_generator.state

    expected, got = _loop_then_vmap(f, np.zeros(6), reset, chunk_size=2, workers=2)
    np.testing.assert_array_equal(got, expected)


def test_closed_over_generator_under_fallback_error_raises():
    rng = np.random.default_rng(0)
    with pytest.raises(vmapx.errors.ConcretizationError, match="closure or a global"):
        vmapx.vmap(lambda x: x + rng.normal(), fallback="error")(np.zeros(3))


def test_closed_over_generator_with_randomness_same_draws_once():
    rng = np.random.default_rng(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = vmapx.vmap(lambda x: x + rng.normal(), randomness="same")(np.zeros(3))
    assert np.all(got == np.random.default_rng(0).normal())


def test_generator_passed_as_argument_is_not_a_hidden_one():
    rng = np.random.default_rng(1)

    def f(x, r):
        assert rng is not None  # also read from the closure (the same generator as `r`)
        return x + r.normal()

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = vmapx.vmap(f, in_axes=(0, None), randomness="different")(np.zeros(3), rng)
    np.testing.assert_array_equal(got, np.random.default_rng(1).normal(size=3))


def test_function_without_generators_does_not_loop():
    scale = 2.0

    def f(x):
        return np.sin(x) * scale

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = vmapx.vmap(f)(np.arange(3.0))
    np.testing.assert_array_equal(got, np.sin(np.arange(3.0)) * 2.0)


def test_bound_methods_generator_attribute_gives_the_loops_numbers():
    class Model:
        def __init__(self):
            self.rng = np.random.default_rng(4)

        def noisy(self, x):
            return x + self.rng.normal(size=2)

    model = Model()

    def reset():
        model.rng = np.random.default_rng(4)

    expected, got = _loop_then_vmap(model.noisy, np.zeros((3, 2)), reset)
    np.testing.assert_array_equal(got, expected)


def test_abandoned_batched_run_puts_back_the_draws_it_made():
    """A batched run that draws from a closure's generator, or NumPy's global one, and then
    needs the loop (a Python `if` on which the examples disagree) leaves the generators as
    they were: the loop draws the loop's numbers."""
    rng = np.random.default_rng(21)

    def f(x):
        noise = rng.normal() + np.random.normal()
        if x > 0:
            return x + noise
        return x - noise

    xs = np.array([1.0, -1.0, 2.0])

    def reset():
        rng.bit_generator.state = np.random.default_rng(21).bit_generator.state
        np.random.seed(3)

    reset()
    expected = np.stack([f(x) for x in xs])
    reset()
    with pytest.warns(vmapx.PerformanceWarning):
        got = vmapx.vmap(f)(xs)
    np.testing.assert_array_equal(got, expected)


def test_generator_held_beside_modules_classes_and_numbers_gives_the_loops_numbers():
    class Holder:
        pass

    holder = Holder()
    holder.rng = np.random.default_rng(4)
    scale, name, kind, arr = 2.0, "x", float, np.ones(2)

    def f(x):
        assert (np, kind, name, len) is not None
        return x * scale + arr + holder.rng.normal(size=2)

    def reset():
        holder.rng.bit_generator.state = np.random.default_rng(4).bit_generator.state

    expected, got = _loop_then_vmap(f, np.zeros((3, 2)), reset)
    np.testing.assert_array_equal(got, expected)
