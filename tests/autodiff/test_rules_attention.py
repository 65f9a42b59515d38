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
