"""The value types a rule's fast path may treat as a plain array: `np.ndarray`, and
`vmapx.jit`'s `RecordTracer` (registered by `vmapx._jit`), through which every NumPy
call is recorded. A fast path that uses only NumPy calls, shapes and dtypes (no
`.strides`, `.flags`, buffers or non-dispatching C functions) may check
`type(v) in PLAIN_ARRAYS` instead of `type(v) is np.ndarray`, and then stays fast
under `vmapx.jit` too."""

from __future__ import annotations

import numpy as np

PLAIN_ARRAYS: set[type] = {np.ndarray}
