"""Spatial sampling of the ONNX default domain: AffineGrid, GridSample and RoiAlign.

Grids hold normalised coordinates in [-1, 1], the last grid axis listing them from the
innermost spatial axis out (x, then y, then z). ``align_corners`` puts -1 and 1 on the
centres of the corner pixels instead of their outer edges. Samples outside the input read
zeros, the border value, or a reflection, as ``padding_mode`` says.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

import numpy as np

from amanda.exec.kernels.math_util import attr_str
from amanda.exec.kernels.registry import kernel

Attrs = Mapping[str, Any]
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


def _read(x: np.ndarray, index: list[np.ndarray]) -> np.ndarray:
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
            out = out + _read(wx, index) * weight[:, None]
        return (np.asarray(out).astype(x.dtype),)
    coords = [_pad(c, s, padding, align) for c, s in zip(coords, sizes)]
    if mode == "nearest":
        return (_read(wx, [np.rint(c).astype(np.int64) for c in coords]).astype(x.dtype),)
    floors = [np.floor(c) for c in coords]
    out = 0.0  # type: ignore[assignment]  # becomes an array on the first corner
    for corner in itertools.product((0, 1), repeat=len(sizes)):
        index = [(f + bit).astype(np.int64) for f, bit in zip(floors, corner)]
        weight = np.prod([1 - np.abs(c - i) for c, i in zip(coords, index)], axis=0)
        out = out + _read(wx, index) * weight[:, None]
    return (np.asarray(out).astype(x.dtype),)


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


@kernel("DeformConv", since=19)
def deform_conv_kernel(attrs: Attrs, x: np.ndarray, w: np.ndarray, offset: np.ndarray, bias: Any = None,
                       mask: Any = None) -> tuple:
    """ONNX DeformConv: each kernel tap reads the input at its place shifted by a learned
    offset (bilinear, zero outside), scaled by ``mask``; then a grouped convolution sum."""
    from amanda.exec.kernels.conv import ints, window_pads

    nd = x.ndim - 2
    kernel_shape = list(w.shape[2:])
    strides = ints(attrs.get("strides"), nd, 1)
    dilations = ints(attrs.get("dilations"), nd, 1)
    pads = window_pads(attrs, x.shape[2:], kernel_shape, strides, dilations)
    group, offset_group = int(attrs.get("group", 1)), int(attrs.get("offset_group", 1))
    out_size = offset.shape[2:]
    taps = list(itertools.product(*(range(k) for k in kernel_shape)))
    n, channels = x.shape[:2]
    per_offset_group = channels // offset_group
    wx = x.astype(np.float64)
    grids = np.meshgrid(*(np.arange(o) for o in out_size), indexing="ij")
    columns = np.empty((n, channels, len(taps), *out_size), np.float64)
    for g in range(offset_group):
        plane = wx[:, g * per_offset_group:(g + 1) * per_offset_group]
        for t, tap in enumerate(taps):
            base = (g * len(taps) + t) * nd
            coords = [grids[d] * strides[d] - pads[d] + tap[d] * dilations[d] + offset[:, base + d]
                      for d in range(nd)]
            floors = [np.floor(c) for c in coords]
            sample = 0.0
            for corner in itertools.product((0, 1), repeat=nd):
                index = [(f + bit).astype(np.int64) for f, bit in zip(floors, corner)]
                weight = np.prod([1 - np.abs(c - i) for c, i in zip(coords, index)], axis=0)
                sample = sample + _read(plane, index) * weight[:, None]
            if mask is not None:
                sample = sample * mask[:, g * len(taps) + t][:, None]
            columns[:, g * per_offset_group:(g + 1) * per_offset_group, t] = sample
    m = w.shape[0]
    per_group_in, per_group_out = channels // group, m // group
    weights = w.reshape(group, per_group_out, per_group_in, len(taps)).astype(np.float64)
    cols = columns.reshape(n, group, per_group_in, len(taps), -1)
    y = np.einsum("gocK,ngcKp->ngop", weights, cols).reshape(n, m, *out_size)
    if bias is not None:
        y = y + bias.astype(np.float64).reshape((m,) + (1,) * nd)
    return (y.astype(x.dtype),)
