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

__all__ = ["attention_vjp", "linear_attention_vjp"]

I64 = np.int64


def _heads(x: Value, count: int) -> Value:
    """[batch, seq, hidden] -> [batch, heads, seq, hidden / heads]."""
    return ops.Transpose(ops.Reshape(x, np.array([0, 0, count, -1], I64)), perm=[0, 2, 1, 3])


def _repeat(x: Value, times: int) -> Value:
    """Each head ``times`` times in a row (grouped-query attention), as numpy's repeat."""
    if times == 1:
        return x
    shape = ops.Concat(ops.Shape(x, start=0, end=1), np.array([-1], I64), ops.Shape(x, start=2, end=4), axis=0)
    return ops.Reshape(ops.Expand(ops.Unsqueeze(x, np.array([2], I64)), np.array([1, 1, times, 1, 1], I64)), shape)


def _static(v: Value, axis: int, n: Node, what: str) -> int:
    shape = v.type.shape
    if shape is None or type(shape[axis]) is not int:
        raise n.fail(f"a known {what}", repr(v.type))
    return int(shape[axis])


def _attention(n: Node) -> list:
    """Attention: the scores, bias, softmax and weighted values as builder ops."""
    q, k, v = n.given(0, 1, 2)
    rest = list(n.inputs) + [None] * 4
    mask, past_k, past_v, nonpad = rest[3:7]
    if nonpad is not None or int(n.attr("left_window_size", -1)) >= 0 or int(n.attr("right_window_size", -1)) >= 0:
        raise n.fail("no nonpad_kv_seqlen and no sliding window", "one of them")
    flat = q.type.shape is not None and len(q.type.shape) == 3
    if flat:
        q, k, v = _heads(q, int(n.attr("q_num_heads"))), _heads(k, int(n.attr("kv_num_heads"))), \
            _heads(v, int(n.attr("kv_num_heads")))
    if past_k is not None and past_v is not None:
        k, v = ops.Concat(past_k, k, axis=2), ops.Concat(past_v, v, axis=2)
    present_k, present_v = k, v
    size = _static(q, 3, n, "head size")
    q_heads, kv_heads = _static(q, 1, n, "number of heads"), _static(k, 1, n, "number of heads")
    k, v = _repeat(k, q_heads // kv_heads), _repeat(v, q_heads // kv_heads)
    scale = n.attr("scale")
    root = const(np.sqrt(1 / np.sqrt(size) if scale is None else float(scale)), q)
    scores = ops.MatMul(ops.Mul(q, root), ops.Transpose(ops.Mul(k, root), perm=[0, 1, 3, 2]))
    softcap = float(n.attr("softcap", 0.0))
    if softcap > 0:
        scores = ops.Mul(ops.Tanh(ops.Mul(scores, const(1 / softcap, q))), const(softcap, q))
    bias: Value | None = None
    if mask is not None:
        if mask.type.dtype == "bool":
            mask = ops.Where(mask, const(0, q), const(-np.inf, q))
        kv_len, given = _static(k, 2, n, "key length"), _static(mask, -1, n, "mask length")
        if given < kv_len:
            pads = np.zeros(2 * len(mask.type.shape), I64)
            pads[-1] = kv_len - given
            mask = ops.Pad(mask, pads, const(-np.inf, q))
        bias = mask
    if int(n.attr("is_causal", 0)):
        q_len, kv_len = _static(q, 2, n, "query length"), _static(k, 2, n, "key length")
        distance = np.arange(q_len)[:, None] + (kv_len - q_len) - np.arange(kv_len)[None, :]
        causal = ops.Constant(value=const(np.where(distance >= 0, 0.0, -np.inf), q))
        bias = causal if bias is None else ops.Add(bias, causal)
    if bias is None:
        probs = ops.Softmax(scores, axis=-1)
    else:  # a row that may attend no key gives zeros, as the kernel's (and no NaN reaches the gradient)
        blocked = ops.IsInf(ops.ReduceMax(bias, axes=[-1], keepdims=1), detect_positive=0)
        safe = ops.Where(blocked, const(0, q), ops.Add(scores, bias))
        probs = ops.Where(blocked, const(0, q), ops.Softmax(safe, axis=-1))
    y = ops.MatMul(probs, v)
    if flat:
        y = ops.Reshape(ops.Transpose(y, perm=[0, 2, 1, 3]), np.array([0, 0, -1], I64))
    for port, g in zip(n.op.outputs, n.grads):  # an imported op keeps only the outputs it uses
        if g is not None and port.attrs.get("onnx_name", port.name) == "qk_matmul_output":
            raise n.fail("a loss that does not read qk_matmul_output", "a gradient of it")
    return [y, present_k, present_v, None]


attention_vjp = composite(_attention)


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
    tokens = _static(q, 1, n, "number of tokens")
    q4, k4, v4 = _per_token(q, q_heads, 0), _per_token(k, kv_heads, 0), _per_token(v, kv_heads, 0)
    d_k, d_v = _static(k, 2, n, "key width") // kv_heads, _static(v, 2, n, "value width") // kv_heads
    gates = None if decay is None else ops.Exp(_per_token(decay, kv_heads, 0))  # [b, h, t, 1 or d_k]
    rates = None if beta is None else _per_token(beta, _static(beta, 2, n, "beta heads"), 0)  # [b, h, t, 1]
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
