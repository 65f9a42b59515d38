"""If, Loop and Scan run their bodies with the session's executor and state; results match
onnx.reference on models with captured outer values, scan axes and directions, and nesting."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from amanda import Container, Port, op  # noqa: E402
from amanda.errors import ExecutionError  # noqa: E402
from amanda.exec import Session  # noqa: E402
from amanda.io.onnx.importer import from_onnx  # noqa: E402

F = TensorProto.FLOAT
OPSET = [helper.make_opsetid("", 17)]


def model(nodes: list, inputs: list, outputs: list, initializers: list | None = None) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=initializers or [])
    return helper.make_model(graph, opset_imports=OPSET, ir_version=8)


def vi(name: str, elem: int = F, shape: list | None = None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def check(proto: onnx.ModelProto, feeds: dict, threads: int = 1) -> list:
    """amanda's outputs equal the ONNX reference evaluator's."""
    expected = ReferenceEvaluator(proto).run(None, feeds)
    names = [o.name for o in proto.graph.output]
    with Session(from_onnx(proto), threads=threads) as s:
        got = s.run(names, feeds)
    for e, g in zip(expected, got):
        np.testing.assert_allclose(g, e, rtol=1e-6)
        assert np.asarray(g).dtype == np.asarray(e).dtype
    return got


def if_model() -> onnx.ModelProto:
    """y = (x + a) if cond else (x * b), with x, a, b read from the outer graph."""
    then = helper.make_graph([helper.make_node("Add", ["x", "a"], ["t"])], "then", [], [vi("t")])
    other = helper.make_graph([helper.make_node("Mul", ["x", "b"], ["e"])], "else", [], [vi("e")])
    node = helper.make_node("If", ["cond"], ["y"], then_branch=then, else_branch=other)
    return model([node], [vi("cond", TensorProto.BOOL, []), vi("x", F, [3]), vi("a", F, [3]), vi("b", F, [3])],
                 [vi("y")])


@pytest.mark.parametrize("cond", [True, False])
@pytest.mark.parametrize("threads", [1, 2])
def test_if_with_captured_values(cond: bool, threads: int) -> None:
    """Both branches read outer values through captured ports and match the reference."""
    rng = np.random.default_rng(1)
    feeds = {"cond": np.array(cond), "x": rng.standard_normal(3).astype(np.float32),
             "a": rng.standard_normal(3).astype(np.float32), "b": rng.standard_normal(3).astype(np.float32)}
    check(if_model(), feeds, threads)


def loop_model() -> onnx.ModelProto:
    """Sum x*i for i < trip count while the running sum stays below a limit; scan out each sum."""
    body = helper.make_graph(
        [
            helper.make_node("Cast", ["i"], ["fi"], to=F),
            helper.make_node("Mul", ["x", "fi"], ["step"]),
            helper.make_node("Add", ["s_in", "step"], ["s_out"]),
            helper.make_node("ReduceSum", ["s_out"], ["total"], keepdims=0),
            helper.make_node("Less", ["total", "limit"], ["c_out"]),
            helper.make_node("Identity", ["s_out"], ["scan"]),
        ],
        "body",
        [vi("i", TensorProto.INT64, []), vi("c_in", TensorProto.BOOL, []), vi("s_in", F, [2])],
        [vi("c_out", TensorProto.BOOL, []), vi("s_out", F, [2]), vi("scan", F, [2])],
    )
    node = helper.make_node("Loop", ["n", "cond", "s0"], ["s", "sums"], body=body)
    return model([node], [vi("n", TensorProto.INT64, []), vi("cond", TensorProto.BOOL, []), vi("s0", F, [2]),
                          vi("x", F, [2]), vi("limit", F, [])], [vi("s"), vi("sums")])


@pytest.mark.parametrize("limit", [100.0, 7.0])
def test_loop_carried_scan_outputs_and_early_exit(limit: float) -> None:
    """Loop-carried values, stacked scan outputs and the condition's early exit match the reference."""
    feeds = {"n": np.array(6, np.int64), "cond": np.array(True), "s0": np.zeros(2, np.float32),
             "x": np.array([1.0, 0.5], np.float32), "limit": np.array(limit, np.float32)}
    s, sums = check(loop_model(), feeds)
    # totals 0, 1.5, 4.5, 9: the limit 7 stops the loop after the fourth iteration
    assert sums.shape[0] == (6 if limit == 100 else 4)


