"""`numpy.emath` (`numpy.lib.scimath`): elementwise functions whose result is complex
when any input needs it.

Batched, "any input" spans the batch, so the result is complex when any example needs
it: exactly what stacking the loop's results gives (NumPy promotes the stack to
complex, and the real examples' values are unchanged).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from numpy.lib import scimath

from .._batching import BatchTrace, aligned_operands, defbatch


def _elementwise_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        return trace.wrap(func(*aligned_operands(trace, args), **kwargs))

    return rule


defbatch(
    [scimath.sqrt, scimath.log, scimath.log2, scimath.log10, scimath.logn, scimath.power,
     scimath.arccos, scimath.arcsin, scimath.arctanh],
    _elementwise_rule,
)  # fmt: skip
