"""Gradient containers of a model at any ONNX opset use that opset only: their backward ops are
written in the model's namespace, so the container exports to ONNX, and onnxruntime (or ONNX's
reference evaluator, for an opset onnxruntime does not run) computes gradients equal to central
finite differences."""

from __future__ import annotations

import numpy as np
import pytest

import amanda
from amanda import Input, model
from amanda.build import Ops
from tests.autodiff.fd import numeric

onnx = pytest.importorskip("onnx")
NEWEST = onnx.defs.onnx_opset_version()
OPSETS = [13, 17, 18, 20, NEWEST]
I64 = np.int64


def arr(seed: int, shape: tuple) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape)


def _reduce(o: Ops, opset: int, kind: str, x: amanda.build.Value, axes: list[int]) -> amanda.build.Value:
    """A Reduce* op over ``axes``: an attribute before opset 18 (ReduceSum: 13), an input after."""
    since = 13 if kind == "ReduceSum" else 18
    if opset >= since:
        return getattr(o, kind)(x, np.array(axes, I64), keepdims=1)
    return getattr(o, kind)(x, axes=axes, keepdims=1)


def network(opset: int) -> tuple[amanda.Container, dict[str, np.ndarray], list[str]]:
    """A float64 model of ``opset`` whose loss goes through convolution, pooling, matrix
    products, activations, softmax, reductions and shape ops (and LayerNormalization from 17)."""
    o = Ops(f"amanda/onnx/{opset}")
    x = Input("x", "float64", (2, 2, 6, 6))
    kernel = o.Constant(value=arr(1, (3, 2, 3, 3)) * 0.3, name="kernel")
    dense = o.Constant(value=arr(2, (3, 4)) * 0.3, name="dense")
    h = o.Relu(o.Conv(x, kernel, o.Constant(value=arr(3, (3,)) * 0.1, name="bias"), kernel_shape=[3, 3],
                      pads=[1, 1, 1, 1]))
    h = o.MaxPool(h, kernel_shape=[2, 2], strides=[2, 2])[0]
    h = o.AveragePool(h, kernel_shape=[2, 2], strides=[1, 1], pads=[0, 0, 1, 1], count_include_pad=0)
    h = o.Reshape(o.Transpose(h, perm=[0, 2, 3, 1]), np.array([2, 9, 3], I64))
    h = o.Tanh(o.MatMul(h, dense))
    if opset >= 17:
        h = o.LayerNormalization(h, o.Constant(value=arr(4, (4,)), name="scale"), axis=-1)[0]
    h = o.Mul(o.Softmax(h, axis=1), o.Sigmoid(h))
    h = o.Concat(_reduce(o, opset, "ReduceMean", h, [2]), _reduce(o, opset, "ReduceMax", h, [2]), axis=2)
    loss = o.ReduceSum(o.Mul(h, o.Constant(value=arr(5, (2, 9, 2)), name="r")), keepdims=0)
    net = model([x], {"loss": loss}, name="net")
    return net, {"x": arr(0, (2, 2, 6, 6))}, ["kernel", "dense", "bias"]


def _run(model_proto: object, feeds: dict, names: list[str]) -> list[np.ndarray]:
    """The outputs ``names`` by onnxruntime, or by ONNX's reference evaluator where onnxruntime
    does not run the opset."""
    ort = pytest.importorskip("onnxruntime")
    data = model_proto.SerializeToString()
    try:
        session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    except Exception:  # noqa: BLE001 - an opset this onnxruntime lacks: use the reference
        from onnx.reference import ReferenceEvaluator

        return list(ReferenceEvaluator(model_proto).run(names, feeds))
    return session.run(names, feeds)


