"""More benchmark workloads (w11-w21), in the classes users write, several sizes each.

Each class is one kind of program that the first workloads (w1-w9) do not cover:

- w11 per-example Hessians of a small function (`vmap(hessian(f))`);
- w12 per-example Jacobians by forward mode (`vmap(jacfwd(f))`);
- w13 per-example gradients of a tiny model (`vmap(grad(loss))`);
- w14 an integrator step: about 40 small elementwise calls on (2,)-shaped states;
- w15 nearest centroid: broadcast differences against shared points, then argmin/min;
- w16 `np.convolve` with a shared kernel;
- w17 attention-like `softmax(q kᵀ) v` per example;
- w18 per-example Cholesky factor and two solves with it;
- w19 per-example softmax cross-entropy gradients of a linear classifier;
- w20 statistics of a short vector per example (reductions over a short axis);
- w21 a bag-of-words classifier: rows of a shared embedding table looked up by the
  example's tokens (`E[tokens]`, the table passed with `in_axes=None`), averaged, then
  a linear layer and log-softmax.

As in `workloads.py`, the loop's body of a gradient workload is the gradient derived by
hand, and "hand" is the batched NumPy a careful person writes. For w15 "hand" is the
direct broadcast (as for w8); the expanded form `|x|² + |c|² - 2 x·c` is faster still and
is timed in `formulations.py`, apart, because its rounding differs from the loop's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from workloads import Rng, Workload, xent_of_logits


def _vmapped(fn: Callable, axes: tuple, torch_fn: Callable | None = None) -> dict:
    """The `vmapx`, `torch` and `jax` fields of a workload: each library's vmap of
    `fn(lib)` (of `torch_fn(torch)` where torch's API differs)."""
    of_torch = torch_fn or fn
    return {
        "vmapx": lambda vx: vx.vmap(fn(np), in_axes=axes),
        "torch": lambda torch: torch.func.vmap(of_torch(torch), in_dims=axes),
        "jax": lambda jax, jnp: jax.vmap(fn(jnp), in_axes=axes),
    }


# -- w11: per-example Hessian of a log-sum-exp with a quadratic term ---------------------


def _lse_quad(lib: Any) -> Callable:
    def f(x: Any, c: Any) -> Any:
        m = lib.max(x)
        return lib.log(lib.sum(lib.exp(x - m))) + m + 0.5 * lib.sum(c * x * x)

    return f


def _w11_example(x: Any, c: Any) -> Any:
    e = np.exp(x - x.max())
    p = e / e.sum()
    return np.diag(p) - np.outer(p, p) + np.diag(c)


def _w11_hand(x: Any, c: Any) -> Any:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    p = e / e.sum(axis=1, keepdims=True)
    d = x.shape[1]
    eye = np.eye(d)
    return (p[:, :, None] * eye) - p[:, :, None] * p[:, None, :] + c * eye


def _jacobian_workload(
    key: str, title: str, transform: str, fn: Callable, example: Callable, hand: Callable,
    inputs: Callable, d: int, batch: int, signature: str,
) -> Workload:  # fmt: skip
    """`vmap(transform(fn(lib)), in_axes=(0, None))` per library (`transform`: the name
    of `hessian` or `jacfwd` in vmapx, `torch.func` and `jax`)."""
    axes = (0, None)
    return Workload(
        key=key,
        title=title,
        batch=batch,
        work=d * d,
        inputs=inputs,
        in_axes=axes,
        example=example,
        hand=hand,
        vmapx=lambda vx: vx.vmap(getattr(vx, transform)(fn(np)), in_axes=axes),
        signature=signature,
        torch=lambda torch: torch.func.vmap(
            getattr(torch.func, transform)(fn(torch)), in_dims=axes
        ),
        jax=lambda jax, jnp: jax.vmap(getattr(jax, transform)(fn(jnp)), in_axes=axes),
        needs=(transform,),
        rtol=1e-8,
    )


def _w11(d: int, batch: int) -> Workload:
    def inputs(rng: Rng, b: int) -> tuple:
        return rng.standard_normal((b, d)), rng.uniform(0.5, 1.5, d)

    title = f"vmap(hessian(f)), logsumexp + quadratic, x ({d},)"
    return _jacobian_workload(
        f"w11-{d}", title, "hessian", _lse_quad, _w11_example, _w11_hand, inputs, d, batch,
        "(d),(d)->(d,d)",
    )  # fmt: skip


# -- w12: per-example Jacobian by forward mode -------------------------------------------


def _tanh_layer(lib: Any) -> Callable:
    return lambda x, w: lib.tanh(w @ x) + x * x


def _w12_example(x: Any, w: Any) -> Any:
    t = np.tanh(w @ x)
    return (1 - t * t)[:, None] * w + np.diag(2 * x)


def _w12_hand(x: Any, w: Any) -> Any:
    t = np.tanh(x @ w.T)
    return (1 - t * t)[:, :, None] * w + (2 * x)[:, :, None] * np.eye(x.shape[1])


def _w12(d: int, batch: int) -> Workload:
    def inputs(rng: Rng, b: int) -> tuple:
        return rng.standard_normal((b, d)), rng.standard_normal((d, d)) / np.sqrt(d)

    title = f"vmap(jacfwd(f)), tanh(W x) + x², x ({d},)"
    return _jacobian_workload(
        f"w12-{d}", title, "jacfwd", _tanh_layer, _w12_example, _w12_hand, inputs, d, batch,
        "(d),(d,d)->(d,d)",
    )  # fmt: skip


# -- w13: per-example gradients of a tiny MLP (4 -> h -> 1), squared error ----------------


def _tiny_mlp(lib: Any) -> Callable:
    def loss(p: dict, x: Any, y: Any) -> Any:
        h = lib.tanh(p["w1"] @ x + p["b1"])
        r = p["w2"] @ h + p["b2"] - y
        return 0.5 * lib.sum(r * r)

    return loss


def _w13_example(p: dict, x: Any, y: Any) -> dict:
    h = np.tanh(p["w1"] @ x + p["b1"])
    r = p["w2"] @ h + p["b2"] - y
    dh = r * p["w2"] * (1 - h * h)
    return {"b1": dh, "b2": r, "w1": np.outer(dh, x), "w2": r * h}


def _w13_hand(p: dict, x: Any, y: Any) -> dict:
    h = np.tanh(x @ p["w1"].T + p["b1"])
    r = (h @ p["w2"])[:, None] + p["b2"] - y
    dh = r * p["w2"] * (1 - h * h)
    return {"b1": dh, "b2": r, "w1": dh[:, :, None] * x[:, None, :], "w2": r * h}


def _w13(hidden: int, batch: int) -> Workload:
    def inputs(rng: Rng, b: int) -> tuple:
        params = {
            "w1": rng.standard_normal((hidden, 4)) / 2,
            "b1": rng.standard_normal(hidden) / 4,
            "w2": rng.standard_normal(hidden) / np.sqrt(hidden),
            "b2": rng.standard_normal(1),
        }
        return params, rng.standard_normal((b, 4)), rng.standard_normal((b, 1))

    axes = (None, 0, 0)
    return Workload(
        key=f"w13-{hidden}",
        title=f"vmap(grad) of an MLP 4-{hidden}-1",
        batch=batch,
        work=hidden * 6,
        inputs=inputs,
        in_axes=axes,
        example=_w13_example,
        hand=_w13_hand,
        vmapx=lambda vx: vx.vmap(vx.grad(_tiny_mlp(np)), in_axes=axes),
        torch=lambda torch: torch.func.vmap(torch.func.grad(_tiny_mlp(torch)), in_dims=axes),
        jax=lambda jax, jnp: jax.vmap(jax.grad(_tiny_mlp(jnp)), in_axes=axes),
        needs=("grad",),
    )


# -- w14: one RK4 step of a damped pendulum (about 40 calls on (2,)-states) -------------


def _rk4(lib: Any) -> Callable:
    def field(s: Any) -> Any:
        return lib.stack([s[1], -lib.sin(s[0]) - 0.1 * s[1]])

    def step(s: Any) -> Any:
        h = 0.05
        k1 = field(s)
        k2 = field(s + (h / 2) * k1)
        k3 = field(s + (h / 2) * k2)
        k4 = field(s + h * k3)
        return s + (h / 6) * (k1 + 2 * k2 + 2 * k3 + k4)

    return step


def _w14_hand(s: Any) -> Any:
    def field(s: Any) -> Any:
        return np.stack([s[:, 1], -np.sin(s[:, 0]) - 0.1 * s[:, 1]], axis=1)

    h = 0.05
    k1 = field(s)
    k2 = field(s + (h / 2) * k1)
    k3 = field(s + (h / 2) * k2)
    k4 = field(s + h * k3)
    return s + (h / 6) * (k1 + 2 * k2 + 2 * k3 + k4)


def _w14(batch: int) -> Workload:
    return Workload(
        key=f"w14-{batch // 1000}k",
        title="RK4 step of a pendulum, state (2,)",
        batch=batch,
        work=2,
        inputs=lambda rng, b: (rng.standard_normal((b, 2)),),
        in_axes=(0,),
        example=_rk4(np),
        hand=_w14_hand,
        signature="(n)->(n)",
        **_vmapped(_rk4, (0,)),
    )


# -- w15: nearest centroid ---------------------------------------------------------------


def _nearest(lib: Any) -> Callable:
    def f(x: Any, c: Any) -> tuple:
        d2 = ((c - x) ** 2).sum(-1)
        return lib.argmin(d2), lib.min(d2)

    return f


def _w15_hand(x: Any, c: Any) -> tuple:
    d2 = ((c[None] - x[:, None]) ** 2).sum(-1)
    return d2.argmin(axis=1), d2.min(axis=1)


def _w15(k: int, d: int, batch: int) -> Workload:
    def inputs(rng: Rng, b: int) -> tuple:
        return rng.standard_normal((b, d)), rng.standard_normal((k, d))

    return Workload(
        key=f"w15-{k}x{d}",
        title=f"nearest centroid, x ({d},) among C ({k},{d})",
        batch=batch,
        work=k * d,
        inputs=inputs,
        in_axes=(0, None),
        example=_nearest(np),
        hand=_w15_hand,
        signature="(d),(k,d)->(),()",
        **_vmapped(_nearest, (0, None)),
    )


# -- w16: np.convolve with a shared kernel -----------------------------------------------


def _w16_hand(x: Any, k: Any) -> Any:
    m = len(k)
    padded = np.pad(x, ((0, 0), (m - 1, m - 1)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, m, axis=1)
    return windows @ k[::-1]


def _w16_torch(torch: Any) -> Callable:
    conv1d = torch.nn.functional.conv1d

    def f(x: Any, k: Any) -> Any:
        m = k.shape[0]
        return conv1d(x[None, None], k.flip(0)[None, None], padding=m - 1)[0, 0]

    return torch.func.vmap(f, in_dims=(0, None))


def _w16(n: int, m: int, batch: int) -> Workload:
    def inputs(rng: Rng, b: int) -> tuple:
        return rng.standard_normal((b, n)), rng.standard_normal(m)

    return Workload(
        key=f"w16-{n}x{m}",
        title=f"np.convolve(x, k), x ({n},), shared k ({m},)",
        batch=batch,
        work=n * m,
        inputs=inputs,
        in_axes=(0, None),
        example=np.convolve,
        hand=_w16_hand,
        vmapx=lambda vx: vx.vmap(np.convolve, in_axes=(0, None)),
        signature="(n),(m)->(p)",
        torch=_w16_torch,
        jax=lambda jax, jnp: jax.vmap(jnp.convolve, in_axes=(0, None)),
    )


# -- w17: attention-like softmax(q kᵀ / sqrt(d)) v per example ---------------------------


def _attention(lib: Any) -> Callable:
    def f(q: Any, k: Any, v: Any) -> Any:
        s = q @ k.T / np.sqrt(q.shape[-1])
        e = lib.exp(s - lib.amax(s, -1, keepdims=True))
        return (e / e.sum(-1, keepdims=True)) @ v

    return f


def _attention_torch(torch: Any) -> Callable:
    def f(q: Any, k: Any, v: Any) -> Any:
        s = q @ k.T / np.sqrt(q.shape[-1])
        e = torch.exp(s - torch.amax(s, -1, keepdim=True))
        return (e / e.sum(-1, keepdim=True)) @ v

    return f


def _w17_hand(q: Any, k: Any, v: Any) -> Any:
    s = q @ k.transpose(0, 2, 1) / np.sqrt(q.shape[-1])
    e = np.exp(s - s.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)) @ v


def _w17(t: int, d: int, batch: int) -> Workload:
    def inputs(rng: Rng, b: int) -> tuple:
        return tuple(rng.standard_normal((b, t, d)) for _ in range(3))

    return Workload(
        key=f"w17-{t}x{d}",
        title=f"softmax(q kᵀ) v, q,k,v ({t},{d})",
        batch=batch,
        work=t * t * d,
        inputs=inputs,
        in_axes=(0, 0, 0),
        example=_attention(np),
        hand=_w17_hand,
        signature="(t,d),(t,d),(t,d)->(t,d)",
        **_vmapped(_attention, (0, 0, 0), _attention_torch),
    )


# -- w18: per-example Cholesky factor and two solves -------------------------------------


def _chol_solve(lib: Any) -> Callable:
    linalg = lib.linalg

    def f(a: Any, b: Any) -> Any:
        low = linalg.cholesky(a)
        return linalg.solve(low.T, linalg.solve(low, b))

    return f


def _w18_hand(a: Any, b: Any) -> Any:
    low = np.linalg.cholesky(a)
    y = np.linalg.solve(low, b[:, :, None])
    return np.linalg.solve(low.transpose(0, 2, 1), y)[:, :, 0]


def _chol_solve_torch(torch: Any) -> Callable:
    def f(a: Any, b: Any) -> Any:
        low = torch.linalg.cholesky(a)
        y = torch.linalg.solve_triangular(low, b[:, None], upper=False)
        return torch.linalg.solve_triangular(low.T, y, upper=True)[:, 0]

    return f


def _w18(n: int, batch: int) -> Workload:
    def inputs(rng: Rng, bsize: int) -> tuple:
        g = rng.standard_normal((bsize, n, n))
        return g @ g.transpose(0, 2, 1) + n * np.eye(n), rng.standard_normal((bsize, n))

    return Workload(
        key=f"w18-{n}",
        title=f"cholesky + 2 solves, A ({n},{n})",
        batch=batch,
        work=n * n * n,
        inputs=inputs,
        in_axes=(0, 0),
        example=_chol_solve(np),
        hand=_w18_hand,
        signature="(n,n),(n)->(n)",
        **_vmapped(_chol_solve, (0, 0), _chol_solve_torch),
        rtol=1e-8,
    )


# -- w19: per-example softmax cross-entropy gradients of a linear classifier -------------


def _linear_xent(lib: Any) -> Callable:
    return lambda w, x, onehot: xent_of_logits(lib, x @ w, onehot)


def _w19_example(w: Any, x: Any, onehot: Any) -> Any:
    e = np.exp(x @ w - (x @ w).max())
    return np.outer(x, e / e.sum() - onehot)


def _w19_hand(w: Any, x: Any, onehot: Any) -> Any:
    z = x @ w
    e = np.exp(z - z.max(axis=1, keepdims=True))
    dz = e / e.sum(axis=1, keepdims=True) - onehot
    return x[:, :, None] * dz[:, None, :]


def _w19(d: int, classes: int, batch: int) -> Workload:
    def inputs(rng: Rng, b: int) -> tuple:
        labels = rng.integers(0, classes, b)
        w = rng.standard_normal((d, classes)) / np.sqrt(d)
        return w, rng.standard_normal((b, d)), np.eye(classes)[labels]

    axes = (None, 0, 0)
    return Workload(
        key=f"w19-{d}x{classes}",
        title=f"softmax x-entropy grads, W ({d},{classes})",
        batch=batch,
        work=d * classes,
        inputs=inputs,
        in_axes=axes,
        example=_w19_example,
        hand=_w19_hand,
        vmapx=lambda vx: vx.vmap(vx.grad(_linear_xent(np)), in_axes=axes),
        signature="(d,c),(d),(c)->(d,c)",
        torch=lambda torch: torch.func.vmap(torch.func.grad(_linear_xent(torch)), in_dims=axes),
        jax=lambda jax, jnp: jax.vmap(jax.grad(_linear_xent(jnp)), in_axes=axes),
        needs=("grad",),
    )


# -- w20: per-example statistics of a short vector --------------------------------------


def _short_stats(lib: Any) -> Callable:
    def f(x: Any) -> Any:
        centred = x - lib.mean(x)
        scale = lib.sqrt(lib.mean(centred * centred)) + 1e-6
        return lib.max(centred / scale) - lib.min(centred / scale) + lib.sqrt(lib.sum(x * x))

    return f


def _w20_hand(x: Any) -> Any:
    centred = x - x.mean(axis=1, keepdims=True)
    scale = np.sqrt((centred * centred).mean(axis=1, keepdims=True)) + 1e-6
    z = centred / scale
    return z.max(axis=1) - z.min(axis=1) + np.sqrt((x * x).sum(axis=1))


def _w20(d: int, batch: int) -> Workload:
    return Workload(
        key=f"w20-{d}",
        title=f"statistics of a short vector (mean, spread, max, min, norm), x ({d},)",
        batch=batch,
        work=d,
        inputs=lambda rng, b: (rng.standard_normal((b, d)),),
        in_axes=(0,),
        example=_short_stats(np),
        hand=_w20_hand,
        signature="(d)->()",
        **_vmapped(_short_stats, (0,)),
    )


# -- w21: bag-of-words classifier over a shared embedding table -----------------------


def _bag_classifier(lib: Any) -> Callable:
    def f(tokens: Any, table: Any, w: Any) -> Any:
        z = lib.mean(table[tokens], axis=0) @ w
        m = lib.max(z)
        return z - (lib.log(lib.sum(lib.exp(z - m))) + m)

    return f


def _w21_hand(tokens: Any, table: Any, w: Any) -> Any:
    z = table[tokens].mean(axis=1) @ w
    m = z.max(axis=1, keepdims=True)
    return z - (np.log(np.exp(z - m).sum(axis=1, keepdims=True)) + m)


def _w21(vocab: int, dim: int, length: int, batch: int) -> Workload:
    classes = 10

    def inputs(rng: Rng, b: int) -> tuple:
        return (
            rng.integers(0, vocab, size=(b, length)),
            rng.standard_normal((vocab, dim)) / 4,
            rng.standard_normal((dim, classes)) / np.sqrt(dim),
        )

    axes = (0, None, None)
    return Workload(
        key=f"w21-{length}x{dim}",
        title=f"bag-of-words classifier, {length} tokens into table ({vocab},{dim})",
        batch=batch,
        work=length * dim,
        inputs=inputs,
        in_axes=axes,
        example=_bag_classifier(np),
        hand=_w21_hand,
        signature="(l),(v,d),(d,c)->(c)",
        **_vmapped(_bag_classifier, axes),
    )


MORE_WORKLOADS: list[Workload] = [
    _w11(4, 2000),
    _w11(16, 500),
    _w12(4, 2000),
    _w12(16, 500),
    _w13(8, 1000),
    _w13(32, 10_000),
    _w14(2000),
    _w14(20_000),
    _w15(64, 8, 4096),
    _w15(256, 16, 2048),
    _w16(256, 8, 2000),
    _w16(1024, 32, 500),
    _w17(16, 8, 1000),
    _w17(64, 32, 200),
    _w18(4, 5000),
    _w18(32, 500),
    _w19(32, 10, 1000),
    _w19(128, 10, 256),
    _w20(4, 100_000),
    _w20(16, 20_000),
    _w21(1000, 16, 8, 4096),
    _w21(5000, 64, 32, 1024),
]
