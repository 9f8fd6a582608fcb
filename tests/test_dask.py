"""`vmap` of Dask arrays: lazy results, computed block by block (`vmapx._dask`).

Skipped where Dask is not installed (`make test-dask` installs it)."""

from __future__ import annotations

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")

import vmapx  # noqa: E402
from harness import assert_same, loop_reference  # noqa: E402
from vmapx import errors, vmap  # noqa: E402

RNG = np.random.default_rng(8)
X = RNG.standard_normal((10, 4, 3))
W = RNG.standard_normal(3)


def _tree_f(a, w):
    return {"dot": a @ w, "total": (a * w).sum(), "pair": (np.cumsum(a, axis=0), a.T)}


def _lazy(*outputs):
    for leaf in vmapx._api.optree.tree_leaves(outputs):
        assert isinstance(leaf, da.Array), type(leaf)


def _compute(tree, **kw):
    return dask.compute(tree, **kw)[0]


CASES = {
    "axis 0": (lambda a, w: a @ w, (X, W), (0, None), 0),
    "negative in_axes": (lambda a, w: a @ w, (np.moveaxis(X, 0, -1), W), (-1, None), 0),
    "middle in_axes, out_axes 1": (lambda a, w: a * w, (np.moveaxis(X, 0, 1), W), (1, None), 1),
    "out_axes -1": (lambda a, w: np.outer(a[0], w), (X, W), (0, None), -1),
    "two mapped": (lambda a, b: a.T @ b, (X, X[:, :, :2]), (0, 0), 0),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("chunks", [3, 10, 1])
def test_dask_arguments_give_the_loops_values(case, chunks):
    f, args, in_axes, out_axes = CASES[case]
    lazy = [
        da.from_array(a, chunks=chunks) if ax is not None else a
        for a, ax in zip(args, in_axes, strict=True)
    ]
    got = vmap(f, in_axes=in_axes, out_axes=out_axes)(*lazy)
    _lazy(got)
    assert_same(got.compute(), loop_reference(f, list(args), in_axes, out_axes))


def test_pytree_outputs_and_chunks_along_other_axes():
    x = da.from_array(X, chunks=(3, 2, 1))  # (examples split along their own axes)
    got = vmap(_tree_f, in_axes=(0, None))(x, W)
    _lazy(got)
    assert got["pair"][1].chunks[0] == (3, 3, 3, 1)
    assert_same(_compute(got), loop_reference(_tree_f, [X, W], (0, None)))


def test_pytree_arguments_with_dask_leaves():
    f = lambda d, scale: {"y": d["a"] @ d["w"] * scale, "z": d["b"].sum()}  # noqa: E731
    args = ({"a": da.from_array(X, chunks=4), "w": W, "b": da.from_array(X[:, 0], chunks=5)}, 3.0)
    got = vmap(f, in_axes=({"a": 0, "w": None, "b": 0}, None))(*args)
    _lazy(got)
    expected = {"y": X @ W * 3.0, "z": X[:, 0].sum(axis=1)}
    assert_same(_compute(got), expected)


def test_misaligned_batch_chunks_are_unified():
    a, b = da.from_array(X, chunks=(4, 4, 3)), da.from_array(X[:, :, :2], chunks=(3, 1, 1))
    f = lambda a, b: a.T @ b  # noqa: E731
    assert_same(vmap(f)(a, b).compute(), loop_reference(f, [X, X[:, :, :2]], 0))


def test_unbatched_dask_and_numpy_arguments_and_keywords():
    w = da.from_array(W, chunks=1)
    f = lambda a, w, v, scale=1.0: (a @ w + v.sum()) * scale  # noqa: E731
    got = vmap(f, in_axes=(0, None, None))(da.from_array(X, chunks=4), w, X[0], scale=2.0)
    _lazy(got)
    expected = loop_reference(lambda a: f(a, W, X[0], 2.0), [X], 0)
    assert_same(got.compute(), expected)


def test_mapped_numpy_with_a_mapped_dask_argument():
    f = lambda a, b: a - b  # noqa: E731
    got = vmap(f)(da.from_array(X, chunks=4), X[::-1].copy())
    assert_same(got.compute(), X - X[::-1])


def test_meta_comes_from_an_empty_batch_never_made_up_shapes():
    calls = []

    def f(a):
        calls.append(a.shape)
        return a.astype(np.float32).sum(axis=0)

    got = vmap(f)(da.from_array(X, chunks=5))
    assert calls == [(4, 3)]  # one run on an empty batch, before anything is computed
    assert got.dtype == np.float32 and got.shape == (10, 3)
    computed = got.compute()
    assert len(calls) == 3  # then one per block
    assert_same(computed, loop_reference(f, [X], 0))


def test_a_function_that_needs_examples_for_its_structure():
    def f(a):  # (Python control flow on values: the empty batch cannot answer)
        return a * 2 if float(a.sum()) > -1e9 else a

    got = vmap(f, fallback="silent")(da.from_array(X, chunks=5))
    assert_same(got.compute(), X * 2)


def test_zero_and_one_example_batches():
    f = lambda a, w: a @ w  # noqa: E731
    for n in (0, 1):
        got = vmap(f, in_axes=(0, None))(da.from_array(X[:n], chunks=2), W)
        _lazy(got)
        assert_same(got.compute(), (X[:n] @ W).reshape(n, 4))


def test_vmap_of_grad_and_jacrev():
    loss = lambda a, w: np.sum(np.tanh(a @ w) ** 2)  # noqa: E731
    x = da.from_array(X, chunks=3)
    got = vmap(vmapx.grad(loss, argnums=1), in_axes=(0, None))(x, W)
    _lazy(got)
    expected = np.stack([vmapx.grad(loss, argnums=1)(a, W) for a in X])
    assert_same(got.compute(), expected)
    jac = vmap(vmapx.jacrev(lambda a: np.sin(a) * a.sum()))(x)
    expected = np.stack([vmapx.jacrev(lambda a: np.sin(a) * a.sum())(a) for a in X])
    assert_same(jac.compute(), expected)


def test_nested_vmaps():
    f = lambda a, w: a @ w  # noqa: E731
    got = vmap(vmap(f, in_axes=(0, None)), in_axes=(1, None))(da.from_array(X, chunks=2), W)
    _lazy(got)
    assert_same(got.compute(), np.moveaxis(X @ W, 1, 0))


def test_jit_and_chunks_inside_a_block():
    f = vmapx.jit(lambda a: np.sin(a) @ W)
    got = vmap(f, chunk_size=2)(da.from_array(X, chunks=5))
    assert_same(got.compute(), loop_reference(lambda a: np.sin(a) @ W, [X], 0))
    jitted = vmapx.jit(vmap(lambda a: a.sum()))
    assert_same(jitted(da.from_array(X, chunks=5)).compute(), X.sum(axis=(1, 2)))


@pytest.mark.parametrize("scheduler", ["threads", "processes", "sync"])
def test_local_schedulers(scheduler):
    got = vmap(_tree_f, in_axes=(0, None))(da.from_array(X, chunks=4), W)
    assert_same(_compute(got, scheduler=scheduler), loop_reference(_tree_f, [X, W], (0, None)))


def test_a_batch_larger_than_a_block_never_whole_in_memory():
    """A lazily built batch: each block is made, mapped and reduced on its own."""
    big = da.random.default_rng(0).standard_normal((4000, 50), chunks=(500, 50))
    norms = vmap(lambda x: np.sqrt(x @ x))(big)
    assert norms.chunks == ((500,) * 8,)
    assert_same(norms.compute(), np.sqrt((big.compute() ** 2).sum(axis=1)))


@pytest.mark.parametrize(
    "kw, error, match",
    [
        ({"axis_name": "i"}, errors.UnsupportedError, "collectives"),
        ({"randomness": "different"}, errors.UnsupportedError, "stream"),
        ({"progress": True}, errors.UnsupportedError, "ProgressBar"),
        ({"out_axes": None}, errors.InAxesError, "out_axes=None"),
    ],
)
def test_refused_with_a_clear_error(kw, error, match):
    with pytest.raises(error, match=match):
        vmap(lambda a: a.sum(), **kw)(da.from_array(X, chunks=4))


def test_random_generators_and_dask_keywords_are_refused():
    x = da.from_array(X, chunks=4)
    with pytest.raises(errors.UnsupportedError, match="stream"):
        vmap(lambda a, g: a + g.normal(), in_axes=(0, None), randomness="same")(
            x, np.random.default_rng(0)
        )
    with pytest.raises(errors.UnsupportedError, match="positionally"):
        vmap(lambda a, w: a @ w)(x, w=da.from_array(W))


def test_a_distributed_cluster():
    """Two worker processes of a real `LocalCluster` compute the blocks."""
    distributed = pytest.importorskip("distributed")
    with (
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            memory_limit="512MiB",
            dashboard_address=None,
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        x = da.from_array(X, chunks=3)
        cases = [
            (vmap(_tree_f, in_axes=(0, None)), (x, W), loop_reference(_tree_f, [X, W], (0, None))),
            (
                vmap(lambda a, w: a * w, in_axes=(1, None), out_axes=-1),
                (da.from_array(np.moveaxis(X, 0, 1), chunks=(2, 4, 3)), W),
                loop_reference(lambda a: a * W, [X], 0, -1),
            ),
            (
                vmap(vmapx.grad(lambda a, w: np.sum((a @ w) ** 2), argnums=1), in_axes=(0, None)),
                (x.rechunk((5, 1, 1)), da.from_array(W, chunks=1)),
                np.stack([2 * (a @ W) @ a for a in X]),
            ),
            (vmap(lambda a: a.sum()), (da.from_array(X[:0], chunks=2),), np.zeros(0)),
            (vmap(lambda a: a.T), (da.from_array(X[:1], chunks=2),), X[:1].transpose(0, 2, 1)),
        ]
        for batched, args, expected in cases:
            got = batched(*args)
            _lazy(got)
            assert_same(client.compute(got, sync=True), expected)
        workers = client.run(lambda: 1)
        assert len(workers) == 2
