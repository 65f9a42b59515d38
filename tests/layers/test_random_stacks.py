"""Random stacks of layers build, infer their types, run, and round-trip through YAML, JSON and
ONNX (onnxruntime computes on the export what amanda computes in inference)."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import amanda
from amanda import Input, layers
from amanda.containers.phases import computations
from amanda.io.onnx import to_onnx
from amanda.io.onnx.importer import from_onnx
from amanda.types import infer_types


@st.composite
def conv_stacks(draw: st.DrawFn) -> tuple[list[amanda.Container], tuple[int, ...]]:
    """Layers over [batch, channels, size, size], ending in a Dense head."""
    channels, size = draw(st.integers(1, 3)), draw(st.integers(4, 8))
    shape = (2, channels, size, size)
    stack = []
    for i in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(["conv", "bn", "act", "maxpool", "avgpool", "dropout"]))
        if kind == "conv":
            out = draw(st.integers(1, 4))
            groups = draw(st.sampled_from([g for g in (1, 2) if channels % g == 0 and out % g == 0]))
            stack.append(layers.Conv(channels, out, draw(st.sampled_from([1, 3])), groups=groups,
                                     padding=draw(st.sampled_from(["same", 1])), name=f"conv{i}", seed=i))
            channels = out
        elif kind == "bn":
            stack.append(layers.BatchNorm(channels, name=f"bn{i}"))
        elif kind == "act":
            stack.append(layers.Activation(draw(st.sampled_from(["relu", "gelu", "tanh", "leaky_relu"]))))
        elif kind in ("maxpool", "avgpool") and size >= 2:
            stack.append((layers.MaxPool if kind == "maxpool" else layers.AvgPool)(2))
            size //= 2
        elif kind == "dropout":
            stack.append(layers.Dropout(0.5))
    stack += [layers.GlobalAvgPool(), layers.Dense(channels, 3, name="head")]
    return stack, shape


@st.composite
def dense_stacks(draw: st.DrawFn) -> tuple[list[amanda.Container], tuple[int, ...]]:
    """Layers over [batch, features] or [batch, sequence, features], ending in a Dense head."""
    features = draw(st.integers(2, 6))
    shape = (2, features) if draw(st.booleans()) else (2, 3, features)
    stack = []
    for i in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(["dense", "ln", "act", "dropout", "attention"]))
        if kind == "dense":
            out = draw(st.integers(2, 6))
            stack.append(layers.Dense(features, out, activation=draw(st.sampled_from([None, "relu", "sigmoid"])),
                                      name=f"dense{i}", seed=i))
            features = out
        elif kind == "ln":
            stack.append(layers.LayerNorm(features, name=f"ln{i}"))
        elif kind == "act":
            stack.append(layers.Activation(draw(st.sampled_from(["softmax", "silu", "elu", "softplus"]))))
        elif kind == "dropout":
            stack.append(layers.Dropout(0.3))
        elif len(shape) == 3 and features % 2 == 0:
            stack.append(layers.MultiHeadAttention(features, 2, name=f"attention{i}"))
    stack.append(layers.Dense(features, 2, name="head"))
    return stack, shape


def built(stack: list[amanda.Container], shape: tuple[int, ...], compose: str) -> amanda.Container:
    """The stack as one seeded model with a typed input, by the builder or by chain."""
    x = Input("x", "float32", ("batch", *shape[1:]))
    if compose == "builder":
        value: Any = x
        for layer in stack:
            value = layer(value)
        return layers.seeded(amanda.model([x], {"y": value}, name="net"), 1)
    body = amanda.chain(*stack, name="body")
    return layers.seeded(amanda.model([x], {"y": body(x)}, name="net"), 1)


@settings(max_examples=12, deadline=None)
@given(st.one_of(conv_stacks(), dense_stacks()), st.sampled_from(["builder", "chain"]))
def test_random_stacks_type_run_and_round_trip(case: tuple, compose: str) -> None:
    """The inferred output type holds the run's shape; YAML and JSON give an equal model; the
    frozen model's ONNX export runs in onnxruntime and (imported back) in amanda to the same values."""
    stack, shape = case
    model = built(stack, shape, compose)
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    out_type = infer_types(model)[(), "y"]
    known = computations(model)  # a stack without BatchNorm or Dropout has no phases to name
    with amanda.Session(model, threads=1) as session:
        (y,) = session.run(["y"], {"x": x}, phase="inference" if known else None)
        if known:
            session.run(["y", "train"] if model.control_names else ["y"], {"x": x}, phase="train")
    assert out_type.dtype == "float32" and len(out_type.shape) == y.ndim
    assert all(d == "batch" or d == n for d, n in zip(out_type.shape, y.shape))
    for fmt in ("yaml", "json"):
        assert amanda.loads(amanda.dumps(model, fmt), fmt) == model
    proto = to_onnx(layers.freeze(model))
    import onnxruntime as ort

    runtime = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(runtime.run(None, {"x": x})[0], y, rtol=1e-4, atol=1e-5)
    with amanda.Session(from_onnx(proto), threads=1) as session:
        np.testing.assert_allclose(session.run(["y"], {"x": x})[0], y, rtol=1e-5, atol=1e-6)
