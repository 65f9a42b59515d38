"""Ops that carry sequence state between decode steps (the newest ONNX opsets):
TensorScatter (cache writes), CausalConvWithState and LinearAttention.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from amanda.exec.kernels.conv import conv_nd
from amanda.exec.kernels.math_util import attr_str
from amanda.exec.kernels.registry import kernel

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
    starts = np.zeros(past.shape[0], np.int64) if write_indices is None else np.asarray(write_indices).astype(np.int64)
    for b in range(past.shape[0]):
        positions = starts[b] + np.arange(length)
        if circular:
            positions %= limit
        target = np.moveaxis(out[b], axis - 1, 0)  # a view: writes land in out
        source = np.moveaxis(update[b], axis - 1, 0)
        target[positions] = source
    return (out,)


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


@kernel("SwiGLU", since=28)
def swiglu_kernel(attrs: Attrs, a: np.ndarray, b: np.ndarray) -> tuple:
    """ONNX SwiGLU: ``a * sigmoid(alpha * a) * b``."""
    alpha = float(attrs.get("alpha", 1.0))
    gate = (1 / (1 + np.exp(-alpha * a.astype(np.promote_types(a.dtype, np.float32))))).astype(a.dtype)
    return ((a * gate * b).astype(a.dtype),)
