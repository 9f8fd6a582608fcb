"""Every case ported from HIPS autograd's tests (MIT license,
https://github.com/HIPS/autograd; see the `test_ported_autograd_*` files) under the
batching variations those files do not cover: the batch on the last axis, nested vmaps,
a zero-size batch, single precision, `jacfwd` against `jacrev`, and `jit` against the
plain call (on its second call, with new data). Each is compared with the loop.
"""

from __future__ import annotations

import numpy as np
import optree
import pytest

import test_ported_autograd_fft
import test_ported_autograd_linalg
import test_ported_autograd_numpy
import test_ported_autograd_scalar
import test_ported_autograd_systematic
import vmapx
from autograd_port import Case, loop, perturbed_batch, total
from harness import assert_same
from np_compat import NUMPY2

MODULES = [
    test_ported_autograd_systematic,
    test_ported_autograd_numpy,
    test_ported_autograd_linalg,
    test_ported_autograd_fft,
    test_ported_autograd_scalar,
]


def _cases() -> list:
    """The cases that batch without a fallback and are not expected failures."""
    out = []
    for module in MODULES:
        for name, value in vars(module).items():
            if name.startswith("_") or not isinstance(value, list):
                continue
            for param in value:
                case = getattr(param, "values", (None,))[0]
                if isinstance(case, Case) and case.vmap and not case.loops and not param.marks:
                    case_id = f"{module.__name__[20:]}-{param.id}"
                    out.append(pytest.param(case, case_id, id=case_id))
    return out


def _is_leaf(x):
    return isinstance(x, np.ndarray)


def _stack(results: list):
    return optree.tree_map(lambda *r: np.stack(r), *results, is_leaf=_is_leaf)


def _single(x: np.ndarray) -> np.ndarray:
    if x.dtype.kind not in "fc":
        return x
    return x.astype(np.complex64 if x.dtype.kind == "c" else np.float32)


# NumPy 1.26 promotes a per-example NumPy scalar by its value where vmap's batch of them
# promotes by type (the known limit held in test_fuzz_found.py): in single precision,
# these cases' loops give float64 where vmap keeps float32
_NUMPY1_VALUE_PROMOTION = ("_systematic-angle-0", "_numpy-linspace-")


@pytest.mark.parametrize(("case", "case_id"), _cases())
def test_batching_variations(case: Case, case_id: str):
    leaves, g = case.flat()
    batch = perturbed_batch(leaves)
    axes = [0] * len(batch)
    want = loop(g, batch, axes)
    last = [np.moveaxis(x, 0, -1) for x in batch]
    assert_same(vmapx.vmap(g, in_axes=-1)(*last), want, rtol=1e-10, atol=1e-12)
    outer = [np.stack([x, x + 1e-3]) for x in batch]
    nested = _stack([loop(g, [x[k] for x in outer], axes) for k in range(2)])
    assert_same(vmapx.vmap(vmapx.vmap(g))(*outer), nested, rtol=1e-10, atol=1e-12)
    empty = vmapx.vmap(g)(*[x[:0] for x in batch])
    for e, w in zip(optree.tree_leaves(empty, is_leaf=_is_leaf),
                    optree.tree_leaves(want, is_leaf=_is_leaf), strict=True):  # fmt: skip
        assert (e.shape, e.dtype) == ((0, *w.shape[1:]), w.dtype)
    low = [_single(x) for x in batch]
    if not NUMPY2 and case_id.startswith(_NUMPY1_VALUE_PROMOTION):
        with pytest.raises(AssertionError, match="dtype"):  # strict: fails once fixed
            assert_same(vmapx.vmap(g)(*low), loop(g, low, axes), rtol=2e-5, atol=2e-5)
    else:
        assert_same(vmapx.vmap(g)(*low), loop(g, low, axes), rtol=2e-5, atol=2e-5)
    example = [x[0] for x in batch]
    if all(x.dtype.kind == "f" for x in example):
        nums = tuple(range(len(example)))
        h = lambda *xs: total(g(*xs))  # noqa: E731
        fwd, rev = vmapx.jacfwd(h, argnums=nums)(*example), vmapx.jacrev(h, argnums=nums)(*example)
        for a, b in zip(fwd, rev, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10)
    jitted = vmapx.jit(g)
    jitted(*[x[1] for x in batch])
    got, plain = jitted(*example), g(*example)
    assert type(got) is type(plain)
    assert_same(optree.tree_map(np.asarray, got), optree.tree_map(np.asarray, plain), 1e-12, 1e-12)
