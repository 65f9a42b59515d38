"""The fast paths of the hot kernels (erf, Gelu, Pow, N-D MatMul, depthwise Conv) against onnxruntime and numpy."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from amanda.exec.kernels.conv import conv_nd
from amanda.exec.kernels.math_util import erf
from amanda.opset.onnx.linalg import matmul_kernel

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import helper  # noqa: E402

from tests.exec.onnx_oracle import both  # noqa: E402

RNG = np.random.default_rng(7)


def test_erf_keeps_float32_and_matches_math_erf() -> None:
    """erf of a float32 array is float32 and agrees with math.erf to float32 precision."""
    x = np.linspace(-5, 5, 201, dtype=np.float32)
    y = erf(x)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, [math.erf(float(v)) for v in x], rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_erf_op_matches_onnxruntime_in_the_input_dtype(dtype: Any) -> None:
    """The Erf op agrees with onnxruntime and keeps the input dtype."""
    x = (RNG.standard_normal((4, 33)) * 2).astype(dtype)
    theirs, ours = both(helper.make_node("Erf", ["x"], ["y"]), {"x": x}, 17)
    assert ours[0].dtype == dtype
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-3 if dtype == np.float16 else 1e-6, atol=1e-6)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_matches_onnxruntime_in_float32(approximate: str) -> None:
    """Gelu (both forms) agrees with onnxruntime and computes in float32, not float64."""
    x = (RNG.standard_normal((8, 64)) * 3).astype(np.float32)
    node = helper.make_node("Gelu", ["x"], ["y"], approximate=approximate)
    theirs, ours = both(node, {"x": x}, 20)
    assert ours[0].dtype == np.float32
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("exponent", [2.0, 3.0, 0.5, -1.0, 1.0, 1.7, -2.5])
def test_pow_float32_scalar_exponents_match_onnxruntime(exponent: float) -> None:
    """Pow of a float32 base by each scalar exponent (fast paths and the general one) agrees with onnxruntime."""
    x = (np.abs(RNG.standard_normal((5, 7))) + 0.1).astype(np.float32)
    y = np.array(exponent, np.float32)
    theirs, ours = both(helper.make_node("Pow", ["x", "y"], ["z"]), {"x": x, "y": y}, 15)
    assert ours[0].dtype == np.float32 and ours[0].shape == theirs[0].shape
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-6)


def test_pow_float_base_integer_and_array_exponents_match_onnxruntime() -> None:
    """Pow of float32 by an int64 exponent array and by a broadcast float array agrees with onnxruntime."""
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    for y in (np.array([0, 1, 2, 3], np.int64), np.array([[2.0], [3.0], [1.0]], np.float32)):
        theirs, ours = both(helper.make_node("Pow", ["x", "y"], ["z"]), {"x": x, "y": y}, 15)
        assert ours[0].dtype == np.float32
        np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-6)


def test_pow_size_one_exponent_broadcasts_the_shape() -> None:
    """A one-element exponent of higher rank than the base broadcasts the result shape, as numpy does."""
    x = np.array([1.5, 2.0], np.float32)
    theirs, ours = both(helper.make_node("Pow", ["x", "y"], ["z"]), {"x": x, "y": np.full((1, 1), 2.0, np.float32)}, 15)
    assert ours[0].shape == (1, 2) == theirs[0].shape
    np.testing.assert_allclose(ours[0], [[2.25, 4.0]])


def test_matmul_of_a_transposed_view_by_a_matrix_is_numpy_matmul() -> None:
    """An N-D non-contiguous first operand times a 2-D matrix equals numpy's matmul."""
    a = RNG.standard_normal((4, 16, 3, 8)).astype(np.float32).transpose(0, 2, 1, 3)
    b = RNG.standard_normal((8, 5)).astype(np.float32)
    assert not a.flags.c_contiguous
    (y,) = matmul_kernel({}, a, b)
    assert y.shape == (4, 3, 16, 5)
    np.testing.assert_allclose(y, np.matmul(a, b), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("n", "c", "mult", "size", "k", "stride", "dilation", "pad"), [
    (2, 32, 1, 28, 3, 1, 1, 1),
    (2, 16, 2, 15, 5, 2, 1, 2),
    (1, 8, 1, 20, 7, 1, 2, 3),
    (2, 12, 1, 9, 3, 2, 1, 0),
])
def test_depthwise_conv_matches_onnxruntime(n: int, c: int, mult: int, size: int, k: int, stride: int,
                                            dilation: int, pad: int) -> None:
    """Depthwise Conv (with channel multipliers, strides, dilations, pads) agrees with onnxruntime."""
    x = RNG.standard_normal((n, c, size, size)).astype(np.float32)
    w = RNG.standard_normal((c * mult, 1, k, k)).astype(np.float32)
    b = RNG.standard_normal(c * mult).astype(np.float32)
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], group=c, strides=[stride] * 2,
                            dilations=[dilation] * 2, pads=[pad] * 4)
    theirs, ours = both(node, {"x": x, "w": w, "b": b}, 17)
    assert ours[0].dtype == np.float32
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-4, atol=1e-4)


