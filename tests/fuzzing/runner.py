"""Running the fuzzer: seeds to programs to checks, shrinking failures, reproducers."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

import numpy as np

from fuzzing import checks as C
from fuzzing import gradchecks as G
from fuzzing.programs import Program, generate

# programs whose batch of size 0 has no one answer: the branch taken (so the result's
# dtype) or the shape depends on values no example gives
_ZERO_UNDECIDED = {"op:if", "op:for_range", "data_shape", "raises", "draw", "op:cond",
                   "op:fori_loop", "op:while_loop", "op:scan", "op:python_scalar",
                   "data_dtype"}  # fmt: skip


def _no_gen(case: C.Case) -> bool:
    return not case.program.has_gen


@dataclass(frozen=True)
class Check:
    name: str
    fn: Callable[[C.Case], None]
    share: float  # the fraction of programs it runs on
    eligible: Callable[[C.Case], bool] = lambda case: True


def _differentiable(case: C.Case) -> bool:
    return _no_gen(case) and not G.derivatives_unjudgeable(case)


CHECKS = [
    Check("vmap", C.check_vmap, 1.0),
    Check("zero", C.check_zero, 0.3, lambda c: not (c.program.tags & _ZERO_UNDECIDED)),
    Check("chunked", C.check_chunked, 0.4, lambda c: c.size >= 2),
    Check("axis_size", C.check_axis_size, 0.1, _no_gen),
    Check("jit", C.check_jit, 0.3),
    Check("nested", C.check_nested, 0.35),
    Check("same", C.check_same, 1.0, lambda c: c.program.has_gen),
    Check("threads", C.check_threads, 0.08, _no_gen),
    Check("grad", G.check_grad, 0.5, _differentiable),
    Check("vmap_grad", G.check_vmap_grad, 0.35, _differentiable),
    Check("jit_grad", G.check_jit_grad, 0.25, _differentiable),
    Check("grad_of_vmap", G.check_grad_of_vmap, 0.25, _differentiable),
    Check("jac", G.check_jac, 0.3, _differentiable),
]
CHECKS_BY_NAME = {c.name: c for c in CHECKS}
STATS: dict[str, int] = {}  # how many times each check ran


def excluded(program: Program, check: str) -> bool:
    """Whether a known defect (or a draw, where derivatives are checked) rules it out."""
    if program.has_gen and check in C.NO_DRAWS:
        return True
    if any(pair <= program.tags and check in checks for pair, checks in C.KNOWN_DEFECT_PAIRS):
        return True
    return any(
        check in C.KNOWN_DEFECT_TAGS.get(t, ()) or check in C.LIMITS.get(t, ())
        for t in program.tags
    )


@dataclass
class Failure:
    seed: int
    check: str
    error: C.Mismatch
    case: C.Case

    def key(self) -> str:
        """Alike failures share a key (digits and values left out)."""
        detail = re.sub(r"\d+|'.*?'|array\(.*", "#", self.error.detail)[:50]
        return f"{self.error.kind}|{detail}"


def run_check(case: C.Case, check: str) -> None:
    with C.policy():
        CHECKS_BY_NAME[check].fn(case)


def run_seed(seed: int, only: Iterable[str] | None = None) -> tuple[list, list]:
    """Generate the program of `seed`, run its checks: (failures, refusals)."""
    program = generate(seed)
    case = C.make_case(program, seed)
    pick = np.random.default_rng([seed, 9])
    failures, refusals = [], []
    for check in CHECKS:
        share = pick.random()
        if only is not None and check.name not in only:
            continue
        if share >= check.share or excluded(program, check.name):
            continue
        try:
            if not check.eligible(case):
                continue
            STATS[check.name] = STATS.get(check.name, 0) + 1
            run_check(case, check.name)
        except C.Mismatch as e:
            failures.append(Failure(seed, check.name, e, case))
        except C.Refusal as e:
            refusals.append((seed, str(e)))
    return failures, refusals


# ---------------------------------------------------------------- shrinking


def _fails_alike(case: C.Case, check: str, kind: str) -> bool:
    try:
        run_check(case, check)
    except C.Mismatch as e:
        return e.kind == kind
    except Exception:
        return False
    return False


def _drop_unused_args(case: C.Case) -> C.Case | None:
    p = case.program
    used = {n for s in p.stmts for n in s.uses()} | set(p.outs)
    keep = [j for j, a in enumerate(p.args) if a.name in used]
    if len(keep) == len(p.args) or not keep:
        return None
    axes = [case.in_axes[j] for j in keep] + list(case.in_axes[len(p.args) :])
    if all(a is None for a in axes[: len(keep)]):
        return None
    args = tuple(p.args[j] for j in keep)
    return replace(case, program=replace(p, args=args), in_axes=tuple(axes),
                   examples=[[e[j] for j in keep] for e in case.examples])  # fmt: skip


def _candidates(case: C.Case) -> list[C.Case]:
    p = case.program
    out = []
    for name in p.names():
        smaller = p.with_outputs((name,))
        if len(smaller.stmts) < len(p.stmts) or (
            len(smaller.stmts) == len(p.stmts) and len(p.outs) > 1
        ):
            out.append(replace(case, program=smaller))
    out.sort(key=lambda c: len(c.program.stmts))
    dropped = _drop_unused_args(case)
    if dropped is not None:
        out.append(dropped)
    for n in (1, 2):
        if case.size > n:
            out.append(replace(case, examples=case.examples[:n]))
    simple = tuple(None if a is None else 0 for a in case.in_axes)
    if simple != case.in_axes:
        out.append(replace(case, in_axes=simple))
    if case.out_u != (0.5, 0.5):
        out.append(replace(case, out_u=(0.5, 0.5)))
    return out


def shrink(failure: Failure, budget_s: float = 20.0) -> Failure:
    """A smaller case that fails the same check the same way."""
    case, kind = failure.case, failure.error.kind
    deadline = time.monotonic() + budget_s
    improved = True
    while improved and time.monotonic() < deadline:
        improved = False
        for cand in _candidates(case):
            if time.monotonic() > deadline:
                break
            if _fails_alike(cand, failure.check, kind):
                case, improved = cand, True
                break
    try:
        run_check(case, failure.check)
        error = failure.error
    except C.Mismatch as e:
        error = e
    return Failure(failure.seed, failure.check, error, case)


# ---------------------------------------------------------------- reproducers


def literal(a: np.ndarray) -> str:
    if a.size == 0:
        return f"np.zeros({a.shape}, dtype='{a.dtype}')"
    return f"np.array({a.tolist()!r}, dtype='{a.dtype}')"


_LOOP = """
def loop(f, args, in_axes, size, *extra):  # the per-example loop vmap must equal
    outs = [f(*[a if ax is None else np.take(a, i, axis=ax) for a, ax in zip(args, in_axes)],
              *extra) for i in range(size)]
    if isinstance(outs[0], tuple):
        return tuple(np.stack(col) for col in zip(*outs))
    return np.stack(outs)
