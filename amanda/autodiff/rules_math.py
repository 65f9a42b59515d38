"""Vector-Jacobian rules of arithmetic, activations, products, reductions and softmax.

Each rule takes a :class:`~amanda.autodiff.node.Node` and returns one gradient (or None) per
input port, built from ``amanda.ops``; see :mod:`amanda.autodiff.rules` for the table.
"""

from __future__ import annotations

import numpy as np

from amanda.autodiff.node import Node, axes_of, const, rank, shape_of, size_of, unbroadcast
from amanda.build import ops
from amanda.build.values import Value

__all__ = ["extreme_reduce_vjp", "mean_reduce_vjp", "gemm_vjp", "matmul_vjp"]


def _swap_last(v: Value, r: int) -> Value:
    return ops.Transpose(v, perm=[*range(r - 2), r - 1, r - 2])


def matmul_vjp(n: Node) -> list:
    """MatMul (numpy semantics, 1-D operands included): ``g @ b^T`` and ``a^T @ g``; for a
    matrix ``b`` applied to a batch (``a`` of rank > 2), ``b``'s gradient is one ``Gemm`` of the
    rows flattened (not a product per batch entry summed by a ``ReduceSum``)."""
    a, b = n.given(0, 1)
    g = n.grad()
    ra, rb = rank(a, n), rank(b, n)
    if ra == 1 and rb == 1:
        return [ops.Mul(g, b) if n.need(0) else None, ops.Mul(g, a) if n.need(1) else None]
    if ra == 2 and rb == 2:  # Gemm transposes inside the product: no copies of the operands
        return [ops.Gemm(g, b, transB=1) if n.need(0) else None, ops.Gemm(a, g, transA=1) if n.need(1) else None]
    a2 = ops.Unsqueeze(a, np.array([0], np.int64)) if ra == 1 else a
    b2 = ops.Unsqueeze(b, np.array([1], np.int64)) if rb == 1 else b
    g2 = ops.Unsqueeze(g, np.array([-2 if ra == 1 else -1], np.int64)) if 1 in (ra, rb) else g
    out: list = [None, None]
    if n.need(0):
        da = ops.MatMul(g2, _swap_last(b2, max(rb, 2)))
        out[0] = unbroadcast(ops.Squeeze(da, np.array([-2], np.int64)) if ra == 1 else da, a)
    if n.need(1) and rb == 2 and ra > 2:  # a weight matrix applied to every row: one GEMM over all rows
        out[1] = ops.Gemm(ops.Flatten(a, axis=ra - 1), ops.Flatten(g, axis=ra - 1), transA=1)
    elif n.need(1):
        db = ops.MatMul(_swap_last(a2, max(ra, 2)), g2)
        out[1] = unbroadcast(ops.Squeeze(db, np.array([-1], np.int64)) if rb == 1 else db, b)
    return out


def gemm_vjp(n: Node) -> list:
    """Gemm ``alpha * A' @ B' + beta * C``: the products transposed back as the op transposed."""
    a, b = n.inputs[:2]
    g = n.grad()
    alpha, beta = float(n.attr("alpha", 1.0)), float(n.attr("beta", 1.0))
    ta, tb = int(n.attr("transA", 0)), int(n.attr("transB", 0))
    out: list = [None] * len(n.inputs)
    if n.need(0):  # dA' = g @ B'^T, and A = A'^T when transposed
        out[0] = ops.Gemm(b, g, alpha=alpha, transA=tb, transB=1) if ta else ops.Gemm(g, b, alpha=alpha, transB=1 - tb)
    if n.need(1):  # dB' = A'^T @ g
        out[1] = ops.Gemm(g, a, alpha=alpha, transA=1, transB=ta) if tb else ops.Gemm(a, g, alpha=alpha, transA=1 - ta)
    if n.need(2):
        scaled = g if beta == 1.0 else ops.Mul(g, const(beta, g))
        out[2] = unbroadcast(scaled, n.inputs[2])  # type: ignore[arg-type]
    return out


def reduced_axes(n: Node) -> list[int] | None:
    """The axes a Reduce* op reduced (None: all), from its attribute or its axes input."""
    r = rank(n.inputs[0], n)  # type: ignore[arg-type]
    axes = n.attr("axes")
    if axes is None and len(n.inputs) > 1 and n.inputs[1] is not None:
        axes = n.known(1, "axes input")
    if axes is None or len(np.asarray(axes).reshape(-1)) == 0:
        return None if not int(n.attr("noop_with_empty_axes", 0)) else []
    return axes_of(axes, r)


def kept(n: Node, g: Value, axes: list[int] | None) -> Value:
    """The output gradient with the reduced axes back as size 1."""
    if int(n.attr("keepdims", 1)):
        return g
    x = n.inputs[0]
    r = rank(x, n)  # type: ignore[arg-type]
    return ops.Unsqueeze(g, np.array(list(range(r)) if axes is None else axes, np.int64)) if r else g


def mean_reduce_vjp(n: Node) -> list:
    """ReduceMean, GlobalAveragePool: the gradient spread back over the reduced axes, divided
    by their size."""
    return reduce(n, "mean")


def extreme_reduce_vjp(n: Node) -> list:
    """ReduceMax, ReduceMin, GlobalMaxPool: the gradient spread back onto the extreme elements
    (shared evenly between ties)."""
    return reduce(n, "extreme")


def reduce(n: Node, kind: str) -> list:
    x = n.given(0)
    if n.op.type in ("GlobalAveragePool", "GlobalMaxPool"):
        axes: list[int] | None = list(range(2, rank(x, n)))
        g = n.grad()
    else:
        axes = reduced_axes(n)
        if axes == []:
            return [n.grad(), None]
        g = kept(n, n.grad(), axes)
    spread = ops.Expand(g, shape_of(x))
    if kind == "mean":
        count = ops.Cast(ops.Div(size_of(x), size_of(n.outputs[0])), to=np.dtype(x.type.dtype))
        return [ops.Div(spread, count)] + [None] * (len(n.inputs) - 1)
    if kind == "extreme":
        y = n.outputs[0] if n.op.type == "GlobalMaxPool" else kept(n, n.outputs[0], axes)
        hit = ops.Cast(ops.Equal(x, y), to=np.dtype(x.type.dtype))
        kw = {} if axes is None else {"axes": np.array(axes, np.int64)}
        ties = ops.ReduceSum(hit, kw.get("axes"), keepdims=1)
        return [ops.Mul(spread, ops.Div(hit, ties))] + [None] * (len(n.inputs) - 1)
    return [spread] + [None] * (len(n.inputs) - 1)


