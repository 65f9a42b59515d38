"""Sliding-window geometry shared by Conv, ConvTranspose, Col2Im and the pools.

Pads follow ONNX order ``[x1_begin, x2_begin, ..., x1_end, x2_end, ...]``.
Windows are strided views (``as_strided``), never Python loops over pixels;
the only loops here run over kernel positions.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
from numpy.lib.stride_tricks import as_strided

from amanda.errors import ExecutionError
from amanda.exec.kernels.scratch import scratch


def ints(value: Any, n: int, default: int) -> list[int]:
    """An int-list attribute of length ``n`` (``default`` repeated when absent)."""
    if value is None:
        return [default] * n
    if isinstance(value, (list, tuple)):  # the usual attribute form: no array round trip
        try:
            return [int(v) for v in value]
        except TypeError:  # nested: flattened below
            pass
    return [int(v) for v in np.asarray(value).reshape(-1)]


def extent(kernel: int, dilation: int) -> int:
    """The span of a dilated kernel along one axis."""
    return (kernel - 1) * dilation + 1


def same_pads(
    size: Sequence[int],
    kernel: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    upper: bool,
) -> list[int]:
    """Pads that make ``out = ceil(size / stride)``; SAME_UPPER puts the odd pixel at the end.

    >>> same_pads([8], [3], [2], [1], upper=True)
    [0, 1]"""
    begins, ends = [], []
    for n, k, s, d in zip(size, kernel, strides, dilations):
        out = -(-n // s)
        total = max(0, (out - 1) * s + extent(k, d) - n)
        small, big = total // 2, total - total // 2
        begins.append(small if upper else big)
        ends.append(big if upper else small)
    return begins + ends


def window_pads(
    attrs: Mapping[str, Any],
    size: Sequence[int],
    kernel: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
) -> list[int]:
    """Explicit pads of a Conv or pool from ``auto_pad`` and ``pads``."""
    nd = len(size)
    auto_pad = attrs.get("auto_pad", "NOTSET")
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        return same_pads(size, kernel, strides, dilations, auto_pad == "SAME_UPPER")
    if auto_pad == "VALID":
        return [0] * (2 * nd)
    if auto_pad not in ("NOTSET", ""):
        raise ExecutionError.at("auto_pad", "NOTSET, SAME_UPPER, SAME_LOWER or VALID", auto_pad)
    return ints(attrs.get("pads"), 2 * nd, 0)


def output_size(
    size: int, pad_sum: int, kernel: int, stride: int, dilation: int, pad_begin: int, ceil: bool
) -> int:
    """Windows along one axis; with ``ceil`` the last window must start inside input or begin pad.

    >>> output_size(5, 0, 2, 2, 1, 0, ceil=False), output_size(5, 0, 2, 2, 1, 0, ceil=True)
    (2, 3)"""
    span = size + pad_sum - extent(kernel, dilation)
    if not ceil:
        return span // stride + 1
    out = -(-span // stride) + 1
    if (out - 1) * stride >= size + pad_begin:
        out -= 1
    return out


class ConvGeometry(NamedTuple):
    """The window geometry of one convolution, per spatial axis: ``kernel`` size, ``strides``,
    ``dilations``, ``pads`` (all begins, then all ends) and the ``out`` size they give. Every
    conv layout reads its windows from it.

    >>> g = ConvGeometry.of((5, 5), [3, 3], [1, 1], [1, 1], [0, 0, 0, 0])
    >>> g.out, g.unit, g.pointwise
    ([3, 3], True, False)
    """

    kernel: list[int]
    strides: list[int]
    dilations: list[int]
    pads: list[int]
    out: list[int]

    @classmethod
    def of(cls, size: Sequence[int], kernel: list[int], strides: list[int], dilations: list[int],
           pads: list[int]) -> ConvGeometry:
        """The geometry of windows ``kernel`` over an input of spatial ``size``."""
        nd = len(kernel)
        out = [output_size(size[i], pads[i] + pads[nd + i], kernel[i], strides[i], dilations[i], pads[i], False)
               for i in range(nd)]
        return cls(kernel, strides, dilations, pads, out)

    @property
    def unit(self) -> bool:
        """Whether every stride is 1."""
        return self.strides.count(1) == len(self.strides)

    @property
    def pointwise(self) -> bool:
        """Whether the windows are single positions read in place: a 1x1 kernel, unit strides,
        no pads."""
        return self.kernel.count(1) == len(self.kernel) and self.unit and not any(self.pads)


def padded_size(size: Sequence[int], pads: Sequence[int]) -> list[int]:
    """Each spatial size plus its begin and end pads (``pads`` in ONNX order).

    >>> padded_size((4, 5), [1, 0, 1, 2])
    [6, 7]
    """
    nd = len(size)
    return [size[i] + pads[i] + pads[nd + i] for i in range(nd)]


def channels_last(x: np.ndarray) -> np.ndarray | None:
    """The ``(N, *S, C)`` view of ``x`` ``(N, C, *S)`` when its memory is channels-last
    (C-contiguous in that order), else None.

    >>> channels_last(channels_first(np.zeros((1, 4, 4, 3)))).shape
    (1, 4, 4, 3)
    >>> channels_last(np.zeros((1, 3, 4, 4))) is None
    True
    """
    view = x.transpose(0, *range(2, x.ndim), 1)  # np.moveaxis costs ~8 µs a call
    return view if view.flags.c_contiguous else None


def channel_lanes(x: np.ndarray) -> tuple[np.ndarray, int] | None:
    """A channels-last ``x`` (N, C, ...) as a 2-D view whose rows hold ``k`` whole pixels
    (``k * C`` values, ``k`` up to ``1024 // C``), and ``k``; None for other layouts. Per-channel
    work on this view runs along long rows, where on the (N·S, C) view numpy's inner loops are
    C values long (a mean over (0, 2, 3) of a channels-last (32, 16, 8, 8): 48 -> 8 µs).

    >>> flat, k = channel_lanes(channels_first(np.zeros((2, 4, 4, 3))))
    >>> flat.shape, k
    ((1, 96), 32)
    >>> channel_lanes(np.zeros((2, 3, 4, 4))) is None
    True
    """
    rows = channels_last(x) if x.ndim > 2 else None
    if rows is None or x.size == 0:
        return None
    channels = x.shape[1]
    k = math.gcd(x.size // channels, 1 << max(0, (1024 // channels).bit_length() - 1))  # a power of two
    return rows.reshape(-1, k * channels), k


def channels_first(a: np.ndarray) -> np.ndarray:
    """The logical ``(N, C, *S)`` view of a channels-last ``(N, *S, C)`` array.

    >>> channels_first(np.zeros((2, 4, 5, 3))).shape
    (2, 3, 4, 5)
    """
    return a.transpose(0, a.ndim - 1, *range(1, a.ndim - 1))


def scratch_as(x: np.ndarray, shape: tuple[int, ...], dtype: np.dtype, slot: str) -> np.ndarray:
    """A scratch buffer of logical shape ``(N, C, *S)`` laid out as ``x`` is: channels-last when
    ``x`` is stored so, so that ops between channels-last convs keep that layout.

    >>> x = channels_first(np.zeros((1, 4, 4, 3), np.float32))
    >>> channels_last(scratch_as(x, (1, 3, 6, 6), np.dtype(np.float32), "doc")).shape
    (1, 6, 6, 3)
    """
    spatial = [abs(s) for s, n in zip(x.strides[2:], x.shape[2:]) if n > 1]
    if x.ndim > 2 and x.shape[1] > 1 and spatial and abs(x.strides[1]) < min(spatial):  # channels innermost
        return channels_first(scratch((shape[0], *shape[2:], shape[1]), dtype, slot))
    return scratch(shape, dtype, slot)


def padded_channels_last(x: np.ndarray, pads: Sequence[int]) -> np.ndarray:
    """``x`` ``(N, C, *S)`` zero-padded by ``pads`` and laid out channels-last, ``(N, *P, C)``:
    a copy in this thread's conv scratch buffer, or without pads the channels-last view of an
    ``x`` already stored so (read-only use only).

    >>> padded_channels_last(np.ones((1, 2, 1), np.float32), [1, 0])[0].tolist()
    [[0.0, 0.0], [1.0, 1.0]]
    """
    nd = x.ndim - 2
    if not any(pads):
        view = channels_last(x)
        if view is not None:
            return view
    memory = scratch((x.shape[0], *padded_size(x.shape[2:], pads), x.shape[1]), x.dtype, "conv.nhwc")
    pad_spatial(x, pads[:nd], pads[nd:], 0, into=channels_first(memory))
    return memory


def pad_spatial(
    x: np.ndarray,
    begins: Sequence[int],
    ends: Sequence[int],
    value: Any,
    into: np.ndarray | None = None,
) -> np.ndarray:
    """``x`` with its trailing ``len(begins)`` axes padded by ``value`` (no copy when no pads).

    ``into`` is an optional destination of the padded shape (e.g. a scratch buffer).
    """
    if not any(begins) and not any(ends) and into is None:
        return x
    lead = x.ndim - len(begins)
    shape = x.shape[:lead] + tuple(n + b + e for n, b, e in zip(x.shape[lead:], begins, ends))
    out = np.empty(shape, dtype=x.dtype) if into is None else into
    # fill only the border slabs: the interior is overwritten by x right after
    for i, (b, n) in enumerate(zip(begins, x.shape[lead:])):
        axis = lead + i
        index: list[Any] = [slice(None)] * out.ndim
        index[axis] = slice(0, b)
        out[tuple(index)] = value
        index[axis] = slice(b + n, None)
        out[tuple(index)] = value
    inner: tuple[Any, ...] = tuple(slice(b, b + n) for b, n in zip(begins, x.shape[lead:]))
    out[(Ellipsis, *inner)] = x
    return out


def windows(
    padded: np.ndarray,
    kernel: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    out: Sequence[int],
) -> np.ndarray:
    """Read-only view ``(*lead, *out, *kernel)`` of the windows over the trailing axes."""
    nd = len(kernel)
    lead = padded.ndim - nd
    st = padded.strides
    shape = (*padded.shape[:lead], *out, *kernel)
    steps = (
        *st[:lead],
        *(s * t for s, t in zip(strides, st[lead:])),
        *(d * t for d, t in zip(dilations, st[lead:])),
    )
    return as_strided(padded, shape, steps, writeable=False)


def col2im(
    cols: np.ndarray,
    image: Sequence[int],
    kernel: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    pads: Sequence[int],
) -> np.ndarray:
    """Sum the blocks of ``cols`` ``(N, C, prod(kernel), *grid)`` back into ``(N, C, *image)``.

    The inverse scatter of im2col; loops run over kernel positions only. Block
    pixels that fall in the pads (negative pads grow the image) are dropped.
    """
    nd = len(kernel)
    n, c = cols.shape[:2]
    grid = cols.shape[3:]
    acc = np.zeros((n, c, *image), dtype=cols.dtype)
    for kidx, offset in enumerate(itertools.product(*(range(k) for k in kernel))):
        target: list[slice] = []
        source: list[Any] = []
        for i in range(nd):
            base = offset[i] * dilations[i] - pads[i]
            s = strides[i]
            first = max(0, -(base // s))
            last = min(grid[i], (image[i] - 1 - base) // s + 1)
            if last <= first:
                break
            target.append(slice(base + first * s, base + (last - 1) * s + 1, s))
            source.append(slice(first, last))
        else:
            source = [slice(None), slice(None), kidx, *source]
            acc[(slice(None), slice(None), *target)] += cols[tuple(source)]
    return acc
