"""Properties of ONNX import and export over random small MLP-like models."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper

import amanda
from amanda.io.onnx import from_onnx, to_onnx
from amanda.namespaces.model_fit import validate
from tests.fixtures.onnx import onnx_models as models

ACTIVATIONS = ["Relu", "Tanh", "Sigmoid", "Identity", "LeakyRelu", "Softmax", None]


@st.composite
def mlp_models(draw: st.DrawFn, unique_names: bool = True) -> onnx.ModelProto:
    """Random chains of MatMul+Add or Gemm layers with activations, names empty or not, metadata."""
    layers = draw(st.integers(1, 4))
    widths = draw(st.lists(st.integers(1, 5), min_size=layers + 1, max_size=layers + 1))
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    nodes, inits = [], []
    x = "x"

    def name(i: int, part: str) -> str:
        choice = draw(st.sampled_from(["", "named", "dup"] if not unique_names else ["", "named"]))
        return {"": "", "named": f"{part}{i}", "dup": "dup"}[choice]

    for i, (a, b) in enumerate(itertools.pairwise(widths)):
        w = rng.standard_normal((a, b)).astype(np.float32)
        bias = rng.standard_normal(b).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(bias, f"b{i}")]
        if draw(st.booleans()):
            nodes.append(
                helper.make_node("Gemm", [x, f"w{i}", f"b{i}"], [f"g{i}"], name=name(i, "gemm"))
            )
        else:
            nodes.append(helper.make_node("MatMul", [x, f"w{i}"], [f"m{i}"], name=name(i, "mm")))
            nodes.append(
                helper.make_node("Add", [f"m{i}", f"b{i}"], [f"g{i}"], name=name(i, "add"))
            )
        x = f"g{i}"
        activation = draw(st.sampled_from(ACTIVATIONS))
        if activation is not None:
            attrs = {"alpha": draw(st.floats(0.125, 0.5))} if activation == "LeakyRelu" else {}
            nodes.append(helper.make_node(activation, [x], [f"a{i}"], name=name(i, "act"), **attrs))
            if draw(st.booleans()):
                nodes[-1].metadata_props.add(key="note", value=draw(st.text("abc", max_size=3)))
            x = f"a{i}"
    nodes.append(helper.make_node("Identity", [x], ["y"], name="out"))
    graph = helper.make_graph(
        nodes,
        "random_mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", widths[0]])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", widths[-1]])],
        inits,
    )
    return models.model(graph)


@settings(max_examples=30, deadline=None)
@given(mlp_models(unique_names=False))
def test_import_leaves_the_proto_alone_and_builds_a_valid_container(proto):
    """Importing never changes the ModelProto, and the container it builds is valid and acyclic."""
    before = proto.SerializeToString()
    c = from_onnx(proto)
    assert proto.SerializeToString() == before
    assert validate(c) == []
    flat = amanda.flatten(c)
    assert (
        len(flat.topological_order())
        == len(c.children)
        == len(proto.graph.node) + len(proto.graph.initializer)
    )
    assert len({op.name for op in c.children}) == len(c.children)


@settings(max_examples=30, deadline=None)
@given(mlp_models(unique_names=False))
def test_export_leaves_the_container_alone_and_is_deterministic(proto):
    """Exporting never changes the container, gives the same bytes twice, and round-trips."""
    c = from_onnx(proto)
    text = amanda.dumps(c)
    exported = to_onnx(c)
    assert amanda.dumps(c) == text
    assert to_onnx(c).SerializeToString() == exported.SerializeToString()
    assert from_onnx(exported) == c


@settings(max_examples=20, deadline=None)
@given(mlp_models(), st.integers(1, 3))
def test_exported_models_compute_what_the_originals_compute(proto, batch):
    """onnxruntime gives identical outputs for a random model and its export(import(model))."""
    exported = to_onnx(from_onnx(proto))
    onnx.checker.check_model(exported, full_check=True)
    width = proto.graph.input[0].type.tensor_type.shape.dim[1].dim_value
    x = np.random.default_rng(batch).standard_normal((batch, width)).astype(np.float32)
    (want,), (got,) = models.run(proto, {"x": x}), models.run(exported, {"x": x})
    assert np.array_equal(want, got)
