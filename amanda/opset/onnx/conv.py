"""Convolutions: Conv, ConvTranspose and Col2Im, each op's kernel, type rule and gradient side by
side.

Kernels. Conv runs :func:`~amanda.exec.kernels.conv.conv_nd` (im2col and one batched GEMM, or a
column-free layout); ConvTranspose is one GEMM per group into columns, then col2im (a unit-stride,
one-group ConvTranspose is a Conv of the flipped weights); Col2Im rearranges blocks into an image.

Gradients. The input gradient of a Conv is a ``ConvTranspose`` with the same weights, its weight
gradient a convolution of the input with the output gradient; ConvTranspose's the reverse;
Col2Im's a ConvTranspose by one-hot kernels, one group per channel. Spatial sizes must be known.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from amanda.autodiff.composite import composite
from amanda.autodiff.node import Node as GradNode
from amanda.autodiff.node import rank
from amanda.autodiff.rules_decomposed import I64
from amanda.autodiff.rules_nn import Window, i64
from amanda.build import ops
from amanda.build.values import Value
from amanda.exec.kernels.conv import compute_dtype, conv_nd
from amanda.exec.kernels.conv_transpose import as_conv, transpose_pads
from amanda.exec.kernels.spatial import col2im, extent, ints, output_size, window_pads
from amanda.ops import define
from amanda.types.node import Node
from amanda.types.rules.spatial import data, window_output_dims
from amanda.types.tensor_type import Dim, TensorType

CONV_TRANSPOSE = define("ConvTranspose")
COL2IM = define("Col2Im")


@define("Conv").kernel(heavy=True)
def conv_kernel(
    attrs: Mapping[str, Any], x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None
) -> tuple:
    """ONNX Conv (1-D/2-D/3-D, groups, dilations, strides, pads, auto_pad)."""
    nd = x.ndim - 2
    kernel_shape = list(w.shape[2:])
    strides = ints(attrs.get("strides"), nd, 1)
    dilations = ints(attrs.get("dilations"), nd, 1)
    pads = window_pads(attrs, x.shape[2:], kernel_shape, strides, dilations)
    return (conv_nd(x, w, b, strides, dilations, pads, int(attrs.get("group", 1))),)


@CONV_TRANSPOSE.kernel(heavy=True)
def conv_transpose_kernel(
    attrs: Mapping[str, Any], x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None
) -> tuple:
    """ONNX ConvTranspose: one GEMM per group into columns, then col2im."""
    nd = x.ndim - 2
    n, c = x.shape[:2]
    group = int(attrs.get("group", 1))
    cg = c // group
    mg = w.shape[1]
    m = mg * group
    kernel_shape = list(w.shape[2:])
    k = int(np.prod(kernel_shape))
    strides = ints(attrs.get("strides"), nd, 1)
    dilations = ints(attrs.get("dilations"), nd, 1)
    output_padding = ints(attrs.get("output_padding"), nd, 0)[-nd:] if nd else []
    size = x.shape[2:]
    pads = transpose_pads(attrs, size, kernel_shape, strides, dilations, output_padding)
    image = [
        strides[i] * (size[i] - 1)
        + output_padding[i]
        + extent(kernel_shape[i], dilations[i])
        - pads[i]
        - pads[nd + i]
        for i in range(nd)
    ]
    if group == 1 and all(s == 1 for s in strides) and not any(output_padding):
        return (as_conv(x, w, b, kernel_shape, dilations, pads),)
    dtype = compute_dtype(x.dtype)
    wt = w.astype(dtype, copy=False).reshape(group, cg, mg * k).transpose(0, 2, 1)
    xs = x.astype(dtype, copy=False).reshape(n, group, cg, -1)
    cols = np.matmul(wt, xs).reshape(n, m, k, *size)  # (N, M, K, *S)
    y = col2im(cols, image, kernel_shape, strides, dilations, pads)
    if b is not None:
        y += b.astype(dtype, copy=False).reshape(m, *([1] * nd))
    return (y.astype(x.dtype, copy=False),)



@COL2IM.kernel(since=18)
def col2im_kernel(
    attrs: Mapping[str, Any], x: np.ndarray, image_shape: np.ndarray, block_shape: np.ndarray
) -> tuple:
    """ONNX Col2Im: rearrange ``(N, C*prod(block), L)`` blocks into ``(N, C, *image)``."""
    image = [int(v) for v in image_shape]
    block = [int(v) for v in block_shape]
    nd = len(image)
    strides = ints(attrs.get("strides"), nd, 1)
    dilations = ints(attrs.get("dilations"), nd, 1)
    pads = ints(attrs.get("pads"), 2 * nd, 0)
    k = int(np.prod(block))
    grid = [
        output_size(
            image[i], pads[i] + pads[nd + i], block[i], strides[i], dilations[i], pads[i], False
        )
        for i in range(nd)
    ]
    n = x.shape[0]
    cols = x.reshape(n, x.shape[1] // k, k, *grid)
    return (col2im(cols, image, block, strides, dilations, pads),)


def conv_type(node: Node) -> list:
    """``[N, M, out…]``: M from the weights; C must equal the weights' channels times group."""
    x, w = data(node), node.shape(1)
    group = int(node.attr("group", 1))
    if x is None or w is None:
        rank = len(x) if x is not None else (len(w) if w is not None else None)
        return [TensorType(node.dtype(0), None if rank is None else (None,) * rank)]
    if len(w) != len(x):
        raise node.fail(f"weights of rank {len(x)}", f"rank {len(w)}")
    if type(w[1]) is int:
        node.same(x[1], w[1] * group, "the input channels (weights' channels × group)")
    kernel = node.attr("kernel_shape") or w[2:]
    return [TensorType(node.dtype(0), (x[0], w[0], *window_output_dims(node, x[2:], list(kernel))))]


