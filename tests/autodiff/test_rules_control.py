"""If, Scan and Loop: gradients through the taken branch and through every iteration agree
with central finite differences in float64 (models written with onnx.helper, imported)."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

import amanda  # noqa: E402
from amanda.io.onnx.importer import from_onnx  # noqa: E402
from tests.autodiff.fd import numeric  # noqa: E402

D = TensorProto.DOUBLE


def vi(name: str, elem: int = D, shape: list | None = None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def node(op_type: str, inputs: list, outputs: list, **attrs) -> onnx.NodeProto:
    return helper.make_node(op_type, inputs, outputs, **attrs)


def imported(nodes: list, inputs: list) -> amanda.Container:
    graph = helper.make_graph(nodes, "g", inputs, [vi("loss", D, [])])
    return from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8))


def agree(net: amanda.Container, feeds: dict, wrt: list[str]) -> None:
    """amanda.grad of the loss equals central differences for every name of ``wrt``."""
    with amanda.Session(amanda.grad(net, "loss", wrt), threads=1) as s:
        got = s.run([f"grad/{w}" for w in wrt], feeds)
    with amanda.Session(net, threads=1) as s:
        for name, value in zip(wrt, got):
            expected = numeric(lambda f: float(s.run(["loss"], f)[0]), feeds, name)
            np.testing.assert_allclose(value, expected, rtol=1e-6, atol=1e-8, err_msg=name)


def if_net(cond: bool) -> tuple[amanda.Container, dict, list[str]]:
    """then: sin(x * a); else: x * x + b; its feeds and what to differentiate."""
    then = helper.make_graph([node("Mul", ["x", "a"], ["t0"]), node("Sin", ["t0"], ["t"])], "then", [], [vi("t")])
    other = helper.make_graph([node("Mul", ["x", "x"], ["e0"]), node("Add", ["e0", "b"], ["e"])], "else", [], [vi("e")])
    net = imported([node("If", ["cond"], ["y"], then_branch=then, else_branch=other), node("Mul", ["y", "r"], ["yr"]),
                    node("ReduceSum", ["yr"], ["loss"], keepdims=0)],
                   [vi("cond", TensorProto.BOOL, []), *(vi(k, D, [3]) for k in "xabr")])
    rng = np.random.default_rng(0)
    return net, {"cond": np.array(cond), **{k: rng.standard_normal(3) for k in "xabr"}}, ["x", "a", "b"]


@pytest.mark.parametrize("cond", [True, False])
def test_if_differentiates_the_taken_branch(cond):
    """The branch not taken gives its values zeros."""
    net, feeds, wrt = if_net(cond)
    agree(net, feeds, wrt)
    with amanda.Session(amanda.grad(net, "loss", ["a", "b"]), threads=1) as s:
        ga, gb = s.run(["grad/a", "grad/b"], feeds)
    assert not (gb if cond else ga).any()


SCAN_BODY = helper.make_graph(  # h' = tanh(h * w + x_t); y_t = h' * x_t
    [node("Mul", ["h", "w"], ["hw"]), node("Add", ["hw", "xt"], ["a"]), node("Tanh", ["a"], ["h2"]),
     node("Mul", ["h2", "xt"], ["y"])],
    "body", [vi("h", D, [2]), vi("xt", D, [2])], [vi("h2", D, [2]), vi("y", D, [2])])


@pytest.mark.parametrize(("in_axis", "in_dir", "out_axis", "out_dir"),
                         [(0, 0, 0, 0), (1, 1, 0, 0), (0, 0, 1, 1), (1, 0, 0, 1)])
def test_scan_through_its_iterations(in_axis, in_dir, out_axis, out_dir):
    """Scan with a state, a scan input and a captured weight, every axis and direction; the
    loss reads the final state and the scan output."""
    agree(*scan_net(in_axis, in_dir, out_axis, out_dir))


def scan_net(in_axis: int, in_dir: int, out_axis: int, out_dir: int) -> tuple[amanda.Container, dict, list[str]]:
    xshape, rshape = ([3, 2] if in_axis == 0 else [2, 3]), ([3, 2] if out_axis == 0 else [2, 3])
    net = imported([node("Scan", ["h0", "x"], ["hT", "ys"], body=SCAN_BODY, num_scan_inputs=1,
                         scan_input_axes=[in_axis], scan_input_directions=[in_dir], scan_output_axes=[out_axis],
                         scan_output_directions=[out_dir]),
                    node("Mul", ["ys", "r"], ["yr"]), node("ReduceSum", ["yr"], ["l1"], keepdims=0),
                    node("Mul", ["hT", "q"], ["hq"]), node("ReduceSum", ["hq"], ["l2"], keepdims=0),
                    node("Add", ["l1", "l2"], ["loss"])],
                   [vi("h0", D, [2]), vi("x", D, xshape), vi("w", D, [2]), vi("r", D, rshape), vi("q", D, [2])])
    rng = np.random.default_rng(1)
    feeds = {"h0": rng.standard_normal(2), "x": rng.standard_normal(xshape), "w": rng.standard_normal(2),
             "r": rng.standard_normal(rshape), "q": rng.standard_normal(2)}
    return net, feeds, ["h0", "x", "w"]


LOOP_BODY = helper.make_graph(  # s' = tanh(s * w + x * i); scan out s' * x; go on while sum(s') < limit
    [node("Cast", ["i"], ["fi"], to=D), node("Mul", ["x", "fi"], ["xi"]), node("Mul", ["s_in", "w"], ["sw"]),
     node("Add", ["sw", "xi"], ["a"]), node("Tanh", ["a"], ["s_out"]), node("ReduceSum", ["s_out"], ["tot"], keepdims=0),
     node("Less", ["tot", "limit"], ["c_out"]), node("Mul", ["s_out", "x"], ["scan"])],
    "body", [vi("i", TensorProto.INT64, []), vi("c_in", TensorProto.BOOL, []), vi("s_in", D, [2])],
    [vi("c_out", TensorProto.BOOL, []), vi("s_out", D, [2]), vi("scan", D, [2])])


@pytest.mark.parametrize(("limit", "iterations"), [(10.0, 4), (-10.0, 1)])
def test_loop_through_its_iterations(limit, iterations):
    """Loop with a trip count, a carried value, a scan output and captured values; the body's
    condition ends it early (a limit of -10: after the first iteration)."""
    net, feeds, wrt = loop_net(limit)
    with amanda.Session(net, threads=1) as s:
        assert s.run(["Loop_0:v_final_and_scan_outputs_1"], feeds)[0].shape[0] == iterations
    agree(net, feeds, wrt)


def loop_net(limit: float) -> tuple[amanda.Container, dict, list[str]]:
    net = imported([node("Loop", ["n", "cond", "s0"], ["s", "sums"], body=LOOP_BODY),
                    node("ReduceSum", ["sums"], ["l1"], keepdims=0), node("Mul", ["s", "q"], ["sq"]),
                    node("ReduceSum", ["sq"], ["l2"], keepdims=0), node("Add", ["l1", "l2"], ["loss"])],
                   [vi("n", TensorProto.INT64, []), vi("cond", TensorProto.BOOL, []), vi("s0", D, [2]),
                    vi("x", D, [2]), vi("w", D, [2]), vi("limit", D, []), vi("q", D, [2])])
    rng = np.random.default_rng(2)
    feeds = {"n": np.array(4), "cond": np.array(True), "s0": rng.standard_normal(2), "x": rng.standard_normal(2),
             "w": rng.standard_normal(2), "limit": np.array(limit), "q": rng.standard_normal(2)}
    return net, feeds, ["s0", "x", "w"]


@pytest.mark.parametrize("build", [lambda: if_net(False), lambda: scan_net(1, 1, 0, 1), lambda: loop_net(10.0)],
                         ids=["if", "scan", "loop"])
def test_backward_control_flow_exports_to_onnx(build):
    """The gradient container (an If, a Scan or a Loop of vector-Jacobian bodies) exports to
    ONNX, and onnxruntime computes the same loss and gradients."""
    ort = pytest.importorskip("onnxruntime")
    from amanda.io.onnx import to_onnx

    net, feeds, wrt = build()
    g = amanda.grad(net, "loss", wrt)
    with amanda.Session(g, threads=1) as s:
        want = s.run(list(g.output_names), feeds)
    session = ort.InferenceSession(to_onnx(g).SerializeToString(), providers=["CPUExecutionProvider"])
    names = {i.name for i in session.get_inputs()}
    for expected, got in zip(want, session.run(None, {k: v for k, v in feeds.items() if k in names})):
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
