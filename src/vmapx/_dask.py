"""`vmap` of Dask arrays: a lazy Dask array, computed block by block along the batch axis.

When a mapped argument of a `vmap`ped function is a `dask.array.Array`, the call builds
a Dask graph instead of computing: `dask.array.apply_gufunc` with the batch axis as its
one loop dimension and each example's axes as core dimensions. Each block of the batch
runs vmapx's batched code (`vmap(f)` with the call's `chunk_size`, `fallback`, ...) on
plain NumPy blocks, on whatever scheduler computes it: threads, processes, or a
`dask.distributed` cluster (`f` must then pickle with cloudpickle, as Dask's tasks do).

- **Inputs.** Each mapped Dask argument has its batch axis moved to the front (lazily)
  and its other axes rechunked whole (an example is never split); batch chunks that
  differ between arguments are unified to the first mapped Dask argument's; mapped
  NumPy arguments are cut along those chunks. Unmapped Dask arrays reach every block
  whole; unmapped NumPy arrays and other values, and keyword arguments, go into the
  graph once.
- **Outputs.** Their structure, shapes and dtypes come from a run of `vmap(f)` on an
  empty batch (unmapped Dask arrays stand in as zeros of their shape, no memory): Dask
  never calls `f` with shapes of its own making. Where `f` cannot run on an empty
  batch, the first example (computed) tells instead. Outputs are Dask arrays with the
  batch axis at `out_axes`, in the pytree `f` returns.
- **Refused.** `axis_name` (collectives need the whole batch, which no block has),
  `out_axes=None` (no block can know that every example agrees), random generator
  arguments and `randomness="different"` (blocks run in parallel, in other processes:
  the loop's stream cannot be reproduced), and `progress=True` (the work happens at
  `.compute()`: wrap that in `dask.diagnostics.ProgressBar()`, or use
  `distributed.progress` on a cluster).
- **Threads.** A block runs on one thread (`workers=1` unless the `vmap` says): Dask's
  scheduler already runs several blocks at once.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, cast

import numpy as np

from . import _pytree as optree  # optree in vmapx.config.pytree_namespace
from .errors import AxisSizeError, InAxesError, UnsupportedError


def is_dask(x: Any) -> bool:
    """Whether `x` is a Dask array (without importing Dask where nothing did)."""
    module = sys.modules.get("dask.array")
    return module is not None and issubclass(type(x), module.Array)


def any_dask(leaves: list[Any], kwargs: dict[Any, Any]) -> bool:
    """Whether a call has a Dask array among its arguments."""
    if "dask.array" not in sys.modules:
        return False
    return any(is_dask(x) for x in leaves) or any(is_dask(x) for x in optree.tree_leaves(kwargs))


def vmap_blocks(
    f: Callable[..., Any],
    opts: Any,
    leaves: list[Any],
    treedef: Any,
    axes: list[Any],
    kwargs: dict[Any, Any],
    size: int,
) -> Any:
    """The call as lazy Dask arrays (see the module)."""
    import dask.array as da

    _refuse(opts, leaves, axes, kwargs)
    axes = [None if ax is None else ax % np.ndim(x) for x, ax in zip(leaves, axes, strict=True)]
    chunks = _batch_chunks(leaves, axes, size)
    inputs = _block_inputs(da, leaves, axes, chunks)
    arrays = [i for i, x in enumerate(inputs) if is_dask(x)]
    inner = _inner_vmap(f, opts, axes, treedef)
    out_leaves, out_tree = _output_structure(inner, leaves, axes, treedef, kwargs, size)
    out_axes = output_axes(opts.out_axes, out_leaves, out_tree)
    block = _Block(inner, inputs, arrays, treedef, kwargs, len(out_leaves) > 1)
    signature = _signature(inputs, arrays, axes, out_leaves)
    sizes = {
        f"o{j}_{d}": n for j, leaf in enumerate(out_leaves) for d, n in enumerate(leaf.shape[1:])
    }
    meta = tuple(np.empty((0,) * leaf.ndim, dtype=leaf.dtype) for leaf in out_leaves)
    result = da.apply_gufunc(
        block,
        signature,
        *[inputs[i] for i in arrays],
        output_sizes=sizes,
        meta=meta if len(meta) > 1 else meta[0],
        allow_rechunk=False,
    )
    results = result if len(out_leaves) > 1 else (result,)
    moved = [
        r if ax == 0 else da.moveaxis(r, 0, ax) for r, ax in zip(results, out_axes, strict=True)
    ]
    return optree.tree_unflatten(out_tree, moved)


def _refuse(opts: Any, leaves: list[Any], axes: list[Any], kwargs: dict[Any, Any]) -> None:
    if opts.axis_name is not None:
        raise UnsupportedError(
            f"vmap: `axis_name={opts.axis_name!r}` with a Dask array argument: collectives "
            "(`psum`, ...) need the whole batch, and each Dask block holds a part of it; "
            "compute the collective with Dask outside `f` (`x.sum(axis=0)`), or pass NumPy "
            "arrays"
        )
    if opts.randomness == "different" or any(
        isinstance(x, np.random.Generator) for x in [*leaves, *optree.tree_leaves(kwargs)]
    ):
        raise UnsupportedError(
            "vmap: random draws with a Dask array argument: Dask computes the blocks in "
            "parallel (and in other processes), so the per-example loop's stream of a "
            "generator cannot be reproduced; draw the random numbers as a Dask array "
            "(`dask.array.random.default_rng(seed).normal(size=...)`) and map them as an "
            "argument, or pass NumPy arrays"
        )
    if opts.progress:
        raise UnsupportedError(
            "vmap: `progress=True` with a Dask array argument: the result is lazy and the "
            "work happens at `.compute()`; wrap that in `dask.diagnostics.ProgressBar()` "
            "(local schedulers) or use `distributed.progress(...)` on a cluster"
        )
    if any(is_dask(x) for x in optree.tree_leaves(kwargs)):
        raise UnsupportedError(
            "vmap: a Dask array among the keyword arguments: keyword arguments are passed to "
            "every block as they are; pass it positionally with in_axes=None (every block "
            "then gets it whole, as a NumPy array)"
        )
    if all(ax is None for ax in axes):
        raise InAxesError(
            "vmap: no argument is mapped in a call with Dask arrays; map at least one "
            "argument (its batch axis is what the blocks split)"
        )
    if any(ax is None for ax in optree.tree_leaves(opts.out_axes, none_is_leaf=True)):
        raise InAxesError(
            "vmap: `out_axes=None` with a Dask array argument: no Dask block can check that "
            "every example gives the same value; give that output an integer out_axes and "
            "take its first entry"
        )


def _batch_chunks(leaves: list[Any], axes: list[Any], size: int) -> tuple[Any, ...]:
    """The batch axis' chunks: the first mapped Dask argument's (one chunk if none is)."""
    for x, ax in zip(leaves, axes, strict=True):
        if ax is not None and is_dask(x):
            return cast("tuple[Any, ...]", x.chunks[ax])
    return (size,)


def _block_inputs(
    da: Any, leaves: list[Any], axes: list[Any], chunks: tuple[Any, ...]
) -> list[Any]:
    """Each argument as the blocks take it: mapped ones Dask arrays with the batch axis
    first, in `chunks`, other axes whole; unmapped Dask arrays in one chunk; the rest
    as they are."""
    inputs = []
    for x, ax in zip(leaves, axes, strict=True):
        if ax is None:
            inputs.append(x.rechunk(-1) if is_dask(x) else x)
            continue
        if not is_dask(x):
            x = da.from_array(np.asarray(x), chunks=-1)
        if ax:
            x = da.moveaxis(x, ax, 0)
        inputs.append(x.rechunk((chunks, *(-1,) * (x.ndim - 1))))
    return inputs


def _inner_vmap(
    f: Callable[..., Any], opts: Any, axes: list[Any], treedef: Any
) -> Callable[..., Any]:
    """`vmap(f)` as each block runs it: every mapped leaf's batch axis first."""
    from ._api import vmap

    in_axes = [None if ax is None else 0 for ax in axes]
    return vmap(
        f,
        in_axes=tuple(in_axes) if treedef is None else optree.tree_unflatten(treedef, in_axes),
        chunk_size="auto" if opts.autochunk is not None else opts.chunk_size,
        fallback=opts.fallback,
        workers=1 if opts.workers is None else opts.workers,
        randomness=opts.randomness,
    )


