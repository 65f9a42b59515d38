"""Ops with the same attribute bytes share one converted, frozen attribute map on import."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from amanda.errors import FormatError  # noqa: E402
from amanda.io.onnx.importer import from_onnx  # noqa: E402
from amanda.io.onnx.shared_attrs import MAX_SHARED_BYTES, SharedAttributes  # noqa: E402


def _model(nodes: list, outputs: list[str]) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_same_attributes_share_one_map() -> None:
    """Two Transposes with one perm share a map; a third with another perm and one carrying a
    doc string (an attribute of its own) do not, and every value is what the file says."""
    nodes = [helper.make_node("Transpose", ["x"], ["a"], name="t1", perm=[1, 0]),
             helper.make_node("Transpose", ["a"], ["b"], name="t2", perm=[1, 0]),
             helper.make_node("Transpose", ["b"], ["c"], name="t3", perm=[0, 1]),
             helper.make_node("Transpose", ["c"], ["d"], name="t4", perm=[1, 0], doc_string="mine")]
    m = from_onnx(_model(nodes, ["d"]))
    t1, t2, t3, t4 = (m.child(n) for n in ("t1", "t2", "t3", "t4"))
    assert t1._attrs is t2._attrs
    assert t1.attrs["perm"] == (1, 0) and t3.attrs["perm"] == (0, 1)
    assert t3._attrs is not t1._attrs and t4._attrs is not t1._attrs
    assert t4.attrs["perm"] == (1, 0) and t4.attrs["onnx_node"]["doc_string"] == "mine"


def test_shared_constant_tensors_compare_by_value() -> None:
    """Constants with the same tensor share its read-only array; the values are the file's."""
    value = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "v")
    nodes = [helper.make_node("Constant", [], ["k1"], name="k1", value=value),
             helper.make_node("Constant", [], ["k2"], name="k2", value=value),
             helper.make_node("Add", ["k1", "k2"], ["s"], name="add")]
    m = from_onnx(_model(nodes, ["s"]))
    k1, k2 = m.child("k1"), m.child("k2")
    assert k1._attrs is k2._attrs
    np.testing.assert_array_equal(k2.attrs["value"], np.arange(6, dtype=np.float32).reshape(2, 3))
    assert not k1.attrs["value"].flags.writeable
    assert k1.outputs[0].attrs["onnx_name"] == "k1" and k2.outputs[0].attrs["onnx_name"] == "k2"


def test_bad_attribute_still_raises_on_every_import() -> None:
    """A set that fails to convert is not kept: the op holding it raises, naming it."""
    bad = helper.make_attribute("perm", [1, 0])
    bad.ref_attr_name = "p"  # a reference outside a function body
    node = helper.make_node("Transpose", ["x"], ["a"], name="t1")
    node.attribute.append(bad)
    for _ in range(2):
        with pytest.raises(FormatError, match="t1"):
            from_onnx(_model([node], ["a"]))


def test_keys_leave_out_bodies_and_large_sets() -> None:
    """Graph attributes and sets past MAX_SHARED_BYTES have no key; equal sets one key."""
    cache = SharedAttributes()
    body = helper.make_graph([], "b", [], [])
    assert cache.key(helper.make_node("If", ["c"], ["y"], then_branch=body, else_branch=body), None) is None
    big = numpy_helper.from_array(np.zeros(MAX_SHARED_BYTES, dtype=np.uint8), "big")
    assert cache.key(helper.make_node("Constant", [], ["y"], value=big), None) is None
    a, b = (helper.make_node("Gemm", ["a", "b"], ["y"], transB=1, alpha=0.5) for _ in range(2))
    assert cache.key(a, None) == cache.key(b, None) and cache.key(a, None) != cache.key(a, object())
    assert cache.get(None) is None and cache.keep(None, {}, {}) is None
    entry = cache.keep(cache.key(a, None), {"transB": 1}, {})
    assert cache.get(cache.key(b, None)) is entry and entry.frozen() is entry.frozen() == {"transB": 1}


def test_read_attributes_and_ports_as_the_reader_makes_them() -> None:
    """``read_attributes`` gives the file's values (and the types a schema does not give);
    ``typed_port`` and ``value_port`` agree; ``graph_info``
    keeps what a graph says of itself (text that is not UTF-8: tests/io/test_onnx_text_fields.py)."""
    from amanda.io.onnx.attrs import read_attributes
    from amanda.io.onnx.metadata import graph_info
    from amanda.io.onnx.values import type_to_attrs, typed_port, value_port

    node = helper.make_node("Gemm", ["a", "b"], ["y"], alpha=0.5, transB=1, mode="x")
    attrs: dict = {}
    hints: dict = {}
    assert read_attributes(node, None, None, "", attrs, hints) is True
    assert attrs == {"alpha": 0.5, "transB": 1, "mode": "x"} and hints == {}
    info = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 3])
    assert typed_port("Y", "y", type_to_attrs(info)) == value_port("Y", "y", info)
    assert value_port("Y", "y", info).attrs["shape"] == ("n", 3) and typed_port("Y", "y", None).attrs == {"onnx_name": "y"}
    graph = helper.make_graph([], "g", [], [], doc_string="about g")
    assert graph_info(graph, {"k": "v"}) == {"doc_string": "about g", "metadata_props": {"k": "v"}}
