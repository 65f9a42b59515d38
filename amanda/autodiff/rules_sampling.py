"""The vector-Jacobian rules of GridSample, DeformConv and MaxRoiPool.

**GridSample**: the sampling written again as Gathers of the input
at the corners around each grid point, weighted by the distances to them (a composite rule),
so X gets the weights and the grid gets the weights' slopes.

Covered: any number of spatial axes, ``mode`` linear (bilinear) and nearest, ``padding_mode``
zeros and border, ``align_corners``. Refused with a ``SchemaError`` naming the op: cubic
mode and reflection padding. The input's spatial sizes must be known when ``grad`` runs.

**DeformConv** (opset 19): each kernel tap reads the input bilinearly at its place plus the
learned offset (scaled by the mask), and the grouped sum over channels and taps is one MatMul;
X, W, the offsets, the bias and the mask get gradients. Channels, kernel and spatial sizes
must be known.

**MaxRoiPool**: each bin's maximum over a mask of the pixels the kernel's rounded bin bounds
keep (an empty bin gives 0), so X gets the gradient at each bin's maximum (shared by ties);
the regions, rounded to whole pixels, get none. The spatial sizes must be known.
"""

from __future__ import annotations

import numpy as np

from amanda.autodiff.composite import composite
from amanda.autodiff.node import Node, const
from amanda.build import ops
from amanda.build.values import Value

__all__ = [ "max_roi_pool_vjp"]

I64 = np.int64


def _rounded(v: Value, scale: float) -> Value:
    """``v * scale`` rounded half away from zero (C's round, as the kernel)."""
    scaled = ops.Mul(v, const(scale, v))
    return ops.Mul(ops.Sign(scaled), ops.Floor(ops.Add(ops.Abs(scaled), const(0.5, v))))


def _bins(start: Value, length: Value, count: int, size: int) -> Value:
    """Which of ``size`` pixels each of ``count`` bins of each region holds: ``[R, count, size]``."""
    like = start
    steps = np.arange(count, dtype=np.float64)[None, :]
    low = ops.Add(ops.Floor(ops.Mul(length, const(steps / count, like))), start)
    high = ops.Add(ops.Ceil(ops.Mul(length, const((steps + 1) / count, like))), start)
    low, high = (ops.Unsqueeze(ops.Clip(b, const(0, like), const(size, like)), np.array([-1], I64)) for b in (low, high))
    pixels = const(np.arange(size, dtype=np.float64)[None, None, :], like)
    return ops.And(ops.GreaterOrEqual(pixels, low), ops.Less(pixels, high))


def _max_roi_pool(n: Node) -> list:
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


