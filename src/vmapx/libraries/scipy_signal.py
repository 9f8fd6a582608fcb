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

    def call(in_batched: list, *args: Any, **kwargs: Any) -> Any:
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
def lfilter(b, a, x, axis=-1, zi=None):
    if zi is not None:
        raise Unsupported
    return _no_lowering()


@adapts("scipy.signal", "filtfilt", ("b", "a", "x"), batch=_signal_batch("filtfilt"))
def filtfilt(b, a, x, axis=-1, padtype="odd", padlen=None, method="pad", irlen=None):
    return _no_lowering()


@adapts("scipy.signal", "sosfilt", ("sos", "x"), batch=_signal_batch("sosfilt"))
def sosfilt(sos, x, axis=-1, zi=None):
    if zi is not None:
        raise Unsupported
    return _no_lowering()


@adapts("scipy.signal", "sosfiltfilt", ("sos", "x"), batch=_signal_batch("sosfiltfilt"))
def sosfiltfilt(sos, x, axis=-1, padtype="odd", padlen=None):
    return _no_lowering()


@adapts("scipy.signal", "savgol_filter", ("x",), batch=_signal_batch("savgol_filter"))
def savgol_filter(x, window_length, polyorder, deriv=0, delta=1.0, axis=-1, mode="interp",
                  cval=0.0):  # fmt: skip
    return _no_lowering()


@adapts("scipy.signal", "detrend", ("data",), batch=_signal_batch("detrend"))
def detrend(data, axis=-1, type="linear", bp=0, overwrite_data=False):
    return _no_lowering()


@adapts("scipy.signal", "hilbert", ("x",), batch=_signal_batch("hilbert"))
def hilbert(x, N=None, axis=-1):
    return _no_lowering()


@adapts("scipy.signal", "resample", ("x",), batch=_signal_batch("resample"))
def resample(x, num, t=None, axis=0, window=None, domain="time"):
    if t is not None:
        raise Unsupported
    return _no_lowering()


@adapts("scipy.signal", "welch", ("x",), batch=_signal_batch("welch", (False, True)))
def welch(x, fs=1.0, window="hann", nperseg=None, noverlap=None, nfft=None,
          detrend="constant", return_onesided=True, scaling="density", axis=-1,
          average="mean"):  # fmt: skip
    return _no_lowering()


@adapts("scipy.signal", "periodogram", ("x",),
        batch=_signal_batch("periodogram", (False, True)))  # fmt: skip
def periodogram(x, fs=1.0, window="boxcar", nfft=None, detrend="constant",
                return_onesided=True, scaling="density", axis=-1):  # fmt: skip
    return _no_lowering()


def _convolve_batch(name: str) -> Any:
    """`convolve`/`correlate`/`fftconvolve` of 1-D float signals: one `fftconvolve` over
    the batch axis (`axes=-1`); `correlate` is convolution with the reversed kernel."""

    def call(in_batched: list, in1: Any, in2: Any, mode: str = "full", method: str = "auto"):
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
def convolve(in1, in2, mode="full", method="auto"):
    return _no_lowering()


@adapts("scipy.signal", "correlate", ("in1", "in2"), batch=_convolve_batch("correlate"))
def correlate(in1, in2, mode="full", method="auto"):
    return _no_lowering()


@adapts("scipy.signal", "fftconvolve", ("in1", "in2"), batch=_convolve_batch("fftconvolve"))
def fftconvolve(in1, in2, mode="full", axes=None):
    if axes is not None:
        raise Unsupported
    return _no_lowering()


def install() -> None:
    _adapter.install("scipy.signal")
