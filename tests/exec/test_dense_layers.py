"""Dense (Linear) layers: MatMul+Add fused into amanda's MatMulAdd for a Session's plans, products
with fewer rows than outputs run transposed, and BLAS adds the bias where the output is large;
each against onnxruntime or numpy written here."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import amanda  # noqa: E402
from amanda.exec.kernels.cblas import BIAS_IN_GEMM, rows_times  # noqa: E402
from amanda.exec.kernels.relaid import mark_constant  # noqa: E402
from amanda.io.onnx.importer import from_onnx  # noqa: E402
from amanda.opset.onnx.linalg import gemm_kernel, matmul_add_kernel, matmul_kernel  # noqa: E402
from tests.exec.onnx_oracle import both, onnxruntime_outputs  # noqa: E402

RNG = np.random.default_rng(3)


def _mlp(x_shape: tuple, sizes: list[int]) -> onnx.ModelProto:
    """MatMul + Add (+ Relu) layers over an input of ``x_shape`` (2-D or 3-D), as exporters write them."""
    nodes, inits, h = [], [], "x"
    for i, (n_in, n_out) in enumerate(zip(sizes, sizes[1:])):
        inits += [numpy_helper.from_array(RNG.standard_normal((n_in, n_out)).astype(np.float32) / 8, f"w{i}"),
                  numpy_helper.from_array(RNG.standard_normal(n_out).astype(np.float32), f"b{i}")]
        nodes += [helper.make_node("MatMul", [h, f"w{i}"], [f"m{i}"]), helper.make_node("Add", [f"m{i}", f"b{i}"], [f"a{i}"])]
        h = f"a{i}"
        if i < len(sizes) - 2:
            nodes.append(helper.make_node("Relu", [h], [f"r{i}"]))
            h = f"r{i}"
    nodes.append(helper.make_node("Identity", [h], ["y"]))
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize(("x_shape", "sizes"), [
    ((64, 96), [96, 128, 128, 10]),  # fewer rows than outputs: transposed products; a narrow last layer
    ((4, 50, 32), [32, 96, 32]),  # 3-D: one GEMM over the rows, bias added by BLAS (4*50*96 outputs)
    ((2, 3, 16), [16, 8, 4]),  # small: bias added after the product
])
def test_linear_layers_fuse_and_match_onnxruntime(x_shape: tuple, sizes: list[int]) -> None:
    """A Session fuses each MatMul+Add into MatMulAdd, and the outputs equal onnxruntime's."""
    model = _mlp(x_shape, sizes)
    x = RNG.standard_normal(x_shape).astype(np.float32)
    expected = onnxruntime_outputs(model, {"x": x})[0]
    with amanda.Session(from_onnx(model)) as session:
        ours = session.run(["y"], {"x": x})[0]
        plan = session.plan(["y"], {"x": x})
    assert [info.op_type for info in plan.infos].count("MatMulAdd") == len(sizes) - 1
    np.testing.assert_allclose(ours, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(("a_shape", "c_shape", "dtype"), [
    ((8, 24), (40,), np.float32),  # transposed
    ((50, 24), (40,), np.float32),  # more rows than outputs
    ((3, 200, 24), (40,), np.float32),  # rows, BLAS adds the bias
    ((3, 200, 24), (1,), np.float32),  # a one-element bias broadcasts
    ((5, 24), (40,), np.float64),
    ((5, 24), (40,), np.float16),  # no BLAS: what MatMul then Add compute
    ((24,), (40,), np.float32),  # a vector
])
def test_matmul_add_kernel_equals_matmul_then_add(a_shape: tuple, c_shape: tuple, dtype: type) -> None:
    """MatMulAdd gives numpy's ``a @ b + c`` in the inputs' dtype, in memory no input shares."""
    a = RNG.standard_normal(a_shape).astype(dtype)
    b = RNG.standard_normal((24, 40)).astype(dtype)
    b.flags.writeable = False
    c = RNG.standard_normal(c_shape).astype(dtype)
    for _ in range(2):  # the second call reads the kept transposed weights
        (y,) = matmul_add_kernel({}, a, b, c)
        expected = (a.astype(np.float64) @ b.astype(np.float64) + c.astype(np.float64))
        assert y.dtype == dtype and y.shape == expected.shape
        np.testing.assert_allclose(y, expected, rtol=2e-2 if dtype == np.float16 else 1e-5, atol=1e-2)
    assert not any(np.shares_memory(y, v) for v in (a, b, c))


def test_a_product_with_fewer_rows_than_outputs_is_handed_on_transposed() -> None:
    """(64, 96) @ (96, 128) by a plan's constant weight is computed, from its first product on,
    as (128, 64) and returned as its transposed view; the next product reads it without a copy,
    and both equal numpy's. A read-only weight no plan holds (a variable's value) keeps the usual
    orientation on every call: the path never depends on the calls before."""
    a = RNG.standard_normal((64, 96)).astype(np.float32)
    w1 = RNG.standard_normal((96, 128)).astype(np.float32)
    w2 = RNG.standard_normal((128, 256)).astype(np.float32)
    w1.flags.writeable = w2.flags.writeable = False
    for _ in range(2):
        (plain,) = matmul_kernel({}, a, w1)
        assert plain.flags.c_contiguous
    mark_constant(w1)
    mark_constant(w2)  # constants, as a plan's folded weights are
    (h,) = matmul_kernel({}, a, w1)
    assert h.flags.f_contiguous and not h.flags.c_contiguous
    np.testing.assert_allclose(h, a @ w1, rtol=1e-4, atol=1e-4)
    (y,) = matmul_kernel({}, h, w2)
    np.testing.assert_allclose(y, (a @ w1) @ w2, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize(("trans_b", "c_shape"), [(0, (128,)), (1, (1, 128)), (0, None), (1, (64, 128))])
def test_gemm_of_a_dense_layer_matches_onnxruntime(trans_b: int, c_shape: tuple | None) -> None:
    """Gemm with fewer rows than outputs (the transposed product), with and without transB and a bias."""
    a = RNG.standard_normal((64, 96)).astype(np.float32)
    b = RNG.standard_normal((128, 96) if trans_b else (96, 128)).astype(np.float32)
    feeds = {"a": a, "b": b} if c_shape is None else {"a": a, "b": b, "c": RNG.standard_normal(c_shape).astype(np.float32)}
    node = helper.make_node("Gemm", list(feeds), ["y"], transB=trans_b)
    theirs, ours = both(node, feeds, 17)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-4, atol=1e-4)
    b.flags.writeable = False
    mark_constant(b)  # a plan's constant weight: the transposed product
    for _ in range(2):  # the second call has the kept transposed weight
        direct = gemm_kernel({"transB": trans_b}, *feeds.values())[0]
        np.testing.assert_allclose(direct, theirs[0], rtol=1e-4, atol=1e-4)
    assert direct.flags.f_contiguous == (c_shape is None or c_shape[0] == 1 or len(c_shape) == 1)


@pytest.mark.parametrize("rows", [4, BIAS_IN_GEMM // 16 + 1])
def test_rows_times_adds_the_bias_on_either_side_of_the_threshold(rows: int) -> None:
    """Below BIAS_IN_GEMM outputs the bias is added after the product, above it BLAS adds the
    product to the bias; both equal numpy's."""
    r = RNG.standard_normal((rows, 8)).astype(np.float32)
    w = RNG.standard_normal((8, 16)).astype(np.float32)
    bias = RNG.standard_normal(16).astype(np.float32)
    np.testing.assert_allclose(rows_times(r, w, bias), r @ w + bias, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(rows_times(r, w, None), r @ w, rtol=1e-5, atol=1e-5)
    into = np.full((rows, 16), np.nan, np.float32)  # written in place, every element
    assert rows_times(r, w, bias, out=into) is into
    np.testing.assert_allclose(into, r @ w + bias, rtol=1e-5, atol=1e-5)


def test_relu_after_a_fused_layer_reuses_its_buffer() -> None:
    """MatMulAdd (amanda/fused) returns fresh memory, so the Relu reading it alone runs in place."""
    model = _mlp((8, 16), [16, 32, 4])
    x = RNG.standard_normal((8, 16)).astype(np.float32)
    with amanda.Session(from_onnx(model)) as session:
        plan = session.plan(["y"], {"x": x})
    types = [info.op_type for info in plan.infos]
    relu = plan.steps[types.index("Relu")]
    assert getattr(relu.fn, "func", None) is not None  # the in-place variant wraps the kernel


def test_a_writeable_weight_keeps_the_usual_orientation() -> None:
    """A variable (writeable) weight may change between runs, and its products in a training step
    share their layout with the backward pass: no kept transpose, a C-ordered result, and a
    changed weight gives the changed product."""
    from amanda.exec.kernels.relaid import RELAID

    a = RNG.standard_normal((4, 8)).astype(np.float32)
    w = RNG.standard_normal((8, 16)).astype(np.float32)
    (y,) = matmul_kernel({}, a, w)
    np.testing.assert_allclose(y, a @ w, rtol=1e-5, atol=1e-5)
    assert y.flags.c_contiguous and (id(w), "T") not in RELAID
    w *= 2
    np.testing.assert_allclose(matmul_kernel({}, a, w)[0], a @ w, rtol=1e-5, atol=1e-5)


def test_one_weight_shared_by_branches_on_two_threads() -> None:
    """Two MatMuls reading one constant weight run side by side on the threaded scheduler, run
    after run (the weight's kept transpose is made while both may meet it), equal to numpy."""
    w = RNG.standard_normal((32, 96)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["p"]), helper.make_node("MatMul", ["z", "w"], ["q"]),
             helper.make_node("Add", ["p", "q"], ["y"])]
    graph = helper.make_graph(nodes, "shared", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (8, 32)),
                                                helper.make_tensor_value_info("z", TensorProto.FLOAT, (8, 32))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    with amanda.Session(from_onnx(model), threads=2, offload_elements=0) as session:
        for _ in range(4):
            x, z = (RNG.standard_normal((8, 32)).astype(np.float32) for _ in range(2))
            (y,) = session.run(["y"], {"x": x, "z": z})
            np.testing.assert_allclose(y, x @ w + z @ w, rtol=1e-4, atol=1e-4)
