"""Attention ops of the newest ONNX opsets: Attention (23-25), RotaryEmbedding (23) and
SwiGLU.

Attention accepts 4-D ``[batch, heads, seq, head_size]`` or 3-D ``[batch, seq, hidden]``
inputs (with ``q_num_heads``/``kv_num_heads``), a boolean or additive mask (padded to the
key length), a key/value cache (``past_key``/``past_value``) or per-batch valid key
lengths (``nonpad_kv_seqlen``), causal masking aligned to the bottom right, sliding
windows, grouped-query heads, ``softcap`` and the four ``qk_matmul_output_mode`` outputs.
A query row with no key it may attend gives zeros.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from amanda.exec.kernels.onnx_dtypes import onnx_dtype
from amanda.exec.kernels.registry import kernel

Attrs = Mapping[str, Any]


def _heads(x: np.ndarray, count: int) -> np.ndarray:
    """``[batch, seq, hidden]`` -> ``[batch, heads, seq, hidden / heads]``."""
    b, s, hidden = x.shape
    return x.reshape(b, s, count, hidden // count).transpose(0, 2, 1, 3)


def _bias(attrs: Attrs, dtype: np.dtype, q_len: int, kv_len: int, mask: Any, past: int,
          nonpad: Any) -> np.ndarray:
    """The additive bias: 0 where a query may attend a key, -inf where it may not."""
    zero, minus = dtype.type(0), dtype.type(-np.inf)
    if mask is not None:
        short = kv_len - mask.shape[-1]
        if short > 0:
            fill = False if mask.dtype == np.bool_ else -np.inf
            mask = np.pad(mask, [(0, 0)] * (mask.ndim - 1) + [(0, short)], constant_values=fill)
        mask = np.where(mask, zero, minus) if mask.dtype == np.bool_ else mask.astype(dtype)
    bias = np.zeros((q_len, kv_len), dtype) if mask is None else np.zeros((q_len, kv_len), dtype) + mask
    per_batch = nonpad is not None and past == 0
    offset: Any = (np.asarray(nonpad).reshape(-1, 1, 1, 1) - q_len) if per_batch else past
    distance = np.arange(q_len)[:, None] + offset - np.arange(kv_len)[None, :]  # query position - key
    allowed = np.ones(distance.shape, bool)
    if int(attrs.get("is_causal", 0)):
        allowed &= distance >= 0
    left, right = int(attrs.get("left_window_size", -1)), int(attrs.get("right_window_size", -1))
    if left >= 0:
        allowed &= distance <= left
    if right >= 0:
        allowed &= -distance <= right
    if not allowed.all():
        bias = bias + np.where(allowed, zero, minus)
    if nonpad is not None:
        valid = np.arange(kv_len)[None, :] < np.asarray(nonpad).reshape(-1, 1)
        bias = bias + np.where(valid, zero, minus).reshape(-1, 1, 1, kv_len)
    return bias


def _softmax_rows(x: np.ndarray) -> np.ndarray:
    top = np.max(x, axis=-1, keepdims=True)
    top = np.where(np.isneginf(top), 0, top)
    e = np.exp(x - top)
    total = np.sum(e, axis=-1, keepdims=True)
    return e / np.where(total == 0, 1, total)


@kernel("Attention", since=23)
def attention_kernel(attrs: Attrs, q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: Any = None,
                     past_key: Any = None, past_value: Any = None, nonpad: Any = None) -> tuple:
    """ONNX Attention: ``softmax(Q K^T * scale + bias) V`` with caches, masks and GQA."""
    flat = q.ndim == 3
    if flat:
        q = _heads(q, int(attrs["q_num_heads"]))
        k = _heads(k, int(attrs["kv_num_heads"]))
        v = _heads(v, int(attrs["kv_num_heads"]))
    if past_key is not None:
        k = np.concatenate([past_key, k], axis=2)
        v = np.concatenate([past_value, v], axis=2)
    present_k, present_v = k, v
    past = 0 if past_key is None else past_key.shape[2]
    bias = _bias(attrs, q.dtype, q.shape[2], k.shape[2], mask, past, nonpad)
    if q.shape[1] != k.shape[1]:  # grouped-query attention: each key head serves a group
        k = np.repeat(k, q.shape[1] // k.shape[1], axis=1)
        v = np.repeat(v, q.shape[1] // v.shape[1], axis=1)
    scale = attrs.get("scale")
    root = q.dtype.type(np.sqrt(1 / np.sqrt(q.shape[3]) if scale is None else float(scale)))
    scores = np.matmul(q * root, np.swapaxes(k * root, -1, -2))
    softcap = float(attrs.get("softcap", 0.0))
    if softcap > 0:
        scores = np.tanh(scores / softcap) * softcap
    mode = int(attrs.get("qk_matmul_output_mode", 0))
    biased = scores + bias
    precision = attrs.get("softmax_precision")
    work = biased.astype(onnx_dtype(int(precision))) if precision is not None and int(precision) else biased
    with np.errstate(invalid="ignore", over="ignore"):
        probs = _softmax_rows(work)
    blocked = np.isneginf(np.max(bias, axis=-1, keepdims=True))
    probs = np.where(blocked, 0, probs)
    qk_out = (biased if mode == 2 else probs if mode == 3 else scores).astype(q.dtype)
    y = np.matmul(probs.astype(q.dtype), v).astype(q.dtype, copy=False)
    if flat:
        y = y.transpose(0, 2, 1, 3).reshape(y.shape[0], y.shape[2], -1)
    return (y, present_k, present_v, qk_out)


@kernel("RotaryEmbedding", since=23)
def rotary_embedding_kernel(attrs: Attrs, x: np.ndarray, cos: np.ndarray, sin: np.ndarray,
                            position_ids: Any = None) -> tuple:
    """ONNX RotaryEmbedding: rotate the first ``rotary_embedding_dim`` features of each head by
    the cached cos/sin at each position, pairing halves or (``interleaved``) neighbours."""
    flat = x.ndim == 3
    if flat:  # [batch, seq, heads * size] -> [batch, seq, heads, size]
        heads = int(attrs.get("num_heads", 0))
        x4 = x.reshape(x.shape[0], x.shape[1], heads, -1)
    else:  # [batch, heads, seq, size] -> [batch, seq, heads, size]
        x4 = x.transpose(0, 2, 1, 3)
    size = x4.shape[-1]
    dim = int(attrs.get("rotary_embedding_dim", 0)) or size
    if position_ids is not None:
        cos, sin = cos[position_ids], sin[position_ids]
    cos, sin = cos[..., : dim // 2][:, :, None, :], sin[..., : dim // 2][:, :, None, :]
    rotated, rest = x4[..., :dim], x4[..., dim:]
    if int(attrs.get("interleaved", 0)):
        a, b = rotated[..., 0::2], rotated[..., 1::2]
        out = np.empty_like(rotated)
        out[..., 0::2], out[..., 1::2] = a * cos - b * sin, b * cos + a * sin
    else:
        a, b = rotated[..., : dim // 2], rotated[..., dim // 2:]
        out = np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)
    y = np.concatenate([out, rest], axis=-1).astype(x.dtype, copy=False)
    return (y.reshape(x.shape) if flat else y.transpose(0, 2, 1, 3),)
