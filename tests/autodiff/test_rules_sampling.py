"""GridSample: gradients of the input and of the grid agree with central differences in
float64, 2-D and 3-D, linear and nearest, zeros and border padding, with and without
align_corners; cubic mode is refused naming the op."""

from __future__ import annotations

import numpy as np
import pytest

import amanda
from amanda.build import Ops
from tests.autodiff.fd import check


def arr(seed: int, shape: tuple) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape)


@pytest.mark.parametrize(("mode", "padding", "align"), [
    ("linear", "zeros", 0), ("linear", "zeros", 1), ("linear", "border", 0), ("linear", "border", 1),
])
def test_bilinear(mode, padding, align):
    """Bilinear sampling: X and the grid (points inside and outside the input) get gradients."""
    grid = np.random.default_rng(1).uniform(-1.3, 1.3, (2, 3, 2, 2))
    check(lambda x, g: Ops("amanda/onnx/20").GridSample(x, g, mode=mode, padding_mode=padding, align_corners=align),
          {"x": arr(0, (2, 2, 3, 4)), "g": grid})


def test_trilinear():
    """Three spatial axes (opset 20)."""
    grid = np.random.default_rng(2).uniform(-1.1, 1.1, (1, 2, 2, 1, 3))
    check(lambda x, g: Ops("amanda/onnx/20").GridSample(x, g), {"x": arr(3, (1, 1, 2, 3, 2)), "g": grid})


def test_nearest():
    """Nearest: X gets the gradient of the points that read it; the grid none."""
    grid = np.random.default_rng(4).uniform(-0.9, 0.9, (1, 2, 3, 2))
    check(lambda x: Ops("amanda/onnx/20").GridSample(x, grid, mode="nearest"), {"x": arr(5, (1, 2, 3, 3))})


def test_cubic_is_refused():
    """Cubic mode is a SchemaError naming the op."""
    x = amanda.Input("x", "float64", (1, 1, 3, 3))
    grid = amanda.ops.Constant(value=np.zeros((1, 2, 2, 2)))
    y = Ops("amanda/onnx/20").GridSample(x, grid, mode="cubic", name="cubic")
    net = amanda.model([x], {"loss": amanda.ops.ReduceSum(y, keepdims=0)})
    with pytest.raises(amanda.SchemaError, match="cubic"):
        amanda.grad(net, "loss", ["x"])


@pytest.mark.parametrize(("attrs", "offset_group", "with_mask", "with_bias"), [
    ({}, 1, False, False),
    ({"strides": [2, 1], "pads": [1, 0, 1, 1]}, 2, True, True),
    ({"dilations": [1, 2], "group": 2}, 1, True, False),
])
def test_deform_conv(attrs, offset_group, with_mask, with_bias):
    """DeformConv (opset 19) with strides, pads, dilations, groups, offset groups, a mask and a
    bias: X, W, offsets, mask and bias get gradients (offsets off the integer grid)."""
    x = arr(6, (1, 2, 4, 4))
    group = attrs.get("group", 1)
    w = arr(7, (2, 2 // group, 2, 2))
    strides, pads = attrs.get("strides", [1, 1]), attrs.get("pads", [0, 0, 0, 0])
    dil = attrs.get("dilations", [1, 1])
    out = [(4 + pads[i] + pads[2 + i] - dil[i] * 1 - 1) // strides[i] + 1 for i in range(2)]
    feeds = {"x": x, "w": w, "offset": np.random.default_rng(8).uniform(-0.8, 0.8, (1, offset_group * 4 * 2, *out)) + 0.13}
    if with_mask:
        feeds["mask"] = np.random.default_rng(9).uniform(0.2, 1.0, (1, offset_group * 4, *out))
    if with_bias:
        feeds["bias"] = arr(10, (2,))
    op = Ops("amanda/onnx/19").DeformConv

    def build(x, w, offset, mask=None, bias=None):
        return op(x, w, offset, bias, mask, offset_group=offset_group, kernel_shape=[2, 2], **attrs)

    check(build, feeds)


@pytest.mark.parametrize(("pooled", "scale"), [([2, 2], 1.0), ([1, 3], 0.5), ([3, 2], 1.0)])
def test_max_roi_pool(pooled, scale):
    """MaxRoiPool: boxes of two images, partly outside, bins overlapping and empty; X gets each
    bin's maximum's gradient (distinct values: no ties)."""
    x = np.random.default_rng(11).permutation(2 * 2 * 5 * 6).reshape(2, 2, 5, 6).astype(np.float64) / 10
    rois = np.array([[0, 0, 0, 3, 2], [1, 1, 1, 7, 6], [0, 4, 2, 4, 3]], np.float64) / scale
    rois[:, 0] = [0, 1, 0]
    check(lambda x: Ops("amanda/onnx/17").MaxRoiPool(x, rois, pooled_shape=pooled, spatial_scale=scale), {"x": x})


@pytest.mark.parametrize(("transform", "ratio", "scale"), [("half_pixel", 2, 1.0), ("output_half_pixel", 1, 0.5),
                                                           ("half_pixel", 3, 0.5)])
def test_roi_align(transform, ratio, scale):
    """RoiAlign (opset 16, avg): X and the boxes get gradients; boxes reach past the edges."""
    x = arr(12, (2, 2, 5, 6))
    rois = np.array([[0.3, 0.4, 3.2, 2.9], [1.1, 0.7, 6.4, 5.3], [-0.6, 2.2, 2.7, 4.1]]) / scale
    batch = np.array([0, 1, 0], np.int64)
    check(lambda x, rois: Ops("amanda/onnx/16").RoiAlign(x, rois, batch, output_height=2, output_width=3,
                                                         sampling_ratio=ratio, spatial_scale=scale,
                                                         coordinate_transformation_mode=transform),
          {"x": x, "rois": rois})


def test_roi_align_max_is_refused():
    """RoiAlign's max mode is a SchemaError naming the op."""
    x = amanda.Input("x", "float64", (1, 1, 3, 3))
    boxes = amanda.ops.Constant(value=np.array([[0.0, 0.0, 2.0, 2.0]]))
    y = Ops("amanda/onnx/16").RoiAlign(x, boxes, np.array([0], np.int64), mode="max", sampling_ratio=1, name="roi")
    net = amanda.model([x], {"loss": amanda.ops.ReduceSum(y, keepdims=0)})
    with pytest.raises(amanda.SchemaError, match="roi"):
        amanda.grad(net, "loss", ["x"])
