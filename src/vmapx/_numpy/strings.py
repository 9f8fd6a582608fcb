"""`numpy.strings`: elementwise string functions (they broadcast all their operands).

Their ufuncs batch through the ufunc family; the public functions that NumPy hands to
`__array_function__` themselves get the same elementwise treatment here, so that the
fixed-width output size is computed once for the whole batch (NumPy sizes the output
for the longest result: the same dtype the loop's stack gets).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .._batching import BatchTrace, aligned_operands, defbatch, loop_apply, wrap_tree
from .._compat import numpy_core, present
from .._registry import register
from ..errors import UnsupportedError

_ELEMENTWISE = [
    "add", "capitalize", "center", "count", "decode", "encode", "endswith", "expandtabs",
    "find", "index", "isalnum", "isalpha", "isdecimal", "isdigit", "islower", "isnumeric",
    "isspace", "istitle", "isupper", "ljust", "lower", "lstrip", "mod", "multiply",
    "partition", "replace", "rfind", "rindex", "rjust", "rpartition", "rstrip", "slice",
    "startswith", "str_len", "strip", "swapcase", "title", "translate", "upper", "zfill",
]  # fmt: skip


def _broadcasting_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        names = list(kwargs)
        vals = aligned_operands(trace, (*args, *kwargs.values()))
        keywords = dict(zip(names, vals[len(args) :], strict=True))
        try:
            return wrap_tree(trace, func(*vals[: len(args)], **keywords))
        except ValueError:
            if trace.axis_size:
                raise
            # NumPy sizes some fixed-width results from the data, which an empty batch
            # lacks: take the sizes from one dummy example
            return loop_apply(trace, func, args, kwargs, func.__name__)

    return rule


# `np.strings` is new in NumPy 2: nothing to register on NumPy 1.26. Its ufuncs
# (`np.strings.add is np.add`, `isalpha`, `str_len`, ...) batch by the ufunc family's rule
_STRING_FUNCTIONS = present(getattr(np, "strings", None), *_ELEMENTWISE)
defbatch([f for f in _STRING_FUNCTIONS if not isinstance(f, np.ufunc)], _broadcasting_rule)


def _needs_out_buffers(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
    raise UnsupportedError(
        "vmap: this string ufunc writes fixed-width results only into preallocated "
        "structured `out=` buffers, which cannot be traced; call `np.strings.partition`/"
        "`np.strings.rpartition` instead (they batch)"
    )


for _ufunc in present(numpy_core.umath, "_partition_index", "_rpartition_index"):
    register(_ufunc, "batch", _needs_out_buffers)
