"""Linear algebra and reductions: MatMul, Gemm, Einsum, Det, Reduce*, ArgMax/ArgMin."""

from __future__ import annotations

from typing import Any

from amanda.types.node import Node
from amanda.types.rules import rule
from amanda.types.tensor_type import Dim, TensorType


def _matmul_shape(node: Node, a: Any, b: Any) -> Any:
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


@rule("MatMul")
def matmul(node: Node) -> list:
    """numpy's matmul: broadcast batch dims, the inner dims must agree."""
    if node.dtype(0) and node.dtype(1) and node.dtype(0) != node.dtype(1):
        raise node.fail(f"B of dtype {node.dtype(0)}", str(node.dtype(1)))
    return [TensorType(node.dtype(0) or node.dtype(1), _matmul_shape(node, node.shape(0), node.shape(1)))]


@rule("MatMulInteger")
def matmul_integer(node: Node) -> list:
    """An int32 matrix product."""
    return [TensorType("int32", _matmul_shape(node, node.shape(0), node.shape(1)))]


@rule("Gemm")
def gemm(node: Node) -> list:
    """``alpha·A'·B' + beta·C``: [M, N], with C broadcasting to it."""
    a, b = node.shape(0), node.shape(1)
    if node.dtype(0) and node.dtype(1) and node.dtype(0) != node.dtype(1):
        raise node.fail(f"B of dtype {node.dtype(0)}", str(node.dtype(1)))
    if a is None or b is None:
        return [TensorType(node.dtype(0), (None, None))]
    for name, s in (("A", a), ("B", b)):
        if len(s) != 2:
            raise node.fail(f"{name} of rank 2", f"rank {len(s)}")
    if node.attr("transA", 0):
        a = a[::-1]
    if node.attr("transB", 0):
        b = b[::-1]
    node.same(a[1], b[0], "the inner dims of Gemm")
    out = (a[0], b[1])
    c = node.shape(2)
    if c is not None:
        node.broadcast(out, c)
    return [TensorType(node.dtype(0), out)]


def det(node: Node) -> list:
    """The batch dims of square matrices."""
    shape = node.shape(0)
    if shape is None:
        return [TensorType(node.dtype(0), None)]
    if len(shape) < 2:
        raise node.fail("a rank of 2 or more", f"rank {len(shape)}")
    node.same(shape[-1], shape[-2], "square matrices")
    return [TensorType(node.dtype(0), shape[:-2])]


@rule("Einsum")
def einsum(node: Node) -> list:
    """Dims named by the equation's letters (and ``...``); a letter's dims must agree."""
    equation = str(node.attr("equation", "")).replace(" ", "")
    lhs, arrow, rhs = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(node.types):
        raise node.fail(f"{len(terms)} inputs for {equation!r}", str(len(node.types)))
    letters: dict[str, Dim] = {}
    ellipsis: Any = ()
    for i, term in enumerate(terms):
        shape = node.shape(i)
        if shape is None:
            return [TensorType(node.dtype(0), None)]
        named = term.replace("...", "")
        extra = len(shape) - len(named)
        if extra < 0 or (extra and "..." not in term):
            raise node.fail(f"input {i} of rank {len(named)} for {term!r}", f"rank {len(shape)}")
        head = term.index("...") if "..." in term else len(named)
        ellipsis = node.broadcast(ellipsis, shape[head:head + extra])
        dims = shape[:head] + shape[head + extra:]
        for letter, d in zip(named, dims):
            letters[letter] = node.same(letters[letter], d, f"dims of {letter!r}") if letter in letters else d
    if not arrow:
        counts = lhs.replace("...", "").replace(",", "")
        rhs = ("..." if "..." in lhs else "") + "".join(sorted(c for c in set(counts) if counts.count(c) == 1))
    out: list[Dim] = []
    parts = rhs.split("...")
    for k, part in enumerate(parts):
        if k:
            out.extend(ellipsis)
        out.extend(letters.get(c) for c in part)
    return [TensorType(node.dtype(0), out)]


