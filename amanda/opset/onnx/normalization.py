"""Normalizations with batch, instance, layer or group statistics: BatchNormalization,
InstanceNormalization, LayerNormalization, GroupNormalization, each with its kernel(s), type
rule and gradient side by side (the others are in :mod:`amanda.opset.onnx.norms`).

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

from amanda.autodiff.composite import composite
from amanda.autodiff.node import Node as GradNode
from amanda.autodiff.node import const, rank, shape_of, size_of, unbroadcast
from amanda.autodiff.rules_decomposed import I64
from amanda.autodiff.rules_nn import i64
from amanda.build import ops
from amanda.build.values import Value
from amanda.exec.kernels.math_util import as_array, row_sums, wide
from amanda.exec.kernels.registry import kernel
from amanda.exec.kernels.spatial import channel_lanes, channels_first
from amanda.ops import define
from amanda.types.node import Node
from amanda.types.rules.elementwise import same_as_first
from amanda.types.tensor_type import ONNX_DTYPES, TensorType

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


def batch_norm(node: Node) -> list:
    """Y like X; the scale, bias, mean and variance have X's channel count."""
    shape = node.shape(0)
    channels = shape[1] if shape is not None and len(shape) > 1 else None
    for i in range(1, 5):
        s = node.shape(i)
        if s is not None:
            if len(s) != 1:
                raise node.fail(f"input {i} of rank 1", f"rank {len(s)}")
            channels = node.same(channels, s[0], "the channel count")
    stats = TensorType(node.dtype(3) or node.dtype(0), None if channels is None and shape is None else (channels,))
    return [node.type(0), stats, stats, stats, stats]


def _normalised(x: Value, axes: list[int], eps: float) -> tuple[Value, Value]:
    """``(x - mean) * inv`` and ``inv = 1/sqrt(var + eps)`` over ``axes``."""
    centred = ops.Sub(x, ops.ReduceMean(x, axes=axes, keepdims=1))
    inv = ops.Reciprocal(ops.Sqrt(ops.Add(ops.ReduceMean(ops.Mul(centred, centred), axes=axes, keepdims=1),
                                          const(eps, x))))
    return ops.Mul(centred, inv), inv


def _only_first_output(n: GradNode) -> None:
    """An error naming the op when the loss reads a statistics output (mean, variance): the
    rules differentiate the normalised output only."""
    if any(g is not None for g in n.grads[1:]):
        raise n.fail("a loss that reads only the normalised output", "a gradient of a statistics output")


def _through_norm(gx_hat: Value, x_hat: Value, inv: Value, axes: list[int]) -> Value:
    """The input gradient of a normalisation from the gradient of its normalised value."""
    mean_g = ops.ReduceMean(gx_hat, axes=axes, keepdims=1)
    mean_gx = ops.ReduceMean(ops.Mul(gx_hat, x_hat), axes=axes, keepdims=1)
    return ops.Mul(inv, ops.Sub(ops.Sub(gx_hat, mean_g), ops.Mul(x_hat, mean_gx)))


def _batch_statistics_vjp(n: GradNode, x: Value, g: Value, gamma: Value, axes: list[int]) -> list:
    """The input, scale and bias gradients of BatchNormalization with batch statistics. The
    two per-channel sums of the scale and bias gradients also give the means the input
    gradient needs (``mean(g * gamma) = gamma * sum(g) / n``), so the backward reduces twice
    over the batch rather than four times."""
    x_hat, inv = _normalised(x, axes, float(n.attr("epsilon", 1e-5)))
    sum_axes = i64(axes)
    sum_g = ops.ReduceSum(g, sum_axes, keepdims=1)
    sum_gx = ops.ReduceSum(ops.Mul(g, x_hat), sum_axes, keepdims=1)
    per = ops.Div(size_of(x), shape_of(x, 1, 2))  # values per channel (a constant once shapes are known)
    share = ops.Div(const(1, x), ops.Cast(per, to=const(0, x).dtype))
    centred = ops.Sub(ops.Sub(g, ops.Mul(sum_g, share)), ops.Mul(x_hat, ops.Mul(sum_gx, share)))
    flat = i64([-1])
    return [ops.Mul(ops.Mul(inv, gamma), centred) if n.need(0) else None,
            ops.Reshape(sum_gx, flat) if n.need(1) else None, ops.Reshape(sum_g, flat) if n.need(2) else None]


