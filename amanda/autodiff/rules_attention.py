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

from amanda.autodiff.composite import composite
from amanda.autodiff.node import Node, const
from amanda.build import ops
from amanda.build.values import Value

__all__ = ["linear_attention_vjp"]

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


def _per_token(x: Value, count: int, _: int) -> Value:
    """[batch, tokens, heads * d] -> [batch, heads, tokens, d]."""
    return ops.Transpose(ops.Reshape(x, np.array([0, 0, count, -1], I64)), perm=[0, 2, 1, 3])


def _linear_attention(n: Node) -> list:
    """LinearAttention: the per-token state recurrence unrolled (module doc)."""
    q, k, v = n.given(0, 1, 2)
    rest = list(n.inputs) + [None] * 3
    past, decay, beta = rest[3:6]
    q_heads, kv_heads = int(n.attr("q_num_heads")), int(n.attr("kv_num_heads"))
    rule = n.attr("update_rule", "gated_delta")
    rule = rule.decode() if isinstance(rule, bytes) else str(rule)
    tokens = static(q, 1, n, "number of tokens")
    q4, k4, v4 = _per_token(q, q_heads, 0), _per_token(k, kv_heads, 0), _per_token(v, kv_heads, 0)
    d_k, d_v = static(k, 2, n, "key width") // kv_heads, static(v, 2, n, "value width") // kv_heads
    gates = None if decay is None else ops.Exp(_per_token(decay, kv_heads, 0))  # [b, h, t, 1 or d_k]
    rates = None if beta is None else _per_token(beta, static(beta, 2, n, "beta heads"), 0)  # [b, h, t, 1]
    if past is None:
        shape = ops.Concat(ops.Shape(q, start=0, end=1), np.array([kv_heads, d_k, d_v], I64), axis=0)
        state: Value = ops.ConstantOfShape(shape, value=const([0], q))
    else:
        state = past
    scale = float(n.attr("scale", 0.0)) or 1 / np.sqrt(d_k)
    outs = []
    for i in range(tokens):
        at = np.array(i, I64)
        key, value = ops.Gather(k4, at, axis=2), ops.Gather(v4, at, axis=2)  # [b, h, d]
        if gates is not None and rule in ("gated", "gated_delta"):
            state = ops.Mul(ops.Unsqueeze(ops.Gather(gates, at, axis=2), np.array([-1], I64)), state)
        if rule in ("delta", "gated_delta"):
            if rates is None:
                raise n.fail("a beta input for the delta rules", "none")
            retrieved = ops.Squeeze(ops.MatMul(ops.Unsqueeze(key, np.array([2], I64)), state), np.array([2], I64))
            value = ops.Mul(ops.Gather(rates, at, axis=2), ops.Sub(value, retrieved))
        state = ops.Add(state, ops.Mul(ops.Unsqueeze(key, np.array([-1], I64)), ops.Unsqueeze(value, np.array([-2], I64))))
        shared = _repeat(state, q_heads // kv_heads)
        query = ops.Unsqueeze(ops.Gather(q4, at, axis=2), np.array([2], I64))
        outs.append(ops.Mul(ops.MatMul(query, shared), const(scale, q)))  # [b, qh, 1, d_v]
    y = outs[0] if len(outs) == 1 else ops.Concat(*outs, axis=2)
    return [ops.Reshape(ops.Transpose(y, perm=[0, 2, 1, 3]), np.array([0, 0, -1], I64)), state]


linear_attention_vjp = composite(_linear_attention)
