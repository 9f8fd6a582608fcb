"""The differentiation API: `grad`, `value_and_grad`, `vjp`, `jvp`, `jacrev`, `jacfwd`,
`hessian`, `linearize`, `stop_gradient`.

Each transform is a small core over flat lists of arrays (`_vjp_call`, `_jvp_call`)
wrapped for pytrees of arguments (dicts of weights, tuples, ...) with optree.
"""

from __future__ import annotations

import functools
import inspect
import numbers
from collections.abc import Callable
from typing import Any, ParamSpec, cast

import numpy as np

from . import _passthrough, _payload
from . import _pytree as optree  # optree in vmapx.config.pytree_namespace
from ._api import fresh_arrays, vmap
from ._autodiff import (
    VJPTracer,
    backward,
    fit,
    is_float,
    jvp_flat,
    stop_gradient_leaf,
    strip,
    vjp_flat,
)
from ._core import Tracer
from ._unmapped import plain_array
from .errors import DifferentiationError

P = ParamSpec("P")  # the differentiated function's parameters, kept by the transforms


def _is_leaf(x: Any) -> bool:
    return isinstance(x, Tracer | np.ndarray)


# -- argument checking ---------------------------------------------------------------


def _check_callable(name: str, f: Any) -> None:
    if not callable(f):
        raise TypeError(f"{name}: `f` must be callable, got {type(f).__name__}")


def _check_argnums(name: str, argnums: Any) -> None:
    ok = _is_int(argnums) or (
        isinstance(argnums, tuple) and argnums and all(_is_int(a) for a in argnums)
    )
    if not ok:
        raise DifferentiationError(
            f"{name}: `argnums` must be an int or a non-empty tuple of ints (positions of the "
            f"arguments to differentiate), got {argnums!r}"
        )


def _is_int(a: Any) -> bool:
    return isinstance(a, numbers.Integral) and not isinstance(a, bool)


def _normalize_argnums(name: str, argnums: Any, nargs: int) -> tuple[int, ...]:
    nums = (argnums,) if _is_int(argnums) else tuple(argnums)
    for a in nums:
        if not -nargs <= a < nargs:
            raise DifferentiationError(
                f"{name}: argnums={argnums!r} refers to positional argument {a}, but the "
                f"function was called with {nargs} positional argument(s). Pass the "
                "arguments to differentiate positionally, or change `argnums`."
            )
    out = tuple(a % nargs for a in nums)
    if len(set(out)) != len(out):
        raise DifferentiationError(f"{name}: argnums={argnums!r} names an argument twice")
    return out


