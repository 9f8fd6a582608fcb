"""Ported from HIPS autograd's `tests/test_fft.py` (MIT license,
https://github.com/HIPS/autograd): `np.fft` derivatives in both modes (autograd checks
reverse mode only) to order 2, each checked as `autograd_port.Case` describes.

autograd refuses `rfftn` over an odd-length last axis (NotImplementedError); vmapx
differentiates it, so that test checks the derivative instead.
"""

from __future__ import annotations

import numpy as np
import pytest

from autograd_port import single

RS = np.random.default_rng(5)
fft = np.fft


def randn(*shape: int) -> np.ndarray:
    return RS.standard_normal(shape)


def hermitian(fun, mat: np.ndarray) -> np.ndarray:
    """autograd's `match_complex`: the inverse real transforms get the forward transform
    of a real array (a Hermitian input)."""
    name = fun.__name__
    return getattr(fft, name[1:])(mat) if name.startswith("ir") else mat


def _n_cases() -> list:
    funs = {"fft": (fft.fft, 5), "ifft": (fft.ifft, 5), "rfft": (fft.rfft, 4),
            "irfft": (fft.irfft, 4)}  # fmt: skip
    return [
        single(f"{name}_n_{'smaller' if n < 0 else 'bigger'}", lambda x, f=f, m=d + n: f(x, m),
               hermitian(f, randn(d, d)))
        for name, (f, d) in funs.items()
        for n in (-2, 2)
    ]  # fmt: skip


def _s_cases() -> list:
    funs = {"fft2": (fft.fft2, 5), "ifft2": (fft.ifft2, 5), "fftn": (fft.fftn, 5),
            "ifftn": (fft.ifftn, 5), "rfft2": (fft.rfft2, 4), "irfft2": (fft.irfft2, 4),
            "rfftn": (fft.rfftn, 4), "irfftn": (fft.irfftn, 4)}  # fmt: skip
    return [
        single(f"{name}_s", lambda x, f=f, d=d: f(x, s=[d + 2, d - 2], axes=[0, 2]),
               hermitian(f, randn(d, d, d) / 10.0))
        for name, (f, d) in funs.items()
    ]  # fmt: skip


SUBSET = (0, 1, 0), (3, 3, 2)

CASES = [
    single("fft", fft.fft, randn(5, 5)),
    single("fft_ortho", lambda x: fft.fft(x, norm="ortho"), randn(5, 5)),
    single("fft_axis", lambda x: fft.fft(x, axis=0), randn(5, 5)),
    *_n_cases(),
    *_s_cases(),
    single("ifft", fft.ifft, randn(5, 5)),
    single("fft2", fft.fft2, randn(5, 5) / 10.0),
    single("ifft2", fft.ifft2, randn(5, 5)),
    single("fftn", fft.fftn, randn(5, 5) / 10.0),
    single("ifftn", fft.ifftn, randn(5, 5)),
    single("rfft", fft.rfft, randn(4, 4) / 10.0),
    single("rfft_ortho", lambda x: fft.rfft(x, norm="ortho"), randn(4, 4) / 10.0),
    single("rfft_axes", lambda x: fft.rfft(x, axis=0), randn(4, 4) / 10.0),
    single("irfft", fft.irfft, fft.rfft(randn(4, 4) / 10.0)),
    single("irfft_ortho", lambda x: fft.irfft(x, norm="ortho"), fft.rfft(randn(4, 4) / 10.0)),
    single("rfft2", fft.rfft2, randn(4, 4) / 10.0),
    single("irfft2", fft.irfft2, fft.rfft2(randn(4, 4) / 10.0)),
    single("rfftn", fft.rfftn, randn(4, 4, 4) / 10.0),
    single("rfftn_odd", fft.rfftn, randn(5, 5, 5) / 10.0),
    single("rfftn_subset", lambda x: fft.rfftn(x)[SUBSET], randn(4, 4, 4) / 10.0),
    single("rfftn_axes", lambda x: fft.rfftn(x, axes=(0, 2)), randn(4, 4, 4) / 10.0),
    single("irfftn", fft.irfftn, fft.rfftn(randn(4, 4, 4) / 10.0)),
    single("irfftn_subset", lambda x: fft.irfftn(x)[SUBSET], fft.rfftn(randn(4, 4, 4) / 10.0)),
    single("fftshift", fft.fftshift, randn(5, 5) / 10.0),
    single("fftshift_even", fft.fftshift, randn(4, 4) / 10.0),
    single("fftshift_axes", lambda x: fft.fftshift(x, axes=1), randn(5, 5) / 10.0),
    single("ifftshift", fft.ifftshift, randn(5, 5)),
    single("ifftshift_even", fft.ifftshift, randn(4, 4)),
    single("ifftshift_axes", lambda x: fft.ifftshift(x, axes=1), randn(5, 5)),
]


@pytest.mark.parametrize("case", CASES)
def test_fft(case):
    case.check()
