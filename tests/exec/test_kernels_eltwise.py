"""The float32 elementwise kernels (rational erf, fused activations) against float64 references and onnxruntime."""

from __future__ import annotations

import math

import numpy as np
import pytest

import amanda
from amanda.exec import Session
from amanda.exec.kernels.math_util import erf32, gelu32
from amanda.ops.catalog import FUSED

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from amanda.io.onnx.importer import from_onnx  # noqa: E402
from tests.exec.onnx_oracle import amanda_outputs, one_node, onnxruntime_outputs  # noqa: E402


def _erf64(x: np.ndarray) -> np.ndarray:
    return np.array([math.erf(float(v)) for v in x])


def test_erf32_is_within_half_a_micro_of_float64_erf_on_a_dense_grid() -> None:
    """The rational float32 erf stays within 5e-7 of float64 erf over [-6, 6] (every 1e-4) and in the tails."""
    x = np.concatenate([np.linspace(-6, 6, 120_001), [1e-30, -1e-30, 1e-40, 30.0, -30.0]]).astype(np.float32)
    y = erf32(x)
    assert y.dtype == np.float32
    assert np.abs(y.astype(np.float64) - _erf64(x)).max() < 5e-7


def test_erf32_keeps_odd_symmetry_signs_and_special_values() -> None:
    """erf32 is odd, saturates to ±1 at ±inf, keeps nan and the sign of zero, and is relative-accurate near 0."""
    x = np.float32([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-20, -1e-20])
    y = erf32(x)
    assert y[0] == 0 and not np.signbit(y[0]) and y[1] == 0 and np.signbit(y[1])
    assert y[2] == 1 and y[3] == -1 and np.isnan(y[4])
    np.testing.assert_allclose(y[5:], [2 / math.sqrt(math.pi) * 1e-20, -2 / math.sqrt(math.pi) * 1e-20], rtol=1e-6)
    grid = np.linspace(0, 5, 5001, dtype=np.float32)
    np.testing.assert_array_equal(erf32(-grid), -erf32(grid))


def test_erf32_does_not_modify_its_input() -> None:
    """erf32 writes into new buffers only."""
    x = np.linspace(-8, 8, 101, dtype=np.float32)
    kept = x.copy()
    erf32(x)
    np.testing.assert_array_equal(x, kept)


@pytest.mark.parametrize("shape", [(3, 5), (2, 3, 4)])
def test_erf32_of_a_strided_view_matches_the_contiguous_copy(shape: tuple) -> None:
    """A transposed (non-contiguous) input gives the same values as its contiguous copy."""
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32).T
    np.testing.assert_array_equal(erf32(x), erf32(np.ascontiguousarray(x)))


def _gelu_chain(dtype: int, opset: int) -> onnx.ModelProto:
    """x -> Div(sqrt 2) -> Erf -> Add(1) -> Mul(x) -> Mul(0.5): the exact GELU as torch exports it."""
    consts = [numpy_helper.from_array(np.asarray(v, helper.tensor_dtype_to_np_dtype(dtype)), n)
              for n, v in (("r2", 2 ** 0.5), ("one", 1.0), ("half", 0.5))]
    nodes = [helper.make_node("Div", ["x", "r2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
             helper.make_node("Add", ["e", "one"], ["a"]), helper.make_node("Mul", ["x", "a"], ["m"]),
             helper.make_node("Mul", ["m", "half"], ["y"])]
    graph = helper.make_graph(nodes, "gelu", [helper.make_tensor_value_info("x", dtype, ["N", 64])],
                              [helper.make_tensor_value_info("y", dtype, ["N", 64])], consts)
    opsets = [helper.make_opsetid("", opset)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=helper.find_min_ir_version_for(opsets))


@pytest.mark.parametrize("dtype,opset", [(TensorProto.FLOAT, 17), (TensorProto.FLOAT, 13), (TensorProto.DOUBLE, 17),
                                         (TensorProto.FLOAT16, 17)])
def test_session_runs_the_exported_gelu_chain_fused_as_onnxruntime_does(dtype: int, opset: int) -> None:
    """Below opset 20 a Session's plan runs torch's GELU chain as one amanda/fused Gelu, agreeing with
    onnxruntime (float64: math.erf)."""
    proto = _gelu_chain(dtype, opset)
    np_dtype = helper.tensor_dtype_to_np_dtype(dtype)
    x = (np.random.default_rng(3).standard_normal((16, 64)) * 3).astype(np_dtype)
    x[0, :4] = [0.0, -0.0, 5.0, -5.0]
    with Session(from_onnx(proto)) as session:
        ours = session.run(["y"], {"x": x})[0]
        plan = session.plan(["y"], {"x": x})
    assert [(i.op_type, i.namespace) for i in plan.infos] == [("Gelu", FUSED)]
    if dtype == TensorProto.DOUBLE:  # onnxruntime has no float64 Erf
        theirs = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x.ravel()]).reshape(x.shape)
    else:
        theirs = onnxruntime_outputs(proto, {"x": x})[0]
    assert ours.dtype == np_dtype
    tol = 2e-3 if dtype == TensorProto.FLOAT16 else 1e-6
    np.testing.assert_allclose(ours, theirs, rtol=tol, atol=tol)


def test_exported_gelu_chain_is_left_alone_by_public_optimize_below_opset_20() -> None:
    """amanda.optimize keeps the chain as ONNX ops below opset 20, so its output still exports."""
    model = from_onnx(_gelu_chain(TensorProto.FLOAT, 17))
    assert sorted(c.type for c in amanda.optimize(model).model.children if c.is_op and c.type != "Constant") == \
        ["Add", "Div", "Erf", "Mul", "Mul"]


