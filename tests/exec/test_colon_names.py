"""Top-level names holding ':' (tf2onnx's `input:0`, torch's `onnx::MatMul_1`) are names, not endpoints."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import amanda
from amanda import Endpoint, Input, model, ops
from amanda.io.onnx.importer import from_onnx

RNG = np.random.default_rng(7)


def test_a_tf2onnx_style_model_is_fed_and_fetched_by_its_port_names() -> None:
    """An input `input:0` and an output `Identity:0` are fed and fetched by those names, on the
    sequential and the threaded runner; feeding the output replaces its value."""
    x = Input("input:0", "float32", (2, 3))
    net = model([x], {"Identity:0": ops.Relu(x)})
    fed = RNG.standard_normal((2, 3)).astype(np.float32)
    for threads in (1, 2):
        with amanda.Session(net, threads=threads) as session:
            out, echoed = session.run(["Identity:0", "input:0"], {"input:0": fed})
            np.testing.assert_array_equal(out, np.maximum(fed, 0))
            np.testing.assert_array_equal(echoed, fed)
            replaced = np.full((2, 3), 5.0, np.float32)
            np.testing.assert_array_equal(session.run("Identity:0", {"Identity:0": replaced})[0], replaced)


def test_a_top_port_name_wins_over_the_endpoint_it_also_spells() -> None:
    """A top output called `r:Y` beside an op `r` with output `Y`: the string is the top output;
    `Endpoint("r", "Y")` and `("r", "Y")` reach the op; a name both input and output is the output
    when fetched and the input when fed."""
    x = Input("x", "float32", (2, 3))
    r = ops.Relu(x, name="r")
    net = model([x], {"r:Y": ops.Neg(r), "x": ops.Abs(x)})
    fed = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
    with amanda.Session(net) as session:
        top, inner, pair, both = session.run(["r:Y", Endpoint("r", "Y"), ("r", "Y"), "x"], {"x": fed})
    np.testing.assert_array_equal(top, -np.maximum(fed, 0))
    np.testing.assert_array_equal(inner, np.maximum(fed, 0))
    np.testing.assert_array_equal(pair, np.maximum(fed, 0))
    np.testing.assert_array_equal(both, np.abs(fed))


def test_an_onnx_model_with_colon_names_matches_onnxruntime() -> None:
    """An ONNX model made with onnx.helper, named as tf2onnx and torch name things (`input:0`,
    `onnx::MatMul_7`, `Identity:0`), imports and runs by those names as onnxruntime runs it."""
    weight = RNG.standard_normal((3, 4)).astype(np.float32)
    bias = RNG.standard_normal(4).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["input:0", "onnx::MatMul_7"], ["dense/MatMul:0"], name="dense/MatMul"),
        helper.make_node("Add", ["dense/MatMul:0", "dense/bias:0"], ["dense/BiasAdd:0"], name="dense/BiasAdd"),
        helper.make_node("Relu", ["dense/BiasAdd:0"], ["Identity:0"], name="Identity"),
        helper.make_node("Tanh", ["dense/BiasAdd:0"], ["Identity_1:0"], name="Identity_1"),
    ]
    graph = helper.make_graph(
        nodes, "tf2onnx", [helper.make_tensor_value_info("input:0", TensorProto.FLOAT, ["batch", 3])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["batch", 4]) for n in ("Identity:0", "Identity_1:0")],
        initializer=[numpy_helper.from_array(weight, "onnx::MatMul_7"), numpy_helper.from_array(bias, "dense/bias:0")])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    fed = RNG.standard_normal((5, 3)).astype(np.float32)
    expected = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        ["Identity:0", "Identity_1:0"], {"input:0": fed})
    imported = from_onnx(proto)
    assert imported.input_names == ("input:0",) and imported.output_names == ("Identity:0", "Identity_1:0")
    with amanda.Session(imported) as session:
        got = session.run(["Identity:0", "Identity_1:0"], {"input:0": fed})
    for a, b in zip(got, expected):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_gradients_named_after_colon_names_are_fetched() -> None:
    """grad with respect to a weight `onnx::MatMul_1` and an input `input:0` gives outputs
    `grad/onnx::MatMul_1` and `grad/input:0`, fetched by name, equal to the analytic gradients
    of sum(x @ w)."""
    x = Input("input:0", "float64", (2, 3))
    w_value = RNG.standard_normal((3, 1))
    w = ops.Constant(value=w_value, name="onnx::MatMul_1")
    net = model([x], {"loss:0": ops.ReduceSum(ops.MatMul(x, w), keepdims=0)})
    g = amanda.grad(net, "loss:0", ["onnx::MatMul_1", "input:0"])
    assert g.output_names == ("loss:0", "grad/onnx::MatMul_1", "grad/input:0")
    fed = RNG.standard_normal((2, 3))
    with amanda.Session(g) as session:
        loss, dw, dx = session.run(["loss:0", "grad/onnx::MatMul_1", "grad/input:0"], {"input:0": fed})
    np.testing.assert_allclose(loss, (fed @ w_value).sum())
    np.testing.assert_allclose(dw, fed.sum(axis=0)[:, None])
    np.testing.assert_allclose(dx, np.broadcast_to(w_value.T, (2, 3)))
