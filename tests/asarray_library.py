"""A stand-in for a library that converts its inputs on entry, each way libraries do:
`np.asarray` through the module, a name imported from NumPy, an alias at module level.
tests/test_passthrough.py vmaps over these."""

from __future__ import annotations

import numpy as np
from numpy import array, asarray

_as_array = np.asanyarray


def centered(x):
    x = np.asarray(x, dtype=float)
    return x - x.mean()


def scaled(x):
    x = asarray(x)  # `from numpy import asarray`
    return x / np.sqrt((x * x).sum())


def doubled_copy(x):
    y = array(x)  # a copy: writing into it must not change `x`
    y *= 2.0
    return x + y


def aliased(x):
    return _as_array(x) ** 2


def stacked(x, y):
    return np.asarray([x, y]).sum(axis=0)


def needs_ndarray(x):
    x = np.asarray(x)
    if type(x) is not np.ndarray:  # a check a traced value cannot pass
        raise TypeError("needs_ndarray wants a NumPy array")
    return x * 3.0


def python_float(x):
    x = np.asarray(x)
    return x * float(x.sum())  # a Python float of the data: examples differ


def fails_on_negative(x):
    x = np.asarray(x)
    if (x < 0).any():
        raise ValueError("fails_on_negative got a negative value")
    return np.sqrt(x)
