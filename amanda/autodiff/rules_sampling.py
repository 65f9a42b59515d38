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

import itertools

import numpy as np

from amanda.autodiff.composite import composite
from amanda.autodiff.node import Node, const
from amanda.build import ops
from amanda.build.values import Value

__all__ = ["deform_conv_vjp", "grid_sample_vjp", "max_roi_pool_vjp"]

I64 = np.int64


def _read(x: Value, index: list[Value], sizes: list[int]) -> Value:
    """``x[n, :, i0, i1, ...]`` at the integer positions ``index`` (each ``[N, *points]``; zeros
    outside), shaped ``[N, C, *points]``."""
    inside = None
    flat = None
    stride = 1
    for d in reversed(range(len(sizes))):
        i = index[d]
        ok = ops.And(ops.GreaterOrEqual(i, const(0, i)), ops.LessOrEqual(i, const(sizes[d] - 1, i)))
        inside = ok if inside is None else ops.And(inside, ok)
        term = ops.Mul(ops.Clip(i, const(0, i), const(sizes[d] - 1, i)), const(stride, i))
        flat = term if flat is None else ops.Add(flat, term)
        stride *= sizes[d]
    assert flat is not None and inside is not None
    positions = ops.Reshape(ops.Cast(flat, to=np.dtype("int64")), np.array([0, 1, -1], I64))
    wanted = ops.Concat(ops.Shape(x, start=0, end=2), np.array([-1], I64), axis=0)
    planes = ops.Reshape(x, wanted)
    values = ops.GatherElements(planes, ops.Expand(positions, ops.Concat(ops.Shape(x, start=0, end=2),
                                                                         ops.Shape(positions, start=2, end=3), axis=0)),
                                axis=2)
    out_shape = ops.Concat(ops.Shape(x, start=0, end=2), ops.Shape(index[0], start=1), axis=0)
    keep = ops.Unsqueeze(inside, np.array([1], I64))
    return ops.Where(keep, ops.Reshape(values, out_shape), const(0, x))


def _grid_sample(n: Node) -> list:
    """GridSample: the corners' values weighted (module doc)."""
    x, grid = n.given(0, 1)
    mode = str(n.attr("mode", "linear"))
    mode = {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode)
    padding = str(n.attr("padding_mode", "zeros"))
    if mode not in ("linear", "nearest") or padding not in ("zeros", "border"):
        raise n.fail("mode linear or nearest, padding zeros or border", f"mode {mode}, padding {padding}")
    if x.type.shape is None or not all(type(d) is int for d in x.type.shape[2:]):
        raise n.fail("known spatial sizes", repr(x.type))
    sizes = [int(d) for d in x.type.shape[2:]]
    align = bool(int(n.attr("align_corners", 0)))
    coords = []
    for d, size in enumerate(sizes):
        g = ops.Gather(grid, np.array(len(sizes) - 1 - d, I64), axis=-1)
        c = (ops.Mul(ops.Add(g, const(1, g)), const((size - 1) / 2, g)) if align
             else ops.Div(ops.Sub(ops.Mul(ops.Add(g, const(1, g)), const(size, g)), const(1, g)), const(2, g)))
        coords.append(ops.Clip(c, const(0, c), const(size - 1, c)) if padding == "border" else c)
    if mode == "nearest":
        return [_read(x, [ops.Round(c) for c in coords], sizes)]
    return [_bilinear(x, coords, sizes)]


def _bilinear(x: Value, coords: list[Value], sizes: list[int]) -> Value:
    """``x`` read at the real positions ``coords`` (each ``[N, *points]``), (multi)linearly
    between the corners around each, zeros outside: ``[N, C, *points]``."""
    floors = [ops.Floor(c) for c in coords]
    out: Value | None = None
    for corner in itertools.product((0, 1), repeat=len(sizes)):
        index = [ops.Add(f, const(bit, f)) if bit else f for f, bit in zip(floors, corner)]
        weight: Value | None = None
        for c, i in zip(coords, index):
            w = ops.Sub(const(1, c), ops.Abs(ops.Sub(c, i)))
            weight = w if weight is None else ops.Mul(weight, w)
        assert weight is not None
        term = ops.Mul(_read(x, index, sizes), ops.Unsqueeze(weight, np.array([1], I64)))
        out = term if out is None else ops.Add(out, term)
    assert out is not None
    return out


