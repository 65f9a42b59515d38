"""Vector-Jacobian rules of ops that make tensors from a few numbers: OneHot and Range.

- **OneHot**: the indices and depth get none; ``values = [off, on]`` gets the gradient summed
  where the output is off and where it is on.
- **Range**: ``y_i = start + i * delta``: start gets ``sum(g)``, delta ``sum(g * i)``, limit none
  (it only decides the length).
"""

from __future__ import annotations

import numpy as np

from amanda.autodiff.node import Node, size_of
from amanda.build import ops

__all__ = [ "range_vjp"]

I64 = np.int64


def range_vjp(n: Node) -> list:
    """Range: start gets ``sum(g)``, delta ``sum(g * i)`` (module doc)."""
    start, _, delta = n.given(0, 1, 2)
    g = n.grad()
    steps = ops.Cast(ops.Range(np.array(0, I64), size_of(n.outputs[0]), np.array(1, I64)), to=np.dtype(g.type.dtype))
    return [ops.ReduceSum(g, keepdims=0) if n.need(0) else None, None,
            ops.ReduceSum(ops.Mul(g, steps), keepdims=0) if n.need(2) else None]
