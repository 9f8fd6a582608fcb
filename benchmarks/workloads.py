"""The benchmark workloads w1-w9, each written once per method.

A `Workload` holds the per-example function in plain NumPy (the loop's body and
`np.vectorize`'s), the hand-vectorized NumPy a careful person would write, and the
batched function of each library: vmapx, `torch.func.vmap` and `jax.vmap`. Every
method takes the same arguments (NumPy arrays, or the library's own arrays made from
them before timing) and returns a pytree of arrays (tuples and dicts).

For the gradient workloads (w3, w4, w9) the loop's body is the per-example gradient
derived by hand: the plain-NumPy program that a loop would run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

import vmapx

Rng = np.random.Generator


@dataclass(frozen=True)
class Workload:
    """One row of the benchmark table.

    - `key`, `title`: the id (`w6-norm`) and a short description.
    - `batch`: the batch size B of the benchmark (tests use a few examples).
    - `work`: elements one example touches; at least 1 000 means the workload is
      compute-bound (target 1.2x of hand-vectorized NumPy), else overhead-bound (2x).
    - `inputs(rng, B)`: the arguments; `in_axes`: 0 (mapped) or None per argument.
    - `example`: the per-example function in plain NumPy (the loop's body).
    - `hand`: the hand-vectorized NumPy of the whole batch.
    - `vmapx(vmapx)`: the batched function built with vmapx.
    - `signature`: `np.vectorize`'s signature, or None where it does not apply.
    - `torch(torch)` / `jax(jax, jnp)`: the batched function built with that library's
      vmap (None: not written for that library).
    - `needs`: vmapx names the vmapx method uses (`grad`, `vjp`); skipped until they exist.
    """

    key: str
    title: str
    batch: int
    work: int
    inputs: Callable[[Rng, int], tuple]
    in_axes: tuple
    example: Callable
    hand: Callable
    vmapx: Callable[[Any], Callable]
    signature: str | None = None
    torch: Callable[[Any], Callable] | None = None
    jax: Callable[[Any, Any], Callable] | None = None
    needs: tuple[str, ...] = ()
    rtol: float = 1e-9
    atol: float = 1e-12

    @property
    def overhead_bound(self) -> bool:
        return self.work < 1000

    def missing(self) -> list[str]:
        """The vmapx names this workload needs that vmapx does not have yet."""
        return [name for name in self.needs if not hasattr(vmapx, name)]


# -- w1: batched dot ------------------------------------------------------------------


def _w1_inputs(rng: Rng, b: int) -> tuple:
    return rng.standard_normal((b, 64)), rng.standard_normal((b, 64))


def _dot(x: Any, y: Any) -> Any:
    return x @ y


W1 = Workload(
    key="w1",
    title="batched dot, x,y (64,)",
    batch=10_000,
    work=128,
    inputs=_w1_inputs,
    in_axes=(0, 0),
    example=_dot,
    hand=lambda x, y: np.einsum("bi,bi->b", x, y),
    vmapx=lambda vx: vx.vmap(_dot),
    signature="(n),(n)->()",
    torch=lambda torch: torch.func.vmap(_dot),
    jax=lambda jax, jnp: jax.vmap(_dot),
)


# -- w2: MLP forward ------------------------------------------------------------------


def _w2_inputs(rng: Rng, b: int) -> tuple:
    w1, b1 = rng.standard_normal((64, 32)) / 6, rng.standard_normal(64)
    w2, b2 = rng.standard_normal((10, 64)) / 8, rng.standard_normal(10)
    return rng.standard_normal((b, 32)), w1, b1, w2, b2


def _mlp(lib: Any) -> Callable:
    def f(x: Any, w1: Any, b1: Any, w2: Any, b2: Any) -> Any:
        return lib.tanh(w2 @ lib.tanh(w1 @ x + b1) + b2)

    return f


def _w2_hand(x: Any, w1: Any, b1: Any, w2: Any, b2: Any) -> Any:
    return np.tanh(np.tanh(x @ w1.T + b1) @ w2.T + b2)


_W2_AXES = (0, None, None, None, None)
W2 = Workload(
    key="w2",
    title="MLP forward 32-64-10",
    batch=4096,
    work=64 * 32 + 10 * 64,
    inputs=_w2_inputs,
    in_axes=_W2_AXES,
    example=_mlp(np),
    hand=_w2_hand,
    vmapx=lambda vx: vx.vmap(_mlp(np), in_axes=_W2_AXES),
    signature="(n),(h,n),(h),(k,h),(k)->(k)",
    torch=lambda torch: torch.func.vmap(_mlp(torch), in_dims=_W2_AXES),
    jax=lambda jax, jnp: jax.vmap(_mlp(jnp), in_axes=_W2_AXES),
)


# -- w3: per-example gradients of a linear least-squares loss -------------------------


def _w3_inputs(rng: Rng, b: int) -> tuple:
    return (
        rng.standard_normal((32, 1)),
        rng.standard_normal(1),
        rng.standard_normal((b, 32)),
        rng.standard_normal((b, 1)),
    )


def _lsq(lib: Any) -> Callable:
    def loss(w: Any, b: Any, x: Any, y: Any) -> Any:
        return 0.5 * lib.sum((x @ w + b - y) ** 2)

    return loss


def _w3_example(w: Any, b: Any, x: Any, y: Any) -> tuple:
    r = x @ w + b - y
    return np.outer(x, r), r


def _w3_hand(w: Any, b: Any, x: Any, y: Any) -> tuple:
    r = x @ w + b - y
    return x[:, :, None] * r[:, None, :], r


_W3_AXES = (None, None, 0, 0)
W3 = Workload(
    key="w3",
    title="per-example grads, linear lsq",
    batch=1024,
    work=32,
    inputs=_w3_inputs,
    in_axes=_W3_AXES,
    example=_w3_example,
    hand=_w3_hand,
    vmapx=lambda vx: vx.vmap(vx.grad(_lsq(np), argnums=(0, 1)), in_axes=_W3_AXES),
    signature="(n,o),(o),(n),(o)->(n,o),(o)",
    torch=lambda torch: torch.func.vmap(
        torch.func.grad(_lsq(torch), argnums=(0, 1)), in_dims=_W3_AXES
    ),
    jax=lambda jax, jnp: jax.vmap(jax.grad(_lsq(jnp), argnums=(0, 1)), in_axes=_W3_AXES),
    needs=("grad",),
)


# -- w4: Jacobian rows by vmap over a vjp ---------------------------------------------


def _w4_inputs(rng: Rng, b: int) -> tuple:
    return np.eye(b), rng.standard_normal(b)


def _elementwise(lib: Any) -> Callable:
    return lambda x: x**2 + lib.sin(x)


def _w4_example(row: Any, x: Any) -> Any:
    return row * (2 * x + np.cos(x))


def _w4_hand(eye: Any, x: Any) -> Any:
    return eye * (2 * x + np.cos(x))


def _jacobian_rows(vjp: Callable, vmap: Callable, g: Callable) -> Callable:
    def jac(eye: Any, x: Any) -> Any:
        _, pullback = vjp(g, x)
        return vmap(lambda row: pullback(row)[0])(eye)

    return jac


def _w4_torch(torch: Any) -> Callable:
    return _jacobian_rows(torch.func.vjp, torch.func.vmap, _elementwise(torch))


W4 = Workload(
    key="w4",
    title="Jacobian of x**2+sin(x), x (256,)",
    batch=256,
    work=256,
    inputs=_w4_inputs,
    in_axes=(0, None),
    example=_w4_example,
    hand=_w4_hand,
    vmapx=lambda vx: _jacobian_rows(vx.vjp, vx.vmap, _elementwise(np)),
    signature="(n),(n)->(n)",
    torch=_w4_torch,
    jax=lambda jax, jnp: _jacobian_rows(jax.vjp, jax.vmap, _elementwise(jnp)),
    needs=("vjp",),
)


# -- w5: outer product (the tf.vectorized_map documentation example) ------------------


def _w5(n: int) -> Workload:
    def inputs(rng: Rng, b: int) -> tuple:
        return (rng.standard_normal((b, n, n)),)

    def outer(a: Any) -> Any:
        return np.tensordot(a, a, 0)

    return Workload(
        key=f"w5-{n}",
        title=f"tensordot(a, a, 0), a ({n},{n})",
        batch=100,
        work=n**4,
        inputs=inputs,
        in_axes=(0,),
        example=outer,
        hand=lambda a: a[:, :, :, None, None] * a[:, None, None, :, :],
        vmapx=lambda vx: vx.vmap(outer),
        signature="(n,m)->(n,m,n,m)",
        torch=lambda torch: torch.func.vmap(lambda a: torch.tensordot(a, a, dims=0)),
        jax=lambda jax, jnp: jax.vmap(lambda a: jnp.tensordot(a, a, 0)),
    )


W5_8, W5_16 = _w5(8), _w5(16)


# -- w6: images -----------------------------------------------------------------------


def _w6_inputs(rng: Rng, b: int) -> tuple:
    return (rng.uniform(0.0, 1.0, (b, 64, 64, 3)),)


def _normalize(img: Any) -> Any:
    return (img - img.mean()) / (img.std() + 1e-6)


def _normalize_torch(torch: Any) -> Callable:
    # torch's std is the sample std by default; NumPy's is the population std
    return lambda img: (img - img.mean()) / (img.std(correction=0) + 1e-6)


def _w6_hand_norm(imgs: Any) -> Any:
    mean = imgs.mean(axis=(1, 2, 3), keepdims=True)
    return (imgs - mean) / (imgs.std(axis=(1, 2, 3), keepdims=True) + 1e-6)


W6_SQRT = Workload(
    key="w6-sqrt",
    title="sqrt(img), img (64,64,3)",
    batch=100,
    work=64 * 64 * 3,
    inputs=_w6_inputs,
    in_axes=(0,),
    example=np.sqrt,
    hand=np.sqrt,
    vmapx=lambda vx: vx.vmap(np.sqrt),
    signature="(h,w,c)->(h,w,c)",
    torch=lambda torch: torch.func.vmap(torch.sqrt),
    jax=lambda jax, jnp: jax.vmap(jnp.sqrt),
)
W6_NORM = Workload(
    key="w6-norm",
    title="(img - mean) / (std + 1e-6)",
    batch=100,
    work=64 * 64 * 3,
    inputs=_w6_inputs,
    in_axes=(0,),
    example=_normalize,
    hand=_w6_hand_norm,
    vmapx=lambda vx: vx.vmap(_normalize),
    signature="(h,w,c)->(h,w,c)",
    torch=lambda torch: torch.func.vmap(_normalize_torch(torch)),
    jax=lambda jax, jnp: jax.vmap(_normalize),
)


# -- w7: tiny examples, overhead-bound ------------------------------------------------


def _twice_sum(x: Any) -> Any:
    return x.sum() * 2


W7 = Workload(
    key="w7",
    title="x.sum() * 2, x (4,)",
    batch=100_000,
    work=4,
    inputs=lambda rng, b: (rng.standard_normal((b, 4)),),
    in_axes=(0,),
    example=_twice_sum,
    hand=lambda x: x.sum(axis=1) * 2,
    vmapx=lambda vx: vx.vmap(_twice_sum),
    signature="(n)->()",
    torch=lambda torch: torch.func.vmap(_twice_sum),
    jax=lambda jax, jnp: jax.vmap(_twice_sum),
)


# -- w8: distances to a fixed point set -----------------------------------------------


def _w8_inputs(rng: Rng, b: int) -> tuple:
    return rng.standard_normal((b, 3)), rng.standard_normal((512, 3))


def _distances(lib: Any) -> Callable:
    return lambda x, ys: lib.sqrt(((ys - x) ** 2).sum(-1))


W8 = Workload(
    key="w8",
    title="distances, x (3,) to Y (512,3)",
    batch=2048,
    work=512 * 3,
    inputs=_w8_inputs,
    in_axes=(0, None),
    example=_distances(np),
    hand=lambda x, ys: np.sqrt(((ys[None] - x[:, None]) ** 2).sum(-1)),
    vmapx=lambda vx: vx.vmap(_distances(np), in_axes=(0, None)),
    signature="(d),(m,d)->(m)",
    torch=lambda torch: torch.func.vmap(_distances(torch), in_dims=(0, None)),
    jax=lambda jax, jnp: jax.vmap(_distances(jnp), in_axes=(0, None)),
)


# -- w9: per-example gradients of an MLP classifier -----------------------------------


def _w9_inputs(rng: Rng, b: int) -> tuple:
    params = {
        "w1": rng.standard_normal((784, 128)) / 28,
        "b1": rng.standard_normal(128) / 10,
        "w2": rng.standard_normal((128, 10)) / 11,
        "b2": rng.standard_normal(10) / 10,
    }
    labels = rng.integers(0, 10, b)
    return params, rng.uniform(0.0, 1.0, (b, 784)), np.eye(10)[labels]


def xent_of_logits(lib: Any, z: Any, onehot: Any) -> Any:
    """Softmax cross-entropy of logits `z` against a one-hot label, in `lib`."""
    z = z - lib.max(z)
    return lib.log(lib.sum(lib.exp(z))) - lib.sum(onehot * z)


def _xent(lib: Any) -> Callable:
    def loss(p: dict, x: Any, onehot: Any) -> Any:
        h = lib.tanh(x @ p["w1"] + p["b1"])
        return xent_of_logits(lib, h @ p["w2"] + p["b2"], onehot)

    return loss


def _w9_example(p: dict, x: Any, onehot: Any) -> dict:
    h = np.tanh(x @ p["w1"] + p["b1"])
    z = h @ p["w2"] + p["b2"]
    e = np.exp(z - z.max())
    dz = e / e.sum() - onehot
    dh = (p["w2"] @ dz) * (1 - h**2)
    return {"w1": np.outer(x, dh), "b1": dh, "w2": np.outer(h, dz), "b2": dz}


def _w9_hand(p: dict, x: Any, onehot: Any) -> dict:
    h = np.tanh(x @ p["w1"] + p["b1"])
    z = h @ p["w2"] + p["b2"]
    e = np.exp(z - z.max(axis=1, keepdims=True))
    dz = e / e.sum(axis=1, keepdims=True) - onehot
    dh = (dz @ p["w2"].T) * (1 - h**2)
    return {
        "w1": x[:, :, None] * dh[:, None, :],
        "b1": dh,
        "w2": h[:, :, None] * dz[:, None, :],
        "b2": dz,
    }


_W9_AXES = (None, 0, 0)
W9 = Workload(
    key="w9",
    title="MLP 784-128-10 per-example grads",
    batch=256,
    work=784 * 128,
    inputs=_w9_inputs,
    in_axes=_W9_AXES,
    example=_w9_example,
    hand=_w9_hand,
    vmapx=lambda vx: vx.vmap(vx.grad(_xent(np)), in_axes=_W9_AXES),
    torch=lambda torch: torch.func.vmap(torch.func.grad(_xent(torch)), in_dims=_W9_AXES),
    jax=lambda jax, jnp: jax.vmap(jax.grad(_xent(jnp)), in_axes=_W9_AXES),
    needs=("grad",),
    rtol=1e-8,
)

WORKLOADS: list[Workload] = [W1, W2, W3, W4, W5_8, W5_16, W6_SQRT, W6_NORM, W7, W8, W9]


# -- the loop and the pytree helpers shared by the runner and the tests -----------------


def batch_size(w: Workload, args: tuple) -> int:
    return next(len(a) for a, ax in zip(args, w.in_axes, strict=True) if ax is not None)


def loop(w: Workload, args: tuple) -> Any:
    """The Python loop: `example` once per example, results stacked with `np.stack`."""
    n = batch_size(w, args)
    results = [
        w.example(*(a if ax is None else a[i] for a, ax in zip(args, w.in_axes, strict=True)))
        for i in range(n)
    ]
    return stack_tree(results)


def stack_tree(results: list) -> Any:
    first = results[0]
    if isinstance(first, dict):
        return {k: stack_tree([r[k] for r in results]) for k in first}
    if isinstance(first, tuple | list):
        return tuple(stack_tree([r[i] for r in results]) for i in range(len(first)))
    return np.stack(results)


def leaves(tree: Any) -> list[np.ndarray]:
    """The arrays of a result as NumPy arrays (dicts in key order, torch/jax converted)."""
    if isinstance(tree, dict):
        return [leaf for k in sorted(tree) for leaf in leaves(tree[k])]
    if isinstance(tree, tuple | list):
        return [leaf for t in tree for leaf in leaves(t)]
    if hasattr(tree, "detach"):  # a torch tensor
        tree = tree.detach().cpu().numpy()
    return [np.asarray(tree)]


def compare(w: Workload, got: Any, expected: Any, method: str) -> None:
    """Raise AssertionError unless `got` equals the loop's result (shapes and values)."""
    g, e = leaves(got), leaves(expected)
    if len(g) != len(e):
        raise AssertionError(f"{w.key} {method}: {len(g)} outputs, the loop gives {len(e)}")
    for i, (a, b) in enumerate(zip(g, e, strict=True)):
        if a.shape != b.shape:
            raise AssertionError(f"{w.key} {method}: output {i} has shape {a.shape}, not {b.shape}")
        if a.dtype != b.dtype:  # float64 throughout; indices (argmin) are the loop's int64
            raise AssertionError(f"{w.key} {method}: output {i} is {a.dtype}, not {b.dtype}")
        np.testing.assert_allclose(
            a, b, rtol=w.rtol, atol=w.atol, err_msg=f"{w.key} {method} output {i}"
        )
