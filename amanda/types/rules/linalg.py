"""Type rules shared by products: MatMul's broadcast shape (also the fused MatMulAdd's), Det."""

from __future__ import annotations

from typing import Any

from amanda.types.node import Node
from amanda.types.tensor_type import TensorType


def matmul_shape(node: Node, a: Any, b: Any) -> Any:
    if a is None or b is None:
        return None
    if not a or not b:
        raise node.fail("inputs of rank 1 or more", f"ranks {len(a)} and {len(b)}")
    a2 = (1, *a) if len(a) == 1 else a
    b2 = (*b, 1) if len(b) == 1 else b
    node.same(a2[-1], b2[-2], "the inner dims of a matrix product")
    batch = node.broadcast(a2[:-2], b2[:-2])
    out = [*batch, a2[-2], b2[-1]]  # type: ignore[misc]
    if len(a) == 1:
        out.pop(-2)
    if len(b) == 1:
        out.pop(-1)
    return tuple(out)


def matmul(node: Node) -> list:
    """numpy's matmul: broadcast batch dims, the inner dims must agree."""
    if node.dtype(0) and node.dtype(1) and node.dtype(0) != node.dtype(1):
        raise node.fail(f"B of dtype {node.dtype(0)}", str(node.dtype(1)))
    return [TensorType(node.dtype(0) or node.dtype(1), matmul_shape(node, node.shape(0), node.shape(1)))]


def det(node: Node) -> list:
    """The batch dims of square matrices."""
    shape = node.shape(0)
    if shape is None:
        return [TensorType(node.dtype(0), None)]
    if len(shape) < 2:
        raise node.fail("a rank of 2 or more", f"rank {len(shape)}")
    node.same(shape[-1], shape[-2], "square matrices")
    return [TensorType(node.dtype(0), shape[:-2])]


