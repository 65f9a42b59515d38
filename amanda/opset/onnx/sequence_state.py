"""Ops that carry sequence state between decode steps (the newest ONNX opsets):
TensorScatter (cache writes), CausalConvWithState and LinearAttention.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from amanda.autodiff.composite import composite
from amanda.autodiff.node import Node as GradNode
from amanda.autodiff.node import const
from amanda.autodiff.rules_attention import repeat_heads, static
from amanda.autodiff.rules_decomposed import i64_1d, replay_vjp
from amanda.build import ops
from amanda.build.values import Value
from amanda.exec.kernels.conv import conv_nd
from amanda.exec.kernels.math_util import attr_str, host
from amanda.exec.kernels.registry import kernel
from amanda.ops import define
from amanda.types.node import Node
from amanda.types.rules import by_name
from amanda.types.rules.elementwise import same_as_first
from amanda.types.tensor_type import TensorType

I64 = np.int64  # the dtype of index tensors the gradients build

Attrs = Mapping[str, Any]


@kernel("TensorScatter", since=24)
def tensor_scatter_kernel(attrs: Attrs, past: np.ndarray, update: np.ndarray, write_indices: Any = None) -> tuple:
    """ONNX TensorScatter: ``update`` written into a copy of the cache along ``axis`` from each
    batch entry's write index (wrapping around with ``mode="circular"``)."""
    axis = int(attrs.get("axis", -2))
    axis = axis + past.ndim if axis < 0 else axis
    if axis < 1:
        raise ValueError(f"TensorScatter's axis must follow the batch axis, found {axis}")
    circular = attr_str(attrs, "mode", "linear") == "circular"
    out = past.copy()
    length, limit = update.shape[axis], past.shape[axis]
    starts = np.zeros(past.shape[0], np.int64) if write_indices is None else host(write_indices).astype(np.int64)
    for b in range(past.shape[0]):
        positions = starts[b] + np.arange(length)
        if circular:
            positions %= limit
        target = np.moveaxis(out[b], axis - 1, 0)  # a view: writes land in out
        source = np.moveaxis(update[b], axis - 1, 0)
        target[positions] = source
    return (out,)


define("TensorScatter", type_rule=same_as_first, vjp=replay_vjp)


def _silu(x: np.ndarray) -> np.ndarray:
    wide = x.astype(np.float32)
    return (wide / (1 + np.exp(-wide))).astype(x.dtype)


@kernel("CausalConvWithState", since=27)
def causal_conv_with_state_kernel(attrs: Attrs, x: np.ndarray, w: np.ndarray, bias: Any = None,
                                  past_state: Any = None) -> tuple:
    """ONNX CausalConvWithState: a depthwise 1-D convolution over the carried state followed
    by the input; returns the output and the last ``k - 1`` positions as the new state."""
    batch, channels, _ = x.shape
    k = w.shape[2]
    carry = np.zeros((batch, channels, k - 1), x.dtype) if past_state is None else past_state
    padded = np.concatenate([carry, x], axis=2)
    y = conv_nd(padded, w, bias, [1], [1], [0, 0], channels).astype(x.dtype)
    if attr_str(attrs, "activation", "none") in ("silu", "swish"):
        y = _silu(y)
    return (y, padded[:, :, padded.shape[2] - (k - 1):])


def causal_conv_with_state(node: Node) -> list:
    """The input's type, and the state ``[batch, channels, k - 1]``."""
    x, w = node.shape(0), node.shape(1)
    k = w[2] if w is not None else None
    state = (x[0] if x else None, x[1] if x else None, k - 1 if type(k) is int else None)
    return by_name(node, output=node.type(0), present_state=TensorType(node.dtype(0), state))


def _causal_conv(n: GradNode) -> list:
    """CausalConvWithState: a depthwise Conv over the carried state then the input; the new
    state is the last ``k - 1`` positions."""
    x, w = n.given(0, 1)
    bias = n.inputs[2] if len(n.inputs) > 2 else None
    past = n.inputs[3] if len(n.inputs) > 3 else None
    if x.type.shape is None or type(x.type.shape[1]) is not int or w.type.shape is None:
        raise n.fail("known channels and kernel size", f"{x.type!r}, {w.type!r}")
    channels, k = int(x.type.shape[1]), int(w.type.shape[2])
    if past is None and k > 1:
        past = ops.ConstantOfShape(ops.Concat(ops.Shape(x, start=0, end=2), i64_1d(k - 1), axis=0), value=const([0], x))
    padded = x if past is None else ops.Concat(past, x, axis=2)
    y = ops.Conv(padded, w, bias, group=channels, kernel_shape=[k])
    activation = n.attr("activation", "none")
    if (activation.decode() if isinstance(activation, bytes) else str(activation)) in ("silu", "swish"):
        y = ops.Mul(y, ops.Sigmoid(y))
    end = np.array([np.iinfo(np.int64).max], I64)
    state = ops.Slice(padded, i64_1d(-(k - 1)) if k > 1 else end, end, i64_1d(2))
    return [y, state]


causal_conv_vjp = composite(_causal_conv)


define("CausalConvWithState", type_rule=causal_conv_with_state, vjp=causal_conv_vjp)


