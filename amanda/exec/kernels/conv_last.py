"""The Conv layouts that compute channels-last, ``(N, *out, M)`` in memory, and hand their result
on as its logical ``(N, M, *out)`` view: the next conv, pool or elementwise op reads it as it is
(numpy's elementwise ops keep an input's memory order), so activations stay channels-last
between convolutions without a transposing copy per op, as onnxruntime's NHWC layout does.

- *channels-last GEMM*: columns ``(N * L, K * C)`` from a channels-last copy of the input;
- *shifted* (unit strides): one accumulating GEMM per kernel offset, no columns (``shifted.py``);
- *depthwise*: one einsum over a channels-last window view;
- *rows* (pointwise, channels-last input): the input's rows times the weights.

Their weights are relaid once per read-only array (``relaid.py``).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

from amanda.exec.kernels.cblas import rows_times
from amanda.exec.kernels.relaid import relaid
from amanda.exec.kernels.scratch import scratch
from amanda.exec.kernels.shifted import shifted_rows
from amanda.exec.kernels.spatial import ConvGeometry, channels_first, padded_channels_last, windows

# Depthwise: merge the last axis with the channels up to this many channels x stride².
MERGE_CHANNELS = 256
# Columns of more than COLS_WHOLE bytes are copied and multiplied COLS_BLOCK bytes at a time, so
# that a block stays in the cache from its copy to its product (the digits CNN's 16->16 conv at
# 32x8x8, 1.2 MB of columns: its forward and both gradients 5-15% faster; below the threshold,
# 295 KB for its 16->32 conv, the blocks cost more than they save).
COLS_WHOLE = 512 << 10
COLS_BLOCK = 160 << 10


def emit_last(grid: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
    """A fresh channels-last copy of ``grid`` ``(N, *out, M)`` plus the bias, as its logical
    ``(N, M, *out)`` view: the next conv, pool or elementwise op reads it in place."""
    result = np.empty(grid.shape, dtype=grid.dtype)
    if bias is None:
        np.copyto(result, grid)
    else:
        np.add(grid, bias, out=result)
    return channels_first(result)


def packed(w: np.ndarray) -> np.ndarray:
    """``w`` ``(M, C, *K)`` as the ``(*K * C, M)`` matrix the channels-last GEMM reads."""
    return relaid(w, "packed", lambda w: np.ascontiguousarray(
        w.transpose(*range(2, w.ndim), 1, 0).reshape(-1, w.shape[0])))


def gemm_channels_last(x: np.ndarray, w: np.ndarray, g: ConvGeometry, bias: np.ndarray | None) -> np.ndarray:
    """One group: columns ``(N * L, K * C)`` from a channels-last copy of the padded input.

    With channels innermost, each window's ``(kernel offset, channel)`` row is read in
    runs of ``C`` contiguous values (an NCHW window reads single values), and the
    product ``cols @ W'`` streams the long ``N * L`` axis through BLAS as rows, which
    OpenBLAS runs ~20% faster than the transposed ``W @ cols`` here. Columns over
    ``COLS_WHOLE`` bytes are made and multiplied a block of images at a time.
    """
    kernel, out = g.kernel, g.out
    nd = len(kernel)
    n, c = x.shape[:2]
    m = w.shape[0]
    # padded in (N, C, *S) order, stored channels-last
    padded = channels_first(padded_channels_last(x, g.pads))
    view = windows(padded, kernel, g.strides, g.dilations, out)  # (N, C, *out, *K)
    source = view.transpose(0, *range(2, 2 + 2 * nd), 1)  # (N, *out, *K, C)
    rows = c * math.prod(kernel)
    image = math.prod(out) * rows * x.itemsize  # one image's columns, bytes
    per = n if n * image <= COLS_WHOLE else max(1, COLS_BLOCK // max(1, image))
    if per >= n:
        cols = scratch((n, *out, *kernel, c), x.dtype, "conv.cols")
        np.copyto(cols, source)
        y = rows_times(cols.reshape(-1, rows), packed(w), bias)  # (N*L, M)
        return channels_first(y.reshape(n, *out, m))
    # a few images' columns at a time, each block multiplied while it is still in the cache
    y = np.empty((n, *out, m), x.dtype)
    weights = packed(w)
    for start in range(0, n, per):
        stop = min(n, start + per)
        cols = scratch((stop - start, *out, *kernel, c), x.dtype, "conv.cols")
        np.copyto(cols, source[start:stop])
        rows_times(cols.reshape(-1, rows), weights, bias, out=y[start:stop].reshape(-1, m))
    return channels_first(y)


def shifted(x: np.ndarray, w: np.ndarray, g: ConvGeometry, bias: np.ndarray | None) -> np.ndarray:
    """Unit strides, one group: one accumulating GEMM per kernel offset, no columns (see
    ``shifted.py``). Its products cover the padded width, so it is chosen where the pads add
    few positions, or few output channels make the column copy the larger cost (UNet's 32->32
    conv at 48x48: 0.62 -> 0.35 ms, ResNet's 64->64 at 28x28: 1.04 -> 0.76 ms, two BLAS threads)."""
    grid = shifted_rows(x, packed(w), g.kernel, g.dilations, g.pads, g.out)
    return emit_last(grid, bias)


def depthwise(x: np.ndarray, w: np.ndarray, g: ConvGeometry, bias: np.ndarray | None) -> np.ndarray:
    """One input channel per group (depthwise, with a channel multiplier ``M / C``).

    The input is read channels-last (as it is when stored so and unpadded, else as a padded
    copy), where one output row's positions and channels
    are a single contiguous run for every kernel offset: a strided view
    ``(N, *out[:-1], *K, W * M)`` of it times the weights tiled ``W`` times along that
    run is one einsum whose inner loop runs ``W * M`` long (about 5x faster than
    looping over ``M`` alone when ``M`` is 32, as in EfficientNet's first stages). A
    stride along the last axis is computed at unit stride and subsampled in the final
    copy (twice the products, still faster than short loops). Per-offset multiply-adds
    make two passes per offset and measured 2-4x slower; FFT convolution is slower still.
    """
    strides, dilations, out = g.strides, g.dilations, g.out
    nd = len(strides)
    n, c = x.shape[:2]
    m = w.shape[0]
    if m != c:
        x = np.repeat(x, m // c, axis=1)
    kernel = w.shape[2:]
    memory = padded_channels_last(x, g.pads)
    st = memory.strides
    axes = "abcdefg"[:nd]
    kernel_axes = "ijklmop"[:nd]
    weights = relaid(w, "depthwise", lambda w: np.ascontiguousarray(  # (*K, M)
        w.reshape(m, *kernel).transpose(*range(1, nd + 1), 0)))
    if m * strides[-1] ** 2 <= MERGE_CHANNELS:
        # the last axis at unit stride, merged with the channels into one run
        width = (out[-1] - 1) * strides[-1] + 1
        view = as_strided(memory, (n, *out[:-1], *kernel, width * m),
                          (st[0], *(st[1 + i] * strides[i] for i in range(nd - 1)),
                           *(st[1 + i] * dilations[i] for i in range(nd)), st[-1]), writeable=False)
        spec = f"n{axes[:-1]}{kernel_axes}q,{kernel_axes}q->n{axes[:-1]}q"
        tiled = relaid(w, ("tiled", width), lambda w: np.tile(weights, width))
        y = np.einsum(spec, view, tiled).reshape(n, *out[:-1], width, m)
        y = y[..., :: strides[-1], :]
    else:
        view = as_strided(memory, (n, *out, *kernel, m),
                          (st[0], *(st[1 + i] * strides[i] for i in range(nd)),
                           *(st[1 + i] * dilations[i] for i in range(nd)), st[-1]), writeable=False)
        y = np.einsum(f"n{axes}{kernel_axes}z,{kernel_axes}z->n{axes}z", view, weights)
    if bias is not None:
        y += bias
    return channels_first(np.ascontiguousarray(y))
