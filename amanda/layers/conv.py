"""Convolutions and pooling over ``[batch, channels, *spatial]`` (ONNX's layout), in 1, 2 or 3
spatial dimensions: the number is that of ``kernel_size`` when it is a sequence, else ``dims``.

``padding`` is ``"valid"`` (none), ``"same"`` (the output has ``ceil(size / stride)`` positions,
extra padding at the end, as ONNX's ``SAME_UPPER``), an int per side, or one int per dimension.

>>> import amanda, numpy as np
>>> net = Conv(3, 8, 3, padding="same", activation="relu") >> MaxPool(2) >> GlobalAvgPool()
>>> with amanda.Session(net) as session:
...     session.run(["y"], {"x": np.ones((2, 3, 8, 8), np.float32)})[0].shape
(2, 8)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from amanda.build import ops
from amanda.containers.arguments import brief, shown
from amanda.containers.container import Container
from amanda.errors import ArgumentError
from amanda.layers.base import activate, assemble, first, flag, float_input, positive, sizes
from amanda.layers.init import Weights
from amanda.namespaces.schema import suggest

__all__ = ["AvgPool", "Conv", "Conv1D", "Conv2D", "Conv3D", "GlobalAvgPool", "MaxPool"]


def _dims(layer: str, kernel_size: Any, dims: int | None) -> int:
    if dims is not None and (isinstance(dims, bool) or not isinstance(dims, (int, np.integer))):
        raise ArgumentError.at((layer, "dims"), "1, 2 or 3 spatial dimensions", shown(dims))
    if isinstance(kernel_size, Sequence) and not isinstance(kernel_size, str):
        if dims is not None and dims != len(kernel_size):
            raise ArgumentError.at((layer, "dims"), f"{len(kernel_size)} (the length of kernel_size)", brief(dims))
        dims = len(kernel_size)
    dims = 2 if dims is None else dims
    if dims not in (1, 2, 3):
        raise ArgumentError.at((layer, "dims"), "1, 2 or 3 spatial dimensions", brief(dims))
    return int(dims)


def _padding(layer: str, padding: Any, dims: int, kernel: tuple[int, ...] = (), dilation: tuple[int, ...] = (),
             strides: tuple[int, ...] = ()) -> dict[str, Any]:
    """ONNX attributes for ``padding``. "same" with unit strides is written as explicit pads
    (they do not depend on the input size, and onnxruntime refuses SAME_UPPER with dilation)."""
    if not isinstance(padding, str):
        return {"pads": list(sizes(layer, "padding", padding, dims, zero=True)) * 2}
    if padding == "same" and kernel and all(s == 1 for s in strides):
        total = [(k - 1) * d for k, d in zip(kernel, dilation)]
        return {"pads": [t // 2 for t in total] + [t - t // 2 for t in total]}
    if padding == "same":
        return {"auto_pad": "SAME_UPPER"}
    if padding == "valid":
        return {"pads": [0] * (2 * dims)}
    raise ArgumentError.at((layer, "padding"), "'same', 'valid', an int or one int per dimension", brief(padding),
                           suggest(padding, ("same", "valid")))


def _shown(padding: Any) -> Any:
    return padding if isinstance(padding, (str, int)) else tuple(padding)


def Conv(in_channels: int, out_channels: int, kernel_size: int | Sequence[int], *,  # noqa: N802
         stride: int | Sequence[int] = 1, padding: Any = "valid", dilation: int | Sequence[int] = 1,
         groups: int = 1, dims: int | None = None, activation: str | None = None, use_bias: bool = True,
         init: str = "he_normal", name: str = "conv", seed: int | None = None) -> Container:
    """A convolution with a ``[out_channels, in_channels / groups, *kernel_size]`` kernel
    (He-normal unless ``init`` says otherwise) and a zero bias, then ``activation``."""
    n = _dims("Conv", kernel_size, dims)
    cin, cout = positive("Conv", "in_channels", in_channels), positive("Conv", "out_channels", out_channels)
    g = positive("Conv", "groups", groups)
    if cin % g or cout % g:
        raise ArgumentError.at(("Conv", "groups"), f"a divisor of in_channels ({cin}) and out_channels ({cout})", str(g))
    kernel = sizes("Conv", "kernel_size", kernel_size, n)
    strides, dilations = sizes("Conv", "stride", stride, n), sizes("Conv", "dilation", dilation, n)
    receptive = int(np.prod(kernel))
    fans = (cin // g * receptive, cout // g * receptive)
    x = float_input()
    weights = Weights()
    w = weights.add("kernel", (cout, cin // g, *kernel), init, fans)
    bias = flag("Conv", "use_bias", use_bias)
    b = weights.add("bias", (cout,), "zeros", fans) if bias else None
    y = ops.Conv(x, w, b, kernel_shape=list(kernel), strides=list(strides), dilations=list(dilations), group=g,
                 name="convolution", **_padding("Conv", padding, n, kernel, dilations, strides))
    y = activate("Conv", y, activation)
    attrs = {"in_channels": cin, "out_channels": cout, "kernel_size": kernel, "stride": strides,
             "padding": _shown(padding), "dilation": dilations, "groups": g, "activation": activation,
             "use_bias": bias, "init": init, "weights": weights.specs}
    return assemble("Conv", name, [x], y, attrs, seed)


def Conv1D(in_channels: int, out_channels: int, kernel_size: int, **options: Any) -> Container:  # noqa: N802
    """:func:`Conv` over one spatial dimension (``[batch, channels, length]``)."""
    return Conv(in_channels, out_channels, kernel_size, dims=1, **{"name": "conv1d", **options})


def Conv2D(in_channels: int, out_channels: int, kernel_size: int, **options: Any) -> Container:  # noqa: N802
    """:func:`Conv` over two spatial dimensions (``[batch, channels, height, width]``)."""
    return Conv(in_channels, out_channels, kernel_size, dims=2, **{"name": "conv2d", **options})


def Conv3D(in_channels: int, out_channels: int, kernel_size: int, **options: Any) -> Container:  # noqa: N802
    """:func:`Conv` over three spatial dimensions (``[batch, channels, depth, height, width]``)."""
    return Conv(in_channels, out_channels, kernel_size, dims=3, **{"name": "conv3d", **options})


def _pool(layer: str, op_type: str, kernel_size: Any, stride: Any, padding: Any, dims: int | None,
          name: str, extra: dict[str, Any]) -> Container:
    n = _dims(layer, kernel_size, dims)
    kernel = sizes(layer, "kernel_size", kernel_size, n)
    strides = kernel if stride is None else sizes(layer, "stride", stride, n)
    x = float_input()
    y = first(getattr(ops, op_type)(x, kernel_shape=list(kernel), strides=list(strides), name="pool",
                                    **_padding(layer, padding, n, kernel, (1,) * n, strides), **extra))
    attrs = {"kernel_size": kernel, "stride": strides, "padding": _shown(padding)}
    return assemble(layer, name, [x], y, attrs, 0)


def MaxPool(kernel_size: int | Sequence[int], stride: int | Sequence[int] | None = None,  # noqa: N802
            padding: Any = "valid", *, dims: int | None = None, name: str = "maxpool") -> Container:
    """The maximum over each window (stride: the window, unless given)."""
    return _pool("MaxPool", "MaxPool", kernel_size, stride, padding, dims, name, {})


def AvgPool(kernel_size: int | Sequence[int], stride: int | Sequence[int] | None = None,  # noqa: N802
            padding: Any = "valid", *, dims: int | None = None, name: str = "avgpool") -> Container:
    """The mean over each window; padded positions are not counted."""
    return _pool("AvgPool", "AveragePool", kernel_size, stride, padding, dims, name, {"count_include_pad": 0})


def GlobalAvgPool(*, keepdims: bool = False, name: str = "global_avgpool") -> Container:  # noqa: N802
    """The mean over all spatial positions: ``[batch, channels]`` (``keepdims``: with the
    spatial axes kept as size 1)."""
    keep = flag("GlobalAvgPool", "keepdims", keepdims)
    x = float_input()
    y = ops.GlobalAveragePool(x, name="pool")
    if not keep:
        y = ops.Flatten(y, axis=1, name="flatten")
    return assemble("GlobalAvgPool", name, [x], y, {"keepdims": keep}, 0)
