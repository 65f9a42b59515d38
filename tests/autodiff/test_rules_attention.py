"""Attention (opset 23): gradients of Q, K, V, an additive mask and the key/value cache agree
with central differences (float32 only: the op takes no float64, so the step is wide)."""

from __future__ import annotations

import numpy as np
import pytest

import amanda
from amanda import ops
from amanda.build import Ops
from tests.autodiff.fd import check

F32 = np.float32


def arr(seed: int, shape: tuple) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(F32)


def wide(y):
    return ops.Cast(y, to=np.dtype("float64"))


@pytest.mark.parametrize(("causal", "scale", "softcap", "kv_heads"),
                         [(0, None, 0.0, 2), (1, None, 0.0, 2), (0, 0.7, 3.0, 1), (1, 0.5, 0.0, 1)])
def test_four_d_with_causal_scale_softcap_and_grouped_heads(causal, scale, softcap, kv_heads):
    """4-D Q, K, V; causal masking; a scale; softcap; grouped-query heads (2 query heads per key head)."""
    attention = Ops("amanda/onnx/23").Attention
    kw = {"is_causal": causal, "softcap": softcap, **({} if scale is None else {"scale": scale})}
    feeds = {"q": arr(0, (1, 2, 3, 4)), "k": arr(1, (1, kv_heads, 3, 4)), "v": arr(2, (1, kv_heads, 3, 4))}
    check(lambda q, k, v: wide(attention(q, k, v, **kw)[0]), feeds, wrt=list(feeds), rtol=5e-3, atol=2e-3, eps=1e-2)


def test_three_d_with_a_mask_and_a_cache():
    """3-D inputs (heads from attributes), an additive mask shorter than the keys (padded), a
    past key and value; the present outputs are read too."""
    attention = Ops("amanda/onnx/23").Attention
    feeds = {"q": arr(3, (1, 2, 4)), "k": arr(4, (1, 2, 4)), "v": arr(5, (1, 2, 4)), "mask": arr(6, (2, 3)),
             "pk": arr(7, (1, 2, 1, 2)), "pv": arr(8, (1, 2, 1, 2))}

    def build(q, k, v, mask, pk, pv):
        y, present_k, present_v, _ = attention(q, k, v, mask, pk, pv, q_num_heads=2, kv_num_heads=2)
        flat = [ops.Reshape(t, np.array([-1], np.int64)) for t in (y, present_k, present_v)]
        return wide(ops.Concat(*flat, axis=0))

    check(build, feeds, wrt=list(feeds), rtol=5e-3, atol=2e-3, eps=1e-2)


def test_sliding_windows_are_refused():
    """A sliding window (opset 25) is a SchemaError naming the op."""
    q = amanda.Input("q", "float32", (1, 1, 2, 2))
    net = amanda.model([q], {"loss": ops.ReduceSum(Ops("amanda/onnx/25").Attention(q, q, q, left_window_size=1,
                                                                                     name="att")[0], keepdims=0)})
    with pytest.raises(amanda.SchemaError, match="att"):
        amanda.grad(net, "loss", ["q"])


@pytest.mark.parametrize(("rule", "kv_heads", "past", "per_key_decay"), [
    ("linear", 2, False, False), ("gated", 1, True, False), ("delta", 2, True, False),
    ("gated_delta", 1, False, True), ("gated_delta", 2, True, False),
])
def test_linear_attention(rule, kv_heads, past, per_key_decay):
    """LinearAttention (opset 27), each update rule, grouped heads, a past state, decay per head
    or per key feature, beta: every input gets its gradient."""
    b, t, q_heads, d = 1, 3, 2, 2
    feeds = {"q": arr(10, (b, t, q_heads * d)), "k": arr(11, (b, t, kv_heads * d)) * 0.5,
             "v": arr(12, (b, t, kv_heads * d))}
    if past:
        feeds["past"] = arr(13, (b, kv_heads, d, d)) * 0.5
    if rule in ("gated", "gated_delta"):
        feeds["decay"] = -np.abs(arr(14, (b, t, kv_heads * (d if per_key_decay else 1))))
    if rule in ("delta", "gated_delta"):
        feeds["beta"] = np.abs(arr(15, (b, t, kv_heads))) * 0.5
    op = Ops("amanda/onnx/27").LinearAttention

    def build(q, k, v, past=None, decay=None, beta=None):
        y, state = op(q, k, v, past, decay, beta, q_num_heads=q_heads, kv_num_heads=kv_heads, update_rule=rule)
        flat = [ops.Reshape(x, np.array([-1], np.int64)) for x in (y, state)]
        return wide(ops.Concat(*flat, axis=0))

    check(build, feeds, wrt=list(feeds), rtol=5e-3, atol=2e-3, eps=1e-2)
