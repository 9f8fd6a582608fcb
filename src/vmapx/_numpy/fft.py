"""numpy.fft: every transform works along per-example axes, so `axis`/`axes` shift by
one and `axes=None` means all of one example's axes (the last `len(s)` ones when `s`
is given), never the batch axis. `fftfreq`/`rfftfreq` take no arrays: NumPy computes
them with ufuncs, which batch a batched spacing `d` on their own.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from .._batching import BatchTrace, _user_stacklevel, example_ndim, unwrap
from ._dispatch import defbatch, get_arg, set_arg
from .ufuncs import _shift_one

# NumPy's own deprecation: repeated so that vmap warns as the loop does
_S_WITHOUT_AXES = (
    "`axes` should not be `None` if `s` is not `None` (Deprecated in NumPy 2.0). In a future "
    "version of NumPy, this will raise an error and `s[i]` will correspond to the size along "
    "the transformed axis specified by `axes[i]`. To retain current behaviour, pass a sequence "
    "[0, ..., k-1] to `axes` for an array of dimension k."
)


def _fft_rule(func: Callable) -> Callable:
    """`func(a, n=None, axis=-1, norm=None, out=None)`."""

    def rule(trace: BatchTrace, args: tuple, kwargs: dict) -> Any:
        v, nd = unwrap(trace, args[0])[0], example_ndim(trace, args[0])
        axis = _shift_one(get_arg(args, kwargs, 2, "axis", -1), nd)
        args, kwargs = set_arg((v, *args[1:]), kwargs, 2, "axis", axis)
        return trace.wrap(func(*args, **kwargs))

    return rule


def _fftn_rule(default_axes: tuple[int, ...] | None) -> Callable:
    """`func(a, s=None, axes=default_axes, norm=None, out=None)`."""

    def factory(func: Callable) -> Callable:
        def rule(trace: BatchTrace, args: tuple, kwargs: dict) -> Any:
            v, nd = unwrap(trace, args[0])[0], example_ndim(trace, args[0])
            s = get_arg(args, kwargs, 1, "s")
            axes = get_arg(args, kwargs, 2, "axes", default_axes)
            if axes is None:
                axes = range(nd)
                if s is not None:
                    axes = range(nd - len(s), nd)
                    warnings.warn(
                        _S_WITHOUT_AXES, DeprecationWarning, stacklevel=_user_stacklevel()
                    )
            axes = tuple(_shift_one(a, nd) for a in axes)
            args, kwargs = set_arg((v, *args[1:]), kwargs, 2, "axes", axes)
            return trace.wrap(func(*args, **kwargs))

        return rule

    return factory


def _shift_rule(func: Callable) -> Callable:
    """`fftshift(x, axes=None)`: None shifts every per-example axis."""

    def rule(trace: BatchTrace, args: tuple, kwargs: dict) -> Any:
        v, nd = unwrap(trace, args[0])[0], example_ndim(trace, args[0])
        axes = get_arg(args, kwargs, 1, "axes")
        if axes is None:
            axes = tuple(range(1, nd + 1))
        elif isinstance(axes, int | np.integer):
            axes = _shift_one(axes, nd)
        else:
            axes = tuple(_shift_one(a, nd) for a in axes)
        args, kwargs = set_arg((v, *args[1:]), kwargs, 1, "axes", axes)
        return trace.wrap(func(*args, **kwargs))

    return rule


fft = np.fft
defbatch([fft.fft, fft.ifft, fft.rfft, fft.irfft, fft.hfft, fft.ihfft], _fft_rule)
defbatch([fft.fftn, fft.ifftn, fft.rfftn, fft.irfftn], _fftn_rule(None))
defbatch([fft.fft2, fft.ifft2, fft.rfft2, fft.irfft2], _fftn_rule((-2, -1)))
defbatch([fft.fftshift, fft.ifftshift], _shift_rule)
