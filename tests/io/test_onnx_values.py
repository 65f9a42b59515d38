"""The ONNX conversion helpers: tensors, types, attributes, port names and namespaces."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

onnx = pytest.importorskip("onnx")
from onnx import AttributeProto, TensorProto, helper, numpy_helper

from amanda import Container, FormatError, op
from amanda.io.onnx.attrs import attr_to_value, fill_attr, infer_attr_type, value_to_attr
from amanda.io.onnx.ports import (
    Schemas,
    domain_of_namespace,
    namespace_of_domain,
    port_names,
    port_positions,
)
from amanda.io.onnx.values import (
    DTYPE_NAMES,
    ELEM_TYPES,
    array_to_tensor,
    attrs_to_type,
    require_onnx,
    sparse_to_value,
    tensor_to_array,
    type_to_attrs,
    type_to_value,
    value_to_sparse,
    value_to_type,
)
from amanda.namespaces import namespace

NUMERIC = [
    "float32",
    "float64",
    "float16",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "bool",
    "complex64",
    "complex128",
]


@given(st.sampled_from(NUMERIC), st.lists(st.integers(0, 3), max_size=3), st.integers(0, 1000))
def test_arrays_round_trip_through_tensors(dtype, shape, seed):
    """array -> TensorProto -> array keeps dtype, shape and every value, and agrees with numpy_helper."""
    array = (np.random.default_rng(seed).standard_normal(shape) * 50).astype(dtype)
    tensor = array_to_tensor(array, "t")
    back = tensor_to_array(tensor)
    assert back.dtype == array.dtype and back.shape == array.shape and not back.flags.writeable
    assert np.array_equal(back, array, equal_nan=array.dtype.kind in "fc")
    assert np.array_equal(numpy_helper.to_array(tensor), array, equal_nan=array.dtype.kind in "fc")


def test_typed_data_fields_strings_and_exotic_dtypes():
    """Tensors stored in typed fields, string tensors and ml_dtypes tensors are read and written."""
    typed = helper.make_tensor("t", TensorProto.INT64, [2, 2], [1, 2, 3, 4])  # int64_data, not raw
    assert tensor_to_array(typed).tolist() == [[1, 2], [3, 4]]
    strings = array_to_tensor(np.array(["é", "b"]), "s")
    assert strings.data_type == TensorProto.STRING and list(strings.string_data) == [
        "é".encode(),
        b"b",
    ]
    assert tensor_to_array(strings).tolist() == ["é".encode(), b"b"]
    bf16 = tensor_to_array(helper.make_tensor("b", TensorProto.BFLOAT16, [2], [1.5, -2.0]))
    assert bf16.dtype.name == "bfloat16"
    again = array_to_tensor(bf16, "b")
    assert again.data_type == TensorProto.BFLOAT16 and tensor_to_array(again).astype(
        np.float32
    ).tolist() == [1.5, -2.0]
    assert (
        DTYPE_NAMES[TensorProto.FLOAT] == "float32" and ELEM_TYPES["string"] == TensorProto.STRING
    )
    broken = helper.make_tensor("x", TensorProto.FLOAT, [3], [1.0, 2.0, 3.0])
    broken.ClearField("float_data")
    broken.raw_data = b"\x00" * 5
    with pytest.raises(FormatError, match="tensor 'x' cannot be read"):
        tensor_to_array(broken)


def test_sparse_tensors_round_trip():
    """``{values, indices, dims}`` <-> SparseTensorProto."""
    value = {
        "values": np.array([1.0, 2.0], np.float32),
        "indices": np.array([0, 5], np.int64),
        "dims": (2, 3),
    }
    proto = value_to_sparse(value, "sp")
    assert proto.values.name == "sp" and list(proto.dims) == [2, 3]
    back = sparse_to_value(proto)
    assert (
        back["dims"] == (2, 3)
        and back["indices"].tolist() == [0, 5]
        and back["values"].tolist() == [1, 2]
    )
    with pytest.raises(FormatError):
        value_to_sparse({"values": np.ones(1)})


TYPES = [
    helper.make_tensor_type_proto(TensorProto.FLOAT, ["n", 3, None]),
    helper.make_tensor_type_proto(TensorProto.INT64, []),
    helper.make_tensor_type_proto(TensorProto.INT64, None),
    helper.make_sequence_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, [2])),
    helper.make_optional_type_proto(helper.make_tensor_type_proto(TensorProto.BOOL, [])),
    helper.make_map_type_proto(
        TensorProto.STRING, helper.make_tensor_type_proto(TensorProto.FLOAT, [])
    ),
    helper.make_sparse_tensor_type_proto(TensorProto.FLOAT, [4, 4]),
]


@pytest.mark.parametrize("proto", TYPES, ids=lambda t: t.WhichOneof("value"))
def test_types_round_trip(proto):
    """TypeProto -> nested mapping -> TypeProto is the identity, and ports hold the same types."""
    value = type_to_value(proto)
    assert value_to_type(value) == proto
    info = onnx.ValueInfoProto(name="v", type=proto, doc_string="doc")
    attrs = type_to_attrs(info)
    assert attrs["doc_string"] == "doc"
    assert attrs_to_type(attrs) == proto


def test_tensor_types_become_dtype_and_shape():
    """A tensor value's type is ``dtype`` and ``shape`` (symbolic dims as names, unknown as None)."""
    info = helper.make_tensor_value_info("x", TensorProto.FLOAT16, ["b", 3, None])
    assert type_to_attrs(info) == {"dtype": "float16", "shape": ("b", 3, None)}
    assert attrs_to_type({"dtype": "float16", "shape": ("b", 3, None)}) == info.type
    assert attrs_to_type({}) is None
    assert type_to_attrs(onnx.ValueInfoProto(name="untyped")) == {}
    with pytest.raises(FormatError, match="unknown tensor dtype"):
        attrs_to_type({"dtype": "float99"})


