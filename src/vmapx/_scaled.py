"""Deferred scaling of cotangents through elementwise nodes of a VJP tape.

The pullback of an elementwise primitive multiplies the cotangent by a partial
derivative: `g -> g * d`. When the cotangent is much larger than the partial, because
it is batched and the partial is not (the Jacobian rows of `jacrev`, or `vmap` over a
pullback: one cotangent per example, one shared primal), multiplying at every node
costs a batch-sized array per node. The backward pass instead carries the cotangent as
`Scaled(base, scale)`: the batched `base` is left alone while the unbatched partials of
a chain of elementwise nodes are multiplied (and, where paths meet, added) into
`scale`, and `base * scale` is formed once, where a node that is not elementwise, an
input, or a shape change needs the value. For `x**2 + sin(x)` that is one batch-sized
product instead of four batch-sized arrays, in time and in memory.

Only the association of the products changes (`g * (d1 * d2)` for `(g * d1) * d2`), a
rounding-level difference; a cotangent that is not a tracer, or a partial that is one,
takes the plain path.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._compat import astype
from ._core import Tracer


class Scaled:
    """The cotangent `base * scale`, not yet formed: `base` a tracer, `scale` an array
    or number that broadcasts into `base`'s shape without enlarging it."""

    __slots__ = ("base", "scale")

    def __init__(self, base: Tracer, scale: Any) -> None:
        self.base = base
        self.scale = scale

    def value(self) -> Any:
        scale = self.scale
        if type(scale) in (int, float) and scale in (1, -1):  # (no product to form)
            return self.base if scale == 1 else -self.base
        return self.base * scale

    def fits(self, shape: tuple[Any, ...], dtype: np.dtype) -> bool:
        """Whether `base * scale` has exactly `shape` and `dtype` (no broadcast axes to
        sum, no cast), so the product can stay deferred for an operand of that kind."""
        base, scale = self.base, self.scale
        if base.shape != shape:
            return False
        if base.dtype == dtype:  # the common cases without NumPy's slower helpers
            if type(scale) in (int, float):
                return dtype.kind in "fc"
            if type(scale) is np.ndarray and scale.dtype == dtype:
                s = scale.shape
                return s == shape or (
                    len(s) <= len(shape)
                    and all(d in (1, e) for d, e in zip(s[::-1], shape[::-1], strict=False))
                )
        try:
            if np.broadcast_shapes(shape, np.shape(scale)) != shape:
                return False
        except ValueError:
            return False
        return np.result_type(base.dtype, scale) == dtype


def widened(partial: Any, dtype: np.dtype) -> Any:
    """`partial` in the dtype its product with a cotangent of `dtype` has: the deferred
    products of partials are taken among themselves, and in a narrower dtype (uint8
    pixels, float16 weights) they would overflow or round where the plain path, which
    multiplies each into the cotangent, does not."""
    if type(partial) in (int, float, complex):
        return partial  # (Python numbers: exact or float64, and weak in NumPy 2)
    own = getattr(partial, "dtype", None)
    if own is None or own == dtype:
        return partial
    wide = np.result_type(dtype, own)
    return partial if wide == own else astype(partial, wide)


def rescale(scale: Any, partial: Any) -> Any:
    """The scale after one more elementwise node: `scale * partial`, where `scale` is
    None for a cotangent not yet deferred. A scale of the number 1 (the partial of an
    addition) is no product; kept where the product could change a dtype."""
    if scale is None:
        return partial
    if type(scale) in (int, float) and scale == 1:
        kind = getattr(partial, "dtype", np.dtype(float)).kind
        if kind in "fc":
            return partial
    return scale * partial


def defers(ct: Any, partial: Any) -> bool:
    """Whether `ct * partial` is worth deferring: a traced cotangent (of an outer
    transform, e.g. batched) and a partial that is a plain array or number, or a
    tracer of a lower level (a transform further out: `vmapx.jit`'s recording)."""
    return isinstance(ct, Tracer) and (
        not isinstance(partial, Tracer) or partial._trace.level < ct._trace.level
    )


def split(ct: Any) -> tuple[Any, Any]:
    """`(base, scale)` of a cotangent (`scale` None for a formed one)."""
    if type(ct) is Scaled:
        return ct.base, ct.scale
    return ct, None


def materialize(ct: Any) -> Any:
    """The cotangent as a value."""
    return ct.value() if type(ct) is Scaled else ct


def negated(ct: Any) -> Any | None:
    """The base `b` of a cotangent that is `-b` (deferred with the scale -1: the second
    operand of a subtraction), else None."""
    if type(ct) is Scaled and type(ct.scale) in (int, float) and ct.scale == -1:
        return ct.base
    return None


def combine(prev: Any, ct: Any) -> Any | None:
    """`prev + ct` kept deferred when both scale the same base, else None."""
    if type(prev) is Scaled and type(ct) is Scaled and prev.base is ct.base:
        return Scaled(prev.base, prev.scale + ct.scale)
    return None
