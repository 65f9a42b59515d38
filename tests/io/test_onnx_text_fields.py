"""Text in an ONNX file that is not UTF-8: a FormatError naming the field for text fields, kept
bytes for attribute strings (bytes in ONNX); never a UnicodeDecodeError or TypeError."""

import onnx
import pytest
from onnx import TensorProto, helper

from amanda.errors import FormatError
from amanda.io.onnx import from_onnx, load_onnx, to_onnx

BAD = b"\xff\xfe"  # never valid UTF-8


def model_bytes() -> bytes:
    """A small valid model whose every kind of text field holds a distinct 6-byte marker."""
    node = helper.make_node("Relu", ["x"], ["y"], name="NODE_N", doc_string="NODE_D")
    cast = helper.make_node("Constant", [], ["c"], name="const", value_string="ATTR_S")
    graph = helper.make_graph([node, cast], "GRAPHN", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["DIMPAR"]),
                               helper.make_tensor_value_info("c", TensorProto.STRING, [])],
                              doc_string="GRAPHD")
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10,
                              doc_string="MODELD", producer_name="PRODUC")
    helper.set_model_props(model, {"author": "METAVL"})
    return model.SerializeToString()


def patched(marker: bytes, data: bytes | None = None) -> onnx.ModelProto:
    """``data`` (default: :func:`model_bytes`) parsed with ``marker`` (6 bytes, so every length
    prefix stays right) made invalid UTF-8."""
    data = model_bytes() if data is None else data
    assert data.count(marker) == 1
    model = onnx.ModelProto()
    model.ParseFromString(data.replace(marker, marker[:2] + BAD + marker[4:]))
    return model


@pytest.mark.parametrize("marker, field", [
    (b"GRAPHN", "graph.name"),
    (b"NODE_N", "graph.node[0].name"),
    (b"NODE_D", "graph.node[0].doc_string"),
    (b"GRAPHD", "graph.doc_string"),
    (b"MODELD", "doc_string"),
    (b"PRODUC", "producer_name"),
    (b"METAVL", "metadata_props[0].value"),
    (b"DIMPAR", "graph.output[0].type.tensor_type.shape.dim[0].dim_param"),
])
def test_text_fields_that_are_not_utf8_are_a_format_error(marker, field):
    """A graph name, node name, doc string, producer, metadata value or dimension name that is not UTF-8 raises
    FormatError naming it."""
    with pytest.raises(FormatError, match=rf"m\.onnx: {field.replace('[', '.').replace(']', '.')} is not UTF-8") as info:
        from_onnx(patched(marker), source="m.onnx")
    assert info.value.path == field


def test_the_error_also_comes_from_a_file(tmp_path):
    """load_onnx of such a file raises the same FormatError, naming the file."""
    path = tmp_path / "bad.onnx"
    data = model_bytes()
    path.write_bytes(data.replace(b"NODE_N", b"NO\xff\xfe_N"))
    with pytest.raises(FormatError, match="bad.onnx: graph.node.0..name is not UTF-8"):
        load_onnx(path)


def test_attribute_strings_stay_bytes_and_are_written_back_unchanged():
    """A string attribute that is not UTF-8 imports as bytes and exports byte for byte."""
    model = patched(b"ATTR_S")
    container = from_onnx(model)
    value = container.child("const").attrs["value_string"]
    assert value == b"AT" + BAD + b"_S"
    exported = to_onnx(container)
    (const,) = [n for n in exported.graph.node if n.op_type == "Constant"]
    assert const.attribute[0].s == b"AT" + BAD + b"_S"
    assert from_onnx(exported) == container


def node_fields_model() -> bytes:
    """A model whose node-level text fields the importer checks as it reads them hold markers:
    an attribute name, a Constant's tensor name, a node metadata value, a node inside an If body."""
    const = helper.make_node("Constant", [], ["c"], name="const",
                             value=helper.make_tensor("TENSRN", TensorProto.FLOAT, [1], [1.0]))
    const.metadata_props.add(key="k", value="NMETAV")
    then, other = (helper.make_graph([helper.make_node("Identity", ["x"], ["b"], name=n)], n.lower(),
                                     [], [helper.make_tensor_value_info("b", TensorProto.FLOAT, [1])])
                   for n in ("BODYNN", "ELSENN"))
    branch = helper.make_node("If", ["cond"], ["z"], name="if", then_branch=then, else_branch=other)
    relu = helper.make_node("LeakyRelu", ["x"], ["y"], name="lrelu", alpha=0.5)
    relu.attribute[0].doc_string = "ATTRDS"
    graph = helper.make_graph(
        [const, branch, relu], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1]),
         helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1]) for n in ("c", "z", "y")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10).SerializeToString()


@pytest.mark.parametrize("marker, field", [
    (b"TENSRN", "graph.node[0].attribute[0].t.name"),
    (b"NMETAV", "graph.node[0].metadata_props[0].value"),
    (b"BODYNN", "graph.node[1].attribute[1].g.node[0].name"),  # make_node sorts else_branch first
    (b"ATTRDS", "graph.node[2].attribute[0].doc_string"),
])
def test_node_text_checked_during_the_import_is_named_like_any_other(marker, field):
    """Text the importer checks as it reads each node (tensors, metadata, bodies, attribute doc strings) fails naming the field."""
    with pytest.raises(FormatError, match="is not UTF-8") as info:
        from_onnx(patched(marker, node_fields_model()), source="m.onnx")
    assert info.value.path == field


