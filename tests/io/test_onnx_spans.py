"""Weights read from a model file are views of the file's bytes, not copies (amanda.io.onnx.spans)."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import helper, numpy_helper

import amanda
from amanda.errors import FormatError
from amanda.io.onnx import from_onnx
from amanda.io.onnx.spans import raw_spans, spans_pay


def _model(weights: dict[str, np.ndarray]) -> onnx.ModelProto:
    inits = [numpy_helper.from_array(w, name) for name, w in weights.items()]
    nodes = [helper.make_node("Add", [name, name], [f"{name}2"], name=f"add_{name}") for name in weights]
    outs = [helper.make_tensor_value_info(f"{name}2", onnx.TensorProto.FLOAT, None) for name in weights]
    graph = helper.make_graph(nodes, "g", [], outs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _owner(array: np.ndarray) -> object:
    base: object = array
    while isinstance(base, np.ndarray):
        base = base.base
    return base


WEIGHTS = {"a": np.arange(1024, dtype=np.float32).reshape(32, 32),
           "b": np.linspace(-1, 1, 3000).astype(np.float32), "c": np.arange(7, dtype=np.float32)}


def test_weights_are_views_of_the_file_bytes(tmp_path):
    """Each weight has numpy's values, and its memory is the file's bytes (one object, the size
    of the file), not a copy per weight; the container equals the one built from the proto."""
    path = tmp_path / "m.onnx"
    onnx.save(_model(WEIGHTS), path)
    loaded = amanda.load(path, hierarchy=False)
    for name, expected in WEIGHTS.items():
        value = loaded.child(name).attrs["value"]
        np.testing.assert_array_equal(value, expected)
        assert not value.flags.writeable
        owner = _owner(value)
        assert type(owner) is bytes and len(owner) == path.stat().st_size
    assert loaded == from_onnx(onnx.load(str(path)))


def test_spans_point_at_each_initializers_raw_data():
    """raw_spans gives, in order, the offset and length of every initializer's raw_data."""
    model = _model(WEIGHTS)
    data = model.SerializeToString()
    spans = raw_spans(data)
    assert spans is not None and len(spans) == len(WEIGHTS)
    for (offset, length), tensor in zip(spans, model.graph.initializer):
        assert data[offset:offset + length] == tensor.raw_data


def test_a_graph_in_two_pieces_is_read_from_the_parsed_message(tmp_path):
    """A graph field given twice is merged by the parser; the walk gives up and the weights are
    read from the message, with the same values."""
    model = _model(WEIGHTS)
    extra = onnx.GraphProto(doc_string="second piece").SerializeToString()
    data = model.SerializeToString() + bytes([0x3A, len(extra)]) + extra
    assert raw_spans(data) is None
    path = tmp_path / "two.onnx"
    path.write_bytes(data)
    loaded = amanda.load(path, hierarchy=False)
    np.testing.assert_array_equal(loaded.child("b").attrs["value"], WEIGHTS["b"])
    assert loaded.attrs["onnx"]["graph_doc_string"] == "second piece"


def test_bytes_that_are_not_a_message_give_no_spans():
    """A truncated or malformed buffer gives None, never an exception."""
    data = _model(WEIGHTS).SerializeToString()
    assert raw_spans(data[: len(data) // 2]) is None
    assert raw_spans(b"\xff\xff\xff") is None
    assert raw_spans(b"\x3b") is None  # a group, which ONNX never uses


def test_a_tensor_whose_bytes_do_not_fit_its_dims_is_still_refused(tmp_path):
    """A span whose length is not what dtype and dims call for is not viewed: the tensor is read
    as before and refused with a FormatError naming it."""
    model = _model({"w": np.zeros((64, 64), np.float32)})
    model.graph.initializer[0].dims[:] = [64, 65]
    path = tmp_path / "bad.onnx"
    path.write_bytes(model.SerializeToString())
    with pytest.raises(FormatError, match="'w'"):
        amanda.load(path, hierarchy=False)


def test_spans_are_looked_for_only_where_weights_outweigh_the_walk():
    """Walking past many small ops to find few weight bytes costs more than copying them."""
    assert spans_pay(10**6, 100)
    assert not spans_pay(10_000, 7000)


def test_weights_in_external_files_do_not_call_for_the_walk(tmp_path, monkeypatch):
    """Weights kept in a data file are not in the model file's bytes: a model whose weights all
    lie there is read without walking its bytes, and its weights stay in their file."""
    import amanda.io.onnx.importer as importer

    model = _model({"a": np.ones((64, 64), np.float32)})
    onnx.save(model, tmp_path / "m.onnx", save_as_external_data=True, all_tensors_to_one_file=True,
              location="m.data", size_threshold=0)

    def walked(data: bytes) -> None:
        raise AssertionError("the model's bytes were walked")

    monkeypatch.setattr(importer, "raw_spans", walked)
    loaded = amanda.load(tmp_path / "m.onnx", hierarchy=False)
    np.testing.assert_array_equal(loaded.child("a").attrs["value"], np.ones((64, 64), np.float32))
    assert type(loaded.child("a")._attrs["value"]).__name__ == "LazyTensor"


def _length(n: int) -> bytes:
    """``n`` as a protobuf varint."""
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes(out + bytes([n]))


def test_a_walk_told_the_count_stops_at_the_last_initializer():
    """Given how many initializers the parsed graph holds, the walk gives the same spans and
    reads nothing past the last one (here a field after it that is not well formed, which the
    full walk refuses)."""
    model = _model(WEIGHTS)
    graph = model.graph.SerializeToString() + b"\x3b"  # a group (never used by ONNX) after every initializer
    data = b"\x08\x08" + b"\x3a" + _length(len(graph)) + graph  # ir_version 8, then the graph
    assert raw_spans(data) is None
    spans = raw_spans(data, len(WEIGHTS))
    assert spans is not None and len(spans) == len(WEIGHTS)
    for (offset, length), tensor in zip(spans, model.graph.initializer):
        assert data[offset:offset + length] == tensor.raw_data
    assert raw_spans(data, 0) == []
