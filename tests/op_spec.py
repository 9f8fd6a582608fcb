"""The `Op` row type of the op tables (see `op_table.py`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pytest

from np_compat import NUMPY2


@dataclass
class Op:
    name: str
    fn: Callable
    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[str, ...] = ("float64",)
    domain: tuple[float, float] = (-2.0, 2.0)
    diff: bool = True
    rtol: float = 1e-7
    atol: float = 1e-9
    # extra arguments passed unbatched (after the arrays), e.g. fixed indices
    covers: tuple[Callable, ...] = field(default_factory=tuple)
    make: Callable | None = None  # custom input maker: rng -> list of example arrays
    # arguments that must be mapped for a native batch: when one of them is unmapped
    # (a plain array written into, or indexed by a batched index) vmap must fall back
    needs_batched: tuple[int, ...] = ()
    # the result's dtype depends on the values (fixed-width strings sized to the data,
    # emath's complex-if-needed): a zero-size batch can only match its dtype's kind
    data_dtype: bool = False
    # the NumPy 2 feature the row needs (a keyword, a semantics NumPy 1.26 lacks): on
    # NumPy 1.26 every test of the row is skipped with it as the reason
    numpy2: str = ""

    def example_args(self, rng: np.random.Generator) -> list[np.ndarray]:
        if self.numpy2 and not NUMPY2:
            pytest.skip(f"needs NumPy 2: {self.numpy2}")
        if self.make is not None:
            return self.make(rng)
        dtypes = (
            self.dtypes if len(self.dtypes) == len(self.shapes) else self.dtypes * len(self.shapes)
        )
        return [_random(rng, s, d, self.domain) for s, d in zip(self.shapes, dtypes, strict=True)]


def _random(rng: np.random.Generator, shape: tuple, dtype: str, domain: tuple) -> np.ndarray:
    dt = np.dtype(dtype)
    lo, hi = domain
    if dt == np.bool_:
        return rng.random(shape) < 0.5
    if dt.kind in "iu":
        return rng.integers(max(int(lo), 0) if dt.kind == "u" else int(lo), int(hi) + 1,
                            size=shape).astype(dt)  # fmt: skip
    if dt.kind == "c":
        return (rng.uniform(lo, hi, shape) + 1j * rng.uniform(lo, hi, shape)).astype(dt)
    return rng.uniform(lo, hi, shape).astype(dt)
