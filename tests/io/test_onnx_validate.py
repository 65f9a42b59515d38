"""``validate``: imported ONNX models are valid; broken ops are reported with their paths."""

from __future__ import annotations

import numpy as np
import pytest

import amanda

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper

from amanda import Container, Port, SchemaError, op
from amanda.io.onnx import from_onnx
from amanda.namespaces.model_fit import validate
from tests.fixtures.onnx import onnx_models as models

vi = helper.make_tensor_value_info


@pytest.mark.parametrize("name", ["mlp", "cnn", "attention", "control_flow", "custom_domains"])
def test_imported_models_are_valid(name):
    """Every op of an imported model (bodies included) fits its namespace: no problems."""
    assert validate(from_onnx(models.BUILDERS[name]())) == []


def test_problems_carry_paths_and_reasons():
    """Unknown type, unknown and missing ports, a missing required attribute and a wrong attribute
    type are each reported at the op's path."""
    ops = [
        op("Relu", "ok", ["X"], ["Y"]),
        op("Rleu", "typo", ["X"], ["Y"]),
        op("Add", "ports", ["A", "Z"], ["C"]),
        op("Cast", "no_to", ["input"], ["output"]),
        op("Softmax", "axis", ["input"], ["output"], attrs={"axis": "last"}),
    ]
    block = Container("Block", "block", children=ops, attrs={"debug": True})
    g = Container(None, "g", children=[block], attrs={"namespace": "amanda/onnx/17"})
    problems = validate(g)
    by_path: dict = {}
    for problem in problems:
        by_path.setdefault(problem.path, []).append(str(problem))
    assert ("block", "ok") not in by_path  # inherited attrs (debug) are not the op's attributes
    assert "did you mean 'Relu'" in by_path[("block", "typo")][0]
    ports = " ".join(by_path[("block", "ports")])
    assert "input port 'Z'" in ports and "required input port 'B'" in ports
    assert "required attribute 'to'" in by_path[("block", "no_to")][0]
    assert "attribute 'axis' (int)" in by_path[("block", "axis")][0]


def test_problems_inside_bodies_have_body_paths():
    """A bad op inside an If body is reported at (if op, attribute, op)."""
    c = from_onnx(models.control_flow())
    if_op = c.child("if")
    then = if_op.attrs["then_branch"]
    bad = then.child("then_mul").with_attrs(bogus=1)
    then = then.evolve(children=[bad])
    c = c.evolve(
        children=[
            if_op.with_attrs(then_branch=then) if ch.name == "if" else ch for ch in c.children
        ]
    )
    (problem,) = validate(c)
    assert problem.path == ("if", "then_branch", "then_mul")
    assert "'bogus'" in str(problem)


def test_bad_attribute_types_in_an_imported_model():
    """An ONNX attribute of the wrong type (a float for Gemm's transA) is found after import."""
    node = helper.make_node("Gemm", ["x", "w"], ["y"], name="gemm", transA=1.5)
    graph = helper.make_graph(
        [node],
        "g",
        [vi("x", TensorProto.FLOAT, [2, 2]), vi("w", TensorProto.FLOAT, [2, 2])],
        [vi("y", TensorProto.FLOAT, [2, 2])],
    )
    (problem,) = validate(from_onnx(models.model(graph)))
    assert problem.path == ("gemm",) and "transA" in problem.expected


def test_unknown_namespaces_raise_report_or_skip():
    """An unregistered namespace raises SchemaError by default; it can be reported or skipped."""
    g = Container(
        None, "g", children=[op("Relu", "r", ["X"], ["Y"])], attrs={"namespace": "amanda/nowhere/1"}
    )
    with pytest.raises(SchemaError, match="amanda/nowhere/1"):
        validate(g)
    (problem,) = validate(g, unknown_namespace="report")
    assert problem.path == ("r",) and problem.expected == "a known namespace"
    assert validate(g, unknown_namespace="skip") == []
    with pytest.raises(amanda.ArgumentError, match="unknown_namespace"):
        validate(g, unknown_namespace="ignore")


def test_ops_without_a_namespace_are_skipped():
    """A graph that names no namespace makes no claim: nothing to check, no problem."""
    g = Container(None, "g", children=[op("Whatever", "w", ["a"], ["b"])])
    assert validate(g) == []
    assert validate(op("Relu", "r", ["X"], ["Y"], attrs={"namespace": "amanda/onnx/17"})) == []


def test_custom_domain_ops_need_a_registered_namespace():
    """Ops of an ONNX domain amanda has no vocabulary for raise until their namespace is registered."""
    from amanda.namespaces import Namespace, OpSchema, register_namespace, unregister_namespace

    node = helper.make_node("Fancy", ["x"], ["y"], name="fancy", domain="com.example")
    graph = helper.make_graph(
        [node], "g", [vi("x", TensorProto.FLOAT, [2])], [vi("y", TensorProto.FLOAT, [2])]
    )
    c = from_onnx(models.model(graph, {"": 17, "com.example": 1}))
    with pytest.raises(SchemaError, match="amanda/onnx/com.example/1"):
        validate(c)
    register_namespace(
        Namespace("amanda/onnx/com.example/1", schemas=[OpSchema("Fancy", inputs=["x"], outputs=["y"])])
    )
    try:
        problems = validate(c)
    finally:
        unregister_namespace("amanda/onnx/com.example/1")
    assert [p.path for p in problems] == [("fancy",), ("fancy",), ("fancy",), ("fancy",)]


def test_encoding_attributes_are_not_checked():
    """``initializer``, ``metadata``, ``onnx_node`` and captured ports describe the encoding, not the op."""
    const = op(
        "Constant",
        "c",
        outputs=["output"],
        attrs={
            "value": np.ones(2),
            "initializer": True,
            "metadata": {"k": "v"},
            "onnx_node": {"name": ""},
            "namespace": "amanda/onnx/17",
        },
    )
    assert validate(const) == []
    if_op = op(
        "If",
        "if",
        inputs=["cond", Port("w", attrs={"captured": True})],
        outputs=["outputs_0"],
        attrs={
            "namespace": "amanda/onnx/17",
            "then_branch": Container(None, "t"),
            "else_branch": Container(None, "e"),
        },
    )
    assert validate(if_op) == []
