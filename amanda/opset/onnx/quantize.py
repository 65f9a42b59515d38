"""Quantisation of the ONNX default domain: QuantizeLinear, DequantizeLinear,
DynamicQuantizeLinear, QLinearMatMul, ConvInteger and QLinearConv.

Integer targets round half to even and saturate to the type's range. Float targets
(float8, float4) divide by the scale and, with ``saturate`` (the default), clip to the
type's largest finite value before the cast; int4, uint4, int2 and uint2 are ml_dtypes'
types, as ``onnx.numpy_helper`` reads them. A scale is per tensor (a scalar), per axis
(1-D along ``axis``), or per block (``block_size`` > 0: the scale has the input's rank and
each of its entries covers ``block_size`` values along ``axis``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from amanda.exec.kernels.conv import conv_nd
from amanda.exec.kernels.onnx_dtypes import onnx_dtype
from amanda.exec.kernels.registry import kernel
from amanda.exec.kernels.spatial import ints, window_pads
from amanda.ops import define
from amanda.opset.onnx.conv import conv_type
from amanda.types.node import Node
from amanda.types.tensor_type import ONNX_DTYPES, TensorType

Attrs = Mapping[str, Any]


def _spread(scale: np.ndarray, x: np.ndarray, attrs: Attrs) -> np.ndarray:
    """``scale`` (or a zero point) shaped to broadcast against ``x``."""
    if scale.ndim == 0 or scale.size == 1 and scale.ndim <= 1:
        return scale.reshape(())
    axis = int(attrs.get("axis", 1))
    axis = axis + x.ndim if axis < 0 else axis
    block = int(attrs.get("block_size", 0))
    if block > 0:
        return np.repeat(scale, block, axis=axis)[(slice(None),) * axis + (slice(0, x.shape[axis]),)]
    shape = [1] * x.ndim
    shape[axis] = scale.size
    return scale.reshape(shape)


def _is_float(dtype: np.dtype) -> bool:
    return dtype.kind == "f" or "float" in dtype.name


def _limits(dtype: np.dtype) -> tuple[float, float]:
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return float(info.min), float(info.max)
    import ml_dtypes

    if dtype.name in ("int4", "uint4", "int2", "uint2"):
        narrow = ml_dtypes.iinfo(dtype)
        return float(narrow.min), float(narrow.max)
    finite = float(ml_dtypes.finfo(dtype).max)
    return -finite, finite


def quantize(x: np.ndarray, scale: Any, zero: Any, target: np.dtype, saturate: bool = True) -> np.ndarray:
    """``x / scale + zero`` in ``target``: rounded and saturated for integer types.

    The division runs in float32 unless ``x`` or ``scale`` is float64, as onnxruntime and
    onnx's reference divide: a ratio that is a tie in float32 must round as a tie."""
    work = np.float64 if np.float64 in (np.asarray(x).dtype, np.asarray(scale).dtype) else np.float32
    ratio = (np.asarray(x).astype(work) / np.asarray(scale).astype(work)).astype(np.float64)
    low, high = _limits(target)
    if _is_float(target):
        if saturate:
            ratio = np.where(np.isnan(ratio), ratio, np.clip(ratio, low, high))
        if zero is not None:
            ratio = ratio + np.asarray(zero).astype(np.float64)
        return ratio.astype(target)
    shifted = np.rint(ratio) + (0 if zero is None else np.asarray(zero).astype(np.float64))
    return np.clip(shifted, low, high).astype(target)


def _target(attrs: Attrs, zero: Any) -> np.dtype:
    if zero is not None:
        return zero.dtype
    code = int(attrs.get("output_dtype", 0))
    return onnx_dtype(code) if code else np.dtype(np.uint8)


@kernel("QuantizeLinear", since=10)
def quantize_linear_kernel(attrs: Attrs, x: np.ndarray, scale: np.ndarray, zero: Any = None) -> tuple:
    """ONNX QuantizeLinear: per tensor, per axis or per block, to the zero point's type."""
    target = _target(attrs, zero)
    s = _spread(scale, x, attrs)
    z = None if zero is None else _spread(zero, x, attrs)
    return (quantize(x, s, z, target, bool(int(attrs.get("saturate", 1)))),)


