"""Vector-Jacobian rules of ops that copy elements from several inputs (CenterCropPad,
MaxUnpool, TensorScatter: the op replayed on the positions of its inputs says where each output
element came from, and the gradient is scattered back there, :func:`replay_vjp`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from amanda.autodiff.node import Node, const, shape_of, size_of
from amanda.build import ops
from amanda.build.values import Value

__all__ = ["i64_1d", "replay_vjp"]

I64 = np.int64


def i64_1d(v: int) -> np.ndarray:
    """``[v]`` as an int64 array: the starts, ends, axes and shapes the decomposed rules pass."""
    return np.array([v], I64)


#: op type -> the inputs whose elements it copies to its output (the rest it reads as indices or shapes)
COPIED: dict[str, tuple[int, ...]] = {"CenterCropPad": (0,), "MaxUnpool": (0,), "TensorScatter": (0, 1)}


def replay_vjp(n: Node) -> list:
    """Ops that copy elements of some inputs (``COPIED``) and fill the rest with zeros: the op
    replayed with each copied input replaced by its elements' positions (counted from 1 over
    all of them, 0 for a filled element), and the gradient scattered back to those positions."""
    from amanda.build.builder import Ops

    copied = COPIED[str(n.op.type)]
    args: list[Any] = list(n.inputs)
    start: Value | np.ndarray = np.array(1, I64)
    spans: dict[int, tuple[Any, Value]] = {}
    for i in copied:
        x = n.given(i)
        end = ops.Add(start, size_of(x))
        positions = ops.Reshape(ops.Range(start, end, np.array(1, I64)), shape_of(x))
        args[i] = ops.Cast(positions, to=np.dtype("float64")) if n.op.type == "MaxUnpool" else positions
        spans[i] = (start, end)
        start = end
    attrs = n.own_attrs()
    picked = getattr(Ops(n.namespace), str(n.op.type))(*args, **attrs)
    picked = ops.Cast(picked, to=np.dtype("int64"))
    flat = np.array([-1], I64)
    g = n.grad()
    zeros = ops.ConstantOfShape(ops.Reshape(start, i64_1d(1)), value=const([0], g))
    total = ops.ScatterElements(zeros, ops.Reshape(picked, flat), ops.Reshape(g, flat), axis=0, reduction="add")
    out: list = [None] * len(n.inputs)
    for i, (lo, hi) in spans.items():
        if n.need(i):
            part = ops.Slice(total, ops.Reshape(lo, i64_1d(1)), ops.Reshape(hi, i64_1d(1)), i64_1d(0))
            out[i] = ops.Reshape(part, shape_of(n.inputs[i]))
    return out
