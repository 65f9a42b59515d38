"""Sampling and detection: AffineGrid, GridSample, RoiAlign, MaxRoiPool, NonMaxSuppression,
DeformConv."""

from __future__ import annotations

from amanda.types.node import Node
from amanda.types.rules import rule
from amanda.types.rules.spatial import conv
from amanda.types.tensor_type import TensorType


@rule("AffineGrid")
def affine_grid(node: Node) -> list:
    """``[N, *spatial, r]`` from the size input ``[N, C, *spatial]`` (known or of known length)."""
    size = node.dims(1)
    if size is None:
        n = node.shape(1)
        rank = n[0] if n is not None and type(n[0]) is int else None
        return [TensorType(node.dtype(0), None if rank is None else (*(None,) * (rank - 1), rank - 2))]
    return [TensorType(node.dtype(0), (size[0], *size[2:], len(size) - 2))]


@rule("GridSample")
def grid_sample(node: Node) -> list:
    """``[N, C, *grid spatial]``."""
    x, grid = node.shape(0), node.shape(1)
    if x is None or grid is None:
        rank = len(x) if x is not None else (len(grid) if grid is not None else None)
        return [TensorType(node.dtype(0), None if rank is None else (None,) * rank)]
    if len(grid) != len(x):
        raise node.fail(f"a grid of rank {len(x)}", f"rank {len(grid)}")
    return [TensorType(node.dtype(0), (node.same(x[0], grid[0], "the batch"), x[1], *grid[1:-1]))]


@rule("RoiAlign")
def roi_align(node: Node) -> list:
    """``[num_rois, C, output_height, output_width]``."""
    x, rois = node.shape(0), node.shape(1)
    shape = (rois[0] if rois else None, x[1] if x else None,
             int(node.attr("output_height", 1)), int(node.attr("output_width", 1)))
    return [TensorType(node.dtype(0), shape)]


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


@rule("DeformConv")
def deform_conv(node: Node) -> list:
    """A convolution's type."""
    return list(conv(node))
