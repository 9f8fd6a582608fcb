"""Derivatives of a function from its batch rule: the rule run on a batch of one example.

`composite_by_rule(func)` is a composite (see `_autodiff.defcomposite`) that pushes a
`DerivativeTrace` (a batch of one), runs `func`'s batch rule on the example lifted into
it, and drops the batch axis again: the rule's own `np.*` calls are what the autodiff
traces differentiate. A rule whose batched path would call its own NumPy function again
(which dispatches back here) checks `own_impl(trace)` and computes by other calls, or
raises `NotByRule`: then `func` has no composite for this call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import numpy as np

from ._autodiff import defcomposite
from ._batching import BatchTrace, BatchTracer
from ._core import Tracer, pop_trace, push_trace
from ._registry import builder, each_function, primitive


class DerivativeTrace(BatchTrace):
    """A batch of one example, on the stack only while a rule computes a function under
    differentiation: the rule's `np.*` calls on the example's values are what the
    autodiff traces differentiate (`defcomposite`). A rule whose batched path calls its
    own NumPy function again (that would dispatch back here) checks `own_impl(trace)`."""

    __slots__ = ()

    def concretization(self, what: str, fix: str) -> BaseException:
        return NotByRule(what)


class NotByRule(Exception):  # noqa: N818 (a signal: this call has no composite)
    """Raised inside a `DerivativeTrace`: the rule cannot compute this call itself."""


def own_impl(trace: BatchTrace) -> bool:
    """Whether a rule must compute with its own NumPy calls, not its NumPy function."""
    return isinstance(trace, DerivativeTrace)


def composite_by_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    """The derivative composite of `func` (see `_autodiff.defcomposite`): its batch rule
    run on a batch of one, so that derivatives follow the rule's own arithmetic."""
    prim = primitive(func)

    def impl(*args: Any, **kwargs: Any) -> Any:
        trace = push_trace(DerivativeTrace(1, None, "silent"))
        try:
            lift = _lifter(trace)
            out = cast("Callable[..., Any]", prim.rules.batch)(
                trace, lift(args), {k: lift(v) for k, v in kwargs.items()}
            )
        except NotByRule:
            return NotImplemented
        finally:
            pop_trace(trace)
        return _drop(trace, out)

    return impl


@builder
def defcomposite_by_rule(funcs: Any) -> None:
    """Differentiate `funcs` (one function or a list) through their batch rules: each
    gets `composite_by_rule` as its derivative composite."""
    for func in each_function(funcs):
        defcomposite(func, composite_by_rule(func))


def _lifter(trace: BatchTrace) -> Callable[..., Any]:
    def lift(x: Any) -> Any:
        if isinstance(x, Tracer | np.ndarray):
            return trace.wrap(x[None])
        if type(x) in (list, tuple):
            return type(x)(lift(e) for e in x)
        return x

    return lift


def _drop(trace: BatchTrace, out: Any) -> Any:
    if type(out) is BatchTracer and out._trace is trace:
        return out.val[0]
    if type(out) in (list, tuple):
        return type(out)(_drop(trace, o) for o in out)
    return out