SAMPLES = [
    ("f", 0.1, "float"),
    ("i", -3, "int"),
    ("s", "text", "string"),
    ("b", b"\xff", "string"),
    ("fs", (0.5, 1.25), "floats"),
    ("is", (1, 2, 3), "ints"),
    ("ss", ("a", "b"), "strings"),
    ("t", np.arange(3, dtype=np.int16), "tensor"),
    ("ts", (np.ones(2, np.float32),), "tensors"),
    (
        "sp",
        {"values": np.ones(1, np.float32), "indices": np.zeros(1, np.int64), "dims": (2,)},
        "sparse_tensor",
    ),
    ("tp", {"tensor": {"dtype": "float32", "shape": (1,)}}, "type_proto"),
    ("tps", ({"sequence": {"tensor": {"dtype": "int64"}}},), "type_protos"),
    ("e", (), "ints"),
]


@pytest.mark.parametrize("name,value,kind", SAMPLES, ids=[s[0] for s in SAMPLES])
def test_attributes_round_trip(name, value, kind):
    """value -> AttributeProto -> value keeps the value and picks the type the value implies."""
    assert infer_attr_type(value) == kind
    attr = value_to_attr(name, value, None)
    back, back_kind = attr_to_value(attr)
    assert back_kind == kind
    if isinstance(value, np.ndarray):
        assert back.dtype == value.dtype and np.array_equal(back, value)
    elif kind in ("tensors", "sparse_tensor"):
        assert str(back) == str(value)
    else:
        assert back == value


def test_graph_attributes_use_the_converters():
    """GRAPH and GRAPHS attributes go through the given graph converters both ways."""
    body = op("Relu", "r")
    made = []
    attr = value_to_attr(
        "g", body, None, lambda c, label: made.append(label) or onnx.GraphProto(name=c.name)
    )
    assert attr.g.name == "r" and made == ["g"]
    seen = []
    value, kind = attr_to_value(attr, lambda g, label: seen.append((g.name, label)) or body)
    assert value is body and kind == "graph" and seen == [("r", "g")]
    attrs = value_to_attr(
        "gs", (body, body), "graphs", lambda c, label: onnx.GraphProto(name=label)
    )
    assert [g.name for g in attrs.graphs] == ["gs[0]", "gs[1]"]
    with pytest.raises(FormatError, match="needs a graph converter"):
        attr_to_value(attr)


