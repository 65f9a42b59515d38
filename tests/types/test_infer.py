"""infer_types: every port at every depth, symbolic shape arithmetic, bodies, unknown ops, caching."""

from __future__ import annotations

import numpy as np
import pytest

import amanda
from amanda.types import SequenceType, TensorType, infer_types
from amanda.types import infer as infer_module

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper

from amanda.io.onnx import from_onnx

NS = {"namespace": "amanda/onnx/17"}
F32 = TensorProto.FLOAT


def _block(name: str) -> amanda.Container:
    relu = amanda.op("Relu", "relu", inputs=["X"], outputs=["Y"])
    neg = amanda.op("Neg", "neg", inputs=["X"], outputs=["Y"])
    return amanda.Container("Block", name, inputs=["x"], outputs=["y"], children=[relu, neg],
                            edges=[(f"{name}:x", "relu:X"), ("relu:Y", "neg:X"), ("neg:Y", f"{name}:y")])


def _stack(n: int, shape=("batch", 4)) -> amanda.Container:
    blocks = [_block(f"b{i}") for i in range(n)]
    edges = [("g:x", "b0:x")] + [(f"b{i}:y", f"b{i + 1}:x") for i in range(n - 1)] + [(f"b{n - 1}:y", "g:y")]
    return amanda.Container(None, "g", inputs=[amanda.Port("x", attrs={"dtype": "float32", "shape": shape})],
                            outputs=["y"], children=blocks, edges=edges, attrs=NS)


def test_every_port_at_every_depth():
    """Leaf ports, nested container boundary ports and the model's own ports all get types."""
    types = infer_types(_stack(2))
    t = TensorType("float32", ("batch", 4))
    assert types.input(("b1",), "x") == t and types.output(("b1",), "y") == t
    assert types[("b0", "relu"), "Y"] == t and types[(), "y"] == t and types["b1/neg:Y"] == t
    assert len(types) == 2 + 2 * (2 + 2 * 2)  # model in/out, per block: its 2 ports, 2 ops × 2 ports
    assert not types.problems and not types.unknown_ops


def test_inputs_given_override_declared():
    """Types passed to infer_types win over the declared ones; an unknown input name is an error."""
    types = infer_types(_stack(1), {"x": ("float16", (7, 4))})
    assert types[(), "y"] == TensorType("float16", (7, 4))
    assert infer_types(_stack(1), {"x": np.zeros((2, 4), np.float64)})[(), "y"] == TensorType("float64", (2, 4))
    with pytest.raises(amanda.PathError):
        infer_types(_stack(1), {"nope": ("float32", (1,))})


def test_flat_view_levels_with_tombstones_and_deep_edges():
    """An edit wrapper (tombstones, edges reaching inside by path) is inferred on its effective view."""
    model = _stack(2)
    e = amanda.edit(model)
    e.add(amanda.op("Cast", "cast", inputs=["input"], outputs=["output"], attrs={"to": TensorProto.INT64, **NS}))
    e.remove_edge("g/b0:y", "g/b1:x")
    e.connect("g/b0/relu:Y", "cast:input")
    e.connect("cast:output", "g/b1:x")
    edited = e.build(name="w")
    types = infer_types(edited)
    assert types[("g", "b1", "neg"), "Y"] == TensorType("int64", ("batch", 4))
    assert types.input(("g", "b1"), "x") == TensorType("int64", ("batch", 4))
    assert types[(), "y"] == TensorType("int64", ("batch", 4))


