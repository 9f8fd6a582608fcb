"""Adapters for `scipy.signal`: one library call on the whole batch, along the signal's
axis (`axis=-1`, `axes=`), which every one of these functions takes.

Per example, the signal is 1-D (the common case); the filter coefficients and options are
shared by the batch. Anything else (batched coefficients, N-D signals) runs as the library
function, one example at a time. These are not differentiated (the library function
runs under `grad`, and says so).
"""

from __future__ import annotations

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
        a = in1 if in_batched[0] else in1[None]
        b = in2 if in_batched[1] else in2[None]
        return ss.fftconvolve(a, b, mode=mode, axes=-1)

    return batch_by_axis(call, _no_lowering)


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
