"""The vector-Jacobian rules of GridSample and DeformConv.

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
"""

from __future__ import annotations

import itertools

import numpy as np

from amanda.autodiff.composite import composite
from amanda.autodiff.node import Node, const
from amanda.build import ops
from amanda.build.values import Value

__all__ = ["deform_conv_vjp", "grid_sample_vjp"]

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
        parts = []
        for g in range(offset_group):
            plane = ops.Slice(x, np.array([g * per_offset], I64), np.array([(g + 1) * per_offset], I64),
                              np.array([1], I64))
            base = (g * len(taps) + t) * nd
            coords = [ops.Add(ops.Gather(offset, np.array(base + d, I64), axis=1),
                              const(mesh[d] * strides[d] - pads[d] + tap[d] * dilations[d], x)) for d in range(nd)]
            sample = _bilinear(plane, coords, sizes)
            if mask is not None:
                sample = ops.Mul(sample, ops.Unsqueeze(ops.Gather(mask, np.array(g * len(taps) + t, I64), axis=1),
                                                       np.array([1], I64)))
            parts.append(sample)
        joined = parts[0] if len(parts) == 1 else ops.Concat(*parts, axis=1)
        columns.append(ops.Unsqueeze(joined, np.array([2], I64)))  # [N, C, 1, *out]
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
