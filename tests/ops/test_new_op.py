"""A brand-new op defined in one place and used end to end: built, typed, run, differentiated
(checked against finite differences), exported to ONNX as a custom-domain node and loaded back.

The definition below is the whole of what adding an op takes (issue 29's "a new op is 1 edit
in 1 file"): its schema, its kernel, its type rule and its gradient, side by side.
"""

from __future__ import annotations

import numpy as np
import pytest

import amanda
from amanda import Input, model, ops
from amanda.autodiff.node import const
from amanda.build import Ops
from amanda.namespaces import AttrSchema, Namespace, OpSchema, register_namespace
from amanda.ops import define
from amanda.ops.registry import entry
from amanda.types import TensorType, infer_types

# ---- the definition: one file, one place ---------------------------------------------------
SWOOSH_NS = "amanda/onnx/org.amanda-tests/1"
register_namespace(Namespace(SWOOSH_NS, schemas=[OpSchema(
    "Swoosh", domain="org.amanda-tests", inputs=["X"], outputs=["Y"], attrs=[AttrSchema("alpha", "float", default=1.0)],
    doc="x * tanh(alpha * x)")]), replace=True)
swoosh = define("Swoosh", family="amanda/onnx", domain="org.amanda-tests", schema=SWOOSH_NS)


@swoosh.kernel
def _swoosh(attrs, x):
    return (x * np.tanh(float(attrs.get("alpha", 1.0)) * x),)


@swoosh.type_rule
def _swoosh_type(node):
    return [node.type(0)]


@swoosh.vjp
def _swoosh_grad(n):
    x, g = n.given(0), n.grad()
    a = const(float(n.attr("alpha", 1.0)), x)
    t = ops.Tanh(ops.Mul(a, x))
    slope = ops.Add(t, ops.Mul(ops.Mul(a, x), ops.Sub(const(1, t), ops.Mul(t, t))))
    return [ops.Mul(g, slope)]
# ---------------------------------------------------------------------------------------------


def _net() -> amanda.Container:
    x = Input("x", "float64", (2, 3))
    w = ops.Constant(value=np.linspace(-1.0, 1.0, 12).reshape(3, 4), name="w")
    y = Ops(SWOOSH_NS).Swoosh(ops.MatMul(x, w, name="mm"), alpha=0.7, name="sw")
    return model([x], {"y": y, "loss": ops.ReduceSum(ops.Mul(y, y), keepdims=0)}, name="net")


def _expected(x: np.ndarray) -> np.ndarray:
    h = x @ np.linspace(-1.0, 1.0, 12).reshape(3, 4)
    return h * np.tanh(0.7 * h)


X = np.random.default_rng(0).standard_normal((2, 3))


def test_the_registry_holds_every_fact_of_the_new_op() -> None:
    """Kernel, type rule and gradient land in one entry, found through the namespace's name."""
    found = entry("amanda/onnx", "Swoosh", domain="org.amanda-tests")
    assert found is not None and found.kernels[0].fn is _swoosh
    assert found.type_rule is _swoosh_type and found.vjp is _swoosh_grad and found.differentiable
    assert found.pure and found.foldable and found.schema == SWOOSH_NS
    assert amanda.autodiff.rules.rule_for(SWOOSH_NS, "Swoosh") is _swoosh_grad


def test_build_infer_and_run() -> None:
    """The builder types the op with its rule; a Session runs its kernel (numpy oracle)."""
    net = _net()
    types = infer_types(net)
    assert types.output((), "y") == TensorType("float64", (2, 4))
    with amanda.Session(net, threads=1) as s:
        (y,) = s.run(["y"], {"x": X})
    np.testing.assert_allclose(y, _expected(X), rtol=1e-12)


def test_differentiate_against_finite_differences() -> None:
    """grad uses the op's rule; central differences in float64 agree."""
    net = _net()
    g = amanda.grad(net, "loss", ["x"])
    with amanda.Session(g, threads=1) as s:
        (got,) = s.run(["grad/x"], {"x": X})

    def loss(x: np.ndarray) -> float:
        return float((_expected(x) ** 2).sum())

    eps, numeric = 1e-6, np.zeros_like(X)
    for index in np.ndindex(X.shape):
        up, down = X.copy(), X.copy()
        up[index] += eps
        down[index] -= eps
        numeric[index] = (loss(up) - loss(down)) / (2 * eps)
    np.testing.assert_allclose(got, numeric, rtol=1e-6, atol=1e-9)


def test_export_to_onnx_as_a_custom_domain_node_and_load_back(tmp_path) -> None:
    """The op leaves as a node of domain org.amanda-tests (opset 1 imported) and comes back runnable."""
    onnx = pytest.importorskip("onnx")
    from amanda.io.onnx import dump_onnx, load_onnx

    path = tmp_path / "swoosh.onnx"
    dump_onnx(_net(), str(path))
    proto = onnx.load(str(path))
    node = next(n for n in proto.graph.node if n.op_type == "Swoosh")
    assert node.domain == "org.amanda-tests"
    assert {(o.domain, o.version) for o in proto.opset_import} >= {("org.amanda-tests", 1)}
    back = load_onnx(str(path))
    swooshes = [c for _, c, _ in amanda.walk(back) if c.type == "Swoosh"]
    assert len(swooshes) == 1
    with amanda.Session(back, threads=1) as s:
        (y,) = s.run(["y"], {"x": X})
    np.testing.assert_allclose(y, _expected(X), rtol=1e-12)
