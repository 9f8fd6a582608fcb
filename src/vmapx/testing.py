"""Testing helpers: `check_grads` compares derivatives with central differences."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

import numpy as np

from . import _pytree as optree  # optree in vmapx.config.pytree_namespace
from ._ad_api import jvp, vjp
from ._autodiff import is_float


def _is_leaf(x: Any) -> bool:
    return isinstance(x, np.ndarray)


def _leaves(tree: Any) -> list[Any]:
    return optree.tree_leaves(tree, is_leaf=_is_leaf)


def _pair(a: list[Any], b: list[Any]) -> float:
    """`Re(sum(a * b))` over the leaves: the pairing the VJP is the transpose for."""
    return float(
        sum(np.real(np.sum(np.asarray(x) * np.asarray(y))) for x, y in zip(a, b, strict=True))
    )


def _random_like(rng: np.random.Generator, x: Any) -> np.ndarray:
    x = np.asarray(x)
    v = rng.standard_normal(x.shape)
    if x.dtype.kind == "c":
        v = v + 1j * rng.standard_normal(x.shape)
    return cast("np.ndarray[Any, Any]", v.astype(x.dtype))


def _float_outputs(out: Any) -> list[Any]:
    return [np.asarray(o) for o in _leaves(out) if is_float(np.asarray(o))]


def _numerical_jvp(
    f: Callable[..., Any], args: list[Any], tangents: list[Any], eps: float
) -> list[Any]:
    plus = f(*[a + eps * t for a, t in zip(args, tangents, strict=True)])
    minus = f(*[a - eps * t for a, t in zip(args, tangents, strict=True)])
    return [
        (p - m) / (2 * eps)
        for p, m in zip(_float_outputs(plus), _float_outputs(minus), strict=True)
    ]


def _assert_close(got: Any, want: Any, rtol: float, atol: float, what: str) -> None:
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=what)


def check_grads(
    f: Callable[..., Any],
    args: Sequence[Any],
    order: int = 2,
    modes: Sequence[str] = ("fwd", "rev"),
    eps: float = 1e-6,
    rtol: float = 1e-5,
    atol: float = 1e-5,
    seed: int = 0,
) -> None:
    """Check `jvp` and `vjp` of `f` at `args` against central differences, to `order`.

    Arguments that are not float or complex (indices, masks) are held fixed. Each check
    uses a random direction: forward mode compares `jvp` with `(f(x + eps t) -
    f(x - eps t)) / (2 eps)`; reverse mode checks `<ct, J t> == <vjp(ct), t>` (with
    `<a, b> = Re(sum(a * b))`). Order 2 then checks the derivatives of the `jvp` and
    `vjp` functions themselves, and so on. Computations should be in float64 (where an
    argument or result is in single precision, `eps` and the tolerances are widened).

    **Arguments:**

    - `f`: a function of the arrays `args` returning an array (or a pytree of them).
    - `args`: the point at which to differentiate.
    - `order`: how many times to differentiate (1 = first derivatives only).
    - `modes`: `"fwd"` (JVP), `"rev"` (VJP), or both.
    - `eps`, `rtol`, `atol`: the step of the differences and the tolerances.

    **Raises:** `AssertionError` naming the mode and order that disagree.

    **Example:**

    ```python
    >>> import numpy as np, vmapx
    >>> vmapx.check_grads(lambda x: np.sin(x) * x, (np.array([0.5, 1.0]),), order=2)

    ```
    """
    for mode in modes:
        if mode not in ("fwd", "rev"):
            raise ValueError(f"check_grads: unknown mode {mode!r}; use 'fwd' and/or 'rev'")
    rng = np.random.default_rng(seed)
    args = list(args)
    diff = [i for i, a in enumerate(args) if is_float(np.asarray(a)) and not _is_int_like(a)]
    fixed = {i: a for i, a in enumerate(args) if i not in diff}

    def g(*xs: Any) -> Any:
        full = list(args)
        for i, x in zip(diff, xs, strict=True):
            full[i] = x
        for i, a in fixed.items():
            full[i] = a
        return f(*full)

    xs = [np.asarray(args[i]) for i in diff]
    if not xs:
        return
    if any(np.finfo(np.asarray(x).dtype).eps > 1e-10 for x in xs + _float_outputs(g(*xs))):
        # single precision somewhere: differences this fine are mostly rounding error
        eps, rtol, atol = max(eps, 1e-3), max(rtol, 2e-2), max(atol, 2e-2)
    _check(g, xs, order, tuple(modes), eps, rtol, atol, rng)


def _is_int_like(a: Any) -> bool:
    return isinstance(a, bool | int)


def _check(
    f: Callable[..., Any], xs: list[Any], order: int, modes: tuple[Any, ...], eps: float,
    rtol: float, atol: float,
    rng: np.random.Generator,
) -> None:  # fmt: skip
    tangents = [_random_like(rng, x) for x in xs]
    if "fwd" in modes:
        out, tan = jvp(f, tuple(xs), tuple(tangents))
        want = _numerical_jvp(f, xs, tangents, eps)
        got = _float_outputs_aligned(out, tan)
        for k, (w, t) in enumerate(zip(want, got, strict=True)):
            _assert_close(t, w, rtol, atol, f"JVP (order {order}) of output {k}")
        if order > 1:
            n = len(xs)

            def f_jvp(*xt: Any) -> Any:
                return jvp(f, tuple(xt[:n]), tuple(xt[n:]))[1]

            _check(f_jvp, xs + tangents, order - 1, modes, eps, rtol, atol, rng)
    if "rev" in modes:
        out, pull = vjp(f, *xs)
        outs = _float_outputs(out)
        cts = [_random_like(rng, o) for o in outs]
        ct_tree = _ct_tree(out, cts)
        grads = list(pull(ct_tree))
        want = _numerical_jvp(f, xs, tangents, eps)
        lhs = _pair(cts, want)
        rhs = _pair([np.asarray(g) for g in grads], tangents)
        scale = max(1.0, abs(lhs))
        _assert_close(rhs / scale, lhs / scale, rtol, atol, f"VJP (order {order})")
        if order > 1:
            n = len(xs)
            leaves, treedef = optree.tree_flatten(ct_tree, is_leaf=_is_leaf)

            def f_vjp(*xc: Any) -> Any:
                return vjp(f, *xc[:n])[1](optree.tree_unflatten(treedef, list(xc[n:])))

            _check(f_vjp, xs + [np.asarray(c) for c in leaves], order - 1, modes, eps, rtol,
                   atol, rng)  # fmt: skip


def _float_outputs_aligned(out: Any, tan: Any) -> list[Any]:
    return [
        np.asarray(t)
        for o, t in zip(_leaves(out), _leaves(tan), strict=True)
        if is_float(np.asarray(o))
    ]


def _ct_tree(out: Any, cts: list[Any]) -> Any:
    """A cotangent with the structure of `out`: `cts` for float leaves, zeros elsewhere."""
    leaves, treedef = optree.tree_flatten(out, is_leaf=_is_leaf)
    it = iter(cts)
    filled = [next(it) if is_float(np.asarray(x)) else np.zeros_like(x) for x in leaves]
    return optree.tree_unflatten(treedef, filled)
