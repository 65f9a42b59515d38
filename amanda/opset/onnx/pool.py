"""Pooling: MaxPool (with Indices), AveragePool, LpPool, their global forms, MaxUnpool.

Max and sum over a box window are separable: each spatial axis is reduced in
turn by combining its ``kernel`` strided slices of the padded input, so a
``k x k`` pool costs ``2k`` whole-array passes instead of ``k * k`` and never
loops over pixels. Outer axes go first: their slices are contiguous rows, and
the strided inner pass then runs on already-reduced data.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from amanda.autodiff.composite import composite
from amanda.autodiff.node import Node as GradNode
from amanda.autodiff.node import const, rank, shape_of
from amanda.autodiff.rules_decomposed import I64, replay_vjp
from amanda.autodiff.rules_math import extreme_reduce_vjp, mean_reduce_vjp
from amanda.autodiff.rules_nn import Window
from amanda.autodiff.rules_shape import scatter_back
from amanda.build import ops
from amanda.exec.kernels.arity import output_count
from amanda.exec.kernels.pool_indices import max_with_indices, tiled_max_with_indices
from amanda.exec.kernels.registry import kernel
from amanda.exec.kernels.spatial import (
    channels_last,
    extent,
    ints,
    output_size,
    pad_spatial,
    scratch_as,
    window_pads,
)
from amanda.ops import define
from amanda.types.node import Node
from amanda.types.rules.spatial import data, window_output_dims
from amanda.types.tensor_type import TensorType


class _Geometry:
    """Kernel, strides, dilations, pads and output size of one pooling call."""

    def __init__(self, attrs: Mapping[str, Any], x: np.ndarray) -> None:
        nd = x.ndim - 2
        self.size = list(x.shape[2:])
        self.kernel = ints(attrs.get("kernel_shape"), nd, 1)
        self.strides = ints(attrs.get("strides"), nd, 1)
        self.dilations = ints(attrs.get("dilations"), nd, 1)
        self.pads = window_pads(attrs, self.size, self.kernel, self.strides, self.dilations)
        ceil = bool(attrs.get("ceil_mode", 0))
        self.out = [
            output_size(
                self.size[i],
                self.pads[i] + self.pads[nd + i],
                self.kernel[i],
                self.strides[i],
                self.dilations[i],
                self.pads[i],
                ceil,
            )
            for i in range(nd)
        ]
        # ceil_mode windows may overhang the explicit end pads: pad further so the view fits
        self.ends = [
            max(
                self.pads[nd + i],
                (self.out[i] - 1) * self.strides[i]
                + extent(self.kernel[i], self.dilations[i])
                - self.size[i]
                - self.pads[i],
            )
            for i in range(nd)
        ]

    def padded(self, x: np.ndarray, fill: Any) -> np.ndarray:
        """``x`` padded with ``fill`` so every window lies inside it (``x`` itself when it does)."""
        nd = len(self.size)
        if not any(self.pads[:nd]) and not any(self.ends):
            return x
        shape = x.shape[:2] + tuple(
            n + b + e for n, b, e in zip(self.size, self.pads[:nd], self.ends)
        )
        return pad_spatial(
            x, self.pads[:nd], self.ends, fill, into=scratch_as(x, shape, x.dtype, "pool.pad")
        )

    def taps(self, y: np.ndarray, i: int) -> list[np.ndarray]:
        """The strided slices of ``y`` along spatial axis ``i``, one per kernel offset."""
        k, s, d, o = self.kernel[i], self.strides[i], self.dilations[i], self.out[i]
        index: list[Any] = [slice(None)] * y.ndim
        parts = []
        for j in range(k):
            index[2 + i] = slice(j * d, j * d + (o - 1) * s + 1, s)
            parts.append(y[tuple(index)])
        return parts

    def counts(self, include_pad: bool) -> np.ndarray:
        """Per output position, how many window pixels count toward an average."""
        nd = len(self.size)
        total = np.ones(self.out, dtype=np.float64)
        for i in range(nd):
            o = np.arange(self.out[i])[:, None] * self.strides[i]
            p = o + np.arange(self.kernel[i])[None, :] * self.dilations[i]
            if include_pad:
                valid = p < self.size[i] + self.pads[i] + self.pads[nd + i]
            else:
                valid = (p >= self.pads[i]) & (p < self.pads[i] + self.size[i])
            shape = [1] * nd
            shape[i] = self.out[i]
            total = total * valid.sum(axis=1).reshape(shape)
        return total


def _lowest(dtype: np.dtype) -> Any:
    return -np.inf if dtype.kind == "f" else np.iinfo(dtype).min


def _accumulator(dtype: np.dtype) -> np.dtype:
    # half-precision sums lose too much; integer averages are computed in float
    return np.dtype(np.float64) if dtype == np.float64 else np.dtype(np.float32)


def _reduce(
    padded: np.ndarray, geometry: _Geometry, combine: np.ufunc, dtype: np.dtype
) -> np.ndarray:
    """Combine every window of ``padded`` with ``combine`` (max or add), one axis at a time."""
    y = padded
    nd = len(geometry.size)
    stages = 0
    for i in range(nd):
        parts = geometry.taps(y, i)
        if len(parts) == 1:
            y = parts[0]
            continue
        # stages before the last are temporaries: reuse this thread's scratch for them
        last = all(k == 1 for k in geometry.kernel[i + 1 :])
        out = None if last else scratch_as(parts[0], parts[0].shape, dtype, f"pool.stage{stages % 2}")
        stages += 1
        acc = combine(parts[0], parts[1], dtype=dtype, out=out)
        for part in parts[2:]:
            combine(acc, part, out=acc)
        y = acc
    # a 1x1 pool may leave a view of the (scratch) padded input: always hand back a copy
    return y if y.base is None and y is not padded else y.astype(dtype, copy=True)


@kernel("MaxPool", since=1, output_count=True)
def max_pool(attrs: Mapping[str, Any], x: np.ndarray) -> tuple:
    """ONNX MaxPool (ceil_mode, dilations, storage_order); Indices only when the node has them."""
    geometry = _Geometry(attrs, x)
    padded = geometry.padded(x, _lowest(x.dtype))
    if (output_count(attrs) or 2) < 2:
        return _reduce(padded, geometry, np.maximum, x.dtype), None
    column_major = int(attrs.get("storage_order", 0)) == 1
    if padded is x and geometry.strides == geometry.kernel and all(d == 1 for d in geometry.dilations):
        return tiled_max_with_indices(x, geometry, column_major)
    return max_with_indices(padded, x.shape, geometry, column_major)


@kernel("AveragePool", since=1)
def average_pool(attrs: Mapping[str, Any], x: np.ndarray) -> tuple:
    """ONNX AveragePool (count_include_pad, ceil_mode, dilations)."""
    geometry = _Geometry(attrs, x)
    acc = _reduce(geometry.padded(x, 0), geometry, np.add, _accumulator(x.dtype))
    acc /= geometry.counts(bool(attrs.get("count_include_pad", 0)))
    return (acc.astype(x.dtype, copy=False),)


@kernel("LpPool", since=1)
def lp_pool(attrs: Mapping[str, Any], x: np.ndarray) -> tuple:
    """ONNX LpPool: ``(sum |x|^p) ** (1/p)`` over each window (pads count as zeros)."""
    p = float(attrs.get("p", 2))
    geometry = _Geometry(attrs, x)
    powered = np.abs(x.astype(_accumulator(x.dtype))) ** p
    acc = _reduce(geometry.padded(powered, 0), geometry, np.add, powered.dtype)
    return ((acc ** (1.0 / p)).astype(x.dtype, copy=False),)


@kernel("GlobalAveragePool", since=1)
def global_average_pool(attrs: Mapping[str, Any], x: np.ndarray) -> tuple:
    """ONNX GlobalAveragePool: the mean over every spatial axis, kept as size 1.

    A float32 or float64 input stored channels-last or channels-first is one product with a
    row of ``1 / length`` (BLAS's matrix-vector kernel): 3-10x faster than numpy's mean over
    axes, which on a channels-last input walks them one value at a time (EfficientNet's
    (2, 32, 56, 56): 112 -> 10 µs)."""
    length = math.prod(x.shape[2:])
    if x.dtype in (np.float32, np.float64) and x.ndim > 2 and length > 0 and x.size > 0:
        n, c = x.shape[:2]
        weights = np.full(length, 1.0 / length, x.dtype)
        rows = channels_last(x)
        if rows is not None:
            return (np.matmul(weights, rows.reshape(n, length, c)).reshape(n, c, *([1] * (x.ndim - 2))),)
        if x.flags.c_contiguous:
            return (np.matmul(x.reshape(n, c, length), weights).reshape(n, c, *([1] * (x.ndim - 2))),)
    axes = tuple(range(2, x.ndim))
    return (x.mean(axis=axes, keepdims=True, dtype=_accumulator(x.dtype)).astype(x.dtype),)


@kernel("GlobalMaxPool", since=1)
def global_max_pool(attrs: Mapping[str, Any], x: np.ndarray) -> tuple:
    """ONNX GlobalMaxPool: the max over every spatial axis, kept as size 1."""
    return (x.max(axis=tuple(range(2, x.ndim)), keepdims=True),)


@kernel("GlobalLpPool", since=1)
def global_lp_pool(attrs: Mapping[str, Any], x: np.ndarray) -> tuple:
    """ONNX GlobalLpPool: ``(sum |x|^p) ** (1/p)`` over every spatial axis."""
    p = float(attrs.get("p", 2))
    powered = np.abs(x.astype(_accumulator(x.dtype))) ** p
    total = powered.sum(axis=tuple(range(2, x.ndim)), keepdims=True)
    return ((total ** (1.0 / p)).astype(x.dtype),)


@kernel("MaxUnpool", since=9)
def max_unpool(
    attrs: Mapping[str, Any],
    x: np.ndarray,
    indices: np.ndarray,
    output_shape: np.ndarray | None = None,
) -> tuple:
    """ONNX MaxUnpool: scatter ``x`` to the flat positions MaxPool's Indices recorded."""
    nd = x.ndim - 2
    kernel_shape = ints(attrs.get("kernel_shape"), nd, 1)
    strides = ints(attrs.get("strides"), nd, 1)
    pads = ints(attrs.get("pads"), 2 * nd, 0)
    natural = x.shape[:2] + tuple(
        (x.shape[2 + i] - 1) * strides[i] + kernel_shape[i] - pads[i] - pads[nd + i]
        for i in range(nd)
    )
    shape = natural if output_shape is None else tuple(int(v) for v in output_shape)
    flat = indices.reshape(-1)
    if shape != natural:
        # indices address the natural unpooled shape; keep their coordinates in the larger one
        flat = np.ravel_multi_index(np.unravel_index(flat, natural), shape)
    y = np.zeros(int(np.prod(shape)), dtype=x.dtype)
    y[flat] = x.reshape(-1)
    return (y.reshape(shape),)


def max_unpool_type(node: Node) -> list:
    """The ``output_shape`` input, else ``(in-1)·s + k - pads`` per spatial dim."""
    x = data(node)
    given = node.dims(2) if node.present(2) else None
    if given is not None:
        return [TensorType(node.dtype(0), given)]
    if node.present(2) or x is None:  # an output_shape not known before running
        return [TensorType(node.dtype(0), None if x is None else (None,) * len(x))]
    n = len(x) - 2
    kernel = list(node.attr("kernel_shape") or [None] * n)
    strides = list(node.attr("strides") or [1] * n)
    pads = list(node.attr("pads") or [0] * (2 * n))
    out = [(d - 1) * strides[i] + kernel[i] - pads[i] - pads[i + n]
           if type(d) is int and type(kernel[i]) is int else None for i, d in enumerate(x[2:])]
    return [TensorType(node.dtype(0), (x[0], x[1], *out))]


define("MaxUnpool", type_rule=max_unpool_type, vjp=replay_vjp)


# ---- type rules and gradients shared by several ops of this family ----


def pool(node: Node) -> list:
    """``[N, C, out…]`` from ``kernel_shape``, strides, pads, dilations and ``ceil_mode``."""
    x = data(node)
    if x is None:
        return [TensorType(node.dtype(0), None), TensorType("int64", None)]
    kernel = node.attr("kernel_shape")
    if kernel is None:
        raise node.fail("a kernel_shape attribute", "none")
    out = (x[0], x[1], *window_output_dims(node, x[2:], list(kernel), bool(node.attr("ceil_mode", 0))))
    return [TensorType(node.dtype(0), out), TensorType("int64", out)]


def global_pool(node: Node) -> list:
    """``[N, C, 1, …]``."""
    x = data(node)
    return [TensorType(node.dtype(0), None if x is None else (x[0], x[1], *[1] * (len(x) - 2)))]


def maxpool_vjp(n: GradNode) -> list:
    """MaxPool: the gradient back to the positions the maxima came from."""
    x = n.given(0)
    attrs = n.own_attrs("storage_order")
    _, indices = ops.MaxPool(x, **attrs)
    win = Window(n, n.attr("kernel_shape"))
    apart = all(win.strides[i] >= win.extent(i) for i in range(win.nd))  # each element in one window at most
    return [scatter_back(n.grad(), x, indices, n, unique=apart)]


def avgpool_vjp(n: GradNode) -> list:
    """AveragePool: each window's share spread back over it by a ConvTranspose of ones."""
    x = n.given(0)
    if int(n.attr("ceil_mode", 0)):
        raise n.fail("ceil_mode=0", "ceil_mode=1")
    win = Window(n, n.attr("kernel_shape"))
    channels = x.type.shape[1]  # type: ignore[index]
    if type(channels) is not int:
        raise n.fail("a known channel count", repr(x.type))
    area = int(np.prod(win.kernel))
    g = n.grad()
    if any(win.pads) and not int(n.attr("count_include_pad", 0)):
        ones = ops.ConstantOfShape(shape_of(x), value=const([1], x))
        share = ops.AveragePool(ones, kernel_shape=win.kernel, strides=win.strides, pads=win.pads, count_include_pad=1)
        g = ops.Div(g, ops.Mul(share, const(area, x)))
    else:
        g = ops.Mul(g, const(1 / area, g))
    kernel = const(np.ones((channels, 1, *win.kernel)), x)
    return [win.transpose(g, kernel, channels)]  # type: ignore[arg-type]


def _lp_pool(n: GradNode) -> list:
    """LpPool: ``(window sum of |x|^p) ** (1/p)``, the sum a depthwise Conv of ones."""
    x = n.given(0)
    shape = x.type.shape
    if shape is None or type(shape[1]) is not int:
        raise n.fail("a known number of channels", repr(x.type))
    if int(n.attr("ceil_mode", 0)):
        raise n.fail("ceil_mode 0", "ceil_mode 1")
    p = float(n.attr("p", 2))
    kernel = [int(k) for k in n.attr("kernel_shape")]
    ones = np.ones([int(shape[1]), 1, *kernel], np.dtype(x.type.dtype))
    kw = {k: n.attr(k) for k in ("strides", "pads", "dilations", "auto_pad") if n.attr(k) is not None}
    summed = ops.Conv(ops.Pow(ops.Abs(x), const(p, x)), ones, group=int(shape[1]), kernel_shape=kernel, **kw)
    return [ops.Pow(summed, const(1 / p, x))]


def _global_lp_pool(n: GradNode) -> list:
    """GlobalLpPool: ``(sum of |x|^p over the spatial axes) ** (1/p)``."""
    x = n.given(0)
    p = float(n.attr("p", 2))
    axes = np.arange(2, rank(x, n), dtype=I64)
    return [ops.Pow(ops.ReduceSum(ops.Pow(ops.Abs(x), const(p, x)), axes, keepdims=1), const(1 / p, x))]


lp_pool_vjp = composite(_lp_pool)


global_lp_pool_vjp = composite(_global_lp_pool)


# each op's type rule and gradient, beside the kernels registered above
define("AveragePool", type_rule=pool, vjp=avgpool_vjp)
define("GlobalAveragePool", type_rule=global_pool, vjp=mean_reduce_vjp)
define("GlobalLpPool", type_rule=global_pool, vjp=global_lp_pool_vjp)
define("GlobalMaxPool", type_rule=global_pool, vjp=extreme_reduce_vjp)
define("LpPool", type_rule=pool, vjp=lp_pool_vjp)
define("MaxPool", type_rule=pool, vjp=maxpool_vjp)