def batchnorm_vjp(n: GradNode) -> list:
    """BatchNormalization, with batch statistics (``training_mode=1``) or running ones."""
    x, scale = n.given(0, 1)
    _only_first_output(n)
    r = rank(x, n)
    axes = [0, *range(2, r)]
    eps = float(n.attr("epsilon", 1e-5))
    g = n.grad()
    per_channel = i64([-1, *([1] * (r - 2))])
    gamma = ops.Reshape(scale, per_channel)
    if int(n.attr("training_mode", 0)) and n.need(0):
        return [*_batch_statistics_vjp(n, x, g, gamma, axes), None, None][:len(n.inputs)]
    if int(n.attr("training_mode", 0)):
        x_hat, inv = _normalised(x, axes, eps)
        gx = _through_norm(ops.Mul(g, gamma), x_hat, inv, axes)
    else:
        mean, var = n.given(3, 4)
        typed = var if var.type is not None else x  # a running variance read from a Variable is untyped
        inv = ops.Reshape(ops.Reciprocal(ops.Sqrt(ops.Add(var, const(eps, typed)))), per_channel)
        x_hat = ops.Mul(ops.Sub(x, ops.Reshape(mean, per_channel)), inv)
        gx = ops.Mul(g, ops.Mul(gamma, inv))
    sum_axes = i64(axes)
    stats: list = [None, None]
    if not int(n.attr("training_mode", 0)) and (n.need(3) or n.need(4)):  # running statistics as inputs
        stats = [ops.Neg(ops.ReduceSum(gx, sum_axes, keepdims=0)),
                 ops.Mul(ops.ReduceSum(ops.Mul(gx, x_hat), sum_axes, keepdims=0),
                         ops.Mul(ops.Reshape(inv, i64([-1])), const(-0.5, typed)))]
    return [gx if n.need(0) else None,
            ops.ReduceSum(ops.Mul(g, x_hat), sum_axes, keepdims=0) if n.need(1) else None,
            ops.ReduceSum(g, sum_axes, keepdims=0) if n.need(2) else None, *stats][:len(n.inputs)]


define("BatchNormalization", type_rule=batch_norm, vjp=batchnorm_vjp)


