"""Quantisation kernels against onnxruntime on random data: per-tensor and per-axis
QuantizeLinear/DequantizeLinear, DynamicQuantizeLinear, QLinearMatMul and QLinearConv."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import helper  # noqa: E402

from tests.exec.onnx_oracle import both as _both  # noqa: E402


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), per_axis=st.booleans(), signed=st.booleans())
def test_quantize_and_dequantize_linear(seed: int, per_axis: bool, signed: bool) -> None:
    """Quantising and dequantising random values gives onnxruntime's integers and floats."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((3, 4, 5)) * 4).astype(np.float32)
    scale = rng.uniform(0.01, 0.2, size=(4,) if per_axis else ()).astype(np.float32)
    dtype = np.int8 if signed else np.uint8
    zero = rng.integers(-5 if signed else 100, 5 if signed else 150, size=scale.shape).astype(dtype)
    node = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=1)
    (want,), (got,) = _both(node, {"x": x, "s": scale, "z": zero}, 21)
    np.testing.assert_array_equal(got, want)
    node = helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=1)
    (want,), (got,) = _both(node, {"q": want, "s": scale, "z": zero}, 21)
    np.testing.assert_allclose(got, want, rtol=1e-6)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_dynamic_quantize_linear(seed: int) -> None:
    """DynamicQuantizeLinear picks onnxruntime's scale and zero point and values."""
    x = (np.random.default_rng(seed).standard_normal((6, 7)) * 3).astype(np.float32)
    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])
    want, got = _both(node, {"x": x}, 11)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-6)
    assert got[2] == want[2]
    assert np.abs(got[0].astype(int) - want[0].astype(int)).max() <= 0


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), per_column=st.booleans())
def test_qlinear_matmul(seed: int, per_column: bool) -> None:
    """QLinearMatMul of uint8 operands equals onnxruntime's requantised product."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 256, (5, 8)).astype(np.uint8)
    b = rng.integers(0, 256, (8, 3)).astype(np.uint8)
    feeds = {
        "a": a, "sa": np.float32(0.02), "za": np.uint8(120),
        "b": b, "sb": rng.uniform(0.01, 0.03, (3,) if per_column else ()).astype(np.float32),
        "zb": (np.full(3, 128, np.uint8) if per_column else np.uint8(128)),
        "sy": np.float32(0.5), "zy": np.uint8(100),
    }
    feeds = {k: np.asarray(v) for k, v in feeds.items()}
    node = helper.make_node("QLinearMatMul", list(feeds), ["y"])
    (want,), (got,) = _both(node, feeds, 21)
    assert np.abs(got.astype(int) - want.astype(int)).max() <= 1  # onnxruntime's float32 requantising


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_qlinear_conv_per_channel(seed: int) -> None:
    """QLinearConv with per-channel weight scales and an int32 bias matches onnxruntime."""
    rng = np.random.default_rng(seed)
    feeds = {
        "x": rng.integers(0, 256, (1, 3, 6, 6)).astype(np.uint8), "sx": np.float32(0.05), "zx": np.uint8(128),
        "w": rng.integers(-20, 20, (4, 3, 3, 3)).astype(np.int8),
        "sw": rng.uniform(0.01, 0.05, (4,)).astype(np.float32), "zw": np.zeros(4, np.int8),
        "sy": np.float32(0.8), "zy": np.uint8(128), "b": rng.integers(-500, 500, (4,)).astype(np.int32),
    }
    feeds = {k: np.asarray(v) for k, v in feeds.items()}
    node = helper.make_node("QLinearConv", list(feeds), ["y"], pads=[1, 1, 1, 1])
    (want,), (got,) = _both(node, feeds, 21)
    assert np.abs(got.astype(int) - want.astype(int)).max() <= 1
