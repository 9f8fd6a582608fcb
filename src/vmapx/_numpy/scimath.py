"""`numpy.emath` (`numpy.lib.scimath`): elementwise functions whose result is complex
when any input needs it.

NumPy decides for each call, so in the loop for each example: an example whose inputs
all lie in the real domain gets a real result, and later steps compute on it as real
(`np.sqrt` of a negative real is NaN, of a negative complex number is imaginary). Batched,
the result is complex when any example needs it, which is each example's own type only
where all examples agree; where they differ, the loop runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.lib import scimath

from .._batching import BatchTrace, aligned_operands, defbatch, unwrap


def _negative(x: Any) -> Any:
    return x < 0


def _beyond_one(x: Any) -> Any:
    return np.abs(x) > 1


# per function, for each operand NumPy may make complex: the elements that make it so
# (`numpy.lib.scimath`'s `_fix_real_lt_zero` and `_fix_real_abs_gt_1`)
_COMPLEX_WHERE: dict[Callable[..., Any], tuple[Callable[[Any], Any] | None, ...]] = {
    **{f: (_negative,) for f in (scimath.sqrt, scimath.log, scimath.log2, scimath.log10)},
    **{f: (_beyond_one,) for f in (scimath.arccos, scimath.arcsin, scimath.arctanh)},
    scimath.logn: (_negative, _negative),
    scimath.power: (_negative, None),  # (a negative integer power becomes float)
}


def _complex_examples(trace: BatchTrace, func: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    """Per example, whether NumPy gives it a complex result (real inputs)."""
    flags: Any = np.zeros(trace.axis_size, bool)
    for x, where in zip(args, _COMPLEX_WHERE[func], strict=False):
        if where is None:
            continue
        v, batched = unwrap(trace, x)
        hit = where(v)
        flags = flags | (
            np.any(np.reshape(hit, (v.shape[0], -1)), axis=1) if batched else np.any(hit)
        )
    return flags


def _elementwise_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        out = func(*aligned_operands(trace, args), **kwargs)
        if np.iscomplexobj(out) and not any(np.iscomplexobj(a) for a in args):
            if not bool(np.all(_complex_examples(trace, func, args))):
                raise trace.concretization(
                    f"`np.emath.{func.__name__}` gives a complex result for some examples and "
                    "a real one for others (its type depends on the values)",
                    "convert the input to complex first (`x.astype(complex)`) if a complex "
                    "result is meant for every example",
                )
        return trace.wrap(out)

    return rule


defbatch(list(_COMPLEX_WHERE), _elementwise_rule)
