"""Conv as im2col plus one batched matmul, or without columns where a layout allows.

Conv builds the column matrix from a strided window view in one copy and
multiplies it by the weights in a single (group-batched) GEMM. Layouts:

- *batched*: columns ``(N, G, C/G*K, L)``; ``W @ cols`` lands directly in
  ``(N, M, L)``; best when ``C/G*K`` is small (the output is large next to the work)
  or there are few input channels; a row of ones in the columns lets the GEMM add the bias;
- *channels-last* (one group, ``C*K`` large): columns ``(N*L, K*C)`` from a
  channels-last copy of the input; ``cols @ W'`` is one GEMM over ``N*L`` rows
  whose ``(N, L, M)`` result is transposed once;
- *shifted* (one group, unit strides, ``M <= C/2`` or pads adding few positions): no
  columns; one accumulating GEMM per kernel offset over row-shifted views of the
  channels-last input (``shifted.py``);
- *gemm* (several groups, ``C/G*K`` large): columns ``(G, C/G*K, N*L)``; one large
  GEMM per group whose ``(M, N, L)`` result is transposed once; with unit strides
  the columns are copied as long contiguous runs (*flat*);
- *depthwise*: one einsum over a channels-last window view.

A pointwise conv (1x1 kernel, unit stride, no pads) needs no columns at all.
Temporaries live in per-thread scratch buffers (see ``scratch.py``). ConvTranspose
and Col2Im live in ``conv_transpose.py``.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

from amanda.errors import ExecutionError
from amanda.exec.kernels.registry import kernel
from amanda.exec.kernels.scratch import scratch
from amanda.exec.kernels.shifted import shifted_rows
from amanda.exec.kernels.spatial import (
    ints,
    output_size,
    pad_spatial,
    padded_channels_last,
    padded_size,
    window_pads,
    windows,
)

# Above this many column rows per group, one large GEMM beats per-image GEMMs...
GEMM_ROWS = 64
# ...given this many input channels: with fewer, channels-last copies move runs too short and
# the shifted rows' products are too thin (ResNet's 3-channel 7x7 stem: 1.10 -> 0.99 ms), if
# each image has this many output positions (ViT's 7x7 patches: per-image GEMMs too short)
WIDE_CHANNELS = 16
NARROW_LENGTH = 256
# Largest share of wasted columns the flat unit-stride layout may compute.
FLAT_WASTE = 1.3
# An expanding pointwise conv folds its bias into the GEMM from this many positions.
BIAS_ROW_LENGTH = 512
# Unit-stride convs skip the columns when narrowing from this many output positions, or when
# the pads add at most this share of positions (the products run at padded size).
SHIFTED_LENGTH = 1024
SHIFTED_WASTE = 1.2
# Depthwise: merge the last axis with the channels up to this many channels x stride².
MERGE_CHANNELS = 256


def _compute_dtype(dtype: np.dtype) -> np.dtype:
    # BLAS has no float16 path; numpy's fallback loop is orders of magnitude slower.
    return np.dtype(np.float64) if dtype == np.float64 else np.dtype(np.float32)


def _padded(x: np.ndarray, begins: list[int], ends: list[int]) -> np.ndarray:
    """``x`` zero-padded into this thread's scratch buffer (``x`` itself without pads)."""
    if not any(begins) and not any(ends):
        return x
    shape = x.shape[:2] + tuple(n + b + e for n, b, e in zip(x.shape[2:], begins, ends))
    return pad_spatial(x, begins, ends, 0, into=scratch(shape, x.dtype, "conv.pad"))


