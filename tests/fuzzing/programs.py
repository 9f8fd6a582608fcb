"""Random per-example programs, printable as plain Python source.

A program is a function of per-example arguments `x0, x1, ...` (and a generator `g` when
it draws random numbers) made of statements `v0 = ...`, `v1 = ...` from the op table, and
returns one variable or a tuple of two. Each statement is proposed by the op table and
kept only if it runs on one example (except, rarely, a statement that raises: then the
loop raises, and so must vmap).
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

import vmapx
from fuzzing.ops import OPS, WEIGHTS, Ctx, Skip, form_tags, kind

_NAME = re.compile(r"\b[xv]\d+\b")
# dtype of an argument: (name, weight)
_DTYPES = [("float64", 45), ("float32", 8), ("int64", 14), ("int32", 4), ("bool", 10),
           ("complex128", 12), ("complex64", 4), ("uint8", 3)]  # fmt: skip
MAX_SIZE = 400  # values larger than this are not kept (keeps programs fast)


@dataclass(frozen=True)
class ArgSpec:
    name: str
    shape: tuple[int, ...]
    dtype: str


@dataclass(frozen=True)
class Stmt:
    target: str
    lines: tuple[str, ...]
    tags: frozenset[str] = frozenset()

    def uses(self) -> set[str]:
        return {n for line in self.lines for n in _NAME.findall(line)} - {self.target}


@dataclass(frozen=True)
class Program:
    args: tuple[ArgSpec, ...]
    has_gen: bool
    stmts: tuple[Stmt, ...]
    outs: tuple[str, ...]
    tags: frozenset[str] = field(default=frozenset())

    @property
    def n_args(self) -> int:
        """Positional arguments, the generator included."""
        return len(self.args) + self.has_gen

    def source(self, name: str = "f") -> str:
        params = [a.name for a in self.args] + (["g"] if self.has_gen else [])
        body = [f"    {line}" for s in self.stmts for line in s.lines]
        ret = self.outs[0] if len(self.outs) == 1 else f"({', '.join(self.outs)})"
        return "\n".join([f"def {name}({', '.join(params)}):", *body, f"    return {ret}"])

    def compile(self) -> Callable:
        namespace = {"np": np, "vmapx": vmapx}
        exec(compile(self.source(), "<fuzz program>", "exec"), namespace)
        return namespace["f"]

    def with_outputs(self, outs: tuple[str, ...]) -> Program:
        """The program returning `outs`, without the statements they do not need."""
        needed, kept = set(outs), []
        for s in reversed(self.stmts):
            if s.target in needed:
                kept.append(s)
                needed |= s.uses()
        stmts = tuple(reversed(kept))
        tags = frozenset().union(*(s.tags for s in stmts)) if stmts else frozenset()
        return replace(self, stmts=stmts, outs=outs, tags=tags)

    def names(self) -> list[str]:
        return [a.name for a in self.args] + [s.target for s in self.stmts]


def random_value(rng: np.random.Generator, shape: tuple, dtype: str) -> np.ndarray:
    """Values of one example: floats in [-2, 2], small ints, random bools."""
    dt = np.dtype(dtype)
    if dt == np.bool_:
        v = rng.random(shape) < 0.5
    elif dt.kind in "iu":
        v = rng.integers(0 if dt.kind == "u" else -3, 6, size=shape)
    elif dt.kind == "c":
        v = rng.uniform(-2, 2, shape) + 1j * rng.uniform(-2, 2, shape)
    else:
        v = rng.uniform(-2, 2, shape)
    return np.asarray(v, dtype=dt)


def _random_shape(rng: np.random.Generator) -> tuple[int, ...]:
    nd = int(rng.choice(4, p=[0.15, 0.4, 0.35, 0.1]))
    if nd == 2 and rng.random() < 0.3:
        n = int(rng.integers(1, 4))
        return (n, n)
    dims = rng.choice([0, 1, 2, 3, 4], size=nd, p=[0.04, 0.16, 0.3, 0.3, 0.2])
    return tuple(int(d) for d in dims)


def _random_args(rng: np.random.Generator) -> tuple[ArgSpec, ...]:
    names, weights = zip(*_DTYPES, strict=True)
    p = np.array(weights, dtype=float) / sum(weights)
    n = int(rng.choice([1, 2, 3], p=[0.35, 0.45, 0.2]))
    return tuple(
        ArgSpec(f"x{i}", _random_shape(rng), str(rng.choice(names, p=p))) for i in range(n)
    )


def run_lines(lines: list[str], env: dict) -> None:
    """Run statements on plain values (`env` is updated), warnings silenced."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec("\n".join(lines), {"np": np, "vmapx": vmapx}, env)


def _acceptable(v: object) -> bool:
    return kind(v) != "-" and np.size(v) <= MAX_SIZE and np.ndim(v) <= 4


_DRAW = next(i for i, o in enumerate(OPS) if o.name == "draw")


def _propose(rng: np.random.Generator, env: dict, has_gen: bool, target: str) -> Stmt | None:
    # a program with a generator draws often: a third of its statements try a draw
    o = OPS[_DRAW if has_gen and rng.random() < 0.3 else int(rng.choice(len(OPS), p=WEIGHTS))]
    c = Ctx(rng, {n: v for n, v in env.items() if n != "g"}, has_gen)
    try:
        made = o.fn(c)
    except Skip:
        return None
    lines = [f"{target} = {made}"] if isinstance(made, str) else [x.format(t=target) for x in made]
    return Stmt(target, tuple(lines), frozenset(c.tags | form_tags(lines) | {f"op:{o.name}"}))


def generate(seed: int, n_stmts: int | None = None) -> Program:
    """A random program from `seed` (the same seed gives the same program)."""
    rng = np.random.default_rng(seed)
    args = _random_args(rng)
    has_gen = bool(rng.random() < 0.15)
    env: dict = {a.name: random_value(rng, a.shape, a.dtype) for a in args}
    if has_gen:
        env["g"] = np.random.default_rng(0)
    stmts: list[Stmt] = []
    n_stmts = int(rng.integers(1, 8)) if n_stmts is None else n_stmts
    for k in range(n_stmts):
        target = f"v{k}"
        # at most two draws (the second tagged multi_draw: vmap's order is round by round)
        drawn = sum("draw" in s.tags for s in stmts)
        for _ in range(40):
            stmt = _propose(rng, env, has_gen and drawn < 2, target)
            if stmt is not None and drawn and "draw" in stmt.tags:
                stmt = replace(stmt, tags=stmt.tags | {"multi_draw"})
            if stmt is None:
                continue
            trial = dict(env)
            try:
                run_lines(list(stmt.lines), trial)
            except Exception:
                if rng.random() < 0.03:  # keep one that raises: the loop raises, vmap must too
                    stmts.append(replace(stmt, tags=stmt.tags | {"raises"}))
                    break
                continue
            if target in trial and _acceptable(trial[target]):
                env = {n: v for n, v in trial.items() if n == "g" or _NAME.fullmatch(n)}
                stmts.append(stmt)
                break
        if stmts and "raises" in stmts[-1].tags:
            break
    names = [a.name for a in args] + [s.target for s in stmts]
    outs = (names[-1],)
    if len(names) > 1 and rng.random() < 0.25:
        outs = (*outs, names[int(rng.integers(len(names) - 1))])
    tags = frozenset().union(*(s.tags for s in stmts)) if stmts else frozenset()
    return Program(args, has_gen, tuple(stmts), outs, tags)