@pytest.mark.parametrize("op_type,attrs", [("HardSigmoid", {}), ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}),
                                           ("HardSwish", {})])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
def test_hard_activations_match_onnxruntime_and_leave_the_feed_alone(op_type: str, attrs: dict, dtype: type) -> None:
    """HardSigmoid and HardSwish (one buffer each) agree with onnxruntime (float32) and with numpy in float64,
    in the input dtype, saturated ends and nan included, and do not write into the fed array."""
    x = np.concatenate([np.random.default_rng(5).standard_normal(60) * 5,
                        [-1e4, -3.0, 3.0, 1e4, np.nan]]).astype(dtype).reshape(5, 13)
    kept = x.copy()
    model = one_node(helper.make_node(op_type, ["x"], ["y"], **attrs), {"x": x}, 17)
    ours = amanda_outputs(model, {"x": x})[0]
    wide = x.astype(np.float64)
    default_alpha = 0.2 if op_type == "HardSigmoid" else 1 / 6
    gate = np.clip(attrs.get("alpha", default_alpha) * wide + attrs.get("beta", 0.5), 0, 1)
    expected = [gate if op_type == "HardSigmoid" else wide * gate]
    if dtype == np.float32:
        expected.append(onnxruntime_outputs(model, {"x": x})[0])
    assert ours.dtype == dtype
    tol = 2e-3 if dtype == np.float16 else 1e-6
    for theirs in expected:
        np.testing.assert_allclose(ours, theirs, rtol=tol, atol=tol)
    np.testing.assert_array_equal(x, kept)


def _silu_and_gate(dtype: int) -> onnx.ModelProto:
    """y = x * Sigmoid(x) (SiLU, fused) and z = y * Sigmoid(g) (a gate of another tensor, left alone)."""
    nodes = [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", ["s", "x"], ["y"]),
             helper.make_node("Sigmoid", ["g"], ["t"]), helper.make_node("Mul", ["y", "t"], ["z"])]
    graph = helper.make_graph(nodes, "silu", [helper.make_tensor_value_info("x", dtype, [4, 64]),
                                              helper.make_tensor_value_info("g", dtype, [4, 1])],
                              [helper.make_tensor_value_info("z", dtype, [4, 64])])
    opsets = [helper.make_opsetid("", 17)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=helper.find_min_ir_version_for(opsets))


@pytest.mark.parametrize("dtype", [TensorProto.FLOAT, TensorProto.FLOAT16])
def test_session_runs_silu_as_one_fused_swish_and_leaves_gates_alone(dtype: int) -> None:
    """x * Sigmoid(x) runs as one amanda/fused Swish, a Sigmoid gating another tensor stays as it is, and the
    result agrees with onnxruntime, saturated inputs included."""
    proto = _silu_and_gate(dtype)
    np_dtype = helper.tensor_dtype_to_np_dtype(dtype)
    rng = np.random.default_rng(4)
    feeds = {"x": (rng.standard_normal((4, 64)) * 6).astype(np_dtype), "g": rng.standard_normal((4, 1)).astype(np_dtype)}
    feeds["x"][0, :4] = [-1e4, -90, 90, 1e4]
    with Session(from_onnx(proto)) as session:
        ours = session.run(["z"], feeds)[0]
        infos = session.plan(["z"], feeds).infos
    assert sorted((i.op_type, i.namespace) for i in infos) == [
        ("Mul", "amanda/onnx/17"), ("Sigmoid", "amanda/onnx/17"), ("Swish", FUSED)]
    tol = 2e-3 if dtype == TensorProto.FLOAT16 else 1e-6
    np.testing.assert_allclose(ours, onnxruntime_outputs(proto, feeds)[0], rtol=tol, atol=tol)


@pytest.mark.parametrize("alpha", [1.0, 0.5, 2.0])
def test_onnx_swish_matches_float64_numpy(alpha: float) -> None:
    """ONNX Swish (opset 24) in its one-buffer tanh form agrees with x / (1 + exp(-alpha x)) in float64."""
    x = np.concatenate([np.linspace(-30, 30, 601), [-1e4, 1e4]]).astype(np.float32)
    ours = amanda_outputs(one_node(helper.make_node("Swish", ["x"], ["y"], alpha=alpha), {"x": x}, 24), {"x": x})[0]
    wide = x.astype(np.float64)
    with np.errstate(over="ignore"):
        expected = wide / (1 + np.exp(-alpha * wide))
    assert ours.dtype == np.float32
    np.testing.assert_allclose(ours, expected, rtol=1e-6, atol=1e-6)


def test_gelu32_is_within_float32_rounding_of_float64_gelu_on_a_dense_grid() -> None:
    """The folded float32 GELU stays within 3e-7 * max(1, |x|) of float64 0.5 x (1 + erf(x / sqrt 2)) over
    [-12, 12] every 1e-3 (as close as float32's 1 + erf allows where GELU nears 0), keeps nan, saturates in the tails."""
    x = np.concatenate([np.linspace(-12, 12, 24_001), [-1e4, 1e4]]).astype(np.float32)
    y = gelu32(x)
    wide = x.astype(np.float64)
    expected = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in wide])
    assert y.dtype == np.float32
    assert (np.abs(y - expected) <= 3e-7 * np.maximum(1, np.abs(wide))).all()
    assert np.isnan(gelu32(np.float32([np.nan]))[0])
