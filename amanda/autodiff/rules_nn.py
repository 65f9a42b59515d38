"""The window geometry the gradients of windowed ops share (:class:`Window`: a convolution's or
a pooling's strides, dilations and resolved pads, and the ``ConvTranspose`` that takes a
gradient back through it) and :func:`i64`; the ops themselves are registered in their families
(:mod:`amanda.opset.onnx.conv`, :mod:`amanda.opset.onnx.pool`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from amanda.autodiff.node import Node
from amanda.build import ops
from amanda.build.values import Value

__all__ = ["Window", "i64"]


def i64(values: Sequence[int]) -> np.ndarray:
    """``values`` as an int64 array (the index and shape inputs the gradients build)."""
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
