"""Object detection: NonMaxSuppression of the ONNX default domain."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from amanda.exec.kernels.registry import kernel

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