def _arg_name(f: Callable[..., Any], index: int) -> str:
    try:
        params = [
            p.name
            for p in inspect.signature(f).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        params = []
    return f"argument `{params[index]}`" if index < len(params) else f"argument {index}"


def _describe(x: Any) -> str:
    dtype = getattr(x, "dtype", None)
    if dtype is None:
        return type(x).__name__
    return f"{dtype}{list(getattr(x, 'shape', ()))}"


def _as_array(x: Any) -> Any:
    """`np.asarray(x)` of a number (a 0-d array), also of a traced one."""
    if isinstance(x, Tracer):  # (a tracer's `np.asarray` is refused: the pass-through's)
        return _passthrough.convert("asarray", x, None, None, 0)
    return np.asarray(x)


def _diff_leaves(
    name: str, f: Callable[..., Any], args: tuple[Any, ...], nums: tuple[Any, ...],
    allow_int: bool = False,
) -> tuple[list[Any], Any]:  # fmt: skip
    """The leaves of the differentiated arguments (checked: float or complex, or with
    `allow_int` integer or bool, which are then constants)."""
    diff = tuple(args[i] for i in nums)
    leaves, treedef = optree.tree_flatten(diff, is_leaf=_is_leaf)
    out = []
    for i, leaf in enumerate(leaves):
        x = leaf
        if isinstance(x, float | complex):  # (a traced number too: as the loop's)
            x = _as_array(x)
        if not is_float(x) and not (allow_int and _is_integer(x)):
            path = optree.tree_paths(diff, is_leaf=_is_leaf)[i]  # (for the message only)
            where = _arg_name(f, nums[path[0]]) + "".join(f"[{k!r}]" for k in path[1:])
            raise DifferentiationError(
                f"{name}: {where} is {_describe(leaf)}, which is not float or complex, so it "
                "cannot be differentiated. Convert it with `.astype(float)`, leave it out "
                "of `argnums` (the other arguments are constants), or pass `allow_int=True` "
                "(its derivative is then a zero array of dtype float0)."
            )
        out.append(plain_array(x))  # (its tracer indexes by traced values: `_unmapped`)
    return out, treedef


def _is_integer(x: Any) -> bool:
    dtype = x.dtype if hasattr(x, "dtype") else np.asarray(x).dtype
    return bool(dtype.kind in "iub")


# the dtype of the derivative for an integer input under `allow_int=True` (as JAX's
# `jax.dtypes.float0`): no values, so no arithmetic is done with it by mistake
FLOAT0 = np.dtype([("float0", np.void, 0)])


def _with_float0(derivatives: list[Any], live: list[int], leaves: list[Any]) -> list[Any]:
    """`derivatives` of the float leaves `live`, with float0 zeros for the integer ones."""
    full = [np.zeros(np.shape(x), dtype=FLOAT0) for x in leaves]
    for i, d in zip(live, derivatives, strict=True):
        full[i] = d
    return full


def _with_diff(
    args: tuple[Any, ...], nums: tuple[Any, ...], treedef: Any, leaves: list[Any]
) -> list[Any]:
    new = list(args)
    for i, v in zip(nums, optree.tree_unflatten(treedef, leaves), strict=True):
        new[i] = v
    return new


def _split_aux(name: str, out: Any) -> tuple[Any, Any]:
    if not (isinstance(out, tuple | list) and len(out) == 2):
        if isinstance(out, tuple | list):
            got = f"a {type(out).__name__} of length {len(out)}"
        elif hasattr(out, "dtype") and hasattr(out, "shape"):
            got = f"an array ({_describe(out)})"
        else:
            got = f"a {type(out).__name__}"
        raise DifferentiationError(
            f"{name}: with has_aux=True the function must return a pair `(output, aux)`, but "
            f"it returned {got}. Return `(output, aux)`, or use has_aux=False."
        )
    return out[0], out[1]


def _finish(derivatives: list[Any], given: list[Any]) -> list[Any]:
    """Derivatives as the user may keep and write them: new writable arrays, none of
    them the (co)tangents or primals `given`, nor another derivative (the gradients of
    `x + y` are one array; the pullback of the identity returns its cotangent)."""
    return fresh_arrays(derivatives, given)


def _shaped_as(ct: Any, leaf: Any) -> Any:
    """The cotangent of an array argument as an array (NumPy's arithmetic on 0-d arrays
    gives scalars: `grad(lambda x: x * 2)` of a 0-d array is a 0-d array too)."""
    array = type(leaf) is np.ndarray or (isinstance(leaf, Tracer) and isinstance(leaf, np.ndarray))
    return _as_array(ct) if array and isinstance(ct, np.generic) else ct  # (traced: posed)


# -- reverse mode ---------------------------------------------------------------------


def _vjp_call(
    name: str, f: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[Any, Any],
    nums: tuple[Any, ...], has_aux: bool,
    once: bool = False, allow_int: bool = False,
) -> tuple[Any, Callable[..., Any], Any]:  # fmt: skip
    """Run `f` recording a tape for the arguments `nums`; returns `(out, pull, aux)`
    where `pull(ct)` gives one cotangent pytree per differentiated argument. With
    `once`, `pull` is called only once and frees the tape as it goes (lower peak
    memory: each node's saved values go as soon as its cotangents are out). With
    `allow_int`, integer leaves are constants and their derivatives float0 zeros."""
    leaves, treedef = _diff_leaves(name, f, args, nums, allow_int)
    live = [i for i, x in enumerate(leaves) if is_float(x)]  # (all but allow_int's ints)

    def run(*ts: Any) -> Any:
        full = list(leaves)
        for i, t in zip(live, ts, strict=True):
            full[i] = t
        return f(*_with_diff(args, nums, treedef, full), **kwargs)

    trace, tracers, out = vjp_flat(name, run, [leaves[i] for i in live])
    inputs = [(t.node, leaves[i]) for t, i in zip(tracers, live, strict=True)]
    aux = None
    if has_aux:
        out, aux = _split_aux(name, out)
        aux = optree.tree_map(lambda x: strip(trace, x), aux, is_leaf=_is_leaf)
    out_leaves, out_tree = optree.tree_flatten(out, is_leaf=_is_leaf)
    seeds = [
        (x.node, x.out, x.shape, x.dtype)
        if isinstance(x, VJPTracer) and x._trace is trace and x.node is not None else None
        for x in out_leaves
    ]  # fmt: skip
    primal_out = optree.tree_unflatten(out_tree, [strip(trace, x) for x in out_leaves])

    def pull(ct: Any) -> tuple[Any, ...]:
        try:
            ct_leaves: list[Any] = out_tree.flatten_up_to(ct)
        except ValueError as e:
            raise DifferentiationError(
                f"{name}: the cotangent does not have the structure of the function's "
                f"output ({out_tree}): {e}"
            ) from None
        flow = []
        for k, (seed, c) in enumerate(zip(seeds, ct_leaves, strict=True)):
            if seed is None:
                continue
            node, out_index, shape, dtype = seed
            if tuple(np.shape(c)) != shape:
                raise DifferentiationError(
                    f"{name}: the cotangent for output {k} has shape {tuple(np.shape(c))}, "
                    f"but that output has shape {shape}; give one of the output's shape"
                )
            flow.append((node, out_index, fit(c, shape, dtype)))
        cts = backward(trace.tape, flow, consume=once)
        grads = _finish(
            [np.zeros_like(leaf) if cts[node] is None else _shaped_as(cts[node], leaf)
             for node, leaf in inputs],
            [*ct_leaves, *leaves],
        )  # fmt: skip
        if len(live) < len(leaves):
            grads = _with_float0(grads, live, leaves)
        return tuple(optree.tree_unflatten(treedef, grads))

    return primal_out, pull, aux


def vjp(f: Callable[..., Any], *primals: Any, has_aux: bool = False) -> tuple[Any, ...]:
    """The output of `f(*primals)` and its vector-Jacobian product function.

    **Arguments:**

    - `f`: a function of arrays (or pytrees of arrays) written with NumPy.
    - `*primals`: the arguments (float or complex) at which to differentiate.
    - `has_aux`: `f` returns `(output, aux)`; `aux` is returned as is, not differentiated.

    **Returns:** `(out, vjp_fn)` (or `(out, vjp_fn, aux)`), where `vjp_fn(ct)` takes a
    cotangent with the structure of `out` and returns a tuple with one cotangent per
    primal. `vjp_fn` can be called several times and mapped with `vmap`; it reads the
    arrays `f` used, so do not write into them before calling it.

    **Example:**

    ```python
    >>> import numpy as np, vmapx
    >>> out, vjp_fn = vmapx.vjp(np.sin, np.array([0.0, np.pi]))
    >>> vjp_fn(np.ones(2))
    (array([ 1., -1.]),)

    ```
    """
    _check_callable("vjp", f)
    out, pull, aux = _vjp_call("vjp", f, primals, {}, tuple(range(len(primals))), has_aux)

    def vjp_fn(ct: Any) -> tuple[Any, ...]:
        return cast("tuple[Any, ...]", pull(ct))

    return (out, vjp_fn, aux) if has_aux else (out, vjp_fn)


def _scalar_out(name: str, out: Any, holomorphic: bool) -> Any:
    if type(out) in (int, float, complex):
        out = np.asarray(out)
    shape = getattr(out, "shape", None)
    dtype = getattr(out, "dtype", None)
    if shape is None or dtype is None:
        raise DifferentiationError(
            f"{name}: the function must return a scalar array, but it returned a "
            f"{type(out).__name__}. Return one scalar (e.g. a loss); for several outputs "
            "use `vjp` or `jacrev`, and for extra outputs use has_aux=True."
        )
    if shape != ():
        raise DifferentiationError(
            f"{name}: the function must return a scalar (shape ()), but it returned an array "
            f"of shape {tuple(shape)}. Reduce it (e.g. `np.sum`), or use `vjp`/`jacrev` for "
            "a non-scalar output."
        )
    if dtype.kind == "c" and not holomorphic:
        raise DifferentiationError(
            f"{name}: the function returned a complex value ({dtype}); `{name}` needs a real "
            "output. Use holomorphic=True for a holomorphic function, or return a real value "
            "(e.g. `np.abs(z) ** 2`)."
        )
    if dtype.kind not in "fc":
        raise DifferentiationError(
            f"{name}: the function returned a value of dtype {dtype}, which has no "
            "derivative; return a float value."
        )
    return out


def value_and_grad(
    f: Callable[P, Any], argnums: int | tuple[int, ...] = 0, has_aux: bool = False,
    holomorphic: bool = False, allow_int: bool = False,
) -> Callable[P, Any]:  # fmt: skip
    """Like `grad`, but the function returns `(value, gradient)`.

    With `has_aux=True` it returns `((value, aux), gradient)`.

    **Example:**

    ```python
    >>> import numpy as np, vmapx
    >>> value, grad = vmapx.value_and_grad(lambda x: np.sum(x ** 2))(np.array([1.0, 2.0]))
    >>> float(value), grad
    (5.0, array([2., 4.]))

    ```
    """
    _check_callable("value_and_grad", f)
    _check_argnums("value_and_grad", argnums)

    @functools.wraps(f)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        return _value_and_grad(
            "value_and_grad", f, argnums, has_aux, holomorphic, args, kwargs, allow_int
        )

    return wrapped


def _value_and_grad(
    name: str, f: Callable[..., Any], argnums: Any, has_aux: bool, holomorphic: bool,
    args: tuple[Any, ...],
    kwargs: dict[Any, Any], allow_int: bool = False,
) -> Any:  # fmt: skip
    nums = _normalize_argnums(name, argnums, len(args))
    out, pull, aux = _vjp_call(name, f, args, kwargs, nums, has_aux, True, allow_int)
    out = _scalar_out(name, out, holomorphic)
    g = pull(np.ones_like(out))
    g = g[0] if _is_int(argnums) else g
    return ((out, aux), g) if has_aux else (out, g)


def grad(
    f: Callable[P, Any], argnums: int | tuple[int, ...] = 0, has_aux: bool = False,
    holomorphic: bool = False, allow_int: bool = False,
) -> Callable[P, Any]:  # fmt: skip
    """The gradient of a scalar function, by reverse mode (a tape of VJP closures).

    **Arguments:**

    - `f`: a function written with NumPy that returns a scalar (shape `()`) float.
    - `argnums`: which positional argument(s) to differentiate: an int, or a tuple
      of ints (then the gradient is a tuple). Each may be a pytree (e.g. a dict of
      weights): the gradient has the same structure.
    - `has_aux`: `f` returns `(value, aux)`; the result is then `(gradient, aux)`.
    - `holomorphic`: allow a complex output of a holomorphic `f` (gradient `f'(z)`).
    - `allow_int`: let differentiated arguments hold integer (or bool) arrays, as JAX's
      `allow_int`: they are constants, and their gradient is a zero array of their shape
      with the value-less dtype float0 (`np.dtype([("float0", np.void, 0)])`, JAX's
      `jax.dtypes.float0`), which no arithmetic accepts by mistake. Without it, an
      integer argument raises a `DifferentiationError` (a `TypeError`) naming it.

    Compositions work in any order: `vmap(grad(f))` gives per-example gradients,
    `grad(grad(f))` second derivatives. For a real function of complex `z` the gradient
    is `df/dx - i df/dy` (JAX's convention: use its conjugate for gradient descent).

    `f` runs eagerly on traced values: Python control flow on them works (`if x > 0:`),
    and `float(x)`/`x.item()` give the value, through which no derivative flows (use
    `np.*` functions for the math). In-place writes into traced arrays (`h[i] = ...`)
    are differentiated; plain arrays already used by the computation cannot be written
    until `f` returns (NumPy says "read-only"), since that would change the derivative.

    **Returns:** the gradient function, taking the same arguments as `f`.

    **Example:**

    ```python
    >>> import numpy as np, vmapx
    >>> def loss(w, x, y):
    ...     return 0.5 * np.sum((x @ w - y) ** 2)
    >>> w, x, y = np.ones(3), np.arange(6.0).reshape(2, 3), np.zeros(2)
    >>> vmapx.grad(loss)(w, x, y)
    array([36., 51., 66.])
    >>> vmapx.vmap(vmapx.grad(loss), in_axes=(None, 0, 0))(w, x, y)  # per example
    array([[ 0.,  3.,  6.],
           [36., 48., 60.]])
    >>> gw, gn = vmapx.grad(lambda w, n: np.sum(w**n), argnums=(0, 1), allow_int=True)(w, 2)
    >>> gw, gn.shape, gn.dtype.names  # (an int argument: float0 zeros)
    (array([2., 2., 2.]), (), ('float0',))

    ```
    """
    _check_callable("grad", f)
    _check_argnums("grad", argnums)

    @functools.wraps(f)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        out = _value_and_grad("grad", f, argnums, has_aux, holomorphic, args, kwargs, allow_int)
        if has_aux:
            (_, aux), g = out
            return g, aux
        return out[1]

    return wrapped


# -- forward mode ---------------------------------------------------------------------


def _jvp_call(
    name: str, f: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[Any, Any],
    nums: tuple[Any, ...], tangents: list[Any],
    has_aux: bool,
) -> tuple[Any, Any, Any]:  # fmt: skip
    """`(out, tangent_out, aux)` of `f` at `args`, with `tangents` (flat, one per leaf of
    the differentiated arguments `nums`)."""
    leaves, treedef = _diff_leaves(name, f, args, nums)
    tans = []
    for k, (p, t) in enumerate(zip(leaves, tangents, strict=True)):
        if tuple(np.shape(t)) != tuple(p.shape):
            raise DifferentiationError(
                f"{name}: tangent {k} has shape {tuple(np.shape(t))}, but its primal has "
                f"shape {tuple(p.shape)}; give tangents of the primals' shapes"
            )
        tans.append(fit(t, p.shape, p.dtype))
    unpack, out = jvp_flat(
        name,
        lambda *ts: f(*_with_diff(args, nums, treedef, list(ts)), **kwargs),
        leaves,
        tans,
    )
    aux = None
    if has_aux:
        out, aux = _split_aux(name, out)
        aux = optree.tree_map(lambda x: unpack(x)[0], aux, is_leaf=_is_leaf)
    out_leaves, out_tree = optree.tree_flatten(out, is_leaf=_is_leaf)
    pairs = [unpack(x) for x in out_leaves]
    primal = [p for p, _ in pairs]
    tangent = _finish(
        [_zeros_like_out(p) if t is None else t for p, t in pairs], [*tangents, *leaves]
    )
    return (
        optree.tree_unflatten(out_tree, primal),
        optree.tree_unflatten(out_tree, tangent),
        aux,
    )


def _zeros_like_out(p: Any) -> Any:
    return np.zeros_like(p) if hasattr(p, "shape") else np.zeros_like(np.asarray(p))


def jvp(
    f: Callable[..., Any],
    primals: tuple[Any, ...] | list[Any],
    tangents: tuple[Any, ...] | list[Any],
    has_aux: bool = False,
) -> tuple[Any, ...]:
    """The output of `f(*primals)` and its directional derivative along `tangents`
    (forward mode: a Jacobian-vector product).

    **Arguments:**

    - `f`: a function written with NumPy.
    - `primals`: a tuple (or list) of the arguments, each an array or pytree of arrays.
    - `tangents`: a tuple of the same structure and shapes.
    - `has_aux`: `f` returns `(output, aux)`; `aux` is returned as a third result.

    **Returns:** `(out, tangent_out)` (or `(out, tangent_out, aux)`).

    **Example:**

    ```python
    >>> import numpy as np, vmapx
    >>> vmapx.jvp(np.sin, (np.array([0.0, np.pi]),), (np.ones(2),))
    (array([0.0000000e+00, 1.2246468e-16]), array([ 1., -1.]))

    ```
    """
    _check_callable("jvp", f)
    for what, v in (("primals", primals), ("tangents", tangents)):
        if not isinstance(v, tuple | list):
            raise DifferentiationError(
                f"jvp: `{what}` must be a tuple or list with one entry per argument of `f`, "
                f"got a {type(v).__name__}; write `jvp(f, (x,), (t,))`"
            )
    if len(primals) != len(tangents):
        raise DifferentiationError(
            f"jvp: got {len(primals)} primals but {len(tangents)} tangents; give one tangent "
            "per primal"
        )
    nums = tuple(range(len(primals)))
    try:
        t_leaves: list[Any] = optree.tree_structure(tuple(primals), is_leaf=_is_leaf).flatten_up_to(
            tuple(tangents)  # type: ignore[arg-type]  # (optree's PyTree type admits no tuple)
        )
    except ValueError as e:
        raise DifferentiationError(
            f"jvp: the tangents do not have the structure of the primals: {e}"
        ) from None
    out, tan, aux = _jvp_call("jvp", f, tuple(primals), {}, nums, t_leaves, has_aux)
    return (out, tan, aux) if has_aux else (out, tan)


def linearize(f: Callable[..., Any], *primals: Any) -> tuple[Any, Callable[..., Any]]:
    """The output of `f(*primals)` and a function computing JVPs at `primals`.

    `f_jvp(*tangents)` equals `jvp(f, primals, tangents)[1]`; each call re-runs `f` in
    forward mode (vmapx keeps no compiled linear program).

    **Example:**

    ```python
    >>> import numpy as np, vmapx
    >>> out, f_jvp = vmapx.linearize(np.exp, np.array([0.0, 1.0]))
    >>> f_jvp(np.array([1.0, 0.0]))
    array([1., 0.])

    ```
    """
    _check_callable("linearize", f)
    out = f(*primals)

    def f_jvp(*tangents: Any) -> Any:
        return jvp(f, primals, tangents)[1]

    return out, f_jvp


# -- Jacobians ------------------------------------------------------------------------


def _out_leaves(name: str, out: Any, holomorphic: bool) -> tuple[list[Any], Any]:
    leaves, tree = optree.tree_flatten(out, is_leaf=_is_leaf)
    fixed = []
    for k, x in enumerate(leaves):
        if not isinstance(x, Tracer) and isinstance(x, numbers.Number):
            x = np.asarray(x)
        dtype = getattr(x, "dtype", None)
        if dtype is None or dtype.kind not in "fc":
            raise DifferentiationError(
                f"{name}: output {k} is {_describe(x)}; a Jacobian needs float outputs"
            )
        if dtype.kind == "c" and not holomorphic:
            raise DifferentiationError(
                f"{name}: output {k} is complex ({dtype}); use holomorphic=True for a "
                "holomorphic function, or return real values"
            )
        fixed.append(x)
    return fixed, tree


def _split_row(row: Any, like: list[Any]) -> list[Any]:
    """Slices of one basis row shaped like the leaves in `like`."""
    parts, off = [], 0
    for x in like:
        n = int(np.prod(x.shape, dtype=np.int64))
        part = np.reshape(row[off : off + n], x.shape)
        if part.dtype != x.dtype:
            part = part.astype(x.dtype)
        parts.append(part)
        off += n
    return parts


def _offsets(leaves: list[Any]) -> list[tuple[int, int]]:
    spans, off = [], 0
    for x in leaves:
        n = int(np.prod(x.shape, dtype=np.int64))
        spans.append((off, off + n))
        off += n
    return spans


def _basis_map(name: str, chunk_size: Any) -> Callable[..., Any]:
    """The `vmap` over a Jacobian's basis: `chunk_size` rows (or columns) at a time, or
    vmap's default (`"auto"`) where it is None."""
    if chunk_size is None:
        return vmap
    if not _is_int(chunk_size) or chunk_size < 1:
        raise DifferentiationError(
            f"{name}: `chunk_size` must be a positive int (how many rows of the Jacobian to "
            f"compute at once) or None, got {chunk_size!r}"
        )
    return functools.partial(vmap, chunk_size=int(chunk_size))


def jacrev(
    f: Callable[P, Any], argnums: int | tuple[int, ...] = 0, has_aux: bool = False,
    holomorphic: bool = False, chunk_size: int | None = None, allow_int: bool = False,
) -> Callable[P, Any]:  # fmt: skip
    """The Jacobian of `f` by reverse mode: `vmap` of the VJP over the output basis.

    Efficient when outputs are fewer than inputs. The Jacobian of an output of shape
    `S` with respect to an input of shape `T` has shape `S + T`; for pytrees the
    result nests the input structure inside the output structure. `chunk_size=k`
    computes `k` rows at a time (less memory, the same result), as `torch.func.jacrev`.
    `allow_int=True` accepts integer inputs, as `grad`'s: their blocks are float0 zeros.

    **Example:**

    ```python
    >>> import numpy as np, vmapx
    >>> vmapx.jacrev(lambda x: x[:2] * x[1:])(np.array([1.0, 2.0, 3.0]))
    array([[2., 1., 0.],
           [0., 3., 2.]])

    ```
    """
    _check_callable("jacrev", f)
    _check_argnums("jacrev", argnums)
    basis_map = _basis_map("jacrev", chunk_size)

    @functools.wraps(f)
    def jac(*args: Any, **kwargs: Any) -> Any:
        nums = _normalize_argnums("jacrev", argnums, len(args))
        out, pull, aux = _vjp_call("jacrev", f, args, kwargs, nums, has_aux, allow_int=allow_int)
        outs, out_tree = _out_leaves("jacrev", out, holomorphic)
        spans = _offsets(outs)
        m = spans[-1][1] if spans else 0
        dtype = np.result_type(*outs) if outs else np.float64

        def pull_row(row: Any) -> list[Any]:
            cts = optree.tree_unflatten(out_tree, _split_row(row, outs))
            return optree.tree_leaves(pull(cts), is_leaf=_is_leaf)

        like = _payload.like(*outs)
        if m == 1:  # a scalar output (a Hessian's inner Jacobian): no basis to map over
            rows = [np.expand_dims(r, 0) for r in pull_row(np.ones(1, dtype=dtype, like=like))]
        else:
            rows = basis_map(pull_row)(np.eye(m, dtype=dtype, like=like))
        ins, in_tree = optree.tree_flatten(tuple(args[i] for i in nums), is_leaf=_is_leaf)
        blocks = []
        for o, (a, b) in zip(outs, spans, strict=True):
            per_in = [
                np.reshape(r[a:b], tuple(o.shape) + tuple(np.shape(x)))
                for r, x in zip(rows, ins, strict=True)
            ]
            tree = optree.tree_unflatten(in_tree, per_in)
            blocks.append(tree[0] if _is_int(argnums) else tree)
        result = optree.tree_unflatten(out_tree, blocks)
        return (result, aux) if has_aux else result

    return jac


def jacfwd(
    f: Callable[P, Any], argnums: int | tuple[int, ...] = 0, has_aux: bool = False,
    holomorphic: bool = False, chunk_size: int | None = None,
) -> Callable[P, Any]:  # fmt: skip
    """The Jacobian of `f` by forward mode: `vmap` of the JVP over the input basis.

    Efficient when inputs are fewer than outputs. Same layout as `jacrev`;
    `chunk_size=k` computes `k` columns at a time (less memory, the same result).

    **Example:**

    ```python
    >>> import numpy as np, vmapx
    >>> vmapx.jacfwd(lambda x: x[:2] * x[1:])(np.array([1.0, 2.0, 3.0]))
    array([[2., 1., 0.],
           [0., 3., 2.]])

    ```
    """
    _check_callable("jacfwd", f)
    _check_argnums("jacfwd", argnums)
    basis_map = _basis_map("jacfwd", chunk_size)

    @functools.wraps(f)
    def jac(*args: Any, **kwargs: Any) -> Any:
        nums = _normalize_argnums("jacfwd", argnums, len(args))
        ins, in_tree = _diff_leaves("jacfwd", f, args, nums)
        if not holomorphic:
            for x in ins:
                if x.dtype.kind == "c":
                    raise DifferentiationError(
                        "jacfwd: an input is complex; use holomorphic=True for a holomorphic "
                        "function, or differentiate with respect to real values"
                    )
        spans = _offsets(ins)
        n = spans[-1][1] if spans else 0
        dtype = np.result_type(*ins)

        def push(row: Any) -> tuple[Any, ...]:
            out, tan, aux = _jvp_call(
                "jacfwd", f, args, kwargs, nums, _split_row(row, ins), has_aux
            )
            return out, optree.tree_leaves(tan, is_leaf=_is_leaf), aux

        basis = np.eye(n, dtype=dtype, like=_payload.like(*ins))
        out, cols, aux = basis_map(push, out_axes=(None, 0, None))(basis)
        outs, out_tree = _out_leaves("jacfwd", out, holomorphic)
        blocks = []
        for o, col in zip(outs, cols, strict=True):
            per_in = [
                np.reshape(np.moveaxis(col[a:b], 0, -1), tuple(o.shape) + tuple(x.shape))
                for x, (a, b) in zip(ins, spans, strict=True)
            ]
            tree = optree.tree_unflatten(in_tree, per_in)
            blocks.append(tree[0] if _is_int(argnums) else tree)
        result = optree.tree_unflatten(out_tree, blocks)
        return (result, aux) if has_aux else result

    return jac


def hessian(
    f: Callable[P, Any], argnums: int | tuple[int, ...] = 0, has_aux: bool = False,
    holomorphic: bool = False,
) -> Callable[P, Any]:  # fmt: skip
    """The Hessian of a scalar function: `jacfwd(jacrev(f))`.

    For an input of shape `T` the Hessian has shape `T + T`.

    **Example:**

    ```python
    >>> import numpy as np, vmapx
    >>> vmapx.hessian(lambda x: x[0] ** 2 * x[1])(np.array([1.0, 2.0]))
    array([[4., 2.],
           [2., 0.]])

    ```
    """
    _check_callable("hessian", f)
    _check_argnums("hessian", argnums)
    return jacfwd(
        jacrev(f, argnums, has_aux=has_aux, holomorphic=holomorphic),
        argnums,
        has_aux=has_aux,
        holomorphic=holomorphic,
    )


def stop_gradient(x: Any) -> Any:
    """`x` (an array or pytree) as a constant: no derivative flows through it.

    Works inside `grad`, `jvp` and the others (at every nesting level); under `vmap` the
    value stays batched.

    **Example:**

    ```python
    >>> import numpy as np, vmapx
    >>> float(vmapx.grad(lambda x: x * vmapx.stop_gradient(x))(3.0))
    3.0

    ```
    """
    return optree.tree_map(stop_gradient_leaf, x, is_leaf=_is_leaf)
