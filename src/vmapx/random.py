"""Random numbers under `vmap`: a `numpy.random.Generator` argument becomes batch-aware.

`vmap(f, randomness=...)` swaps every `numpy.random.Generator` among `f`'s arguments
(positional or keyword, anywhere in a pytree) for a `BatchGenerator` bound to that vmap.
A generator is never mapped: its `in_axes` entry may be 0 or None and is ignored.

- `"error"` (the default): any draw raises `vmapx.errors.RandomnessError` naming the call.
- `"different"`: every example draws its own numbers. The whole batch is drawn in one
  call of size `(B, *shape)`; NumPy's generators fill arrays in order, so these are
  exactly the numbers the per-example loop draws (example 0's first, then example 1's,
  ...) for every elementwise distribution (`normal`, `random`, `integers`, `uniform`,
  `binomial`, `poisson`, ...), whose parameters may be batched. `chunk_size` continues
  the same stream. Methods whose draws do not split that way (`choice`, `permutation`,
  `shuffle`, the multivariate ones, `integers` with 8/16-bit dtypes) run once per
  example on the same generator: the loop's numbers too, at the loop's speed.
- `"same"`: one draw shared by every example (with batched parameters, every example
  draws from the same generator state).

Exactness holds per call: a function that draws twice per example gets every example's
first draw, then every example's second draw: the loop's numbers in another order
(independent and identically distributed all the same). Nested vmaps compose: the inner
vmap's draws go through the outer vmap's generator; where the inner vmap splits its batch
(a per-example method, `chunk_size`, its own loop), the outer vmap runs its examples as
the loop, so that the numbers stay the loop's.

**Limits.** Only generators that reach `f` as arguments are batched. One that `f` reads
from a closure, a global, a partial or a bound method's object would draw once for the
whole batch: vmap notices that its state moved and runs `f` as the loop; so with NumPy's
legacy functions (`np.random.normal`, ...), and with one held two levels down in what
these hold (`state["rng"]`, `self.model.rng`): see `vmapx._legacy_random`. One held
deeper, or in a container of more than 64 entries, is not seen (every example gets the
same numbers): pass the generator as an argument, or call
`vmapx.random.batch_aware(rng)` inside `f`.
Draws inside a `cond`/`switch`/`while_loop` branch taken by only some examples are
independent per example, but not in the loop's order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import numpy as np

from . import _api
from . import _pytree as optree  # optree in vmapx.config.pytree_namespace
from ._batching import BatchTrace, align_rank, example_ndim, is_batched, loop_apply, unwrap
from ._compat import signature
from ._core import Tracer, _state, user_frame_location
from ._scalars import mark, mark_weak
from .errors import RandomnessError, UnsupportedError

__all__ = ["BatchGenerator", "batch_aware"]

_GEN = np.random.Generator
# one draw of size (B, *shape) gives the numbers of B draws of `shape` (checked in tests)
_ELEMENTWISE = (
    "beta", "binomial", "chisquare", "exponential", "f", "gamma", "geometric", "gumbel",
    "hypergeometric", "integers", "laplace", "logistic", "lognormal", "logseries",
    "negative_binomial", "noncentral_chisquare", "noncentral_f", "normal", "pareto",
    "poisson", "power", "random", "rayleigh", "standard_cauchy", "standard_exponential",
    "standard_gamma", "standard_normal", "standard_t", "triangular", "uniform", "vonmises",
    "wald", "weibull", "zipf",
)  # fmt: skip
_PER_EXAMPLE = (
    "bytes", "choice", "dirichlet", "multinomial", "multivariate_hypergeometric",
    "multivariate_normal", "permutation", "permuted",
)  # fmt: skip
_SIGNATURES = {n: signature(getattr(_GEN, n)) for n in (*_ELEMENTWISE, *_PER_EXAMPLE)}
_SIGNATURES["shuffle"] = signature(_GEN.shuffle)
_OPTIONS = ("size", "dtype", "out", "method", "endpoint")
# the distribution parameters of each elementwise method, in order
_PARAMS = {
    n: tuple(p for p in _SIGNATURES[n].parameters if p != "self" and p not in _OPTIONS)
    for n in _ELEMENTWISE
}


def _root(gen: Any) -> np.random.Generator:
    while isinstance(gen, BatchGenerator):
        gen = gen._parent
    return cast(np.random.Generator, gen)


def _shape(size: Any) -> tuple[int, ...]:
    return tuple(int(s) for s in size) if np.iterable(size) else (int(size),)


class BatchGenerator:
    """A `numpy.random.Generator` as one example inside `vmap` sees it.

    `vmap` passes one of these to `f` in place of each generator argument; it has the
    generator's distribution methods with the same signatures, and draws according to
    the vmap's `randomness` (see the module `vmapx.random`). `bit_generator` is the
    underlying generator's.

    **Example:**

    ```python
    >>> import numpy as np, vmapx
    >>> noisy = lambda x, rng: x + rng.normal(size=2)
    >>> out = vmapx.vmap(noisy, randomness="different")(np.zeros((3, 2)), np.random.default_rng(0))
    >>> rng = np.random.default_rng(0)
    >>> bool(np.array_equal(out, np.stack([noisy(x, rng) for x in np.zeros((3, 2))])))
    True

    ```
    """

    __slots__ = ("_trace", "_parent", "_mode", "_diverged")
    permutation: Callable[..., Any]  # (the distribution methods are set below the class)

    def __init__(self, trace: BatchTrace | None, parent: Any, mode: str) -> None:
        self._trace = trace
        self._parent = parent
        self._mode = mode
        self._diverged = False  # randomness="same", after branches that drew unevenly
        if trace is not None:  # its draws are the trace's own (see vmapx._legacy_random)
            trace.aware = (trace.aware or set()) | {id(_root(parent))}

    @property
    def _batch(self) -> BatchTrace:
        """The vmap's trace (a generator without one has randomness="error": it never draws)."""
        assert self._trace is not None
        return self._trace

    @property
    def bit_generator(self) -> np.random.BitGenerator:
        return _root(self).bit_generator

    def spawn(self, n_children: int) -> Any:
        raise UnsupportedError(
            "vmap: `Generator.spawn` is not supported inside vmap; spawn outside and pass "
            "the child generator in"
        )

    def __repr__(self) -> str:
        size = None if self._trace is None else self._trace.axis_size
        return f"BatchGenerator(randomness={self._mode!r}, batch_size={size}, {_root(self)!r})"

    def _draw(self, name: str, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        if self._mode == "error":
            raise RandomnessError(
                f"vmap: `{name}()` was called on a numpy.random.Generator inside a vmap with "
                f"randomness='error' (the default) at {user_frame_location()}. Choose "
                "randomness='different' (every example draws its own numbers: those of the "
                "per-example loop) or randomness='same' (one draw shared by every example)."
            )
        if self._trace is not None and self._trace.like is not None:
            raise _off_host_error(name, self._trace.like)
        if self._diverged:
            raise self._batch.concretization(
                f"`{name}()` with randomness='same' after the branches of a `cond`/`switch` "
                "drew different amounts of random numbers (the examples' generators are no "
                "longer in the same state)",
                "draw the same numbers in every branch, or draw before the branches",
            )
        bound = _SIGNATURES[name].bind(None, *args, **kwargs)
        bound.apply_defaults()
        a = dict(bound.arguments)
        del a["self"]
        out = a.pop("out", None)
        if out is not None:
            return self._into(name, a, out)
        if name == "shuffle":
            return self._shuffle(**a)
        if name in _ELEMENTWISE and _splits(name, a):
            size = a.get("size")  # (`_elementwise` takes it out of `a`)
            out = self._elementwise(name, a)
            # one number per example without size=: the loop gets a Python float (weakly
            # typed; `integers` a NumPy integer); with size=() a 0-d array
            if size is not None:
                return out
            return mark(out) if name == "integers" else mark_weak(out)
        population = a.get("a")
        out = self._per_example(name, a)
        if name != "choice" or a.get("size") is not None:
            return out
        # `choice` without size= gives a NumPy scalar (`s += y` rebinds it), a Python int
        # from `range(n)` where `a` is one
        return mark_weak(out) if type(population) is int else mark(out)

    def _into(self, name: str, a: dict[Any, Any], out: Any) -> Any:
        """`out=`: draw the numbers of `out`'s shape and dtype, then write them into it
        (functionally where `out` is traced)."""
        if a.get("size") is not None and _shape(a["size"]) != tuple(out.shape):
            raise ValueError(f"{name}: size must match the shape of out, {tuple(out.shape)}")
        dtype = np.dtype(a.get("dtype", np.float64))
        if out.dtype != dtype:
            raise TypeError(
                f"Supplied output array has the wrong type. Expected {dtype}, got {out.dtype}"
            )
        out[...] = self._draw(name, (), {**a, "size": tuple(out.shape)})  # (functional if traced)
        return out

    def _parent_draw(self, name: str, kwargs: dict[Any, Any]) -> Any:
        return getattr(self._parent, name)(**kwargs)

    def _elementwise(self, name: str, a: dict[Any, Any]) -> Any:
        trace, size = self._batch, a.pop("size")
        params = {k: a.pop(k) for k in _PARAMS[name]}
        vals = {k: unwrap(trace, v) for k, v in params.items()}
        if self._mode == "same":
            if any(b for _, b in vals.values()):
                return self._same_loop(name, params, {**a, "size": size})
            return self._parent_draw(name, {**params, **a, "size": size})
        if size is None:
            shapes = [v.shape[1:] if b else np.shape(v) for v, b in vals.values()]
            shape = np.broadcast_shapes(*shapes)
        else:
            shape = _shape(size)
        for k, (v, b) in vals.items():
            if b:
                params[k] = align_rank(v, example_ndim(trace, params[k]), len(shape))
        out = self._parent_draw(name, {**params, **a, "size": (trace.axis_size, *shape)})
        return trace.wrap(out)

    def _per_example(self, name: str, a: dict[Any, Any]) -> Any:
        batched = any(is_batched(self._batch, v) for v in a.values())
        if self._mode == "same":
            if not batched:
                return self._parent_draw(name, a)
            return self._same_loop(name, a, {})
        _check_whole_batch(self._parent, f"`{name}` (drawn once per example)")
        return self._loop(lambda **p: self._parent_draw(name, p), a, name)

    def _same_loop(self, name: str, params: dict[Any, Any], rest: dict[Any, Any]) -> Any:
        """Batched parameters with shared randomness: each example draws from one state."""
        gen = _root(self).bit_generator
        start = gen.state

        def one(**p: Any) -> Any:
            gen.state = start
            return self._parent_draw(name, {**p, **rest})

        return self._loop(one, params, name)

    def _loop(self, fn: Any, params: dict[Any, Any], name: str) -> Any:
        if self._batch.axis_size:
            return loop_apply(self._batch, fn, (), params, name)
        gen = _root(self).bit_generator  # an empty batch draws nothing
        start = gen.state
        try:
            return loop_apply(self._batch, fn, (), params, name)
        finally:
            gen.state = start

    def _shuffle(self, x: Any, axis: int = 0) -> None:
        trace = self._batch
        if not is_batched(trace, x):
            if self._mode == "same":
                self._parent.shuffle(x, axis=axis)
                return
            raise trace.concretization(
                "`shuffle` with randomness='different' of an array that is the same for "
                "every example (each example would shuffle it differently)",
                "shuffle a batched array, or use `x = rng.permutation(x)`",
            )
        if x.ndim == 0:
            raise TypeError("shuffle: a 0-d array cannot be shuffled")
        axis = axis % x.ndim
        perm, perm_batched = unwrap(trace, self.permutation(x.shape[axis]))
        v = np.moveaxis(x.val, axis + 1, 1)
        if perm_batched:
            v = v[np.arange(trace.axis_size)[:, None], perm]
        else:
            v = v[:, perm]
        x[...] = trace.wrap(np.moveaxis(v, 1, axis + 1))  # a functional write of the tracer


def _off_host_error(name: str, like: Any) -> UnsupportedError:
    kind = f"{type(like).__module__}.{type(like).__name__}"
    return UnsupportedError(
        f"vmap: `{name}()` drew from a numpy.random.Generator at {user_frame_location()} "
        f"inside a vmap over {kind} arrays: a NumPy generator makes host arrays, which "
        f"cannot meet {kind} values (the per-example loop would fail the same way). Draw "
        "the whole batch's numbers outside the vmap, move them to the arrays' device "
        "(e.g. `cupy.asarray(rng.normal(size=(batch, *shape)))`), and pass them in as a "
        "mapped argument."
    )


def _check_whole_batch(parent: Any, what: str) -> None:
    """The loop's numbers need every draw of a vmap nested in a vmap with
    randomness="different" to cover the whole inner batch: the outer generator then
    draws outer-major, as the loop does. Where the inner vmap splits its batch (per
    example, in chunks), the enclosing vmap runs its examples as the loop instead."""
    outer = None
    while isinstance(parent, BatchGenerator):
        if parent._mode == "different" and parent._trace is not None:
            outer = parent._trace
        parent = parent._parent
    if outer is not None:
        raise outer.concretization(
            f"{what} inside a vmap nested in a vmap with randomness='different', where the "
            "inner vmap splits its batch (per example, or in chunks): the draws would come "
            "in another order than the loop's",
            "leave `chunk_size` off the inner vmap, or draw in the outer function and pass "
            "the numbers in",
        )


def _splits(name: str, a: dict[Any, Any]) -> bool:
    """8- and 16-bit integers are drawn from a per-call buffer: they do not split."""
    return name != "integers" or np.dtype(a["dtype"]).itemsize >= 4


def _method(name: str) -> Any:
    def method(self: BatchGenerator, *args: Any, **kwargs: Any) -> Any:
        return self._draw(name, args, kwargs)

    method.__name__ = name
    method.__qualname__ = f"BatchGenerator.{name}"
    method.__doc__ = f"`numpy.random.Generator.{name}`, drawn as the vmap's `randomness` says."
    cast(Any, method).__signature__ = _SIGNATURES[name]  # (read by inspect.signature)
    return method


for _name in _SIGNATURES:
    setattr(BatchGenerator, _name, _method(_name))


def batch_aware(rng: Any) -> Any:
    """`rng` as the enclosing vmaps see it: a `BatchGenerator` that follows each vmap's
    `randomness` (outside any vmap, `rng` itself).

    `vmap` swaps only the generators passed to `f` as arguments. For one that `f`
    reaches another way (a closure, a global, an attribute), call this inside `f`:
    otherwise vmap runs `f` as the loop where it notices the draws, and every example
    gets the same numbers where it does not (one held deeper than `self.model.rng`).
    (A generator passed as an argument also keeps the loop's numbers when vmap
    falls back to a per-example loop, and replays across chunks with
    randomness="same"; this one does not.)

    **Example:**

    ```python
    >>> import numpy as np, vmapx
    >>> rng = np.random.default_rng(0)
    >>> f = lambda x: x + vmapx.random.batch_aware(rng).standard_normal()
    >>> out = vmapx.vmap(f, randomness="different")(np.zeros(3))
    >>> bool(np.array_equal(out, np.random.default_rng(0).standard_normal(3)))
    True

    ```
    """
    base = rng._trace.level if isinstance(rng, BatchGenerator) and rng._trace else 0
    for t in _state.stack:
        if type(t) is BatchTrace and t.level > base:
            rng = BatchGenerator(t, rng, t.randomness)
    return rng


def subbatch_generator(gen: BatchGenerator, traces: list[Any], sub: BatchTrace) -> BatchGenerator:
    """`gen`, bound to the vmap levels `traces`, rebound to `sub`: the examples of those
    levels that run one branch of a `cond`/`switch`/`while_loop` (see `control_flow`)."""
    modes = set()
    while isinstance(gen, BatchGenerator) and any(gen._trace is t for t in traces):
        modes.add(gen._mode)
        gen = gen._parent
    if len(modes) > 1:
        raise RandomnessError(
            "vmap: a generator is used inside a branch taken by only some examples of "
            f"nested vmaps with different `randomness` settings ({sorted(modes)}); give "
            "the nested vmaps the same `randomness`"
        )
    return BatchGenerator(sub, gen, modes.pop())


# -- the hooks vmap calls ------------------------------------------------------------


class _CallGenerator:
    """A generator argument of one vmap call. It binds to each batched run (a chunk) and
    stands in for the generator in each example of the per-example loop, restoring the
    state so that the loop draws the loop's numbers."""

    __slots__ = ("parent", "mode", "state", "start", "run_start", "runs")

    def __init__(self, parent: Any, mode: str) -> None:
        self.parent = parent
        self.mode = mode
        self.state = _root(parent).bit_generator
        self.start = self.run_start = self.state.state
        self.runs = 0

    def bind(self, trace: BatchTrace) -> BatchGenerator:
        if self.runs and self.mode == "different":
            _check_whole_batch(self.parent, "a vmap in chunks")
        self.runs += 1
        if self.mode == "same":  # every chunk replays the one draw
            self.state.state = self.start
        self.run_start = self.state.state
        return BatchGenerator(trace, self.parent, self.mode)

    def _vmapx_rewind(self) -> None:
        """Undo the draws of a batched run that is run again (as if it never ran)."""
        self.state.state = self.run_start
        self.runs -= 1

    def _vmapx_example(self, i: int) -> Any:
        """The generator example `i` of the per-example loop uses."""
        if self.mode == "same":
            self.state.state = self.start
        elif i == 0:  # undo what the batched attempt drew
            if self.mode == "different":
                _check_whole_batch(self.parent, "a vmap running per example")
            self.state.state = self.run_start
        return BatchGenerator(None, self.parent, "error") if self.mode == "error" else self.parent


def _prepare(leaf: Any, randomness: str) -> Any:
    if isinstance(leaf, Tracer) or type(leaf) is np.ndarray:  # (the common leaves, at once)
        return None
    if isinstance(leaf, _GEN | BatchGenerator):
        return _CallGenerator(leaf, randomness)
    if isinstance(leaf, np.random.RandomState):
        raise UnsupportedError(
            "vmap: a numpy.random.RandomState argument cannot be batched; pass a "
            "numpy.random.Generator (`np.random.default_rng(seed)`) instead"
        )
    return None


def _adapt(trace: BatchTrace, leaf: Any) -> Any:
    return leaf.bind(trace) if type(leaf) is _CallGenerator else None


_api.CALL_ADAPTERS.append(_prepare)
_api.ARGUMENT_ADAPTERS.append(_adapt)


class SharedDraws:
    """Under randomness="same" every example draws the same numbers, also in the branches
    of a `cond`/`switch` that split the batch: each branch starts from the state the
    generators had before the first branch. Where the branches leave different states,
    later draws would differ between the examples: `settle()` makes them run the loop."""

    __slots__ = ("gens", "bits", "start", "ends")

    def __init__(self, leaves: list[Any], traces: list[Any]) -> None:
        self.gens = [
            g for g in leaves
            if isinstance(g, BatchGenerator) and g._mode == "same"
            and any(g._trace is t for t in traces)
        ]  # fmt: skip
        self.bits = list({id(b): b for b in (_root(g).bit_generator for g in self.gens)}.values())
        self.start = [b.state for b in self.bits]
        self.ends: list[Any] = []

    def begin(self) -> None:
        for bits, state in zip(self.bits, self.start, strict=True):
            bits.state = state

    def end(self) -> None:
        self.ends.append([b.state for b in self.bits])

    def settle(self) -> None:
        """After the branches: where they left different states, a later draw from these
        generators runs the loop."""
        if not all(_same_state(e, self.ends[0]) for e in self.ends[1:]):
            for g in self.gens:
                g._diverged = True


def _same_state(a: Any, b: Any) -> bool:
    la, lb = optree.tree_leaves(a), optree.tree_leaves(b)
    return len(la) == len(lb) and all(np.array_equal(x, y) for x, y in zip(la, lb, strict=True))
