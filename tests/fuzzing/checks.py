"""The differential checks: each runs one transform of a program on random data and
compares it with what the plain per-example loop (or finite differences) gives.

A check raises `Mismatch` on a defect. When the loop raises, the transform must raise
too (any exception); when the loop works, the transform must work (a
`vmapx.PerformanceWarning` fallback is fine; a typed `vmapx.errors` refusal counts as a
refusal, not a defect, and is reported apart).
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import optree

import vmapx
from fuzzing.lockstep import run_lockstep
from fuzzing.ops import kind
from fuzzing.programs import Program, random_value, run_lines
from vmapx.errors import VmapxError

# KNOWN DEFECTS: a program with one of these tags is left out of the named checks until
# the defect is fixed (then delete the line to re-enable it).
DERIVATIVES = {"grad", "vmap_grad", "jac", "jit_grad", "grad_of_vmap"}
KNOWN_DEFECT_TAGS: dict[str, set[str]] = {}
# KNOWN DEFECTS of two constructs together: the checks left out where a program has both
LOOP_CHECKS = {"vmap", "chunked", "jit", "nested", "same", "threads", "axis_size", "zero"}
KNOWN_DEFECT_PAIRS: list[tuple[frozenset[str], set[str]]] = [
    # (a limit, not a defect) np.allclose/np.array_equal give a Python bool, under vmap a
    # traced 0-d value (with Python's arithmetic): it has `.astype`, which the loop's bool
    # lacks (AttributeError there)
    (frozenset({"python_bool", "op:astype"}), LOOP_CHECKS),
    # (a limit) a program that draws twice and then runs per example (a data-dependent
    # shape) may draw in the other documented order; its examples' shapes then differ and
    # stacking raises, where the loop's order gives equal shapes
    (frozenset({"multi_draw", "data_shape"}), LOOP_CHECKS),
]
# constructs some checks cannot judge (not defects): the reason is beside each
LIMITS: dict[str, set[str]] = {
    # derivatives of remainder/floor_divide hold floor(x / y): rounding noise of a y near 0
    # becomes a large derivative, so modes and finite differences legitimately disagree
    "mod": DERIVATIVES,
    # a write into an unmapped argument: the loop of loops shares that array between
    # examples, so it has no one answer to compare with; and reverse mode holds the
    # plain arrays its tape keeps read-only until f returns (a write would change the
    # derivative), so a write into an argument that is not differentiated (for jac, any
    # but the first float one) raises there, by design
    "write_arg": {"nested", "jac"},
    "write_plain_arg": {"grad", "vmap_grad", "jit_grad", "grad_of_vmap"},
    # float()/int()/.item() of a differentiated value under grad: a constant, with a
    # DroppedDerivativeWarning (documented), so finite differences differ
    "py_scalar": DERIVATIVES,
    # derivatives of QR at a rank-deficient matrix (which np.pad and `x - x` make often)
    # are not defined: finite differences cannot judge them
    "qr": {"grad", "jac"},
    # eigenvectors at a repeated eigenvalue (the op table's `outer(x, x) + n I` has them)
    # have no derivative
    "eigvec": DERIVATIVES,
    # two draws: under "same", a draw whose bit use depends on a batched parameter leaves
    # a state vmapx defines (not the loop); in nested vmaps, a fallback of the inner one
    # draws in an order the documentation leaves open
    # (and with chunks, each chunk's own fallback decides the order of its draws)
    "multi_draw": {"same", "nested", "chunked"},
}
# checks that never see a random draw: derivatives of draws are not defined here
NO_DRAWS = {*DERIVATIVES, "zero"}


class Mismatch(AssertionError):
    """A defect: the transform disagrees with the loop. `kind` groups alike ones."""

    def __init__(self, check: str, kind: str, detail: str) -> None:
        super().__init__(f"[{check}] {kind}: {detail}")
        self.check, self.kind, self.detail = check, kind, detail


class Refusal(Exception):
    """A transform raised a typed vmapx error where the loop works (allowed)."""


@contextmanager
def policy() -> Iterator[None]:
    """The warnings policy of every check: NumPy's floating-point warnings and vmapx's
    fallback warning are allowed, any other warning is an error (as in the test suite)."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.simplefilter("ignore", vmapx.PerformanceWarning)
        # float() of a value under grad is allowed (vmapx says the derivative stops there)
        dropped = getattr(vmapx.errors, "DroppedDerivativeWarning", None)
        if dropped is not None:
            warnings.simplefilter("ignore", dropped)
        yield


