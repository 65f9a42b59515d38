"""Type helpers shared by op families: dtype codes held in attributes, the shapes of windows
and of losses."""

from __future__ import annotations

from amanda.types.node import Node
from amanda.types.rules import by_name
from amanda.types.tensor_type import ONNX_DTYPES, TensorType


def dtype_from_attr(node: Node, name: str, default: int) -> str | None:
    """The dtype an ONNX dtype-code attribute names (``default`` when absent; None for code 0)."""
    code = int(node.attr(name, default))
    return ONNX_DTYPES.get(code) if code else None


def window(node: Node) -> list:
    """A 1-D window of the given size in ``output_datatype``."""
    size = node.ints(0)
    return [TensorType(dtype_from_attr(node, "output_datatype", 1), (size[0] if size else None,))]


def loss(node: Node) -> list:
    """A scalar (``mean``/``sum``) or the target's shape (``none``); SoftmaxCrossEntropyLoss
    also gives the log-probabilities, shaped like the scores."""
    reduction = node.attr("reduction", "mean")
    reduction = reduction.decode() if isinstance(reduction, bytes) else reduction
    shape = node.shape(1) if reduction == "none" else ()
    value = TensorType(node.dtype(0), shape)
    return by_name(node, loss=value, output=value, log_prob=TensorType(node.dtype(0), node.shape(0)))


