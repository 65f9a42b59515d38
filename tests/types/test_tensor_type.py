"""The type vocabulary: serialized form, runtime fits, broadcasting, unification."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import amanda
from amanda.types import (
    OptionalType,
    SequenceType,
    TensorType,
    TypeMismatch,
    broadcast_shapes,
    fits,
    from_attrs,
    merge,
    to_attrs,
    unify_dims,
)
from amanda.types.tensor_type import refine

DTYPES = ["float32", "float64", "int64", "int32", "bool", "uint8", "float16", "string"]
dims = st.one_of(st.integers(0, 9), st.sampled_from(["batch", "seq", "n"]), st.none())
shapes = st.one_of(st.none(), st.lists(dims, max_size=4).map(tuple))
tensors = st.builds(TensorType, st.one_of(st.none(), st.sampled_from(DTYPES)), shapes)
types = st.recursive(tensors, lambda inner: st.one_of(st.builds(SequenceType, inner),
                                                       st.builds(OptionalType, inner)), max_leaves=3)


@given(types)
def test_port_attrs_round_trip(t):
    """Every type written to port attributes reads back equal."""
    assert from_attrs(to_attrs(t)) == t or (to_attrs(t) == {} and t == TensorType())


@given(types)
def test_yaml_json_and_port_round_trip(t):
    """A port carrying a type survives YAML and JSON documents unchanged."""
    attrs = to_attrs(t)
    ident = amanda.op("Identity", "i", inputs=["input"], outputs=["output"])
    g = amanda.Container(None, "g", inputs=[amanda.Port("x", attrs=attrs)], outputs=[amanda.Port("y")],
                         children=[ident], edges=[("g:x", "i:input"), ("i:output", "g:y")])
    for fmt in ("yaml", "json"):
        back = amanda.loads(amanda.dumps(g, format=fmt), format=fmt)
        assert from_attrs(back.inputs[0].attrs) == from_attrs(attrs)


def test_onnx_value_info_round_trip():
    """Dims given as ints, symbols and None go to ONNX value_info and come back as written."""
    pytest.importorskip("onnx")
    from amanda.io.onnx import from_onnx, to_onnx

    t = TensorType("float32", ("batch", None, 3))
    relu = amanda.op("Relu", "r", inputs=["X"], outputs=["Y"])
    g = amanda.Container(None, "g", inputs=[amanda.Port("x", attrs=to_attrs(t))], outputs=[amanda.Port("y", attrs=to_attrs(t))],
                         children=[relu], edges=[("g:x", "r:X"), ("r:Y", "g:y")],
                         attrs={"namespace": "amanda/onnx/17"})
    back = from_onnx(to_onnx(g))
    assert from_attrs(back.inputs[0].attrs) == t and from_attrs(back.outputs[0].attrs) == t


def test_equality_is_by_kind():
    """A sequence and an optional of one element type are different types."""
    e = TensorType("float32", (2,))
    assert SequenceType(e) != OptionalType(e) and hash(SequenceType(e)) == hash(SequenceType(e))
    with pytest.raises(AttributeError):
        e.dtype = "int64"  # type: ignore[misc]


def test_dtype_names_are_canonical():
    """numpy dtypes, scalar types and names all give the name port attributes use."""
    assert TensorType(np.float32).dtype == TensorType(np.dtype("float32")).dtype == "float32"
    assert TensorType(np.str_).dtype == "string"


def test_bad_dim_is_an_amanda_error():
    """A dim that is neither int, symbol nor None is reported, not a bare TypeError."""
    with pytest.raises(TypeMismatch):
        TensorType("float32", (1.5,))


@given(st.lists(st.lists(st.integers(1, 4), max_size=4), min_size=1, max_size=3))
def test_broadcast_agrees_with_numpy(shapes_):
    """On concrete shapes, broadcast_shapes gives numpy's answer or fails where numpy fails."""
    try:
        expected = np.broadcast_shapes(*map(tuple, shapes_))
    except ValueError:
        with pytest.raises(TypeMismatch):
            broadcast_shapes(*map(tuple, shapes_))
    else:
        assert broadcast_shapes(*map(tuple, shapes_)) == expected


def test_broadcast_with_symbols():
    """Symbols broadcast against 1, and an int other than 1 pins them."""
    assert broadcast_shapes(("batch", 1), (1, 4)) == ("batch", 4)
    assert broadcast_shapes(("batch",), (5,)) == (5,)
    assert broadcast_shapes(("n",), (None,)) == (None,)
    assert broadcast_shapes(("n", 2), None) is None


def test_unify_refine_merge():
    """unify picks the more precise dim; refine fails on conflicts; merge forgets differences."""
    assert unify_dims(None, "n") == "n" and unify_dims(3, "n") == 3
    with pytest.raises(TypeMismatch):
        unify_dims(3, 4)
    assert refine(TensorType("float32", None), TensorType(None, (2, "n"))) == TensorType("float32", (2, "n"))
    with pytest.raises(TypeMismatch):
        refine(TensorType("float32", (2,)), TensorType("int64", (2,)))
    with pytest.raises(TypeMismatch):
        refine(TensorType("float32", (2,)), TensorType("float32", (2, 1)))
    assert merge(TensorType("float32", (2,)), TensorType("float32", (2, 1))) == TensorType("float32", None)
    assert merge(SequenceType(TensorType("int64", (1,))), SequenceType(TensorType("int64", (2,)))) == \
        SequenceType(TensorType("int64", (None,)))


def test_fits_values():
    """fits checks dtype, rank and concrete dims, binds symbols consistently, and reads sequences."""
    x = np.zeros((3, 4), np.float32)
    assert fits(TensorType("float32", ("n", 4)), x)
    assert not fits(TensorType("float64", ("n", 4)), x)
    assert not fits(TensorType("float32", (3,)), x)
    assert not fits(TensorType("float32", ("n", "n")), x)
    assert fits(TensorType("float32", ("n", "n")), np.zeros((2, 2), np.float32))
    assert fits(SequenceType(TensorType("int64", (None,))), [np.arange(2), np.arange(5)])
    assert not fits(SequenceType(TensorType("int64", (None,))), np.arange(2))
    assert fits(OptionalType(TensorType("int64", ())), None)
    bindings: dict = {}
    assert fits(TensorType("float32", ("b", 4)), x, bindings) and bindings == {"b": 3}
    assert not fits(TensorType("float32", ("b",)), np.zeros(5, np.float32), bindings)