@dataclass
class Case:
    """A program with data: `examples[i][j]` is argument `j` of example `i`."""

    program: Program
    seed: int
    in_axes: tuple  # one per argument (the generator's last)
    examples: list
    out_u: tuple = (0.5, 0.5)
    gen_seed: int = 0

    @property
    def size(self) -> int:
        return len(self.examples)


def make_case(program: Program, seed: int) -> Case:
    rng = np.random.default_rng([seed, 1])
    size = int(rng.choice([0, 1, 2, 5], p=[0.1, 0.2, 0.35, 0.35]))
    examples = [
        [random_value(rng, a.shape, a.dtype) for a in program.args] for _ in range(max(size, 1))
    ]
    axes = [_random_axis(rng, len(a.shape)) for a in program.args]
    if all(a is None for a in axes):
        axes[int(rng.integers(len(axes)))] = 0
    if program.has_gen:
        axes.append(None if rng.random() < 0.5 else 0)
    return Case(program, seed, tuple(axes), examples[:size] if size else examples[:0],
                tuple(rng.random(2)), int(rng.integers(1000)))  # fmt: skip


def _random_axis(rng: np.random.Generator, ndim: int) -> int | None:
    if rng.random() < 0.25:
        return None
    ax = int(rng.integers(0, ndim + 1))
    return ax - ndim - 1 if rng.random() < 0.3 else ax


# ---------------------------------------------------------------- building blocks


def first_example(case: Case) -> list:
    """One example's arguments, also for an empty batch."""
    if case.examples:
        return case.examples[0]
    rng = np.random.default_rng([case.seed, 2])
    return [random_value(rng, a.shape, a.dtype) for a in case.program.args]


def batch(case: Case, examples: list | None = None) -> list:
    """The batched arguments (the generator not included)."""
    examples = case.examples if examples is None else examples
    proto = first_example(case)
    out = []
    for j in range(len(case.program.args)):
        ax = case.in_axes[j]
        if ax is None:
            out.append(proto[j].copy())
        elif examples:
            out.append(np.stack([e[j] for e in examples], axis=ax))
        else:
            out.append(np.take(np.stack([proto[j]], axis=ax), np.arange(0), axis=ax))
    return out


def _read_only(x: np.ndarray) -> np.ndarray:
    x = x.copy()
    x.flags.writeable = False
    return x


def _example(x: np.ndarray) -> Any:
    """An argument of one example as the loop `for x in X` gives it: a copy, a NumPy
    scalar where it is 0-d (`s += y` rebinds a scalar, where it writes into a 0-d array)."""
    return x[()] if x.ndim == 0 else x.copy()


def example_args(case: Case, i: int, examples: list | None = None) -> list:
    """Example `i`'s arguments as vmap shows them: unmapped ones are read-only."""
    examples = case.examples if examples is None else examples
    proto = first_example(case)
    return [
        _read_only(proto[j]) if case.in_axes[j] is None else _example(examples[i][j])
        for j in range(len(case.program.args))
    ]


def _is_leaf(x: Any) -> bool:
    return isinstance(x, np.ndarray)


def flatten(x: Any) -> tuple[list, Any]:
    return optree.tree_flatten(x, is_leaf=_is_leaf)


