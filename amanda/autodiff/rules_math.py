"""Vector-Jacobian rules shared by reductions and pooling: mean and extreme reductions and the
helpers that read their axes and keep reduced dims."""

from __future__ import annotations

import numpy as np

from amanda.autodiff.node import Node, axes_of, rank, shape_of, size_of
from amanda.build import ops
from amanda.build.values import Value

__all__ = ["extreme_reduce_vjp", "mean_reduce_vjp"]


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