def _split_heads(x: np.ndarray, heads: int) -> np.ndarray:
    b, t, hidden = x.shape
    return x.reshape(b, t, heads, hidden // heads).transpose(0, 2, 1, 3)


@kernel("LinearAttention", since=27)
def linear_attention_kernel(attrs: Attrs, q: np.ndarray, k: np.ndarray, v: np.ndarray, past_state: Any = None,
                            decay: Any = None, beta: Any = None) -> tuple:
    """ONNX LinearAttention: the recurrent state update (linear, gated, delta or gated delta)
    run token by token, with grouped-query heads sharing their key head's state."""
    q_heads, kv_heads = int(attrs["q_num_heads"]), int(attrs["kv_num_heads"])
    rule = attr_str(attrs, "update_rule", "gated_delta")
    b, t, _ = q.shape
    q4 = _split_heads(q, q_heads).astype(np.float32)
    k4 = _split_heads(k, kv_heads).astype(np.float32)
    v4 = _split_heads(v, kv_heads).astype(np.float32)
    d_k, d_v = k4.shape[-1], v4.shape[-1]
    gates = None
    if decay is not None:
        per_head = decay.shape[-1] == kv_heads
        gates = (decay.reshape(b, t, kv_heads, 1) if per_head else decay.reshape(b, t, kv_heads, d_k))
        gates = np.exp(gates.transpose(0, 2, 1, 3).astype(np.float32))  # [b, h, t, 1 or d_k]
    rates = None
    if beta is not None:
        rates = beta.reshape(b, t, beta.shape[-1], 1).transpose(0, 2, 1, 3).astype(np.float32)
    state = (np.zeros((b, kv_heads, d_k, d_v), np.float32) if past_state is None
             else past_state.astype(np.float32))
    scale = float(attrs.get("scale", 0.0)) or 1 / np.sqrt(d_k)
    group = q_heads // kv_heads
    out = np.empty((b, q_heads, t, d_v), np.float32)
    for i in range(t):
        key, value = k4[:, :, i], v4[:, :, i]
        if gates is not None and rule in ("gated", "gated_delta"):
            state = gates[:, :, i][..., None] * state
        if rule in ("delta", "gated_delta"):
            retrieved = np.einsum("bhkv,bhk->bhv", state, key)
            value = rates[:, :, i] * (value - retrieved)  # type: ignore[index]
        state = state + key[..., :, None] * value[..., None, :]
        shared = np.repeat(state, group, axis=1) if group > 1 else state
        out[:, :, i] = scale * np.einsum("bhk,bhkv->bhv", q4[:, :, i], shared)
    y = out.transpose(0, 2, 1, 3).reshape(b, t, q_heads * d_v).astype(q.dtype)
    return (y, state.astype(q.dtype))


def linear_attention(node: Node) -> list:
    """``[batch, seq, q_heads * d_v]`` and the state ``[batch, kv_heads, d_k, d_v]``."""
    q, v = node.shape(0), node.shape(2)
    heads_q, heads_kv = node.attr("q_num_heads"), node.attr("kv_num_heads")
    d_v = v[2] // int(heads_kv) if v is not None and type(v[2]) is int and heads_kv else None
    d_k = q[2] // int(heads_q) if q is not None and type(q[2]) is int and heads_q else None
    y = (q[0], q[1], d_v * int(heads_q) if d_v is not None and heads_q else None) if q is not None else None
    state = (q[0] if q else None, heads_kv, d_k, d_v)
    return by_name(node, output=TensorType(node.dtype(0), y), present_state=TensorType(node.dtype(0), state))


def _per_token(x: Value, count: int, _: int) -> Value:
    """[batch, tokens, heads * d] -> [batch, heads, tokens, d]."""
    return ops.Transpose(ops.Reshape(x, np.array([0, 0, count, -1], I64)), perm=[0, 2, 1, 3])


def _linear_attention(n: GradNode) -> list:
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
        shared = repeat_heads(state, q_heads // kv_heads)
        query = ops.Unsqueeze(ops.Gather(q4, at, axis=2), np.array([2], I64))
        outs.append(ops.Mul(ops.MatMul(query, shared), const(scale, q)))  # [b, qh, 1, d_v]
    y = outs[0] if len(outs) == 1 else ops.Concat(*outs, axis=2)
    return [ops.Reshape(ops.Transpose(y, perm=[0, 2, 1, 3]), np.array([0, 0, -1], I64)), state]


linear_attention_vjp = composite(_linear_attention)


define("LinearAttention", type_rule=linear_attention, vjp=linear_attention_vjp)


@kernel("SwiGLU", since=28)
def swiglu_kernel(attrs: Attrs, a: np.ndarray, b: np.ndarray) -> tuple:
    """ONNX SwiGLU: ``a * sigmoid(alpha * a) * b``."""
    alpha = float(attrs.get("alpha", 1.0))
    gate = (1 / (1 + np.exp(-alpha * a.astype(np.promote_types(a.dtype, np.float32))))).astype(a.dtype)
    return ((a * gate * b).astype(a.dtype),)


def swiglu(node: Node) -> list:
    """Gate and value of one shape and dtype; the output has it too."""
    a, b = node.shape(0), node.shape(1)
    if a is not None and b is not None:
        if len(a) != len(b):
            raise node.fail(f"inputs of one rank ({len(a)})", str(len(b)))
        a = tuple(node.same(x, y, "the gate's and value's dims") for x, y in zip(a, b))
    return [TensorType(node.dtype(0), a)]


def _swiglu(n: GradNode) -> list:
    """SwiGLU: ``a * sigmoid(alpha * a) * b``."""
    a, b = n.given(0, 1)
    alpha = float(n.attr("alpha", 1.0))
    return [ops.Mul(ops.Mul(a, ops.Sigmoid(ops.Mul(a, const(alpha, a)))), b)]


swiglu_vjp = composite(_swiglu)


define("SwiGLU", type_rule=swiglu, vjp=swiglu_vjp)