def stack_results(results: list, out_axes: Any) -> Any:
    """`np.stack` of the per-example results, leaf by leaf, moved to `out_axes`."""
    flat = [flatten(r) for r in results]
    treedef = flat[0][1]
    for _, t in flat:
        if t != treedef:
            raise ValueError(f"examples return different structures: {t} and {treedef}")
    n = len(flat[0][0])
    axes = out_axes if isinstance(out_axes, tuple) else (out_axes,) * n
    stacked = [np.moveaxis(np.stack([f[0][k] for f in flat]), 0, axes[k]) for k in range(n)]
    return optree.tree_unflatten(treedef, stacked)


def choose_out_axes(case: Case, example_out: Any) -> Any:
    leaves, _ = flatten(example_out)
    axes = []
    for leaf, u in zip(leaves, case.out_u, strict=False):
        nd = np.ndim(leaf) + 1
        axes.append(int(u * (2 * nd)) - nd)
    if len(leaves) == 1:
        return axes[0]
    return tuple(axes) if len(axes) == len(leaves) else 0


def _rtol(dtype: np.dtype) -> float:
    single = dtype in (np.float16, np.float32, np.complex64)
    return 5e-3 if dtype == np.float16 else 2e-4 if single else 1e-7


_LOW_PRECISION = {np.dtype(np.float16): 5e-3, np.dtype(np.float32): 1e-3,
                  np.dtype(np.complex64): 1e-3}  # fmt: skip


def precision_floor(case: Case) -> float:
    """The relative tolerance the program's least precise value allows (a float32 value
    turned into float64 carries float32's rounding; 0.0 when all are double)."""
    env = {a.name: v.copy() for a, v in zip(case.program.args, first_example(case), strict=True)}
    floor = max((_LOW_PRECISION.get(v.dtype, 0.0) for v in env.values()), default=0.0)
    for s in case.program.stmts:
        try:
            run_lines(list(s.lines), env)
        except Exception:
            break
        v = env.get(s.target)
        if kind(v) != "-":
            floor = max(floor, _LOW_PRECISION.get(np.asarray(v).dtype, 0.0))
    return floor


def assert_same(check: str, got: Any, want: Any, floor: float = 0.0) -> None:
    """Same structure, every leaf an ndarray of the same shape, dtype and values."""
    g_leaves, g_def = flatten(got)
    w_leaves, w_def = flatten(want)
    if g_def != w_def:
        raise Mismatch(check, "structure", f"got {g_def}, the loop gives {w_def}")
    for k, (g, w) in enumerate(zip(g_leaves, w_leaves, strict=True)):
        w = np.asarray(w)
        if type(g) is not np.ndarray:
            raise Mismatch(check, "type", f"output {k} is a {type(g).__name__}, not an ndarray")
        if g.shape != w.shape:
            raise Mismatch(check, "shape", f"output {k}: shape {g.shape}, the loop gives {w.shape}")
        if g.dtype != w.dtype:
            raise Mismatch(check, "dtype", f"output {k}: dtype {g.dtype}, the loop gives {w.dtype}")
        _assert_values(check, k, g, w, floor)


def _assert_values(check: str, k: int, g: np.ndarray, w: np.ndarray, floor: float) -> None:
    if w.dtype.kind not in "fc":
        if not np.array_equal(g, w):
            raise Mismatch(check, "values", f"output {k}: {_diff(g, w)}")
        return
    rtol = max(_rtol(w.dtype), floor)
    finite = np.isfinite(w)
    scale = float(np.max(np.abs(w[finite]), initial=1.0))
    close = np.isclose(g, w, rtol=rtol, atol=rtol * scale, equal_nan=True)
    close |= g == w  # infinities of the same sign
    if not np.all(close):
        raise Mismatch(check, "values", f"output {k}: {_diff(g, w)}")


def _diff(g: np.ndarray, w: np.ndarray) -> str:
    with np.printoptions(precision=6, threshold=20):
        return f"got {g!r}, the loop gives {w!r}"


