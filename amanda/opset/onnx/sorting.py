"""Order-based ops: TopK, Unique, and the determinant Det."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from amanda.autodiff.node import Node, shape_of
from amanda.autodiff.rules_linalg import I64
from amanda.autodiff.rules_shape import flat_positions, rest, scatter_back
from amanda.build import ops
from amanda.errors import ExecutionError
from amanda.exec.kernels.math_util import axis_of
from amanda.exec.kernels.registry import kernel
from amanda.ops import define
from amanda.types.node import Node as TypedNode
from amanda.types.rules.linalg import det as det_type
from amanda.types.tensor_type import Dim, TensorType


def top_k(x: np.ndarray, k: int, axis: int, largest: bool) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` largest (or smallest) entries along ``axis``; ties keep the lower index first.

    >>> values, indices = top_k(np.array([1, 3, 3]), 2, 0, largest=True)
    >>> values.tolist(), indices.tolist()
    ([3, 3], [1, 2])"""
    n = x.shape[axis]
    if not 0 <= k <= n:
        raise ExecutionError.at("K", f"a count in [0, {n}]", str(k))
    if largest:
        # a stable ascending sort of the reversed axis, read backwards, is descending
        # with equal values in ascending original index
        rev = np.flip(x, axis=axis)
        order = np.flip(np.argsort(rev, axis=axis, kind="stable"), axis=axis)
        order = (n - 1) - order
    else:
        order = np.argsort(x, axis=axis, kind="stable")
    indices = np.take(order, np.arange(k), axis=axis).astype(np.int64)
    return np.take_along_axis(x, indices, axis=axis), indices


@kernel("TopK", since=1)
def top_k_v1(attrs: Mapping[str, Any], x: np.ndarray) -> tuple:
    """ONNX TopK-1: ``k`` attribute, largest first."""
    axis = axis_of(attrs.get("axis", -1), x.ndim)
    return top_k(x, int(attrs["k"]), axis, True)


def top_k_type(node: TypedNode) -> list:
    """Values and int64 indices: the input's shape with K along ``axis``."""
    shape = node.shape(0)
    k: Dim = node.attr("k") if node.opset < 10 else None
    if node.opset >= 10:
        ks = node.dims(1)
        k = ks[0] if ks else None
    if shape is None:
        return [TensorType(node.dtype(0), None), TensorType("int64", None)]
    axis = node.axis(int(node.attr("axis", -1)), len(shape))
    d = shape[axis]  # type: ignore[index]
    if type(d) is int and type(k) is int and k > d:
        raise node.fail(f"K at most {d}", str(k))
    out = [k if i == axis else x for i, x in enumerate(shape)]
    return [TensorType(node.dtype(0), out), TensorType("int64", out)]


def topk_vjp(n: Node) -> list:
    """TopK: the values' gradient back to the positions its ``Indices`` output names."""
    x = n.given(0)
    axis = int(n.attr("axis", -1))
    picked = ops.GatherElements(flat_positions(x), n.outputs[1], axis=axis)
    return rest(n, scatter_back(n.grad(0), x, picked, n, unique=True))


define("TopK", type_rule=top_k_type, vjp=topk_vjp)


@kernel("TopK", since=10)
def top_k_op(attrs: Mapping[str, Any], x: np.ndarray, k: np.ndarray) -> tuple:
    """ONNX TopK-10+: ``K`` input; ``largest`` from 11 (the result is always sorted)."""
    axis = axis_of(attrs.get("axis", -1), x.ndim)
    count = int(np.asarray(k).reshape(-1)[0])
    return top_k(x, count, axis, bool(attrs.get("largest", 1)))


@kernel("Unique", since=11)
def unique(attrs: Mapping[str, Any], x: np.ndarray) -> tuple:
    """ONNX Unique: values, first indices, inverse indices, counts (sorted or by first use)."""
    axis = attrs.get("axis")
    if axis is not None:
        axis = axis_of(axis, x.ndim)
    data = x if axis is not None else x.reshape(-1)
    values, first, inverse, counts = np.unique(
        data, return_index=True, return_inverse=True, return_counts=True, axis=axis
    )
    inverse = inverse.reshape(-1)
    if not int(attrs.get("sorted", 1)):
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        values = np.take(values, order, axis=0 if axis is None else axis)
        first, counts, inverse = first[order], counts[order], rank[inverse]
    as_int = lambda a: np.asarray(a, dtype=np.int64)
    return values, as_int(first), as_int(inverse), as_int(counts)


def unique_type(node: TypedNode) -> list:
    """Unique values (count unknown), then int64 indices, inverse indices and counts."""
    shape, axis = node.shape(0), node.attr("axis")
    if axis is None or shape is None:
        y = TensorType(node.dtype(0), (None,) if axis is None else None)
        size = None if shape is None or any(type(d) is not int for d in shape) else math.prod(shape)
        inverse = TensorType("int64", (size,) if axis is None else (None,))
    else:
        a = node.axis(int(axis), len(shape))
        y = TensorType(node.dtype(0), [None if i == a else d for i, d in enumerate(shape)])
        inverse = TensorType("int64", (shape[a],))
    return [y, TensorType("int64", (None,)), inverse, TensorType("int64", (None,))]


define("Unique",
       type_rule=unique_type,
       no_gradient="piecewise constant in which elements are equal, which decides its output's shape")


@kernel("Det", since=11)
def det(attrs: Mapping[str, Any], x: np.ndarray) -> tuple:
    """ONNX Det: determinants of the trailing square matrices."""
    work = x if x.dtype in (np.float32, np.float64) else x.astype(np.float32)
    return (np.asarray(np.linalg.det(work)).astype(x.dtype),)


def det_vjp(n: Node) -> list:
    """Det: the output gradient times the cofactor matrix (module doc)."""
    x = n.given(0)
    shape = x.type.shape
    if shape is None or len(shape) < 2 or type(shape[-1]) is not int:
        raise n.fail("a matrix of known size", repr(x.type))
    size = int(shape[-1])
    g = ops.Unsqueeze(n.grad(), np.array([-2, -1], I64))
    if size == 1:
        return [ops.Expand(g, shape_of(x))]
    rows = []
    for i in range(size):
        keep_i = np.array([r for r in range(size) if r != i], I64)
        without_row = ops.Gather(x, keep_i, axis=-2)
        row = []
        for j in range(size):
            minor = ops.Gather(without_row, np.array([c for c in range(size) if c != j], I64), axis=-1)
            d = ops.Unsqueeze(ops.Det(minor), np.array([-1], I64))
            row.append(d if (i + j) % 2 == 0 else ops.Neg(d))
        rows.append(ops.Unsqueeze(ops.Concat(*row, axis=-1), np.array([-2], I64)))
    return [ops.Mul(g, ops.Concat(*rows, axis=-2))]


define("Det", type_rule=det_type, vjp=det_vjp)
