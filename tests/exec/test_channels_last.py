"""Activations stored channels-last between convolutions: each Conv layout and pool reads such an
input correctly (against onnxruntime on the same values stored NCHW), and the layouts that compute
channels-last hand their result on in that layout, so the next op needs no transposing copy."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import helper  # noqa: E402

from amanda.exec.kernels.conv import conv_nd  # noqa: E402
from amanda.exec.kernels.spatial import channels_last, padded_channels_last, scratch_as  # noqa: E402
from amanda.opset.onnx.pool import average_pool, max_pool  # noqa: E402
from tests.exec.onnx_oracle import one_node, onnxruntime_outputs  # noqa: E402

RNG = np.random.default_rng(5)


def _stored_channels_last(x: np.ndarray) -> np.ndarray:
    """The same values, ``(N, C, *S)``, stored channels-last."""
    nd = x.ndim
    return np.ascontiguousarray(x.transpose(0, *range(2, nd), 1)).transpose(0, nd - 1, *range(1, nd - 1))


def _onnxruntime_conv(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, group: int, strides: list[int],
                      pads: list[int]) -> np.ndarray:
    feeds = {"x": x, "w": w} if b is None else {"x": x, "w": w, "b": b}
    node = helper.make_node("Conv", list(feeds), ["y"], group=group, strides=strides, pads=pads)
    return onnxruntime_outputs(one_node(node, feeds, 17), feeds)[0]


# (x shape, w shape, group, strides, pads, whether the layout computes channels-last)
LAYOUTS = [
    ((2, 24, 7, 6), (40, 24, 1, 1), 1, [1, 1], [0, 0, 0, 0], True),  # pointwise: one GEMM over the rows
    ((2, 24, 9, 8), (16, 24, 3, 3), 1, [1, 1], [1, 1, 1, 1], True),  # shifted rows
    ((2, 20, 9, 8), (24, 20, 3, 3), 1, [2, 1], [1, 0, 1, 1], True),  # channels-last GEMM
    ((2, 32, 10, 9), (32, 1, 3, 3), 32, [1, 1], [1, 1, 1, 1], True),  # depthwise, merged run
    ((2, 300, 6, 5), (300, 1, 5, 5), 300, [2, 2], [2, 2, 2, 2], True),  # depthwise, per channel
    ((2, 8, 12, 11), (16, 4, 3, 3), 2, [1, 1], [1, 1, 1, 1], False),  # grouped: channels-first
    ((2, 3, 20, 20), (8, 3, 3, 3), 1, [2, 2], [1, 1, 1, 1], False),  # few input channels: batched
    ((2, 24, 7, 6), (40, 12, 1, 1), 2, [1, 1], [0, 0, 0, 0], False),  # grouped pointwise
]


@pytest.mark.parametrize(("x_shape", "w_shape", "group", "strides", "pads", "last"), LAYOUTS)
@pytest.mark.parametrize("bias", [True, False])
def test_each_conv_layout_reads_a_channels_last_input(x_shape: tuple, w_shape: tuple, group: int,
                                                      strides: list[int], pads: list[int], last: bool,
                                                      bias: bool) -> None:
    """A Conv of a channels-last input equals onnxruntime's on the same values; the layouts that
    compute channels-last return their result so, the others channels-first."""
    x = RNG.standard_normal(x_shape).astype(np.float32)
    w = RNG.standard_normal(w_shape).astype(np.float32)
    w.flags.writeable = False  # as a model's weights are: their relaid copies are kept
    b = RNG.standard_normal(w_shape[0]).astype(np.float32) if bias else None
    expected = _onnxruntime_conv(x, w, b, group, strides, pads)
    for _ in range(2):  # the second call reads the kept weight copies
        ours = conv_nd(_stored_channels_last(x), w, b, strides, [1, 1], pads, group)
        np.testing.assert_allclose(ours, expected, rtol=1e-4, atol=1e-4)
    assert (channels_last(ours) is not None) == last
    assert ours.flags.c_contiguous == (not last)


def test_a_chain_of_convs_stays_channels_last_and_matches_onnxruntime() -> None:
    """pointwise -> depthwise -> pointwise, each reading the previous result as it was laid out."""
    x = RNG.standard_normal((2, 16, 12, 12)).astype(np.float32)
    w1 = RNG.standard_normal((48, 16, 1, 1)).astype(np.float32)
    w2 = RNG.standard_normal((48, 1, 3, 3)).astype(np.float32)
    w3 = RNG.standard_normal((24, 48, 1, 1)).astype(np.float32)
    one = conv_nd(_stored_channels_last(x), w1, None, [1, 1], [1, 1], [0] * 4, 1)
    two = conv_nd(one, w2, None, [1, 1], [1, 1], [1] * 4, 48)
    three = conv_nd(two, w3, None, [1, 1], [1, 1], [0] * 4, 1)
    assert all(channels_last(y) is not None for y in (one, two, three))
    expected = _onnxruntime_conv(_onnxruntime_conv(_onnxruntime_conv(x, w1, None, 1, [1, 1], [0] * 4),
                                                   w2, None, 48, [1, 1], [1] * 4), w3, None, 1, [1, 1], [0] * 4)
    np.testing.assert_allclose(three, expected, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize(("op_type", "kernel"), [("MaxPool", max_pool), ("AveragePool", average_pool)])
@pytest.mark.parametrize(("pads", "strides"), [([0, 0, 0, 0], [2, 2]), ([1, 1, 1, 1], [1, 1])])
def test_pools_keep_a_channels_last_input_channels_last(op_type: str, kernel: object, pads: list[int],
                                                         strides: list[int]) -> None:
    """MaxPool and AveragePool of a channels-last input match onnxruntime and stay channels-last."""
    x = RNG.standard_normal((2, 12, 9, 10)).astype(np.float32)
    attrs = {"kernel_shape": [3, 3], "strides": strides, "pads": pads}
    node = helper.make_node(op_type, ["x"], ["y"], **attrs)
    expected = onnxruntime_outputs(one_node(node, {"x": x}, 17), {"x": x})[0]
    ours = kernel(attrs, _stored_channels_last(x))[0]  # type: ignore[operator]
    np.testing.assert_allclose(ours, expected, rtol=1e-5, atol=1e-5)
    assert channels_last(ours) is not None and not ours.flags.c_contiguous


def test_a_model_run_on_a_channels_last_feed_matches_onnxruntime() -> None:
    """A Session fed a channels-last array: Conv, Relu, MaxPool, Add and Flatten in between."""
    import amanda
    from amanda.io.onnx.importer import from_onnx

    x = RNG.standard_normal((2, 8, 10, 10)).astype(np.float32)
    w = onnx.numpy_helper.from_array(RNG.standard_normal((8, 8, 3, 3)).astype(np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Add", ["r", "x"], ["a"]),
             helper.make_node("MaxPool", ["a"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Flatten", ["p"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    expected = onnxruntime_outputs(model, {"x": x})[0]
    with amanda.Session(from_onnx(model)) as session:
        ours = session.run(["y"], {"x": _stored_channels_last(x)})[0]
    np.testing.assert_allclose(ours, expected, rtol=1e-4, atol=1e-4)


def test_padded_channels_last_reads_an_unpadded_channels_last_input_in_place() -> None:
    """Without pads, an input already stored channels-last is used as it is: no copy."""
    x = _stored_channels_last(RNG.standard_normal((1, 3, 4, 5)).astype(np.float32))
    assert np.shares_memory(padded_channels_last(x, [0, 0, 0, 0]), x)
    padded = padded_channels_last(x, [1, 0, 0, 1])
    assert padded.shape == (1, 5, 6, 3) and not np.shares_memory(padded, x)
    np.testing.assert_array_equal(padded[0, 1:, :5], x[0].transpose(1, 2, 0))


def test_scratch_as_follows_the_layout_of_its_model() -> None:
    """A strided channels-last view gets a channels-last buffer; channels-first or one channel do not."""
    last = _stored_channels_last(np.zeros((2, 4, 6, 6), np.float32))[:, :, ::2]
    assert channels_last(scratch_as(last, (2, 4, 3, 6), np.dtype(np.float32), "t")) is not None
    first = np.zeros((2, 4, 6, 6), np.float32)
    assert scratch_as(first, (2, 4, 6, 6), np.dtype(np.float32), "t").flags.c_contiguous
    single = _stored_channels_last(np.zeros((2, 1, 6, 6), np.float32))
    assert scratch_as(single, (2, 1, 6, 6), np.dtype(np.float32), "t").flags.c_contiguous


@pytest.mark.parametrize("shape", [(2, 12, 9, 10), (3, 5, 7), (1, 4, 3, 2, 5)])
@pytest.mark.parametrize("stored_last", [True, False])
def test_global_average_pool_of_either_layout_matches_onnxruntime(shape: tuple, stored_last: bool) -> None:
    """GlobalAveragePool as one matrix-vector product, over inputs stored channels-last or not."""
    from amanda.opset.onnx.pool import global_average_pool

    x = RNG.standard_normal(shape).astype(np.float32)
    node = helper.make_node("GlobalAveragePool", ["x"], ["y"])
    expected = onnxruntime_outputs(one_node(node, {"x": x}, 17), {"x": x})[0]
    ours = global_average_pool({}, _stored_channels_last(x) if stored_last else x)[0]
    assert ours.shape == expected.shape and ours.dtype == np.float32
    np.testing.assert_allclose(ours, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(global_average_pool({}, x.astype(np.float64))[0], x.astype(np.float64).mean(
        axis=tuple(range(2, x.ndim)), keepdims=True), rtol=1e-12)
