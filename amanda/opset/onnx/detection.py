"""Object detection: NonMaxSuppression of the ONNX default domain.

Gradient. **MaxRoiPool**: each bin's maximum over a mask of the pixels the kernel's rounded bin bounds
keep (an empty bin gives 0), so X gets the gradient at each bin's maximum (shared by ties);
the regions, rounded to whole pixels, get none. The spatial sizes must be known.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from amanda.autodiff.composite import composite
from amanda.autodiff.node import Node as GradNode
from amanda.autodiff.node import const
from amanda.build import ops
from amanda.build.values import Value
from amanda.exec.kernels.registry import kernel
from amanda.ops import define
from amanda.types.node import Node
from amanda.types.tensor_type import TensorType

Attrs = Mapping[str, Any]


def _corners(boxes: np.ndarray, centre: bool) -> np.ndarray:
    """Boxes as (y_min, x_min, y_max, x_max), whatever corner order or centre form they use."""
    b = boxes.astype(np.float64)
    if centre:  # (x_centre, y_centre, width, height)
        x, y, w, h = b[:, 0], b[:, 1], b[:, 2], b[:, 3]
        return np.stack([y - h / 2, x - w / 2, y + h / 2, x + w / 2], axis=1)
    return np.stack([np.minimum(b[:, 0], b[:, 2]), np.minimum(b[:, 1], b[:, 3]),
                     np.maximum(b[:, 0], b[:, 2]), np.maximum(b[:, 1], b[:, 3])], axis=1)


def _iou(box: np.ndarray, others: np.ndarray) -> np.ndarray:
    top = np.maximum(box[0], others[:, 0])
    left = np.maximum(box[1], others[:, 1])
    bottom = np.minimum(box[2], others[:, 2])
    right = np.minimum(box[3], others[:, 3])
    inter = np.clip(bottom - top, 0, None) * np.clip(right - left, 0, None)
    area = (box[2] - box[0]) * (box[3] - box[1])
    areas = (others[:, 2] - others[:, 0]) * (others[:, 3] - others[:, 1])
    union = area + areas - inter
    return np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0)


def _scalar(value: Any, default: float) -> float:
    return default if value is None or np.asarray(value).size == 0 else float(np.asarray(value).reshape(-1)[0])


@kernel("NonMaxSuppression", since=10)
def non_max_suppression_kernel(attrs: Attrs, boxes: np.ndarray, scores: np.ndarray, max_output: Any = None,
                               iou_threshold: Any = None, score_threshold: Any = None) -> tuple:
    """ONNX NonMaxSuppression: per batch and class, boxes by falling score, each kept unless
    its IoU with a kept box is above ``iou_threshold``; ``[selected, 3]`` (batch, class, box)."""
    limit = int(_scalar(max_output, 0))
    threshold = _scalar(iou_threshold, 0.0)
    floor = None if score_threshold is None else _scalar(score_threshold, 0.0)
    centre = bool(int(attrs.get("center_point_box", 0)))
    selected: list[tuple[int, int, int]] = []
    for b in range(boxes.shape[0]):
        corners = _corners(boxes[b], centre)
        for c in range(scores.shape[1]):
            s = scores[b, c].astype(np.float64)
            order = np.argsort(-s, kind="stable")
            if floor is not None:
                order = order[s[order] > floor]
            kept: list[int] = []
            for i in order:
                if len(kept) >= limit:
                    break
                if not kept or np.all(_iou(corners[i], corners[kept]) <= threshold):
                    kept.append(int(i))
            selected.extend((b, c, i) for i in kept)
    return (np.array(selected, np.int64).reshape(-1, 3),)


def non_max_suppression(node: Node) -> list:
    """int64 ``[selected, 3]``."""
    return [TensorType("int64", (None, 3))]


define("NonMaxSuppression",
       type_rule=non_max_suppression,
       no_gradient="integer output (indices of the selected boxes)")


@kernel("MaxRoiPool", since=1)
def max_roi_pool_kernel(attrs: Attrs, x: np.ndarray, rois: np.ndarray) -> tuple:
    """ONNX MaxRoiPool: each region ``(batch, x1, y1, x2, y2)``, scaled and rounded to whole
    pixels, split into ``pooled_shape`` bins whose maxima form the output (0 for empty bins)."""
    out_h, out_w = (int(v) for v in attrs["pooled_shape"])
    scale = float(attrs.get("spatial_scale", 1.0))
    height, width = x.shape[2:]
    result = np.zeros((rois.shape[0], x.shape[1], out_h, out_w), x.dtype)
    for r, roi in enumerate(rois.astype(np.float64)):
        batch = int(roi[0])
        # rounded half away from zero, as C's round (numpy's rounds half to even)
        x1, y1, x2, y2 = (int(np.sign(v) * np.floor(abs(v * scale) + 0.5)) for v in roi[1:])
        roi_h, roi_w = max(y2 - y1 + 1, 1), max(x2 - x1 + 1, 1)
        for ph in range(out_h):
            top = min(max(int(np.floor(ph * roi_h / out_h)) + y1, 0), height)
            bottom = min(max(int(np.ceil((ph + 1) * roi_h / out_h)) + y1, 0), height)
            for pw in range(out_w):
                left = min(max(int(np.floor(pw * roi_w / out_w)) + x1, 0), width)
                right = min(max(int(np.ceil((pw + 1) * roi_w / out_w)) + x1, 0), width)
                if bottom > top and right > left:
                    result[r, :, ph, pw] = x[batch, :, top:bottom, left:right].max(axis=(1, 2))
    return (result,)


def max_roi_pool(node: Node) -> list:
    """``[num_rois, C, *pooled_shape]``."""
    x, rois = node.shape(0), node.shape(1)
    pooled = [int(v) for v in node.attr("pooled_shape", (None, None))]
    return [TensorType(node.dtype(0), (rois[0] if rois else None, x[1] if x else None, *pooled))]


I64 = np.int64


def _bins(start: Value, length: Value, count: int, size: int) -> Value:
    """Which of ``size`` pixels each of ``count`` bins of each region holds: ``[R, count, size]``."""
    like = start
    steps = np.arange(count, dtype=np.float64)[None, :]
    low = ops.Add(ops.Floor(ops.Mul(length, const(steps / count, like))), start)
    high = ops.Add(ops.Ceil(ops.Mul(length, const((steps + 1) / count, like))), start)
    low, high = (ops.Unsqueeze(ops.Clip(b, const(0, like), const(size, like)), np.array([-1], I64)) for b in (low, high))
    pixels = const(np.arange(size, dtype=np.float64)[None, None, :], like)
    return ops.And(ops.GreaterOrEqual(pixels, low), ops.Less(pixels, high))


def _rounded(v: Value, scale: float) -> Value:
    """``v * scale`` rounded half away from zero (C's round, as the kernel)."""
    scaled = ops.Mul(v, const(scale, v))
    return ops.Mul(ops.Sign(scaled), ops.Floor(ops.Add(ops.Abs(scaled), const(0.5, v))))


def _max_roi_pool(n: GradNode) -> list:
    """MaxRoiPool: each bin's maximum over the pixels a mask of the bin keeps (0 when empty)."""
    x, rois = n.given(0, 1)
    if x.type.shape is None or not all(type(d) is int for d in x.type.shape[2:]):
        raise n.fail("known spatial sizes", repr(x.type))
    height, width = (int(d) for d in x.type.shape[2:])
    out_h, out_w = (int(v) for v in n.attr("pooled_shape"))
    scale = float(n.attr("spatial_scale", 1.0))
    column = [ops.Slice(rois, np.array([j], I64), np.array([j + 1], I64), np.array([1], I64)) for j in range(5)]
    x1, y1, x2, y2 = (_rounded(c, scale) for c in column[1:])  # [R, 1] each
    one = const(1, rois)
    rows = _bins(y1, ops.Max(ops.Add(ops.Sub(y2, y1), one), one), out_h, height)  # [R, out_h, H]
    cols = _bins(x1, ops.Max(ops.Add(ops.Sub(x2, x1), one), one), out_w, width)  # [R, out_w, W]
    inside = ops.And(ops.Unsqueeze(rows, np.array([2, 4], I64)), ops.Unsqueeze(cols, np.array([1, 3], I64)))
    inside = ops.Unsqueeze(inside, np.array([1], I64))  # [R, 1, out_h, out_w, H, W]
    batch = ops.Cast(ops.Reshape(column[0], np.array([-1], I64)), to=np.dtype("int64"))
    planes = ops.Unsqueeze(ops.Gather(x, batch, axis=0), np.array([2, 3], I64))  # [R, C, 1, 1, H, W]
    best = ops.ReduceMax(ops.Where(inside, planes, const(-np.inf, x)), axes=[4, 5], keepdims=0)
    filled = ops.ReduceMax(ops.Cast(inside, to=np.dtype(x.type.dtype)), axes=[4, 5], keepdims=0)
    return [ops.Where(ops.Greater(filled, const(0, x)), best, const(0, x))]


max_roi_pool_vjp = composite(_max_roi_pool)


define("MaxRoiPool", type_rule=max_roi_pool, vjp=max_roi_pool_vjp)