def test_loop_with_zero_trips_returns_initial_values() -> None:
    """M = 0 runs no iteration: the carried values are the initial ones."""
    feeds = {"n": np.array(0, np.int64), "cond": np.array(True), "s0": np.ones(2, np.float32),
             "x": np.ones(2, np.float32), "limit": np.array(1.0, np.float32)}
    with Session(from_onnx(loop_model())) as s:
        out, _ = s.run(["s", "sums"], feeds)
    np.testing.assert_array_equal(out, [1, 1])


def scan_model(**attrs: object) -> onnx.ModelProto:
    body = helper.make_graph(
        [helper.make_node("Add", ["acc", "row"], ["acc2"]), helper.make_node("Mul", ["acc2", "w"], ["out"])],
        "body", [vi("acc", F, [2]), vi("row", F, [2])], [vi("acc2", F, [2]), vi("out", F, [2])],
    )
    node = helper.make_node("Scan", ["init", "xs"], ["final", "ys"], body=body, num_scan_inputs=1, **attrs)
    return model([node], [vi("init", F, [2]), vi("xs", F, None), vi("w", F, [2])], [vi("final"), vi("ys")])


@pytest.mark.parametrize("attrs", [{}, {"scan_input_directions": [1]}, {"scan_output_directions": [1]},
                                   {"scan_input_axes": [1]}, {"scan_output_axes": [1]}])
def test_scan_axes_and_directions(attrs: dict) -> None:
    """Scan over rows with the body capturing w; input/output axes and directions honoured."""
    rng = np.random.default_rng(2)
    xs = rng.standard_normal((4, 2) if "scan_input_axes" not in attrs else (2, 4)).astype(np.float32)
    feeds = {"init": np.zeros(2, np.float32), "xs": xs, "w": np.array([2.0, -1.0], np.float32)}
    proto = scan_model(**attrs)
    expected_final = ReferenceEvaluator(proto).run(None, feeds)[0] if not attrs else None
    with Session(from_onnx(proto)) as s:
        final, ys = s.run(["final", "ys"], feeds)
    # an independent oracle: plain numpy
    rows = np.moveaxis(xs, attrs.get("scan_input_axes", [0])[0], 0)
    if attrs.get("scan_input_directions") == [1]:
        rows = rows[::-1]
    acc, outs = np.zeros(2, np.float32), []
    for row in rows:
        acc = acc + row
        outs.append(acc * feeds["w"])
    if attrs.get("scan_output_directions") == [1]:
        outs = outs[::-1]
    stacked = np.moveaxis(np.stack(outs), 0, attrs.get("scan_output_axes", [0])[0])
    np.testing.assert_allclose(final, acc, rtol=1e-6)
    np.testing.assert_allclose(ys, stacked, rtol=1e-6)
    if expected_final is not None:
        np.testing.assert_allclose(final, expected_final, rtol=1e-6)


def test_nested_control_flow_captures_through_two_levels() -> None:
    """An If inside a Loop body reads a value from the outermost graph."""
    inner_then = helper.make_graph([helper.make_node("Add", ["s_in", "bonus"], ["t"])], "t", [], [vi("t")])
    inner_else = helper.make_graph([helper.make_node("Identity", ["s_in"], ["e"])], "e", [], [vi("e")])
    body = helper.make_graph(
        [
            helper.make_node("Constant", [], ["two"], value=helper.make_tensor("two", TensorProto.INT64, [], [2])),
            helper.make_node("Mod", ["i", "two"], ["r"]),
            helper.make_node("Constant", [], ["zero"], value=helper.make_tensor("z", TensorProto.INT64, [], [0])),
            helper.make_node("Equal", ["r", "zero"], ["even"]),
            helper.make_node("If", ["even"], ["s_out"], then_branch=inner_then, else_branch=inner_else),
            helper.make_node("Identity", ["c_in"], ["c_out"]),
        ],
        "body", [vi("i", TensorProto.INT64, []), vi("c_in", TensorProto.BOOL, []), vi("s_in", F, [1])],
        [vi("c_out", TensorProto.BOOL, []), vi("s_out", F, [1])],
    )
    node = helper.make_node("Loop", ["n", "cond", "s0"], ["s"], body=body)
    proto = model([node], [vi("n", TensorProto.INT64, []), vi("cond", TensorProto.BOOL, []), vi("s0", F, [1]),
                           vi("bonus", F, [1])], [vi("s")])
    feeds = {"n": np.array(5, np.int64), "cond": np.array(True), "s0": np.zeros(1, np.float32),
             "bonus": np.array([1.5], np.float32)}
    (s,) = check(proto, feeds)
    assert s.tolist() == [4.5]
    # an omitted condition means "true" (the ONNX spec; onnx.reference skips such loops)
    unconditional = model([helper.make_node("Loop", ["n", "", "s0"], ["s"], body=body)],
                          [vi("n", TensorProto.INT64, []), vi("s0", F, [1]), vi("bonus", F, [1])], [vi("s")])
    del feeds["cond"]
    with Session(from_onnx(unconditional)) as session:
        assert session.run(["s"], feeds)[0].tolist() == [4.5]