def quantize_linear(node: Node) -> list:
    """The input's shape in the zero point's type (else ``output_dtype``, else uint8)."""
    if node.present(2):
        dtype = node.dtype(2)
    else:
        code = int(node.attr("output_dtype", 0))
        dtype = ONNX_DTYPES.get(code, "uint8") if code else "uint8"
    return [TensorType(dtype, node.shape(0))]


define("QuantizeLinear", type_rule=quantize_linear, no_gradient="quantised (integer) data")


@kernel("DequantizeLinear", since=10)
def dequantize_linear_kernel(attrs: Attrs, x: np.ndarray, scale: np.ndarray, zero: Any = None) -> tuple:
    """ONNX DequantizeLinear: ``(x - zero) * scale`` in the scale's type (or ``output_dtype``)."""
    s = _spread(scale, x, attrs)
    value = x.astype(np.float32 if _is_float(x.dtype) and x.dtype != np.float64 else np.float64)
    if zero is not None:
        value = value - _spread(zero, x, attrs).astype(value.dtype)
    code = int(attrs.get("output_dtype", 0))
    out = onnx_dtype(code) if code else scale.dtype
    return ((value * s.astype(np.float64)).astype(out),)


def dequantize_linear(node: Node) -> list:
    """The input's shape in the scale's type (or ``output_dtype``)."""
    code = int(node.attr("output_dtype", 0))
    return [TensorType(ONNX_DTYPES.get(code) if code else node.dtype(1), node.shape(0))]


define("DequantizeLinear", type_rule=dequantize_linear, no_gradient="quantised (integer) data")


@kernel("DynamicQuantizeLinear", since=11)
def dynamic_quantize_linear_kernel(attrs: Attrs, x: np.ndarray) -> tuple:
    """ONNX DynamicQuantizeLinear: uint8 with a scale and zero point covering [min(x, 0), max(x, 0)]."""
    low = min(0.0, float(np.min(x))) if x.size else 0.0
    high = max(0.0, float(np.max(x))) if x.size else 0.0
    scale = np.float32((high - low) / 255)
    if scale == 0:
        return (np.zeros(x.shape, np.uint8), np.array(scale, np.float32), np.array(0, np.uint8))
    zero = np.uint8(np.clip(np.rint(0 - low / np.float64(scale)), 0, 255))
    y = quantize(x, scale, np.float64(zero), np.dtype(np.uint8))
    return (y, np.array(scale, np.float32), np.array(zero, np.uint8))


def dynamic_quantize_linear(node: Node) -> list:
    """uint8 values shaped like the input, a float32 scale and a uint8 zero point (scalars)."""
    return [TensorType("uint8", node.shape(0)), TensorType("float32", ()), TensorType("uint8", ())]


define("DynamicQuantizeLinear", type_rule=dynamic_quantize_linear, no_gradient="quantised (integer) data")


def _centred(q: np.ndarray, zero: Any, shape: tuple[int, ...] | None = None) -> np.ndarray:
    value = q.astype(np.int64)
    if zero is None:
        return value
    z = np.asarray(zero).astype(np.int64)
    return value - (z.reshape(shape) if shape is not None and z.size > 1 else z)


@kernel("QLinearMatMul", since=10, heavy=True)
def qlinear_matmul_kernel(attrs: Attrs, a: np.ndarray, a_scale: np.ndarray, a_zero: np.ndarray,
                          b: np.ndarray, b_scale: np.ndarray, b_zero: np.ndarray,
                          y_scale: np.ndarray, y_zero: np.ndarray) -> tuple:
    """ONNX QLinearMatMul: the integer product of centred operands, requantised to ``y``."""
    row = (-1, 1)
    product = np.matmul(_centred(a, a_zero, row), _centred(b, b_zero)).astype(np.float64)
    sa = a_scale.astype(np.float64).reshape(row if a_scale.size > 1 else ())
    sb = b_scale.astype(np.float64)
    sy = y_scale.astype(np.float64).reshape(row if y_scale.size > 1 else ())
    ratio = product * (sa * sb / sy)
    return (quantize(ratio, np.float64(1.0), y_zero.astype(np.float64), y_zero.dtype),)


