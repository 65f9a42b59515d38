"""TensorFlow -> ONNX rules for tensor lists, computed reduction axes, Split, logical ops,
control-flow refusals, and converting function bodies. Expected values are numpy's; each
converted graph runs in amanda's Session and (when installed) in onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

import amanda
from amanda import Container, op
from amanda.containers.edge import SELF, Port
from amanda.rewrite.mapping.convert import convert
from amanda.rewrite.mapping.driver import UnmatchedOpsError
from amanda.rewrite.mapping.tables.tensorflow_onnx_control import function_body
from amanda.rewrite.mapping.tables.tensorflow_onnx_scopes import (
    ScopeFlatteningTable,
    flat_scopes,
    opening_scopes,
    shipped_table,
)

TF = "amanda/tensorflow/2.21.0"


def _const(name: str, value: object, dtype: str = "int32") -> Container:
    return op("Const", name, [], ["output"], {"dtype": dtype, "value": np.asarray(value, dtype=dtype)})


def _placeholder(name: str, shape: tuple, dtype: str = "float32") -> Container:
    return op("Placeholder", name, [], ["output"], {"dtype": dtype, "shape": shape})


def _graph(children: list, edges: list) -> Container:
    return Container(None, "g", children=children, edges=edges, attrs={"namespace": TF})


def _run_both(graph: Container, feeds: dict, fetch: str, want: np.ndarray) -> None:
    """The fetched value from amanda's Session on the TensorFlow graph and, where onnxruntime
    is installed, from the converted model (its output typed as ``want``) in onnxruntime, equal
    ``want``."""
    got = amanda.Session(graph).run([fetch], {f"{k}:output": v for k, v in feeds.items()})[0]
    np.testing.assert_array_equal(got, want)
    ort = pytest.importorskip("onnxruntime")
    from amanda.io.onnx import to_onnx

    converted = convert(graph, "amanda/onnx/17", outputs={"result": fetch})
    converted = converted.evolve(outputs=[Port("result", attrs={"dtype": want.dtype.name, "shape": want.shape})])
    assert amanda.validate(converted) == []
    session = ort.InferenceSession(to_onnx(converted).SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(session.run(["result"], feeds)[0], want)


def test_tensor_list_set_item_replaces_or_appends_as_tensorflow() -> None:
    """Reserve, set 0, 1, then 0 again, stack: [c, b] (the second write at 0 replaces)."""
    a, b, c = (np.full((2,), v, np.float32) for v in (1.0, 2.0, 3.0))
    children = [_const("shape", [2]), _const("n", 2), _const("i0", 0), _const("i1", 1),
                _placeholder("a", (2,)), _placeholder("b", (2,)), _placeholder("c", (2,)),
                op("TensorListReserve", "list", ["element_shape", "num_elements"], ["handle"],
                   {"element_dtype": "float32", "shape_type": "int32"})]
    edges = [("shape:output", "list:element_shape"), ("n:output", "list:num_elements")]
    handle = "list:handle"
    for k, (index, item) in enumerate((("i0", "a"), ("i1", "b"), ("i0", "c"))):
        children.append(op("TensorListSetItem", f"set{k}", ["input_handle", "index", "item"], ["output_handle"],
                           {"element_dtype": "float32"}))
        edges += [(handle, f"set{k}:input_handle"), (f"{index}:output", f"set{k}:index"),
                  (f"{item}:output", f"set{k}:item")]
        handle = f"set{k}:output_handle"
    children.append(op("TensorListStack", "stack", ["input_handle", "element_shape"], ["tensor"],
                       {"element_dtype": "float32", "num_elements": -1}))
    edges += [(handle, "stack:input_handle"), ("shape:output", "stack:element_shape")]
    _run_both(_graph(children, edges), {"a": a, "b": b, "c": c}, "stack:tensor", np.stack([c, b]))


def test_tensor_list_from_tensor_and_get_item() -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    children = [_placeholder("x", (3, 4)), _const("shape", [4]), _const("i", 2),
                op("TensorListFromTensor", "list", ["tensor", "element_shape"], ["output_handle"],
                   {"element_dtype": "float32", "shape_type": "int32"}),
                op("TensorListGetItem", "get", ["input_handle", "index", "element_shape"], ["item"],
                   {"element_dtype": "float32"})]
    edges = [("x:output", "list:tensor"), ("shape:output", "list:element_shape"),
             ("list:output_handle", "get:input_handle"), ("i:output", "get:index"), ("shape:output", "get:element_shape")]
    _run_both(_graph(children, edges), {"x": x}, "get:item", x[2])


def _max_over(axes_producer: list, edges: list) -> Container:
    children = [_placeholder("x", (2, 3)), *axes_producer,
                op("Max", "r", ["input", "reduction_indices"], ["output"], {"T": "float32", "keep_dims": False})]
    return _graph(children, [("x:output", "r:input"), *edges])


def test_reduction_axes_computed_from_constants_are_folded() -> None:
    """Max over Range(1, 2, 1) is a ReduceMax over axis 1; Range(0, 0, 1) reduces nothing."""
    x = np.array([[1, 5, 2], [7, 0, 3]], np.float32)
    for limit, want in ((2, x.max(axis=1)), (0, x)):
        rng = [_const("start", 1 if limit else 0), _const("limit", limit), _const("delta", 1),
               op("Range", "axes", ["start", "limit", "delta"], ["output"], {"Tidx": "int32"})]
        edges = [(f"{p}:output", f"axes:{p}") for p in ("start", "limit", "delta")] + [("axes:output", "r:reduction_indices")]
        _run_both(_max_over(rng, edges), {"x": x}, "r:output", want)


def test_reduction_over_fed_axes_is_reported() -> None:
    graph = _max_over([_placeholder("axes", (1,), "int32")], [("axes:output", "r:reduction_indices")])
    with pytest.raises(UnmatchedOpsError) as info:
        convert(graph, "amanda/onnx/17")
    assert [(path, kind) for path, kind, _ in info.value.ops] == [("r", "Max")]
    assert any("reduce_folded" in reason for reason in info.value.ops[0][2])


def test_split_gives_every_part() -> None:
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    children = [_placeholder("x", (2, 4)), _const("dim", 1),
                op("Split", "s", ["split_dim", "value"], ["output_0", "output_1"], {"num_split": 2, "T": "float32"})]
    edges = [("dim:output", "s:split_dim"), ("x:output", "s:value")]
    _run_both(_graph(children, edges), {"x": x}, "s:output_1", x[:, 2:])


@pytest.mark.parametrize(("kind", "want"), [("LogicalAnd", np.logical_and), ("LogicalOr", np.logical_or)])
def test_logical_ops(kind: str, want: object) -> None:
    x, y = np.array([True, True, False]), np.array([True, False, False])
    children = [_placeholder("x", (3,), "bool"), _placeholder("y", (3,), "bool"), op(kind, "o", ["x", "y"], ["z"]),
                op("LogicalNot", "n", ["x"], ["y"])]
    edges = [("x:output", "o:x"), ("y:output", "o:y"), ("o:z", "n:x")]
    _run_both(_graph(children, edges), {"x": x, "y": y}, "n:y", np.logical_not(want(x, y)))  # type: ignore[operator]


def _function(name: str) -> Container:
    return Container(None, name, inputs=["v"], outputs=["out"], children=[op("Relu", "relu", ["features"], ["activations"])],
                     edges=[(f"{name}:v", "relu:features"), ("relu:activations", f"{name}:out")])


def test_function_body_converts_functions_wired_by_ports() -> None:
    """Two functions chained through the wrapper's ports, converted to ONNX."""
    body = function_body("wrapped", [(_function("f"), [(SELF, "x")]), (_function("h"), [("f", 0)])],
                         [Port("x", attrs={"dtype": "float32"})], [(Port("y"), ("h", 0))])
    assert body.namespace == "amanda/onnx/17"
    assert [c.name for c in body.children] == ["f", "h"]  # each function a container, as in the source
    assert sorted(leaf.type for c in body.children for leaf in c.children) == ["Relu", "Relu"]
    x = np.array([-1.0, 2.0], np.float32)
    (got,) = amanda.Session(body).run(["y"], {"x": x})
    np.testing.assert_array_equal(got, np.maximum(x, 0))


