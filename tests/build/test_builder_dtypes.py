"""The op builder checks input dtypes against the schema's type constraints: on a sample of ops
and dtypes, what it refuses onnxruntime refuses as an invalid model, and what it accepts
onnxruntime runs (where onnxruntime has a kernel for it). The onnxruntime models are written
with onnx.helper, independently of amanda."""

from __future__ import annotations

import numpy as np
import pytest

import amanda
from amanda import ops
from amanda.errors import ArgumentError

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

DTYPES = {"float32": TensorProto.FLOAT, "float64": TensorProto.DOUBLE, "float16": TensorProto.FLOAT16,
          "int32": TensorProto.INT32, "int64": TensorProto.INT64, "int8": TensorProto.INT8,
          "uint8": TensorProto.UINT8, "bool": TensorProto.BOOL, "complex64": TensorProto.COMPLEX64}
UNARY = ["Relu", "Abs", "Neg", "Sigmoid", "Exp", "Sqrt", "Not", "Floor", "Sign", "Identity"]
BINARY = ["Add", "Mul", "Sub", "Div", "And", "Max", "Equal", "Less", "MatMul", "Pow"]
# what this onnxruntime has no kernel or no type for: a valid model it cannot run
GAPS = {("Relu", "int64"), ("Identity", "complex64")}


def _oracles(op_type: str, dtypes: list[str], shapes: list[tuple]) -> tuple[bool, bool]:
    """Whether onnx's strict type check accepts a one-node model, and whether onnxruntime runs it."""
    names = [f"x{i}" for i in range(len(dtypes))]
    inputs = [helper.make_tensor_value_info(n, DTYPES[d], list(s)) for n, d, s in zip(names, dtypes, shapes)]
    graph = helper.make_graph([helper.make_node(op_type, names, ["y"])], "g", inputs, [onnx.ValueInfoProto(name="y")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    try:
        onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
        valid = True
    except onnx.shape_inference.InferenceError:
        valid = False
    try:
        session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        session.run(None, {n: _array(d, s) for n, d, s in zip(names, dtypes, shapes)})
    except Exception:  # noqa: BLE001 - any other refusal of onnxruntime's (InvalidGraph, NotImplemented ...)
        return valid, False
    return valid, True


def _array(dtype: str, shape: tuple) -> np.ndarray:
    if dtype == "int64" and shape in ((2,), (2, 1), (1, 2)):
        return np.full(shape, 2, np.int64)
    return np.ones(shape, dtype=np.dtype(dtype))


def _builder(op_type: str, dtypes: list[str], shapes: list[tuple]) -> bool:
    values = [amanda.Input(f"x{i}", d, s) for i, (d, s) in enumerate(zip(dtypes, shapes))]
    try:
        getattr(ops, op_type)(*values)
    except ArgumentError:
        return False
    return True


CASES = [(op, [d], [(2, 2)]) for op in UNARY for d in DTYPES]
CASES += [(op, [d, d], [(2, 2), (2, 2)]) for op in BINARY for d in DTYPES]
CASES += [("Add", ["float32", "float64"], [(2, 2), (2, 2)]), ("Where", ["bool", "float32", "float32"], [(2, 2)] * 3),
          ("Where", ["int64", "float32", "float32"], [(2, 2)] * 3)]
CASES += [("Reshape", ["float32", d], [(2, 2), (2,)]) for d in ("int64", "int32", "float32")]
CASES += [("Reshape", ["float32", "int64"], [(2, 2), (2, 1)]), ("Expand", ["float32", "int64"], [(2, 2), (1, 2)])]


@pytest.mark.parametrize("op_type, dtypes, shapes", CASES, ids=[f"{c[0]}-{'-'.join(c[1])}" for c in CASES])
def test_the_builder_refuses_what_onnxruntime_refuses(op_type, dtypes, shapes):
    """Refused by the builder exactly when onnx's strict type check refuses the model, and then
    onnxruntime refuses it too; accepted ones onnxruntime runs, but for its kernel gaps."""
    accepted = _builder(op_type, dtypes, shapes)
    valid, runs = _oracles(op_type, dtypes, shapes)
    assert accepted == valid
    if not accepted:
        assert not runs
    elif (op_type, dtypes[0]) not in GAPS:
        assert runs


def test_the_sample_has_both_answers():
    """The sample is not one-sided: the builder accepts and refuses many cases each."""
    answers = [_builder(*case) for case in CASES]
    assert sum(answers) > 60 and answers.count(False) > 40


def test_a_refusal_names_the_allowed_dtypes_and_the_type_parameter():
    """``ops.Relu`` of a bool names the port, the dtypes the schema allows and its type parameter."""
    with pytest.raises(ArgumentError) as info:
        ops.Relu(amanda.Input("x", "bool", (2,)), name="act")
    message = str(info.value)
    assert info.value.path == ("act",) and "input X" in message and "float32" in message and "(type T)" in message
    with pytest.raises(ArgumentError, match="int64"):
        ops.Reshape(amanda.Input("x", "float32", (4,)), np.array([2.0, 2.0], np.float32))


def test_validate_reports_what_the_builder_refuses_in_a_loaded_model():
    """A model read as data with Relu on a bool input gets the same problem from validate and
    infer_types as the builder's error."""
    g = amanda.Container(None, "g", attrs={"namespace": "amanda/onnx/17"},
                         inputs=[amanda.Port("x", attrs={"dtype": "bool", "shape": [2]})], outputs=["y"],
                         children=[amanda.op("Relu", "act", ["X"], ["Y"])], edges=[("g:x", "act:X"), ("act:Y", "g:y")])
    problems = amanda.validate(g)
    assert [p.path for p in problems] == [("act",)] and problems[0].found == "bool"
    assert [str(p) for p in amanda.infer_types(g).problems] == [str(p) for p in problems]
    with pytest.raises(ArgumentError) as info:
        ops.Relu(amanda.Input("x", "bool", (2,)), name="act")
    assert info.value.expected == problems[0].expected
