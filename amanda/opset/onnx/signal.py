"""Signal processing of the ONNX default domain: window functions, DFT, STFT and
MelWeightMatrix.

Complex values travel as a trailing axis of 2 (real, imaginary); a trailing axis of 1 is a
real signal. Transforms run in numpy's FFT in the input's precision and return the input's dtype.

Gradients. **DFT**: the transform is a linear map along its axis, whatever
``inverse``, ``onesided`` or ``dft_length`` say; ``grad`` computes its matrix by transforming
the identity with the kernel's own code and sends the gradient through the transpose (as the
Resize rule does). The signal length, the real/complex axis and ``dft_length`` (and, from
opset 20, the ``axis`` input) must be known when ``grad`` runs.

**STFT** is written again as a Gather of the frames, a Mul by the window and a DFT, and
differentiated through them (a composite rule): the signal and the window get gradients.
``frame_step`` and ``frame_length`` must be constants and the signal length known.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from amanda.autodiff.composite import composite
from amanda.autodiff.node import Node as GradNode
from amanda.autodiff.node import const, rank
from amanda.build import ops
from amanda.exec.kernels.math_util import host
from amanda.exec.kernels.onnx_dtypes import onnx_dtype
from amanda.exec.kernels.registry import kernel
from amanda.ops import define
from amanda.types.node import Node
from amanda.types.rules.generators import dtype_from_attr, window
from amanda.types.tensor_type import TensorType

Attrs = Mapping[str, Any]
I64 = np.int64


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


define("HannWindow", type_rule=window, no_gradient="a table of its sizes only (no float input)")


@kernel("HammingWindow", since=17)
def hamming_window_kernel(attrs: Attrs, size: np.ndarray) -> tuple:
    """ONNX HammingWindow: ``25/46 - 21/46 cos(2 pi n / N)``."""
    return _window(attrs, size, (25 / 46, 21 / 46))


define("HammingWindow", type_rule=window, no_gradient="a table of its sizes only (no float input)")


@kernel("BlackmanWindow", since=17)
def blackman_window_kernel(attrs: Attrs, size: np.ndarray) -> tuple:
    """ONNX BlackmanWindow: ``0.42 - 0.5 cos(2 pi n / N) + 0.08 cos(4 pi n / N)``."""
    return _window(attrs, size, (0.42, 0.5, 0.08))


define("BlackmanWindow", type_rule=window, no_gradient="a table of its sizes only (no float input)")


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
    return None if value is None else int(host(value).reshape(-1)[0])


@kernel("DFT", since=17)
def dft17_kernel(attrs: Attrs, x: np.ndarray, dft_length: Any = None) -> tuple:
    """ONNX DFT (opsets 17-19): the ``axis`` attribute, default 1."""
    return (_dft(x, _length(dft_length), int(attrs.get("axis", 1)), bool(attrs.get("inverse", 0)),
                 bool(attrs.get("onesided", 0))),)


def dft(node: Node) -> list:
    """The input's shape with the last axis 2 (1 for an inverse one-sided transform), the
    transformed axis resized to the DFT length (or its one-sided half)."""
    x = node.shape(0)
    if x is None:
        return [TensorType(node.dtype(0), None)]
    inverse, onesided = bool(node.attr("inverse", 0)), bool(node.attr("onesided", 0))
    if node.opset >= 20:
        given = node.ints(2) if node.present(2) else [-2]
        axis = given[0] if given else None
    else:
        axis = int(node.attr("axis", 1))
    shape = list(x)
    if axis is None:
        return [TensorType(node.dtype(0), (None,) * len(x))]
    axis = axis % len(x)
    lengths = node.ints(1) if node.present(1) else None
    length = lengths[0] if lengths else None
    if inverse and onesided:
        n = length if length is not None else (2 * (x[axis] - 1) if type(x[axis]) is int else None)
        shape[axis], shape[-1] = n, 1
    else:
        n = length if length is not None else x[axis]
        shape[axis] = (n // 2 + 1 if type(n) is int else None) if onesided else n
        shape[-1] = 2
    return [TensorType(node.dtype(0), tuple(shape))]


def dft_matrix(n_in: int, c_in: int, length: int | None, inverse: bool, onesided: bool) -> np.ndarray:
    """The real matrix ``M`` with ``flat(y) = flat(x) @ M`` for one signal of ``n_in`` samples of
    ``c_in`` parts (1: real, 2: complex), ``flat`` joining samples and parts.

    >>> dft_matrix(2, 1, None, False, False).tolist()  # [x0 + x1, 0, x0 - x1, 0]
    [[1.0, 0.0, 1.0, 0.0], [1.0, 0.0, -1.0, 0.0]]
    """
    basis = np.eye(n_in * c_in).reshape(n_in * c_in, n_in, c_in)
    return _dft(basis, length, 1, inverse, onesided).reshape(n_in * c_in, -1)


def dft_vjp(n: GradNode) -> list:
    """DFT: the gradient through the transpose of the transform's matrix (module doc)."""
    x = n.given(0)
    r = rank(x, n)
    length = None if len(n.inputs) < 2 or n.inputs[1] is None else int(n.known(1, "dft_length").reshape(-1)[0])
    if n.opset is not None and n.opset < 20:
        axis = int(n.attr("axis", 1))
    else:
        axis = -2 if len(n.inputs) < 3 or n.inputs[2] is None else int(n.known(2, "axis").reshape(-1)[0])
    axis = (axis + r if axis < 0 else axis) % (r - 1)  # negative counts the real/complex axis, as the kernel
    shape = x.type.shape
    if type(shape[axis]) is not int or type(shape[-1]) is not int:
        raise n.fail("a known signal length and real/complex axis", repr(x.type))
    n_in, c_in = int(shape[axis]), int(shape[-1])
    matrix = dft_matrix(n_in, c_in, length, bool(int(n.attr("inverse", 0))), bool(int(n.attr("onesided", 0))))
    perm = [i for i in range(r - 1) if i != axis] + [axis, r - 1]
    back = [int(i) for i in np.argsort(perm)]
    lead = [0] * (r - 2)
    g = ops.Reshape(ops.Transpose(n.grad(), perm=perm), np.array([*lead, -1], I64))
    gx = ops.Reshape(ops.MatMul(g, const(matrix.T, g)), np.array([*lead, n_in, c_in], I64))
    return [ops.Transpose(gx, perm=back)] + [None] * (len(n.inputs) - 1)


