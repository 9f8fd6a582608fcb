"""Derivatives of structural functions: functions that move, copy or drop elements of
their operands (and fill the rest with zeros).

They are linear in their array operands (`sources`): the JVP is the function of the
tangents. The VJP runs the function once on integer labels of the traced operands'
elements (1, 2, ...; 0 for constants, so that zero fills say "none") to learn where each
result element comes from, then sends the cotangent back: a gather when no element is
copied twice, else a scatter-add (`indexing.SCATTER_ADD`).

`defstructural` registers both modes; `deflinear_in` the JVP alone; `operands` and
`every_positional` say which arguments are the `sources`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .._autodiff import NoRule, arg_item, defjvp_argnums, defvjp_argnums
from .._core import Tracer, bind
from .._registry import builder, each_function, register
from .indexing import SCATTER_ADD


def operands(
    *spec: tuple[int | None, str | None],
) -> Callable[[tuple[Any, ...], dict[Any, Any]], list[Any]]:
    """`sources` for `deflinear_in`/`defstructural`: the argnums of the operands at
    `(position, keyword)` that are present in a call."""

    def sources(args: tuple[Any, ...], kwargs: dict[Any, Any]) -> list[Any]:
        found: list[Any] = []
        for pos, name in spec:
            if pos is not None and len(args) > pos:
                found.append(pos)
            elif name is not None and name in kwargs:
                found.append(name)
        return found

    return sources


def every_positional(args: tuple[Any, ...], kwargs: dict[Any, Any]) -> list[Any]:
    """`sources` of functions of `*arrays` (`atleast_1d`, `broadcast_arrays`, ...)."""
    return list(range(len(args)))


def with_item(
    args: tuple[Any, ...], kwargs: dict[Any, Any], argnum: Any, value: Any
) -> tuple[tuple[Any, ...], dict[Any, Any]]:
    """The call's `(args, kwargs)` with the operand named by `argnum` replaced."""
    path = argnum if isinstance(argnum, tuple) else (argnum,)
    head, rest = path[0], path[1:]

    def put(seq: Any, rest: tuple[Any, ...]) -> Any:
        if not rest:
            return value
        items = list(seq)
        items[rest[0]] = put(items[rest[0]], rest[1:])
        return type(seq)(items) if type(seq) in (list, tuple) else items

    if isinstance(head, str):
        return args, {**kwargs, head: put(kwargs[head], rest)}
    return (*args[:head], put(args[head], rest), *args[head + 1 :]), kwargs


def _zeros_of(x: Any) -> Any:
    return np.zeros_like(x) if hasattr(x, "dtype") else np.zeros(np.shape(x))


@builder
def deflinear_in(
    funcs: Any,
    sources: Callable[[tuple[Any, ...], dict[Any, Any]], list[Any]],
    adapt: Callable[..., Any] | None = None,
) -> None:
    """`funcs` are linear in the operands `sources(args, kwargs)` jointly: the JVP is the
    function of their tangents (zeros for constant ones), the call fixed by `adapt(args,
    kwargs) -> (args, kwargs)` if given."""
    for func in each_function(funcs):
        prim = register(func, "linear", True)

        def rule(
            args: tuple[Any, ...],
            kwargs: dict[Any, Any],
            ans: Any,
            tangents: dict[Any, Any],
            prim: Any = prim,
        ) -> Any:
            srcs = sources(args, kwargs)
            for a in tangents:
                if a not in srcs:
                    raise NoRule(a, "jvp")
            for a in srcs:
                t = tangents.get(a)
                t = _zeros_of(arg_item(args, kwargs, a)) if t is None else t
                args, kwargs = with_item(args, kwargs, a, t)
            if adapt is not None:
                args, kwargs = adapt(args, kwargs)
            return bind(prim, args, kwargs)

        defjvp_argnums(func, rule)


@builder
def defstructural(
    funcs: Any,
    sources: Callable[[tuple[Any, ...], dict[Any, Any]], list[Any]],
    labels: Callable[..., Any] | None = None,
    tangents: Callable[..., Any] | None = None,
) -> None:
    """Both derivative modes of functions whose result elements are elements of the
    operands `sources(args, kwargs)` or zeros (see the comment above). `labels(args,
    kwargs) -> (args, kwargs)` fixes the call on labels (integer dtypes kept, 0 for
    constant fills), `tangents` the call on tangents."""
    deflinear_in(funcs, sources, tangents)
    for func in each_function(funcs):
        defvjp_argnums(func, positions_vjp(func, sources, labels))


