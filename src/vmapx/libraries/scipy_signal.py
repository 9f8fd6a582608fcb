"""Adapters for `scipy.signal`: one library call on the whole batch, along the signal's
axis (`axis=-1`, `axes=`), which every one of these functions takes.

Per example, the signal is 1-D (the common case); the filter coefficients and options are
shared by the batch. Anything else (batched coefficients, N-D signals) runs as the library
function, one example at a time. These are not differentiated (the library function
runs under `grad`, and says so).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import scipy.signal as ss

from . import _adapter
from ._adapter import Unsupported, adapts, any_batched, batch_by_axis


def _no_lowering(*args: Any, **kwargs: Any) -> Any:
    raise Unsupported


def _signal_batch(name: str, out_batched: Any = True) -> Any:
    """A batch rule: `scipy.signal.<name>(..., x_batched, ..., axis=-1)` once, for a
    batched float 1-D signal `x` and unbatched other arguments."""
    fun = getattr(ss, name)

    def call(in_batched: list[Any], *args: Any, **kwargs: Any) -> Any:
        signal = _SIGNAL_ARG[name]
        x = args[signal]
        batched_others = [i for i, b in enumerate(in_batched) if i != signal and any_batched(b)]
        if batched_others or not in_batched[signal] or np.ndim(x) != 2:
            raise Unsupported
        if not np.issubdtype(x.dtype, np.floating) or kwargs.get("axis", -1) not in (-1, 0):
            raise Unsupported
        kwargs = {k: v for k, v in kwargs.items() if k != "axis"}
        return fun(*args, axis=-1, **kwargs)

    return batch_by_axis(call, _no_lowering, out_batched)


# the index of the signal among each function's traced (array) arguments
_SIGNAL_ARG = {"lfilter": 2, "filtfilt": 2, "sosfilt": 1, "sosfiltfilt": 1, "savgol_filter": 0,
               "detrend": 0, "hilbert": 0, "welch": 0, "periodogram": 0, "resample": 0,
               "decimate": 0}  # fmt: skip


@adapts("scipy.signal", "lfilter", ("b", "a", "x"), batch=_signal_batch("lfilter"))
def lfilter(b: Any, a: Any, x: Any, axis: Any = -1, zi: Any = None) -> Any:
    if zi is not None:
        raise Unsupported
    return _no_lowering()


@adapts("scipy.signal", "filtfilt", ("b", "a", "x"), batch=_signal_batch("filtfilt"))
def filtfilt(
    b: Any,
    a: Any,
    x: Any,
    axis: Any = -1,
    padtype: Any = "odd",
    padlen: Any = None,
    method: Any = "pad",
    irlen: Any = None,
) -> Any:
    return _no_lowering()


@adapts("scipy.signal", "sosfilt", ("sos", "x"), batch=_signal_batch("sosfilt"))
def sosfilt(sos: Any, x: Any, axis: Any = -1, zi: Any = None) -> Any:
    if zi is not None:
        raise Unsupported
    return _no_lowering()


@adapts("scipy.signal", "sosfiltfilt", ("sos", "x"), batch=_signal_batch("sosfiltfilt"))
def sosfiltfilt(sos: Any, x: Any, axis: Any = -1, padtype: Any = "odd", padlen: Any = None) -> Any:
    return _no_lowering()


@adapts("scipy.signal", "savgol_filter", ("x",), batch=_signal_batch("savgol_filter"))
def savgol_filter(x: Any, window_length: Any, polyorder: Any, deriv: Any = 0, delta: Any = 1.0,
                  axis: Any = -1, mode: Any = "interp",
                  cval: Any = 0.0) -> Any:  # fmt: skip
    return _no_lowering()


@adapts("scipy.signal", "detrend", ("data",), batch=_signal_batch("detrend"))
def detrend(
    data: Any, axis: Any = -1, type: Any = "linear", bp: Any = 0, overwrite_data: Any = False
) -> Any:
    return _no_lowering()


@adapts("scipy.signal", "hilbert", ("x",), batch=_signal_batch("hilbert"))
def hilbert(x: Any, N: Any = None, axis: Any = -1) -> Any:
    return _no_lowering()


@adapts("scipy.signal", "resample", ("x",), batch=_signal_batch("resample"))
def resample(
    x: Any, num: Any, t: Any = None, axis: Any = 0, window: Any = None, domain: Any = "time"
) -> Any:
    if t is not None:
        raise Unsupported
    return _no_lowering()


@adapts("scipy.signal", "welch", ("x",), batch=_signal_batch("welch", (False, True)))
def welch(x: Any, fs: Any = 1.0, window: Any = "hann", nperseg: Any = None, noverlap: Any = None,
          nfft: Any = None,
          detrend: Any = "constant", return_onesided: Any = True, scaling: Any = "density",
          axis: Any = -1,
          average: Any = "mean") -> Any:  # fmt: skip
    return _no_lowering()


@adapts("scipy.signal", "periodogram", ("x",),
        batch=_signal_batch("periodogram", (False, True)))  # fmt: skip
def periodogram(x: Any, fs: Any = 1.0, window: Any = "boxcar", nfft: Any = None,
                detrend: Any = "constant",
                return_onesided: Any = True, scaling: Any = "density",
                axis: Any = -1) -> Any:  # fmt: skip
    return _no_lowering()


def _convolve_batch(name: str) -> Any:
    """`convolve`/`correlate`/`fftconvolve` of 1-D float signals: one `fftconvolve` over
    the batch axis (`axes=-1`); `correlate` is convolution with the reversed kernel."""

    def call(
        in_batched: list[Any], in1: Any, in2: Any, mode: str = "full", method: str = "auto"
    ) -> Any:
        n1 = np.ndim(in1) - in_batched[0]
        n2 = np.ndim(in2) - in_batched[1]
        floats = all(np.issubdtype(np.result_type(v), np.floating) for v in (in1, in2))
        if n1 != 1 or n2 != 1 or not floats or np.iscomplexobj(in2):
            raise Unsupported
        if name == "correlate":
            in2 = in2[..., ::-1]
        if np.shape(in1)[-1] < np.shape(in2)[-1] and mode == "valid":
            raise Unsupported
        b = in2 if in_batched[1] else in2[None]
        a = in1 if in_batched[0] else np.broadcast_to(in1, (b.shape[0], np.shape(in1)[-1]))
        if _method(name, a, b, mode, method) == "direct":
            return _direct_convolve(a, b, mode)
        return ss.fftconvolve(a, b, mode=mode, axes=-1)

    return batch_by_axis(call, _no_lowering)


_LIBRARY_CHOOSE_CONV_METHOD = ss.choose_conv_method
_DIRECT_MOST = 2**22  # products a batched direct convolution may hold at once


def _method(name: str, a: Any, b: Any, mode: str, method: str) -> str:
    """The method SciPy uses for one example: `fftconvolve` always the FFT, `convolve`
    and `correlate` the one asked for or the one `choose_conv_method` picks from the
    shapes and dtypes (it differs from the FFT where a NaN or an infinity is: the
    direct sum keeps it to the outputs whose window holds it)."""
    if name == "fftconvolve":
        return "fft"
    if method != "auto":
        return method
    return _chosen_method(a.shape[-1], a.dtype, b.shape[-1], b.dtype, mode)


@functools.lru_cache(maxsize=256)
def _chosen_method(n: int, a_dtype: Any, k: int, b_dtype: Any, mode: str) -> str:
    """SciPy's choice for float signals: from their lengths and dtypes alone."""
    one_a, one_b = np.zeros(n, dtype=a_dtype), np.zeros(k, dtype=b_dtype)
    return str(_LIBRARY_CHOOSE_CONV_METHOD(one_a, one_b, mode=mode))