def test_loop_of_resource_variables_is_refused_with_the_reason() -> None:
    """A While carrying a resource handle (an unfrozen graph) is left unmatched, saying why."""
    loop = op("While", "w", ["input_0"], ["output_0"],
              {"T": ("resource",), "body": _function("body"), "cond": _function("cond")})
    graph = _graph([op("VarHandleOp", "v", [], ["resource"], {"dtype": "float32", "shape": ()}), loop],
                   [("v:resource", "w:input_0")])
    with pytest.raises(UnmatchedOpsError) as info:
        convert(graph, "amanda/onnx/17")
    (found,) = [entry for entry in info.value.ops if entry[0] == "w"]
    assert any("resource" in reason for reason in found[2])


def test_if_with_branches_of_another_arity_is_refused() -> None:
    branch = op("If", "i", ["cond", "input_0"], ["output_0"],
                {"Tin": ("float32",), "Tout": ("float32", "float32"), "Tcond": "bool",
                 "then_branch": _function("t"), "else_branch": _function("e")})
    graph = _graph([_placeholder("c", (), "bool"), _placeholder("x", (2,)), branch],
                   [("c:output", "i:cond"), ("x:output", "i:input_0")])
    with pytest.raises(UnmatchedOpsError) as info:
        convert(graph, "amanda/onnx/17")
    assert any("if_branch" in reason for reason in info.value.ops[0][2])


