"""custom_vmap: a user-given batched implementation runs once on the whole batch."""

from __future__ import annotations

import doctest

import numpy as np
import pytest

import vmapx
from vmapx import _custom
from vmapx.errors import OutputError

rng = np.random.default_rng(0)


def opaque_norm(x):
    """Stands for a compiled extension: it needs a real array."""
    return float(np.sqrt(np.dot(np.asarray(x), np.asarray(x))))


def make_norm(calls):
    @vmapx.custom_vmap
    def norm(x, scale):
        return opaque_norm(x) * scale

    @norm.def_vmap
    def rule(axis_size, in_batched, x, scale):
        calls.append((axis_size, in_batched))
        x_batched, scale_batched = in_batched
        n = np.sqrt(np.sum(x * x, axis=-1))
        if not x_batched:
            n = np.broadcast_to(n, (axis_size,))
        return n * scale, True

    return norm


def test_rule_runs_once_on_the_whole_batch():
    calls = []
    norm = make_norm(calls)
    x = rng.normal(size=(6, 3))
    got = vmapx.vmap(norm, in_axes=(0, None), fallback="error")(x, 2.0)
    np.testing.assert_allclose(got, 2 * np.linalg.norm(x, axis=1))
    assert calls == [(6, [True, False])]
    # outside vmap the function itself runs
    assert norm(np.array([3.0, 4.0]), 1.0) == 5.0
    assert len(calls) == 1


def test_batched_second_argument_only():
    calls = []
    norm = make_norm(calls)
    got = vmapx.vmap(norm, in_axes=(None, 0))(np.array([3.0, 4.0]), np.arange(3.0))
    np.testing.assert_allclose(got, [0.0, 5.0, 10.0])
    assert calls == [(3, [False, True])]


def test_pytrees_and_unbatched_outputs():
    @vmapx.custom_vmap
    def stats(d):
        return {"total": np.sum(d["x"]) * d["w"], "w": d["w"]}

    @stats.def_vmap
    def rule(axis_size, in_batched, d):
        assert in_batched == [{"x": True, "w": False}]
        return {"total": np.sum(d["x"], axis=1) * d["w"], "w": d["w"]}, {"total": True, "w": False}

    x = rng.normal(size=(4, 3))
    got = vmapx.vmap(stats, in_axes=({"x": 0, "w": None},))({"x": x, "w": 3.0})
    np.testing.assert_allclose(got["total"], 3 * x.sum(1))
    np.testing.assert_array_equal(got["w"], np.full(4, 3.0))  # unbatched, repeated by vmap


def test_nested_vmaps_call_the_rule_at_the_inner_level():
    calls = []
    norm = make_norm(calls)
    x = rng.normal(size=(2, 3, 4))
    got = vmapx.vmap(vmapx.vmap(norm, in_axes=(0, None)), in_axes=(0, None))(x, 1.0)
    np.testing.assert_allclose(got, np.linalg.norm(x, axis=2))
    assert calls == [(3, [True, False])]


def test_without_a_rule_the_function_runs():
    plain = vmapx.custom_vmap(lambda x: x * 2)
    np.testing.assert_array_equal(vmapx.vmap(plain)(np.arange(3.0)), [0.0, 2.0, 4.0])


def test_errors():
    bad = vmapx.custom_vmap(lambda x: x)
    bad.def_vmap(lambda n, b, x: x)
    with pytest.raises(OutputError, match="must return a pair"):
        vmapx.vmap(bad)(np.zeros(3))
    bad.def_vmap(lambda n, b, x: (x[:2], True))
    with pytest.raises(OutputError, match=r"batch \(3 examples\) on axis 0"):
        vmapx.vmap(bad)(np.zeros(3))
    bad.def_vmap(lambda n, b, x: ((x, x), (True, True, True)))
    with pytest.raises(OutputError, match="does not fit the structure"):
        vmapx.vmap(bad)(np.zeros(3))
    with pytest.raises(TypeError, match="must be callable"):
        bad.def_vmap(3)
    kw = vmapx.custom_vmap(lambda x, y=None: x)
    kw.def_vmap(lambda n, b, x, y=None: (x, True))
    with pytest.raises(TypeError, match="batched keyword argument"):
        vmapx.vmap(lambda x: kw(x, y=x))(np.zeros(3))


def test_docstring_examples():
    failures, _ = doctest.testmod(_custom)
    assert failures == 0
