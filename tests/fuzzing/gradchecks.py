"""The derivative checks: grad against finite differences (away from kinks), vmap(grad),
jit(vmap(grad)) and grad(vmap) against the loop of grad, jacfwd against jacrev.

The differentiated function is `loss(*args) = sum(real(out * w))` of the program's first
float64 (or complex128) output `out` with fixed random weights `w`, differentiated with
respect to the float64 and complex128 arguments.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import vmapx
from fuzzing.checks import (
    Case,
    Mismatch,
    Refusal,
    assert_same,
    batch,
    example_args,
    first_example,
    flatten,
    precision_floor,
    raises_like,
    second_examples,
    stack_results,
)
from fuzzing.programs import run_lines
from vmapx.errors import VmapxError

H = 1e-5  # finite-difference step


def diff_argnums(case: Case) -> tuple[int, ...]:
    """The differentiated arguments: float64 and complex128 ones."""
    return tuple(i for i, a in enumerate(case.program.args) if a.dtype in _DOUBLE)


_DOUBLE = ("float64", "complex128")


def _out_index(out: Any) -> int | None:
    leaves, _ = flatten(out)
    for k, leaf in enumerate(leaves):
        if np.asarray(leaf).dtype in (np.float64, np.complex128):
            return k
    return None


def loss_of(case: Case) -> tuple[Callable, int] | None:
    """`loss(*args)` and the output index it reads, or None when nothing is differentiable."""
    f = case.program.compile()
    try:
        out = f(*example_args(case, 0, [first_example(case)]))
    except Exception:
        return None
    k = _out_index(out)
    if k is None:
        return None
    leaf = np.asarray(flatten(out)[0][k])
    w = np.random.default_rng([case.seed, 5]).standard_normal(leaf.shape)
    if leaf.dtype.kind == "c":
        w = w + 1j * np.random.default_rng([case.seed, 6]).standard_normal(leaf.shape)

    def loss(*args: Any) -> Any:
        return np.sum(np.real(flatten(f(*args))[0][k] * w))

    return loss, k


def _unjudgeable(v: Any) -> bool:
    # single or half precision: finite differences step across its rounding
    return np.asarray(v).dtype in (np.float16, np.float32, np.complex64)


def derivatives_unjudgeable(case: Case) -> bool:
    """Whether an intermediate value (on the first example) rules derivative checks out."""
    env = {a.name: v.copy() for a, v in zip(case.program.args, first_example(case), strict=True)}
    for s in case.program.stmts:
        try:
            run_lines(list(s.lines), env)
        except Exception:
            return True
        if _unjudgeable(env.get(s.target, 1.0)):
            return True
    return any(_unjudgeable(v) for v in env.values())


def _grad(loss: Callable, nums: tuple, args: list) -> Any:
    try:
        return vmapx.grad(loss, argnums=nums)(*args)
    except VmapxError as e:
        raise Refusal(f"[grad] {type(e).__name__}: {e}") from e


def _direction(rng: np.random.Generator, x: np.ndarray) -> np.ndarray:
    t = rng.standard_normal(x.shape)
    return t + 1j * rng.standard_normal(x.shape) if x.dtype.kind == "c" else t


def check_grad(case: Case) -> None:
    """<grad, t> equals the central difference along a random t, where f is smooth."""
    made = loss_of(case)
    nums = diff_argnums(case)
    if made is None or not nums:
        return
    loss, _ = made
    args = example_args(case, 0, [first_example(case)])
    args = [a.copy() for a in args]  # differentiated arguments are written by no one
    rng = np.random.default_rng([case.seed, 7])
    ts = {i: _direction(rng, args[i]) for i in nums}

    def at(step: float) -> float:
        moved = [a + step * ts[i] if i in ts else a for i, a in enumerate(args)]
        return float(loss(*moved))

    try:
        l0, lp, lm = at(0.0), at(H), at(-H)
    except Exception:
        return
    if not np.all(np.isfinite([l0, lp, lm])) or abs(l0) > 1e12:
        return  # beyond 2**52 rounding is the identity: differences see no steps
    fwd, bwd = (lp - l0) / H, (l0 - lm) / H
    if abs(fwd - bwd) > 1e-3 * max(1.0, abs(fwd), abs(bwd)):
        return  # a kink (or a jump) within the step: differences say nothing
    central = (lp - lm) / (2 * H)
    try:
        g = _grad(loss, nums, args)
    except Refusal:
        raise
    except np.linalg.LinAlgError:
        return  # a derivative through a singular matrix (qr of a rank-deficient one, ...)
    except Exception as e:
        raise Mismatch("grad", f"raised {type(e).__name__}", f"{e} (f works)") from e
    # the pairing of `vmapx.check_grads`: Re(sum(grad * t)) is the directional derivative
    ad = float(sum(np.real(np.sum(gi * ts[i])) for gi, i in zip(g, nums, strict=True)))
    if not np.isfinite(ad):
        return  # a singular point (sqrt at 0, ...): differences cannot judge it
    tol = 1e-4 * max(1.0, abs(central)) + 1e-9 * abs(l0)
    if not abs(ad - central) <= tol:
        raise Mismatch("grad", "values", f"<grad, t> = {ad!r}, finite differences {central!r}")


def check_vmap_grad(case: Case) -> None:
    """vmap(grad(loss)) equals the loop of grad(loss)."""
    made = loss_of(case)
    nums = diff_argnums(case)
    if made is None or not nums or not case.examples:
        return
    loss, _ = made
    g = vmapx.grad(loss, argnums=nums)
    args = batch(case)

    def reference() -> Any:
        return stack_results([g(*example_args(case, i)) for i in range(case.size)], 0)

    def run() -> Any:
        return vmapx.vmap(g, in_axes=case.in_axes)(*args)

    try:
        pair = raises_like("vmap_grad", run, reference)
    except Refusal:
        raise
    if pair is not None:
        assert_same("vmap_grad", *pair, precision_floor(case))


def _fd_jacobian(h: Callable, x: np.ndarray) -> np.ndarray | None:
    """Central differences of `h` at `x`, or None where `h` is not smooth there."""
    cols = []
    for k in range(x.size):
        e = np.zeros(x.size)
        e[k] = H
        e = e.reshape(x.shape)
        y0, yp, ym = (np.asarray(h(x + s * e), dtype=float) for s in (0, 1, -1))
        fwd, bwd = (yp - y0) / H, (y0 - ym) / H
        if not np.all(np.isfinite([fwd, bwd])) or np.any(
            np.abs(fwd - bwd) > 1e-3 * np.maximum(1.0, np.maximum(np.abs(fwd), np.abs(bwd)))
        ):
            return None
        cols.append((yp - ym) / (2 * H))
    y = np.asarray(h(x))
    return np.stack(cols, axis=-1).reshape(y.shape + x.shape) if cols else None


def check_jit_grad(case: Case) -> None:
    """jit(vmap(grad(loss))) equals the loop of grad(loss), recorded and replayed."""
    made = loss_of(case)
    nums = diff_argnums(case)
    if made is None or not nums or not case.examples:
        return
    g = vmapx.grad(made[0], argnums=nums)
    jitted = vmapx.jit(vmapx.vmap(g, in_axes=case.in_axes))
    for examples in (case.examples, second_examples(case)):

        def reference(examples: list = examples) -> Any:
            n = len(examples)
            return stack_results([g(*example_args(case, i, examples)) for i in range(n)], 0)

        def run(examples: list = examples) -> Any:
            return jitted(*batch(case, examples))

        pair = raises_like("jit_grad", run, reference)
        if pair is not None:
            assert_same("jit_grad", *pair, precision_floor(case))


def check_grad_of_vmap(case: Case) -> None:
    """grad of the summed vmap(loss) gives each example's gradient (stacked where the
    argument is mapped, summed where it is not)."""
    made = loss_of(case)
    nums = diff_argnums(case)
    if made is None or not nums or not case.examples:
        return
    loss = made[0]
    g = vmapx.grad(loss, argnums=nums)

    def reference() -> Any:
        per = [g(*example_args(case, i)) for i in range(case.size)]
        out = []
        for k, j in enumerate(nums):
            ax = case.in_axes[j]
            col = [p[k] for p in per]
            out.append(np.sum(col, axis=0) if ax is None else np.stack(col, axis=ax))
        return tuple(out)

    def total(*args: Any) -> Any:
        return np.sum(vmapx.vmap(loss, in_axes=case.in_axes)(*args))

    def run() -> Any:
        return vmapx.grad(total, argnums=nums)(*batch(case))

    pair = raises_like("grad_of_vmap", run, reference)
    if pair is not None:
        assert_same("grad_of_vmap", *pair, precision_floor(case))


def check_jac(case: Case) -> None:
    """jacfwd and jacrev agree; where they do not, both are held to finite differences."""
    made = loss_of(case)
    nums = diff_argnums(case)
    if made is None or not nums:
        return
    f = case.program.compile()
    args = example_args(case, 0, [first_example(case)])
    real = [j for j in nums if case.program.args[j].dtype == "float64"]
    if not real:
        return
    i = real[0]
    out = np.asarray(flatten(f(*[a.copy() for a in args]))[0][made[1]])
    if not np.all(np.isfinite(out)):
        return

    def h(x: Any) -> Any:
        y = flatten(f(*args[:i], x, *args[i + 1 :]))[0][made[1]]
        return y if out.dtype.kind == "f" else np.real(y)

    x = args[i].copy()
    results = {}
    for name, mode in (("jacfwd", vmapx.jacfwd), ("jacrev", vmapx.jacrev)):
        try:
            results[name] = mode(h)(x)
        except VmapxError as e:
            raise Refusal(f"[jac] {type(e).__name__}: {e}") from e
        except Exception as e:
            results[name] = e
    fwd, rev = results["jacfwd"], results["jacrev"]
    if isinstance(fwd, Exception) and isinstance(rev, Exception):
        return
    if any(not isinstance(r, Exception) and not np.all(np.isfinite(r)) for r in (fwd, rev)):
        return  # a singular point (cbrt at 0, ...): the modes may meet 0 * inf differently
    for name, r in results.items():
        if isinstance(r, Exception):
            raise Mismatch("jac", f"{name} raised {type(r).__name__}", f"{r} (the other works)")
    try:
        assert_same("jac", fwd, rev)
        return
    except Mismatch as e:
        if e.kind != "values":
            raise Mismatch("jac", e.kind, e.detail.replace("the loop gives", "jacrev gives")) from e
    fd = _fd_jacobian(h, x)
    if fd is None:
        return  # not smooth here: the modes may choose different one-sided derivatives
    for name, r in results.items():
        scale = max(1.0, float(np.max(np.abs(fd), initial=0.0)))
        if not np.allclose(r, fd, rtol=1e-4, atol=1e-4 * scale):
            raise Mismatch("jac", "values", f"{name} gives {r!r}, finite differences {fd!r}")
