"""The normalisations without learned statistics beyond a scale: LpNormalization,
MeanVarianceNormalization, RMSNormalization and LRN, each with its kernel, type rule and gradient
side by side (BatchNormalization, InstanceNormalization, LayerNormalization and
GroupNormalization are in :mod:`amanda.opset.onnx.normalization`).

Each gradient follows its kernel's formula: MeanVarianceNormalization divides by ``std + 1e-9``,
LpNormalization gives zeros (and a zero gradient) where the norm is zero.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from amanda.autodiff.composite import composite
from amanda.autodiff.node import Node as GradNode
from amanda.autodiff.node import axes_of, const, rank, unbroadcast
from amanda.autodiff.rules_decomposed import I64, i64_1d
from amanda.build import ops
from amanda.build.values import Value
from amanda.exec.kernels.math_util import as_array, attr_ints, normalize_axes, wide
from amanda.exec.kernels.registry import kernel
from amanda.ops import define
from amanda.types.rules.elementwise import along_axis, same_as_first

Attrs = Mapping[str, Any]


@kernel("LpNormalization", since=1)
def lpnorm_kernel(attrs: Attrs, x: np.ndarray) -> tuple:
    """ONNX LpNormalization along ``axis`` with p = 1 or 2; a zero norm gives zeros."""
    axis, p = int(attrs.get("axis", -1)), int(attrs.get("p", 2))
    wx = x.astype(wide(x.dtype), copy=False)
    if p == 1:
        norm = np.sum(np.abs(wx), axis=axis, keepdims=True)
    else:
        norm = np.sqrt(np.sum(wx * wx, axis=axis, keepdims=True))
    y = np.where(norm == 0, 0, wx / norm)
    return (as_array(y).astype(x.dtype, copy=False),)


def lpnorm_vjp(n: GradNode) -> list:
    """LpNormalization, ``y = x / |x|_p`` along ``axis`` (p 1 or 2):
    ``(g - dN/dx * sum(g*y)) / N`` with ``dN/dx = sign(x)`` or ``y``."""
    x = n.given(0)
    p = int(n.attr("p", 2))
    if p not in (1, 2):
        raise n.fail("p = 1 or 2", f"p = {p}")
    axis = np.array([int(n.attr("axis", -1)) % rank(x, n)], np.int64)
    y, g = n.outputs[0], n.grad()
    reduce = ops.ReduceL1 if p == 1 else ops.ReduceL2
    norm = reduce(x, axes=[int(axis[0])], keepdims=1)  # the builder's opset 17: axes an attribute
    zero = ops.Equal(norm, const(0, norm))
    safe = ops.Where(zero, const(1, norm), norm)
    slope = ops.Sign(x) if p == 1 else y
    gx = ops.Div(ops.Sub(g, ops.Mul(slope, ops.ReduceSum(ops.Mul(g, y), axis, keepdims=1))), safe)
    return [ops.Where(zero, const(0, g), gx)]


define("LpNormalization", type_rule=along_axis, vjp=lpnorm_vjp)


@kernel("MeanVarianceNormalization", since=9)
def mvn_kernel(attrs: Attrs, x: np.ndarray) -> tuple:
    """ONNX MeanVarianceNormalization: ``(x - mean) / (std + 1e-9)`` over ``axes``."""
    axes = normalize_axes(attr_ints(attrs, "axes") or [0, 2, 3], x.ndim)
    wx = x.astype(wide(x.dtype), copy=False)
    mean = np.mean(wx, axis=axes, keepdims=True)
    # E[x^2] - E[x]^2, as the ONNX function body computes it
    std = np.sqrt(np.maximum(np.mean(wx * wx, axis=axes, keepdims=True) - mean * mean, 0))
    return (as_array((wx - mean) / (std + 1e-9)).astype(x.dtype, copy=False),)


def _mean(v: Value, axes: list[int]) -> Value:
    return ops.ReduceMean(v, axes=axes, keepdims=1)


def mvn_vjp(n: GradNode) -> list:
    """MeanVarianceNormalization, ``y = c / (s + 1e-9)`` with ``c = x - mean`` and
    ``s = sqrt(mean(c^2))`` over ``axes``: ``t = g/d - c * mean(g*c) / (d^2 s)``, centred."""
    x = n.given(0)
    axes = axes_of(n.attr("axes", [0, 2, 3]), rank(x, n))
    g = n.grad()
    c = ops.Sub(x, _mean(x, axes))
    s = ops.Sqrt(_mean(ops.Mul(c, c), axes))
    d = ops.Add(s, const(1e-9, s))
    t = ops.Sub(ops.Div(g, d), ops.Div(ops.Mul(c, _mean(ops.Mul(g, c), axes)), ops.Mul(ops.Mul(d, d), s)))
    return [ops.Sub(t, _mean(t, axes))]


define("MeanVarianceNormalization", type_rule=same_as_first, vjp=mvn_vjp)


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


def rms_vjp(n: GradNode) -> list:
    """RMSNormalization, ``y = x * r * scale`` with ``r = 1/sqrt(mean(x^2) + eps)`` over the
    axes from ``axis`` on: ``r * gs - r^3 * x * mean(gs * x)`` (``gs = g * scale``), and the
    scale's ``g * x * r`` summed over its broadcast axes."""
    x, scale = n.given(0, 1)
    r_ = rank(x, n)
    axes = list(range(int(n.attr("axis", -1)) % r_, r_))
    g = n.grad()
    r = ops.Reciprocal(ops.Sqrt(ops.Add(_mean(ops.Mul(x, x), axes), const(float(n.attr("epsilon", 1e-5)), x))))
    gs = ops.Mul(g, scale)
    gx = ops.Sub(ops.Mul(r, gs), ops.Mul(ops.Mul(ops.Mul(r, ops.Mul(r, r)), x), _mean(ops.Mul(gs, x), axes)))
    return [gx if n.need(0) else None, unbroadcast(ops.Mul(g, ops.Mul(x, r)), scale) if n.need(1) else None]


define("RMSNormalization", type_rule=same_as_first, vjp=rms_vjp)


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


def _lrn(n: GradNode) -> list:
    """LRN: ``x / (bias + alpha/size * sum of squares over the nearest channels) ** beta``."""
    x = n.given(0)
    shape, r = x.type.shape, rank(x, n)
    if shape is None or type(shape[1]) is not int:
        raise n.fail("a known number of channels", repr(x.type))
    size, channels = int(n.attr("size")), int(shape[1])
    alpha, beta, bias = float(n.attr("alpha", 1e-4)), float(n.attr("beta", 0.75)), float(n.attr("bias", 1.0))
    below, above = (size - 1) // 2, size - 1 - (size - 1) // 2
    pads = np.zeros(2 * r, I64)
    pads[1], pads[r + 1] = below, above
    padded = ops.Pad(ops.Mul(x, x), pads)
    parts = [ops.Slice(padded, i64_1d(k), i64_1d(k + channels), i64_1d(1)) for k in range(size)]
    window = parts[0] if size == 1 else ops.Sum(*parts)
    base = ops.Add(ops.Mul(window, const(alpha / size, x)), const(bias, x))
    return [ops.Div(x, ops.Pow(base, const(beta, x)))]


lrn_vjp = composite(_lrn)


define("LRN", type_rule=same_as_first, vjp=lrn_vjp)
