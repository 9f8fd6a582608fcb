"""A user's script that uses every public name of vmapx, checked with `mypy --strict`
(`make typecheck`): the transforms keep the parameters of the functions they wrap."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

import vmapx
from vmapx import errors

Array = npt.NDArray[np.float64]


def loss(w: Array, x: Array, y: Array) -> Any:
    return 0.5 * np.sum((x @ w - y) ** 2)


@vmapx.jit
def double(x: Array) -> Array:
    return x * 2.0


def vector_norm(x: Array) -> Any:
    return np.sqrt(x @ x)


@vmapx.vmap
def row_norm(x: Array) -> Any:  # (of a batch of vectors: its examples are vectors)
    return vector_norm(x)


@vmapx.grad
def energy(x: Array) -> Any:
    return np.sum(x**2)


def main() -> None:
    w, x, y = np.ones((3, 1)), np.ones((4, 3)), np.ones((4, 1))
    per_example = vmapx.vmap(vmapx.grad(loss), in_axes=(None, 0, 0))
    if TYPE_CHECKING:  # (`make typecheck` matches what mypy says)
        reveal_type(per_example)  # noqa: F821
        reveal_type(vmapx.jit(loss))  # noqa: F821
    per_example(w, x, y)
    fast = vmapx.jit(per_example, static_argnums=(), static_argnames=())
    fast(w, x, y)
    print(fast.lower(w, x, y))
    double(x)
    row_norm(x)
    energy(x[0])
    vmapx.value_and_grad(loss)(w, x[0], y[0])
    vmapx.jacrev(np.sin)(x[0])
    vmapx.jacfwd(np.sin)(x[0])
    vmapx.hessian(energy)(x[0])
    vmapx.jvp(np.sin, (x[0],), (x[0],))
    vmapx.vjp(np.sin, x[0])
    vmapx.linearize(np.sin, x[0])
    vmapx.stop_gradient(x)
    vmapx.vectorized_map(np.sum, x)
    vmapx.vectorize(vector_norm, signature="(n)->()")(x)
    vmapx.check_grads(np.sin, (x[0],), order=1)
    vmapx.cond(True, np.sin, np.cos, x)
    vmapx.switch(0, [np.sin, np.cos], x)
    vmapx.while_loop(lambda v: False, lambda v: v, x)
    vmapx.fori_loop(0, 2, lambda i, v: v, x)
    vmapx.scan(lambda c, v: (c, v), 0.0, x)

    def norm_all(v: Array) -> Any:
        vmapx.debug.print("v={}", v)
        total = vmapx.psum(v, "b") + vmapx.pmean(v, "b") + vmapx.pmax(v, "b")
        return total + vmapx.pmin(v, "b") + vmapx.all_gather(v, "b").sum() + vmapx.axis_index("b")

    vmapx.vmap(norm_all, axis_name="b")(x)
    custom = vmapx.custom_vmap(np.sum)
    custom(x)
    smooth = vmapx.custom_jvp(np.tanh)
    smooth.defjvp(lambda p, t: (np.tanh(p[0]), t[0] * (1 - np.tanh(p[0]) ** 2)))
    clipped = vmapx.custom_vjp(np.tanh)
    clipped.defvjp(lambda v: (np.tanh(v), v), lambda v, g: (g * (1 - np.tanh(v) ** 2),))
    own = vmapx.extend.primitive(np.cosh)
    vmapx.extend.register_jvp(own, lambda p, t: (np.cosh(p[0]), t[0] * np.sinh(p[0])))
    vmapx.grad(lambda v: np.sum(smooth(v) + clipped(v) + own(v)))(x[0])
    vmapx.map(np.sum, [x[0], x[1, :2]])
    vmapx.jacrev(np.sin, chunk_size=2)(x[0])
    vmapx.jacfwd(np.sin, chunk_size=2)(x[0])
    remat = vmapx.checkpoint(vector_norm)
    vmapx.grad(remat)(x[0])
    shape: vmapx.ShapeDtypeStruct = vmapx.eval_shape(
        vector_norm, vmapx.ShapeDtypeStruct((3,), x.dtype)
    )
    assert shape.shape == ()
    vmapx.random.batch_aware(np.random.default_rng(0))
    vmapx.config.fallback = "warn"
    report: dict[Any, str] = vmapx.coverage()
    assert report
    assert issubclass(vmapx.PerformanceWarning, Warning)
    assert issubclass(vmapx.errors.KeywordArgumentWarning, UserWarning)
    assert errors is vmapx.errors


if __name__ == "__main__":
    main()