class _Block:
    """The function of one block: NumPy blocks of the Dask arguments in, the flattened
    outputs of the inner `vmap` out (a tuple where there are several)."""

    def __init__(
        self,
        inner: Callable[..., Any],
        inputs: list[Any],
        arrays: list[Any],
        treedef: Any,
        kwargs: dict[Any, Any],
        many: bool,
    ) -> None:
        self.inner, self.arrays, self.treedef, self.kwargs, self.many = (
            inner, arrays, treedef, kwargs, many
        )  # fmt: skip
        self.constants = [None if i in arrays else x for i, x in enumerate(inputs)]

    def __call__(self, *blocks: np.ndarray) -> Any:
        leaves = list(self.constants)
        for i, b in zip(self.arrays, blocks, strict=True):
            leaves[i] = b
        args = leaves if self.treedef is None else optree.tree_unflatten(self.treedef, leaves)
        out = optree.tree_leaves(self.inner(*args, **self.kwargs), none_is_leaf=True)
        out = [np.asarray(x) for x in out]
        return tuple(out) if self.many else out[0]


def _output_structure(
    inner: Callable[..., Any],
    leaves: list[Any],
    axes: list[Any],
    treedef: Any,
    kwargs: dict[Any, Any],
    size: int,
) -> tuple[list[Any], Any]:
    """The outputs of `f` over an empty batch (shapes and dtypes), and their structure;
    where `f` cannot run on no examples, over the first example (computed)."""
    stand_ins = [_stand_in(x, ax, 0) for x, ax in zip(leaves, axes, strict=True)]
    try:
        out = inner(*_unflatten(treedef, stand_ins), **kwargs)
    except AxisSizeError:
        if not size:
            raise
        first = [_stand_in(x, ax, 1) for x, ax in zip(leaves, axes, strict=True)]
        out = inner(*_unflatten(treedef, first), **kwargs)
    out_leaves, out_tree = optree.tree_flatten(out, none_is_leaf=True)
    return [np.asarray(x) for x in out_leaves], out_tree


