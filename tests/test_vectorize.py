"""`vmapx.vectorize` against NumPy's own `np.vectorize`, the reference loop."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import vmapx
from harness import assert_same

RNG = np.random.default_rng(4)


def _both(f, *args, **kw):
    """`vmapx.vectorize` and `np.vectorize` of `f` with the same options, called alike."""
    call_kw = kw.pop("call_kw", {})
    return vmapx.vectorize(f, **kw)(*args, **call_kw), np.vectorize(f, **kw)(*args, **call_kw)


CASES = {
    "matvec, loop dims broadcast": (
        lambda a, b: a @ b,
        "(m,n),(n)->(m)",
        (RNG.standard_normal((4, 1, 3, 2)), RNG.standard_normal((5, 2))),
    ),
    "one argument without loop dims": (
        lambda a, b: a @ b,
        "(m,n),(n)->(m)",
        (RNG.standard_normal((3, 2)), RNG.standard_normal((6, 2))),
    ),
    "no loop dims at all": (
        lambda a, b: a @ b,
        "(m,n),(n)->(m)",
        (RNG.standard_normal((3, 2)), RNG.standard_normal(2)),
    ),
    "scalar core": (
        lambda x, y: np.sin(x) * y,
        "(),()->()",
        (RNG.standard_normal((3, 1)), RNG.standard_normal(4)),
    ),
    "new output dimension": (
        lambda x: np.outer(x, x),
        "(n)->(n,n)",
        (RNG.standard_normal((2, 3, 4)),),
    ),
    "reduction to a scalar": (
        lambda x: np.linalg.norm(x),
        "(n)->()",
        (RNG.standard_normal((7, 5)),),
    ),
    "several outputs": (
        lambda x: (x.mean(), x - x.mean()),
        "(n)->(),(n)",
        (RNG.standard_normal((3, 4, 5)),),
    ),
    "a size-1 loop dim": (
        lambda a, b: a + b,
        "(n),(n)->(n)",
        (RNG.standard_normal((1, 3)), RNG.standard_normal((1, 3))),
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_signature_cases_equal_np_vectorize(case):
    f, signature, args = CASES[case]
    got, expected = _both(f, *args, signature=signature)
    assert_same(got, expected)


def test_without_a_signature():
    x, y = RNG.standard_normal((3, 1)), RNG.integers(0, 5, 4)
    got, expected = _both(lambda a, b: a * b + 1, x, y)
    assert_same(got, expected)
    got, expected = _both(lambda a: (a + 1, a * 2), x)
    assert_same(got, expected)
    got, expected = _both(lambda a: a + 1, 2.0)  # (a 0-d array, as NumPy gives)
    assert_same(got, expected)


def test_excluded_arguments_by_position_and_name():
    def poly(x, coeffs, *, power=1):
        return np.polyval(coeffs, x) ** power

    x = RNG.standard_normal(6)
    for excluded, kw in (({1}, {}), ({1, "power"}, {"power": 2})):
        got, expected = _both(poly, x, [1.0, 2.0, 3.0], excluded=excluded, call_kw=kw)
        assert_same(got, expected)


def test_keyword_arguments_are_vectorized_unless_excluded():
    got, expected = _both(
        lambda x, y: x - y, RNG.standard_normal(3), call_kw={"y": np.ones((2, 1))}
    )
    assert_same(got, expected)


def test_otypes():
    x = RNG.standard_normal((2, 3))
    got, expected = _both(lambda v: v.sum(), x, signature="(n)->()", otypes=[np.float32])
    assert_same(got, expected)
    got, expected = _both(lambda v: (v * 2, v > 0), x, otypes="fb")
    assert_same(got, expected)


def test_zero_size_loop():
    x = np.empty((0, 3))
    got = vmapx.vectorize(lambda v: v * 2, signature="(n)->(n)")(x)
    expected = np.vectorize(lambda v: v * 2, signature="(n)->(n)", otypes=[float])(x)
    assert_same(got, expected)


def test_as_a_decorator():
    @vmapx.vectorize
    def plus(x, y):
        return x + y

    @vmapx.vectorize(signature="(n)->()")
    def total(x):
        return x.sum()

    assert_same(plus(np.arange(3.0), 1.0), np.arange(3.0) + 1)
    assert_same(total(np.ones((2, 4))), np.full(2, 4.0))
    assert total.signature == "(n)->()" and total.__name__ == "total"


def test_scalar_python_code_loops_with_a_warning_and_the_loops_answer():
    def clip(x):
        return x if x > 0 else 0.0

    x = RNG.standard_normal(8)
    with pytest.warns(vmapx.PerformanceWarning):
        got = vmapx.vectorize(clip)(x)
    assert_same(got, np.vectorize(clip)(x))


@pytest.mark.parametrize(
    "args, signature, match",
    [
        ((np.ones(3), np.ones(4)), "(n),(n)->()", "inconsistent size for core dimension 'n'"),
        ((np.ones(3),), "(m,n)->()", "has 1 dimensions"),
        ((np.ones((2, 3)), np.ones((4, 3))), "(n),(n)->()", "shape"),
        ((np.ones(3),), "(n->()", "not a valid gufunc signature"),
    ],
)
def test_errors_like_numpys(args, signature, match):
    with pytest.raises(ValueError, match=match):
        vmapx.vectorize(lambda a, b=None: a.sum(), signature=signature)(*args)


def test_wrong_outputs():
    with pytest.raises(ValueError, match="wrong number of outputs"):
        vmapx.vectorize(lambda x: x.sum(), signature="(n)->(),()")(np.ones((2, 3)))
    with pytest.raises(ValueError, match="inconsistent size for core dimension 'n'"):
        vmapx.vectorize(lambda x: x[:2], signature="(n)->(n)")(np.ones((2, 3)))
    with pytest.raises(TypeError, match="wrong number of positional arguments"):
        vmapx.vectorize(lambda x: x, signature="(n)->(n)")(np.ones(3), np.ones(3))


def test_dask_arrays_go_through_the_same_path():
    da = pytest.importorskip("dask.array")
    a, b = RNG.standard_normal((6, 4, 3, 2)), RNG.standard_normal((4, 2))
    f = lambda a, b: a @ b  # noqa: E731
    got = vmapx.vectorize(f, signature="(m,n),(n)->(m)")(da.from_array(a, chunks=2), b)
    assert isinstance(got, da.Array)
    expected = np.vectorize(f, signature="(m,n),(n)->(m)")(a, b)
    assert_same(got.compute(), expected)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pair = vmapx.vectorize(lambda x: (x.sum(), x * 2), signature="(n)->(),(n)")(
            da.from_array(a[..., 0], chunks=(3, 2, 3))
        )
    assert_same(tuple(p.compute() for p in pair), (a[..., 0].sum(-1), a[..., 0] * 2))