def test_the_unmodified_node_fields_model_imports():
    """The model the node-field cases corrupt imports when its text is valid (so each case tests the text)."""
    model = onnx.ModelProto()
    model.ParseFromString(node_fields_model())
    assert from_onnx(model).child("const").attrs["metadata"] == {"k": "NMETAV"}


def test_the_fields_checked_by_name_are_every_text_field_of_the_installed_onnx():
    """The node, tensor and value_info fields the import checks by name are exactly those onnx defines (a new one
    fails here)."""
    from amanda.io.onnx.text import NODE_TEXT_FIELDS, TENSOR_TEXT_FIELDS, VALUE_INFO_TEXT_FIELDS

    def text_fields(proto):
        kinds = (proto.DESCRIPTOR.fields_by_name[n].type for n in proto.DESCRIPTOR.fields_by_name)
        return {f.name for f, k in zip(proto.DESCRIPTOR.fields, kinds) if f.type in (9, 11)}

    assert text_fields(onnx.NodeProto) - {"device_configurations"} == NODE_TEXT_FIELDS
    assert text_fields(onnx.TensorProto) == TENSOR_TEXT_FIELDS
    protos = {"ValueInfoProto": onnx.ValueInfoProto, "TypeProto": onnx.TypeProto, "TypeProto.Tensor": onnx.TypeProto.Tensor,
              "TensorShapeProto": onnx.TensorShapeProto, "TensorShapeProto.Dimension": onnx.TensorShapeProto.Dimension}
    assert {name: text_fields(proto) for name, proto in protos.items()} == VALUE_INFO_TEXT_FIELDS


def external_model(external: bool) -> bytes:
    """A model with a weight (``external``: kept in an external file, with location and key
    markers) and a node whose torch scope metadata holds a marker."""
    weight = helper.make_tensor("w", TensorProto.FLOAT, [1], [0.0])
    if external:
        weight.ClearField("float_data")
        weight.data_location = TensorProto.EXTERNAL
        weight.external_data.add(key="location", value="WLOCAT")
        weight.external_data.add(key="EXTKEY", value="0")
    node = helper.make_node("Add", ["w", "x"], ["y"], name="add")
    node.metadata_props.add(key="pkg.torch.onnx.name_scopes", value="['', 'SCOPEM', 'add']")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])], [weight])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10).SerializeToString()


@pytest.mark.parametrize("marker, field, external", [
    (b"WLOCAT", "graph.initializer[0].external_data[0].value", True),
    (b"EXTKEY", "graph.initializer[0].external_data[1].key", True),
    (b"SCOPEM", "graph.node[0].metadata_props[0].value", False),
])
def test_text_of_external_data_entries_and_scope_metadata_is_checked_at_import(marker, field, external):
    """An external data entry of a weight, or torch's scope metadata of a node (taken into the
    module tree), that is not UTF-8 fails at import naming the field, like any other text."""
    with pytest.raises(FormatError, match="is not UTF-8") as info:
        from_onnx(patched(marker, external_model(external)), source="m.onnx")
    assert info.value.path == field


def test_the_unmodified_scope_model_imports_as_a_tree():
    """The model the scope case corrupts imports, its op in the module the metadata names."""
    model = onnx.ModelProto()
    model.ParseFromString(external_model(False))
    assert from_onnx(model).child("SCOPEM").child("add").type == "Add"


def value_info_model() -> bytes:
    """A model whose value_info (main graph and an If body's), read and text-checked by the
    importer as it reads each graph, holds markers."""
    body_vi = helper.make_tensor_value_info("b", TensorProto.FLOAT, ["BODYVI"])
    then, other = (helper.make_graph([helper.make_node("Identity", ["x"], ["b"], name=n)], n, [],
                                     [helper.make_tensor_value_info("b", TensorProto.FLOAT, [1])],
                                     value_info=[body_vi] if n == "then" else [])
                   for n in ("then", "else"))
    branch = helper.make_node("If", ["cond"], ["z"], name="if", then_branch=then, else_branch=other)
    relu = helper.make_node("Relu", ["x"], ["y"], name="relu")
    graph = helper.make_graph(
        [branch, relu], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1]),
         helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1]) for n in ("z", "y")],
        value_info=[helper.make_tensor_value_info("y", TensorProto.FLOAT, ["VIDIMP"]),
                    helper.make_tensor_value_info("VINAME", TensorProto.FLOAT, [1])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10).SerializeToString()


@pytest.mark.parametrize("marker, field", [
    (b"VIDIMP", "graph.value_info[0].type.tensor_type.shape.dim[0].dim_param"),
    (b"VINAME", "graph.value_info[1].name"),
    (b"BODYVI", "graph.node[0].attribute[1].g.value_info[0].type.tensor_type.shape.dim[0].dim_param"),
])
def test_value_info_text_is_checked_as_each_graph_is_read(marker, field):
    """value_info text that is not UTF-8, in the main graph or a body, fails naming the field
    (value_info is read once, its text checked as read)."""
    with pytest.raises(FormatError, match="is not UTF-8") as info:
        from_onnx(patched(marker, value_info_model()), source="m.onnx")
    assert info.value.path == field


def test_the_unmodified_value_info_model_imports_its_types():
    """The model the value_info cases corrupt imports, the op's output typed by its value_info."""
    model = onnx.ModelProto()
    model.ParseFromString(value_info_model())
    assert from_onnx(model).child("relu").outputs[0].attrs["shape"] == ("VIDIMP",)