def test_depthwise_conv_1d_without_bias_is_a_sum_of_shifted_products() -> None:
    """A 1-D depthwise conv without bias equals a numpy sum of per-channel shifted products."""
    x = RNG.standard_normal((1, 3, 10)).astype(np.float32)
    w = RNG.standard_normal((3, 1, 3)).astype(np.float32)
    y = conv_nd(x, w, None, [1], [1], [0, 0], 3)
    expected = sum(x[:, :, i:i + 8] * w[None, :, 0, i, None] for i in range(3))
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-6)


def test_channels_last_weights_are_packed_once_per_read_only_array() -> None:
    """A read-only weight's packed copy is reused across calls and results stay equal to onnxruntime's; a writeable one is repacked."""
    from amanda.exec.kernels import relaid

    x = RNG.standard_normal((1, 16, 9, 9)).astype(np.float32)
    w = RNG.standard_normal((8, 16, 3, 3)).astype(np.float32)
    w.setflags(write=False)
    first = conv_nd(x, w, None, [1, 1], [1, 1], [1] * 4, 1)
    packed = relaid.RELAID[id(w), "packed"][1]
    again = conv_nd(x, w, None, [1, 1], [1, 1], [1] * 4, 1)
    assert relaid.RELAID[id(w), "packed"][1] is packed
    np.testing.assert_array_equal(first, again)
    node = helper.make_node("Conv", ["x", "w"], ["y"], pads=[1] * 4)
    theirs, _ = both(node, {"x": x, "w": np.array(w)}, 17)
    np.testing.assert_allclose(first, theirs[0], rtol=1e-4, atol=1e-4)
    writeable = np.array(w)
    conv_nd(x, writeable, None, [1, 1], [1, 1], [1] * 4, 1)
    assert (id(writeable), "packed") not in relaid.RELAID


@pytest.mark.parametrize("op_type", ["Sigmoid", "HardSwish"])
def test_sigmoid_family_matches_onnxruntime_without_overflow(op_type: str) -> None:
    """Sigmoid (computed in one buffer) and HardSwish agree with onnxruntime, extreme inputs included, in float32."""
    x = np.concatenate([RNG.standard_normal(50) * 4, [-1e4, -90.0, 0.0, 90.0, 1e4]]).astype(np.float32).reshape(5, 11)
    theirs, ours = both(helper.make_node(op_type, ["x"], ["y"]), {"x": x}, 17)
    assert ours[0].dtype == np.float32
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("index", [-3, -1, 0, 2])
@pytest.mark.parametrize("axis", [0, 1])
def test_gather_of_one_index_matches_onnxruntime(index: int, axis: int) -> None:
    """A 0-d index (a loop's per-iteration Gather) takes the no-reduction path: onnxruntime's
    values, shape and dtype, negative indices included."""
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    i = np.array(index, np.int64)
    theirs, ours = both(helper.make_node("Gather", ["x", "i"], ["y"], axis=axis), {"x": x, "i": i}, 13)
    assert ours[0].shape == theirs[0].shape and ours[0].dtype == theirs[0].dtype
    np.testing.assert_array_equal(ours[0], theirs[0])


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64])
def test_reduce_sum_keeps_the_dtype_as_onnxruntime(dtype: type) -> None:
    """ReduceSum through the ufunc's own reduce: onnxruntime's values and dtype."""
    x = RNG.integers(-100, 100, (3, 4, 5)).astype(dtype)
    axes = np.array([0, 2], np.int64)
    theirs, ours = both(helper.make_node("ReduceSum", ["x", "axes"], ["y"]), {"x": x, "axes": axes}, 13)
    assert ours[0].dtype == theirs[0].dtype
    np.testing.assert_array_equal(ours[0], theirs[0])