def conv_transpose_type(node: Node) -> list:
    """``[N, W[1]·group, out…]`` with ``out = s·(in-1) + extra + reach - pads``."""
    x, w = data(node), node.shape(1)
    group = int(node.attr("group", 1))
    if x is None or w is None:
        return [TensorType(node.dtype(0), None)]
    node.same(x[1], w[0], "the input channels and the weights' first dim")
    n = len(x) - 2
    kernel = list(node.attr("kernel_shape") or w[2:])
    channels = w[1] * group if type(w[1]) is int else None
    given = node.attr("output_shape")
    if given:
        return [TensorType(node.dtype(0), (x[0], channels, *given[-n:]))]
    strides = list(node.attr("strides") or [1] * n)
    dil = list(node.attr("dilations") or [1] * n)
    pads = list(node.attr("pads") or [0] * (2 * n))
    extra = list(node.attr("output_padding") or [0] * n)
    auto = node.attr("auto_pad", "NOTSET")
    out: list[Dim] = []
    for i, d in enumerate(x[2:]):
        if type(d) is not int or type(kernel[i]) is not int:
            out.append(None)
        elif auto in ("SAME_UPPER", "SAME_LOWER"):
            out.append(d * strides[i])
        else:
            reach = (kernel[i] - 1) * dil[i] + 1
            out.append(strides[i] * (d - 1) + extra[i] + reach - pads[i] - pads[i + n])
    return [TensorType(node.dtype(0), (x[0], channels, *out))]


def col2im_type(node: Node) -> list:
    """``[N, C, image…]`` with ``C = input[1] / prod(block_shape)``."""
    x, image, block = node.shape(0), node.dims(1), node.ints(2)
    if x is None:
        return [TensorType(node.dtype(0), None)]
    if image is None:
        n = node.shape(1)
        if n is None or type(n[0]) is not int:
            return [TensorType(node.dtype(0), None)]
        image = (None,) * n[0]
    c: Dim = None
    if block is not None and type(x[1]) is int:
        c = x[1] // math.prod(block)
    return [TensorType(node.dtype(0), (x[0], c, *image))]


def _weight_grad(x: Value, g: Value, group: int, cg: int, size: list[int], kernel: list[int], strides: list[int],
                 dilations: list[int], pads: list[int]) -> Value:
    """The weight gradient of ``Conv(x, w) = y`` given ``g = dL/dy``: a convolution of ``x``
    by ``g`` with strides and dilations swapped (batch and channels exchanged, per group),
    cut to the kernel's extent; ``cg`` input channels per group, ``size`` ``x``'s spatial dims."""
    nd = len(size)
    spatial = list(range(2, 2 + nd))
    xr = ops.Reshape(x, i64([-1, group, cg, *size]))
    xt = ops.Reshape(ops.Transpose(xr, perm=[2, 1, 0, *range(3, 3 + nd)]), i64([cg, -1, *size]))
    gt = ops.Transpose(g, perm=[1, 0, *spatial])
    r = ops.Conv(xt, gt, group=group, strides=dilations, dilations=strides, pads=pads)
    r = ops.Slice(r, i64([0] * nd), i64(kernel), i64(spatial))
    return ops.Transpose(r, perm=[1, 0, *spatial])


def _known_shape(n: GradNode, v: Value, what: str) -> list[int]:
    """The static shape of ``v``: an error naming the op when a dim is unknown."""
    dims = v.type.shape
    if dims is None or not all(type(d) is int for d in dims):
        raise n.fail(f"{what} of known shape", repr(v.type))
    return [int(d) for d in dims]


