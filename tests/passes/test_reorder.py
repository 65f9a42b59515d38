"""pool_before_relu: MaxPool moved before the Relu that fed it gives onnxruntime's results (as a
pass and inside a Session's plans), keeps both ops, and leaves pools it cannot move alone."""

from __future__ import annotations

import numpy as np
import pytest

import amanda
from amanda.passes import pool_before_relu

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

from amanda.io.onnx.importer import from_onnx  # noqa: E402
from tests.exec.onnx_oracle import onnxruntime_outputs  # noqa: E402

RNG = np.random.default_rng(9)


def _relu_pool(x_shape: tuple, fetch_indices: bool = False, extra_reader: bool = False, **pool: object) -> onnx.ModelProto:
    """x -> Relu -> MaxPool(**pool) -> y (optionally also the pool's Indices, or the Relu's output)."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["y", "i"] if fetch_indices else ["y"], **pool)]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    if fetch_indices:
        outputs.append(helper.make_tensor_value_info("i", TensorProto.INT64, None))
    if extra_reader:
        outputs.append(helper.make_tensor_value_info("r", TensorProto.FLOAT, None))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)], outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize(("x_shape", "pool"), [
    ((4, 3, 28, 28), {"kernel_shape": [2, 2], "strides": [2, 2]}),  # the CNN's pools
    ((1, 5, 17, 15), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),  # ResNet's stem, odd
    ((2, 2, 13, 12), {"kernel_shape": [3, 2], "dilations": [2, 1], "pads": [2, 0, 1, 1]}),  # dilated, uneven pads
    ((3, 4, 31), {"kernel_shape": [4], "strides": [3]}),  # 1-D
])
def test_moved_pool_matches_onnxruntime(x_shape: tuple, pool: dict) -> None:
    """After the pass the pool reads x and the Relu reads the pool, and a Session (whose plans move it
    too) agrees with onnxruntime, also on values that are all negative in some windows."""
    model = _relu_pool(x_shape, **pool)
    x = RNG.standard_normal(x_shape).astype(np.float32)
    x[..., :3] = -np.abs(x[..., :3])  # windows without a positive value
    (expected,) = onnxruntime_outputs(model, {"x": x})
    moved, report = pool_before_relu(from_onnx(model))
    assert len(report.replaced) == 1
    pool_op = next(c for c in moved.children if c.type == "MaxPool")
    assert (amanda.SELF, (pool_op.name,)) in {(e.src.op, e.dst.op) for e in moved.edges}
    for candidate in (moved, from_onnx(model)):
        with amanda.Session(candidate) as session:
            (ours,) = session.run(["y"], {"x": x})
            order = [info.op_type for info in session.plan(["y"], {"x": x}).infos]
        assert order == ["MaxPool", "Relu"]
        np.testing.assert_array_equal(ours, expected)


def test_pass_keeps_both_ops_and_leaves_its_input_alone() -> None:
    """The moved ops are the very same objects (paths, uids, attributes kept), and the input model is unchanged."""
    model = from_onnx(_relu_pool((1, 1, 4, 4), kernel_shape=[2, 2], strides=[2, 2]))
    edges = model.edges
    moved, _ = pool_before_relu(model)
    assert model.edges == edges
    assert [id(c) for c in moved.children] == [id(c) for c in model.children]
    relu = next(c for c in moved.children if c.type == "Relu")
    pool = next(c for c in moved.children if c.type == "MaxPool")
    readers = {(e.src.op, e.dst.op) for e in moved.edges}
    assert (amanda.SELF, (pool.name,)) in readers and ((pool.name,), (relu.name,)) in readers
    assert ((relu.name,), amanda.SELF) in readers


@pytest.mark.parametrize("case", ["ceil_mode", "indices", "relu_read_elsewhere"])
def test_pools_that_cannot_move_stay(case: str) -> None:
    """A ceil-mode pool, a pool whose Indices are read, or a Relu read by another op are left as they are."""
    pool = {"kernel_shape": [2, 2], "strides": [2, 2]}
    if case == "ceil_mode":
        pool["ceil_mode"] = 1
    model = from_onnx(_relu_pool((1, 2, 5, 5), fetch_indices=case == "indices",
                                 extra_reader=case == "relu_read_elsewhere", **pool))
    out, report = pool_before_relu(model)
    assert not report.changed and out is model


def test_two_pairs_in_a_row_move_together() -> None:
    """Relu -> MaxPool -> Relu -> MaxPool becomes MaxPool -> Relu -> MaxPool -> Relu and computes
    the same as the numpy formula of the original order."""
    ops = [amanda.op("Relu", "r1", ["X"], ["Y"]),
           amanda.op("MaxPool", "p1", ["X"], ["Y"], {"kernel_shape": [2], "strides": [2]}),
           amanda.op("Relu", "r2", ["X"], ["Y"]),
           amanda.op("MaxPool", "p2", ["X"], ["Y"], {"kernel_shape": [2], "strides": [2]})]
    g = amanda.Container(None, "g", inputs=["x"], outputs=["y"], children=ops, attrs={"namespace": "amanda/onnx/17"},
                         edges=[("g:x", "r1:X"), ("r1:Y", "p1:X"), ("p1:Y", "r2:X"), ("r2:Y", "p2:X"), ("p2:Y", "g:y")])
    out, report = pool_before_relu(g)
    assert sorted(report.replaced) == ["r1", "r2"]
    x = RNG.standard_normal((2, 3, 16)).astype(np.float32)
    (y,) = amanda.Session(out, threads=1).run(["y"], {"x": x})
    step = np.maximum(x, 0).reshape(2, 3, 8, 2).max(-1)
    np.testing.assert_array_equal(y, np.maximum(step, 0).reshape(2, 3, 4, 2).max(-1))


@pytest.mark.parametrize("attrs", [
    {"kernel_shape": 2.0}, {"kernel_shape": [2.5, float("nan")]}, {"kernel_shape": "ab"},
    {"kernel_shape": [2, 2], "pads": 1.5}, {"kernel_shape": [2, 2], "ceil_mode": "x"},
    {"kernel_shape": [float("inf"), 2]},
])
def test_a_malformed_pool_is_left_in_place(attrs: dict) -> None:
    """A MaxPool whose window attributes no MaxPool can have is not moved, and optimize raises
    nothing, where a bare TypeError came; running it ends in a result or an AmandaError."""
    relu = amanda.op("Relu", "r", ["X"], ["Y"])
    pool = amanda.op("MaxPool", "p", ["X"], ["Y"], attrs)
    g = amanda.Container("G", "g", inputs=["x"], outputs=["y"], children=[relu, pool], attrs={"namespace": "amanda/onnx/17"},
                         edges=[("g:x", "r:X"), ("r:Y", "p:X"), ("p:Y", "g:y")])
    out, report = pool_before_relu(g)
    assert out is g and not report.changed
    amanda.optimize(g)
    try:
        amanda.Session(g).run(["y"], {"x": np.ones((1, 1, 4, 4), np.float32)})
    except amanda.AmandaError:
        pass
