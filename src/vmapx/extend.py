"""Give vmapx the rules of your own functions: batching, forward and reverse derivatives.

The same registry serves vmapx's own NumPy rules, its library adapters and you:

- `primitive(fun)` makes any Python callable (a compiled extension, a library call,
  code that leaves NumPy) a primitive of vmapx: called with traced values it is one
  step that the transforms handle by its rules; called with plain values it is `fun`.
  Without rules it is traced through: its NumPy calls batch and differentiate as usual.
- `register_batch_rule`, `register_jvp` and `register_vjp` give a primitive (or any
  function NumPy dispatches to vmapx: `np.*` functions, ufuncs such as
  `scipy.special.erf`) its rules. A rule is never replaced silently: pass
  `replace=True` to mean it.
- `vmapx.custom_jvp`, `vmapx.custom_vjp` and `vmapx.custom_vmap` are decorators on top.

Rules use the public conventions of JAX (`custom_jvp`, `custom_vjp`) and vmapx's
`custom_vmap`:

- batch rule: `rule(axis_size, in_batched, *args, **kwargs) -> (out, out_batched)`,
  batched leaves with the batch on axis 0 (see `vmapx.custom_vmap`);
- JVP: `jvp(primals, tangents, **kwargs) -> (primal_out, tangent_out)`, `primals` and
  `tangents` tuples with one entry per positional argument (zeros for an argument that
  is not differentiated; `None` for one that is not a float array);
- VJP: `fwd(*args, **kwargs) -> (out, residuals)` and
  `bwd(residuals, g) -> cotangents`, one per positional argument (`None`: zero).

Positional arguments may be pytrees of arrays; keyword arguments are static (not
traced, not differentiated). Results are an array or a tuple of arrays. Rules are
written with NumPy calls, so they batch and differentiate again.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from . import _numpy  # noqa: F401  (vmapx's own rules first: yours must not replace them)
from . import _pytree as optree  # optree in vmapx.config.pytree_namespace
from ._api import vmap
from ._autodiff import NoRule, is_float
from ._batching import BatchTrace, unwrap
from ._core import Tracer, bind, find_top_trace
from ._registry import Primitive, builder, prim_of, register
from .errors import OutputError

__all__ = ["PrimitiveFunction", "primitive", "register_batch_rule", "register_jvp", "register_vjp"]

_TREE = "_vmapx_tree"  # the keyword that carries the structure of the positional arguments


class PrimitiveFunction:
    """A function the transforms see as one step (see `primitive`)."""

    @builder
    def __init__(self, fun: Callable[..., Any], name: str | None = None) -> None:
        if not callable(fun):
            raise TypeError(f"primitive: `fun` must be callable, got {type(fun).__name__}")
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.prim = Primitive(name or str(getattr(fun, "__qualname__", repr(fun))), self._impl)
        self.vmap_rule: Callable[..., Any] | None = None
        self.jvp_rule: Callable[..., Any] | None = None
        self.vjp_rules: tuple[Callable[..., Any], Callable[..., Any]] | None = None
        self._batched: dict[Any, Any] = {}
        register(self.prim, "batch", self._batch, default=True)
        register(self.prim, "composite", self._composite, default=True)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        leaves, treedef = optree.tree_flatten(args, none_is_leaf=True)
        if find_top_trace(tuple(leaves), kwargs) is None:
            return self.fun(*args, **kwargs)
        if find_top_trace((), kwargs) is not None:
            raise TypeError(
                f"`{self.prim.name}` got a batched keyword argument (or one traced by "
                "another transform); keyword arguments of a vmapx primitive are static (not "
                "batched or differentiated): pass such values positionally"
            )
        return bind(self.prim, tuple(leaves), {_TREE: treedef, **kwargs})

    def __repr__(self) -> str:
        return f"<vmapx primitive {self.prim.name}>"

    def _impl(self, *leaves: Any, **kwargs: Any) -> Any:
        treedef = kwargs.pop(_TREE)
        return self.fun(*treedef.unflatten(leaves), **kwargs)

    def _has_derivative_rules(self) -> bool:
        return self.jvp_rule is not None or self.vjp_rules is not None

    def _composite(self, *leaves: Any, **kwargs: Any) -> Any:
        """Under differentiation: the registered derivative rules, else `fun`'s own calls."""
        if self._has_derivative_rules():
            return NotImplemented
        return self._impl(*leaves, **kwargs)

    def _batch(self, trace: BatchTrace, leaves: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        """Under `vmap` without a batch rule: `fun`'s own NumPy calls batch, unless it has
        derivative rules, which must survive (see `_batch_keeping_rules`)."""
        if not self._has_derivative_rules():
            return self._impl(*leaves, **kwargs)
        return self._batch_keeping_rules(trace, leaves, kwargs)

    def _batch_keeping_rules(
        self, trace: BatchTrace, leaves: tuple[Any, ...], kwargs: dict[Any, Any]
    ) -> Any:
        """The batched function (its batch rule, or `vmap` of `fun`) as one primitive one
        level down, with `vmap` of its derivative rules as its rules: what an outer
        `grad` of this `vmap` differentiates."""
        treedef, kwargs = _split_tree(kwargs)
        pairs = [unwrap(trace, x) for x in leaves]
        flags = tuple(b for _, b in pairs)
        key = (flags, treedef, trace.axis_size)
        batched = self._batched.get(key)
        if batched is None:
            batched = self._batched[key] = self._vectorized(flags, treedef, trace.axis_size)
        out = batched(*treedef.unflatten([v for v, _ in pairs]), **kwargs)
        return optree.tree_map(trace.wrap, out)

    def _vectorized(
        self, flags: tuple[Any, ...], treedef: Any, axis_size: int
    ) -> PrimitiveFunction:
        in_axes = tuple(treedef.unflatten([0 if b else None for b in flags]))
        if self.vmap_rule is None:
            fun = vmap(self.fun, in_axes=in_axes)
        else:
            fun = _all_batched(self.vmap_rule, axis_size, list(treedef.unflatten(flags)))
        out = PrimitiveFunction(fun, name=f"vmap({self.prim.name})")
        if self.jvp_rule is not None:
            jvp = self.jvp_rule
            register_jvp(out, lambda p, t, **kw: vmap(
                lambda p, t: jvp(p, t, **kw), in_axes=(in_axes, in_axes))(p, t))  # fmt: skip
        if self.vjp_rules is not None:
            fwd, bwd = self.vjp_rules
            register_vjp(
                out,
                lambda *args, **kw: vmap(functools.partial(fwd, **kw), in_axes=in_axes)(*args),
                vmap(bwd),
            )
        return out


def _all_batched(
    rule: Callable[..., Any], axis_size: int, in_batched: list[Any]
) -> Callable[..., Any]:
    """A batch rule as a function whose results all carry the batch on axis 0."""

    def fun(*args: Any, **kwargs: Any) -> Any:
        out, out_batched = rule(axis_size, in_batched, *args, **kwargs)
        flags = optree.tree_broadcast_prefix(out_batched, out)
        return optree.tree_map(
            lambda x, b: x if b else np.broadcast_to(x, (axis_size, *np.shape(x))), out, flags
        )

    return fun


@builder
def primitive(fun: Callable[..., Any], *, name: str | None = None) -> PrimitiveFunction:
    """Make `fun` a primitive of vmapx: one step to the transforms, handled by its rules.

    Called with plain values, the result is `fun` itself. Called with traced values
    (inside `vmap`, `grad`, `jit`, ...), it is bound as one operation: its registered
    rules apply. A primitive without a batch rule batches by running `fun` on the
    batched values (its NumPy calls batch as usual; a call NumPy cannot see runs per
    example, with a warning), and without derivative rules it is differentiated
    through `fun`'s own NumPy calls.

    **Arguments:**

    - `fun`: any callable of arrays (positional arguments may be pytrees of arrays;
      keyword arguments are static). It returns an array or a tuple of arrays.
    - `name`: how messages name it (default: its qualified name).

    **Returns:** a `PrimitiveFunction`, callable like `fun`.

    **Example:** a function NumPy cannot see into (it computes element by element in
    Python's `math`) gets a batch rule and a derivative:

    ```python
    >>> import math
    >>> import numpy as np, vmapx
    >>> from vmapx import extend
    >>> def softplus(x):                        # math: NumPy (and vmapx) cannot see it
    ...     return np.array([math.log1p(math.exp(v)) for v in np.ravel(x)]).reshape(np.shape(x))
    >>> softplus = extend.primitive(softplus)
    >>> extend.register_batch_rule(softplus, lambda n, batched, x: (softplus.fun(x), True))
    >>> extend.register_jvp(
    ...     softplus, lambda p, t: (softplus(p[0]), t[0] / (1 + np.exp(-p[0]))))
    >>> x = np.array([[0.0, 1.0], [2.0, -1.0]])
    >>> np.round(vmapx.vmap(softplus)(x), 4)
    array([[0.6931, 1.3133],
           [2.1269, 0.3133]])
    >>> np.round(vmapx.vmap(vmapx.grad(lambda v: softplus(v).sum()))(x), 4)
    array([[0.5   , 0.7311],
           [0.8808, 0.2689]])

    ```
    """
    return PrimitiveFunction(fun, name)


def _prim_and_owner(func: Any) -> tuple[Primitive, PrimitiveFunction | None]:
    if isinstance(func, PrimitiveFunction):
        return func.prim, func
    if not callable(func):
        raise TypeError(f"register: expected a function, got {type(func).__name__}")
    return prim_of(func), None


@builder
def register_batch_rule(func: Any, rule: Callable[..., Any], *, replace: bool = False) -> None:
    """Give `func` (a `primitive`, a NumPy function or a ufunc) a batching rule.

    `rule(axis_size, in_batched, *args, **kwargs) -> (out, out_batched)`: `in_batched`
    is shaped like `args` with a bool per leaf (is it batched?), and batched leaves hold
    the whole batch on axis 0. It returns the results and a bool (or a pytree prefix
    of bools) saying which results carry the batch on axis 0. See `primitive` for an
    example. Refuses to replace an existing rule unless `replace=True`.
    """
    prim, owner = _prim_and_owner(func)
    _check_callable("register_batch_rule", rule)
    name = prim.name

    def batch(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        pairs = [unwrap(trace, x) for x in args]
        if (
            owner is not None and owner._has_derivative_rules()
            and any(isinstance(v, Tracer) for v, _ in pairs)
        ):  # fmt: skip
            # values an outer transform differentiates: keep the derivative rules
            return owner._batch_keeping_rules(trace, args, kwargs)
        treedef, kwargs = _split_tree(kwargs)
        values, flags = [v for v, _ in pairs], [b for _, b in pairs]
        if treedef is not None:
            values, flags = treedef.unflatten(values), treedef.unflatten(flags)
        result = rule(trace.axis_size, list(flags), *values, **kwargs)
        out, out_batched = _pair(result, f"the batch rule of `{name}`", "(out, out_batched)")
        return wrap_batched(trace, out, out_batched, name)

    register(prim, "batch", batch, replace=replace)
    if owner is not None:
        owner.vmap_rule = rule


def wrap_batched(trace: BatchTrace, out: Any, out_batched: Any, name: str) -> Any:
    """A batch rule's `(out, out_batched)` as values of `trace`."""
    if out_batched is True and type(out) is np.ndarray and out.ndim:  # (one batched array)
        if out.shape[0] == trace.axis_size:
            return trace.wrap(out)
    try:
        flags = optree.tree_broadcast_prefix(out_batched, out)
    except ValueError as e:
        raise OutputError(
            f"the batch rule of `{name}` returned `out_batched`={out_batched!r}, which "
            f"does not fit the structure of its output: {e}"
        ) from None

    def wrap(x: Any, batched: bool) -> Any:
        if not batched:
            return x
        if np.ndim(x) == 0 or np.shape(x)[0] != trace.axis_size:
            raise OutputError(
                f"the batch rule of `{name}` marked an output of shape {np.shape(x)} as "
                f"batched, but batched outputs need the batch ({trace.axis_size} examples) "
                "on axis 0"
            )
        return trace.wrap(x)

    return optree.tree_map(wrap, out, flags)


@builder
def register_jvp(
    func: Any,
    jvp: Callable[..., Any],
    *,
    nondiff_argnums: tuple[int, ...] = (),
    replace: bool = False,
) -> None:
    """Give `func` (a `primitive`, a NumPy function or a ufunc) its forward-mode rule.

    `jvp(primals, tangents, **kwargs) -> (primal_out, tangent_out)`, as JAX's
    `custom_jvp`: one primal and one tangent per positional argument (zeros where the
    argument is not differentiated, `None` where it is not a float array). Reverse
    mode follows by transposing it (write it with linear NumPy operations in the
    tangents), unless a VJP is registered too. `nondiff_argnums`: the positional
    arguments the rule cannot differentiate (an order, say); differentiating with
    respect to one raises a `vmapx.errors.DifferentiationError` naming `func` and the
    argument instead of giving a zero derivative.
    """
    prim, owner = _prim_and_owner(func)
    _check_callable("register_jvp", jvp)

    def rule(
        args: tuple[Any, ...], kwargs: dict[Any, Any], ans: Any, tangents: dict[Any, Any]
    ) -> Any:
        treedef, kwargs = _split_tree(kwargs)
        _positional_only(tangents, "jvp")
        for a in nondiff_argnums:
            if a in tangents:
                raise NoRule(a, "jvp")
        tans = [tangents[i] if i in tangents else _zero_tangent(x) for i, x in enumerate(args)]
        result = jvp(_tree(treedef, args), _tree(treedef, tans), **kwargs)
        what = f"the JVP rule of `{prim.name}`"
        return _pair(result, what, "(primal_out, tangent_out)")[1]

    register(prim, "jvp", rule, replace=replace)
    if owner is not None:
        owner.jvp_rule = jvp


@builder
def register_vjp(
    func: Any, fwd: Callable[..., Any], bwd: Callable[..., Any], *, replace: bool = False
) -> None:
    """Give `func` (a `primitive`, a NumPy function or a ufunc) its reverse-mode rule.

    As JAX's `custom_vjp`: `fwd(*args, **kwargs) -> (out, residuals)` and
    `bwd(residuals, g) -> cotangents`, a tuple with one entry per positional argument
    (`None` for zero). Forward mode follows by transposing it, unless a JVP is
    registered too.
    """
    prim, owner = _prim_and_owner(func)
    _check_callable("register_vjp", fwd)
    _check_callable("register_vjp", bwd)

    def rule(
        argnums: list[Any], ans: Any, args: tuple[Any, ...], kwargs: dict[Any, Any]
    ) -> Callable[..., Any]:
        treedef, kwargs = _split_tree(kwargs)
        _positional_only(argnums, "vjp")
        primals = _tree(treedef, args)
        result = fwd(*primals, **kwargs)
        residuals = _pair(result, f"the `fwd` rule of `{prim.name}`", "(out, residuals)")[1]

        def pullback(g: Any) -> list[Any]:
            cts = bwd(residuals, g)
            if not (isinstance(cts, tuple | list) and len(cts) == len(primals)):
                raise OutputError(
                    f"the `bwd` rule of `{prim.name}` must return a tuple with one cotangent "
                    f"per positional argument ({len(primals)}), got {cts!r:.80}"
                )
            leaves = _ct_leaves(primals, cts)
            return [leaves[a] for a in argnums]

        return pullback

    register(prim, "vjp", rule, replace=replace)
    if owner is not None:
        owner.vjp_rules = (fwd, bwd)


def _split_tree(kwargs: dict[Any, Any]) -> tuple[Any, dict[Any, Any]]:
    """`(treedef, kwargs)`: the positional arguments' structure (None for a NumPy
    function's call) and the call's own keyword arguments."""
    kwargs = dict(kwargs)
    return kwargs.pop(_TREE, None), kwargs


def _positional_only(argnums: Any, mode: str) -> None:
    """Public rules differentiate positional arguments (not keywords or list items)."""
    for a in argnums:
        if not isinstance(a, int):
            raise NoRule(a, mode)


def _pair(result: Any, what: str, form: str) -> tuple[Any, ...]:
    """A rule's result, which must be a pair `form`."""
    if not (isinstance(result, tuple) and len(result) == 2):
        raise OutputError(f"{what} must return a pair `{form}`, got {type(result).__name__}")
    return result


def _check_callable(name: str, rule: Any) -> None:
    if not callable(rule):
        raise TypeError(f"{name}: the rule must be callable, got {type(rule).__name__}")


def _zero_tangent(x: Any) -> Any:
    return np.zeros_like(x) if is_float(x) else None


def _tree(treedef: Any, leaves: Any) -> tuple[Any, ...]:
    return tuple(leaves) if treedef is None else treedef.unflatten(leaves)


def _ct_leaves(primals: tuple[Any, ...], cts: Any) -> list[Any]:
    """The cotangents as one list of leaves, in the order of the primals' leaves."""
    out: list[Any] = []
    for p, ct in zip(primals, cts, strict=True):
        p_leaves, p_def = optree.tree_flatten(p, none_is_leaf=True)
        out.extend([None] * len(p_leaves) if ct is None else p_def.flatten_up_to(ct))
    return out
