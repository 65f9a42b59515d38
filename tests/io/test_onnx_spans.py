"""Weights read from a model file are views of the file's bytes, not copies (amanda.io.onnx.spans)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

onnx = pytest.importorskip("onnx")
from onnx import helper, numpy_helper

import amanda
from amanda.errors import FormatError
from amanda.io.onnx import from_onnx
from amanda.io.onnx.spans import raw_spans, spans_pay, stripped
from amanda.io.onnx.values import VIEWED_TYPES


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


def _mixed_model() -> onnx.ModelProto:
    """Initializers of every kind the stripping walk tells apart: viewed types with raw data,
    a type it does not view (bfloat16), one written as float_data, a string tensor."""
    model = _model(WEIGHTS)
    extra = [numpy_helper.from_array(np.arange(6, dtype=np.int64).reshape(2, 3), "i"),
             numpy_helper.from_array(np.ones(5, np.float16), "h"),
             helper.make_tensor("bf", onnx.TensorProto.BFLOAT16, [2], b"\x80\x3f\x00\x40", raw=True),
             helper.make_tensor("fd", onnx.TensorProto.FLOAT, [2], [3.0, 4.0]),
             helper.make_tensor("s", onnx.TensorProto.STRING, [2], [b"x", b"yz"])]
    model.graph.initializer.extend(extra)
    return model


def test_a_model_parsed_without_its_raw_data_loads_as_the_whole_one(tmp_path, monkeypatch):
    """A file parsed without its weights' raw bytes (spans.stripped: a large file) gives the
    container the whole parse gives, every weight numpy's values, the viewed ones views of the
    file's bytes."""
    import amanda.io.onnx as ox

    model = _mixed_model()
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    whole = amanda.load(path, hierarchy=False)
    data = path.read_bytes()
    small, spans = stripped(data, VIEWED_TYPES, least=0)
    parsed = onnx.ModelProto.FromString(small)
    kept = {t.name: bool(t.raw_data) for t in parsed.graph.initializer}
    assert kept == {"a": False, "b": False, "c": False, "i": False, "h": False, "bf": True, "fd": False, "s": False}
    assert [length for _, length in spans] == [4096, 12000, 28, 48, 10, 0, 0, 0]
    monkeypatch.setattr(ox, "_STRIP_FROM", 0)
    light = amanda.load(path, hierarchy=False)
    assert light == whole
    for tensor in model.graph.initializer:
        if tensor.data_type in VIEWED_TYPES:
            np.testing.assert_array_equal(light.child(tensor.name).attrs["value"], numpy_helper.to_array(tensor))
    assert light.child("s").attrs["value"].tolist() == [b"x", b"yz"]
    assert type(_owner(light.child("a").attrs["value"])) is bytes


def test_a_stripped_weight_of_the_wrong_size_is_refused_as_the_whole_parse_refuses_it(tmp_path, monkeypatch):
    """A raw_data whose length does not fit its dims fails at load with FormatError naming the
    tensor, whichever way the file is parsed."""
    import amanda.io.onnx as ox

    model = _model(WEIGHTS)
    model.graph.initializer[1].raw_data = model.graph.initializer[1].raw_data[:-4]
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    for least in (1 << 62, 0):
        monkeypatch.setattr(ox, "_STRIP_FROM", least)
        with pytest.raises(FormatError) as info:
            amanda.load(path, hierarchy=False)
        assert "'b'" in str(info.value)


def test_stripping_keeps_initializers_past_the_first_run_and_refuses_what_it_cannot_follow():
    """Initializers written after other graph fields (no serializer does) keep their raw data
    and get no span; bytes that are not a message, or too few stripped bytes, give None."""
    model = _model(WEIGHTS)
    late = numpy_helper.from_array(np.arange(4, dtype=np.float32), "late")
    graph = model.graph.SerializeToString() + b"\x2a" + _length(late.ByteSize()) + late.SerializeToString()
    data = b"\x08\x08" + b"\x3a" + _length(len(graph)) + graph
    small, spans = stripped(data, VIEWED_TYPES, least=0)
    parsed = onnx.ModelProto.FromString(small)
    assert [t.name for t in parsed.graph.initializer] == ["a", "b", "c", "late"]
    assert len(spans) == 3 and parsed.graph.initializer[3].raw_data == late.raw_data
    assert all(not t.raw_data for t in parsed.graph.initializer[:3])
    assert stripped(data, VIEWED_TYPES) is None  # 16 KB stripped: under the default 1 MiB
    assert stripped(data[: len(data) // 2], VIEWED_TYPES, least=0) is None
    assert stripped(b"\x3b", VIEWED_TYPES, least=0) is None


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["float32", "int64", "float16", "uint8", "bool"]),
                          st.lists(st.integers(0, 5), max_size=3), st.booleans()), max_size=6))
def test_stripping_any_weights_keeps_the_rest_of_the_message(specs):
    """For random initializers (viewed types, raw or typed fields, empty ones), the stripped
    bytes parse to the whole message less the raw data the spans point at, in the file."""
    inits = []
    for i, (dtype, shape, raw) in enumerate(specs):
        values = np.arange(int(np.prod(shape))).astype(dtype).reshape(shape)
        tensor = numpy_helper.from_array(values, f"w{i}")
        if not raw and dtype == "float32":
            tensor = helper.make_tensor(f"w{i}", onnx.TensorProto.FLOAT, shape, values.ravel().tolist())
        inits.append(tensor)
    graph = helper.make_graph([], "g", [], [helper.make_tensor_value_info("o", 1, None)], inits)
    data = helper.make_model(graph).SerializeToString()
    small, spans = stripped(data, VIEWED_TYPES, least=0)
    parsed, whole = onnx.ModelProto.FromString(small), onnx.ModelProto.FromString(data)
    assert len(spans) == len(inits)
    for (offset, length), kept, tensor in zip(spans, parsed.graph.initializer, whole.graph.initializer):
        assert data[offset:offset + length] == (tensor.raw_data if length else b"")
        assert kept.raw_data == (b"" if length else tensor.raw_data)
        if length:
            kept.raw_data = tensor.raw_data
    assert parsed == whole
