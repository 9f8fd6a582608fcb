"""A strict duck array for the test suite: NumPy's dispatch protocols on a wrapped
ndarray, with CuPy's refusals.

`StrictArray` is what a GPU array looks like to NumPy code, runnable on a CPU: it
implements `__array_ufunc__` and `__array_function__` (NumPy runs on the wrapped data and
the results are wrapped again), and it refuses what CuPy refuses:

- `__array__` raises `TypeError`, so `np.asarray(duck)` and any implicit conversion to a
  host array fail (CuPy's `__array__` raises the same way);
- a plain `np.ndarray` beside a strict array in a ufunc, a NumPy function, an index or a
  write raises `TypeError` (CuPy refuses to mix host arrays into device operations);
- it has no `np.ndarray` base, no buffer, no `.flags` or `.strides`;
- reductions and 0-d results are 0-d strict arrays, never NumPy scalars (CuPy returns
  0-d device arrays), and `float()`, `int()`, `bool()`, `.item()` go through its methods;
- creation with `like=` (`np.zeros(3, like=duck)`, `np.arange(4, like=duck)`,
  `np.asarray(host, like=duck)`) makes strict arrays: the one place a host array may
  come in, as CuPy's `cupy.asarray(host)` copies it to the device.

`.get()` returns the host ndarray (CuPy's spelling), for comparisons in the tests.

**Example:**

>>> import numpy as np
>>> x = StrictArray(np.arange(3.0))
>>> np.sum(np.sin(x) * 2).get().shape
()
>>> np.zeros(2, like=x)
StrictArray(array([0., 0.]))
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin

# NumPy functions through which a host array may enter (CuPy's host-to-device copies)
_CREATION = {
    np.asarray,
    np.array,
    np.asanyarray,
    np.ascontiguousarray,
    np.asfortranarray,
    np.require,
}
for _name in ("astype",):
    if hasattr(np, _name):
        _CREATION.add(getattr(np, _name))

# functions that read only shapes and dtypes: host arrays are fine beside strict ones
_METADATA = {np.result_type, np.shape, np.ndim, np.size, np.iscomplexobj, np.isrealobj}


class StrictArray(NDArrayOperatorsMixin):
    """An ndarray wrapped behind NumPy's dispatch protocols, refusing host arrays."""

    __slots__ = ("_data",)
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, data: Any) -> None:
        if isinstance(data, StrictArray):
            data = data._data
        self._data = np.asarray(data)

    # -- the refusals -----------------------------------------------------------------

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise TypeError(
            "StrictArray: implicit conversion to a NumPy array is not allowed "
            "(like CuPy's arrays); call `.get()` for a host copy."
        )

    # -- NumPy's dispatch protocols ---------------------------------------------------

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if any(_foreign(x) for x in (*inputs, *kwargs.get("out", ()))):
            return NotImplemented
        args = [_unwrap(x, f"np.{ufunc.__name__}") for x in inputs]
        kwargs = {k: _unwrap(v, f"np.{ufunc.__name__}") for k, v in kwargs.items()}
        return _wrap(getattr(ufunc, method)(*args, **kwargs))

    def __array_function__(self, func: Any, types: tuple, args: tuple, kwargs: dict) -> Any:
        if not all(issubclass(t, StrictArray | np.ndarray) for t in types):
            return NotImplemented
        name = f"np.{func.__name__}"
        if func in _CREATION or func in _METADATA:
            args, kwargs = _unwrap(args, name, host=True), _unwrap(kwargs, name, host=True)
        else:
            args, kwargs = _unwrap(args, name), _unwrap(kwargs, name)
        return _wrap(func(*args, **kwargs))

    # -- the array's own attributes ---------------------------------------------------

    shape = property(lambda self: self._data.shape)
    dtype = property(lambda self: self._data.dtype)
    ndim = property(lambda self: self._data.ndim)
    size = property(lambda self: self._data.size)
    itemsize = property(lambda self: self._data.itemsize)
    nbytes = property(lambda self: self._data.nbytes)
    T = property(lambda self: StrictArray(self._data.T))
    mT = property(lambda self: StrictArray(np.swapaxes(self._data, -1, -2)))
    real = property(lambda self: StrictArray(self._data.real))
    imag = property(lambda self: StrictArray(self._data.imag))

    def get(self) -> np.ndarray:
        """The host array (CuPy's `.get()`; a view here: NumPy's copy widens `<U0`)."""
        return self._data.view()

    def item(self, *args: Any) -> Any:
        return self._data.item(*args)

    def tolist(self) -> Any:
        return self._data.tolist()

    def __float__(self) -> float:
        return float(self._data)

    def __int__(self) -> int:
        return int(self._data)

    def __complex__(self) -> complex:
        return complex(self._data)

    def __bool__(self) -> bool:
        return bool(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __iter__(self) -> Any:
        return (StrictArray(row) for row in self._data)

    def __repr__(self) -> str:
        return f"StrictArray({self._data!r})"

    def __getitem__(self, key: Any) -> StrictArray:
        return StrictArray(self._data[_unwrap(key, "indexing")])

    def __setitem__(self, key: Any, value: Any) -> None:
        self._data[_unwrap(key, "indexing")] = _unwrap(value, "an item assignment")

    def astype(self, dtype: Any, copy: bool = True, **kwargs: Any) -> StrictArray:
        return StrictArray(self._data.astype(dtype, copy=copy, **kwargs))

    def copy(self, order: str = "C") -> StrictArray:
        return StrictArray(self._data.copy(order))

    def reshape(self, *shape: Any, **kwargs: Any) -> StrictArray:
        return StrictArray(self._data.reshape(*shape, **kwargs))

    def transpose(self, *axes: Any) -> StrictArray:
        return StrictArray(self._data.transpose(*axes))

    def view(self, *args: Any, **kwargs: Any) -> StrictArray:
        return StrictArray(self._data.view(*args, **kwargs))

    def fill(self, value: Any) -> None:
        self._data.fill(_unwrap(value, "fill"))

    def __getattr__(self, name: str) -> Any:
        """The other ndarray methods (`sum`, `mean`, `ravel`, ...) through NumPy's
        functions, so that they dispatch like everything else."""
        if name in _METHODS:
            func = getattr(np, _METHODS[name])
            return lambda *a, **k: func(self, *a, **k)
        raise AttributeError(f"'StrictArray' object has no attribute {name!r}")


_METHODS = {
    name: name
    for name in (
        "sum", "prod", "mean", "std", "var", "max", "min", "any", "all", "argmax", "argmin",
        "cumsum", "cumprod", "ravel", "squeeze", "swapaxes", "take", "clip", "round", "conj",
        "conjugate", "repeat", "sort", "argsort", "diagonal", "trace", "nonzero", "dot",
        "ptp", "searchsorted", "partition", "argpartition", "compress", "choose", "put",
    )
} | {"flatten": "ravel"}  # fmt: skip


def _foreign(x: Any) -> bool:
    """Another duck type with NumPy's protocols (a tracer): let it handle the call."""
    return (
        not isinstance(x, StrictArray | np.ndarray | np.generic)
        and hasattr(type(x), "__array_ufunc__")
        and type(x).__array_ufunc__ is not None
    )


def _unwrap(x: Any, where: str, host: bool = False) -> Any:
    """The wrapped data inside `x` (nested lists, tuples and dicts walked); a plain
    ndarray raises TypeError unless `host` (creation functions copy host data in)."""
    if isinstance(x, StrictArray):
        return x._data
    if isinstance(x, np.ndarray):
        if host:
            return x
        raise TypeError(
            f"StrictArray: {where} got a plain numpy.ndarray of shape {x.shape} beside "
            "a StrictArray (like CuPy, host arrays are not mixed in); make it with "
            "`like=` or `*_like`."
        )
    if isinstance(x, list | tuple):
        return type(x)(_unwrap(v, where, host) for v in x)
    if isinstance(x, dict):
        return {k: _unwrap(v, where, host) for k, v in x.items()}
    return x


def _wrap(x: Any) -> Any:
    """NumPy's results as strict arrays: arrays and NumPy scalars (0-d, as CuPy)."""
    if isinstance(x, np.ndarray | np.generic):
        return StrictArray(x)
    if hasattr(x, "_fields"):  # a namedtuple (np.linalg's results)
        return type(x)(*(_wrap(v) for v in x))
    if isinstance(x, tuple | list) and any(isinstance(v, np.ndarray | np.generic) for v in x):
        return type(x)(_wrap(v) for v in x)
    return x


def strict(x: Any) -> Any:
    """`x` as a strict array when it is an ndarray or NumPy scalar (pytrees mapped)."""
    import optree

    return optree.tree_map(
        lambda v: StrictArray(v) if isinstance(v, np.ndarray) else v,
        x,
        is_leaf=lambda v: isinstance(v, np.ndarray),
    )


def host(x: Any) -> Any:
    """`x` with every strict array replaced by its host ndarray (pytrees mapped)."""
    import optree

    return optree.tree_map(
        lambda v: v.get() if isinstance(v, StrictArray) else v,
        x,
        is_leaf=lambda v: isinstance(v, StrictArray),
    )
