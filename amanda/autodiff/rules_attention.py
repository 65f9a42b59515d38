"""The vector-Jacobian rules of ONNX Attention and LinearAttention, both composite rules.

**Attention** (opset 23 on): ``softmax(Q K^T * scale + bias) V`` written again as MatMul,
Softmax and Where and differentiated through them.

Covered: 4-D and 3-D inputs (``q_num_heads``, ``kv_num_heads``), grouped-query heads, a key
and value cache (``past_key``/``past_value``: they get gradients, and so do the ``present``
outputs' readers), a boolean or additive mask (padded to the key length; an additive mask
gets a gradient), ``is_causal`` (aligned to the bottom right), ``scale`` and ``softcap``.
Refused with a ``SchemaError`` naming the op: ``nonpad_kv_seqlen``, sliding windows, and a
loss that reads the ``qk_matmul_output`` output. Causal masking needs the sequence lengths
known when ``grad`` runs. A query row that may attend no key gives zeros (as the kernel) and
sends no gradient back.

**LinearAttention** (opset 27): the state update of each token (linear, gated, delta or
gated delta, grouped-query heads sharing their key head's state) unrolled over the tokens,
whose number must be known; Q, K, V, the past state, the decay and beta get gradients.
"""

from __future__ import annotations

import numpy as np

from amanda.autodiff.node import Node
from amanda.build import ops
from amanda.build.values import Value

__all__ = []

I64 = np.int64


def _repeat(x: Value, times: int) -> Value:
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