define("DFT", type_rule=dft, vjp=dft_vjp)


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
    step = int(host(frame_step).reshape(-1)[0])
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


def stft(node: Node) -> list:
    """``[batch, frames, bins, 2]``."""
    x = node.shape(0)
    step = node.ints(1)
    lengths = node.ints(3) if node.present(3) else None
    length = lengths[0] if lengths else None
    if length is None and node.present(2):
        w = node.shape(2)
        length = w[0] if w is not None and type(w[0]) is int else None
    frames = None
    if x is not None and type(x[1]) is int and length and step:
        frames = 1 + (x[1] - length) // step[0]
    real = x is not None and x[-1] == 1
    bins = (length // 2 + 1 if real and int(node.attr("onesided", 1)) else length) if length else None
    return [TensorType(node.dtype(0), (x[0] if x else None, frames, bins, 2))]


def _stft(n: GradNode) -> list:
    """STFT: frames gathered, windowed and transformed along their samples."""
    signal = n.given(0)
    step = int(n.known(1, "frame_step").reshape(-1)[0])
    window = n.inputs[2] if len(n.inputs) > 2 else None
    shape = signal.type.shape
    if shape is None or type(shape[1]) is not int or type(shape[-1]) is not int:
        raise n.fail("a known signal length", repr(signal.type))
    if len(n.inputs) > 3 and n.inputs[3] is not None:
        length = int(n.known(3, "frame_length").reshape(-1)[0])
    elif window is not None and window.type.shape is not None and type(window.type.shape[0]) is int:
        length = int(window.type.shape[0])
    else:
        length = int(shape[1])
    frames = 1 + (int(shape[1]) - length) // step
    taken = np.arange(frames)[:, None] * step + np.arange(length)[None, :]
    picked = ops.Gather(signal, taken.astype(I64), axis=1)  # [batch, frames, length, parts]
    if window is not None:
        picked = ops.Mul(picked, ops.Reshape(window, np.array([1, 1, length, 1], I64)))
    onesided = int(n.attr("onesided", 1)) and int(shape[-1]) == 1
    return [ops.DFT(picked, axis=2, onesided=int(onesided))]


stft_vjp = composite(_stft)


define("STFT", type_rule=stft, vjp=stft_vjp)


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


def mel_weight_matrix(node: Node) -> list:
    """``[dft_length // 2 + 1, num_mel_bins]``."""
    bins, n = node.ints(0), node.ints(1)
    shape = (n[0] // 2 + 1 if n else None, bins[0] if bins else None)
    return [TensorType(dtype_from_attr(node, "output_datatype", 1), shape)]


define("MelWeightMatrix", type_rule=mel_weight_matrix, no_gradient="a table of its sizes only (no float input)")
