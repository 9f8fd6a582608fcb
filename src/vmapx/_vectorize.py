"""`vmapx.vectorize`: `np.vectorize` (with or without a signature), run batched by `vmap`.

The loop dimensions (the broadcast leading axes that the signature's core dimensions
leave) become nested `vmap`s, one per loop dimension, outermost first; an argument that
lacks a loop dimension or has it of size 1 (broadcasting) is not mapped at that level,
so nothing is broadcast in memory. Dask arrays go through the same path: the outermost
`vmap` sees them and computes lazily, block by block (`vmapx._dask`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from typing import Any, cast

import numpy as np

from . import _core, _dask, _pytree
from ._api import vmap
from ._core import is_ndarray

_DIMS = r"\((?:\w+(?:,\w+)*)?\)"
_MAX_CACHED = 32
_SIGNATURE = re.compile(rf"^{_DIMS}(?:,{_DIMS})*->{_DIMS}(?:,{_DIMS})*$")


def parse_signature(signature: str) -> tuple[list[tuple[str, ...]], list[tuple[str, ...]]]:
    """The core dimension names of each input and output of a gufunc signature."""
    signature = re.sub(r"\s+", "", signature)
    if not _SIGNATURE.match(signature):
        raise ValueError(f"vectorize: not a valid gufunc signature: {signature!r}")
    ins, outs = signature.split("->")
    return _dims(ins), _dims(outs)


def _dims(part: str) -> list[tuple[str, ...]]:
    return [tuple(re.findall(r"\w+", group)) for group in re.findall(_DIMS, part)]


class vectorize:  # noqa: N801 (the name of NumPy's class it stands in for)
    """`np.vectorize` that runs batched: a `vmap` over the broadcast loop dimensions.

    Takes `np.vectorize`'s arguments and gives its results (the loop's values, shapes
    and dtypes), computed with batched NumPy calls where vmapx can batch `f` (else,
    per example, with a `vmapx.PerformanceWarning`). Dask array arguments give lazy
    Dask results, computed block by block. Usable as a decorator, with or without
    arguments.

    **Arguments:**

    - `pyfunc`: the function of one example (core-shaped arrays, or scalars without a
      `signature`).
    - `otypes`: output dtypes (a string of type codes or a list of dtypes); without it,
      an output has the dtype of the loop's `np.stack` of its examples (NumPy's own
      `vectorize` takes the first example's dtype: the two differ only where examples
      differ in dtype).
    - `doc`: the docstring (default: `pyfunc`'s).
    - `excluded`: positions (ints) and names (strs) of arguments passed to `pyfunc`
      as they are, never vectorized.
    - `cache`: accepted for compatibility (`pyfunc` is never called twice for an
      example here).
    - `signature`: a generalized ufunc signature such as `"(m,n),(n)->(m)"`: the core
      dimensions each example has; without it every input and output is a scalar.
    - `chunk_size`, `fallback`, `workers`: passed on to `vmap`.

    **Returns:** a callable with `np.vectorize`'s calling convention.

    **Example:**

    ```python
    >>> import numpy as np, vmapx
    >>> solve = vmapx.vectorize(lambda a, b: np.linalg.solve(a, b), signature="(n,n),(n)->(n)")
    >>> a, b = np.stack([np.eye(3), 2 * np.eye(3)]), np.ones((4, 1, 3))
    >>> solve(a, b).shape  # (loop dimensions (2,) and (4, 1) broadcast to (4, 2))
    (4, 2, 3)

    ```
    """

    def __new__(cls, pyfunc: Callable[..., Any] | None = None, *args: Any, **kwargs: Any) -> Any:
        if pyfunc is None:  # (`@vectorize(signature=...)`)
            return functools.partial(cls, *args, **kwargs)
        return super().__new__(cls)

    def __init__(
        self,
        pyfunc: Callable[..., Any] | None = None,
        otypes: Any = None,
        doc: str | None = None,
        excluded: Iterable[int | str] | None = None,
        cache: bool = False,
        signature: str | None = None,
        *,
        chunk_size: int | str | None = "auto",
        fallback: str | None = None,
        workers: int | None = None,
    ) -> None:
        if not callable(pyfunc):
            raise TypeError(f"vectorize: `pyfunc` must be callable, got {type(pyfunc).__name__}")
        self.pyfunc = pyfunc
        self.otypes = None if otypes is None else [np.dtype(t) for t in otypes]
        self.excluded = set(excluded or ())
        self.cache = cache
        self.signature = signature
        self._core = None if signature is None else parse_signature(signature)
        self._options: dict[str, Any] = {
            "chunk_size": chunk_size,
            "fallback": fallback,
            "workers": workers,
        }
        self._cache: dict[Any, Any] = {}
        self.__doc__ = pyfunc.__doc__ if doc is None else doc
        functools.update_wrapper(self, pyfunc, assigned=("__name__", "__qualname__", "__module__"))

    def __reduce__(self) -> Any:
        """Copied and pickled as made again from its arguments (the default would call
        `__new__` without `pyfunc`, which gives the decorator form)."""
        options = (self.pyfunc, self.otypes, self.__doc__, tuple(self.excluded), self.cache,
                   self.signature)  # fmt: skip
        return functools.partial(type(self), **self._options), options

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        keys: list[Any] = [i for i in range(len(args)) if i not in self.excluded]
        keys += [k for k in kwargs if k not in self.excluded]
        values = [_as_array(args[k] if type(k) is int else kwargs[k]) for k in keys]
        ins, outs = self._core or ([()] * len(values), None)
        if len(ins) != len(values):
            raise TypeError(
                f"vectorize: wrong number of positional arguments: the signature "
                f"{self.signature!r} takes {len(ins)}, got {len(values)}"
            )
        sizes = _core_sizes(values, ins, self.signature)
        loop = np.broadcast_shapes(
            *(v.shape[: v.ndim - len(c)] for v, c in zip(values, ins, strict=True))
        )
        values, has = _squeezed(values, ins, loop)

        rest = (
            tuple(None if i in keys else a for i, a in enumerate(args)),
            {k: v for k, v in kwargs.items() if k not in keys},
        )
        batched = self._batched(tuple(keys), tuple(tuple(h) for h in has))
        out = batched(*values, rest=rest)
        return self._outputs(out, outs, sizes, len(loop))

    def _batched(self, keys: tuple[Any, ...], has: tuple[Any, ...]) -> Callable[..., Any]:
        """The nested `vmap`s for arguments `keys` mapped along the loop dimensions
        `has` says (kept: a `vmap` learns about its calls, see `chunk_size="auto"`)."""
        batched = self._cache.get((keys, has))
        if batched is not None:
            return cast("Callable[..., Any]", batched)
        pyfunc = self.pyfunc

        def one(*example: Any, rest: tuple[Any, ...]) -> Any:
            args, kwargs = list(rest[0]), dict(rest[1])
            for k, v in zip(keys, example, strict=True):
                if type(k) is int:
                    args[k] = v
                else:
                    kwargs[k] = v
            return _pytree.tree_map(_text_as_array, pyfunc(*args, **kwargs))

        batched = one
        for d in reversed(range(len(has[0]) if has else 0)):
            in_axes = tuple(0 if h[d] else None for h in has)
            batched = vmap(batched, in_axes=in_axes, **self._options)
        if len(self._cache) >= _MAX_CACHED:
            self._cache.clear()
        self._cache[(keys, has)] = batched
        return batched

    def _outputs(self, out: Any, outs: list[Any] | None, sizes: dict[Any, Any], n_loop: int) -> Any:
        many = outs is not None and len(outs) != 1 or (outs is None and isinstance(out, tuple))
        results = list(out) if many else [out]
        if outs is not None:
            if len(outs) > 1 and (not isinstance(out, tuple) or len(out) != len(outs)):
                got = len(out) if isinstance(out, tuple) else 1
                raise ValueError(
                    f"vectorize: wrong number of outputs from pyfunc: the signature "
                    f"{self.signature!r} has {len(outs)}, got {got}"
                )
            for r, core in zip(results, outs, strict=True):
                _check_core(_as_array(r), core, n_loop, sizes, self.signature)
        if self.otypes is not None:
            if len(self.otypes) != len(results):
                raise ValueError(
                    f"vectorize: `otypes` has {len(self.otypes)} types for {len(results)} outputs"
                )
            results = [
                _as_array(r).astype(t, copy=False)
                for r, t in zip(results, self.otypes, strict=True)
            ]
        results = [r if _dask.is_dask(r) else np.asarray(r) for r in results]
        return tuple(results) if many else results[0]


def _text_as_array(x: Any) -> Any:
    """A `str` or `bytes` result as a 0-d array (`np.vectorize` gives arrays of text; `vmap`
    takes arrays and numbers only). Text of a traced value (`str(x)`: the whole batch's)
    cannot be a result: the loop runs."""
    if isinstance(x, str) and "Tracer(" in x and _core._state.stack:
        raise _core._state.stack[-1].concretization(
            "`str(x)` of a traced value became a result (its text shows the batch)",
            "format the value with a spec (`f'{x:.6g}'`), or compute numbers and format "
            "them outside",
        )
    return np.asarray(x) if isinstance(x, str | bytes) else x


def _as_array(x: Any) -> Any:
    return x if _dask.is_dask(x) or is_ndarray(x) else np.asanyarray(x)


def _core_sizes(values: list[Any], ins: list[Any], signature: str | None) -> dict[Any, Any]:
    """The size of every core dimension, checked to agree among the arguments."""
    sizes: dict[Any, Any] = {}
    for i, (v, core) in enumerate(zip(values, ins, strict=True)):
        if v.ndim < len(core):
            raise ValueError(
                f"vectorize: input {i} has {v.ndim} dimensions, but the signature "
                f"{signature!r} gives it {len(core)} core dimensions"
            )
        for name, n in zip(core, v.shape[v.ndim - len(core) :], strict=True):
            if sizes.setdefault(name, n) != n:
                raise ValueError(
                    f"vectorize: inconsistent size for core dimension {name!r}: {sizes[name]} "
                    f"vs {n} (input {i}, signature {signature!r})"
                )
    return sizes


def _squeezed(
    values: list[Any], ins: list[Any], loop: tuple[Any, ...]
) -> tuple[list[Any], list[Any]]:
    """Each value with the loop dimensions it broadcasts along (missing, or of size 1
    where the loop's is larger) removed (views), and per value which loop dimensions
    it still has."""
    out, has = [], []
    for v, core in zip(values, ins, strict=True):
        n_loop = v.ndim - len(core)
        missing = len(loop) - n_loop
        mine = [
            d >= missing and (v.shape[d - missing] == loop[d] or loop[d] == 1)
            for d in range(len(loop))
        ]
        index = tuple(slice(None) if mine[d + missing] else 0 for d in range(n_loop)) + (Ellipsis,)
        out.append(v[index] if not all(mine[missing:]) else v)
        has.append(mine)
    return out, has


def _check_core(
    result: Any, core: tuple[Any, ...], n_loop: int, sizes: dict[Any, Any], signature: str | None
) -> None:
    shape = result.shape[n_loop:]
    if len(shape) != len(core):
        raise ValueError(
            f"vectorize: an output has {len(shape)} core dimensions, but the signature "
            f"{signature!r} gives it {len(core)}"
        )
    for name, n in zip(core, shape, strict=True):
        if sizes.setdefault(name, n) != n:
            raise ValueError(
                f"vectorize: inconsistent size for core dimension {name!r} of an output: "
                f"{sizes[name]} vs {n} (signature {signature!r})"
            )