def qlinear_matmul(node: Node) -> list:
    """The product's shape (numpy matmul rules) in the output zero point's type."""
    a, b = node.shape(0), node.shape(3)
    if a is None or b is None or len(a) < 2 or len(b) < 2:
        return [TensorType(node.dtype(7), None)]
    node.same(a[-1], b[-2], "the inner dims")
    batch = node.broadcast(a[:-2], b[:-2])
    return [TensorType(node.dtype(7), (*(batch or ()), a[-2], b[-1]))]


define("QLinearMatMul", type_rule=qlinear_matmul, no_gradient="quantised (integer) data")


def _conv_geometry(attrs: Attrs, x: np.ndarray, w: np.ndarray) -> tuple:
    nd = x.ndim - 2
    strides = ints(attrs.get("strides"), nd, 1)
    dilations = ints(attrs.get("dilations"), nd, 1)
    pads = window_pads(attrs, x.shape[2:], list(w.shape[2:]), strides, dilations)
    return strides, dilations, pads, int(attrs.get("group", 1))


def _integer_conv(attrs: Attrs, x: np.ndarray, w: np.ndarray, x_zero: Any, w_zero: Any) -> np.ndarray:
    """The exact integer convolution of centred operands (float64 holds every 8-bit sum exactly)."""
    per_channel = (-1,) + (1,) * (w.ndim - 1)
    xc = _centred(x, x_zero).astype(np.float64)
    wc = _centred(w, w_zero, per_channel).astype(np.float64)
    y = conv_nd(xc, wc, None, *_conv_geometry(attrs, x, w))
    return np.rint(y)


@kernel("ConvInteger", since=10, heavy=True)
def conv_integer_kernel(attrs: Attrs, x: np.ndarray, w: np.ndarray, x_zero: Any = None, w_zero: Any = None) -> tuple:
    """ONNX ConvInteger: the convolution of ``x - x_zero`` and ``w - w_zero`` in int32."""
    return (_integer_conv(attrs, x, w, x_zero, w_zero).astype(np.int32),)


@kernel("QLinearConv", since=10, heavy=True)
def qlinear_conv_kernel(attrs: Attrs, x: np.ndarray, x_scale: np.ndarray, x_zero: np.ndarray,
                        w: np.ndarray, w_scale: np.ndarray, w_zero: np.ndarray,
                        y_scale: np.ndarray, y_zero: np.ndarray, bias: Any = None) -> tuple:
    """ONNX QLinearConv: an integer convolution plus int32 bias, requantised to ``y``."""
    acc = _integer_conv(attrs, x, w, x_zero, w_zero)
    channel = (1, -1) + (1,) * (x.ndim - 2)
    if bias is not None:
        acc = acc + bias.astype(np.float64).reshape(channel)
    sw = w_scale.astype(np.float64)
    sw = sw.reshape(channel) if sw.size > 1 else sw.reshape(())
    ratio = acc * (np.float64(x_scale.reshape(-1)[0]) * sw / np.float64(y_scale.reshape(-1)[0]))
    return (quantize(ratio, np.float64(1.0), y_zero.astype(np.float64).reshape(-1)[0], y_zero.dtype),)


# ---- type rules and gradients shared by several ops of this family ----


class ConvView:
    """The node seen as a Conv: data at input 0, weights at ``weights``."""

    def __init__(self, node: Node, weights: int) -> None:
        self._node = node
        self._weights = weights

    def shape(self, i: int):  # noqa: ANN201 - mirrors Node.shape
        return self._node.shape(0 if i == 0 else self._weights)

    def dtype(self, i: int):  # noqa: ANN201
        return self._node.dtype(0)

    def __getattr__(self, name: str):  # noqa: ANN204 - attr, fail, same, opset … come from the node
        return getattr(self._node, name)


def integer_conv(node: Node) -> list:
    """A convolution's shape, in int32 (ConvInteger) or the output zero point's type."""
    weights = 1 if node.op.type == "ConvInteger" else 3
    shaped = ConvView(node, weights)
    (out,) = conv_type(shaped)  # type: ignore[arg-type]
    dtype = "int32" if node.op.type == "ConvInteger" else node.dtype(7)
    return [TensorType(dtype, out.shape)]


# each op's type rule and gradient, beside the kernels registered above
define("ConvInteger", type_rule=integer_conv, no_gradient="quantised (integer) data")
define("QLinearConv", type_rule=integer_conv, no_gradient="quantised (integer) data")