def raises_like(check: str, run: Callable, reference: Callable) -> tuple[Any, Any] | None:
    """Run the reference (the loop) and the transform; raise `Mismatch` when exactly one
    of them fails. Returns (got, want), or None when both raised."""
    try:
        want = reference()
    except (_EmptyBatch, VmapxError):
        return None  # no loop to compare with (a reference of vmapx transforms refused)
    except Exception:
        want_error = True
    else:
        want_error = False
    try:
        got = run()
    except VmapxError as e:
        if want_error:
            return None
        raise Refusal(f"[{check}] {type(e).__name__}: {e}") from e
    except Exception as e:
        if want_error:
            return None
        raise Mismatch(check, f"raised {type(e).__name__}", f"{e} (the loop works)") from e
    if want_error:
        error = Mismatch(check, "no error", "returned a result where the loop raises")
        error.got = got
        raise error
    return got, want


# ---------------------------------------------------------------- vmap against the loop


def _gen(case: Case) -> list:
    return [np.random.default_rng(case.gen_seed)] if case.program.has_gen else []


def _results(case: Case, f: Callable, examples: list, order: str, chunk: int | None) -> list:
    """Per-example results; with a generator, drawn in the loop's order or in vmap's
    (`lockstep`: round by round within each chunk, see `fuzzing.lockstep`)."""
    n = len(examples)
    if order == "copies":  # every example draws from the generator's same state
        return [f(*example_args(case, i, examples), *_gen(case)) for i in range(n)]
    if not case.program.has_gen:
        return [f(*example_args(case, i, examples)) for i in range(n)]
    gen = _gen(case)[0]
    if order == "loop":
        return [f(*example_args(case, i, examples), gen) for i in range(n)]
    step = chunk or max(n, 1)
    out: list = []
    for start in range(0, n, step):
        calls = [lambda g, i=i: f(*example_args(case, i, examples), g)
                 for i in range(start, min(n, start + step))]  # fmt: skip
        out += run_lockstep(calls, gen)
    return out


def loop_ref(case: Case, f: Callable, examples: list | None = None, out_axes: Any = None,
             order: str = "lockstep", chunk: int | None = None) -> tuple[Any, Any]:  # fmt: skip
    """The loop: `f` on each example, stacked (and the out_axes it chose)."""
    examples = case.examples if examples is None else examples
    results = _results(case, f, examples, order, chunk)
    if not results:
        raise _EmptyBatch
    axes = choose_out_axes(case, results[0]) if out_axes is None else out_axes
    return stack_results(results, axes), axes


def compare(check: str, case: Case, run: Callable, reference: Callable,
            plain: Callable | None = None) -> None:  # fmt: skip
    """`raises_like` and `assert_same`. A program that draws more than once may instead
    give the plain loop's numbers (`plain()`), where vmap ran it once per example."""
    other = plain if "multi_draw" in case.program.tags else None
    try:
        pair = raises_like(check, run, reference)
    except Mismatch as e:
        if e.kind != "no error" or other is None:
            raise
        pair = (e.got, None)
    if pair is None:
        return
    got, want = pair
    floor = precision_floor(case)
    if want is not None:
        try:
            assert_same(check, got, want, floor)
            return
        except Mismatch:
            if other is None:
                raise
    try:
        alternative = other()
    except Exception as e:
        raise Mismatch(check, "no error", "returned a result where the loop raises") from e
    assert_same(check, got, alternative, floor)


class _EmptyBatch(Exception):
    """An empty batch has no loop to compare with (the zero check looks at it)."""


def _vmapped(case: Case, f: Callable, out_axes: Any, **options: Any) -> Callable:
    if case.program.has_gen:
        options.setdefault("randomness", "different")
    return vmapx.vmap(f, in_axes=case.in_axes, out_axes=out_axes, **options)