def _direct_convolve(a: Any, b: Any, mode: str) -> Any:
    """The direct sum of the convolution of the rows of `a` (B or 1, n) with those of
    `b` (B or 1, k), n >= k for mode "valid": the products the library's direct method
    forms, and no others (a NaN in `b` reaches only the outputs it overlaps)."""
    n, k = a.shape[-1], b.shape[-1]
    if max(a.shape[0], b.shape[0]) * (n + k) * k > _DIRECT_MOST:
        raise Unsupported
    padded = np.pad(a, [(0, 0), (k - 1, k - 1)])
    windows = np.lib.stride_tricks.sliding_window_view(padded, k, axis=-1)
    products = windows * b[:, None, ::-1]
    if not np.isfinite(b).all():  # (a finite `b` times the padding's zeros is zero)
        at = np.arange(n + k - 1)[:, None] + np.arange(k)  # each product's place in `padded`
        products = np.where((at >= k - 1) & (at < n + k - 1), products, 0.0)
    full = np.sum(products, axis=-1)
    if mode == "full":
        return full
    if mode == "valid":
        return full[:, k - 1 : n]
    start = (k - 1) // 2  # "same": the centre of the full result, of `a`'s length
    return full[:, start : start + n]


@adapts("scipy.signal", "convolve", ("in1", "in2"), batch=_convolve_batch("convolve"))
def convolve(in1: Any, in2: Any, mode: Any = "full", method: Any = "auto") -> Any:
    return _no_lowering()


@adapts("scipy.signal", "correlate", ("in1", "in2"), batch=_convolve_batch("correlate"))
def correlate(in1: Any, in2: Any, mode: Any = "full", method: Any = "auto") -> Any:
    return _no_lowering()


@adapts("scipy.signal", "fftconvolve", ("in1", "in2"), batch=_convolve_batch("fftconvolve"))
def fftconvolve(in1: Any, in2: Any, mode: Any = "full", axes: Any = None) -> Any:
    if axes is not None:
        raise Unsupported
    return _no_lowering()


def install() -> None:
    _adapter.install("scipy.signal")
