"""The outer values an If reads become input ports whose order does not depend on the order
the file lists the branches in (torch writes then_branch first, other exporters do not)."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

import amanda  # noqa: E402
from amanda.io.onnx.importer import from_onnx  # noqa: E402


def if_model(then_first: bool) -> onnx.ModelProto:
    """``cond ? a + 1 : b * 2`` with the branches reading the outer values a and b."""
    one = helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])
    two = helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])
    out = [helper.make_tensor_value_info("r", TensorProto.FLOAT, [2])]
    then_g = helper.make_graph([helper.make_node("Add", ["b_", "one"], ["r"])], "then", [], out, [one])
    else_g = helper.make_graph([helper.make_node("Mul", ["a_", "two"], ["r"])], "else", [], out, [two])
    then_g.node[0].input[0] = "zeta"  # names that sort against the discovery order
    else_g.node[0].input[0] = "alpha"
    node = helper.make_node("If", ["cond"], ["y"], name="branch")
    branches = [helper.make_attribute("then_branch", then_g), helper.make_attribute("else_branch", else_g)]
    node.attribute.extend(branches if then_first else branches[::-1])
    inputs = [helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
              helper.make_tensor_value_info("zeta", TensorProto.FLOAT, [2]),
              helper.make_tensor_value_info("alpha", TensorProto.FLOAT, [2])]
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_branch_order_does_not_change_the_model() -> None:
    """Both orders import equal, round-trip through YAML and ONNX equal, and run as onnxruntime does."""
    a, b = from_onnx(if_model(True)), from_onnx(if_model(False))
    assert a.child("branch").input_names == b.child("branch").input_names == ("cond", "alpha", "zeta")
    assert amanda.loads(amanda.dumps(a)) == a
    from amanda.io.onnx.export import to_onnx

    assert from_onnx(to_onnx(b)).child("branch").input_names == a.child("branch").input_names
    feeds = {"cond": np.array(True), "zeta": np.array([1.0, 2.0], np.float32), "alpha": np.array([3.0, 4.0], np.float32)}
    with amanda.Session(b, threads=1) as s:
        np.testing.assert_allclose(s.run(["y"], feeds)[0], [2.0, 3.0])
    feeds["cond"] = np.array(False)
    with amanda.Session(a, threads=1) as s:
        np.testing.assert_allclose(s.run(["y"], feeds)[0], [6.0, 8.0])
