"""Attention and RotaryEmbedding against onnxruntime and against attention written out in
numpy, over head layouts, grouped-query heads, causal masks, caches and masks."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import helper  # noqa: E402

from tests.exec.onnx_oracle import amanda_outputs, one_node  # noqa: E402


def amanda_run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    return amanda_outputs(model, feeds)


def textbook(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool) -> np.ndarray:
    """softmax(Q K^T / sqrt(d)) V per head, with a top-left causal mask."""
    scores = q.astype(np.float64) @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if causal:
        scores = np.where(np.tril(np.ones(scores.shape[-2:], bool)), scores, -np.inf)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), q_heads=st.sampled_from([2, 4]), group=st.sampled_from([1, 2]),
       causal=st.booleans(), seq=st.integers(1, 5))
def test_attention_equals_the_textbook_formula(seed: int, q_heads: int, group: int, causal: bool, seq: int) -> None:
    """4-D attention with grouped-query heads is softmax(Q K^T / sqrt(d)) V, each key head
    shared by ``group`` query heads."""
    rng = np.random.default_rng(seed)
    kv_heads = q_heads // group
    q = rng.standard_normal((2, q_heads, seq, 4)).astype(np.float32)
    k = rng.standard_normal((2, kv_heads, seq, 4)).astype(np.float32)
    v = rng.standard_normal((2, kv_heads, seq, 3)).astype(np.float32)
    node = helper.make_node("Attention", ["q", "k", "v"], ["y"], is_causal=int(causal))
    (y,) = amanda_run(one_node(node, {"q": q, "k": k, "v": v}, 23), {"q": q, "k": k, "v": v})
    want = textbook(q, np.repeat(k, group, 1), np.repeat(v, group, 1), causal)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-5)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), causal=st.booleans(), with_past=st.booleans(), with_mask=st.booleans())
def test_attention_matches_onnxruntime(seed: int, causal: bool, with_past: bool, with_mask: bool) -> None:
    """3-D attention with a cache and an additive mask gives onnxruntime's Y and present K/V."""
    rng = np.random.default_rng(seed)
    feeds = {"q": rng.standard_normal((2, 3, 8)).astype(np.float32),
             "k": rng.standard_normal((2, 3, 4)).astype(np.float32),
             "v": rng.standard_normal((2, 3, 4)).astype(np.float32)}
    names = ["q", "k", "v", "", "", ""]
    total = 3 + (2 if with_past else 0)
    if with_mask:
        feeds["mask"] = rng.standard_normal((3, total)).astype(np.float32)
        names[3] = "mask"
    if with_past:
        feeds["pk"] = rng.standard_normal((2, 1, 2, 4)).astype(np.float32)
        feeds["pv"] = rng.standard_normal((2, 1, 2, 4)).astype(np.float32)
        names[4:6] = ["pk", "pv"]
    while names and not names[-1]:
        names.pop()
    node = helper.make_node("Attention", names, ["y", "pk_out", "pv_out"], q_num_heads=2, kv_num_heads=1,
                            is_causal=int(causal))
    model = one_node(node, feeds, 23)
    try:
        want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    except Exception as exc:  # pragma: no cover - an onnxruntime without Attention-23
        pytest.skip(f"onnxruntime cannot run Attention-23: {exc}")
    got = amanda_run(model, feeds)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), interleaved=st.booleans(), partial=st.booleans())
def test_rotary_embedding_matches_onnxruntime(seed: int, interleaved: bool, partial: bool) -> None:
    """RotaryEmbedding with position ids, halves or interleaved pairs, whole or partial
    rotation, gives onnxruntime's values."""
    rng = np.random.default_rng(seed)
    size, dim = 8, (4 if partial else 8)
    feeds = {"x": rng.standard_normal((2, 3, 5, size)).astype(np.float32),
             "cos": rng.standard_normal((7, dim // 2)).astype(np.float32),
             "sin": rng.standard_normal((7, dim // 2)).astype(np.float32),
             "pos": rng.integers(0, 7, (2, 5)).astype(np.int64)}
    attrs = {"interleaved": int(interleaved)}
    if partial:
        attrs["rotary_embedding_dim"] = dim
    node = helper.make_node("RotaryEmbedding", ["x", "cos", "sin", "pos"], ["y"], **attrs)
    model = one_node(node, feeds, 23)
    try:
        (want,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    except Exception as exc:  # pragma: no cover
        pytest.skip(f"onnxruntime cannot run RotaryEmbedding-23: {exc}")
    (got,) = amanda_run(model, feeds)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
