"""Derivative rules of the control-flow primitives and of the collectives.

- `SWITCH` (`cond`/`switch` under a transform applied inside a vmap, e.g.
  `vmap(grad(f))`): as JAX's `cond`, its JVP is the switch of the branches' JVPs and its
  VJP the switch of their VJPs, so per-example derivatives stay partitioned.
- `WHILE`: forward mode carries the tangents along the loop; reverse mode inside a vmap
  falls back to the per-example loop (`grad(vmap(f))` is fine: the tape records the
  iterations the partition ran).
- Collectives: under `vmap(grad(f))` the transpose of a sum over examples is a sum over
  examples (JAX's convention), so each example's gradient is that of the sum of all
  examples' outputs: `vmap(grad(f))` equals `grad(lambda x: vmap(f)(x).sum())`. Under
  `grad(vmap(f))` the batch rules' NumPy calls are differentiated directly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ._ad_api import jvp, vjp
from ._autodiff import defjvp, defjvp_argnums, deflinear, defvjp, defvjp_argnums, defzero, is_float
from ._collectives import ALL_GATHER, PMAX, PMEAN, PMIN, PSUM, PSUM_SCATTER
from ._core import bind
from ._registry import Primitive
from .control_flow import SWITCH, WHILE, BranchFn

# -- `SWITCH`: the switch of the branches' JVPs / VJPs --------------------------------


def _with(leaves: list[Any], positions: list[Any], values: tuple[Any, ...]) -> list[Any]:
    out = list(leaves)
    for i, v in zip(positions, values, strict=True):
        out[i] = v
    return out


def _switch_jvp(
    args: tuple[Any, ...], kwargs: dict[Any, Any], ans: tuple[Any, ...], tangents: dict[Any, Any]
) -> list[Any]:
    index, *leaves = args
    n, diff = len(leaves), sorted(a - 1 for a in tangents)

    def branch_jvp(branch: Callable[..., Any]) -> BranchFn:
        def run(*flat: Any) -> tuple[Any, ...]:
            primals = list(flat[:n])
            f = lambda *xs: branch(*_with(primals, diff, xs))  # noqa: E731
            out, t_out = jvp(f, tuple(primals[i] for i in diff), tuple(flat[n:]))
            return tuple(np.zeros_like(o) if t is None else t for o, t in zip(out, t_out))  # noqa: B905

        return BranchFn(run)

    branches = tuple(branch_jvp(b) for b in kwargs["branches"])
    tans = [tangents[i + 1] for i in diff]
    return list(bind(SWITCH, (index, *leaves, *tans), {**kwargs, "branches": branches}))


def _switch_vjp(
    argnums: list[Any], ans: tuple[Any, ...], args: tuple[Any, ...], kwargs: dict[Any, Any]
) -> Callable[..., Any]:
    index, *leaves = args
    n, diff = len(leaves), [a - 1 for a in argnums]

    def branch_vjp(branch: Callable[..., Any]) -> BranchFn:
        def run(*flat: Any) -> tuple[Any, ...]:
            primals = list(flat[:n])
            f = lambda *xs: branch(*_with(primals, diff, xs))  # noqa: E731
            _, pull = vjp(f, *(primals[i] for i in diff))
            return tuple(pull(tuple(flat[n:])))

        return BranchFn(run)

    branches = tuple(branch_vjp(b) for b in kwargs["branches"])

    def pullback(g: Sequence[Any]) -> list[Any]:
        g = [np.zeros_like(a) if c is None else c for c, a in zip(g, ans, strict=True)]
        return list(bind(SWITCH, (index, *leaves, *g), {**kwargs, "branches": branches}))

    return pullback


defzero(SWITCH, argnums=(0,))  # the index selects; it has no derivative
defjvp_argnums(SWITCH, _switch_jvp)
defvjp_argnums(SWITCH, _switch_vjp)


# -- `WHILE`: forward mode carries the tangents along ----------------------------------


def _while_jvp(
    args: tuple[Any, ...], kwargs: dict[Any, Any], ans: tuple[Any, ...], tangents: dict[Any, Any]
) -> list[Any]:
    n = len(args)
    # every float leaf gets a tangent: a carried value may come to depend on the inputs
    floats = [i for i, x in enumerate(args) if is_float(x)]
    tans = [np.zeros_like(args[i]) if tangents.get(i) is None else tangents[i] for i in floats]
    cond, body = kwargs["cond"], kwargs["body"]

    def body_jvp(*state: Any) -> tuple[Any, ...]:
        primals = list(state[:n])
        f = lambda *xs: body(*_with(primals, floats, xs))  # noqa: E731
        out, t_out = jvp(f, tuple(primals[i] for i in floats), tuple(state[n:]))
        return (*out, *(t_out[i] for i in floats))

    loop = {**kwargs, "cond": BranchFn(lambda *state: cond(*state[:n])), "body": BranchFn(body_jvp)}
    out = bind(WHILE, (*args, *tans), loop)
    where = dict(zip(floats, out[n:], strict=True))
    return [where.get(i) for i in range(n)]


def _while_vjp(
    argnums: list[Any], ans: tuple[Any, ...], args: tuple[Any, ...], kwargs: dict[Any, Any]
) -> Callable[..., Any]:
    raise kwargs["trace"].concretization(
        "a reverse-mode derivative (`grad`, `vjp`) inside the vmap of a `while_loop` whose "
        "predicate is batched",
        "differentiate outside the vmap (`grad(lambda x: vmap(f)(x).sum())`), or use "
        "forward mode (`jvp`, `jacfwd`) inside it",
    )


defjvp_argnums(WHILE, _while_jvp)
defvjp_argnums(WHILE, _while_vjp)


# -- collectives ---------------------------------------------------------------------


def _over(prim: Primitive) -> Callable[..., Any]:
    return lambda g, axes: bind(prim, (g,), {"axes": axes})


def _extremum_jvp(t: Any, ans: Any, x: Any, axes: tuple[Any, ...]) -> Any:
    at = x == ans  # the examples holding the extremum share its derivative (ties split)
    return bind(PSUM, (np.where(at, t, 0),), {"axes": axes}) / bind(PSUM, (at,), {"axes": axes})


def _extremum_vjp(ans: Any, x: Any, axes: tuple[Any, ...]) -> Callable[..., Any]:
    at = x == ans
    share = bind(PSUM, (at,), {"axes": axes})
    return lambda g: np.where(at, bind(PSUM, (g,), {"axes": axes}) / share, 0)


deflinear([PSUM, PMEAN, ALL_GATHER, PSUM_SCATTER])
defvjp(PSUM, lambda ans, x, axes: lambda g: _over(PSUM)(g, axes))
defvjp(PMEAN, lambda ans, x, axes: lambda g: _over(PMEAN)(g, axes))
defvjp(ALL_GATHER, lambda ans, x, axes: lambda g: _over(PSUM_SCATTER)(g, axes))
defvjp(PSUM_SCATTER, lambda ans, x, axes: lambda g: _over(ALL_GATHER)(g, axes))
defjvp([PMAX, PMIN], _extremum_jvp)
defvjp([PMAX, PMIN], _extremum_vjp)
