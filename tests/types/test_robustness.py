"""No op, however ill-formed its inputs and attributes, makes inference or checking raise."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import amanda
from amanda.types import TensorType, check, infer_types
from amanda.types.rules import rule_op_types

NS = {"namespace": "amanda/onnx/17"}
DIMS = st.one_of(st.integers(0, 4), st.sampled_from(["n", "m"]), st.none())
TENSORS = st.builds(
    TensorType,
    st.sampled_from(["float32", "int64", "bool", "int32", None]),
    st.one_of(st.none(), st.lists(DIMS, max_size=4)),
)
INTS = st.lists(st.integers(-5, 5), max_size=6)
ATTRS = st.fixed_dictionaries({}, optional={
    "axis": st.integers(-6, 6), "axes": INTS, "perm": INTS, "keepdims": st.integers(0, 1),
    "to": st.integers(0, 30), "kernel_shape": INTS, "pads": INTS, "strides": INTS,
    "split": INTS, "group": st.integers(0, 3), "equation": st.sampled_from(["ij,jk->ik", "i,i", "...ii->...i", "x"]),
    "shape": INTS, "starts": INTS, "ends": INTS, "blocksize": st.integers(0, 3),
    "value": st.sampled_from([np.array([1, 2], np.int64), np.float32(1.0)]),
    "num_scan_inputs": st.integers(0, 3), "auto_pad": st.sampled_from(["SAME_UPPER", "VALID", "NOTSET", "bad"]),
})


@settings(max_examples=300)
@given(st.sampled_from(rule_op_types()), st.lists(TENSORS, max_size=4), ATTRS, st.integers(1, 3))
def test_any_op_with_any_inputs_is_checked_without_raising(op_type, inputs, attrs, n_out):
    """Inference gives a type (or None) for every output, and check returns problems, never raises."""
    ports = [amanda.Port(f"x{i}", attrs={"dtype": t.dtype, "shape": t.shape}) for i, t in enumerate(inputs)]
    op = amanda.op(op_type, "op", inputs=[f"input_{i}" for i in range(len(inputs))],
                   outputs=[f"output_{j}" for j in range(n_out)], attrs=attrs)
    g = amanda.Container(None, "g", inputs=ports, outputs=["y"], children=[op], attrs=NS,
                         edges=[(f"g:x{i}", f"op:input_{i}") for i in range(len(inputs))] + [("op:output_0", "g:y")])
    types = infer_types(g)
    assert len([types.output(("op",), f"output_{j}") for j in range(n_out)]) == n_out
    problems = check(g)
    assert all(p.path == ("op",) for p in problems)


@given(st.sampled_from([{"shape": "abc"}, {"shape": 5}, {"dtype": 3.5}, {"type": [1]},
                        {"type": {"tensor": "x"}}, {"dtype": "float32", "shape": [1.5]}]))
def test_malformed_port_types_are_problems(attrs):
    """A port attribute that is not a type is reported by check, and by infer_types the same way."""
    relu = amanda.op("Relu", "r", inputs=["X"], outputs=[amanda.Port("Y", attrs=attrs)])
    g = amanda.Container(None, "g", inputs=[amanda.Port("x", attrs={"dtype": "float32"})], outputs=["y"], children=[relu],
                         attrs=NS, edges=[("g:x", "r:X"), ("r:Y", "g:y")])
    assert [p.path for p in check(g)] == [("r",)]
    bad_input = amanda.Container(None, "g", inputs=[amanda.Port("x", attrs=attrs)], outputs=["y"],
                                 children=[amanda.op("Relu", "r", inputs=["X"], outputs=["Y"])], attrs=NS,
                                 edges=[("g:x", "r:X"), ("r:Y", "g:y")])
    assert len(check(bad_input)) == 1
    reported = infer_types(bad_input).problems
    assert [str(p) for p in reported] == [str(p) for p in check(bad_input)]
    assert "input port 'x'" in str(reported[0])