def test_schema_types_coerce_and_mismatches_raise():
    """A schema's attribute type coerces Python values; values that do not fit raise TypeError."""
    target = AttributeProto()
    fill_attr(target, "alpha", 1, "float")
    assert target.type == AttributeProto.FLOAT and target.f == 1.0
    target = AttributeProto()
    fill_attr(target, "axes", np.array([0, 2]), "ints")
    assert list(target.ints) == [0, 2]
    for kind, bad in (
        ("int", 1.5),
        ("int", "x"),
        ("float", "x"),
        ("ints", 3),
        ("graph", 1),
        ("nonsense", 1),
    ):
        with pytest.raises(TypeError):
            fill_attr(AttributeProto(), "a", bad, kind)
    assert infer_attr_type(True) == "int" and infer_attr_type((1, 2.5)) == "floats"
    assert infer_attr_type((1, "a")) is None and infer_attr_type(Container(None, "c")) == "graph"
    with pytest.raises(TypeError, match="cannot tell"):
        value_to_attr("x", object(), None)
    old = AttributeProto(name="legacy", i=4)  # written without a type, as old exporters did
    assert attr_to_value(old) == (4, "int")


def test_port_names_and_positions_are_inverse():
    """Formal names, numbered variadic values, positional names without a schema, and back."""
    concat, clip = (
        namespace("amanda/onnx/17").schema("Concat"),
        namespace("amanda/onnx/17").schema("Clip"),
    )
    assert port_names(clip.inputs, 3, "input") == ("input", "min", "max")
    assert port_names(clip.inputs, 4, "input") == ("input", "min", "max", "input_3")
    assert port_names(None, 2, "output") == ("output_0", "output_1")
    for ports, count in ((concat.inputs, 3), (clip.inputs, 3), (clip.inputs, 4), (None, 2)):
        names = port_names(ports, count, "input")
        assert port_positions(ports, list(names), "input") == list(range(count))
    assert port_positions(clip.inputs, ["max", "input"], "input") == [2, 0]
    assert port_positions(concat.inputs, ["a", "b"], "input") == [
        0,
        1,
    ]  # any name is a variadic value
    assert port_positions(clip.inputs, ["input", "bogus"], "input") == [
        0,
        1,
    ]  # unplaceable: declared order
    assert port_positions(None, ["x", "y"], "input") == [0, 1]


def test_namespaces_and_domains():
    """Opset imports map to namespace names and back; an unknown name has no schemas."""
    assert namespace_of_domain("", 17) == "amanda/onnx/17" == namespace_of_domain("ai.onnx", 17)
    assert namespace_of_domain("ai.onnx.ml", 3) == "amanda/onnx-ml/3"
    assert namespace_of_domain("com.microsoft", 1) == "amanda/onnx/com.microsoft/1"
    for name, found in (
        ("amanda/onnx/17", ("", 17)),
        ("amanda/onnx-ml/3", ("ai.onnx.ml", 3)),
        ("amanda/onnx/com.microsoft/1", ("com.microsoft", 1)),
        ("amanda/tensorflow/1.13.1", None),
    ):
        assert domain_of_namespace(name) == found
    schemas = Schemas()
    assert schemas.get("amanda/onnx/17", "Relu").input_names == ("X",)
    assert schemas.get("amanda/onnx/17", "NoSuchOp") is None
    assert schemas.get("amanda/onnx/com.microsoft/1", "Attention") is None
    assert schemas.get(None, "Relu") is None


def test_require_onnx_returns_the_module():
    """With onnx installed, ``require_onnx`` returns it."""
    assert require_onnx() is onnx


