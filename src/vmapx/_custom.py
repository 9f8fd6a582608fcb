"""`custom_vmap`, `custom_jvp`, `custom_vjp`: functions whose rules their author gives.

Decorators on `vmapx.extend`'s primitives: the decorated function is one step to the
transforms, handled by the rule its author registers with the decorator's method
(registered in the one registry, like vmapx's own rules). Calling the method again
replaces that function's rule.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._registry import builder
from .extend import PrimitiveFunction, register_batch_rule, register_jvp, register_vjp

__all__ = ["custom_jvp", "custom_vjp", "custom_vmap"]

VmapRule = Callable[..., Any]


class custom_vmap(PrimitiveFunction):  # noqa: N801 (a decorator, named like JAX's)
    """Give a function its own batched implementation (JAX's `custom_vmap`).

    Decorate the function, then register the rule with `@f.def_vmap`. The rule is
    called as `rule(axis_size, in_batched, *args)`: `axis_size` is the batch size,
    `in_batched` has one entry per argument (a pytree of bools shaped like it: is that
    leaf batched?) and `args` are the arguments with batched leaves holding the whole
    batch on axis 0. It returns `(out, out_batched)`: the results, with the batch on
    axis 0 of batched leaves, and a bool (or a pytree prefix of `out` of bools) saying
    which are batched. Without a transform, or outside `vmap`, the function itself runs.
    Keyword arguments are passed to both unbatched.

    Only `vmap` uses the rule: under `vmap(grad(f))` the function itself is
    differentiated (batched through its NumPy calls where it can be). Give it derivative
    rules with `vmapx.extend.register_jvp`/`register_vjp` if it has none.

    **Example:**

    ```python
    >>> import numpy as np, vmapx
    >>> @vmapx.custom_vmap
    ... def norm(x):                      # imagine a compiled extension here
    ...     return float(np.sqrt(x @ x))
    >>> @norm.def_vmap
    ... def norm_rule(axis_size, in_batched, x):
    ...     return np.sqrt(np.einsum("bi,bi->b", x, x)), True
    >>> vmapx.vmap(norm)(np.array([[3.0, 4.0], [6.0, 8.0]]))
    array([ 5., 10.])

    ```
    """

    @builder
    def def_vmap(self, rule: VmapRule) -> VmapRule:
        """Register `rule(axis_size, in_batched, *args) -> (out, out_batched)`."""
        register_batch_rule(self, rule, replace=True)  # this function's own rule: the newest
        return rule


class custom_jvp(PrimitiveFunction):  # noqa: N801 (a decorator, named like JAX's)
    """Give a function its own forward-mode derivative (JAX's `custom_jvp`).

    Decorate the function, then its JVP with `@f.defjvp`:
    `jvp(primals, tangents) -> (primal_out, tangent_out)`, one primal and one tangent
    per positional argument. Reverse mode (`grad`, `vjp`, `jacrev`) transposes it, so
    write it with NumPy operations that are linear in the tangents. It composes with
    `vmap`, `jit`, `jacfwd`, `hessian` and the other transforms.

    **Example:** a numerically stable derivative of `log(1 + exp(x))`:

    ```python
    >>> import numpy as np, vmapx
    >>> @vmapx.custom_jvp
    ... def log1pexp(x):
    ...     return np.log1p(np.exp(x))
    >>> @log1pexp.defjvp
    ... def log1pexp_jvp(primals, tangents):
    ...     (x,), (t,) = primals, tangents
    ...     return log1pexp(x), t * (1 - 1 / (1 + np.exp(x)))
    >>> vmapx.vmap(vmapx.grad(log1pexp))(np.array([0.0, 2.0, 100.0]))
    array([0.5       , 0.88079708, 1.        ])

    ```
    """

    @builder
    def defjvp(self, jvp: Callable[..., Any]) -> Callable[..., Any]:
        """Register `jvp(primals, tangents) -> (primal_out, tangent_out)`."""
        register_jvp(self, jvp, replace=True)  # this function's own rule: the newest
        return jvp


class custom_vjp(PrimitiveFunction):  # noqa: N801 (a decorator, named like JAX's)
    """Give a function its own reverse-mode derivative (JAX's `custom_vjp`).

    Decorate the function, then call `f.defvjp(fwd, bwd)`: `fwd(*args) -> (out,
    residuals)` and `bwd(residuals, g) -> cotangents` (a tuple, one per positional
    argument, `None` for zero). Forward mode (`jvp`, `jacfwd`) transposes it. It
    composes with `vmap`, `jit` and the other transforms.

    **Example:** clip the gradient that flows back through a function:

    ```python
    >>> import numpy as np, vmapx
    >>> @vmapx.custom_vjp
    ... def clip_gradient(x):
    ...     return x
    >>> def fwd(x):
    ...     return x, None
    >>> def bwd(_, g):
    ...     return (np.clip(g, -1.0, 1.0),)
    >>> clip_gradient.defvjp(fwd, bwd)
    >>> vmapx.grad(lambda x: np.sum(clip_gradient(3.0 * x)))(np.ones(2))
    array([3., 3.])
    >>> vmapx.grad(lambda x: np.sum(3.0 * clip_gradient(x)))(np.ones(2))
    array([1., 1.])

    ```
    """

    @builder
    def defvjp(self, fwd: Callable[..., Any], bwd: Callable[..., Any]) -> None:
        """Register `fwd(*args) -> (out, residuals)` and `bwd(residuals, g) -> cotangents`."""
        register_vjp(self, fwd, bwd, replace=True)  # this function's own rule: the newest