def check_vmap(case: Case, **options: Any) -> None:
    """`vmap(f)` equals the loop, and the caller's arrays are left as they were."""
    check = "chunked" if "chunk_size" in options else "vmap"
    f = case.program.compile()
    args = batch(case)
    before = [a.copy() for a in args]
    state: dict = {}

    chunk = options.get("chunk_size")

    def reference() -> Any:
        want, state["axes"] = loop_ref(case, f, chunk=chunk)
        return want

    def run() -> Any:
        return _vmapped(case, f, state.get("axes", 0), **options)(*args, *_gen(case))

    plain = lambda: loop_ref(case, f, None, state.get("axes", 0), "loop")[0]  # noqa: E731
    compare(check, case, run, reference, plain)
    for a, b in zip(args, before, strict=True):
        if not np.array_equal(a, b, equal_nan=True):
            raise Mismatch(check, "mutated", "vmap wrote into the caller's array")


def check_axis_size(case: Case) -> None:
    """`vmap(f, in_axes=None, axis_size=n)` stacks n results of f on the same arguments."""
    f = case.program.compile()
    proto = first_example(case)
    n = max(case.size, 1)
    args = [p.copy() for p in proto]

    def reference() -> Any:
        return stack_results([f(*[_read_only(p) for p in proto]) for _ in range(n)], 0)

    def run() -> Any:
        return vmapx.vmap(f, in_axes=None, axis_size=n)(*args)

    compare("axis_size", case, run, reference)


def check_chunked(case: Case) -> None:
    """`vmap(f, chunk_size=k)` for k smaller than the batch equals the loop."""
    k = 1 + case.seed % max(case.size - 1, 1)
    check_vmap(case, chunk_size=k)


def check_zero(case: Case) -> None:
    """A batch of size 0 gives outputs of shape (0, *per-example shape), the loop's dtype."""
    f = case.program.compile()
    try:
        with policy():
            one = f(*example_args(case, 0, [first_example(case)]))
    except Exception:
        return
    empty = batch(case, [])
    try:
        got = vmapx.vmap(f, in_axes=case.in_axes)(*empty)
    except VmapxError as e:
        raise Refusal(f"[zero] {type(e).__name__}: {e}") from e
    except Exception as e:
        raise Mismatch("zero", f"raised {type(e).__name__}", f"{e} (one example works)") from e
    g_leaves, g_def = flatten(got)
    w_leaves, w_def = flatten(one)
    if g_def != w_def:
        raise Mismatch("zero", "structure", f"got {g_def}, one example gives {w_def}")
    for g, w in zip(g_leaves, w_leaves, strict=True):
        w = np.asarray(w)
        if type(g) is not np.ndarray or g.shape != (0, *w.shape) or g.dtype != w.dtype:
            raise Mismatch("zero", "shape/dtype", f"got {type(g).__name__} "
                           f"{np.shape(g)} {getattr(g, 'dtype', None)}, want {(0, *w.shape)} "
                           f"{w.dtype}")  # fmt: skip


def second_examples(case: Case) -> list:
    """New data of the same shapes and dtypes (for a replay)."""
    rng = np.random.default_rng([case.seed, 3])
    return [[random_value(rng, a.shape, a.dtype) for a in case.program.args]
            for _ in case.examples]  # fmt: skip


def check_jit(case: Case) -> None:
    """`vmapx.jit(vmap(f))` equals the loop on two batches of new data (a replay)."""
    f = case.program.compile()
    jitted: dict = {}
    for examples in (case.examples, second_examples(case), case.examples):
        args = batch(case, examples)
        state: dict = {}

        def reference(examples: list = examples, state: dict = state) -> Any:
            want, state["axes"] = loop_ref(case, f, examples)
            return want

        def run(args: list = args, state: dict = state) -> Any:
            key = state.get("axes", 0)
            if key not in jitted:
                jitted[key] = vmapx.jit(_vmapped(case, f, key))
            return jitted[key](*args, *_gen(case))

        def plain(ex: list = examples, st: dict = state) -> Any:
            return loop_ref(case, f, ex, st.get("axes", 0), "loop")[0]

        compare("jit", case, run, reference, plain)


