"""The op table: each entry writes one statement of a random per-example program.

An entry is a function of a `Ctx` (the variables so far, with their values on one example,
and a random generator) that returns the statement's right-hand side (an expression) or
its lines (with `{t}` for the variable the statement defines). It raises `Skip` when no
variable fits. Statements are checked by running them on the example, so an entry may
propose something that fails: the generator then tries another.

Tags mark constructs that some checks must leave out. `KNOWN_DEFECT_TAGS` (below) are the
constructs of defects already reported; they are excluded from the checks named there
until the defect is fixed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from np_compat import NUMPY2


class Skip(Exception):
    """No variable fits this op: try another."""


def kind(v: Any) -> str:
    """`b`, `i`, `f` or `c` (`u` counts as `i`), or `-` for what is not an array."""
    if not isinstance(v, np.ndarray | np.generic | bool | int | float | complex):
        return "-"
    k = np.asarray(v).dtype.kind
    return {"u": "i"}.get(k, k) if k in "biufc" else "-"


class Ctx:
    """What an op sees: the variables (name -> value on one example) and the rng."""

    def __init__(self, rng: np.random.Generator, env: dict, has_gen: bool) -> None:
        self.rng = rng
        self.env = env
        self.has_gen = has_gen
        self.tags: set[str] = set()

    def tag(self, *names: str) -> None:
        self.tags.update(names)

    def pick(
        self, kinds: str = "bifc", lo: int = 0, hi: int = 9, pred: Callable | None = None
    ) -> str:
        names = [
            n
            for n, v in self.env.items()
            if kind(v) in kinds and lo <= np.ndim(v) <= hi and (pred is None or pred(np.asarray(v)))
        ]
        if not names:
            raise Skip
        # later variables are more interesting (they depend on more of the program)
        w = np.arange(1, len(names) + 1, dtype=float)
        return names[self.rng.choice(len(names), p=w / w.sum())]

    def val(self, name: str) -> np.ndarray:
        return np.asarray(self.env[name])

    def choice(self, seq: Any) -> Any:
        return seq[int(self.rng.integers(len(seq)))]

    def coin(self, p: float = 0.5) -> bool:
        return bool(self.rng.random() < p)

    def integer(self, lo: int, hi: int) -> int:
        """An int in [lo, hi]."""
        return int(self.rng.integers(lo, hi + 1))

    def axis(self, name: str, none: bool = True) -> str:
        """An axis of `name` (possibly negative), or `None`."""
        nd = np.ndim(self.env[name])
        if nd == 0 or (none and self.coin(0.3)):
            if not none:
                raise Skip
            return "None"
        ax = self.integer(0, nd - 1)
        return str(ax - nd if self.coin(0.3) else ax)

    def other(self, name: str, kinds: str = "bifc") -> str:
        """A second operand that broadcasts with `name`: a variable or a literal."""
        shape = np.shape(self.env[name])
        if self.coin(0.6):
            try:
                return self.pick(kinds, pred=lambda v: _broadcasts(v.shape, shape))
            except Skip:
                pass
        return literal(self, kinds)


def _broadcasts(a: tuple, b: tuple) -> bool:
    try:
        np.broadcast_shapes(a, b)
    except ValueError:
        return False
    return True


def literal(c: Ctx, kinds: str = "bifc") -> str:
    """A Python scalar, a NumPy scalar or a small constant array."""
    options = {
        "b": ["True", "False"],
        "i": ["2", "-1", "3", "0", "np.int32(2)", "np.int64(-3)", "np.array([1, 2])"],
        "f": ["0.5", "-1.5", "2.0", "np.float32(0.25)", "np.array(1.5)", "np.array([0.5, 2.0])"],
        "c": ["1j", "(0.5-1j)", "np.complex64(1+2j)"],
    }
    return c.choice([x for k in kinds for x in options.get(k, [])] or ["1.0"])


# tags by what a statement's text holds (the checks some of them rule out: see
# `KNOWN_DEFECT_TAGS` and `LIMITS` in `fuzzing/checks.py`)
FORM_TAGS = [(re.compile(pattern), tag) for pattern, tag in [
    (r"eigvalsh|pinv", "eig_pinv"), (r"eigh\(.*\)\[1\]", "eigvec"),
    (r"\bnp\.(cov|corrcoef|std|var|nanstd)\(|\.std\(", "std"),
    (r"polyval", "polyval"), (r"linalg\.qr", "qr"), (r"svd\([xv]\d+\)\[0\]", "svd_u"),
    (r"nan_to_num", "nan_to_num"), (r"linspace", "linspace"), (r"modf", "mod"),
    (r"real_if_close", "data_dtype"), (r"tensordot|einsum", "contraction"),
    (r"heaviside", "heaviside"), (r"np\.outer|np\.kron|\.outer\(", "outer_product"),
    (r"arctan2|copysign|signbit|np\.angle", "sign_of_zero"),
    (r"allclose|array_equal", "python_bool"),
]]  # fmt: skip


def form_tags(lines: tuple[str, ...]) -> set[str]:
    text = "\n".join(lines)
    return {tag for pattern, tag in FORM_TAGS if pattern.search(text)}


@dataclass(frozen=True)
class Op:
    name: str
    family: str
    fn: Callable[[Ctx], str | list[str]]
    weight: float = 1.0


OPS: list[Op] = []


def op(family: str, weight: float = 1.0) -> Callable:
    def register(fn: Callable) -> Callable:
        OPS.append(Op(fn.__name__.removeprefix("op_"), family, fn, weight))
        return fn

    return register


def _register(name: str, family: str, fn: Callable, weight: float = 1.0) -> None:
    OPS.append(Op(name, family, fn, weight))


# ---------------------------------------------------------------- elementwise (ufuncs)

# (function, the dtype kinds it takes, how its argument is made valid)
_UNARY = [
    ("np.sin", "bifc", "{}"), ("np.cos", "ifc", "{}"), ("np.tanh", "fc", "{}"),
    ("np.exp", "ifc", "{}"), ("np.expm1", "f", "{}"), ("np.arctan", "if", "{}"),
    ("np.sinh", "fc", "{}"), ("np.cosh", "f", "{}"), ("np.log1p", "if", "np.abs({})"),
    ("np.sqrt", "ifc", "np.abs({})"), ("np.log", "fc", "np.abs({}) + 1"),
    ("np.log2", "f", "np.abs({}) + 0.5"), ("np.log10", "if", "np.abs({}) + 1"),
    ("np.arcsin", "f", "np.clip({}, -0.9, 0.9)"), ("np.arccos", "f", "np.clip({}, -0.9, 0.9)"),
    ("np.arctanh", "f", "np.clip({}, -0.9, 0.9)"), ("np.arcsinh", "fc", "{}"),
    ("np.cbrt", "if", "{}"), ("np.exp2", "if", "{}"), ("np.square", "bifc", "{}"),
    ("np.abs", "bifc", "{}"), ("np.negative", "ifc", "{}"), ("np.positive", "ifc", "{}"),
    ("np.sign", "ifc", "{}"), ("np.conj", "bifc", "{}"), ("np.real", "bifc", "{}"),
    ("np.imag", "bifc", "{}"), ("np.angle", "ifc", "{}"), ("np.floor", "bif", "{}"),
    ("np.ceil", "if", "{}"), ("np.rint", "ifc", "{}"), ("np.trunc", "if", "{}"),
    ("np.fix", "if", "{}"), ("np.around", "ifc", "{}"), ("np.isnan", "bifc", "{}"),
    ("np.isfinite", "ifc", "{}"), ("np.isinf", "if", "{}"), ("np.signbit", "if", "{}"),
    ("np.logical_not", "bifc", "{}"), ("np.invert", "bi", "{}"), ("np.fabs", "if", "{}"),
    ("np.reciprocal", "fc", "{} * {} + 1"), ("np.deg2rad", "if", "{}"),
    ("np.rad2deg", "f", "{}"), ("np.sinc", "fc", "{}"), ("np.i0", "f", "{}"),
    ("np.spacing", "f", "{}"), ("np.nan_to_num", "fc", "{}"), ("np.real_if_close", "c", "{}"),
    ("np.tan", "f", "np.clip({}, -1.2, 1.2)"), ("np.arccosh", "f", "np.abs({}) + 1"),
    ("np.logical_not", "b", "{}"), ("np.frexp", "f", "{}"), ("np.modf", "f", "{}"),
]  # fmt: skip


def _unary(fn: str, kinds: str, arg: str) -> Callable:
    def make(c: Ctx) -> str:
        x = c.pick(kinds)
        if fn == "np.sign" and kind(c.env[x]) == "c":
            c.tag("complex_sign")
        call = f"{fn}({arg.format(x, x)})"
        return f"{call}[{c.integer(0, 1)}]" if fn in ("np.frexp", "np.modf") else call

    return make


for _fn, _kinds, _arg in _UNARY:
    _register(_fn.removeprefix("np."), "ufunc", _unary(_fn, _kinds, _arg), 0.5)

_BINARY = [
    ("np.add", "bifc"), ("np.subtract", "ifc"), ("np.multiply", "bifc"),
    ("np.true_divide", "ifc"), ("np.floor_divide", "if"), ("np.remainder", "if"),
    ("np.fmod", "if"), ("np.maximum", "bif"), ("np.minimum", "bif"), ("np.fmax", "if"),
    ("np.fmin", "if"), ("np.arctan2", "if"), ("np.hypot", "if"), ("np.copysign", "if"),
    ("np.logaddexp", "f"), ("np.logaddexp2", "f"), ("np.greater", "bif"),
    ("np.less_equal", "bif"), ("np.equal", "bifc"), ("np.not_equal", "bifc"),
    ("np.logical_and", "bifc"), ("np.logical_or", "bif"), ("np.logical_xor", "bi"),
    ("np.bitwise_and", "bi"), ("np.bitwise_or", "bi"), ("np.bitwise_xor", "bi"),
    ("np.gcd", "i"), ("np.lcm", "i"), ("np.heaviside", "f"), ("np.nextafter", "f"),
    ("np.float_power", "f"), ("np.left_shift", "i"),
]  # fmt: skip


# their derivatives hold floor(x / y), which turns rounding noise into large values
_MOD = ("np.floor_divide", "np.remainder", "np.fmod", "//", "%")


def _binary(fn: str, kinds: str) -> Callable:
    def make(c: Ctx) -> str:
        x = c.pick(kinds)
        y = c.other(x, kinds)
        if fn in _MOD:
            c.tag("mod")
        if fn in ("np.float_power",):
            return f"{fn}(np.abs({x}) + 0.5, {y})"
        if fn == "np.left_shift":
            return f"{fn}({x}, np.abs({y}) % 4)"
        return f"{fn}({y}, {x})" if c.coin(0.3) else f"{fn}({x}, {y})"

    return make


for _fn, _kinds in _BINARY:
    _register(_fn.removeprefix("np."), "ufunc", _binary(_fn, _kinds), 0.5)

_OPERATORS = [("+", "bifc"), ("-", "ifc"), ("*", "bifc"), ("/", "ifc"), ("//", "if"),
              ("%", "if"), ("**", "f"), (">", "bif"), ("<=", "bif"), ("==", "bifc"),
              ("&", "bi"), ("|", "bi"), ("^", "bi")]  # fmt: skip


def _operator(sym: str, kinds: str) -> Callable:
    def make(c: Ctx) -> str:
        x = c.pick(kinds)
        if sym == "**":
            return f"np.abs({x}) ** {c.choice(['2', '0.5', '3', c.other(x, 'f')])}"
        y = c.other(x, kinds)
        if sym in _MOD:
            c.tag("mod")
        # (a Python complex left of an np.float64 is Python's arithmetic: a complex with
        # no array methods, which vmap's traced value has; not generated)
        python_complex = y in ("1j", "(0.5-1j)")
        return f"{y} {sym} {x}" if c.coin(0.3) and not python_complex else f"{x} {sym} {y}"

    return make


for _sym, _kinds in _OPERATORS:
    _register(f"operator{_sym}", "operator", _operator(_sym, _kinds), 1.0)


@op("operator")
def op_unary_operator(c: Ctx) -> str:
    return c.choice([f"-{c.pick('ifc')}", f"abs({c.pick('bifc')})", f"~{c.pick('bi')}"])


@op("ufunc")
def op_ufunc_methods(c: Ctx) -> str:
    x = c.pick("if", lo=1)
    m = c.choice(["np.add.reduce", "np.multiply.accumulate", "np.maximum.reduce",
                  "np.add.accumulate", "np.minimum.accumulate"])  # fmt: skip
    return f"{m}({x}, axis={c.axis(x, none=False)})"


@op("ufunc")
def op_ufunc_outer(c: Ctx) -> str:
    x = c.pick("if", hi=2)
    y = c.pick("if", hi=1)
    return f"np.{c.choice(['multiply', 'add', 'subtract'])}.outer({x}, {y})"


@op("ufunc")
def op_clip(c: Ctx) -> str:
    x = c.pick("if")
    return c.choice([f"np.clip({x}, -0.5, 1.0)", f"{x}.clip(0, None)",
                     f"np.clip({x}, {c.other(x, 'if')}, 1.5)"])  # fmt: skip


# ---------------------------------------------------------------- reductions and scans

_REDUCTIONS = [
    ("sum", "bifc", True), ("prod", "ifc", True), ("mean", "bifc", True), ("max", "bif", True),
    ("min", "bif", True), ("argmax", "bif", False), ("argmin", "if", False),
    ("std", "ifc", True), ("var", "fc", True), ("any", "bifc", True), ("all", "bif", True),
    ("ptp", "if", True), ("median", "if", True), ("nansum", "ifc", True),
    ("nanmax", "if", True), ("nanmean", "f", True), ("count_nonzero", "bifc", False),
    ("average", "ifc", False), ("amax", "if", True), ("nanmin", "f", True),
    ("nanstd", "f", True), ("nanprod", "f", True),
]  # fmt: skip


def _reduction(name: str, kinds: str, keepdims: bool) -> Callable:
    def make(c: Ctx) -> str:
        x = c.pick(kinds)
        c.tag("reduction")
        nd = np.ndim(c.env[x])
        ax = c.axis(x)
        if nd >= 2 and name not in ("argmax", "argmin", "median") and c.coin(0.2):
            ax = str(tuple(sorted(c.rng.choice(nd, 2, replace=False).tolist())))
        kw = f", axis={ax}" if ax != "None" or c.coin(0.3) else ""
        if keepdims and c.coin(0.25):
            kw += ", keepdims=True"
        if name in ("mean", "sum", "std") and c.coin(0.2):
            return f"{x}.{name}({kw.removeprefix(', ')})"
        return f"np.{name}({x}{kw})"

    return make


for _name, _kinds, _keep in _REDUCTIONS:
    _register(_name, "reduction", _reduction(_name, _kinds, _keep), 0.6)


@op("reduction")
def op_running(c: Ctx) -> str:
    x = c.pick("bifc", lo=1)
    fn = c.choice(["np.cumsum", "np.cumprod", "np.diff", "np.nancumsum", "np.ediff1d"])
    if fn == "np.ediff1d":
        return f"{fn}({x})"
    return f"{fn}({x}, axis={c.axis(x, none=False)})"


@op("reduction")
def op_quantile(c: Ctx) -> str:
    x = c.pick("if", lo=1)
    q = c.choice(["0.3", "[0.25, 0.75]", "50"])
    fn = "np.percentile" if q == "50" else "np.quantile"
    return f"{fn}({x}, {q}, axis={c.axis(x)})"


@op("reduction")
def op_norm(c: Ctx) -> str:
    x = c.pick("ifc", lo=1, hi=2)
    ords = ["None", "1", "2", "np.inf"] if np.ndim(c.env[x]) == 1 else ["None", "'fro'", "1"]
    return f"np.linalg.norm({x}, {c.choice(ords)})"


@op("reduction")
def op_logsumexp(c: Ctx) -> str:
    x = c.pick("f", lo=1)
    ax = c.axis(x, none=False)
    return f"np.log(np.sum(np.exp({x} - np.max({x})), axis={ax}))"


@op("reduction")
def op_cumulative(c: Ctx) -> str:
    if not NUMPY2:
        raise Skip
    x = c.pick("if", lo=1)
    fn = c.choice(["np.cumulative_sum", "np.cumulative_prod"])
    return f"{fn}({x}, axis={c.axis(x, none=False)}, include_initial={c.coin()})"


# ---------------------------------------------------------------- shapes


def _factor_shape(c: Ctx, size: int) -> tuple:
    dims = []
    while size > 1 and len(dims) < 3:
        divisors = [d for d in range(2, size + 1) if size % d == 0]
        d = c.choice(divisors)
        dims.append(d)
        size //= d
    if size == 0:
        dims.append(0)
    c.rng.shuffle(dims)
    return tuple(dims)


@op("shape", 1.5)
def op_reshape(c: Ctx) -> str:
    x = c.pick()
    v = c.val(x)
    shape = _factor_shape(c, v.size)
    if shape and c.coin(0.3):
        shape = (*shape[:-1], -1)
    if c.coin(0.3):
        return f"{x}.reshape({', '.join(map(str, shape)) or '()'})"
    return f"np.reshape({x}, {shape})"


@op("shape")
def op_ravel(c: Ctx) -> str:
    x = c.pick()
    return c.choice([f"np.ravel({x})", f"{x}.ravel()", f"{x}.flatten()", f"{x}.reshape(-1)"])


@op("shape", 1.5)
def op_transpose(c: Ctx) -> str:
    x = c.pick(lo=2)
    nd = np.ndim(c.env[x])
    i, j = (int(a) for a in c.rng.choice(nd, 2, replace=False))
    perm = tuple(int(p) for p in c.rng.permutation(nd))
    return c.choice([f"{x}.T", f"np.transpose({x}, {perm})", f"np.swapaxes({x}, {i}, {j})",
                     f"np.moveaxis({x}, {i}, {j - nd})", f"{x}.swapaxes({i}, {j})",
                     f"np.moveaxis({x}, ({i}, {j}), (0, -1))"])  # fmt: skip


@op("shape")
def op_expand(c: Ctx) -> str:
    x = c.pick()
    nd = np.ndim(c.env[x])
    return c.choice([f"np.expand_dims({x}, {c.integer(-nd - 1, nd)})", f"{x}[None]",
                     f"{x}[..., None]", f"np.atleast_2d({x})", f"np.atleast_3d({x})",
                     f"np.atleast_1d({x})"])  # fmt: skip


@op("shape")
def op_squeeze(c: Ctx) -> str:
    x = c.pick(lo=1, pred=lambda v: 1 in v.shape)
    ax = list(c.val(x).shape).index(1)
    return c.choice([f"np.squeeze({x})", f"np.squeeze({x}, axis={ax})", f"{x}.squeeze()"])


@op("shape")
def op_flip_roll(c: Ctx) -> str:
    x = c.pick(lo=1)
    ax = c.axis(x)
    return c.choice([f"np.flip({x}, axis={ax})", f"np.roll({x}, {c.integer(-3, 3)}, axis={ax})",
                     f"{x}[::-1]", f"np.roll({x}, {c.integer(1, 2)})"])  # fmt: skip


@op("shape")
def op_tile_repeat(c: Ctx) -> str:
    x = c.pick(hi=3)
    ax = c.axis(x)
    reps = c.choice(["2", "(2, 1)", "(1, 3)"])
    return c.choice([f"np.tile({x}, {reps})", f"np.repeat({x}, {c.integer(0, 3)}, axis={ax})",
                     f"np.repeat({x}, 2)"])  # fmt: skip


@op("shape")
def op_broadcast_to(c: Ctx) -> str:
    x = c.pick(hi=3)
    shape = c.val(x).shape
    if shape and shape[0] == 1 and c.coin():
        shape = (3, *shape[1:])
    new = (c.integer(0, 3), *shape)
    return c.choice([f"np.broadcast_to({x}, {new})", f"{x} + np.zeros({new}, {x}.dtype)"])


@op("shape")
def op_matrix_shape(c: Ctx) -> str:
    x = c.pick(lo=2)
    return c.choice([f"np.rot90({x})", f"np.diagonal({x})", f"np.trace({x})", f"np.triu({x})",
                     f"np.tril({x}, -1)", f"np.fliplr({x})", f"{x}.diagonal(1)",
                     f"np.diagonal({x}, 0, -1, -2)"])  # fmt: skip


@op("shape")
def op_diag(c: Ctx) -> str:
    x = c.pick(lo=1, hi=2)
    return f"np.diag({x})"


@op("shape")
def op_pad(c: Ctx) -> str:
    x = c.pick(lo=1, hi=3)
    mode = c.choice(["", ", mode='edge'", ", constant_values=7"])
    if mode == ", mode='edge'" and 0 in c.val(x).shape:
        raise Skip
    return f"np.pad({x}, {c.choice(['1', '(0, 2)'])}{mode})"


# ---------------------------------------------------------------- joins and splits


def _same_shape(c: Ctx, x: str, kinds: str = "bifc") -> str:
    shape = c.val(x).shape
    try:
        return c.pick(kinds, pred=lambda v: v.shape == shape)
    except Skip:
        return f"{x} * 2"


@op("join", 1.5)
def op_concatenate(c: Ctx) -> str:
    x = c.pick(lo=1)
    y = _same_shape(c, x)
    ax = c.axis(x, none=False)
    return c.choice([f"np.concatenate([{x}, {y}], axis={ax})", f"np.concatenate(({x}, {y}))",
                     f"np.hstack([{x}, {y}])", f"np.vstack([{x}, {y}])",
                     f"np.append({x}, {y}, axis={ax})", f"np.column_stack([{x}, {y}])",
                     f"np.dstack([{x}, {y}])", f"np.append({x}, {y})"])  # fmt: skip


@op("join")
def op_stack(c: Ctx) -> str:
    x = c.pick()
    y = _same_shape(c, x)
    nd = np.ndim(c.env[x])
    if c.coin(0.1):
        return f"np.array([{x}, {y}])"  # the documented per-example loop
    return c.choice([f"np.stack([{x}, {y}])", f"np.stack(({x}, {y}, {x}), axis={-nd - 1})",
                     f"np.stack([{y}, {x}], axis={nd})"])  # fmt: skip


@op("join", 1.5)
def op_where(c: Ctx) -> str:
    x = c.pick()
    y = c.other(x)
    cond = c.choice([f"{x} > 0", f"np.abs({x}) < 1", f"{c.pick('b')}"])
    if c.coin(0.2):
        c.tag("data_shape")
        return f"np.where({x} > 0)[0]"
    return f"np.where({cond}, {x}, {y})"


@op("join")
def op_select(c: Ctx) -> str:
    x = c.pick("if")
    return f"np.select([{x} > 1, {x} < 0], [{x}, -{x}], default=0.5)"


@op("join")
def op_split(c: Ctx) -> str:
    x = c.pick(lo=1)
    ax = c.axis(x, none=False)
    n = c.val(x).shape[int(ax)]
    if n >= 2 and n % 2 == 0 and c.coin():
        return f"np.split({x}, 2, axis={ax})[{c.integer(0, 1)}]"
    return f"np.array_split({x}, 3, axis={ax})[{c.integer(0, 2)}]"


# ---------------------------------------------------------------- contractions


def _matching(c: Ctx, x: str, dim: int, lo: int = 1, kinds: str = "ifc") -> str:
    """A variable whose first axis (after `lo`-1 leading ones) has size `dim`."""
    return c.pick(kinds, lo=lo, hi=2, pred=lambda v: v.shape[0] == dim)


@op("contraction", 1.5)
def op_matmul(c: Ctx) -> str:
    x = c.pick("ifc", lo=1, hi=3)
    n = c.val(x).shape[-1]
    try:
        y = _matching(c, x, n)
    except Skip:
        y = f"np.ones(({n}, 2))"
    fn = c.choice(["{} @ {}", "np.dot({}, {})", "np.matmul({}, {})"])
    if np.ndim(c.env[x]) > 2 and "dot" in fn:
        fn = "{} @ {}"
    return fn.format(x, y)


@op("contraction")
def op_vector_products(c: Ctx) -> str:
    x = c.pick("ifc", lo=1, hi=2)
    y = c.pick("ifc", lo=1, hi=2)
    return c.choice([f"np.inner({x}, {x})", f"np.outer({x}, {y})", f"np.vdot({x}, {x})",
                     f"np.kron({x}, {y})", f"np.tensordot({x}, {x}, 0)",
                     f"np.inner({x}, {y})"])  # fmt: skip


@op("contraction")
def op_cross(c: Ctx) -> str:
    x = c.pick("if", lo=1, hi=2, pred=lambda v: v.shape[-1] in (2, 3))
    if c.val(x).shape[-1] == 2:
        return f"np.cross(np.append({x}, 1.0), np.ones(3))"
    return f"np.cross({x}, {x}[..., ::-1])"


@op("contraction", 1.5)
def op_einsum(c: Ctx) -> str:
    x = c.pick("ifc", lo=1, hi=3)
    shape = c.val(x).shape
    letters = "abcd"[: len(shape)]
    try:
        y = c.pick("ifc", lo=1, hi=2, pred=lambda v: v.shape[0] == shape[-1])
    except Skip:
        y = None
    if y is None or c.coin(0.3):
        pattern = c.choice([f"{letters}->", f"{letters}->{letters[::-1]}",
                            f"{letters}->{letters[0]}", f"{letters},{letters}->"])  # fmt: skip
        args = f"{x}, {x}" if "," in pattern else x
        if len(shape) >= 2 and shape[0] == shape[1] and c.coin():
            return f"np.einsum('aa->a', {x}[..., 0] if {x}.ndim > 2 else {x})"
        return f"np.einsum('{pattern}', {args})"
    ynd = np.ndim(c.env[y])
    ylet = "z" + "y"[: ynd - 1]
    xlet = letters[:-1] + "z"
    out = "".join(sorted(set(xlet + ylet) - {"z"}))
    return f"np.einsum('{xlet},{ylet}->{out}', {x}, {y})"


@op("contraction")
def op_tensordot(c: Ctx) -> str:
    x = c.pick("ifc", lo=1, hi=3)
    shape = c.val(x).shape
    y = c.pick("ifc", lo=1, hi=2, pred=lambda v: v.shape[0] == shape[-1])
    return c.choice([f"np.tensordot({x}, {y}, axes=1)", f"np.tensordot({x}, {y}, ([-1], [0]))"])


# ---------------------------------------------------------------- indexing


@op("index", 2.0)
def op_basic_index(c: Ctx) -> str:
    x = c.pick(lo=1)
    shape = c.val(x).shape
    n = shape[0]
    if n == 0:
        return f"{x}[1:]"
    i = c.integer(-n, n - 1)
    forms = [f"{x}[{i}]", f"{x}[1:]", f"{x}[::2]", f"{x}[..., {c.integer(-1, 0)}]",
             f"{x}[:, None]", f"{x}[{i}:{c.integer(-n, n)}]", f"{x}[[0, -1]]",
             f"{x}[..., ::-1]", f"{x}[{x}.shape[0] // 2]"]  # fmt: skip
    if len(shape) >= 2:
        forms += [f"{x}[:, {c.integer(-shape[1], shape[1] - 1) if shape[1] else 0}]",
                  f"{x}[{i}, ::-1]", f"{x}[[0, 0], [0, -1]]"]  # fmt: skip
    return c.choice(forms)


@op("index", 1.5)
def op_gather(c: Ctx) -> str:
    x = c.pick(lo=1, pred=lambda v: v.shape[0] > 0)
    n = c.val(x).shape[0]
    ints = f"(np.abs({c.pick('i')}) % {n})"
    return c.choice([f"{x}[{ints}]", f"np.take({x}, {ints}, axis=0)",
                     f"np.take({x}, [{n - 1}, 0, 0])",
                     f"np.take_along_axis({x}, np.argsort({x}, axis=-1), axis=-1)",
                     f"{x}[np.argmax({x}.reshape({n}, -1).sum(axis=-1))]"])  # fmt: skip


@op("index")
def op_mask(c: Ctx) -> str:
    x = c.pick(lo=1)
    c.tag("data_shape")
    return c.choice([f"{x}[{x} > 0]", f"{x}[np.abs({x}) < 1]", f"np.nonzero({x})[0]",
                     f"np.flatnonzero({x})", f"np.extract({x} > 0, {x})",
                     f"np.argwhere({x})"])  # fmt: skip


@op("inplace", 2.0)
def op_setitem(c: Ctx) -> list[str]:
    x = c.pick("bifc", lo=1, pred=lambda v: v.shape[0] > 0)
    v = c.val(x)
    n = v.shape[0]
    i = c.integer(-n, n - 1)
    kinds = {"b": "b", "i": "bi", "f": "bif", "c": "bifc"}[kind(v)]
    val = c.other(x, kinds) if c.coin() else literal(c, kinds)
    elem = val if v.ndim > 1 or c.coin(0.3) else c.choice(["1", "True", f"{x}[-1]"])
    rhs = c.choice([f"{{t}}[{i}] = {elem}", f"{{t}}[...] = {val}", "{t}[{t} > 0] = 0",
                    "{t}[1:] = {t}[:-1]", f"{{t}}[[0, -1]] = {literal(c, kinds)}",
                    f"{{t}}[..., 0] = {literal(c, kinds)}",
                    f"{{t}}[{i}] = {{t}}[{i}] * 2"])  # fmt: skip
    return [f"{{t}} = {x}.copy()", rhs]


@op("inplace", 1.5)
def op_iop(c: Ctx) -> list[str]:
    x = c.pick("ifc")
    v = c.val(x)
    # a float operand on integer values raises in NumPy (and so must vmap) now and then
    kinds = {"i": "bif" if c.coin(0.1) else "bi", "f": "bif", "c": "bifc"}[kind(v)]
    y = c.other(x, kinds)
    sym = c.choice(["+=", "-=", "*="])
    if c.coin(0.5) and v.ndim and v.shape[0] > 0:
        c.tag("index_iop")
        target = c.choice([f"{{t}}[{c.integer(0, v.shape[0] - 1)}]", "{t}[1:]",
                           "{t}[[0, 0]]", "{t}[..., :1]"])  # fmt: skip
        return [f"{{t}} = {x}.copy()", f"{target} {sym} {literal(c, kinds)}"]
    return [f"{{t}} = {x}.copy()", f"{{t}} {sym} {y}"]


@op("inplace")
def op_inplace_functions(c: Ctx) -> list[str]:
    x = c.pick("if", lo=1, pred=lambda v: v.shape[0] > 0)
    v = c.val(x)
    forms = ["{t}.sort()", "{t}.fill(2)", "np.put({t}, [0], 5)",
             "np.place({t}, {t} > 0, 3)", "np.putmask({t}, {t} < 0, 0)"]  # fmt: skip
    forms.append("np.copyto({t}, 1)")
    if v.ndim == 2 and v.shape[0] == v.shape[1]:
        forms.append("np.fill_diagonal({t}, 1)")
    return [f"{{t}} = {x}.copy()", c.choice(forms)]


@op("inplace")
def op_write_argument(c: Ctx) -> list[str]:
    # writes into an argument itself (the caller's array must stay as it was)
    names = [n for n in c.env if n.startswith("x") and kind(c.env[n]) in "if"]
    names = [n for n in names if np.ndim(c.env[n]) >= 1 and np.shape(c.env[n])[0] > 0]
    if not names:
        raise Skip
    x = c.choice(names)
    c.tag("write_arg")
    if c.val(x).dtype not in (np.float64, np.complex128):
        c.tag("write_plain_arg")  # (not differentiated: a plain array under grad)
    return [f"{x}[0] = 1", f"{{t}} = {x} * 2"]


# ---------------------------------------------------------------- sorting and sets


@op("sort", 1.5)
def op_sort(c: Ctx) -> str:
    x = c.pick("bif", lo=1)
    ax = c.axis(x, none=False)
    return c.choice([f"np.sort({x}, axis={ax})", f"np.argsort({x}, axis={ax}, kind='stable')",
                     f"np.sort({x}, axis=None)", f"-np.sort(-{x})",
                     f"np.partition({x}, 0, axis={ax})", f"np.argsort({x})",
                     f"np.searchsorted(np.sort({x}.ravel()), 0.5)",
                     f"np.searchsorted([-1.0, 0.0, 1.0], {x})",
                     f"np.lexsort(({x}, -{x}), axis={ax})"])  # fmt: skip


@op("sort")
def op_sort_complex(c: Ctx) -> str:
    x = c.pick("c", lo=1)
    return c.choice([f"np.sort({x})", f"np.sort_complex({x})", f"np.argsort({x}, axis=-1)"])


@op("sort")
def op_sets(c: Ctx) -> str:
    x = c.pick("bi", lo=1)
    c.tag("data_shape")
    return c.choice([f"np.unique({x})", f"np.isin({x}, [0, 2])",
                     f"np.bincount(np.abs({x}))",
                     f"np.in1d({x}, [1])" if not NUMPY2 else f"np.isin({x}, [1])",
                     f"np.union1d({x}, [3])", f"np.setdiff1d({x}, [0])",
                     f"np.intersect1d([0, 1], {x})"])  # fmt: skip


# ---------------------------------------------------------------- linear algebra


def _square(c: Ctx, kinds: str = "f") -> str:
    """An expression for a symmetric positive definite matrix built from a variable."""
    x = c.pick(kinds, lo=1, hi=3, pred=lambda v: v.size > 0)
    v = c.val(x)
    if v.ndim == 1:
        return f"(np.outer({x}, {x}) + {len(v)} * np.eye({len(v)}))"
    n = v.shape[-2]
    t = f"np.swapaxes({x}, -1, -2)" if kinds == "f" else f"np.conj(np.swapaxes({x}, -1, -2))"
    return f"({x} @ {t} + {n} * np.eye({n}))"


@op("linalg", 2.0)
def op_linalg(c: Ctx) -> str:
    a = _square(c, c.choice(["f", "f", "c"]))
    forms = [f"np.linalg.inv({a})", f"np.linalg.det({a})", f"np.linalg.slogdet({a})[1]",
             f"np.linalg.cholesky({a})", f"np.linalg.eigh({a})[0]",
             f"np.linalg.matrix_power({a}, 3)", f"np.linalg.solve({a}, {a}[..., 0:1])",
             f"np.linalg.svd({a}, compute_uv=False)", f"np.linalg.qr({a})[1]",
             f"np.linalg.matrix_rank({a})", f"np.linalg.norm({a}, axis=(-2, -1))",
             f"np.linalg.eigvalsh({a})", f"np.linalg.pinv({a})",
             f"np.abs(np.linalg.eigh({a})[1])", f"np.linalg.cond({a})",
             f"np.linalg.lstsq({a}[..., :, :], np.ones({a}.shape[-1]), rcond=None)[0]"]  # fmt: skip
    return c.choice(forms)


@op("linalg")
def op_linalg_general(c: Ctx) -> str:
    x = c.pick("f", lo=2, hi=3, pred=lambda v: v.size > 0)
    return c.choice([f"np.linalg.svd({x}, compute_uv=False)", f"np.linalg.qr({x})[1]",
                     f"np.linalg.norm({x}, 'nuc')", f"np.linalg.matrix_rank({x})",
                     f"np.abs(np.linalg.svd({x})[0])"])  # fmt: skip


# ---------------------------------------------------------------- fft


@op("fft", 1.5)
def op_fft(c: Ctx) -> str:
    x = c.pick("ifc", lo=1, pred=lambda v: v.shape[-1] > 0)
    ax = c.axis(x, none=False)
    forms = [f"np.fft.fft({x}, axis={ax})", f"np.fft.ifft({x})", f"np.fft.fftshift({x})",
             f"np.fft.ifftshift({x}, axes={ax})", f"np.fft.fft({x}, n=4)",
             f"np.fft.fft({x}, norm='ortho')"]  # fmt: skip
    if kind(c.env[x]) != "c":
        forms += [f"np.fft.rfft({x}, axis={ax})", f"np.fft.irfft({x})", f"np.fft.hfft({x})"]
    if np.ndim(c.env[x]) >= 2:
        forms += [f"np.fft.fft2({x})", f"np.fft.ifftn({x})", f"np.fft.rfftn(np.real({x}))"]
    return c.choice(forms)


# ---------------------------------------------------------------- casts and creation


@op("cast", 2.0)
def op_astype(c: Ctx) -> str:
    x = c.pick("bif")
    dt = c.choice(["bool", "np.int32", "np.int64", "np.float32", "np.float64",
                   "np.complex64", "np.complex128", "np.uint8", "np.int8"])  # fmt: skip
    if kind(c.env[x]) == "f" and dt in ("np.uint8", "np.int8"):
        x = f"np.clip({x}, 0, 9)"
    # np.asarray/np.array cannot be seen by vmapx (the documented per-example loop): rare
    forms = [f"{x}.astype({dt})"] * 6 + [f"np.asarray({x}, dtype={dt})", f"np.array({x}, {dt})"]
    if NUMPY2:
        forms += [f"np.astype({x}, {dt})"] * 3
    return c.choice(forms)


@op("cast")
def op_complex_parts(c: Ctx) -> str:
    x = c.pick("c")
    return c.choice([f"{x}.real", f"{x}.imag", f"np.abs({x})", f"{x}.conj()",
                     f"{x} * 1j + {x}.real"])  # fmt: skip


@op("creation")
def op_like(c: Ctx) -> str:
    x = c.pick()
    return c.choice([f"np.zeros_like({x})", f"np.ones_like({x}, dtype=np.float32)",
                     f"np.full_like({x}, 3)", f"{x} + np.ones_like({x})",
                     f"np.zeros({x}.shape) + {x}", f"np.arange({x}.size).reshape({x}.shape)",
                     f"np.ones(np.shape({x})[:1])"])  # fmt: skip


@op("creation")
def op_arange(c: Ctx) -> str:
    x = c.pick("if", lo=1)
    n = len(c.val(x))
    return c.choice([f"np.arange({n}) * {x}.sum()", f"np.arange(len({x})) + {x}[0]",
                     f"np.eye({n}) @ {x}", f"np.linspace(0.0, 1.0, {n}) * {x}[-1]",
                     f"np.tri({n}) @ {x}"])  # fmt: skip


# ---------------------------------------------------------------- misc numerical


@op("misc")
def op_misc(c: Ctx) -> str:
    x = c.pick("if", lo=1, pred=lambda v: v.shape[-1] > 1)
    xv = c.val(x)
    forms = [f"np.interp({x}, [-1.0, 0.0, 2.0], [0.0, 1.0, -1.0])",
             f"np.polyval([1.0, -2.0, 0.5], {x})", f"np.gradient({x}, axis=-1)",
             f"np.isclose({x}, 0.5, atol=0.6)", f"np.allclose({x}, {x})",
             f"np.round({x}, 2)", f"np.unwrap({x})",
             f"np.histogram({x}, bins=3, range=(-2, 2))[0]", f"np.sinc({x})",
             f"np.cov({x})", f"np.corrcoef({x}, {x}[::-1])", f"np.vander({x}.ravel(), 3)",
             f"np.array_equal({x}, {x}[::-1])",
             f"np.apply_along_axis(np.sum, -1, {x})"]  # fmt: skip
    if xv.ndim == 1:
        forms += [f"np.convolve({x}, [1.0, -1.0])", f"np.correlate({x}, {x}, 'full')",
                  f"np.polyfit(np.arange({len(xv)}), {x}, 1)"]  # fmt: skip
    return c.choice(forms)


# ---------------------------------------------------------------- Python control flow


_BRANCH = ["{} * 2", "np.sin({})", "{} - 1", "np.abs({})", "{} + {}", "-{}"]


@op("python", 1.5)
def op_if(c: Ctx) -> list[str]:
    x = c.pick("if")
    y = c.pick("if")
    a, b = (c.choice(_BRANCH).format(x, x) for _ in range(2))
    # thresholds away from 0: a sum that is 0 in exact arithmetic (`x - x`) has a sign
    # that rounding decides, differently for a batch and for one example
    cond = c.choice([f"np.sum({y}) > 0.1", f"{y}.size and np.max({y}) > 0.5",
                     f"float(np.mean({y})) < 0.3", f"np.all({y} > -1)",
                     f"bool(np.any({y} < 0))", f"int(np.sum(np.abs({y}))) % 2 == 0"])  # fmt: skip
    return [f"if {cond}:", f"    {{t}} = {a}", "else:", f"    {{t}} = {b}"]


@op("python")
def op_for_range(c: Ctx) -> list[str]:
    x = c.pick("if")
    n = c.pick("if")
    return [f"{{t}} = {x} * 1", f"for _ in range(int(np.sum(np.abs({n}) > 1)) % 3):",
            "    {t} = {t} * 0.5 + 1"]  # fmt: skip


@op("python")
def op_python_scalar(c: Ctx) -> str:
    x = c.pick("if")
    y = c.pick("if")
    c.tag("py_scalar")
    return c.choice([f"{x} * float(np.sum({y}))", f"{x} + int(np.max({y}, initial=0))",
                     f"{x} - np.mean({y}).item()", f"{x} * len({y})" if np.ndim(c.env[y])
                     else f"{x} * 2"])  # fmt: skip


# ---------------------------------------------------------------- vmapx control flow


@op("control", 1.5)
def op_cond(c: Ctx) -> str:
    # (branches of different dtypes, np.sin of ints: the examples run one by one)
    x = c.pick("f" if c.coin(0.7) else "bi")
    a, b = (c.choice(_BRANCH).format("u", "u") for _ in range(2))
    return c.choice([f"vmapx.cond(np.sum({x}) > 0.1, lambda u: {a}, lambda u: {b}, {x})",
                     f"vmapx.switch((np.sum({x}) > 0.1) * 1, "
                     f"[lambda u: {a}, lambda u: {b}], {x})",
                     f"vmapx.cond(np.all({x} > -1), lambda u: {a}, "
                     f"lambda u: {b}, {x})"])  # fmt: skip


@op("control")
def op_fori_loop(c: Ctx) -> str:
    x = c.pick("f")
    n = c.choice(["3", f"np.sum(np.abs({c.pick('if')}) > 0.5)", "0"])
    lo = c.choice(["0", "0", f"np.sum({c.pick('if')} > 0)"])  # (a batched lower bound)
    return f"vmapx.fori_loop({lo}, {n}, lambda i, u: u * 0.5 + i, {x})"


@op("control")
def op_while_loop(c: Ctx) -> str:
    x = c.pick("f")
    y = c.pick("if")
    return (f"vmapx.while_loop(lambda s: s[0] < np.sum(np.abs({y}) > 0.5), "
            f"lambda s: (s[0] + 1, s[1] * 0.9 + 0.1), (0, {x}))[1]")  # fmt: skip


@op("control")
def op_scan(c: Ctx) -> str:
    x = c.pick("f", lo=1)
    init = f"np.zeros_like({x}[0])" if c.coin() else "0.0"
    i = c.integer(0, 1)
    return f"vmapx.scan(lambda s, v: (s * 0.5 + v, s * v), {init}, {x})[{i}]"


# ---------------------------------------------------------------- random draws

# the elementwise distributions, which "different" splits exactly; (call, needs float param)
_DRAWS = [
    "g.normal(size={s})", "g.random({s})", "g.standard_normal({s})",
    "g.uniform(-1.0, 2.0, size={s})", "g.integers(0, 10, size={s})",
    "g.exponential(2.0, size={s})", "g.poisson(3.0, size={s})", "g.binomial(5, 0.3, size={s})",
    "g.gamma(2.0, size={s})", "g.standard_normal({s}, dtype=np.float32)",
    "g.random({s}, dtype=np.float32)", "g.integers(-5, 5, size={s}, endpoint=True)",
    "g.beta(2.0, 3.0, size={s})", "g.laplace(size={s})",
]  # fmt: skip
_DRAWS_PARAM = [
    "g.normal({x})", "g.uniform({x}, {x} + 1)", "g.exponential(np.abs({x}) + 1)",
    "g.normal(loc={x}, scale=2.0)", "g.poisson(np.abs({x}))", "g.normal({x}, size={s})",
]  # fmt: skip
_DRAWS_SCALAR = ["g.normal()", "g.random()", "g.poisson(1.5)", "g.integers(0, 5)",
                 "g.standard_normal(dtype=np.float32)"]  # fmt: skip
_DRAWS_PER_EXAMPLE = ["g.choice(5, size={s})", "g.permutation(4)", "g.choice({x}.ravel())"]


@op("random", 2.0)
def op_draw(c: Ctx) -> str:
    if not c.has_gen:
        raise Skip
    c.tag("draw")
    shape = c.choice(["3", "(2, 2)", "(1,)", "(0,)", "()"])
    r = c.rng.random()
    # a Python number per example (no size=, 0-d parameters) is used with an array: alone,
    # a later `.dtype` or `.shape` of it raises in the loop (a traced value has them)
    number = False
    if r < 0.45:
        draw = c.choice(_DRAWS).format(s=shape)
    elif r < 0.55:
        draw, number = c.choice(_DRAWS_SCALAR), True
    elif r < 0.85:
        x = c.pick("f")
        draw = c.choice(_DRAWS_PARAM)
        if "size" in draw:
            shape = str(c.val(x).shape)
        number = "size" not in draw and c.val(x).ndim == 0
        draw = draw.format(x=x, s=shape)
    else:
        c.tag("draw_per_example")
        x = c.pick("if", lo=1, pred=lambda v: v.size > 0)
        draw = c.choice(_DRAWS_PER_EXAMPLE).format(s=shape, x=x)
    try:
        x = c.pick("if", lo=1 if number else 0)
        return f"{x} + {draw}" if number or c.coin(0.4) else draw
    except Skip:
        if number:
            raise
        return draw


_WEIGHTS = np.array([o.weight for o in OPS])
WEIGHTS = _WEIGHTS / _WEIGHTS.sum()