def conv_vjp(n: GradNode) -> list:
    """Conv (groups, strides, padding, dilation)."""
    x, w = n.given(0, 1)
    ws = _known_shape(n, w, "weights")
    group = int(n.attr("group", 1))
    win = Window(n, ws[2:])
    g = n.grad()
    out: list = [None] * len(n.inputs)
    if n.need(0):
        out[0] = win.transpose(g, w, group)
    if n.need(1):
        out[1] = _weight_grad(x, g, group, int(ws[1]), win.size, win.kernel, win.strides, win.dilations, win.pads)
    if len(n.inputs) > 2 and n.need(2):
        out[2] = ops.ReduceSum(g, i64([0, *range(2, rank(g))]), keepdims=0)
    return out


def conv_transpose_vjp(n: GradNode) -> list:
    """ConvTranspose (groups, strides, pads or ``output_shape``/auto_pad, dilations,
    output_padding): the input gradient is a ``Conv`` of the output gradient with the same
    weights and geometry; the weight gradient the convolution's, with the input and output
    gradient exchanged."""
    x, w = n.given(0, 1)
    xs, ws, ys = _known_shape(n, x, "an input"), _known_shape(n, w, "weights"), _known_shape(n, n.outputs[0], "an output")
    nd, group = len(xs) - 2, int(n.attr("group", 1))
    kernel = ws[2:]
    strides, dilations = ints(n.attr("strides"), nd, 1), ints(n.attr("dilations"), nd, 1)
    padding = ints(n.attr("output_padding"), nd, 0)[-nd:]
    pads = transpose_pads(n.op.attrs, tuple(xs[2:]), kernel, strides, dilations, padding)  # as the kernel pads
    g = gy = n.grad()
    size = ys[2:]
    if any(p < 0 for p in pads):  # an output larger than the op fills (output_shape): its edges get nothing
        begins = [max(0, -p) for p in pads[:nd]]
        size = [size[i] - begins[i] - max(0, -pads[nd + i]) for i in range(nd)]
        g = ops.Slice(gy, i64(begins), i64([b + e for b, e in zip(begins, size)]), i64(range(2, 2 + nd)))
        pads = [max(0, p) for p in pads]
    out: list = [None] * len(n.inputs)
    if n.need(0):
        gx = ops.Conv(g, w, group=group, strides=strides, dilations=dilations, pads=pads)
        reach = [(size[i] + pads[i] + pads[nd + i] - (kernel[i] - 1) * dilations[i] - 1) // strides[i] + 1
                 for i in range(nd)]
        if reach != xs[2:]:  # output_padding past the last stride: rows no input reaches
            gx = ops.Slice(gx, i64([0] * nd), i64(xs[2:]), i64(range(2, 2 + nd)))
        out[0] = gx
    if n.need(1):
        out[1] = _weight_grad(g, x, group, ws[1], size, kernel, strides, dilations, pads)
    if len(n.inputs) > 2 and n.need(2):
        out[2] = ops.ReduceSum(gy, i64([0, *range(2, rank(gy))]), keepdims=0)
    return out


def _col2im(n: GradNode) -> list:
    """Col2Im: a ConvTranspose, per channel, of the blocks by one-hot kernels (block position
    k of channel c is input channel ``c*K + k``)."""
    x = n.given(0)
    image = [int(v) for v in n.known(1, "image_shape").reshape(-1)]
    block = [int(v) for v in n.known(2, "block_shape").reshape(-1)]
    nd, k = len(image), int(np.prod(block))
    if x.type.shape is None or type(x.type.shape[1]) is not int:
        raise n.fail("a known number of block rows", repr(x.type))
    channels = int(x.type.shape[1]) // k
    strides = [int(v) for v in (n.attr("strides") or [1] * nd)]
    dilations = [int(v) for v in (n.attr("dilations") or [1] * nd)]
    pads = [int(v) for v in (n.attr("pads") or [0] * (2 * nd))]
    grid = [(image[i] + pads[i] + pads[nd + i] - (dilations[i] * (block[i] - 1) + 1)) // strides[i] + 1
            for i in range(nd)]
    made = [(grid[i] - 1) * strides[i] + dilations[i] * (block[i] - 1) + 1 - pads[i] - pads[nd + i] for i in range(nd)]
    kernel = np.zeros([channels * k, 1, *block], np.dtype(x.type.dtype))
    for c in range(channels):
        for j, at in enumerate(np.ndindex(*block)):
            kernel[(c * k + j, 0, *at)] = 1
    blocks = ops.Reshape(x, np.array([0, channels * k, *grid], I64))
    return [ops.ConvTranspose(blocks, kernel, group=channels, kernel_shape=block, strides=strides,
                              dilations=dilations, pads=pads,
                              output_padding=[image[i] - made[i] for i in range(nd)])]


col2im_vjp = composite(_col2im)

define("Conv", type_rule=conv_type, vjp=conv_vjp)
define("ConvTranspose", type_rule=conv_transpose_type, vjp=conv_transpose_vjp)
define("Col2Im", type_rule=col2im_type, vjp=col2im_vjp)
