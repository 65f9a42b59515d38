"""The vector-Jacobian rule of RoiAlign: its bilinear samples written again as ops (a
composite rule), so X and the boxes get gradients.

Each box is cut into ``output_height x output_width`` bins of ``sampling_ratio`` squared
samples; a sample reads the four pixels around it as the kernel does (clamped at the far
edges, nothing when it lies more than a pixel outside), and a bin averages its samples.
Covered: ``mode`` avg, both ``coordinate_transformation_mode`` values, ``spatial_scale``.
Refused with a ``SchemaError`` naming the op: ``mode`` max, and ``sampling_ratio`` 0 (the
number of samples would depend on each box's size). The input's spatial sizes must be known.
"""

from __future__ import annotations

import numpy as np

from amanda.autodiff.composite import composite
from amanda.autodiff.node import Node, const
from amanda.build import ops
from amanda.build.values import Value

__all__ = ["roi_align_vjp"]

I64 = np.int64


def _axis(p: Value, size: int) -> tuple[Value, Value, Value, Value, Value]:
    """For sample positions ``p`` along an axis of ``size`` pixels: whether each is near
    enough, its lower and upper pixel, and their weights (as the kernel's _bilinear)."""
    near = ops.And(ops.GreaterOrEqual(p, const(-1.0, p)), ops.LessOrEqual(p, const(size, p)))
    q = ops.Max(p, const(0.0, p))
    low = ops.Floor(q)
    edge = ops.GreaterOrEqual(low, const(size - 1, p))
    last = const(size - 1, p)
    low = ops.Where(edge, last, low)
    high = ops.Where(edge, last, ops.Add(low, const(1, p)))
    frac = ops.Sub(ops.Where(edge, last, q), low)
    return near, low, high, ops.Sub(const(1, p), frac), frac


def _roi_align(n: Node) -> list:
    """RoiAlign (avg): each bin the mean of its bilinear samples."""
    x, rois, batch = n.given(0, 1, 2)
    ratio = int(n.attr("sampling_ratio", 0))
    mode = n.attr("mode", "avg")
    mode = mode.decode() if isinstance(mode, bytes) else str(mode)
    if mode != "avg" or ratio <= 0:
        raise n.fail("mode avg and a sampling_ratio above 0", f"mode {mode}, sampling_ratio {ratio}")
    if x.type.shape is None or not all(type(d) is int for d in x.type.shape[2:]):
        raise n.fail("known spatial sizes", repr(x.type))
    height, width = (int(d) for d in x.type.shape[2:])
    out_h, out_w = int(n.attr("output_height", 1)), int(n.attr("output_width", 1))
    transform = n.attr("coordinate_transformation_mode", "half_pixel")
    half = (transform.decode() if isinstance(transform, bytes) else str(transform)) == "half_pixel"
    box = ops.Sub(ops.Mul(rois, const(float(n.attr("spatial_scale", 1.0)), rois)), const(0.5 if half else 0.0, rois))
    x1, y1, x2, y2 = (ops.Slice(box, np.array([j], I64), np.array([j + 1], I64), np.array([1], I64)) for j in range(4))
    span_w, span_h = ops.Sub(x2, x1), ops.Sub(y2, y1)
    if not half:
        span_w, span_h = ops.Max(span_w, const(1.0, box)), ops.Max(span_h, const(1.0, box))
    steps_h = (np.arange(out_h)[:, None] + (np.arange(ratio)[None, :] + 0.5) / ratio).reshape(1, -1) / out_h
    steps_w = (np.arange(out_w)[:, None] + (np.arange(ratio)[None, :] + 0.5) / ratio).reshape(1, -1) / out_w
    ys = ops.Add(y1, ops.Mul(span_h, const(steps_h, box)))  # [R, out_h * ratio]
    xs = ops.Add(x1, ops.Mul(span_w, const(steps_w, box)))  # [R, out_w * ratio]
    ny, y_lo, y_hi, wy_lo, wy_hi = (ops.Unsqueeze(v, np.array([2], I64)) for v in _axis(ys, height))
    nx, x_lo, x_hi, wx_lo, wx_hi = (ops.Unsqueeze(v, np.array([1], I64)) for v in _axis(xs, width))
    planes = ops.Gather(x, batch, axis=0)
    flat = ops.Reshape(planes, np.array([0, 0, -1], I64))  # [R, C, H*W]
    total: Value | None = None
    for yy, wy in ((y_lo, wy_lo), (y_hi, wy_hi)):
        for xx, wx in ((x_lo, wx_lo), (x_hi, wx_hi)):
            at = ops.Cast(ops.Add(ops.Mul(yy, const(width, yy)), xx), to=np.dtype("int64"))  # [R, A, B]
            spots = ops.Reshape(at, np.array([0, 1, -1], I64))
            wanted = ops.Concat(ops.Shape(flat, start=0, end=2), ops.Shape(spots, start=2, end=3), axis=0)
            values = ops.Reshape(ops.GatherElements(flat, ops.Expand(spots, wanted), axis=2),
                                 np.array([0, 0, out_h * ratio, out_w * ratio], I64))
            term = ops.Mul(values, ops.Unsqueeze(ops.Mul(wy, wx), np.array([1], I64)))
            total = term if total is None else ops.Add(total, term)
    assert total is not None
    valid = ops.Unsqueeze(ops.Cast(ops.And(ny, nx), to=np.dtype(x.type.dtype)), np.array([1], I64))
    samples = ops.Reshape(ops.Mul(total, valid), np.array([0, 0, out_h, ratio, out_w, ratio], I64))
    return [ops.ReduceMean(samples, axes=[3, 5], keepdims=0)]


roi_align_vjp = composite(_roi_align)
