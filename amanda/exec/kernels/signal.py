"""Signal processing of the ONNX default domain: window functions, DFT, STFT and
MelWeightMatrix.

Complex values travel as a trailing axis of 2 (real, imaginary); a trailing axis of 1 is a
real signal. Transforms run in numpy's FFT in the input's precision and return the input's dtype.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from amanda.exec.kernels.onnx_dtypes import onnx_dtype
from amanda.exec.kernels.registry import kernel

Attrs = Mapping[str, Any]


def _window(attrs: Attrs, size: np.ndarray, terms: tuple[float, ...]) -> tuple:
    n = int(np.asarray(size).reshape(-1)[0])
    periodic = int(attrs.get("periodic", 1))
    denominator = n if periodic else n - 1
    k = np.arange(n, dtype=np.float64)
    phase = 2 * np.pi * k / denominator if denominator > 0 else np.zeros(n)
    values = np.zeros(n)
    for m, coefficient in enumerate(terms):
        values += (-1) ** m * coefficient * np.cos(m * phase)
    return (values.astype(onnx_dtype(int(attrs.get("output_datatype", 1)))),)


@kernel("HannWindow", since=17)
def hann_window_kernel(attrs: Attrs, size: np.ndarray) -> tuple:
    """ONNX HannWindow: ``0.5 - 0.5 cos(2 pi n / N)``."""
    return _window(attrs, size, (0.5, 0.5))


@kernel("HammingWindow", since=17)
def hamming_window_kernel(attrs: Attrs, size: np.ndarray) -> tuple:
    """ONNX HammingWindow: ``25/46 - 21/46 cos(2 pi n / N)``."""
    return _window(attrs, size, (25 / 46, 21 / 46))


@kernel("BlackmanWindow", since=17)
def blackman_window_kernel(attrs: Attrs, size: np.ndarray) -> tuple:
    """ONNX BlackmanWindow: ``0.42 - 0.5 cos(2 pi n / N) + 0.08 cos(4 pi n / N)``."""
    return _window(attrs, size, (0.42, 0.5, 0.08))


def _complex(x: np.ndarray) -> np.ndarray:
    """The complex signal of a ``[..., 1]`` or ``[..., 2]`` array, in the input's precision
    (numpy's FFT keeps complex64 for float32, as onnxruntime computes)."""
    real = np.float32 if x.dtype in (np.float16, np.float32) else np.float64
    if x.shape[-1] == 1:
        return x[..., 0].astype(real)
    z = np.empty(x.shape[:-1], np.complex64 if real is np.float32 else np.complex128)
    z.real, z.imag = x[..., 0], x[..., 1]
    return z


def _pairs(z: np.ndarray) -> np.ndarray:
    return np.stack([z.real, z.imag], axis=-1)


def _dft(x: np.ndarray, length: int | None, axis: int, inverse: bool, onesided: bool) -> np.ndarray:
    axis = axis % (x.ndim - 1)  # the trailing real/imaginary axis is not a signal axis
    signal = _complex(x)
    if inverse and onesided:
        n = length if length is not None else 2 * (signal.shape[axis] - 1)
        return np.fft.irfft(signal, n=n, axis=axis)[..., None].astype(x.dtype)
    n = length if length is not None else signal.shape[axis]
    out = np.fft.ifft(signal, n=n, axis=axis) if inverse else np.fft.fft(signal, n=n, axis=axis)
    if onesided:
        out = np.take(out, np.arange(n // 2 + 1), axis=axis)
    return _pairs(out).astype(x.dtype)


def _length(value: Any) -> int | None:
    return None if value is None else int(np.asarray(value).reshape(-1)[0])


@kernel("DFT", since=17)
def dft17_kernel(attrs: Attrs, x: np.ndarray, dft_length: Any = None) -> tuple:
    """ONNX DFT (opsets 17-19): the ``axis`` attribute, default 1."""
    return (_dft(x, _length(dft_length), int(attrs.get("axis", 1)), bool(attrs.get("inverse", 0)),
                 bool(attrs.get("onesided", 0))),)


@kernel("DFT", since=20)
def dft20_kernel(attrs: Attrs, x: np.ndarray, dft_length: Any = None, axis: Any = None) -> tuple:
    """ONNX DFT from opset 20: ``axis`` is an input, default -2."""
    ax = -2 if axis is None else int(np.asarray(axis).reshape(-1)[0])
    ax = ax if ax >= 0 else ax + x.ndim
    return (_dft(x, _length(dft_length), ax, bool(attrs.get("inverse", 0)), bool(attrs.get("onesided", 0))),)


@kernel("STFT", since=17)
def stft_kernel(attrs: Attrs, signal: np.ndarray, frame_step: np.ndarray, window: Any = None,
                frame_length: Any = None) -> tuple:
    """ONNX STFT: frames of ``frame_length`` every ``frame_step``, windowed, transformed."""
    step = int(np.asarray(frame_step).reshape(-1)[0])
    length = _length(frame_length)
    if length is None:
        length = int(window.shape[0]) if window is not None else signal.shape[1]
    z = _complex(signal)  # [batch, samples]
    frames = 1 + (z.shape[1] - length) // step
    starts = np.arange(frames) * step
    taken = z[:, starts[:, None] + np.arange(length)[None, :]]  # [batch, frames, length]
    if window is not None:
        taken = taken * window.astype(np.float64)
    out = np.fft.fft(taken, axis=-1)
    onesided = int(attrs.get("onesided", 1)) and signal.shape[-1] == 1
    if onesided:
        out = out[..., : length // 2 + 1]
    return (_pairs(out).astype(signal.dtype),)


def _mel(hz: float) -> float:
    return float(2595 * np.log10(1 + hz / 700))


@kernel("MelWeightMatrix", since=17)
def mel_weight_matrix_kernel(attrs: Attrs, num_mel_bins: np.ndarray, dft_length: np.ndarray,
                             sample_rate: np.ndarray, lower_edge_hertz: np.ndarray,
                             upper_edge_hertz: np.ndarray) -> tuple:
    """ONNX MelWeightMatrix: a ``[dft_length // 2 + 1, num_mel_bins]`` matrix of triangular
    filters whose edges are ``num_mel_bins + 2`` points a mel step apart, the step being the
    mel range over ``num_mel_bins + 2``, mapped to spectrum bins by ``floor((n + 1) f / rate)``."""
    bins, n = int(num_mel_bins.reshape(-1)[0]), int(dft_length.reshape(-1)[0])
    rate = float(sample_rate.reshape(-1)[0])
    low, high = _mel(float(lower_edge_hertz.reshape(-1)[0])), _mel(float(upper_edge_hertz.reshape(-1)[0]))
    points = np.arange(bins + 2) * ((high - low) / (bins + 2)) + low
    hz = 700 * (10 ** (points / 2595) - 1)
    edges = np.floor((n + 1) * hz / rate).astype(np.int64)
    out = np.zeros((n // 2 + 1, bins), np.float64)
    for i in range(bins):
        left, centre, right = edges[i], edges[i + 1], edges[i + 2]
        if centre > left:
            k = np.arange(left, centre + 1)
            out[k, i] = (k - left) / (centre - left)
        out[centre, i] = 1.0
        if right > centre:
            k = np.arange(centre, right)
            out[k, i] = (right - k) / (right - centre)
    return (out.astype(onnx_dtype(int(attrs.get("output_datatype", 1)))),)