def test_scopes_are_kept_and_names_resolve() -> None:
    """The shipped table maps a scoped graph as it is, its scope kept (``flat_scopes`` opens
    them, for lowered control flow only); the name map reads the scoped graph's endpoints."""
    inner = Container(None, "block", inputs=["x"], outputs=["y"], children=[op("Relu", "r", ["features"], ["activations"])],
                      edges=[("block:x", "r:features"), ("r:activations", "block:y")])
    graph = _graph([_placeholder("x", (2,)), inner], [("x:output", "block:x")])
    flat, opened = flat_scopes(graph)
    assert [c.name for c in flat.children] == ["x", "block/r"] and len(opened) == 2
    assert flat_scopes(flat) == (flat, {})
    table = shipped_table()
    assert isinstance(table, ScopeFlatteningTable) and isinstance(opening_scopes(table), ScopeFlatteningTable)
    converted, names = table.apply(graph, with_names=True)
    assert [c.name for c in converted.children] == ["block"]
    assert [c.type for c in converted.child("block").children] == ["Relu"]
    assert str(names.resolve("block/r:activations")) == "block/r:Y"


def test_raise_control_flow_leaves_graphs_without_lowered_ops_and_unknown_shapes() -> None:
    """A graph with no Enter or Switch comes back as it is; a Switch whose sides never meet in a
    Merge is no conditional it recognises, so it stays (and is reported unmatched)."""
    from amanda.rewrite.mapping.tables.tensorflow_onnx_lowered import raise_control_flow

    plain = _graph([_placeholder("x", (2,))], [])
    assert raise_control_flow(plain) == (plain, {})
    children = [_placeholder("x", (2,)), _placeholder("p", (), "bool"),
                op("Switch", "s", ["data", "pred"], ["output_false", "output_true"], {"T": "float32"}),
                op("Merge", "m", ["inputs_0", "inputs_1"], ["output", "value_index"], {"T": "float32", "N": 2})]
    edges = [("x:output", "s:data"), ("p:output", "s:pred"), ("s:output_true", "m:inputs_0"), ("x:output", "m:inputs_1")]
    graph = _graph(children, edges)
    raised, moved = raise_control_flow(graph)
    assert moved == {} and sorted(c.type for c in raised.children) == ["Merge", "Placeholder", "Placeholder", "Switch"]
    with pytest.raises(UnmatchedOpsError) as info:
        convert(graph, "amanda/onnx/17")
    assert {kind for _, kind, _ in info.value.ops} == {"Switch", "Merge"}


def test_bad_arguments_raise_amanda_errors() -> None:
    """A value that is not a container, or a function body wired to a missing function, result
    or input, raises an AmandaError naming it."""
    from amanda.errors import AmandaError
    from amanda.rewrite.mapping.tables.tensorflow_onnx_lowered import raise_control_flow

    for call in (lambda: flat_scopes("g"), lambda: raise_control_flow(3)):  # type: ignore[arg-type]
        with pytest.raises(AmandaError):
            call()
    fn = _function("f")
    for wrong in ((SELF, "nope"), ("g", 0), ("f", 1)):
        with pytest.raises(AmandaError) as info:
            function_body("w", [(fn, [wrong])], [Port("x")], [(Port("y"), ("f", 0))])
        assert info.value.path is not None
