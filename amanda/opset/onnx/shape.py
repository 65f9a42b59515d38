"""Shape ops: Reshape, Squeeze, Unsqueeze, Expand, Flatten, Shape, Size, each with its kernel(s),
type rule and gradient side by side (the layout ops are in :mod:`amanda.opset.onnx.layout`).

Versions follow the ONNX attribute-to-input moves (Reshape 5, Squeeze/Unsqueeze 13);
ops whose later versions only widen types or add attributes with defaults have one kernel from version 1.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from amanda.autodiff.node import Node as GradNode
from amanda.autodiff.node import shape_of, unbroadcast
from amanda.autodiff.rules_shape import rest
from amanda.build import ops
from amanda.errors import ExecutionError
from amanda.exec.kernels.math_util import axis_of, int_list
from amanda.exec.kernels.registry import kernel
from amanda.ops import define
from amanda.types.node import Node, Partial, from_dims
from amanda.types.rules.shape import squeeze as squeeze_type
from amanda.types.tensor_type import Dim, TensorType


def _reshape(x: np.ndarray, shape: Sequence[int], allowzero: bool) -> np.ndarray:
    target = list(shape)
    if not allowzero:
        # 0 copies the input's dimension at the same position
        target = [x.shape[i] if d == 0 else d for i, d in enumerate(target)]
    return x.reshape(target)


@kernel("Reshape", since=1)
def reshape_v1(attrs: Mapping[str, Any], x: np.ndarray) -> tuple:
    """ONNX Reshape-1: the target shape is the ``shape`` attribute."""
    return (_reshape(x, int_list(attrs.get("shape")), False),)


@kernel("Reshape", since=5)
def reshape(attrs: Mapping[str, Any], x: np.ndarray, shape: np.ndarray) -> tuple:
    """ONNX Reshape-5+: target shape input; 0 copies a dimension unless ``allowzero``."""
    return (_reshape(x, int_list(shape), bool(attrs.get("allowzero", 0))),)


def _squeeze(x: np.ndarray, axes: list[int]) -> np.ndarray:
    if not axes:
        return x.reshape([d for d in x.shape if d != 1])
    norm = {axis_of(a, x.ndim, "axes") for a in axes}
    bad = [a for a in norm if x.shape[a] != 1]
    if bad:
        raise ExecutionError.at("axes", "axes of size 1", f"axes {bad} of shape {x.shape}")
    return x.reshape([d for i, d in enumerate(x.shape) if i not in norm])


@kernel("Squeeze", since=1)
def squeeze_v1(attrs: Mapping[str, Any], x: np.ndarray) -> tuple:
    """ONNX Squeeze-1/11: ``axes`` attribute (all size-1 axes when absent)."""
    return (_squeeze(x, int_list(attrs.get("axes"))),)


@kernel("Squeeze", since=13)
def squeeze(attrs: Mapping[str, Any], x: np.ndarray, axes: np.ndarray | None = None) -> tuple:
    """ONNX Squeeze-13+: ``axes`` input (all size-1 axes when absent)."""
    return (_squeeze(x, int_list(axes)),)


def _unsqueeze(x: np.ndarray, axes: list[int]) -> np.ndarray:
    rank = x.ndim + len(axes)
    norm = sorted(axis_of(a, rank, "axes") for a in axes)
    if len(set(norm)) != len(norm):
        raise ExecutionError.at("axes", "distinct axes", str(axes))
    shape = list(x.shape)
    for a in norm:
        shape.insert(a, 1)
    return x.reshape(shape)


@kernel("Unsqueeze", since=1)
def unsqueeze_v1(attrs: Mapping[str, Any], x: np.ndarray) -> tuple:
    """ONNX Unsqueeze-1/11: ``axes`` attribute."""
    return (_unsqueeze(x, int_list(attrs.get("axes"))),)


@kernel("Unsqueeze", since=13)
def unsqueeze(attrs: Mapping[str, Any], x: np.ndarray, axes: np.ndarray) -> tuple:
    """ONNX Unsqueeze-13+: ``axes`` input."""
    return (_unsqueeze(x, int_list(axes)),)


@kernel("Expand", since=8)
def expand(attrs: Mapping[str, Any], x: np.ndarray, shape: np.ndarray) -> tuple:
    """ONNX Expand: broadcast ``x`` with ``shape`` (numpy's bidirectional rule)."""
    target = np.broadcast_shapes(x.shape, tuple(int_list(shape)))
    return (np.array(np.broadcast_to(x, target)),)


def expand_type(node: Node) -> list:
    """The input broadcast with the target shape."""
    vector(node, 1, "the target shape")
    target = node.dims(1)
    shape = node.shape(0)
    if target is None:
        n = node.shape(1)
        if n is None or type(n[0]) is not int or shape is None:
            return [TensorType(node.dtype(0), None)]
        rank = max(n[0], len(shape))
        # a target dim is 1 or the input's dim, so input dims other than 1 survive
        out = [None] * (rank - len(shape)) + [d if d != 1 else None for d in shape]
        return [TensorType(node.dtype(0), out)]
    return [TensorType(node.dtype(0), node.broadcast(shape, tuple(target)))]


def expand_vjp(n: GradNode) -> list:
    """Expand: summed over the axes it broadcast (nothing when only the shape varies)."""
    x = n.given(0)
    return rest(n, unbroadcast(n.grad(), x) if n.need(0) else None)


define("Expand", type_rule=expand_type, vjp=expand_vjp)


@kernel("Flatten", since=1)
def flatten(attrs: Mapping[str, Any], x: np.ndarray) -> tuple:
    """ONNX Flatten: ``(prod(shape[:axis]), prod(shape[axis:]))``."""
    axis = int(attrs.get("axis", 1))
    if axis < 0:
        axis += x.ndim
    if not 0 <= axis <= x.ndim:
        raise ExecutionError.at("axis", f"an axis in [{-x.ndim}, {x.ndim}]", str(attrs.get("axis")))
    outer = int(np.prod(x.shape[:axis]))
    return (x.reshape(outer, int(np.prod(x.shape[axis:]))),)


@kernel("Shape", since=1)
def shape(attrs: Mapping[str, Any], x: np.ndarray) -> tuple:
    """ONNX Shape (``start``/``end`` from opset 15, clamped like slicing)."""
    rank = x.ndim
    start = int(attrs.get("start", 0))
    end = attrs.get("end")
    end = rank if end is None else int(end)
    start = min(max(start + rank if start < 0 else start, 0), rank)
    end = min(max(end + rank if end < 0 else end, 0), rank)
    return (np.array(x.shape[start:end], dtype=np.int64),)


def shape_of_type(node: Node) -> list:
    """An int64 vector; its value is the input's dims (ints and symbols)."""
    shape = node.shape(0)
    if shape is None:
        return [_int64((None,))]
    start, end = int(node.attr("start", 0)), node.attr("end")
    dims = shape[start: None if end is None else int(end)]
    node.set_value(0, from_dims(dims))
    return [_int64((len(dims),))]


define("Shape", type_rule=shape_of_type, no_gradient="a shape query")


@kernel("Size", since=1)
def size(attrs: Mapping[str, Any], x: np.ndarray) -> tuple:
    """ONNX Size: the element count as an int64 scalar."""
    return (np.array(x.size, dtype=np.int64),)


def size_of(node: Node) -> list:
    """An int64 scalar; its value is the element count when every dim is known."""
    shape = node.shape(0)
    if shape is not None:
        n = _prod(shape)
        node.set_value(0, None if n is None else np.array(n, np.int64))
    return [_int64(())]


define("Size", type_rule=size_of, no_gradient="a shape query")


# ---- type rules and gradients shared by several ops of this family ----


def _prod(dims: Any) -> Dim:
    rest = [d for d in dims if d != 1]
    if len(rest) == 1:
        return rest[0]  # type: ignore[no-any-return]
    if any(type(d) is not int for d in rest):
        return None
    return math.prod(rest)


def _int64(shape: Any) -> TensorType:
    return TensorType("int64", shape)


def vector(node: Node, i: int, what: str) -> None:
    """Input ``i`` (a shape or repeat counts) is 1-D, as ONNX requires."""
    rank = node.rank(i)
    if rank is not None and rank != 1:
        raise node.fail(f"{what} (input {i}) of rank 1", f"rank {rank}")


def reshape_type(node: Node) -> list:
    """Dims from the target shape: 0 copies the input dim, -1 is what is left."""
    dtype, shape = node.dtype(0), node.shape(0)
    if node.opset >= 5:
        vector(node, 1, "the target shape")
    target = node.dims(1) if node.opset >= 5 else tuple(node.attr("shape", ()))
    if target is None:
        n = node.shape(1)
        return [TensorType(dtype, None if n is None or type(n[0]) is not int else (None,) * n[0])]
    allowzero = bool(node.attr("allowzero", 0))
    out: list[Dim] = []
    for i, d in enumerate(target):
        if d == 0 and not allowzero:
            out.append(shape[i] if shape is not None and i < len(shape) else None)
        else:
            out.append(d)
    if -1 in out:
        k = out.index(-1)
        out[k] = _remaining(shape, out[:k] + out[k + 1:])
    elif (shape is not None and all(type(d) is int for d in shape) and all(type(d) is int for d in out)
          and math.prod(shape) != math.prod(out)):  # type: ignore[arg-type]
        raise node.fail(f"a shape of {math.prod(shape)} elements", str(tuple(out)))  # type: ignore[arg-type]
    return [TensorType(dtype, out)]


def _remaining(shape: Any, others: list) -> Dim:
    """The dim a -1 stands for: the input's dims divided by the others, symbols cancelling."""
    if shape is None or any(d is None for d in shape) or any(d is None for d in others):
        return None
    top = [d for d in shape]
    rest = []
    for d in others:
        if type(d) is str and d in top:
            top.remove(d)
        else:
            rest.append(d)
    if any(type(d) is not int for d in top + rest):
        return None
    denom = math.prod(rest)
    return math.prod(top) // denom if denom else None


def flatten_type(node: Node) -> list:
    """A matrix: dims before ``axis`` times each other, then the rest."""
    shape = node.shape(0)
    if shape is None:
        return [TensorType(node.dtype(0), (None, None))]
    axis = int(node.attr("axis", 1))
    if not -len(shape) <= axis <= len(shape):
        raise node.fail(f"axis in [{-len(shape)}, {len(shape)}]", str(axis))
    axis = axis + len(shape) if axis < 0 else axis
    return [TensorType(node.dtype(0), (_prod(shape[:axis]), _prod(shape[axis:])))]


def unsqueeze_type(node: Node) -> list:
    """Inserts dims of size 1 at the listed axes of the output."""
    shape, axes = node.shape(0), node.axes("axes", 1)
    if shape is None or axes is None:
        return [TensorType(node.dtype(0), None)]
    rank = len(shape) + len(axes)
    at = sorted(node.axis(a, rank) for a in axes)  # type: ignore[type-var]
    if len(set(at)) != len(at):
        raise node.fail("distinct axes", str(axes))
    dims = iter(shape)
    out = [1 if i in at else next(dims) for i in range(rank)]
    value = node.value(0)
    if isinstance(value, Partial) and value.scalar:
        node.set_value(0, Partial(value.dims))
    return [TensorType(node.dtype(0), out)]


def reshape_vjp(n: GradNode) -> list:
    """Reshape, Flatten, Squeeze, Unsqueeze: the gradient reshaped to the input's shape."""
    x = n.given(0)
    if int(n.attr("allowzero", 0)):  # a shape with 0s means 0s here too
        return rest(n, ops.Reshape(n.grad(), shape_of(x), allowzero=1))
    return rest(n, ops.Reshape(n.grad(), shape_of(x)))


# each op's type rule and gradient, beside the kernels registered above
define("Flatten", type_rule=flatten_type, vjp=reshape_vjp)
define("Reshape", type_rule=reshape_type, vjp=reshape_vjp)
define("Squeeze", type_rule=squeeze_type, vjp=reshape_vjp)
define("Unsqueeze", type_rule=unsqueeze_type, vjp=reshape_vjp)