def _batch_normalised(x: np.ndarray, eps: float, scale: np.ndarray, bias: np.ndarray) -> tuple:
    """``(x - mean) * (scale / sqrt(var + eps)) + bias`` with the batch mean and (biased)
    variance per channel, and those two (shaped (1, C, 1 ...)): five passes over ``x`` rather
    than eight, into one new array laid out like ``x``."""
    lanes = channel_lanes(x)
    if lanes is None:
        axes = (0, *range(2, x.ndim))
        mean = np.mean(x, axis=axes, keepdims=True)
        centred = np.subtract(x, mean, out=np.empty_like(x))
        var = np.mean(np.square(centred), axis=axes, keepdims=True)
        np.multiply(centred, scale / np.sqrt(var + eps), out=centred)
        np.add(centred, bias, out=centred)
        return centred, mean, var
    flat, k = lanes
    channels, count = x.shape[1], x.size // x.shape[1]
    mean = flat.sum(axis=0).reshape(k, channels).sum(axis=0) / count
    centred = flat - np.tile(mean, k)
    var = np.square(centred).sum(axis=0).reshape(k, channels).sum(axis=0) / count
    centred *= np.tile(scale.reshape(-1) / np.sqrt(var + eps), k)
    centred += np.tile(bias.reshape(-1), k)
    y = channels_first(centred.reshape(x.shape[0], *x.shape[2:], channels))
    return y, _channel(mean, x.ndim), _channel(var, x.ndim)

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
    y, batch_mean, batch_var = _batch_normalised(wx, eps, _channel(scale.astype(w), x.ndim),
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


def instancenorm_vjp(n: GradNode) -> list:
    """InstanceNormalization: normalised over each sample's and channel's spatial axes; scale
    and bias per channel."""
    x, scale = n.given(0, 1)
    r = rank(x, n)
    axes = list(range(2, r))
    x_hat, inv = _normalised(x, axes, float(n.attr("epsilon", 1e-5)))
    g = n.grad()
    per_channel = i64([-1, *([1] * (r - 2))])
    sum_axes = i64([0, *axes])
    return [_through_norm(ops.Mul(g, ops.Reshape(scale, per_channel)), x_hat, inv, axes) if n.need(0) else None,
            ops.ReduceSum(ops.Mul(g, x_hat), sum_axes, keepdims=0) if n.need(1) else None,
            ops.ReduceSum(g, sum_axes, keepdims=0) if n.need(2) else None][:len(n.inputs)]


define("InstanceNormalization", type_rule=same_as_first, vjp=instancenorm_vjp)


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


def layer_norm(node: Node) -> list:
    """Y like X, whose normalized dims (from ``axis`` on) Scale and B broadcast to, so each of
    their dims other than 1 is X's; Mean and InvStdDev keep X's leading dims and have 1 from
    ``axis`` on."""
    shape = node.shape(0)
    stash = ONNX_DTYPES.get(int(node.attr("stash_type", 1)), "float32")
    if shape is None:
        return [node.type(0), TensorType(stash, None), TensorType(stash, None)]
    axis = node.axis(int(node.attr("axis", -1)), len(shape))
    dims = list(shape)
    for i in (1, 2):  # Scale and B
        weight = node.shape(i)
        if weight is None:
            continue
        if len(weight) > len(dims) - axis:
            raise node.fail(f"input {i} of rank at most {len(dims) - axis} (the normalized dims)", f"rank {len(weight)}")
        for k in range(1, len(weight) + 1):
            if type(weight[-k]) is int and weight[-k] != 1:
                dims[-k] = node.same(dims[-k], weight[-k], "the normalized dims")
    stat = TensorType(stash, tuple(d if i < axis else 1 for i, d in enumerate(dims)))
    return [TensorType(node.dtype(0), tuple(dims)), stat, stat]


def layernorm_vjp(n: GradNode) -> list:
    """LayerNormalization over the axes from ``axis`` on."""
    x, scale = n.given(0, 1)
    _only_first_output(n)
    r = rank(x, n)
    axes = list(range(int(n.attr("axis", -1)) % r, r))
    x_hat, inv = _normalised(x, axes, float(n.attr("epsilon", 1e-5)))
    g = n.grad()
    out: list = [_through_norm(ops.Mul(g, scale), x_hat, inv, axes) if n.need(0) else None,
                 unbroadcast(ops.Mul(g, x_hat), scale) if n.need(1) else None]
    if len(n.inputs) > 2:
        bias = n.inputs[2]
        out.append(unbroadcast(g, bias) if n.need(2) and bias is not None else None)
    return out


define("LayerNormalization", type_rule=layer_norm, vjp=layernorm_vjp)


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


def _group_norm_grad(n: GradNode) -> list:
    """GroupNormalization: statistics over each group of channels."""
    x, scale, bias = n.given(0, 1, 2)
    groups, r = int(n.attr("num_groups")), rank(x, n)
    eps = const(float(n.attr("epsilon", 1e-5)), x)
    grouped = ops.Reshape(x, np.array([0, groups, -1], I64))
    centred = ops.Sub(grouped, ops.ReduceMean(grouped, axes=[2], keepdims=1))
    var = ops.ReduceMean(ops.Mul(centred, centred), axes=[2], keepdims=1)
    normed = ops.Div(centred, ops.Sqrt(ops.Add(var, eps)))
    if n.opset is not None and n.opset < 21:  # one scale and bias per group
        per_group = np.array([1, groups, 1], I64)
        y = ops.Add(ops.Mul(normed, ops.Reshape(scale, per_group)), ops.Reshape(bias, per_group))
        return [ops.Reshape(y, shape_of(x))]
    per_channel = np.array([1, -1] + [1] * (r - 2), I64)
    y = ops.Reshape(normed, shape_of(x))
    return [ops.Add(ops.Mul(y, ops.Reshape(scale, per_channel)), ops.Reshape(bias, per_channel))]


group_norm_vjp = composite(_group_norm_grad)


define("GroupNormalization", type_rule=same_as_first, vjp=group_norm_vjp)


@kernel("GroupNormalization", since=21)
def groupnorm_kernel(attrs: Attrs, x: np.ndarray, scale: np.ndarray, bias: np.ndarray) -> tuple:
    """ONNX GroupNormalization from opset 21: ``scale`` and ``bias`` are per channel."""
    return _group_norm(attrs, x, scale, bias, per_channel=True)
