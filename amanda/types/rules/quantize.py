"""Quantisation: the integer or narrow-float types of QuantizeLinear and friends."""

from __future__ import annotations

from amanda.types.node import Node
from amanda.types.rules import rule
from amanda.types.rules.spatial import conv
from amanda.types.tensor_type import ONNX_DTYPES, TensorType


@rule("QuantizeLinear")
def quantize_linear(node: Node) -> list:
    """The input's shape in the zero point's type (else ``output_dtype``, else uint8)."""
    if node.present(2):
        dtype = node.dtype(2)
    else:
        code = int(node.attr("output_dtype", 0))
        dtype = ONNX_DTYPES.get(code, "uint8") if code else "uint8"
    return [TensorType(dtype, node.shape(0))]


@rule("DequantizeLinear")
def dequantize_linear(node: Node) -> list:
    """The input's shape in the scale's type (or ``output_dtype``)."""
    code = int(node.attr("output_dtype", 0))
    return [TensorType(ONNX_DTYPES.get(code) if code else node.dtype(1), node.shape(0))]


@rule("DynamicQuantizeLinear")
def dynamic_quantize_linear(node: Node) -> list:
    """uint8 values shaped like the input, a float32 scale and a uint8 zero point (scalars)."""
    return [TensorType("uint8", node.shape(0)), TensorType("float32", ()), TensorType("uint8", ())]


@rule("QLinearMatMul")
def qlinear_matmul(node: Node) -> list:
    """The product's shape (numpy matmul rules) in the output zero point's type."""
    a, b = node.shape(0), node.shape(3)
    if a is None or b is None or len(a) < 2 or len(b) < 2:
        return [TensorType(node.dtype(7), None)]
    node.same(a[-1], b[-2], "the inner dims")
    batch = node.broadcast(a[:-2], b[:-2])
    return [TensorType(node.dtype(7), (*(batch or ()), a[-2], b[-1]))]


@rule("ConvInteger", "QLinearConv")
def integer_conv(node: Node) -> list:
    """A convolution's shape, in int32 (ConvInteger) or the output zero point's type."""
    weights = 1 if node.op.type == "ConvInteger" else 3
    shaped = _ConvView(node, weights)
    (out,) = conv(shaped)  # type: ignore[arg-type]
    dtype = "int32" if node.op.type == "ConvInteger" else node.dtype(7)
    return [TensorType(dtype, out.shape)]


class _ConvView:
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