def _shape_model() -> onnx.ModelProto:
    i64 = np.int64
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["b"], axis=0),
        helper.make_node("Gather", ["s", "one"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["b", "axes"], ["b1"]),
        helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
        helper.make_node("Concat", ["b1", "n1", "heads"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["y"]),
        helper.make_node("Range", ["zero", "n", "step"], ["pos"]),
        helper.make_node("ConstantOfShape", ["target"], ["ones"],
                         value=numpy_helper.from_array(np.array([1], np.int32))),
    ]
    inits = [numpy_helper.from_array(np.array(v, i64), k) for k, v in
             {"zero": 0, "one": 1, "axes": [0], "heads": [4, 8], "step": 1}.items()]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F32, ["batch", "seq", 32])],
                              [helper.make_tensor_value_info(v, F32, None) for v in ("y",)], inits)
    graph.output.extend([helper.make_value_info("pos", onnx.TypeProto()),
                         helper.make_value_info("ones", onnx.TypeProto())])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_shape_arithmetic_propagates_symbols():
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape keeps batch and seq symbolic; Range too."""
    types = infer_types(from_onnx(_shape_model()))
    assert types[("Reshape_6",), "reshaped"] == TensorType("float32", ("batch", "seq", 4, 8))
    assert types[("Range_7",), "output"] == TensorType("int64", ("seq",))
    assert types[("ConstantOfShape_8",), "output"] == TensorType("int32", ("batch", "seq", 4, 8))
    concrete = infer_types(from_onnx(_shape_model()), {"x": ("float32", (2, 5, 32))})
    assert concrete[(), "y"] == TensorType("float32", (2, 5, 4, 8))


def test_unknown_op_is_listed_not_fatal():
    """An op without a rule gets unknown outputs and is listed; what follows is typed as far as it can be."""
    weird = amanda.op("Frobnicate", "f", inputs=["a"], outputs=["b"])
    relu = amanda.op("Relu", "r", inputs=["X"], outputs=["Y"])
    g = amanda.Container(None, "g", inputs=[amanda.Port("x", attrs={"dtype": "float32", "shape": [2]})], outputs=["y"],
                         children=[weird, relu], edges=[("g:x", "f:a"), ("f:b", "r:X"), ("r:Y", "g:y")], attrs=NS)
    types = infer_types(g)
    assert types.unknown_ops == [(("f",), "Frobnicate")]
    assert types[("f",), "b"] is None and types[(), "y"] is None
    assert types.input(("f",), "a") == TensorType("float32", (2,))


def test_if_and_loop_bodies_are_inferred():
    """If merges its branches; Loop bodies get typed inputs and their ports appear under the op."""
    then_g = helper.make_graph([helper.make_node("Relu", ["x"], ["t"])], "then", [],
                               [helper.make_value_info("t", onnx.TypeProto())])
    else_g = helper.make_graph([helper.make_node("Concat", ["x", "x"], ["e"], axis=0)], "else", [],
                               [helper.make_value_info("e", onnx.TypeProto())])
    body = helper.make_graph(
        [helper.make_node("Add", ["v", "x"], ["v2"]), helper.make_node("Identity", ["c"], ["c2"]),
         helper.make_node("Identity", ["v2"], ["scan"])],
        "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                 helper.make_tensor_value_info("c", TensorProto.BOOL, []),
                 helper.make_value_info("v", onnx.TypeProto())],
        [helper.make_value_info(n, onnx.TypeProto()) for n in ("c2", "v2", "scan")])
    nodes = [helper.make_node("If", ["cond"], ["r"], then_branch=then_g, else_branch=else_g),
             helper.make_node("Loop", ["trips", "", "x"], ["final", "stacked"], body=body)]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", F32, [3, "k"]),
                     helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
        [helper.make_value_info(n, onnx.TypeProto()) for n in ("r", "final", "stacked")],
        [numpy_helper.from_array(np.array(5, np.int64), "trips")])
    c = from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    types = infer_types(c)
    assert types[(), "r"] == TensorType("float32", (None, "k"))
    assert types[(), "final"] == TensorType("float32", (3, "k"))
    assert types[(), "stacked"] == TensorType("float32", (5, 3, "k"))
    assert types[("Loop_1", "body", "Add_0"), "C"] == TensorType("float32", (3, "k"))
    assert types[("If_0", "else_branch", "Concat_0"), "concat_result"] == TensorType("float32", (6, "k"))
    assert not types.problems


def test_sequences():
    """Sequence ops give sequence types whose elements fit every member."""
    nodes = [helper.make_node("SequenceConstruct", ["a", "b"], ["s"]),
             helper.make_node("SequenceAt", ["s", "zero"], ["e"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("a", F32, [2, 3]),
                                           helper.make_tensor_value_info("b", F32, [4, 3])],
                              [helper.make_value_info(n, onnx.TypeProto()) for n in ("s", "e")],
                              [numpy_helper.from_array(np.array(0, np.int64), "zero")])
    types = infer_types(from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])))
    assert types[(), "s"] == SequenceType(TensorType("float32", (None, 3)))
    assert types[(), "e"] == TensorType("float32", (None, 3))


def test_edit_of_one_op_infers_only_the_changed_path(monkeypatch):
    """After replacing one op in one block, only that block's ops are inferred again."""
    model = _stack(50)
    infer_types(model)
    calls = []
    real = infer_module.infer_op
    monkeypatch.setattr(infer_module, "infer_op", lambda op, *a: calls.append(op) or real(op, *a))
    edited = amanda.replace(model, "b25/neg", amanda.op("Abs", "neg", inputs=["X"], outputs=["Y"]))
    types = infer_types(edited)
    assert sorted(op.type for op in calls) == ["Abs", "Relu"]
    assert types[("b25", "neg"), "Y"] == TensorType("float32", ("batch", 4))
    calls.clear()
    assert infer_types(model)[(), "y"] == TensorType("float32", ("batch", 4)) and not calls


def test_every_kernel_op_type_has_a_rule():
    """Each op type the executor has a kernel for (plain or session) has a type rule."""
    import amanda.opset.onnx.control_flow  # noqa: F401  (registers the session kernels)
    from amanda.exec.dispatch import session_op_types
    from amanda.exec.kernels import registry
    from amanda.types.rules import rule_op_types

    kernels = set(registry.supported_op_types()) | set(session_op_types())
    assert len(kernels) >= 157 and kernels <= set(rule_op_types())


