"""Generalized ufuncs against per-example loops: examples with fewer axes than the
core dimensions (the batch axis must never stand in for one), and `axes=`/`axis=`
with operands of different ranks or batched by different nested vmaps."""

import numpy as np
import pytest

import vmapx

L = np.linalg
V = np.arange(6.0).reshape(3, 2)
W = np.ones((2, 2))


def needs(mod, name):
    return pytest.mark.skipif(not hasattr(mod, name), reason=f"NumPy lacks {name}")


def loop_error(f, x):
    try:
        np.stack([f(e) for e in x])
    except Exception as e:
        return e
    raise AssertionError("the loop does not raise")


TOO_FEW = [
    pytest.param(lambda v: np.matmul(v[0], v[1]), id="matmul-0d"),
    pytest.param(lambda v: v @ v[0], id="@-0d-right"),
    pytest.param(lambda v: v[0] @ W, id="@-0d-left-unbatched-right"),
    pytest.param(lambda v: W @ v[0], id="@-unbatched-left-0d"),
    pytest.param(lambda v: L.matmul(v[0], v), marks=needs(L, "matmul"), id="linalg.matmul"),
    pytest.param(lambda v: np.matvec(v, v), marks=needs(np, "matvec"), id="matvec-1d"),
    pytest.param(lambda v: np.matvec(v[0], v), marks=needs(np, "matvec"), id="matvec-0d"),
    pytest.param(lambda v: np.matvec(W, v[0]), marks=needs(np, "matvec"), id="matvec-0d-vec"),
    pytest.param(lambda v: np.vecmat(v[0], v), marks=needs(np, "vecmat"), id="vecmat-0d"),
    pytest.param(lambda v: np.vecmat(v, v), marks=needs(np, "vecmat"), id="vecmat-1d"),
    pytest.param(lambda v: np.vecdot(v[0], v[1]), marks=needs(np, "vecdot"), id="vecdot"),
    pytest.param(lambda v: np.vecdot(v[0], v, axis=-1), marks=needs(np, "vecdot"), id="axis"),
    pytest.param(lambda v: np.vecdot(v, v, axis=5), marks=needs(np, "vecdot"), id="bad-axis"),
    pytest.param(lambda v: L.vecdot(v[0], v[1]), marks=needs(L, "vecdot"), id="linalg.vecdot"),
    pytest.param(lambda v: L.cross(v[0], v[1]), marks=needs(L, "cross"), id="linalg.cross"),
]


@pytest.mark.parametrize("f", TOO_FEW)
def test_too_few_axes_raise_the_loops_error(f):
    err = loop_error(f, V)
    with pytest.raises(type(err)) as got:
        vmapx.vmap(f)(V)
    assert str(got.value) == str(err)


@pytest.mark.xfail(strict=True, reason="`@` of two NumPy scalars is Python's TypeError")
def test_matmul_operator_of_two_scalars():
    f = lambda v: v[0] @ v[1]  # noqa: E731
    err = loop_error(f, V)
    with pytest.raises(type(err)):
        vmapx.vmap(f)(V)


def nested_loop(f, a, b, a_axis, b_axis, a_outer):
    """`f(a_i, b_j)` over the nested loop: rows over the outer vmap's operand."""
    a_list, b_list = np.moveaxis(a, a_axis, 0), np.moveaxis(b, b_axis, 0)
    if a_outer:
        return np.stack([np.stack([f(x, y) for y in b_list]) for x in a_list])
    return np.stack([np.stack([f(x, y) for x in a_list]) for y in b_list])


def nested_vmap(f, a_axis, b_axis, a_outer):
    if a_outer:
        return vmapx.vmap(vmapx.vmap(f, in_axes=(None, b_axis)), in_axes=(a_axis, None))
    return vmapx.vmap(vmapx.vmap(f, in_axes=(a_axis, None)), in_axes=(None, b_axis))


DIFFERENT_LEVELS = [  # (f, example shapes of a and b); equal batch sizes: no shape error
    pytest.param(
        lambda a, b: np.matmul(a, b, axes=[(-2, -1)] * 3), (4, 2, 3), (3, 2), id="matmul-axes"
    ),
    pytest.param(getattr(L, "vecdot", None), (2,), (2,), marks=needs(L, "vecdot"), id="lvd"),
    pytest.param(getattr(L, "vecdot", None), (4, 2), (2,), marks=needs(L, "vecdot"), id="lvd-4"),
    pytest.param(getattr(L, "vecdot", None), (2,), (4, 2), marks=needs(L, "vecdot"), id="lvd-5"),
    pytest.param(
        lambda a, b: L.vecdot(a, b, axis=0),
        (2, 4),
        (2, 1),
        marks=needs(L, "vecdot"),
        id="lvd-axis0",
    ),
    pytest.param(
        lambda a, b: np.vecdot(a, b, axis=-1),
        (4, 2),
        (2,),
        marks=needs(np, "vecdot"),
        id="vecdot-axis",
    ),
    pytest.param(
        lambda a, b: np.vecdot(a, b, axis=0),
        (2, 4),
        (2,),
        marks=needs(np, "vecdot"),
        id="vecdot-axis0",
    ),
]


@pytest.mark.parametrize("a_outer", [False, True], ids=["b-outer", "a-outer"])
@pytest.mark.parametrize("axes", [(0, 0), (-1, -1), (0, -1)], ids=str)
@pytest.mark.parametrize(("f", "sa", "sb"), DIFFERENT_LEVELS)
def test_operands_batched_by_different_vmaps(f, sa, sb, axes, a_outer):
    rng = np.random.default_rng(0)
    a = np.moveaxis(rng.standard_normal((3, *sa)), 0, axes[0])
    b = np.moveaxis(rng.standard_normal((3, *sb)), 0, axes[1])
    expected = nested_loop(f, a, b, *axes, a_outer)
    got = nested_vmap(f, *axes, a_outer)(a, b)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-12)


@pytest.mark.parametrize(
    "f",
    [
        pytest.param(lambda m, v: np.vecdot(m, v, axis=-1), marks=needs(np, "vecdot"), id="vd"),
        pytest.param(
            lambda m, v: np.matvec(m, v, axes=[(-2, -1), (-1,), (-1,)]),
            marks=needs(np, "matvec"),
            id="matvec",
        ),
        pytest.param(lambda m, v: np.matmul(m, v[:, None], axes=[(-2, -1)] * 3), id="matmul"),
    ],
)
def test_axes_with_operands_of_different_ranks(f):
    rng = np.random.default_rng(1)
    m, v = rng.standard_normal((3, 3, 3, 3)), rng.standard_normal((3, 3))  # (equal sizes)
    expected = np.stack([f(x, y) for x, y in zip(m, v, strict=True)])
    got = vmapx.vmap(f)(m, v)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-12)
