"""Helpers for the tests ported from HIPS autograd's test suite (MIT license,
https://github.com/HIPS/autograd): `combo_check` tables become vmapx checks.

Each case of autograd's `check_grads(fun, argnums)(*args, **kwargs)` becomes three checks:

1. `vmapx.check_grads` of `fun` in the differentiated arguments (forward and reverse
   mode, to the order autograd uses, against central differences);
2. `vmap` of `fun` over a batch of perturbed copies of those arguments against the
   per-example loop (values, shape and dtype);
3. `vmap(grad(total))` against the loop of `grad(total)`, where `total` is the sum of the
   real parts of every float output.

The differentiated arguments may be pytrees (a tuple of arrays for `np.concatenate`);
they are flattened, so every check sees a flat list of arrays.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import optree
import pytest

import vmapx
from harness import assert_same

RNG = np.random.default_rng(0)
BATCH = 3


def R(*shape: int) -> Any:  # noqa: N802 (autograd's name for a random real array)
    """A standard normal array (a Python float when `shape` is empty, as `npr.randn()`)."""
    return float(RNG.standard_normal()) if not shape else RNG.standard_normal(shape)


def C(*shape: int) -> Any:  # noqa: N802
    """A complex standard normal array."""
    return RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)


def _is_leaf(x: Any) -> bool:
    return isinstance(x, np.ndarray)


@dataclass
class Case:
    """`fun(*args, **kwargs)` differentiated in the arguments `argnums`."""

    fun: Callable
    args: tuple
    argnums: tuple[int, ...] = (0,)
    kwargs: dict = field(default_factory=dict)
    order: int = 2
    modes: tuple[str, ...] = ("fwd", "rev")
    vmap: bool = True
    loops: bool = False  # vmap falls back to the per-example loop (and warns so)
    grads: bool = True  # False: the vmap check only
    rtol: float = 1e-5
    atol: float = 1e-5

    def flat(self) -> tuple[list, Callable]:
        """The differentiated leaves, and `fun` as a function of them."""
        trees = [self.args[i] for i in self.argnums]
        leaves, treedef = optree.tree_flatten(trees, is_leaf=_is_leaf)
        leaves = [np.asarray(x) for x in leaves]

        def of_leaves(*xs: Any) -> Any:
            full = list(self.args)
            for i, tree in zip(self.argnums, optree.tree_unflatten(treedef, xs), strict=True):
                full[i] = tree
            return self.fun(*full, **self.kwargs)

        return leaves, of_leaves

    def check(self) -> None:
        leaves, g = self.flat()
        if not self.grads:
            self.check_vmap_only(leaves, g)
            return
        vmapx.check_grads(g, leaves, order=self.order, modes=self.modes, rtol=self.rtol,
                          atol=self.atol)  # fmt: skip
        if self.vmap and self.loops:
            with pytest.warns(vmapx.PerformanceWarning):
                check_vmap_and_grad(g, leaves)
        elif self.vmap:
            check_vmap_and_grad(g, leaves)

    def check_vmap_only(self, leaves: list, g: Callable) -> None:
        batched = perturbed_batch(leaves)
        with pytest.warns(vmapx.PerformanceWarning) if self.loops else nullcontext():
            got = vmapx.vmap(g)(*batched)
        assert_same(got, loop(g, batched, [0] * len(batched)), rtol=1e-10, atol=1e-12)


def total(out: Any) -> Any:
    """The sum of the real parts of every float output: a scalar loss."""
    parts = [
        np.sum(np.real(x))
        for x in optree.tree_leaves(out, is_leaf=lambda x: hasattr(x, "dtype"))
        if np.result_type(x).kind in "fc"
    ]
    return sum(parts[1:], parts[0])


def perturbed_batch(leaves: Sequence[np.ndarray], size: int = BATCH, seed: int = 1) -> list:
    """`size` examples per leaf, stacked on axis 0: the leaf plus a small random change
    (away from the kinks of `abs`, `max` and friends that the leaf itself avoids)."""
    rng = np.random.default_rng(seed)
    out = []
    for x in leaves:
        noise = 1e-2 * rng.standard_normal((size, *x.shape))
        if x.dtype.kind == "c":
            noise = noise + 1e-2j * rng.standard_normal((size, *x.shape))
        out.append(x + noise.astype(x.dtype) if x.dtype.kind in "fc" else np.stack([x] * size))
    return out


def loop(f: Callable, batched: Sequence, in_axes: Sequence) -> Any:
    """`np.stack([f(*example_i) ...])` over leaves mapped on axis 0 (or not, for None)."""
    size = next(len(a) for a, ax in zip(batched, in_axes, strict=True) if ax is not None)
    results = [
        f(*[a if ax is None else a[i] for a, ax in zip(batched, in_axes, strict=True)])
        for i in range(size)
    ]
    leaves, treedef = optree.tree_flatten(results[0], is_leaf=_is_leaf)
    cols = [treedef.flatten_up_to(r) for r in results]
    return optree.tree_unflatten(
        treedef, [np.stack([c[j] for c in cols]) for j in range(len(leaves))]
    )


def check_vmap_and_grad(g: Callable, leaves: Sequence[np.ndarray]) -> None:
    """`vmap(g)` ≡ loop, and `vmap(grad(total∘g))` ≡ loop of grad, over perturbed copies."""
    batched = perturbed_batch(leaves)
    axes = [0] * len(batched)
    assert_same(vmapx.vmap(g)(*batched), loop(g, batched, axes), rtol=1e-10, atol=1e-12)
    dg = vmapx.grad(lambda *xs: total(g(*xs)), argnums=tuple(range(len(leaves))))
    assert_same(vmapx.vmap(dg)(*batched), loop(dg, batched, axes), rtol=1e-10, atol=1e-12)


def combo(
    name: str, fun: Callable, argnums: Sequence[int], *arg_lists: Sequence, **kwarg_lists: Any
) -> list:
    """Every combination of the arguments in `arg_lists` and keywords in `kwarg_lists`
    (autograd's `combo_check`), as pytest params named `name-<k>`. Options of the check
    are the keywords `order`, `modes`, `vmap`, `rtol`, `atol`, `marks` (on every param)."""
    opts = {k: kwarg_lists.pop(k) for k in ("order", "modes", "vmap", "rtol", "atol")
            if k in kwarg_lists}  # fmt: skip
    marks = kwarg_lists.pop("marks", ())
    keys = list(kwarg_lists)
    params = []
    for k, (args, kws) in enumerate(
        itertools.product(itertools.product(*arg_lists), itertools.product(*kwarg_lists.values()))
    ):
        case = Case(fun, args, tuple(argnums), dict(zip(keys, kws, strict=True)), **opts)
        params.append(pytest.param(case, id=f"{name}-{k}", marks=marks))
    return params


def single(name: str, fun: Callable, *args: Any, argnums: Sequence[int] = (0,), **opts: Any) -> Any:
    """One case, `check_grads(fun, argnums)(*args)`, as a pytest param."""
    marks = opts.pop("marks", ())
    return pytest.param(Case(fun, args, tuple(argnums), **opts), id=name, marks=marks)


def batching_only(params: list, loops: bool) -> list:
    """The vmap check alone of each case of `params` (ids suffixed `-vmap`)."""
    return [
        pytest.param(replace(p.values[0], grads=False, loops=loops), id=f"{p.id}-vmap")
        for p in params
    ]


def xfail(reason: str, raises: type[BaseException] | None = None) -> Any:
    """A strict expected failure: vmapx deliberately differs from autograd here."""
    return pytest.mark.xfail(strict=True, reason=reason, raises=raises)
