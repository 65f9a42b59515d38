"""DeformConv: a convolution whose taps read the input at learnt offsets (bilinear samples,
optionally masked), with its kernel, type rule and gradient side by side.

Gradient. **DeformConv** (opset 19): each kernel tap reads the input bilinearly at its place plus the
learned offset (scaled by the mask), and the grouped sum over channels and taps is one MatMul;
X, W, the offsets, the bias and the mask get gradients. Channels, kernel and spatial sizes
must be known.
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
from amanda.exec.kernels.registry import kernel
from amanda.ops import define
from amanda.opset.onnx.conv import conv_type
from amanda.opset.onnx.sampling import bilinear_grad, read_taps
from amanda.types.node import Node

Attrs = Mapping[str, Any]
I64 = np.int64  # the dtype of index tensors the gradients build


@kernel("DeformConv", since=19)
def deform_conv_kernel(attrs: Attrs, x: np.ndarray, w: np.ndarray, offset: np.ndarray, bias: Any = None,
                       mask: Any = None) -> tuple:
    """ONNX DeformConv: each kernel tap reads the input at its place shifted by a learned
    offset (bilinear, zero outside), scaled by ``mask``; then a grouped convolution sum."""
    from amanda.exec.kernels.spatial import ints, window_pads

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
                sample = sample + read_taps(plane, index) * weight[:, None]
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


def deform_conv(node: Node) -> list:
    """A convolution's type."""
    return list(conv_type(node))


def _tap_sample(x: Value, plane: Value, offset: Value, mask: Value | None, index: int, where: list,
                sizes: list[int]) -> Value:
    """One offset group's channels (``plane`` of ``x``) read at one tap: at the tap's regular
    places ``where`` moved by the offsets of pair ``index``, scaled by that pair's mask."""
    nd = len(where)
    coords = [ops.Add(ops.Gather(offset, np.array(index * nd + d, I64), axis=1), const(where[d], x))
              for d in range(nd)]
    sample = bilinear_grad(plane, coords, sizes)
    if mask is not None:
        sample = ops.Mul(sample, ops.Unsqueeze(ops.Gather(mask, np.array(index, I64), axis=1), np.array([1], I64)))
    return sample


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


def _deform_conv(n: GradNode) -> list:
    """DeformConv: each tap's input read at its offset place (scaled by the mask), then the
    grouped sum over channels and taps as one MatMul."""
    from amanda.exec.kernels.spatial import window_pads

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


deform_conv_vjp = composite(_deform_conv)


define("DeformConv", type_rule=deform_conv, vjp=deform_conv_vjp)