def test_metadata_entries_and_their_errors():
    """uids and extra attributes go into metadata_props and come back; foreign JSON is refused."""
    from amanda.io.onnx.metadata import read_metadata, write_metadata

    node = onnx.NodeProto()
    write_metadata(
        node.metadata_props, {"k": 1}, "u", {"shape": (1, 2), "w": np.ones(2, np.float32)}
    )
    plain, extra, uid = read_metadata(node.metadata_props)
    assert plain == {"k": "1"} and uid == "u" and extra["shape"] == [1, 2]
    assert extra["w"].dtype == np.float32
    node.metadata_props.add(key="amanda.attr.bad", value="{not json")
    with pytest.raises(FormatError, match="'amanda.attr.bad' is not an amanda attribute"):
        read_metadata(node.metadata_props)
    with pytest.raises(FormatError, match="cannot be kept in ONNX metadata"):
        write_metadata(onnx.NodeProto().metadata_props, None, None, {"x": object()})


def test_value_names_are_unique_through_enclosing_graphs():
    """``Names.claim`` suffixes a name taken here or in any enclosing graph; siblings may reuse."""
    from amanda.io.onnx.write_graph import Names, is_initializer, where_of

    outer = Names()
    assert outer.claim("x") == "x" and outer.claim("x") == "x_1"
    inner, sibling = Names(outer), Names(outer)
    assert inner.claim("x") == "x_2" and inner.claim("y") == "y" and sibling.claim("y") == "y"
    assert where_of(("a", "b")) == "a/b" and where_of(()) == "<root>"
    init = op("Constant", "c", outputs=["output"], attrs={"value": np.ones(1), "initializer": True})
    assert is_initializer(init) and not is_initializer(
        op("Constant", "d", attrs={"value": np.ones(1)})
    )


def test_scopes_capture_outer_values_once():
    """A ``Scope`` resolves its own values, captures an enclosing graph's once, and knows no others."""
    from amanda import SELF, Endpoint
    from amanda.io.onnx.read_graph import Scope

    outer = Scope(None)
    outer.values["w"] = Endpoint(("w",), "output")
    inner = Scope(outer)
    inner.values["x"] = Endpoint(SELF, "x")
    assert inner.get("x") == Endpoint(SELF, "x")
    assert inner.get("w") == Endpoint(SELF, "w") and inner.get("w") == Endpoint(SELF, "w")
    assert inner.captured == ["w"] and inner.get("ghost") is None and outer.get("x") is None


def test_value_info_entries_sharing_a_type_each_read_as_type_to_attrs_reads_them():
    """value_info read once per distinct type (amanda.io.onnx.value_info) gives each entry what
    ``type_to_attrs`` gives it alone: shared types, doc strings, metadata, other kinds of type,
    and entries amanda's export marked inferred left out."""
    from amanda.io.onnx.value_info import read_value_types

    entries = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["n", 4]) for n in ("a", "b", "c")]
    entries[1].doc_string = "second"
    entries.append(helper.make_tensor_value_info("d", TensorProto.FLOAT, ["n", 5]))
    entries.append(helper.make_tensor_value_info("e", TensorProto.INT64, ["n", 4]))
    entries.append(helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, [2]))
    entries[2].metadata_props.add(key="k", value="v")
    inferred = helper.make_tensor_value_info("f", TensorProto.FLOAT, ["n", 4])
    inferred.metadata_props.add(key="amanda_inferred", value="true")
    general: list[str] = []

    def read(vi):  # the caller's general path
        general.append(vi.name)
        return type_to_attrs(vi)

    types = read_value_types([*entries, inferred], read)
    assert types == {vi.name: type_to_attrs(vi) for vi in entries}
    assert types["b"]["doc_string"] == "second" and "doc_string" not in types["a"]
    assert types["d"]["shape"] == ("n", 5) and types["e"]["dtype"] == "int64"
    assert general == ["s"]  # only the sequence type goes the general way
