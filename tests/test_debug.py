"""Printing inside transforms: a traced value's repr shows its values, and
`vmapx.debug.print` prints once per example; neither changes the computation."""

from __future__ import annotations

import numpy as np
import pytest

import vmapx
from harness import assert_same
from vmapx import grad, jit, vmap

X = np.arange(6.0).reshape(3, 2)


def _loop_lines(fmt, f, xs):
    return [fmt.format(*f(x)) for x in xs]


def test_print_of_a_batched_value_shows_the_batch_labelled(capsys):
    out = vmap(lambda x: print(x) or x * 2)(X)
    assert_same(out, X * 2)
    text = capsys.readouterr().out
    assert text.startswith("BatchTracer(float64[2], batch axis 0: vmap of 3,")
    assert np.array2string(X) in text


@pytest.mark.parametrize(
    "transform, kind",
    [
        (lambda g: vmap(grad(g)), "VJPTracer(float64[2], primal, batch axis 0: vmap of 3"),
        (lambda g: grad(lambda X: vmap(g)(X).sum()), "BatchTracer(float64[2], primal, batch"),
        (lambda g: vmap(vmapx.jacfwd(g)), "JVPTracer(float64[2], primal, batch axis 0"),
    ],
)
def test_print_under_compositions_shows_the_primal_batch(capsys, transform, kind):
    def g(x):
        print(x)
        return np.sum(x**2)

    transform(g)(X)
    text = capsys.readouterr().out
    assert text.startswith(kind), text
    assert np.array2string(X) in text


def test_nested_vmaps_label_every_batch_axis(capsys):
    vmap(vmap(lambda v: print(v) or v, axis_name="inner"))(X)
    text = capsys.readouterr().out
    assert "batch axes 0, 1: vmap of 3, vmap of 2 'inner'" in text


def test_printing_values_that_differ_never_falls_back_to_the_loop():
    # (warnings are errors: a fallback would raise PerformanceWarning)
    def f(x):
        str(x), repr(x), repr(x > 2)
        return x + 1

    assert_same(vmap(f)(X), X + 1)


def test_debug_print_prints_each_example_like_the_loop(capsys):
    def f(x):
        vmapx.debug.print("x={} total={t:.1f}", x, t=x.sum())
        return x * 2

    vmap(f)(X)
    got = capsys.readouterr().out.splitlines()
    assert got == [f"x={x} total={x.sum():.1f}" for x in X]


def test_debug_print_of_mixed_batched_and_plain_values(capsys):
    w = np.array([1.0, -1.0])
    vmap(lambda x, w: vmapx.debug.print("{} {} {}", x @ w, w, "s") or x, in_axes=(0, None))(X, w)
    assert capsys.readouterr().out.splitlines() == [f"{x @ w} {w} s" for x in X]


def test_debug_print_under_grad_and_nested_vmaps(capsys):
    def g(x):
        vmapx.debug.print("{}", x)
        return np.sum(x**2)

    vmap(grad(g))(X)
    assert capsys.readouterr().out.splitlines() == [str(x) for x in X]
    vmap(vmap(lambda v: vmapx.debug.print("{}", v) or v))(X)
    assert capsys.readouterr().out.splitlines() == [str(v) for v in X.ravel()]
    vmapx.debug.print("plain {}", 3)
    assert capsys.readouterr().out == "plain 3\n"


def test_debug_print_under_jit_prints_on_every_replay(capsys):
    def f(x):
        vmapx.debug.print("s={}", x.sum())
        print(x)  # Python's print: only when f runs (the recording)
        return x * 2

    fast = jit(vmap(f))
    assert fast.lower(X).replayable  # printing left the recording replayable
    capsys.readouterr()
    for xs in (X, X + 10):
        assert_same(fast(xs), xs * 2)
        assert capsys.readouterr().out.splitlines() == [f"s={x.sum()}" for x in xs]
    assert "vmapx.debug.print('s={}')" in str(fast.lower(X))


def test_repr_inside_a_jit_recording_leaves_it_replayable(capsys):
    fast = jit(lambda x: print(x) or x + 1)
    assert fast.lower(np.ones(2)).replayable
    assert "RecordTracer(float64[2]" in capsys.readouterr().out