def _batched(
    x: np.ndarray,
    wg: np.ndarray,
    kernel: list[int],
    strides: list[int],
    dilations: list[int],
    pads: list[int],
    out: list[int],
    bias: np.ndarray | None,
) -> np.ndarray:
    """Columns ``(N, G, C/G*K [+1], L)``: ``W @ cols`` writes ``(N, M, L)`` with no output transpose.

    With a bias, each group's columns get a row of ones and its weights the bias as one
    more column, so the GEMM adds it: one more product row instead of a separate pass
    over the whole output (about 2x faster on the CNN's 1-channel conv at batch 64).
    """
    nd = len(kernel)
    n, c = x.shape[:2]
    group, mg, rows = wg.shape
    view = windows(_padded(x, pads[:nd], pads[nd:]), kernel, strides, dilations, out)
    extra = 0 if bias is None else 1
    length = int(np.prod(out))
    cols = scratch((n, group, rows + extra, length), x.dtype, "conv.cols")
    # split axes only, so both reshapes are views
    target = cols[:, :, :rows].reshape(n, group, c // group, *kernel, *out)
    source = view.reshape(n, group, c // group, *out, *kernel)
    np.copyto(target, source.transpose(0, 1, 2, *range(3 + nd, 3 + 2 * nd), *range(3, 3 + nd)))
    if bias is None:
        return np.matmul(wg, cols)
    cols[:, :, rows] = 1
    return np.matmul(np.concatenate([wg, bias.reshape(group, mg, 1)], axis=2), cols)


def _gemm(
    x: np.ndarray,
    wg: np.ndarray,
    kernel: list[int],
    strides: list[int],
    dilations: list[int],
    pads: list[int],
    out: list[int],
    bias: np.ndarray | None,
) -> np.ndarray:
    # columns (C, *K, N, *out): one big GEMM, then one transpose of the result
    nd = len(kernel)
    n, c = x.shape[:2]
    group, mg, rows = wg.shape
    view = windows(_padded(x, pads[:nd], pads[nd:]), kernel, strides, dilations, out)
    cols = scratch((c, *kernel, n, *out), x.dtype, "conv.cols")
    np.copyto(cols, view.transpose(1, *range(2 + nd, 2 + 2 * nd), 0, *range(2, 2 + nd)))
    length = n * int(np.prod(out))
    y = np.matmul(
        wg, cols.reshape(group, rows, -1), out=scratch((group, mg, length), x.dtype, "conv.gemm")
    )
    return _emit(y.reshape(group * mg, n, *out).swapaxes(0, 1), bias)


def _emit(view: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
    """A fresh contiguous ``(N, M, *out)`` copy of ``view`` (a scratch GEMM output) plus the bias."""
    result = np.empty(view.shape, dtype=view.dtype)
    if bias is None:
        np.copyto(result, view)
    elif view.shape[0] >= 8:
        # many images: add in the GEMM output's own order, then a plain transposing copy
        # (N=64 CNN: 0.60 -> 0.53 ms); for a few images one transposing add is as fast
        view += bias.reshape(-1, *([1] * (view.ndim - 2)))
        np.copyto(result, view)
    else:
        np.add(view, bias.reshape(-1, *([1] * (view.ndim - 2))), out=result)
    return result


def _flat_waste(size: tuple[int, ...], pads: list[int], out: list[int]) -> float:
    # extra GEMM columns of the flat layout: trailing axes are computed at padded width
    nd = len(size)
    padded = [size[i] + pads[i] + pads[nd + i] for i in range(1, nd)]
    return float(np.prod(padded) / np.prod(out[1:])) if nd > 1 else 1.0


def _gemm_flat(
    x: np.ndarray,
    wg: np.ndarray,
    kernel: list[int],
    dilations: list[int],
    pads: list[int],
    out: list[int],
    bias: np.ndarray | None,
) -> np.ndarray:
    """Unit-stride GEMM layout whose columns are long contiguous runs of the padded image.

    With unit strides, window ``k`` of the flattened padded image is one
    contiguous run starting at ``offset(k)``; taking runs of ``out[0] * plane``
    elements computes the trailing axes at padded width (the overhang is
    cropped). One extra slab along the first axis keeps the last run in bounds.
    """
    nd = len(kernel)
    n, c = x.shape[:2]
    group, mg, rows = wg.shape
    ends = list(pads[nd:])
    ends[0] += 1
    padded = _padded(x, pads[:nd], ends)
    plane_shape = padded.shape[3:]
    run = out[0] * int(np.prod(plane_shape))
    st = padded.strides
    shape = (c, *kernel, n, run)
    steps = (st[1], *(d * t for d, t in zip(dilations, st[2:])), st[0], st[-1])
    cols = scratch(shape, x.dtype, "conv.cols")
    np.copyto(cols, as_strided(padded, shape, steps, writeable=False))
    y = np.matmul(
        wg, cols.reshape(group, rows, -1), out=scratch((group, mg, n * run), x.dtype, "conv.gemm")
    )
    y = y.reshape(group * mg, n, out[0], *plane_shape)
    y = y[(slice(None), slice(None), slice(None), *(slice(0, o) for o in out[1:]))]
    return _emit(y.swapaxes(0, 1), bias)


# channels-last weight copies of read-only (constant) weights, made once per array
_PACKED: dict[int, tuple[Any, np.ndarray]] = {}


def _packed(w: np.ndarray) -> np.ndarray:
    """``w`` ``(M, C, *K)`` as the ``(*K * C, M)`` matrix the channels-last GEMM reads.

    A model's weights are read-only constants that every run passes again, so their copy
    is kept (until the array is freed) instead of being made on each run.
    """
    key = id(w)
    hit = _PACKED.get(key)
    if hit is not None and hit[0]() is w:
        return hit[1]
    packed = np.ascontiguousarray(np.moveaxis(w, (0, 1), (-1, -2)).reshape(-1, w.shape[0]))
    if not w.flags.writeable:
        _PACKED[key] = (weakref.ref(w), packed)
        weakref.finalize(w, _PACKED.pop, key, None)
    return packed


def _gemm_channels_last(
    x: np.ndarray,
    w: np.ndarray,
    strides: list[int],
    dilations: list[int],
    pads: list[int],
    out: list[int],
    bias: np.ndarray | None,
) -> np.ndarray:
    """One group: columns ``(N * L, K * C)`` from a channels-last copy of the padded input.

    With channels innermost, each window's ``(kernel offset, channel)`` row is read in
    runs of ``C`` contiguous values (an NCHW window reads single values), and the
    product ``cols @ W'`` streams the long ``N * L`` axis through BLAS as rows, which
    OpenBLAS runs ~20% faster than the transposed ``W @ cols`` here.
    """
    nd = len(strides)
    n, c = x.shape[:2]
    m = w.shape[0]
    kernel = list(w.shape[2:])
    # padded in (N, C, *S) order, stored channels-last
    padded = np.moveaxis(padded_channels_last(x, pads), -1, 1)
    view = windows(padded, kernel, strides, dilations, out)  # (N, C, *out, *K)
    cols = scratch((n, *out, *kernel, c), x.dtype, "conv.cols")
    np.copyto(cols, view.transpose(0, *range(2, 2 + 2 * nd), 1))
    length = int(np.prod(out))
    weights = _packed(w)  # (*K, C, M)
    y = np.matmul(
        cols.reshape(n * length, -1), weights, out=scratch((n * length, m), x.dtype, "conv.gemm")
    )
    return _emit(y.reshape(n, length, m).swapaxes(1, 2), bias)


def _shifted(
    x: np.ndarray,
    w: np.ndarray,
    dilations: list[int],
    pads: list[int],
    out: list[int],
    bias: np.ndarray | None,
) -> np.ndarray:
    """Unit strides, one group: one accumulating GEMM per kernel offset, no columns (see
    ``shifted.py``). Its products cover the padded width, so it is chosen where the pads add
    few positions, or few output channels make the column copy the larger cost (UNet's 32->32
    conv at 48x48: 0.62 -> 0.35 ms, ResNet's 64->64 at 28x28: 1.04 -> 0.76 ms, two BLAS threads)."""
    grid = shifted_rows(x, _packed(w), list(w.shape[2:]), dilations, pads, out)
    return _emit(np.moveaxis(grid, -1, 1), bias)


def _depthwise(
    x: np.ndarray,
    w: np.ndarray,
    strides: list[int],
    dilations: list[int],
    pads: list[int],
    out: list[int],
    bias: np.ndarray | None,
) -> np.ndarray:
    """One input channel per group (depthwise, with a channel multiplier ``M / C``).

    The input is copied channels-last, where one output row's positions and channels
    are a single contiguous run for every kernel offset: a strided view
    ``(N, *out[:-1], *K, W * M)`` of it times the weights tiled ``W`` times along that
    run is one einsum whose inner loop runs ``W * M`` long (about 5x faster than
    looping over ``M`` alone when ``M`` is 32, as in EfficientNet's first stages). A
    stride along the last axis is computed at unit stride and subsampled in the final
    copy (twice the products, still faster than short loops). Per-offset multiply-adds
    make two passes per offset and measured 2-4x slower; FFT convolution is slower still.
    """
    nd = len(strides)
    n, c = x.shape[:2]
    m = w.shape[0]
    if m != c:
        x = np.repeat(x, m // c, axis=1)
    kernel = w.shape[2:]
    memory = padded_channels_last(x, pads)
    st = memory.strides
    axes = "abcdefg"[:nd]
    kernel_axes = "ijklmop"[:nd]
    weights = np.ascontiguousarray(np.moveaxis(w.reshape(m, *kernel), 0, -1))  # (*K, M)
    if m * strides[-1] ** 2 <= MERGE_CHANNELS:
        # the last axis at unit stride, merged with the channels into one run
        width = (out[-1] - 1) * strides[-1] + 1
        view = as_strided(memory, (n, *out[:-1], *kernel, width * m),
                          (st[0], *(st[1 + i] * strides[i] for i in range(nd - 1)),
                           *(st[1 + i] * dilations[i] for i in range(nd)), st[-1]), writeable=False)
        spec = f"n{axes[:-1]}{kernel_axes}q,{kernel_axes}q->n{axes[:-1]}q"
        y = np.einsum(spec, view, np.tile(weights, width)).reshape(n, *out[:-1], width, m)
        y = y[..., :: strides[-1], :]
    else:
        view = as_strided(memory, (n, *out, *kernel, m),
                          (st[0], *(st[1 + i] * strides[i] for i in range(nd)),
                           *(st[1 + i] * dilations[i] for i in range(nd)), st[-1]), writeable=False)
        y = np.einsum(f"n{axes}{kernel_axes}z,{kernel_axes}z->n{axes}z", view, weights)
    if bias is not None:
        y += bias
    return np.ascontiguousarray(np.moveaxis(y, -1, 1))


def conv_nd(
    x: np.ndarray,
    w: np.ndarray,
    b: np.ndarray | None,
    strides: list[int],
    dilations: list[int],
    pads: list[int],
    group: int,
) -> np.ndarray:
    """``Conv`` on explicit geometry: x ``(N, C, *S)``, w ``(M, C/group, *K)``.

    >>> ones = np.ones((1, 1, 3, 3), np.float32)
    >>> conv_nd(ones, ones[:, :, :2, :2], None, [1, 1], [1, 1], [0, 0, 0, 0], 1).tolist()
    [[[[4.0, 4.0], [4.0, 4.0]]]]"""
    nd = x.ndim - 2
    n, c = x.shape[:2]
    m, cg = w.shape[:2]
    kernel = list(w.shape[2:])
    if cg * group != c or m % group:
        raise ExecutionError.at(
            "W",
            f"{c // max(group, 1)} input channels per group and M divisible by {group}",
            str(w.shape),
        )
    dtype = _compute_dtype(x.dtype)
    size = x.shape[2:]
    out = [
        output_size(
            size[i], pads[i] + pads[nd + i], kernel[i], strides[i], dilations[i], pads[i], False
        )
        for i in range(nd)
    ]
    if n == 0:  # the layouts' reshapes cannot infer an axis of an empty batch
        return np.zeros((0, m, *(max(o, 0) for o in out)), x.dtype)
    xc = x.astype(dtype, copy=False)
    wc = w.astype(dtype, copy=False)
    wg = wc.reshape(group, m // group, cg * math.prod(kernel))
    bias = None if b is None else b.astype(dtype, copy=False)
    pointwise = kernel.count(1) == nd and strides.count(1) == nd and not any(pads)
    if pointwise and (bias is None or cg >= m // group or math.prod(out) < BIAS_ROW_LENGTH):
        length = math.prod(out)  # the input already is the column matrix
        y = np.matmul(wg, xc.reshape(n, group, cg, length)).reshape(n, m, length)
        if bias is not None:
            y += bias.reshape(m, 1)
    elif pointwise or (wg.shape[2] <= GEMM_ROWS and not (cg == 1 and group > 1)) or (
            group == 1 and cg < WIDE_CHANNELS and math.prod(out) >= NARROW_LENGTH):
        # an expanding pointwise conv copies its (smaller) input to let the GEMM add the bias
        y = _batched(xc, wg, kernel, strides, dilations, pads, out, bias)
    elif cg == 1 and group > 1:
        y = _depthwise(xc, wc, strides, dilations, pads, out, bias)
    else:
        y = _wide(xc, wc, wg, bias, strides, dilations, pads, out)
    return y.reshape(n, m, *out).astype(x.dtype, copy=False)


def _wide(
    x: np.ndarray,
    w: np.ndarray,
    wg: np.ndarray,
    bias: np.ndarray | None,
    strides: list[int],
    dilations: list[int],
    pads: list[int],
    out: list[int],
) -> np.ndarray:
    """The layouts for many columns per group (``C/G*K > GEMM_ROWS``), bias added."""
    nd = len(strides)
    group, m = wg.shape[0], w.shape[0]
    unit = strides.count(1) == nd
    if group == 1 and unit and (
            math.prod(padded_size(x.shape[2:], pads)) <= SHIFTED_WASTE * math.prod(out)
            or (2 * m <= x.shape[1] and math.prod(out) >= SHIFTED_LENGTH)):
        return _shifted(x, w, dilations, pads, out, bias)
    if group == 1:
        return _gemm_channels_last(x, w, strides, dilations, pads, out, bias)
    if unit and _flat_waste(x.shape[2:], pads, out) <= FLAT_WASTE:
        return _gemm_flat(x, wg, list(w.shape[2:]), dilations, pads, out, bias)
    return _gemm(x, wg, list(w.shape[2:]), strides, dilations, pads, out, bias)


@kernel("Conv", since=1, heavy=True)
def conv(
    attrs: Mapping[str, Any], x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None
) -> tuple:
    """ONNX Conv (1-D/2-D/3-D, groups, dilations, strides, pads, auto_pad)."""
    nd = x.ndim - 2
    kernel_shape = list(w.shape[2:])
    strides = ints(attrs.get("strides"), nd, 1)
    dilations = ints(attrs.get("dilations"), nd, 1)
    pads = window_pads(attrs, x.shape[2:], kernel_shape, strides, dilations)
    return (conv_nd(x, w, b, strides, dilations, pads, int(attrs.get("group", 1))),)
