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

from amanda.autodiff.composite import composite
from amanda.autodiff.node import Node as GradNode
from amanda.autodiff.node import const, shape_of
from amanda.autodiff.rules_attention import I64, repeat_heads, static
from amanda.autodiff.rules_decomposed import i64_1d
from amanda.build import ops
from amanda.build.values import Value
from amanda.exec.kernels.onnx_dtypes import onnx_dtype
from amanda.exec.kernels.registry import kernel
from amanda.ops import define
from amanda.types.node import Node
from amanda.types.rules import by_name
from amanda.types.rules.elementwise import same_as_first
from amanda.types.tensor_type import TensorType

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


def attention(node: Node) -> list:
    """Y like Q with V's head size; present key/value grow by the past length; the QK output
    is ``[batch, q_heads, q_seq, total_seq]``."""
    q, k, v = node.shape(0), node.shape(1), node.shape(2)
    dtype = node.dtype(0)
    past = node.shape(4) if node.present(4) else None
    if q is None or k is None or v is None:
        return [TensorType(dtype, None)] * node.n_out
    y: tuple[Any, ...]
    key_state: tuple[Any, ...]
    value_state: tuple[Any, ...]
    qk: tuple[Any, ...]
    if len(q) == 3:
        heads_q, heads_kv = node.attr("q_num_heads"), node.attr("kv_num_heads")
        v_size = v[2] // heads_kv if type(v[2]) is int and heads_kv else None
        y = (q[0], q[1], None if v_size is None or heads_q is None else v_size * int(heads_q))
        kv_seq = k[1]
        k_size = k[2] // heads_kv if type(k[2]) is int and heads_kv else None
        key_state = (k[0], heads_kv, None, k_size)
        value_state = (v[0], heads_kv, None, v_size)
        qk = (q[0], heads_q, q[1], None)
    else:
        y = (q[0], q[1], q[2], v[3])
        kv_seq = k[2]
        key_state, value_state = (k[0], k[1], None, k[3]), (v[0], v[1], None, v[3])
        qk = (q[0], q[1], q[2], None)
    total = kv_seq + past[2] if past is not None and type(kv_seq) is int and type(past[2]) is int else (
        kv_seq if past is None and not node.present(4) else None)
    key_state = (*key_state[:2], total, key_state[3])
    value_state = (*value_state[:2], total, value_state[3])
    qk = (*qk[:3], total)
    return by_name(node, Y=TensorType(dtype, y), present_key=TensorType(dtype, key_state),
                   present_value=TensorType(dtype, value_state), qk_matmul_output=TensorType(dtype, qk))


def _heads_grad(x: Value, count: int) -> Value:
    """[batch, seq, hidden] -> [batch, heads, seq, hidden / heads]."""
    return ops.Transpose(ops.Reshape(x, np.array([0, 0, count, -1], I64)), perm=[0, 2, 1, 3])


def _attention(n: GradNode) -> list:
    """Attention: the scores, bias, softmax and weighted values as builder ops."""
    q, k, v = n.given(0, 1, 2)
    rest = list(n.inputs) + [None] * 4
    mask, past_k, past_v, nonpad = rest[3:7]
    if nonpad is not None or int(n.attr("left_window_size", -1)) >= 0 or int(n.attr("right_window_size", -1)) >= 0:
        raise n.fail("no nonpad_kv_seqlen and no sliding window", "one of them")
    flat = q.type.shape is not None and len(q.type.shape) == 3
    if flat:
        q, k, v = _heads_grad(q, int(n.attr("q_num_heads"))), _heads_grad(k, int(n.attr("kv_num_heads"))), \
            _heads_grad(v, int(n.attr("kv_num_heads")))
    if past_k is not None and past_v is not None:
        k, v = ops.Concat(past_k, k, axis=2), ops.Concat(past_v, v, axis=2)
    present_k, present_v = k, v
    size = static(q, 3, n, "head size")
    q_heads, kv_heads = static(q, 1, n, "number of heads"), static(k, 1, n, "number of heads")
    k, v = repeat_heads(k, q_heads // kv_heads), repeat_heads(v, q_heads // kv_heads)
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
        kv_len, given = static(k, 2, n, "key length"), static(mask, -1, n, "mask length")
        if given < kv_len:
            pads = np.zeros(2 * len(mask.type.shape), I64)
            pads[-1] = kv_len - given
            mask = ops.Pad(mask, pads, const(-np.inf, q))
        bias = mask
    if int(n.attr("is_causal", 0)):
        q_len, kv_len = static(q, 2, n, "query length"), static(k, 2, n, "key length")
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


define("Attention", type_rule=attention, vjp=attention_vjp)


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


def _rotary(n: GradNode) -> list:
    """RotaryEmbedding: pairs of features rotated by the cached cos and sin."""
    x, cos, sin = n.given(0, 1, 2)
    pos = n.inputs[3] if len(n.inputs) > 3 else None
    shape = x.type.shape
    if shape is None or type(shape[-1]) is not int:
        raise n.fail("a known feature size", repr(x.type))
    flat = len(shape) == 3
    heads = int(n.attr("num_heads", 0))
    x4 = ops.Reshape(x, np.array([0, 0, heads, -1], I64)) if flat else ops.Transpose(x, perm=[0, 2, 1, 3])
    size = int(shape[-1]) // heads if flat else int(shape[-1])
    dim = int(n.attr("rotary_embedding_dim", 0)) or size
    if pos is not None:
        cos, sin = ops.Gather(cos, pos, axis=0), ops.Gather(sin, pos, axis=0)
    last = i64_1d(-1)
    cos, sin = (ops.Unsqueeze(ops.Slice(v, i64_1d(0), i64_1d(dim // 2), last), i64_1d(2)) for v in (cos, sin))
    rotated = ops.Slice(x4, i64_1d(0), i64_1d(dim), last)
    if int(n.attr("interleaved", 0)):
        a, b = (ops.Slice(rotated, i64_1d(start), i64_1d(dim), last, i64_1d(2)) for start in (0, 1))
    else:
        a, b = ops.Slice(rotated, i64_1d(0), i64_1d(dim // 2), last), ops.Slice(rotated, i64_1d(dim // 2), i64_1d(dim), last)
    first = ops.Sub(ops.Mul(a, cos), ops.Mul(b, sin))
    second = ops.Add(ops.Mul(b, cos), ops.Mul(a, sin))
    if int(n.attr("interleaved", 0)):
        pairs = ops.Concat(ops.Unsqueeze(first, last), ops.Unsqueeze(second, last), axis=-1)
        out = ops.Reshape(pairs, shape_of(rotated))
    else:
        out = ops.Concat(first, second, axis=-1)
    if dim < size:
        out = ops.Concat(out, ops.Slice(x4, i64_1d(dim), i64_1d(size), last), axis=-1)
    return [ops.Reshape(out, shape_of(x)) if flat else ops.Transpose(out, perm=[0, 2, 1, 3])]


rotary_vjp = composite(_rotary)


define("RotaryEmbedding", type_rule=same_as_first, vjp=rotary_vjp)
