"""Conversion reads values across container boundaries: a TensorFlow graph imported with its
name scopes as containers converts like the flat one when a rule needs a constant (a
Transpose's perm) that lies in the enclosing level, in a sibling scope or in a nested one."""

from __future__ import annotations

import numpy as np
import pytest

from amanda import Container, op
from amanda.rewrite.mapping.tables.tensorflow_onnx import tensorflow_to_onnx
from amanda.rewrite.mapping.values import Level, producer

ort = pytest.importorskip("onnxruntime")
TF = "amanda/tensorflow/2.21.0"
PERM = [2, 0, 1]


def _const(name: str) -> Container:
    return op("Const", name, [], ["output"], {"value": np.asarray(PERM, np.int32), "dtype": "int32"})


def _transpose() -> Container:
    return op("Transpose", "t", ["x", "perm"], ["y"], {"T": "float32", "Tperm": "int32"})


def _placeholder() -> Container:
    return op("Placeholder", "x", [], ["output"], {"dtype": "float32", "shape": [2, 3, 4]})


def _scope(name: str, children: list, edges: list, inputs=(), outputs=()) -> Container:
    return Container(None, name, inputs=list(inputs), outputs=list(outputs), children=children, edges=edges)


def graph(where: str) -> Container:
    """x -> block/t (Transpose) -> y, its perm a Const in the top level, in a sibling scope
    ``consts`` or in a scope ``inner`` nested in the block."""
    if where == "nested":
        inner = _scope("inner", [_const("perm")], [("perm:output", "inner:perm")], outputs=["perm"])
        block = _scope("block", [inner, _transpose()], [("block:x", "t:x"), ("inner:perm", "t:perm"), ("t:y", "block:y")],
                       ["x"], ["y"])
        children, edges = [_placeholder(), block], []
    else:
        block = _scope("block", [_transpose()], [("block:x", "t:x"), ("block:perm", "t:perm"), ("t:y", "block:y")],
                       ["x", "perm"], ["y"])
        if where == "enclosing":
            children, edges = [_placeholder(), _const("perm"), block], [("perm:output", "block:perm")]
        else:
            consts = _scope("consts", [_const("perm")], [("perm:output", "consts:perm")], outputs=["perm"])
            children, edges = [_placeholder(), consts, block], [("consts:perm", "block:perm")]
    return Container(None, "g", outputs=["y"], children=children, attrs={"namespace": TF},
                     edges=[*edges, ("x:output", "block:x"), ("block:y", "g:y")])


@pytest.mark.parametrize("where", ["enclosing", "sibling", "nested"])
def test_a_constant_in_another_scope_converts_and_computes(where: str) -> None:
    """The Transpose becomes ONNX's with its perm as an attribute, and onnxruntime transposes.
    The rules run on the scoped graph itself (the table without the shipped one's opening of
    scopes), so the tree is kept and the perm is read across the container boundary."""
    from amanda.io.onnx import to_onnx

    converted = tensorflow_to_onnx().apply(graph(where))
    transpose = converted.descendant(("block", "t"))
    assert transpose.type == "Transpose" and list(transpose.attrs["perm"]) == PERM
    session = ort.InferenceSession(to_onnx(converted).SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    np.testing.assert_array_equal(session.run(None, {"x": x})[0], np.transpose(x, PERM))


def test_producer_follows_ports_up_and_down_and_stops():
    """``producer`` walks up through input ports and down through output ports; an unfed port,
    a root's input port or too small a depth give None."""
    top = graph("sibling")
    block = Level(top.child("block"), Level(top, None))
    level, name, port = producer(block, "t", "perm")
    assert (level.container.name, name, port) == ("consts", "perm", "output")
    assert producer(block, "t", "perm", depth=1) is None
    assert producer(Level(top, None), "x", "missing") is None
    fed_by_root = Container(None, "g", inputs=["a"], children=[_transpose()], edges=[("g:a", "t:perm")])
    assert producer(Level(fed_by_root, None), "t", "perm") is None
    assert producer(block, "t", "perm", depth=0) is None
