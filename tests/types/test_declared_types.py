"""Declared types: a dtype name is exact (ambiguous and misspelt names are refused with the list
of names), dims are >= 0, and infer_types reports a malformed declared type on any port exactly
as validate does."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import amanda
from amanda.errors import ArgumentError
from amanda.types.tensor_type import VALID_DTYPES, dtype_problem

NS = {"namespace": "amanda/onnx/17"}


@pytest.mark.parametrize("name", ["float", "int", float, int])
def test_input_refuses_ambiguous_dtype_names_with_the_list(name):
    """``Input(..., 'float')`` is an ArgumentError naming the choice and listing the names,
    instead of silently becoming float64."""
    with pytest.raises(ArgumentError) as info:
        amanda.Input("x", name, (2,))
    message = str(info.value)
    assert "ambiguous" in message and "float32" in message and "int64" in message
    assert info.value.path == ("x", "dtype")


@pytest.mark.parametrize("name, fix", [("double", "'float64'"), ("f4", "'float32'"), ("boolean", "'bool'")])
def test_input_names_the_spelling_amanda_uses(name, fix):
    """Other spellings numpy knows, and misspellings, say which name to write."""
    with pytest.raises(ArgumentError, match=fix):
        amanda.Input("x", name)


@pytest.mark.parametrize("dtype", [*VALID_DTYPES[:6], np.float32, np.dtype("int64"), bool])
def test_exact_names_and_numpy_dtypes_are_accepted(dtype):
    """Every listed name, numpy dtypes and scalar types are dtypes."""
    assert dtype_problem(dtype) is None
    assert amanda.Input("x", dtype, ()).type.dtype in VALID_DTYPES


def _relu(where: str, attrs: dict) -> amanda.Container:
    return amanda.Container(
        None, "g", attrs=NS,
        inputs=[amanda.Port("x", attrs=attrs if where == "input" else {"dtype": "float32"})],
        outputs=[amanda.Port("y", attrs=attrs if where == "output" else {})],
        children=[amanda.op("Relu", "r", [amanda.Port("X", attrs=attrs if where == "op input" else {})],
                            [amanda.Port("Y", attrs=attrs if where == "op output" else {})])],
        edges=[("g:x", "r:X"), ("r:Y", "g:y")])


BAD = [{"dtype": "flaot32"}, {"dtype": "float"}, {"dtype": 7}, {"dtype": "float32", "shape": [-3]},
       {"dtype": "float32", "shape": [2, -1]}, {"shape": [1.5]}, {"shape": "n"}]


@given(st.sampled_from(["input", "output", "op input", "op output"]), st.sampled_from(BAD))
def test_infer_types_reports_a_malformed_declared_type_as_validate_does(where, attrs):
    """A bad dtype or bad dims on any port is one problem of infer_types, and validate reports
    the same one; neither raises."""
    g = _relu(where, attrs)
    problems = amanda.infer_types(g).problems
    assert len(problems) == 1
    assert [str(p) for p in amanda.validate(g)] == [str(p) for p in problems]
    assert problems[0].path == (() if where in ("input", "output") else ("r",))


def test_a_declared_op_input_type_must_fit_what_arrives():
    """An op input port declaring int64 where float32 arrives is a problem at the op."""
    g = _relu("op input", {"dtype": "int64"})
    problems = amanda.infer_types(g).problems
    assert [p.path for p in problems] == [("r",)] and "int64" in problems[0].expected
    assert amanda.infer_types(_relu("op input", {"dtype": "float32", "shape": ["n"]})).output(("r",), "Y") \
        == amanda.types.TensorType("float32", ("n",))