def test_deep_nesting_does_not_recurse_without_bound():
    """A model nested 1,500 levels deep is inferred level by level, and every port is listed."""
    inner = amanda.op("Relu", "relu", inputs=["X"], outputs=["Y"])
    path = ["relu"]
    for i in range(1500):
        name = f"w{i}"
        inner = amanda.Container("Wrap", name, inputs=["x"], outputs=["y"], children=[inner],
                                 edges=[(f"{name}:x", f"{inner.name}:{'X' if i == 0 else 'x'}"),
                                        (f"{inner.name}:{'Y' if i == 0 else 'y'}", f"{name}:y")])
        path.insert(0, name)
    g = amanda.Container(None, "g", inputs=[amanda.Port("x", attrs={"dtype": "float32", "shape": [3]})], outputs=["y"],
                         children=[inner], edges=[("g:x", f"{inner.name}:x"), (f"{inner.name}:y", "g:y")], attrs=NS)
    types = infer_types(g)
    assert types[(), "y"] == TensorType("float32", (3,))
    assert types[tuple(path), "Y"] == TensorType("float32", (3,))
    assert types.output(tuple(path[:700]), "y") == TensorType("float32", (3,))
    assert len(types) == 2 * 1500 + 2 + 2  # each wrapper's x and y, the relu's X and Y, g's x and y


def test_edit_wrapper_reuses_the_subtrees_it_does_not_reach_into(monkeypatch):
    """An amanda.edit wrapper inserting one op between two blocks infers only that op again."""
    model = _stack(50)
    infer_types(model)
    e = amanda.edit(model)
    e.add(amanda.op("Abs", "extra", inputs=["X"], outputs=["Y"], attrs=NS))
    e.remove_edge("g/b25:y", "g/b26:x")
    e.connect("g/b25:y", "extra:X")
    e.connect("extra:Y", "g/b26:x")
    edited = e.build(name="w")
    calls = []
    real = infer_module.infer_op
    monkeypatch.setattr(infer_module, "infer_op", lambda op, *a: calls.append(op) or real(op, *a))
    types = infer_types(edited)
    assert [op.name for op in calls] == ["extra"]
    t = TensorType("float32", ("batch", 4))
    assert types[("extra",), "Y"] == t and types[("g", "b26", "relu"), "X"] == t
    assert types.input(("g", "b26"), "x") == t and types[(), "y"] == t
    assert types.input(("g",), "x") == t and types.output(("g",), "y") == t


def test_edit_wrapper_reaching_inside_a_block():
    """Tombstones of edges owned by a nested block are applied; the rewired values are typed anew."""
    model = _stack(6)
    e = amanda.edit(model)
    e.add(amanda.op("Cast", "cast", inputs=["input"], outputs=["output"], attrs={"to": TensorProto.INT64, **NS}))
    e.remove_edge("g/b3:x", "g/b3/relu:X")  # owned by b3 itself: its input to its first op
    e.connect("g/b2:y", "cast:input")
    e.connect("cast:output", "g/b3/relu:X")
    types = infer_types(e.build(name="w"))
    i64, f32 = TensorType("int64", ("batch", 4)), TensorType("float32", ("batch", 4))
    assert types.input(("g", "b3"), "x") == f32 and types[("g", "b3", "relu"), "X"] == i64
    assert types.output(("g", "b3"), "y") == i64 and types[("g", "b5", "neg"), "Y"] == i64
    assert types[(), "y"] == i64 and not types.problems


def test_shape_values_take_the_dtype_of_their_port():
    """TensorFlow's Tensordot: Shape -> Cast(int32) -> Gather -> ReduceProd -> Concat with int32.
    The gathered dim is known (16) while batch is not; folding ReduceProd on it must give int32,
    as onnxruntime does, not the int64 that shape values are worked out in."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Cast", ["s"], ["s32"], to=TensorProto.INT32),
        helper.make_node("Gather", ["s32", "last"], ["d"], axis=0),
        helper.make_node("ReduceProd", ["d"], ["n"], axes=[0], keepdims=1),
        helper.make_node("Concat", ["minus_one", "n"], ["target"], axis=0),
    ]
    inits = [numpy_helper.from_array(np.array([1], np.int32), "last"),
             numpy_helper.from_array(np.array([-1], np.int32), "minus_one")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F32, ["batch", 16])],
                              [helper.make_tensor_value_info("target", TensorProto.INT32, [2])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model, full_check=True)
    types = infer_types(from_onnx(model))
    assert types[("ReduceProd_3",), "reduced"] == TensorType("int32", (1,))
    assert types[(), "target"] == TensorType("int32", (2,))
    assert not types.problems
