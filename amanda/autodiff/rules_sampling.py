"""The vector-Jacobian rule of GridSample: the sampling written again as Gathers of the input
at the corners around each grid point, weighted by the distances to them (a composite rule),
so X gets the weights and the grid gets the weights' slopes.

Covered: any number of spatial axes, ``mode`` linear (bilinear) and nearest, ``padding_mode``
zeros and border, ``align_corners``. Refused with a ``SchemaError`` naming the op: cubic
mode and reflection padding. The input's spatial sizes must be known when ``grad`` runs.
"""

from __future__ import annotations

import itertools

import numpy as np

from amanda.autodiff.composite import composite
from amanda.autodiff.node import Node, const
from amanda.build import ops
from amanda.build.values import Value

__all__ = ["grid_sample_vjp"]

I64 = np.int64


def _read(x: Value, index: list[Value], sizes: list[int], grid: Value) -> Value:
    """``x[n, :, i0, i1, ...]`` at the integer positions ``index`` (zeros outside), shaped
    ``[N, C, *grid points]``."""
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
    out_shape = ops.Concat(ops.Shape(x, start=0, end=2), ops.Shape(grid, start=1, end=-1), axis=0)
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
        return [_read(x, [ops.Round(c) for c in coords], sizes, grid)]
    floors = [ops.Floor(c) for c in coords]
    out: Value | None = None
    for corner in itertools.product((0, 1), repeat=len(sizes)):
        index = [ops.Add(f, const(bit, f)) if bit else f for f, bit in zip(floors, corner)]
        weight: Value | None = None
        for c, i in zip(coords, index):
            w = ops.Sub(const(1, c), ops.Abs(ops.Sub(c, i)))
            weight = w if weight is None else ops.Mul(weight, w)
        assert weight is not None
        term = ops.Mul(_read(x, index, sizes, grid), ops.Unsqueeze(weight, np.array([1], I64)))
        out = term if out is None else ops.Add(out, term)
    return [out]


grid_sample_vjp = composite(_grid_sample)
