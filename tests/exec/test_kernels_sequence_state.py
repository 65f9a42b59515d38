"""TensorScatter, CausalConvWithState and LinearAttention against closed forms written in
numpy, and the decode property: running a sequence in chunks with carried state equals
running it whole."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from amanda.opset.onnx.sequence_state import (
    causal_conv_with_state_kernel,
    linear_attention_kernel,
    tensor_scatter_kernel,
)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 1000), circular=st.booleans())
def test_tensor_scatter_follows_the_pseudocode(seed: int, circular: bool) -> None:
    """Each batch entry's update lands at its write index along the sequence axis."""
    rng = np.random.default_rng(seed)
    past = rng.standard_normal((2, 3, 6, 4)).astype(np.float32)
    update = rng.standard_normal((2, 3, 3, 4)).astype(np.float32)
    starts = rng.integers(0, 6 if circular else 4, 2).astype(np.int64)
    attrs = {"mode": "circular" if circular else "linear"}
    (got,) = tensor_scatter_kernel(attrs, past, update, starts)
    want = past.copy()
    for b in range(2):
        for s in range(3):
            want[b, :, (starts[b] + s) % 6 if circular else starts[b] + s] = update[b, :, s]
    np.testing.assert_array_equal(got, want)
    assert not np.shares_memory(got, past)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 1000), k=st.integers(1, 4), split=st.integers(1, 6))
def test_causal_conv_in_chunks_equals_whole(seed: int, k: int, split: int) -> None:
    """Convolving a sequence in two chunks, carrying the state, equals convolving it whole,
    and the whole equals the causal depthwise sum written out."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, 3, 7)).astype(np.float64)
    w = rng.standard_normal((3, 1, k))
    bias = rng.standard_normal(3)
    whole, state = causal_conv_with_state_kernel({}, x, w, bias)
    first, carry = causal_conv_with_state_kernel({}, x[:, :, :split], w, bias)
    second, carry = causal_conv_with_state_kernel({}, x[:, :, split:], w, bias, carry)
    np.testing.assert_allclose(np.concatenate([first, second], axis=2), whole, atol=1e-12)
    np.testing.assert_allclose(carry, state)
    padded = np.concatenate([np.zeros((2, 3, k - 1)), x], axis=2)
    want = np.stack([(padded[:, :, t:t + k] * w[:, 0]).sum(-1) for t in range(7)], axis=2) + bias[:, None]
    np.testing.assert_allclose(whole, want, atol=1e-12)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 1000), group=st.sampled_from([1, 2]))
def test_linear_attention_equals_its_closed_form(seed: int, group: int) -> None:
    """The "linear" rule is o_t = scale * q_t . sum_{s<=t} k_s v_s^T, each key head shared by
    ``group`` query heads; chunked decoding with the carried state gives the same."""
    rng = np.random.default_rng(seed)
    b, t, kv, dk, dv = 2, 5, 2, 3, 4
    q = rng.standard_normal((b, t, kv * group * dk)).astype(np.float32)
    k = rng.standard_normal((b, t, kv * dk)).astype(np.float32)
    v = rng.standard_normal((b, t, kv * dv)).astype(np.float32)
    attrs = {"q_num_heads": kv * group, "kv_num_heads": kv, "update_rule": "linear"}
    y, state = linear_attention_kernel(attrs, q, k, v)
    q4 = q.reshape(b, t, kv * group, dk).astype(np.float64)
    k4 = np.repeat(k.reshape(b, t, kv, dk), group, axis=2).astype(np.float64)
    v4 = np.repeat(v.reshape(b, t, kv, dv), group, axis=2).astype(np.float64)
    scores = np.einsum("bthd,bshd->bhts", q4, k4) * np.tril(np.ones((t, t)))
    want = np.einsum("bhts,bshv->bthv", scores, v4) / np.sqrt(dk)
    np.testing.assert_allclose(y, want.reshape(b, t, -1), rtol=1e-4, atol=1e-5)
    y1, s1 = linear_attention_kernel(attrs, q[:, :2], k[:, :2], v[:, :2])
    y2, s2 = linear_attention_kernel(attrs, q[:, 2:], k[:, 2:], v[:, 2:], s1)
    np.testing.assert_allclose(np.concatenate([y1, y2], axis=1), y, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(s2, state, rtol=1e-5, atol=1e-6)
