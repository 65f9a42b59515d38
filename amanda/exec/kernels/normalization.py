"""Normalizations of the ONNX default domain.

BatchNormalization runs in inference mode (running statistics) except from
opset 14 with ``training_mode=1``, where it uses batch statistics and also
returns the updated running mean and variance. Before opset 14 the training
outputs (mean, var, saved_mean, saved_var) are not produced: a kernel cannot
see how many outputs its node asks for, which is how those opsets chose the mode.
Statistics are computed in float32 or wider and results cast back.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from amanda.exec.kernels.math_util import as_array, attr_ints, normalize_axes, row_sums, wide
from amanda.exec.kernels.registry import kernel

Attrs = Mapping[str, Any]


def _channel(p: np.ndarray, ndim: int) -> np.ndarray:
    """A per-channel parameter ([C] or [C, D1, ...]) shaped to broadcast over [N, C, D1, ...]."""
    return p.reshape(p.shape + (1,) * (ndim - 1 - p.ndim))


def _stats(x: np.ndarray, axes: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    mean = np.mean(x, axis=axes, keepdims=True)
    var = np.mean(np.square(x - mean), axis=axes, keepdims=True)
    return mean, var


def _affine(x: np.ndarray, mean: Any, var: Any, eps: float, scale: Any, bias: Any) -> np.ndarray:
    return (x - mean) / np.sqrt(var + eps) * scale + bias


@kernel("BatchNormalization", since=1)
def batchnorm_kernel(
    attrs: Attrs, x: np.ndarray, scale: np.ndarray, bias: np.ndarray,
    mean: np.ndarray, var: np.ndarray,
) -> tuple:
    """ONNX BatchNormalization before opset 14: inference mode with the running statistics."""
    eps = float(attrs.get("epsilon", 1e-5))
    w = wide(x.dtype)
    p = [_channel(a.astype(w, copy=False), x.ndim) for a in (scale, bias, mean, var)]
    y = _affine(x.astype(w, copy=False), p[2], p[3], eps, p[0], p[1])
    return (as_array(y).astype(x.dtype, copy=False), None, None, None, None)


@kernel("BatchNormalization", since=14)
def batchnorm_training_kernel(
    attrs: Attrs, x: np.ndarray, scale: np.ndarray, bias: np.ndarray,
    mean: np.ndarray, var: np.ndarray,
) -> tuple:
    """ONNX BatchNormalization from opset 14: ``training_mode=1`` normalises with batch
    statistics and returns the running mean and variance updated with ``momentum``."""
    if not int(attrs.get("training_mode", 0)):
        return batchnorm_kernel(attrs, x, scale, bias, mean, var)[:1] + (None, None)
    eps = float(attrs.get("epsilon", 1e-5))
    momentum = float(attrs.get("momentum", 0.9))
    w = wide(x.dtype)
    wx = x.astype(w, copy=False)
    axes = tuple(i for i in range(x.ndim) if i != 1)
    batch_mean, batch_var = _stats(wx, axes)
    y = _affine(wx, batch_mean, batch_var, eps, _channel(scale.astype(w), x.ndim),
                _channel(bias.astype(w), x.ndim))
    new_mean = mean * momentum + batch_mean.reshape(mean.shape) * (1 - momentum)
    new_var = var * momentum + batch_var.reshape(var.shape) * (1 - momentum)
    return (
        as_array(y).astype(x.dtype, copy=False),
        as_array(new_mean).astype(mean.dtype, copy=False),
        as_array(new_var).astype(var.dtype, copy=False),
    )


@kernel("InstanceNormalization", since=1)
def instancenorm_kernel(attrs: Attrs, x: np.ndarray, scale: np.ndarray, bias: np.ndarray) -> tuple:
    """ONNX InstanceNormalization: statistics per sample and channel over the spatial axes."""
    eps = float(attrs.get("epsilon", 1e-5))
    wx = x.astype(wide(x.dtype), copy=False)
    mean, var = _stats(wx, tuple(range(2, x.ndim)))
    y = _affine(wx, mean, var, eps, _channel(scale, x.ndim), _channel(bias, x.ndim))
    return (as_array(y).astype(x.dtype, copy=False),)


@kernel("LayerNormalization", since=17)
def layernorm_kernel(
    attrs: Attrs, x: np.ndarray, scale: np.ndarray, bias: np.ndarray | None = None
) -> tuple:
    """ONNX LayerNormalization over the axes from ``axis`` on; also returns Mean and InvStdDev."""
    eps = float(attrs.get("epsilon", 1e-5))
    axis = int(attrs.get("axis", -1))
    axis = axis + x.ndim if axis < 0 else axis
    # Mean and InvStdDev have the stash type (1, float32, is the only one defined);
    # float64 inputs still compute in float64 for Y
    stash = np.float32
    wx = x.astype(wide(x.dtype), copy=False)
    lead, width = x.shape[:axis], int(np.prod(x.shape[axis:], dtype=np.int64))
    rows = wx.reshape(int(np.prod(lead, dtype=np.int64)), width)
    # one centred buffer serves the variance (a dot product, no squared copy) and Y
    mean = row_sums(rows) / width
    y = np.subtract(rows, mean[:, None])
    var = np.einsum("ij,ij->i", y, y) / width
    inv_std = 1.0 / np.sqrt(var + eps)
    y *= inv_std[:, None]
    y = y.reshape(x.shape)
    y *= scale
    if bias is not None:
        y += bias
    stats = (*lead, *([1] * (x.ndim - axis)))
    return (
        as_array(y).astype(x.dtype, copy=False),
        as_array(mean.reshape(stats)).astype(stash, copy=False),
        as_array(inv_std.reshape(stats)).astype(stash, copy=False),
    )


def _group_norm(attrs: Attrs, x: np.ndarray, scale: np.ndarray, bias: np.ndarray,
                per_channel: bool) -> tuple:
    eps = float(attrs.get("epsilon", 1e-5))
    groups = int(attrs["num_groups"])
    wx = x.astype(wide(x.dtype), copy=False).reshape(x.shape[0], groups, -1)
    mean, var = _stats(wx, (2,))
    normed = (wx - mean) / np.sqrt(var + eps)
    if per_channel:
        y = normed.reshape(x.shape) * _channel(scale, x.ndim) + _channel(bias, x.ndim)
    else:
        # opset 18: one scale and bias per group
        y = normed * scale.reshape(1, groups, 1) + bias.reshape(1, groups, 1)
    return (as_array(y).reshape(x.shape).astype(x.dtype, copy=False),)


@kernel("GroupNormalization", since=18)
def groupnorm_v18_kernel(attrs: Attrs, x: np.ndarray, scale: np.ndarray, bias: np.ndarray) -> tuple:
    """ONNX GroupNormalization opset 18: ``scale`` and ``bias`` have one entry per group."""
    return _group_norm(attrs, x, scale, bias, per_channel=False)


@kernel("GroupNormalization", since=21)
def groupnorm_kernel(attrs: Attrs, x: np.ndarray, scale: np.ndarray, bias: np.ndarray) -> tuple:
    """ONNX GroupNormalization from opset 21: ``scale`` and ``bias`` are per channel."""
    return _group_norm(attrs, x, scale, bias, per_channel=True)


@kernel("LpNormalization", since=1)
def lpnorm_kernel(attrs: Attrs, x: np.ndarray) -> tuple:
    """ONNX LpNormalization along ``axis`` with p = 1 or 2; a zero norm gives zeros."""
    axis, p = int(attrs.get("axis", -1)), int(attrs.get("p", 2))
    wx = x.astype(wide(x.dtype), copy=False)
    if p == 1:
        norm = np.sum(np.abs(wx), axis=axis, keepdims=True)
    else:
        norm = np.sqrt(np.sum(wx * wx, axis=axis, keepdims=True))
    with np.errstate(all="ignore"):
        y = np.where(norm == 0, 0, wx / norm)
    return (as_array(y).astype(x.dtype, copy=False),)


@kernel("MeanVarianceNormalization", since=9)
def mvn_kernel(attrs: Attrs, x: np.ndarray) -> tuple:
    """ONNX MeanVarianceNormalization: ``(x - mean) / (std + 1e-9)`` over ``axes``."""
    axes = normalize_axes(attr_ints(attrs, "axes") or [0, 2, 3], x.ndim)
    wx = x.astype(wide(x.dtype), copy=False)
    mean = np.mean(wx, axis=axes, keepdims=True)
    # E[x^2] - E[x]^2, as the ONNX function body computes it
    std = np.sqrt(np.maximum(np.mean(wx * wx, axis=axes, keepdims=True) - mean * mean, 0))
    return (as_array((wx - mean) / (std + 1e-9)).astype(x.dtype, copy=False),)


@kernel("RMSNormalization", since=23)
def rms_normalization_kernel(attrs: Attrs, x: np.ndarray, scale: np.ndarray) -> tuple:
    """ONNX RMSNormalization: ``x / sqrt(mean(x^2) + epsilon) * scale`` over the axes from
    ``axis`` on, computed in float32 or wider."""
    eps = float(attrs.get("epsilon", 1e-5))
    axis = int(attrs.get("axis", -1))
    axis = axis + x.ndim if axis < 0 else axis
    wx = x.astype(wide(x.dtype), copy=False)
    axes = tuple(range(axis, x.ndim))
    rms = np.sqrt(np.mean(np.square(wx), axis=axes, keepdims=True) + eps)
    return (as_array(wx / rms * scale).astype(x.dtype, copy=False),)


@kernel("LRN", since=1)
def lrn_kernel(attrs: Attrs, x: np.ndarray) -> tuple:
    """ONNX LRN: each value divided by ``(bias + alpha / size * sum of squares over the
    nearest `size` channels) ** beta``."""
    size = int(attrs["size"])
    alpha, beta = float(attrs.get("alpha", 1e-4)), float(attrs.get("beta", 0.75))
    bias = float(attrs.get("bias", 1.0))
    wx = x.astype(wide(x.dtype), copy=False)
    squares = np.square(wx)
    channels = x.shape[1]
    below, above = (size - 1) // 2, size - 1 - (size - 1) // 2
    padded = np.concatenate([np.zeros_like(squares[:, :1]).repeat(below, 1), squares,
                             np.zeros_like(squares[:, :1]).repeat(above, 1)], axis=1)
    running = np.cumsum(padded, axis=1)
    running = np.concatenate([np.zeros_like(running[:, :1]), running], axis=1)
    window = running[:, size:size + channels] - running[:, :channels]
    return (as_array(wx / (bias + alpha / size * window) ** beta).astype(x.dtype, copy=False),)
