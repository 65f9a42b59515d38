"""validate_op: every way an op can fail its schema is reported."""

from __future__ import annotations

import numpy as np
import pytest

from amanda.errors import Problem
from amanda.namespaces import AttrSchema, OpSchema, PortSchema, namespace, validate_op

ONNX13 = namespace("amanda/onnx/13")


def _check(schema, inputs, outputs, attrs, op_type=None):
    return validate_op(schema, ("g", "op"), op_type or schema.type, inputs, outputs, attrs)


def test_valid_ops_have_no_problems():
    """Ops that fit their schema produce no problems."""
    conv = ONNX13.schema("Conv")
    assert _check(conv, ["X", "W"], ["Y"], {"kernel_shape": [3, 3], "auto_pad": "NOTSET",
                                            "namespace": "amanda/onnx/13"}) == []
    assert _check(conv, ["X", "W", "B"], ["Y"], {"strides": (1, 1), "group": np.int64(1)}) == []


def test_unknown_and_missing_ports():
    """Unknown port names and undeclared required inputs are reported with suggestions."""
    problems = _check(ONNX13.schema("Conv"), ["X", "w"], ["Y", "Z"], {})
    text = [str(p) for p in problems]
    assert all(isinstance(p, Problem) and p.path == ("g", "op") for p in problems)
    assert any("input port 'w'" in t and "did you mean 'W'" in t for t in text)
    assert any("output port 'Z'" in t for t in text)
    assert any("required input port 'W'" in t for t in text)
    assert len(problems) == 3


def test_optional_inputs_may_be_absent():
    """Optional schema inputs need not be declared."""
    assert _check(ONNX13.schema("ReduceSum"), ["data"], ["reduced"], {}) == []


def test_variadic_ports_accept_any_trailing_names():
    """A trailing variadic port takes any names not in the schema, at least min_arity."""
    concat = ONNX13.schema("Concat")
    assert _check(concat, ["inputs_0", "inputs_1", "x"], ["concat_result"], {"axis": 0}) == []
    assert _check(concat, ["inputs"], ["concat_result"], {"axis": 0}) == []
    problems = _check(concat, [], ["concat_result"], {"axis": 0})
    assert len(problems) == 1 and "at least 1" in str(problems[0])
    loop = namespace("amanda/onnx/16").schema("Loop")  # v_initial has min_arity 0
    assert _check(loop, ["M", "cond"], ["out"], {"body": object()}) == []
    split = ONNX13.schema("Split")
    assert _check(split, ["input"], ["a", "b", "c"], {"axis": 1}) == []


def test_attribute_problems():
    """Missing required, unknown and wrongly typed attributes are each reported."""
    problems = _check(ONNX13.schema("Cast"), ["input"], ["output"], {"too": 1})
    text = " | ".join(str(p) for p in problems)
    assert "required attribute 'to'" in text and "found 'too'" in text
    assert "did you mean 'to'" in text
    problems = _check(ONNX13.schema("Conv"), ["X", "W"], ["Y"],
                      {"group": "1", "strides": [1, "2"], "auto_pad": 3, "dilations": 2})
    assert len(problems) == 4
    assert "'group' (int) to be an int, found str '1'" in str(problems[0])


@pytest.mark.parametrize("value, ok", [
    ("float32", True), (np.float32, True), (np.dtype("int64"), True), (1, True), (16, True),
    ("FLOAT", True), ("bfloat16", True), (0, False), (99, False), ("float", False),
    ("notatype", False), (1.0, False), (True, False),
])
def test_dtype_attributes(value, ok):
    """A dtype attribute accepts numpy dtype names/objects and ONNX TensorProto enum ints."""
    schema = OpSchema("MatMul", inputs=["a", "b"], outputs=["product"],
                      attrs=[AttrSchema("T", "dtype", required=True)])
    problems = _check(schema, ["a", "b"], ["product"], {"T": value})
    assert (problems == []) == ok


@pytest.mark.parametrize("type_, good, bad", [
    ("int", [3, np.int32(2)], [True, 1.5, "3"]),
    ("float", [1.5, 2, np.float32(1)], ["1.0", False]),
    ("string", ["x", b"x"], [1]),
    ("bool", [True, np.bool_(False)], [1, "true"]),
    ("ints", [[1, 2], (), np.array([1, 2])], [1, [1.5], "12", [[1]]]),
    ("floats", [[1.0, 2]], [[None]]),
    ("strings", [["a"]], ["a", [1]]),
    ("shape", [[1, None, "batch", -1]], [[1.5], 3]),
    ("tensor", [np.zeros(3), [[1, 2]], 1.0], ["x", {"a": 1}]),
])
def test_attribute_type_checks(type_, good, bad):
    """Each attribute type accepts its values and rejects others."""
    schema = OpSchema("Op", attrs=[AttrSchema("a", type_)])
    for value in good:
        assert _check(schema, [], [], {"a": value}) == [], value
    for value in bad:
        assert len(_check(schema, [], [], {"a": value})) == 1, value


def test_op_type_mismatch_and_none_attrs():
    """A schema of another type is reported; None counts as an unset attribute."""
    schema = OpSchema("Relu", inputs=["X"], outputs=["Y"],
                      attrs=[AttrSchema("alpha", "float", required=True)])
    problems = _check(schema, ["X"], ["Y"], {"alpha": None}, op_type="LeakyRelu")
    assert len(problems) == 2
    assert "'Relu'" in str(problems[0]) and "required attribute 'alpha'" in str(problems[1])
    assert _check(OpSchema("Op", inputs=[PortSchema("x", optional=True, variadic=True)]),
                  [], [], {}) == []


def test_validate_reports_on_amanda_core_ops():
    """validate checks amanda's own amanda/core variable ops against their schemas and reports
    (not raises) what does not fit."""
    import amanda
    from amanda import Container, op

    good = Container("G", "g", outputs=["v"], attrs={"namespace": "amanda/core"}, children=[
        op("Variable", "w", outputs=["ref"], attrs={"value": np.float32(1), "shared_name": "w"}),
        op("AssignAdd", "inc", inputs=["ref", "delta"], outputs=["value"]),
        op("Constant", "one", outputs=["output"], attrs={"value": np.float32(2), "namespace": "amanda/onnx/17"})],
        edges=[("w:ref", "inc:ref"), ("one:output", "inc:delta"), ("inc:value", "g:v")])
    assert amanda.validate(good) == []
    bad = Container("G", "g", attrs={"namespace": "amanda/core"}, children=[
        op("Read", "r", inputs=["reference"], outputs=["value"]), op("Varable", "v", outputs=["ref"])])
    text = [str(p) for p in amanda.validate(bad)]
    assert any("at r: expected an input port of Read (ref)" in t for t in text)
    assert any("at v: expected an op type of namespace amanda/core" in t and "Variable" in t for t in text)


@pytest.mark.parametrize("kwargs", [{"unknown_namespace": "ignore"}, {"unknown_namespace": ["raise"]},
                                    {"ignore": "namespace"}, {"ignore": [1]}])
def test_validate_checks_its_arguments(kwargs):
    """Bad options and a container that is not one raise ArgumentError saying what was expected."""
    import amanda
    from amanda.errors import ArgumentError

    with pytest.raises(ArgumentError, match="expected"):
        amanda.validate(amanda.op("Relu", "r"), **kwargs)
    with pytest.raises(ArgumentError, match="expected a Container"):
        amanda.validate(None)
