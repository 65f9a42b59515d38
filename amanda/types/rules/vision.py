"""Sampling and detection: AffineGrid, GridSample, RoiAlign, MaxRoiPool, NonMaxSuppression,
DeformConv."""

from __future__ import annotations

from amanda.types.node import Node
from amanda.types.rules import rule
from amanda.types.tensor_type import TensorType


@rule("MaxRoiPool")
def max_roi_pool(node: Node) -> list:
    """``[num_rois, C, *pooled_shape]``."""
    x, rois = node.shape(0), node.shape(1)
    pooled = [int(v) for v in node.attr("pooled_shape", (None, None))]
    return [TensorType(node.dtype(0), (rois[0] if rois else None, x[1] if x else None, *pooled))]


@rule("NonMaxSuppression")
def non_max_suppression(node: Node) -> list:
    """int64 ``[selected, 3]``."""
    return [TensorType("int64", (None, 3))]