def _deform_conv(n: Node) -> list:
    """DeformConv: each tap's input read at its offset place (scaled by the mask), then the
    grouped sum over channels and taps as one MatMul."""
    from amanda.exec.kernels.conv import window_pads

    x, w, offset = n.given(0, 1, 2)
    rest = list(n.inputs) + [None] * 2
    bias, mask = rest[3], rest[4]
    dims = [x.type.shape, w.type.shape, offset.type.shape]
    if any(d is None or not all(type(v) is int for v in d[1:]) for d in dims):
        raise n.fail("known channels, kernel and spatial sizes", ", ".join(repr(v.type) for v in (x, w, offset)))
    nd = len(dims[0]) - 2
    sizes, kernel, out_size = [int(v) for v in dims[0][2:]], [int(v) for v in dims[1][2:]], [int(v) for v in dims[2][2:]]
    strides = [int(v) for v in (n.attr("strides") or [1] * nd)]
    dilations = [int(v) for v in (n.attr("dilations") or [1] * nd)]
    pads = window_pads(n.own_attrs(), sizes, kernel, strides, dilations)
    group, offset_group = int(n.attr("group", 1)), int(n.attr("offset_group", 1))
    channels, m = int(dims[0][1]), int(dims[1][0])
    per_offset = channels // offset_group
    taps = list(itertools.product(*(range(k) for k in kernel)))
    mesh = np.meshgrid(*(np.arange(o) for o in out_size), indexing="ij")
    columns = []
    for t, tap in enumerate(taps):
        where = [mesh[d] * strides[d] - pads[d] + tap[d] * dilations[d] for d in range(nd)]
        pairs = [g * len(taps) + t for g in range(offset_group)]
        columns.append(_tap_column(x, offset, mask, pairs, per_offset, where, sizes))
    cols = columns[0] if len(columns) == 1 else ops.Concat(*columns, axis=2)
    points = int(np.prod(out_size))
    cols = ops.Reshape(cols, np.array([0, group, channels // group * len(taps), points], I64))
    weights = ops.Reshape(w, np.array([1, group, m // group, channels // group * len(taps)], I64))
    shape = ops.Concat(ops.Shape(x, start=0, end=1), np.array([m, *out_size], I64), axis=0)
    y = ops.Reshape(ops.MatMul(weights, cols), shape)
    if bias is not None:
        y = ops.Add(y, ops.Reshape(bias, np.array([m] + [1] * nd, I64)))
    return [y]


grid_sample_vjp = composite(_grid_sample)
deform_conv_vjp = composite(_deform_conv)


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


def _tap_column(x: Value, offset: Value, mask: Value | None, pairs: list[int], per_offset: int, where: list,
                sizes: list[int]) -> Value:
    """The input read at one tap, ``[N, C, 1, *out]``: each offset group's channels at the tap's
    regular places ``where`` moved by its own offsets (pair ``pairs[g]`` of group ``g``, whose
    channels are the ``per_offset`` from ``g * per_offset``)."""
    parts = []
    for g, index in enumerate(pairs):
        plane = ops.Slice(x, np.array([g * per_offset], I64), np.array([(g + 1) * per_offset], I64),
                          np.array([1], I64))
        parts.append(_tap_sample(x, plane, offset, mask, index, where, sizes))
    joined = parts[0] if len(parts) == 1 else ops.Concat(*parts, axis=1)
    return ops.Unsqueeze(joined, np.array([2], I64))


def _tap_sample(x: Value, plane: Value, offset: Value, mask: Value | None, index: int, where: list,
                sizes: list[int]) -> Value:
    """One offset group's channels (``plane`` of ``x``) read at one tap: at the tap's regular
    places ``where`` moved by the offsets of pair ``index``, scaled by that pair's mask."""
    nd = len(where)
    coords = [ops.Add(ops.Gather(offset, np.array(index * nd + d, I64), axis=1), const(where[d], x))
              for d in range(nd)]
    sample = _bilinear(plane, coords, sizes)
    if mask is not None:
        sample = ops.Mul(sample, ops.Unsqueeze(ops.Gather(mask, np.array(index, I64), axis=1), np.array([1], I64)))
    return sample
