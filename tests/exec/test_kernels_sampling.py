"""GridSample, AffineGrid, RoiAlign and NonMaxSuppression against onnxruntime on random
data, over modes, padding modes, corner alignment and thresholds."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import helper  # noqa: E402

from tests.exec.onnx_oracle import both, one_node, onnxruntime_outputs  # noqa: E402


def compare(node: onnx.NodeProto, feeds: dict[str, np.ndarray], opset: int, rtol: float = 1e-4,
            atol: float = 1e-5) -> None:
    """amanda's outputs equal onnxruntime's for a one-node model."""
    want, got = both(node, feeds, opset)
    for a, b in zip(got, want):
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), mode=st.sampled_from(["bilinear", "nearest", "bicubic"]),
       padding=st.sampled_from(["zeros", "border", "reflection"]), align=st.booleans())
def test_grid_sample_2d(seed: int, mode: str, padding: str, align: bool) -> None:
    """2-D GridSample, including grid points far outside [-1, 1], matches onnxruntime."""
    rng = np.random.default_rng(seed)
    feeds = {"x": rng.standard_normal((2, 3, 5, 6)).astype(np.float32),
             "grid": rng.uniform(-1.6, 1.6, (2, 4, 7, 2)).astype(np.float32)}
    node = helper.make_node("GridSample", ["x", "grid"], ["y"], mode=mode, padding_mode=padding,
                            align_corners=int(align))
    compare(node, feeds, opset=16)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), align=st.booleans(), three=st.booleans())
def test_affine_grid(seed: int, align: bool, three: bool) -> None:
    """AffineGrid for 2-D and 3-D sizes matches onnxruntime."""
    rng = np.random.default_rng(seed)
    theta = rng.standard_normal((2, 3, 4) if three else (2, 2, 3)).astype(np.float32)
    size = np.array([2, 3, 4, 5, 6] if three else [2, 3, 5, 6], np.int64)
    node = helper.make_node("AffineGrid", ["theta", "size"], ["grid"], align_corners=int(align))
    compare(node, {"theta": theta, "size": size}, opset=20)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), ratio=st.integers(0, 3), half=st.booleans())
def test_roi_align_average(seed: int, ratio: int, half: bool) -> None:
    """RoiAlign in average mode, adaptive or fixed sampling, matches onnxruntime."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, 3, 10, 12)).astype(np.float32)
    corner = rng.uniform(0, 8, (4, 2))
    rois = np.concatenate([corner, corner + rng.uniform(0.5, 6, (4, 2))], axis=1).astype(np.float32)
    feeds = {"x": x, "rois": rois, "idx": rng.integers(0, 2, 4).astype(np.int64)}
    node = helper.make_node("RoiAlign", ["x", "rois", "idx"], ["y"], output_height=3, output_width=2,
                            sampling_ratio=ratio, spatial_scale=0.9,
                            coordinate_transformation_mode="half_pixel" if half else "output_half_pixel")
    compare(node, feeds, opset=16)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), centre=st.booleans(), iou=st.floats(0.0, 0.8), floor=st.booleans())
def test_non_max_suppression(seed: int, centre: bool, iou: float, floor: bool) -> None:
    """NonMaxSuppression selects onnxruntime's boxes in onnxruntime's order."""
    rng = np.random.default_rng(seed)
    boxes = rng.uniform(0, 10, (2, 12, 4)).astype(np.float32)
    feeds = {"boxes": boxes, "scores": rng.uniform(0, 1, (2, 3, 12)).astype(np.float32),
             "max": np.array([5], np.int64), "iou": np.array([iou], np.float32),
             "score": np.array([0.3 if floor else 0.0], np.float32)}
    node = helper.make_node("NonMaxSuppression", list(feeds), ["selected"], center_point_box=int(centre))
    compare(node, feeds, opset=11, rtol=0, atol=0)


def ort_conv(x: np.ndarray, w: np.ndarray, b: np.ndarray, **attrs: object) -> np.ndarray:
    """onnxruntime's Conv, the oracle for offsets that land on whole pixels."""
    feeds = {"x": x, "w": w, "b": b}
    return onnxruntime_outputs(one_node(helper.make_node("Conv", list(feeds), ["y"], **attrs), feeds, 19), feeds)[0]


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), group=st.sampled_from([1, 2]), stride=st.integers(1, 2),
       shift=st.sampled_from([0, 1, -1]))
def test_deform_conv_with_whole_pixel_offsets_is_a_shifted_conv(seed: int, group: int, stride: int,
                                                                 shift: int) -> None:
    """With every tap's offset the same whole number of pixels along x (and a mask of ones),
    DeformConv equals onnxruntime's Conv of the input shifted by that many pixels."""
    from amanda.opset.onnx.deform import deform_conv_kernel

    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, 4, 6, 7)).astype(np.float32)
    w = rng.standard_normal((4, 4 // group, 3, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    attrs = {"pads": [0, 0, 0, 0], "strides": [stride, stride], "group": group}  # no padding: the shift oracle holds
    want_shape = ort_conv(x, w, b, **attrs).shape
    offset = np.zeros((2, 2 * 9, *want_shape[2:]), np.float32)
    offset[:, 1::2] = shift  # x offsets; y offsets stay 0
    shifted = np.zeros_like(x)
    if shift > 0:
        shifted[..., :-shift] = x[..., shift:]
    elif shift < 0:
        shifted[..., -shift:] = x[..., :shift]
    else:
        shifted = x
    mask = np.ones((2, 9, *want_shape[2:]), np.float32)
    (got,) = deform_conv_kernel(attrs, x, w, offset, b, mask)
    np.testing.assert_allclose(got, ort_conv(shifted, w, b, **attrs), rtol=1e-4, atol=1e-4)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), scale=st.sampled_from([1.0, 0.5]))
def test_max_roi_pool(seed: int, scale: float) -> None:
    """MaxRoiPool over random regions, some past the border, matches onnxruntime."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, 3, 9, 11)).astype(np.float32)
    corner = rng.integers(0, 10, (5, 2))
    rois = np.concatenate([rng.integers(0, 2, (5, 1)), corner, corner + rng.integers(0, 8, (5, 2))],
                          axis=1).astype(np.float32)
    node = helper.make_node("MaxRoiPool", ["x", "rois"], ["y"], pooled_shape=[2, 3], spatial_scale=scale)
    compare(node, {"x": x, "rois": rois}, opset=16)
