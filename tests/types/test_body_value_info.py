"""Export types the intermediate values of If/Loop/Scan bodies too, and sequence values."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

from amanda.io.onnx.export import to_onnx  # noqa: E402
from amanda.io.onnx.importer import from_onnx  # noqa: E402
from amanda.types.onnx_info import is_inferred  # noqa: E402


def _bodies(graph: onnx.GraphProto) -> list[onnx.GraphProto]:
    found = []
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                found += [attr.g, *_bodies(attr.g)]
    return found


def if_model() -> onnx.ModelProto:
    """``cond ? (x * 2) + x : -x``: the then-branch has an intermediate value, ``twice``."""
    two = helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])
    out = [helper.make_tensor_value_info("r", TensorProto.FLOAT, None)]
    then_g = helper.make_graph([helper.make_node("Mul", ["x", "two"], ["twice"]),
                                helper.make_node("Add", ["twice", "x"], ["r"])], "then", [], out, [two])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["r"])], "else", [], out)
    node = helper.make_node("If", ["cond"], ["y"], name="branch", then_branch=then_g, else_branch=else_g)
    inputs = [helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
              helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3])]
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_body_values_get_inferred_types_and_the_file_still_runs() -> None:
    """The intermediate value of a branch gets inferred value_info (typed from the outer graph's
    inference); onnxruntime computes what it did, and importing the file again gives an equal
    container."""
    proto = if_model()
    model = from_onnx(proto)
    exported = to_onnx(model)
    inferred = {vi.name: vi for body in _bodies(exported.graph) for vi in body.value_info if is_inferred(vi)}
    assert set(inferred) == {"twice"}
    shape = [d.dim_param or d.dim_value for d in inferred["twice"].type.tensor_type.shape.dim]
    assert inferred["twice"].type.tensor_type.elem_type == TensorProto.FLOAT and shape == ["n", 3]
    feeds = {"cond": np.array(True), "x": np.arange(6, dtype=np.float32).reshape(2, 3)}
    run = lambda m: ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)  # noqa: E731
    np.testing.assert_allclose(run(exported)[0], run(proto)[0])
    assert from_onnx(exported) == model


def test_sequence_values_are_typed() -> None:
    """A sequence built by SequenceConstruct gets a sequence value_info of its element type."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    nodes = [helper.make_node("SequenceConstruct", ["x", "x"], ["seq"], name="make"),
             helper.make_node("ConcatFromSequence", ["seq"], ["y"], axis=0, name="cat")]
    graph = helper.make_graph(nodes, "g", [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 3])])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    exported = to_onnx(from_onnx(proto))
    (seq,) = [vi for vi in exported.graph.value_info if vi.name == "seq"]
    assert seq.type.sequence_type.elem_type.tensor_type.elem_type == TensorProto.FLOAT