def check_same(case: Case) -> None:
    """randomness="same": every example draws from the generator's same state."""
    f = case.program.compile()
    args = batch(case)
    state: dict = {}

    def reference() -> Any:
        want, state["axes"] = loop_ref(case, f, order="copies")
        return want

    def run() -> Any:
        vf = vmapx.vmap(f, in_axes=case.in_axes, out_axes=state.get("axes", 0),
                        randomness="same")  # fmt: skip
        return vf(*args, np.random.default_rng(case.gen_seed))

    compare("same", case, run, reference)


# ---------------------------------------------------------------- nested vmap


def nested_data(case: Case) -> tuple[list, list, list, int, int]:
    """(inner in_axes, outer in_axes, batched arguments, outer size, inner size)."""
    rng = np.random.default_rng([case.seed, 4])
    n_out, n_in = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    args = case.program.args
    inner = [_random_axis(rng, len(a.shape)) for a in args]
    outer = [_random_axis(rng, len(a.shape) + (ax is not None))
             for a, ax in zip(args, inner, strict=True)]  # fmt: skip
    if all(a is None for a in inner):
        inner[0] = 0
    if all(a is None for a in outer):
        outer[0] = 0
    grid = [[[random_value(rng, a.shape, a.dtype) for a in args] for _ in range(n_in)]
            for _ in range(n_out)]  # fmt: skip
    batched = []
    for j in range(len(args)):
        rows = [row[0][j] if inner[j] is None else np.stack([e[j] for e in row], axis=inner[j])
                for row in grid]  # fmt: skip
        batched.append(rows[0] if outer[j] is None else np.stack(rows, axis=outer[j]))
    return inner, outer, batched, n_out, n_in


def _nested_example(inner: list, outer: list, batched: list, o: int, i: int) -> list:
    vals = []
    for j, x in enumerate(batched):
        v = x if outer[j] is None else np.take(x, o, axis=outer[j])
        v = v if inner[j] is None else np.take(v, i, axis=inner[j])
        vals.append(v.copy())
    return vals


def check_nested(case: Case) -> None:
    """`vmap(vmap(f))` over two batch axes equals the loop of loops."""
    f = case.program.compile()
    inner, outer, batched, n_out, n_in = nested_data(case)
    has_gen = case.program.has_gen
    extra = [None] if has_gen else []
    opts = {"randomness": "different"} if has_gen else {}

    def reference(order: str = "lockstep") -> Any:
        flat = [_nested_example(inner, outer, batched, o, i)
                for o in range(n_out) for i in range(n_in)]  # fmt: skip
        if has_gen and order == "lockstep":
            results = run_lockstep([lambda g, a=a: f(*a, g) for a in flat], _gen(case)[0])
        else:
            g = _gen(case)
            results = [f(*a, *g) for a in flat]
        rows = [stack_results(results[o * n_in : (o + 1) * n_in], 0) for o in range(n_out)]
        return stack_results(rows, 0)

    def run() -> Any:
        vf = vmapx.vmap(f, in_axes=(*inner, *extra), **opts)
        return vmapx.vmap(vf, in_axes=(*outer, *extra), **opts)(*batched, *_gen(case))

    compare("nested", case, run, reference, lambda: reference("loop"))


# ---------------------------------------------------------------- threads


def check_threads(case: Case) -> None:
    """vmap from several threads at once gives each thread the loop's answer."""
    f = case.program.compile()
    try:
        want, axes = loop_ref(case, f)
    except Exception:
        return
    args = batch(case)
    floor = precision_floor(case)
    errors: list = []
    barrier = threading.Barrier(3)

    def worker() -> None:
        try:
            barrier.wait()
            for _ in range(3):
                got = _vmapped(case, f, axes)(*args, *_gen(case))
                assert_same("threads", got, want, floor)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for e in errors:
        if isinstance(e, Mismatch | Refusal):
            raise e
        raise Mismatch("threads", f"raised {type(e).__name__}", str(e)) from e
