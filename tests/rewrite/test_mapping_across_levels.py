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


def _concat_graph(where: str) -> Container:
    """x -> block/c (ConcatV2 of x with itself) -> y, its axis a Const bound by the ``concat``
    rule's two-op pattern, in the top level, a sibling scope or a scope nested in the block."""
    axis = op("Const", "axis", [], ["output"], {"value": np.asarray(1, np.int32), "dtype": "int32"})
    concat = op("ConcatV2", "c", ["values_0", "values_1", "axis"], ["output"], {"T": "float32", "N": 2})
    wires = [("block:x", "c:values_0"), ("block:x", "c:values_1"), ("c:output", "block:y")]
    if where == "nested":
        inner = _scope("inner", [axis], [("axis:output", "inner:axis")], outputs=["axis"])
        block = _scope("block", [inner, concat], [*wires, ("inner:axis", "c:axis")], ["x"], ["y"])
        children, edges = [_placeholder(), block], []
    else:
        block = _scope("block", [concat], [*wires, ("block:axis", "c:axis")], ["x", "axis"], ["y"])
        if where == "enclosing":
            children, edges = [_placeholder(), axis, block], [("axis:output", "block:axis")]
        else:
            consts = _scope("consts", [axis], [("axis:output", "consts:axis")], outputs=["axis"])
            children, edges = [_placeholder(), consts, block], [("consts:axis", "block:axis")]
    return Container(None, "g", outputs=["y"], children=children, attrs={"namespace": TF},
                     edges=[*edges, ("x:output", "block:x"), ("block:y", "g:y")])


@pytest.mark.parametrize("where", ["enclosing", "sibling", "nested"])
def test_a_two_op_pattern_binds_an_op_of_another_level(where: str) -> None:
    """The ``concat`` rule's pattern ``{axis: Const, c: ConcatV2}`` with ``axis.output -> c.axis``
    binds the Const wherever the scopes put it (values followed through container ports, as
    ``amanda.rewrite.matches`` follows them); the ConcatV2 becomes ONNX's Concat with the axis as
    its attribute, in the block, and onnxruntime concatenates as numpy does."""
    from amanda.io.onnx import to_onnx
    from amanda.rewrite.mapping.pattern import find_matches
    from amanda.rewrite.mapping.scope import Scope
    from amanda.rewrite.mapping.values import Far

    graph = _concat_graph(where)
    table = tensorflow_to_onnx()
    rule = next(r for r in table.rules if r.name == "concat")
    top = Scope(graph, (), None, None)  # type: ignore[arg-type]
    block = Scope(graph.child("block"), ("block",), TF, None, top)  # type: ignore[arg-type]
    (found,) = find_matches(block, rule.pattern, lambda key, choice: True)
    assert found["c"] == "c" and isinstance(found["axis"], Far) and found["axis"].path[-1] == "axis"
    converted = table.apply(graph)
    concat = converted.descendant(("block", "c"))
    assert concat.type == "Concat" and concat.attrs["axis"] == 1
    assert converted.child("block").children  # the scope is kept
    session = ort.InferenceSession(to_onnx(converted).SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    np.testing.assert_array_equal(session.run(None, {"x": x})[0], np.concatenate([x, x], axis=1))


def test_a_replacement_that_names_an_op_of_another_level_is_not_applied() -> None:
    """An op bound in another level is read by the match, never changed by its replacement: a
    rule whose replacement names it (to update it, or in its port map) is not applied there, as
    the ops are no siblings, and the ops stay as they were."""
    from amanda.rewrite.mapping import MappingTable, NewOp, Pattern, Replacement, Rule

    pattern = Pattern({"axis": "Const", "c": "ConcatV2"}, ["axis.output -> c.axis"])
    concat = NewOp("Concat", inputs=["inputs_0", "inputs_1"], outputs=["concat_result"], attrs={"axis": 1})
    updating = Rule("both", pattern, lambda m: Replacement({"axis": NewOp("Constant"), "c": concat}))
    routing = Rule("ports", pattern, lambda m: Replacement({"c": concat}, (), {"axis.output": None}))
    for rule in (updating, routing):
        converted = MappingTable(TF, "amanda/onnx/17", [rule]).apply(_concat_graph("nested"), on_unmatched="pass")
        assert converted.descendant(("block", "c")).type == "ConcatV2"
        assert converted.descendant(("block", "inner", "axis")).type == "Const"
    flat = Container(None, "g", outputs=["y"], children=[_placeholder(), *_concat_graph("enclosing").children[1:2],
                                                         op("ConcatV2", "c", ["values_0", "values_1", "axis"], ["output"])],
                     edges=[("x:output", "c:values_0"), ("x:output", "c:values_1"), ("axis:output", "c:axis"),
                            ("c:output", "g:y")], attrs={"namespace": TF})
    converted = MappingTable(TF, "amanda/onnx/17", [updating]).apply(flat, on_unmatched="pass")
    assert {c.type for c in converted.children} >= {"Concat", "Constant"}  # siblings: applied
