"""Helpers shared by the attention families' rules: heads repeated for grouped queries, sizes
that must be known when ``grad`` runs."""

from __future__ import annotations

import numpy as np

from amanda.autodiff.node import Node
from amanda.build import ops
from amanda.build.values import Value

__all__ = ["repeat_heads"]

I64 = np.int64


def repeat_heads(x: Value, times: int) -> Value:
    """Each head ``times`` times in a row (grouped-query attention), as numpy's repeat."""
    if times == 1:
        return x
    shape = ops.Concat(ops.Shape(x, start=0, end=1), np.array([-1], I64), ops.Shape(x, start=2, end=4), axis=0)
    return ops.Reshape(ops.Expand(ops.Unsqueeze(x, np.array([2], I64)), np.array([1, 1, times, 1, 1], I64)), shape)


def static(v: Value, axis: int, n: Node, what: str) -> int:
    shape = v.type.shape
    if shape is None or type(shape[axis]) is not int:
        raise n.fail(f"a known {what}", repr(v.type))
    return int(shape[axis])