"""


def _loss_lines(case: C.Case) -> list[str]:
    """The lines that define `loss` (see `gradchecks.loss_of`) for a reproducer."""
    made = G.loss_of(case)
    if made is None:
        return []
    args = C.example_args(case, 0, [C.first_example(case)])
    out = C.flatten(case.program.compile()(*[a.copy() for a in args]))[0][made[1]]
    w = np.random.default_rng([case.seed, 5]).standard_normal(np.shape(out))
    pick = "" if len(case.program.outs) == 1 else f"[{made[1]}]"
    return [f"w = {literal(np.asarray(w))}  # (complex outputs: see gradchecks)",
            f"loss = lambda *a: np.sum(np.real(f(*a){pick} * w))",
            f"grad_loss = vmapx.grad(loss, argnums={G.diff_argnums(case)})"]  # fmt: skip


def _nested_lines(case: C.Case, gen: str, rnd: str) -> list[str]:
    inner, outer, batched, n_out, n_in = C.nested_data(case)
    tail = "None" if case.program.has_gen else ""
    axes_in = "".join(f"{a}, " for a in inner) + tail
    axes_out = "".join(f"{a}, " for a in outer) + tail
    return [f"args = [{', '.join(literal(a) for a in batched)}]",
            f"inner = vmapx.vmap(f, in_axes=({axes_in}){rnd})",
            f"got = vmapx.vmap(inner, in_axes=({axes_out}){rnd})(*args{gen})",
            f"# the loop of loops over outer size {n_out}, inner size {n_in}"]  # fmt: skip


def _batched_lines(case: C.Case, check: str, gen: str, rnd: str) -> list[str]:
    p = case.program
    args = C.batch(case, [] if check == "zero" else None)
    lines = [f"args = [{', '.join(literal(a) for a in args)}]",
             f"in_axes = {case.in_axes[: len(p.args)]}"]  # fmt: skip
    if check == "zero":
        return [*lines, "got = vmapx.vmap(f, in_axes=in_axes)(*args)",
                "# want: shape (0, *one example's shape), one example's dtype"]  # fmt: skip
    opts = {"same": ", randomness='same'"}.get(check, rnd)
    if check == "chunked":
        opts = f", chunk_size={1 + case.seed % max(case.size - 1, 1)}{rnd}"
    fn = "f"
    if check == "grad_of_vmap":
        lines += _loss_lines(case)
        axes = f"(*in_axes{', None' if p.has_gen else ''},)"
        return lines + [
            "total = lambda *a: np.sum(vmapx.vmap(loss, in_axes=in_axes)(*a))",
            f"got = vmapx.grad(total, argnums={G.diff_argnums(case)})(*args)",
            f"# want: grad_loss of each example, stacked on in_axes {axes} (summed if None)",
        ]
    if check in ("vmap_grad", "jit_grad"):
        lines += _loss_lines(case)
        fn = "grad_loss"
    gaxes = ", None" if p.has_gen else ""
    call = f"vmapx.vmap({fn}, in_axes=(*in_axes{gaxes},){opts})"
    if check in ("jit", "jit_grad"):
        call = f"vmapx.jit({call})"
    return lines + [_LOOP, f"got = {call}(*args{gen})",
                    f"want = loop({fn}, args, in_axes, {case.size}{gen})"]  # fmt: skip


def reproducer(failure: Failure) -> str:
    """Standalone Python source that shows the failure."""
    case, check = failure.case, failure.check
    p = case.program
    lines = ["import numpy as np", "import vmapx", "", p.source(), ""]
    gen = f", np.random.default_rng({case.gen_seed})" if p.has_gen else ""
    rnd = ", randomness='different'" if p.has_gen else ""
    if check == "nested":
        lines += _nested_lines(case, gen, rnd)
    elif check in ("grad", "jac"):
        args = C.example_args(case, 0, [C.first_example(case)])
        lines += [f"args = [{', '.join(literal(a) for a in args)}]", *_loss_lines(case),
                  "print(grad_loss(*args))",
                  "# compare with central differences, or jacfwd with jacrev"]  # fmt: skip
    else:
        lines += _batched_lines(case, check, gen, rnd)
    lines += [f"# {check}: {failure.error.kind}: {failure.error.detail[:600]}"]
    return "\n".join(lines)


def report(failure: Failure) -> str:
    return (f"seed {failure.seed}, check {failure.check}: {failure.error}\n"
            f"--- reproducer ---\n{reproducer(failure)}\n")  # fmt: skip


def run_seeds(seeds: Iterable[int], shrink_failures: bool = True) -> tuple[list, list, int]:
    """(failures, refusals, programs run) over `seeds`."""
    failures, refusals, n = [], [], 0
    for seed in seeds:
        f, r = run_seed(seed)
        failures += [shrink(x) if shrink_failures else x for x in f]
        refusals += r
        n += 1
    return failures, refusals, n
