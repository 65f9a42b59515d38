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
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2]),
                               helper.make_tensor_value_info("c", TensorProto.STRING, [])],
                              doc_string="GRAPHD")
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10,
                              doc_string="MODELD", producer_name="PRODUC")
    helper.set_model_props(model, {"author": "METAVL"})
    return model.SerializeToString()


def patched(marker: bytes) -> onnx.ModelProto:
    """The model with ``marker`` (6 bytes, so every length prefix stays right) made invalid UTF-8."""
    data = model_bytes()
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
])
def test_text_fields_that_are_not_utf8_are_a_format_error(marker, field):
    """A graph name, node name, doc string, producer or metadata value that is not UTF-8 raises FormatError naming it."""
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
