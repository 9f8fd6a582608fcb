"""File functions: refused on traced values, with the reason and what to write instead.

Under `vmap` a per-example loop would write the same file once per example (the last
example wins), and a traced value has no data to write yet: save the result that
`vmap` returns instead. Readers never see a traced value except through `like=`, which
NumPy strips before dispatching, so they are refused only for traced file arguments.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .._batching import refuse

_SAVE = "save the result that `vmap` returns, outside the vmapped function"
_func: Callable[..., Any]
for _func in (np.save, np.savez, np.savez_compressed, np.savetxt):
    refuse(_func, f"it writes a file. Instead, {_SAVE}")
for _func in (np.loadtxt, np.genfromtxt, np.fromfile):
    refuse(_func, "it reads a file; read the data before calling the vmapped function")
