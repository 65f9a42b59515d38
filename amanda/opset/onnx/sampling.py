"""Spatial sampling of the ONNX default domain: AffineGrid, GridSample and RoiAlign.

Grids hold normalised coordinates in [-1, 1], the last grid axis listing them from the
innermost spatial axis out (x, then y, then z). ``align_corners`` puts -1 and 1 on the
centres of the corner pixels instead of their outer edges. Samples outside the input read
zeros, the border value, or a reflection, as ``padding_mode`` says.

Gradients. The vector-Jacobian rule of RoiAlign: its bilinear samples written again as ops (a
composite rule), so X and the boxes get gradients.

Each box is cut into ``output_height x output_width`` bins of ``sampling_ratio`` squared
samples; a sample reads the four pixels around it as the kernel does (clamped at the far
edges, nothing when it lies more than a pixel outside), and a bin averages its samples.
Covered: ``mode`` avg, both ``coordinate_transformation_mode`` values, ``spatial_scale``.
Refused with a ``SchemaError`` naming the op: ``mode`` max, and ``sampling_ratio`` 0 (the
number of samples would depend on each box's size). The input's spatial sizes must be known.

Gradient. **GridSample**: the sampling written again as Gathers of the input
at the corners around each grid point, weighted by the distances to them (a composite rule),
so X gets the weights and the grid gets the weights' slopes.

Covered: any number of spatial axes, ``mode`` linear (bilinear) and nearest, ``padding_mode``
zeros and border, ``align_corners``. Refused with a ``SchemaError`` naming the op: cubic
mode and reflection padding. The input's spatial sizes must be known when ``grad`` runs.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

import numpy as np

from amanda.autodiff.composite import composite
from amanda.autodiff.node import Node as GradNode
from amanda.autodiff.node import const
from amanda.build import ops
from amanda.build.values import Value
from amanda.exec.kernels.math_util import attr_str
from amanda.exec.kernels.registry import kernel
from amanda.ops import define
from amanda.types.node import Node
from amanda.types.tensor_type import TensorType

Attrs = Mapping[str, Any]
I64 = np.int64  # the dtype of index tensors the gradients build
_CUBIC_A = -0.75


def _positions(size: int, align: bool) -> np.ndarray:
    if align:
        return np.linspace(-1.0, 1.0, size) if size > 1 else np.zeros(1)
    return (np.arange(size) * 2 + 1) / size - 1


@kernel("AffineGrid", since=20)
def affine_grid_kernel(attrs: Attrs, theta: np.ndarray, size: np.ndarray) -> tuple:
    """ONNX AffineGrid: the affine map ``theta`` applied to a regular grid over [-1, 1]."""
    dims = [int(d) for d in np.asarray(size).reshape(-1)[2:]]
    align = bool(int(attrs.get("align_corners", 0)))
    axes = [_positions(d, align) for d in dims]  # outermost first
    mesh = np.meshgrid(*axes, indexing="ij")
    points = np.stack([*reversed(mesh), np.ones_like(mesh[0])], axis=-1)  # (..., x, y[, z], 1)
    grid = np.einsum("...j,nij->n...i", points, theta.astype(np.float64))
    return (grid.astype(theta.dtype),)


def affine_grid(node: Node) -> list:
    """``[N, *spatial, r]`` from the size input ``[N, C, *spatial]`` (known or of known length)."""
    size = node.dims(1)
    if size is None:
        n = node.shape(1)
        rank = n[0] if n is not None and type(n[0]) is int else None
        return [TensorType(node.dtype(0), None if rank is None else (*(None,) * (rank - 1), rank - 2))]
    return [TensorType(node.dtype(0), (size[0], *size[2:], len(size) - 2))]


def _affine_grid(n: GradNode) -> list:
    """AffineGrid: the constant grid of points times theta."""
    theta = n.given(0)
    dims = [int(d) for d in n.known(1, "size input").reshape(-1)[2:]]
    align = bool(int(n.attr("align_corners", 0)))
    axes = [np.linspace(-1.0, 1.0, d) if align and d > 1 else np.zeros(1) if align
            else (np.arange(d) * 2 + 1) / d - 1 for d in dims]
    mesh = np.meshgrid(*axes, indexing="ij")
    points = np.stack([*reversed(mesh), np.ones_like(mesh[0])], axis=-1).reshape(-1, len(dims) + 1)
    grid = ops.MatMul(const(points, theta), ops.Transpose(theta, perm=[0, 2, 1]))  # [N, points, nd]
    return [ops.Reshape(grid, np.array([0, *dims, len(dims)], I64))]


affine_grid_vjp = composite(_affine_grid)


define("AffineGrid", type_rule=affine_grid, vjp=affine_grid_vjp)


def _unnormalise(g: np.ndarray, size: int, align: bool) -> np.ndarray:
    return (g + 1) / 2 * (size - 1) if align else ((g + 1) * size - 1) / 2


def _reflect(x: np.ndarray, low: float, high: float) -> np.ndarray:
    span = high - low
    if span <= 0:
        return np.zeros_like(x)
    distance = np.abs(x - low)
    flips = np.floor(distance / span)
    extra = distance - flips * span
    return np.where(flips % 2 == 0, low + extra, high - extra)


def _pad(x: np.ndarray, size: int, padding: str, align: bool) -> np.ndarray:
    if padding == "border":
        return np.clip(x, 0, size - 1)
    if padding == "reflection":
        reflected = _reflect(x, 0, size - 1) if align else _reflect(x, -0.5, size - 0.5)
        return np.clip(reflected, 0, size - 1)
    return x


def read_taps(x: np.ndarray, index: list[np.ndarray]) -> np.ndarray:
    """``x[n, :, i0, i1, ...]`` at integer positions (zero outside), shaped (N, C, *out)."""
    sizes = x.shape[2:]
    inside = np.ones(index[0].shape, bool)
    clipped = []
    for i, size in zip(index, sizes):
        inside &= (i >= 0) & (i < size)
        clipped.append(np.clip(i, 0, size - 1))
    batch = np.arange(x.shape[0]).reshape((-1,) + (1,) * (index[0].ndim - 1))
    values = x[(batch, slice(None), *clipped)]  # (N, *out, C): advanced axes come first
    values = np.where(inside[..., None], values, 0)
    return np.moveaxis(values, -1, 1)


def _cubic_weights(t: np.ndarray) -> list[np.ndarray]:
    a = _CUBIC_A

    def near(d: np.ndarray) -> np.ndarray:
        return ((a + 2) * d - (a + 3)) * d * d + 1

    def far(d: np.ndarray) -> np.ndarray:
        return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


@kernel("GridSample", since=16)
def grid_sample_kernel(attrs: Attrs, x: np.ndarray, grid: np.ndarray) -> tuple:
    """ONNX GridSample in any number of spatial dimensions: nearest, (multi)linear or cubic."""
    mode = attr_str(attrs, "mode", "linear")
    mode = {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode)
    padding = attr_str(attrs, "padding_mode", "zeros")
    align = bool(int(attrs.get("align_corners", 0)))
    sizes = x.shape[2:]
    g = grid.astype(np.float64)
    coords = [_unnormalise(g[..., len(sizes) - 1 - d], sizes[d], align) for d in range(len(sizes))]
    wx = x.astype(np.float64)
    if mode == "cubic":
        bases = [np.floor(c) for c in coords]
        weights = [_cubic_weights(c - b) for c, b in zip(coords, bases)]
        out: Any = 0.0
        for taps in itertools.product(range(4), repeat=len(sizes)):
            index: list[np.ndarray] = []
            weight: Any = 1.0
            for d, tap in enumerate(taps):
                position = _pad(bases[d] + tap - 1, sizes[d], padding, align)
                index.append(position.astype(np.int64))
                weight = weight * weights[d][tap]
            out = out + read_taps(wx, index) * weight[:, None]
        return (np.asarray(out).astype(x.dtype),)
    coords = [_pad(c, s, padding, align) for c, s in zip(coords, sizes)]
    if mode == "nearest":
        return (read_taps(wx, [np.rint(c).astype(np.int64) for c in coords]).astype(x.dtype),)
    floors = [np.floor(c) for c in coords]
    out = 0.0  # type: ignore[assignment]  # becomes an array on the first corner
    for corner in itertools.product((0, 1), repeat=len(sizes)):
        index = [(f + bit).astype(np.int64) for f, bit in zip(floors, corner)]
        weight = np.prod([1 - np.abs(c - i) for c, i in zip(coords, index)], axis=0)
        out = out + read_taps(wx, index) * weight[:, None]
    return (np.asarray(out).astype(x.dtype),)


def grid_sample(node: Node) -> list:
    """``[N, C, *grid spatial]``."""
    x, grid = node.shape(0), node.shape(1)
    if x is None or grid is None:
        rank = len(x) if x is not None else (len(grid) if grid is not None else None)
        return [TensorType(node.dtype(0), None if rank is None else (None,) * rank)]
    if len(grid) != len(x):
        raise node.fail(f"a grid of rank {len(x)}", f"rank {len(grid)}")
    return [TensorType(node.dtype(0), (node.same(x[0], grid[0], "the batch"), x[1], *grid[1:-1]))]


def _grid_sample(n: GradNode) -> list:
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
        return [read_grad(x, [ops.Round(c) for c in coords], sizes)]
    return [bilinear_grad(x, coords, sizes)]


grid_sample_vjp = composite(_grid_sample)


define("GridSample", type_rule=grid_sample, vjp=grid_sample_vjp)


def _bilinear(plane: np.ndarray, y: float, x: float) -> tuple[list[float], list[tuple[int, int]]]:
    """Weights and positions of one RoiAlign sample (an empty list outside the plane)."""
    height, width = plane.shape[-2:]
    if y < -1.0 or y > height or x < -1.0 or x > width:
        return [], []
    y, x = max(y, 0.0), max(x, 0.0)
    y0, x0 = int(y), int(x)
    if y0 >= height - 1:
        y0 = y1 = height - 1
        y = float(y0)
    else:
        y1 = y0 + 1
    if x0 >= width - 1:
        x0 = x1 = width - 1
        x = float(x0)
    else:
        x1 = x0 + 1
    ly, lx = y - y0, x - x0
    hy, hx = 1 - ly, 1 - lx
    return [hy * hx, hy * lx, ly * hx, ly * lx], [(y0, x0), (y0, x1), (y1, x0), (y1, x1)]


@kernel("RoiAlign", since=10)
def roi_align_kernel(attrs: Attrs, x: np.ndarray, rois: np.ndarray, batch_indices: np.ndarray) -> tuple:
    """ONNX RoiAlign: each region pooled to ``output_height x output_width`` bins of
    bilinearly interpolated samples (average, or the largest weighted corner in ``max`` mode)."""
    out_h, out_w = int(attrs.get("output_height", 1)), int(attrs.get("output_width", 1))
    ratio = int(attrs.get("sampling_ratio", 0))
    scale = float(attrs.get("spatial_scale", 1.0))
    maximum = attr_str(attrs, "mode", "avg") == "max"
    half_pixel = attr_str(attrs, "coordinate_transformation_mode", "half_pixel") == "half_pixel"
    offset = 0.5 if half_pixel else 0.0
    result = np.zeros((rois.shape[0], x.shape[1], out_h, out_w), np.float64)
    for r, (box, batch) in enumerate(zip(rois.astype(np.float64), batch_indices)):
        x1, y1, x2, y2 = box * scale - offset
        width, height = x2 - x1, y2 - y1
        if not half_pixel:
            width, height = max(width, 1.0), max(height, 1.0)
        bin_h, bin_w = height / out_h, width / out_w
        grid_h = ratio if ratio > 0 else int(np.ceil(height / out_h))
        grid_w = ratio if ratio > 0 else int(np.ceil(width / out_w))
        count = max(grid_h * grid_w, 1)
        plane = x[int(batch)].astype(np.float64)
        for ph in range(out_h):
            for pw in range(out_w):
                acc = np.full(x.shape[1], -np.inf if maximum else 0.0)
                for iy in range(grid_h):
                    yy = y1 + ph * bin_h + (iy + 0.5) * bin_h / grid_h
                    for ix in range(grid_w):
                        xx = x1 + pw * bin_w + (ix + 0.5) * bin_w / grid_w
                        weights, points = _bilinear(plane, yy, xx)
                        if not weights:
                            acc = np.maximum(acc, 0.0) if maximum else acc
                            continue
                        parts = [w * plane[:, py, px] for w, (py, px) in zip(weights, points)]
                        acc = np.maximum(acc, np.max(parts, axis=0)) if maximum else acc + np.sum(parts, axis=0)
                result[r, :, ph, pw] = acc if maximum else acc / count
    return (result.astype(x.dtype),)


def roi_align(node: Node) -> list:
    """``[num_rois, C, output_height, output_width]``."""
    x, rois = node.shape(0), node.shape(1)
    shape = (rois[0] if rois else None, x[1] if x else None,
             int(node.attr("output_height", 1)), int(node.attr("output_width", 1)))
    return [TensorType(node.dtype(0), shape)]


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


def _roi_align(n: GradNode) -> list:
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


define("RoiAlign", type_rule=roi_align, vjp=roi_align_vjp)


def read_grad(x: Value, index: list[Value], sizes: list[int]) -> Value:
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


def bilinear_grad(x: Value, coords: list[Value], sizes: list[int]) -> Value:
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
        term = ops.Mul(read_grad(x, index, sizes), ops.Unsqueeze(weight, np.array([1], I64)))
        out = term if out is None else ops.Add(out, term)
    assert out is not None
    return out