def _stand_in(x: Any, ax: int | None, n: int) -> Any:
    """`x` for the structure run: mapped arguments' first `n` examples (computed),
    unmapped Dask arrays as zeros of their shape (a broadcast: no memory)."""
    if ax is None:
        return np.broadcast_to(np.zeros((), x.dtype), x.shape) if is_dask(x) else x
    index = [slice(None)] * np.ndim(x)
    index[ax] = slice(0, n)
    part = x[tuple(index)]
    return np.moveaxis(np.asarray(part.compute() if is_dask(part) else part), ax, 0)


def _unflatten(treedef: Any, leaves: list[Any]) -> Any:
    return leaves if treedef is None else optree.tree_unflatten(treedef, leaves)


def output_axes(out_axes: Any, out_leaves: list[Any], out_tree: Any) -> list[Any]:
    """Each output's batch axis, made non-negative."""
    from ._api import output_axes as leaf_axes

    example = optree.tree_unflatten(out_tree, out_leaves)
    axes = leaf_axes(out_axes, example, out_tree)
    result = []
    for i, (leaf, ax) in enumerate(zip(out_leaves, axes, strict=True)):
        if not -leaf.ndim <= ax < leaf.ndim:
            raise InAxesError(
                f"vmap: out_axes={ax} is out of range for output {i} of per-example shape "
                f"{leaf.shape[1:]}; valid axes are {-leaf.ndim}..{leaf.ndim - 1}"
            )
        result.append(ax % leaf.ndim)
    return result


def _signature(inputs: list[Any], arrays: list[Any], axes: list[Any], out_leaves: list[Any]) -> str:
    """`apply_gufunc`'s signature: each example's axes are core dimensions."""
    ins = []
    for i in arrays:
        first = 0 if axes[i] is None else 1
        ins.append("(" + ",".join(f"i{i}_{d}" for d in range(first, inputs[i].ndim)) + ")")
    outs = [
        "(" + ",".join(f"o{j}_{d}" for d in range(x.ndim - 1)) + ")"
        for j, x in enumerate(out_leaves)
    ]
    return ",".join(ins) + "->" + ",".join(outs)
