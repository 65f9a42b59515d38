"""What the type rules of the control-flow ops share (a body's inferred outputs, :func:`body_types`;
an axis dropped or inserted) and the type of an optional; the ops' rules are registered in
:mod:`amanda.opset.onnx.control_flow` and :mod:`amanda.opset.onnx.scan`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from amanda.types.node import Node
from amanda.types.tensor_type import (
    OptionalType,
    TensorType,
    from_attrs,
)

BOOL = TensorType("bool", ())


def body_types(node: Node, label: str, inputs: list) -> list:
    """The output types of body attribute ``label`` given its input types (unknown without a body)."""
    graph = node.attrs.get(label)
    if graph is None or node.body is None:
        return [None] * node.n_out
    return list(node.body(label, graph, inputs))


def drop_axis(t: Any, axis: int) -> Any:
    """Type ``t`` without axis ``axis`` (rank unknown for a type that is not a tensor of known shape)."""
    if not isinstance(t, TensorType) or t.shape is None:
        return TensorType(getattr(t, "dtype", None), None)
    return TensorType(t.dtype, t.shape[:axis] + t.shape[axis + 1:])


def insert(t: Any, axis: int, dim: Any) -> Any:
    if not isinstance(t, TensorType) or t.shape is None:
        return TensorType(getattr(t, "dtype", None), None)
    axis = axis % (len(t.shape) + 1)
    return TensorType(t.dtype, t.shape[:axis] + (dim,) + t.shape[axis:])


def optional(node: Node) -> list:
    """An optional of the input's type (or of the ``type`` attribute)."""
    if node.present(0):
        return [OptionalType(node.type(0))]
    given = node.attrs.get("type")
    return [OptionalType(from_attrs({"type": given}) if isinstance(given, Mapping) else None)]