def test_body_failure_names_the_body_op() -> None:
    """A kernel failing inside a body reports the body op's path under the control-flow op."""
    body = helper.make_graph([helper.make_node("MatMul", ["x", "x"], ["t"])], "then", [], [vi("t")])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["e"])], "else", [], [vi("e")])
    node = helper.make_node("If", ["cond"], ["y"], then_branch=body, else_branch=other, name="branch")
    proto = model([node], [vi("cond", TensorProto.BOOL, []), vi("x", F, [2, 3])], [vi("y")])
    with Session(from_onnx(proto)) as s, pytest.raises(ExecutionError) as info:
        s.run(["y"], {"cond": np.array(True), "x": np.zeros((2, 3), np.float32)})
    assert "while executing `branch` (If, amanda/onnx/17)" in str(info.value)
    assert "while executing `branch/MatMul_0` (MatMul, amanda/onnx/17) with inputs float32[2,3], float32[2,3]" in str(info.value)


def test_loop_body_updates_session_state() -> None:
    """A body containing AssignAdd on an outer variable updates the session's store each
    iteration, and the state persists across runs."""
    core, onnx_ns = {"namespace": "amanda/core"}, {"namespace": "amanda/onnx/17"}
    body = Container(
        None, "body", inputs=["i", "c_in", Port("ref", attrs={"captured": True})], outputs=["c_out"], attrs=onnx_ns,
        children=[op("Identity", "keep", ["input"], ["output"]),
                  op("Cast", "f", ["input"], ["output"], attrs={"to": 1}),
                  op("AssignAdd", "add", ["ref", "delta"], ["value"], attrs=core)],
        edges=[("body:c_in", "keep:input"), ("keep:output", "body:c_out"), ("body:i", "f:input"),
               ("f:output", "add:delta"), ("body:ref", "add:ref")],
    )
    g = Container(
        "G", "g", inputs=["n"], outputs=["total"], attrs=onnx_ns,
        children=[op("Variable", "acc", outputs=["ref"], attrs={"value": np.float32(0), "shared_name": "acc", **core}),
                  op("Loop", "loop", ["M", "cond", Port("ref", attrs={"captured": True})], [], attrs={"body": body}),
                  op("Read", "read", ["ref"], ["value"], attrs=core)],
        edges=[("g:n", "loop:M"), ("acc:ref", "loop:ref"), ("acc:ref", "read:ref"), ("loop:-1", "read:-1"),
               ("read:value", "g:total")],
    )
    with Session(g) as s:
        assert float(s.run(["total"], {"n": np.array(4, np.int64)})[0]) == 0 + 1 + 2 + 3
        assert float(s.run(["total"], {"n": np.array(3, np.int64)})[0]) == 6 + 0 + 1 + 2


def test_if_with_direct_containers() -> None:
    """If works on containers built by hand, body namespace inherited from the op."""
    ns = {"namespace": "amanda/onnx/17"}
    then = Container(None, "then", inputs=[Port("x", attrs={"captured": True})], outputs=["y"],
                     children=[op("Neg", "n", ["X"], ["Y"])], edges=[("then:x", "n:X"), ("n:Y", "then:y")])
    other = Container(None, "other", inputs=[Port("x", attrs={"captured": True})], outputs=["y"],
                      children=[op("Abs", "a", ["X"], ["Y"])], edges=[("other:x", "a:X"), ("a:Y", "other:y")])
    g = Container("G", "g", inputs=["c", "x"], outputs=["y"], attrs=ns,
                  children=[op("If", "if", ["cond", Port("x", attrs={"captured": True})], ["y"],
                               attrs={"then_branch": then, "else_branch": other})],
                  edges=[("g:c", "if:cond"), ("g:x", "if:x"), ("if:y", "g:y")])
    x = np.array([-2.0, 3.0])
    with Session(g) as s:
        np.testing.assert_array_equal(s.run(["y"], {"c": np.array(True), "x": x})[0], -x)
        np.testing.assert_array_equal(s.run(["y"], {"c": np.array([False]), "x": x})[0], np.abs(x))
