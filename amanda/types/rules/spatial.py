"""Windowed ops not in an op family yet (Conv, ConvTranspose, Col2Im) and the window shapes the
pooling family shares."""

from __future__ import annotations

import math
from typing import Any

from amanda.types.node import Node
from amanda.types.rules import rule
from amanda.types.tensor_type import Dim, TensorType


def _window(node: Node, spatial: Any, kernel: Any, ceil: bool = False) -> list[Dim]:
    n = len(spatial)
    strides = list(node.attr("strides") or [1] * n)
    dilations = list(node.attr("dilations") or [1] * n)
    pads = list(node.attr("pads") or [0] * (2 * n))
    auto = node.attr("auto_pad", "NOTSET")
    if isinstance(auto, bytes):
        auto = auto.decode()
    if len(strides) != n or len(dilations) != n or len(pads) != 2 * n or len(kernel) != n:
        raise node.fail(f"strides, dilations, kernel of {n} and pads of {2 * n} entries",
                        f"{len(strides)}, {len(dilations)}, {len(kernel)} and {len(pads)}")
    out: list[Dim] = []
    for i, d in enumerate(spatial):
        k = kernel[i]
        if type(d) is not int or type(k) is not int:
            out.append(None)
            continue
        reach = (k - 1) * dilations[i] + 1
        s = strides[i]
        if auto in ("SAME_UPPER", "SAME_LOWER"):
            out.append(-(-d // s))
        elif auto == "VALID":
            out.append((d - reach) // s + 1)
        else:
            total = d + pads[i] + pads[i + n] - reach
            size = (-(-total // s) if ceil else total // s) + 1
            if ceil and (size - 1) * s >= d + pads[i]:
                size -= 1  # the last window would start in the end padding
            out.append(size)
        if out[-1] is not None and out[-1] < 1:  # type: ignore[operator]
            raise node.fail(f"a window of {reach} fitting in {d} (after padding)", f"output size {out[-1]}")
    return out


def data(node: Node) -> Any:
    shape = node.shape(0)
    if shape is not None and len(shape) < 3:
        raise node.fail("an input [N, C, spatial…] of rank 3 or more", f"rank {len(shape)}")
    return shape


@rule("Conv")
def conv(node: Node) -> list:
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
    return [TensorType(node.dtype(0), (x[0], w[0], *_window(node, x[2:], list(kernel))))]


@rule("ConvTranspose")
def conv_transpose(node: Node) -> list:
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


@rule("Col2Im")
def col2im(node: Node) -> list:
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