def positions_vjp(
    func: Callable[..., Any], sources: Callable[..., Any], adapt: Callable[..., Any] | None = None
) -> Callable[..., Callable[..., Any]]:
    """The VJP maker (for `defvjp_argnums`) of a structural function, from labels."""

    def maker(
        argnums: list[Any], ans: Any, args: tuple[Any, ...], kwargs: dict[Any, Any]
    ) -> Callable[..., Any]:
        srcs = sources(args, kwargs)
        for a in argnums:
            if a not in srcs:
                raise NoRule(a, "vjp")
        shapes = [np.shape(arg_item(args, kwargs, a)) for a in srcs]
        key = _static_key(func, argnums, srcs, shapes, args, kwargs)
        found = _SENDERS.get(key) if key is not None else None
        if found is None:
            found = _send_plan(func, argnums, srcs, shapes, args, kwargs, adapt)
            if key is not None:
                if len(_SENDERS) >= 512:
                    _SENDERS.clear()
                _SENDERS[key] = found
        send, spans = found

        def pullback(g: Any) -> list[Any]:
            ct = send(np.reshape(g, -1))
            return [np.reshape(ct[start : start + size], shape) for start, size, shape in spans]

        return pullback

    return maker


# (func, traced operands, shapes, other arguments) -> (send, spans): the labels depend on
# nothing else, so calls with the same static arguments share them
_SENDERS: dict[tuple[Any, ...], tuple[Any, ...]] = {}


def _send_plan(
    func: Callable[..., Any], argnums: list[Any], srcs: list[Any], shapes: list[Any],
    args: tuple[Any, ...], kwargs: dict[Any, Any],
    adapt: Callable[..., Any] | None,
) -> tuple[Callable[..., Any], list[Any]]:  # fmt: skip
    """Run `func` on labels: `(send, spans)`, the spans `(start, size, shape)` of the
    traced operands (in the order of `argnums`) in the cotangent `send` gives."""
    spans, total = {}, 0
    for a, shape in zip(srcs, shapes, strict=True):
        if a in argnums:
            size = int(np.prod(shape, dtype=np.intp))
            labels = np.arange(total + 1, total + size + 1).reshape(shape)
            spans[a] = (total, size, shape)
            total += size
        else:
            labels = np.zeros(shape, dtype=np.intp)
        args, kwargs = with_item(args, kwargs, a, labels)
    if adapt is not None:
        args, kwargs = adapt(args, kwargs)
    send = _sender(np.reshape(func(*args, **kwargs), -1), total)
    return send, [spans[a] for a in argnums]


class _Unhashable(Exception):
    pass


def _static_key(
    func: Callable[..., Any],
    argnums: list[Any],
    srcs: list[Any],
    shapes: list[Any],
    args: tuple[Any, ...],
    kwargs: dict[Any, Any],
) -> tuple[Any, ...] | None:
    """A key of everything the labels depend on, or None if an argument is not a plain
    static value (a traced or large array)."""
    for a in srcs:
        args, kwargs = with_item(args, kwargs, a, None)
    try:
        return (func, tuple(argnums), tuple(shapes), _freeze(args), _freeze(kwargs))
    except _Unhashable:
        return None


def _freeze(x: Any) -> Any:
    if x is None or (
        not isinstance(x, Tracer)
        and isinstance(x, int | float | complex | str | np.generic | np.dtype | type)
    ):
        return (type(x), x)
    if isinstance(x, list | tuple):
        return (type(x), *map(_freeze, x))
    if isinstance(x, dict):
        return (dict, *((k, _freeze(v)) for k, v in sorted(x.items(), key=repr)))
    if isinstance(x, slice):
        return (slice, _freeze(x.start), _freeze(x.stop), _freeze(x.step))
    if type(x) is np.ndarray and x.size <= 64:
        return (np.ndarray, x.dtype, x.shape, x.tobytes())
    raise _Unhashable


def _sender(source: Any, total: int) -> Callable[..., Any]:
    """`g -> cotangent` of the `total` labelled elements, where result element `j` is
    labelled element `source[j]` (counted from 1; 0: none): a gather when no label
    repeats."""
    if isinstance(source, Tracer):  # labels traced by an outer transform
        zeros: Callable[[Any], Any] = lambda g: np.zeros_like(g, shape=(total + 1,))  # noqa: E731
        return lambda g: bind(SCATTER_ADD, (zeros(g), source, g), {})[1:]
    where = np.flatnonzero(source)
    labels = source[where] - 1
    counts = np.bincount(labels, minlength=total)
    if total and counts.max() > 1:
        every = where.size == source.size
        return lambda g: bind(
            SCATTER_ADD, (np.zeros_like(g, shape=(total,)), labels, g if every else g[where]), {}
        )
    inverse = np.full(total, source.size)
    inverse[labels] = where
    if total and counts.min() == 0:  # elements not in the result get the zero appended
        return lambda g: np.concatenate([g, np.zeros_like(g, shape=(1,))])[inverse]
    if np.array_equal(inverse, np.arange(total)):
        return lambda g: g
    return lambda g: g[inverse]
