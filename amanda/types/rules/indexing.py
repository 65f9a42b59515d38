"""Type rules shared by the indexing and resampling families: gather, scatter, resize."""

from __future__ import annotations

import math
from typing import Any

from amanda.types.node import Node, Partial, from_dims
from amanda.types.tensor_type import Dim, TensorType


def unknown(node: Node, i: int = 0) -> list:
    shape = node.shape(i)
    return [TensorType(node.dtype(i), None if shape is None else (None,) * len(shape))]


def gather(node: Node) -> list:
    """``data[:axis] + indices.shape + data[axis+1:]``; gathers shape values too."""
    data, idx = node.shape(0), node.shape(1)
    if node.dtype(1) not in (None, "int32", "int64"):
        raise node.fail("int32 or int64 indices", str(node.dtype(1)))
    if data is None or idx is None:
        return [TensorType(node.dtype(0), None)]
    axis = node.axis(int(node.attr("axis", 0)), len(data))
    value, picks = node.value(0), node.ints(1)
    if isinstance(value, Partial) and axis == 0 and picks is not None:
        n = len(value.dims)
        if all(-n <= p < n for p in picks):
            node.set_value(0, from_dims([value.dims[p] for p in picks], scalar=len(idx) == 0))
    return [TensorType(node.dtype(0), (*data[:axis], *idx, *data[axis + 1:]))]  # type: ignore[index]


def scatter(node: Node) -> list:
    """The data's type; updates must have the data's dtype."""
    if node.dtype(2) not in (None, node.dtype(0)) and node.dtype(0) is not None:
        raise node.fail(f"updates of dtype {node.dtype(0)}", str(node.dtype(2)))
    return [node.type(0)]


def scaled(node: Node, shape: Any, scales: Any) -> list:
    if len(scales) != len(shape):
        raise node.fail(f"{len(shape)} scales", str(len(scales)))
    return [math.floor(d * s) if type(d) is int else (d if s == 1 else None)
            for d, s in zip(shape, scales)]


def resize(node: Node) -> list:
    """Dims from ``sizes``, or the input's dims times ``scales`` (rounded down)."""
    shape = node.shape(0)
    if shape is None:
        return [TensorType(node.dtype(0), None)]
    axes = node.attr("axes")
    axes = [node.axis(int(a), len(shape)) for a in axes] if axes else list(range(len(shape)))
    sizes = node.ints(3) if node.present(3) else None
    policy = node.attr("keep_aspect_ratio_policy", "stretch")
    out: list[Dim] = list(shape)
    if sizes is not None and policy == "stretch":
        for a, s in zip(axes, sizes):
            out[a] = s
        return [TensorType(node.dtype(0), out)]
    scales = node.value(2 if node.opset >= 11 else 1)
    if scales is not None and not isinstance(scales, Partial) and scales.size and sizes is None:
        full = [1.0] * len(shape)
        for a, s in zip(axes, scales.reshape(-1).tolist()):
            full[a] = s
        return [TensorType(node.dtype(0), scaled(node, shape, full))]
    return [TensorType(node.dtype(0), [None if i in axes else d for i, d in enumerate(shape)])]


