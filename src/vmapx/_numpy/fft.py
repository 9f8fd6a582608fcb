"""numpy.fft: every transform works along per-example axes, so `axis`/`axes` shift by
one and `axes=None` means all of one example's axes (the last `len(s)` ones when `s`
is given), never the batch axis. `fftfreq`/`rfftfreq` take no arrays: NumPy computes
them with ufuncs, which batch a batched spacing `d` on their own.

Derivatives (see `vmapx._autodiff`): `fft` and `ifft` are linear: their JVP is the
transform of the tangent, and their VJP the transpose (the DFT matrix is symmetric: the
same transform of the cotangent, then cut or zero-padded back to the input's length).
Every other transform is written with them (real transforms as complex ones with the
Hermitian half taken or restored), as JAX transposes its naive real FFT.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from .._autodiff import defcomposite, deflinear, defvjp
from .._batching import BatchTrace, defbatch, example_ndim, unwrap, user_stacklevel
from .._compat import astype
from .._passthrough import has_tracer
from .._registry import get_arg, set_arg
from .._rule_helpers import per_example, shift_one

# NumPy's own deprecation: repeated so that vmap warns as the loop does
_S_WITHOUT_AXES = (
    "`axes` should not be `None` if `s` is not `None` (Deprecated in NumPy 2.0). In a future "
    "version of NumPy, this will raise an error and `s[i]` will correspond to the size along "
    "the transformed axis specified by `axes[i]`. To retain current behaviour, pass a sequence "
    "[0, ..., k-1] to `axes` for an array of dimension k."
)


_TRACED_SIZE = "with a batched size or axis"


def _fft_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    """`func(a, n=None, axis=-1, norm=None, out=None)`."""

    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        if has_tracer(get_arg(args, kwargs, 1, "n")) or has_tracer(
            get_arg(args, kwargs, 2, "axis")
        ):
            return per_example(trace, func, args, kwargs, _TRACED_SIZE)
        v, nd = unwrap(trace, args[0])[0], example_ndim(trace, args[0])
        axis = shift_one(get_arg(args, kwargs, 2, "axis", -1), nd)
        args, kwargs = set_arg((v, *args[1:]), kwargs, 2, "axis", axis)
        return trace.wrap(func(*args, **kwargs))

    return rule


def _fftn_rule(default_axes: tuple[int, ...] | None) -> Callable[..., Any]:
    """`func(a, s=None, axes=default_axes, norm=None, out=None)`."""

    def factory(func: Callable[..., Any]) -> Callable[..., Any]:
        def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
            s = get_arg(args, kwargs, 1, "s")
            axes = get_arg(args, kwargs, 2, "axes", default_axes)
            if has_tracer(s) or has_tracer(axes):
                return per_example(trace, func, args, kwargs, _TRACED_SIZE)
            v, nd = unwrap(trace, args[0])[0], example_ndim(trace, args[0])
            if axes is None:
                axes = range(nd)
                if s is not None:
                    axes = range(nd - len(s), nd)
                    warnings.warn(_S_WITHOUT_AXES, DeprecationWarning, stacklevel=user_stacklevel())
            axes = tuple(shift_one(a, nd) for a in axes)
            args, kwargs = set_arg((v, *args[1:]), kwargs, 2, "axes", axes)
            return trace.wrap(func(*args, **kwargs))

        return rule

    return factory


def _shift_rule(func: Callable[..., Any]) -> Callable[..., Any]:
    """`fftshift(x, axes=None)`: None shifts every per-example axis."""

    def rule(trace: BatchTrace, args: tuple[Any, ...], kwargs: dict[Any, Any]) -> Any:
        v, nd = unwrap(trace, args[0])[0], example_ndim(trace, args[0])
        axes = get_arg(args, kwargs, 1, "axes")
        if has_tracer(axes):
            return per_example(trace, func, args, kwargs, _TRACED_SIZE)
        if axes is None:
            axes = tuple(range(1, nd + 1))
        elif isinstance(axes, int | np.integer):
            axes = shift_one(int(axes), nd)
        else:
            axes = tuple(shift_one(a, nd) for a in axes)
        args, kwargs = set_arg((v, *args[1:]), kwargs, 1, "axes", axes)
        return trace.wrap(func(*args, **kwargs))

    return rule


fft = np.fft
defbatch([fft.fft, fft.ifft], _fft_rule)


def _fit_length(x: Any, length: int, axis: int) -> Any:
    """`x` cut or zero-padded along `axis` to `length` (NumPy's `n=`)."""
    axis = axis % np.ndim(x)
    have = np.shape(x)[axis]
    if have > length:
        return x[(slice(None),) * axis + (slice(0, length),)]
    if have < length:
        pad = np.zeros_like(x, shape=(*np.shape(x)[:axis], length - have, *np.shape(x)[axis + 1 :]))
        return np.concatenate([x, pad], axis=axis)
    return x


def _fft_vjp(func: Callable[..., Any]) -> Callable[..., Any]:
    def maker(
        ans: Any, a: Any, n: Any = None, axis: int = -1, norm: Any = None
    ) -> Callable[..., Any]:
        return lambda g: _fit_length(func(g, axis=axis, norm=norm), np.shape(a)[axis], axis)

    return maker


for _f in (fft.fft, fft.ifft):
    deflinear(_f)
    defvjp(_f, _fft_vjp(_f))


def _swap(norm: Any) -> Any:
    return {None: "forward", "backward": "forward", "forward": "backward"}.get(norm, norm)


def _as_complex(a: Any) -> Any:
    return a if np.iscomplexobj(a) else astype(a, np.result_type(a.dtype, np.complex64))


def _rfft_impl(a: Any, n: Any = None, axis: int = -1, norm: Any = None) -> Any:
    n = np.shape(a)[axis] if n is None else n
    full = fft.fft(_as_complex(a), n, axis, norm)
    return full[(slice(None),) * (axis % np.ndim(a)) + (slice(0, n // 2 + 1),)]


def _irfft_impl(a: Any, n: Any = None, axis: int = -1, norm: Any = None) -> Any:
    """The real inverse of a Hermitian half: the full spectrum restored (the imaginary
    parts of the zero and Nyquist terms drop out with the real part taken)."""
    axis = axis % np.ndim(a)
    n = 2 * (np.shape(a)[axis] - 1) if n is None else n
    half = _fit_length(a, n // 2 + 1, axis)
    lead = (slice(None),) * axis
    mirror = np.conjugate(half[(*lead, slice((n - 1) // 2, 0, -1))])
    return np.real(fft.ifft(np.concatenate([half, mirror], axis=axis), n, axis, norm))


def _hfft_impl(a: Any, n: Any = None, axis: int = -1, norm: Any = None) -> Any:
    return _irfft_impl(np.conjugate(a), n, axis, _swap(norm))


def _ihfft_impl(a: Any, n: Any = None, axis: int = -1, norm: Any = None) -> Any:
    return np.conjugate(_rfft_impl(a, n, axis, _swap(norm)))


defbatch([fft.rfft, fft.irfft, fft.hfft, fft.ihfft], _fft_rule)
defcomposite(fft.rfft, _rfft_impl)
defcomposite(fft.irfft, _irfft_impl)
defcomposite(fft.hfft, _hfft_impl)
defcomposite(fft.ihfft, _ihfft_impl)
defbatch([fft.fftn, fft.ifftn, fft.rfftn, fft.irfftn], _fftn_rule(None))


def _nd_args(a: Any, s: Any, axes: Any) -> tuple[list[Any], list[Any]]:
    """NumPy's `axes=None`: all axes, or the last `len(s)`; `s=None`: the axes' sizes."""
    nd = np.ndim(a)
    if axes is None:
        axes = list(range(nd)) if s is None else list(range(nd - len(s), nd))
    axes = [ax % nd for ax in axes]
    s = [np.shape(a)[ax] for ax in axes] if s is None else list(s)
    return s, axes


def _fftn_impl(func: Callable[..., Any], default: Any) -> Callable[..., Any]:
    def impl(a: Any, s: Any = None, axes: Any = default, norm: Any = None) -> Any:
        s, axes = _nd_args(a, s, axes)
        for size, ax in zip(s[::-1], axes[::-1], strict=True):
            a = func(a, size, ax, norm)
        return a

    return impl


def _rfftn_impl(default: Any) -> Callable[..., Any]:
    def impl(a: Any, s: Any = None, axes: Any = default, norm: Any = None) -> Any:
        s, axes = _nd_args(a, s, axes)
        a = _rfft_impl(a, s[-1], axes[-1], norm)
        for size, ax in zip(s[-2::-1], axes[-2::-1], strict=True):
            a = fft.fft(a, size, ax, norm)
        return a

    return impl


def _irfftn_impl(default: Any) -> Callable[..., Any]:
    def impl(a: Any, s: Any = None, axes: Any = default, norm: Any = None) -> Any:
        given = s
        s, axes = _nd_args(a, s, axes)
        if given is None:
            s[-1] = 2 * (s[-1] - 1)
        for size, ax in zip(s[:-1], axes[:-1], strict=True):
            a = fft.ifft(a, size, ax, norm)
        return _irfft_impl(a, s[-1], axes[-1], norm)

    return impl


defcomposite(fft.fftn, _fftn_impl(fft.fft, None))
defcomposite(fft.ifftn, _fftn_impl(fft.ifft, None))
defcomposite(fft.rfftn, _rfftn_impl(None))
defcomposite(fft.irfftn, _irfftn_impl(None))
defbatch([fft.fft2, fft.ifft2, fft.rfft2, fft.irfft2], _fftn_rule((-2, -1)))


defcomposite(fft.fft2, _fftn_impl(fft.fft, (-2, -1)))
defcomposite(fft.ifft2, _fftn_impl(fft.ifft, (-2, -1)))
defcomposite(fft.rfft2, _rfftn_impl((-2, -1)))
defcomposite(fft.irfft2, _irfftn_impl((-2, -1)))
defbatch([fft.fftshift, fft.ifftshift], _shift_rule)


deflinear([fft.fftshift, fft.ifftshift])
defvjp(fft.fftshift, lambda ans, x, axes=None: lambda g: fft.ifftshift(g, axes))
defvjp(fft.ifftshift, lambda ans, x, axes=None: lambda g: fft.fftshift(g, axes))
