"""The output sizes of a sliding window (:func:`window_output_dims`) and the checked data input (:func:`data`)
that the type rules of the windowed families share (conv, pool, deform, quantize)."""

from __future__ import annotations

from typing import Any

from amanda.types.node import Node
from amanda.types.tensor_type import Dim


def window_output_dims(node: Node, spatial: Any, kernel: Any, ceil: bool = False) -> list[Dim]:
    """The output spatial dims of a window of ``kernel`` over ``spatial`` (strides, dilations,
    pads or auto_pad from the op's attributes; ``ceil`` rounds up, as ceil_mode)."""
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