@pytest.mark.parametrize("opset", OPSETS)
def test_gradients_of_a_model_at_an_opset_export_and_match_differences(opset: int) -> None:
    """The gradient container's ops are all in the model's namespace; its ONNX export passes
    ONNX's checker, imports that opset only, and computes the differences' gradients."""
    from amanda.io.onnx import to_onnx

    net, feeds, weights = network(opset)
    g = amanda.grad(net, "loss", [*weights, "x"])
    spaces = {node.attrs.get("namespace") for _, node, _ in amanda.walk(g) if node.is_op}
    assert spaces == {f"amanda/onnx/{opset}"}, spaces
    assert amanda.validate(g) == []
    exported = to_onnx(g)
    onnx.checker.check_model(exported)
    assert [(o.domain, o.version) for o in exported.opset_import if o.domain in ("", "ai.onnx")] == [("", opset)]
    names = [f"grad/{w}" for w in weights] + ["grad/x"]
    got = dict(zip(names, _run(exported, feeds, names)))
    with amanda.Session(net, threads=1) as session:
        def loss(values: dict) -> float:
            return float(session.run(["loss"], values)[0])

        np.testing.assert_allclose(got["grad/x"], numeric(loss, feeds, "x"), rtol=1e-5, atol=1e-7)
    for w in weights:
        def moved(values: dict, w: str = w) -> float:
            changed = amanda.replace(net, [w], lambda c, v=values[w]: c.with_attrs(value=v))
            with amanda.Session(changed, threads=1) as s:
                return float(s.run(["loss"], feeds)[0])

        start = {w: np.asarray(net.child(w).attrs["value"])}
        np.testing.assert_allclose(got[f"grad/{w}"], numeric(moved, start, w), rtol=1e-5, atol=1e-7, err_msg=w)


def test_a_model_whose_backward_ops_have_no_form_at_its_opset_is_named() -> None:
    """Where a backward op cannot be written at the model's opset (opset 8 has no
    ConstantOfShape; before 16 ScatterElements cannot add at repeated positions), grad raises a
    SchemaError naming the opset and the op instead of mixing opsets."""
    x = Input("x", "float32", (2, 3))
    o = Ops("amanda/onnx/7")
    net = model([x], {"loss": o.ReduceSum(o.Tanh(x), keepdims=0)}, name="old")
    with pytest.raises(amanda.SchemaError, match="amanda/onnx/7.*ConstantOfShape"):
        amanda.grad(net, "loss", ["x"])
    o = Ops("amanda/onnx/13")
    net = model([x], {"loss": o.ReduceSum(o.Gather(x, np.array([0, 0, 1]), name="pick"), keepdims=0)}, name="rows")
    with pytest.raises(amanda.SchemaError, match="`pick`.*opset 16"):
        amanda.grad(net, "loss", ["x"])
    net = model([x], {"loss": o.ReduceSum(o.Gather(x, np.array([1, -1])), keepdims=0)}, name="rows")
    with pytest.raises(amanda.SchemaError, match="opset 16"):  # -1 may be the row 1 is
        amanda.grad(net, "loss", ["x"])


def test_old_opsets_differentiate_what_they_can_write() -> None:
    """At opset 13 a Slice, a Gather of distinct indices and a MaxPool whose windows do not
    overlap scatter their gradient back without adding (their positions cannot repeat), equal
    to central differences."""
    o = Ops("amanda/onnx/13")
    x = Input("x", "float64", (1, 1, 4, 4))
    pooled = o.Gather(o.MaxPool(x, kernel_shape=[2, 2], strides=[2, 2])[0], np.array([1, 0], I64), axis=3)
    picked = o.Slice(pooled, np.array([1], I64), np.array([2], I64), np.array([3], I64))
    net = model([x], {"loss": o.ReduceSum(o.Mul(picked, picked), keepdims=0)}, name="net")
    g = amanda.grad(net, "loss", ["x"])
    feeds = {"x": arr(7, (1, 1, 4, 4))}
    with amanda.Session(g, threads=1) as s, amanda.Session(net, threads=1) as f:
        (got,) = s.run(["grad/x"], feeds)
        expected = numeric(lambda v: float(f.run(["loss"], v)[0]), feeds, "x")
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-8)
