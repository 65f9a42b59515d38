"""Vector-Jacobian rules of Conv and ConvTranspose (not in an op family yet): the input gradient
of a convolution is a ``ConvTranspose`` with the same weights, its weight gradient a
convolution of the input with the output gradient."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from amanda.autodiff.node import Node, rank
from amanda.build import ops
from amanda.build.values import Value
from amanda.exec.kernels.conv_transpose import _transpose_pads
from amanda.exec.kernels.spatial import ints

__all__ = ["conv_transpose_vjp", "conv_vjp"]


def i64(values: Sequence[int]) -> np.ndarray:
    return np.array(list(values), np.int64)


class Window:
    """The static geometry of a convolution or pooling window (spatial dims known)."""

    def __init__(self, n: Node, kernel: Sequence[int]) -> None:
        x, y = n.given(0), n.outputs[0]
        xs, ys = x.type.shape, y.type.shape
        if xs is None or ys is None or not all(type(d) is int for d in (*xs[2:], *ys[2:], *kernel)):
            raise n.fail("known spatial sizes and kernel shape", f"{x.type!r} -> {y.type!r}")
        nd = len(xs) - 2
        self.size, self.out, self.kernel = list(xs[2:]), list(ys[2:]), [int(k) for k in kernel]
        self.strides = [int(s) for s in n.attr("strides", [1] * nd)]
        self.dilations = [int(d) for d in n.attr("dilations", [1] * nd)]
        pads = [int(p) for p in n.attr("pads", [0] * 2 * nd)]
        auto = n.attr("auto_pad", "NOTSET")
        if auto in ("SAME_UPPER", "SAME_LOWER"):
            begins, ends = [], []
            for i in range(nd):
                total = max(0, (self.out[i] - 1) * self.strides[i] + self.extent(i) - self.size[i])
                small, big = total // 2, total - total // 2
                begins.append(small if auto == "SAME_UPPER" else big)
                ends.append(big if auto == "SAME_UPPER" else small)
            pads = begins + ends
        elif auto == "VALID":
            pads = [0] * 2 * nd
        self.pads = pads
        self.nd = nd

    def extent(self, i: int) -> int:
        return (self.kernel[i] - 1) * self.dilations[i] + 1

    def output_padding(self) -> list[int]:
        """What a ConvTranspose needs to give back exactly the input's spatial size."""
        return [self.size[i] - ((self.out[i] - 1) * self.strides[i] + self.extent(i) - self.pads[i]
                                - self.pads[self.nd + i]) for i in range(self.nd)]

    def transpose(self, g: Value, w: Value, group: int) -> Value:
        return ops.ConvTranspose(g, w, group=group, strides=self.strides, pads=self.pads, dilations=self.dilations,
                                 output_padding=self.output_padding())


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


def _known_shape(n: Node, v: Value, what: str) -> list[int]:
    """The static shape of ``v``: an error naming the op when a dim is unknown."""
    dims = v.type.shape
    if dims is None or not all(type(d) is int for d in dims):
        raise n.fail(f"{what} of known shape", repr(v.type))
    return [int(d) for d in dims]


def conv_vjp(n: Node) -> list:
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


def conv_transpose_vjp(n: Node) -> list:
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
    pads = _transpose_pads(n.op.attrs, tuple(xs[2:]), kernel, strides, dilations, padding)  # as the kernel pads
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


