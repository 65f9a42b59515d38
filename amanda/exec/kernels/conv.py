"""The numerics of a convolution (:func:`conv_nd`): im2col plus one batched matmul, or without
columns where a layout allows. The Conv op (kernel, type rule, gradient) is registered in
:mod:`amanda.opset.onnx.conv`.

Conv builds the column matrix from a strided window view in one copy and
multiplies it by the weights in a single (group-batched) GEMM. Layouts here compute
channels-first ``(N, M, *out)``:

- *batched*: columns ``(N, G, C/G*K, L)``; ``W @ cols`` lands directly in
  ``(N, M, L)``; best when ``C/G*K`` is small (the output is large next to the work);
  a row of ones in the columns lets the GEMM add the bias;
- *gemm* (several groups, ``C/G*K`` large): columns ``(G, C/G*K, N*L)``; one large
  GEMM per group whose ``(M, N, L)`` result is transposed once; with unit strides
  the columns are copied as long contiguous runs (*flat*).

The layouts of ``conv_last.py`` compute channels-last and hand their result on so: the
*channels-last GEMM* (one group, ``C*K`` large), *shifted* rows (one group, unit strides,
``M <= C/2`` or pads adding few positions), *depthwise*, and a pointwise conv of a
channels-last input. A pointwise conv (1x1 kernel, unit stride, no pads) needs no columns
at all. Temporaries live in per-thread scratch buffers (see ``scratch.py``). ConvTranspose's
helpers live in ``conv_transpose.py``.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

from amanda.errors import ExecutionError
from amanda.exec.kernels.conv_last import depthwise, gemm_channels_last, packed, rows_times, shifted
from amanda.exec.kernels.scratch import scratch
from amanda.exec.kernels.spatial import (
    ConvGeometry,
    channels_first,
    channels_last,
    pad_spatial,
    padded_size,
    windows,
)

# Above this many column rows per group, one large GEMM beats per-image GEMMs. Fewer input
# channels than that no longer mean the batched layout: since the channels-last GEMM hands its
# result on channels-last, it is as fast for ResNet's 3-channel 7x7 stem (841 against 861 µs)
# and spares the next ops a transposing copy (ResNet 6.53 -> 6.34 ms in a same-process A/B).
GEMM_ROWS = 64
# Shifted rows need this many input channels: with fewer, each offset's product is too thin.
WIDE_CHANNELS = 16
# Largest share of wasted columns the flat unit-stride layout may compute.
FLAT_WASTE = 1.3
# An expanding pointwise conv folds its bias into the GEMM from this many positions.
BIAS_ROW_LENGTH = 512
# Unit-stride convs skip the columns when narrowing from this many output positions, or when
# the pads add at most this share of positions (the products run at padded size).
SHIFTED_LENGTH = 1024
SHIFTED_WASTE = 1.2


def compute_dtype(dtype: np.dtype) -> np.dtype:
    # BLAS has no float16 path; numpy's fallback loop is orders of magnitude slower.
    return np.dtype(np.float64) if dtype == np.float64 else np.dtype(np.float32)


def _padded(x: np.ndarray, begins: list[int], ends: list[int]) -> np.ndarray:
    """``x`` zero-padded into this thread's scratch buffer (``x`` itself without pads)."""
    if not any(begins) and not any(ends):
        return x
    shape = x.shape[:2] + tuple(n + b + e for n, b, e in zip(x.shape[2:], begins, ends))
    return pad_spatial(x, begins, ends, 0, into=scratch(shape, x.dtype, "conv.pad"))


def _batched(x: np.ndarray, wg: np.ndarray, g: ConvGeometry, bias: np.ndarray | None) -> np.ndarray:
    """Columns ``(N, G, C/G*K [+1], L)``: ``W @ cols`` writes ``(N, M, L)`` with no output transpose.

    With a bias, each group's columns get a row of ones and its weights the bias as one
    more column, so the GEMM adds it: one more product row instead of a separate pass
    over the whole output (about 2x faster on the CNN's 1-channel conv at batch 64).
    """
    kernel, out = g.kernel, g.out
    nd = len(kernel)
    n, c = x.shape[:2]
    group, mg, rows = wg.shape
    view = windows(_padded(x, g.pads[:nd], g.pads[nd:]), kernel, g.strides, g.dilations, out)
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


def _gemm(x: np.ndarray, wg: np.ndarray, g: ConvGeometry, bias: np.ndarray | None) -> np.ndarray:
    # columns (C, *K, N, *out): one big GEMM, then one transpose of the result
    kernel, out = g.kernel, g.out
    nd = len(kernel)
    n, c = x.shape[:2]
    group, mg, rows = wg.shape
    view = windows(_padded(x, g.pads[:nd], g.pads[nd:]), kernel, g.strides, g.dilations, out)
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


def _flat_waste(size: tuple[int, ...], g: ConvGeometry) -> float:
    # extra GEMM columns of the flat layout: trailing axes are computed at padded width
    pads, out = g.pads, g.out
    nd = len(size)
    padded = [size[i] + pads[i] + pads[nd + i] for i in range(1, nd)]
    return float(np.prod(padded) / np.prod(out[1:])) if nd > 1 else 1.0


def _gemm_flat(x: np.ndarray, wg: np.ndarray, g: ConvGeometry, bias: np.ndarray | None) -> np.ndarray:
    """Unit-stride GEMM layout whose columns are long contiguous runs of the padded image.

    With unit strides, window ``k`` of the flattened padded image is one
    contiguous run starting at ``offset(k)``; taking runs of ``out[0] * plane``
    elements computes the trailing axes at padded width (the overhang is
    cropped). One extra slab along the first axis keeps the last run in bounds.
    """
    kernel, dilations, pads, out = g.kernel, g.dilations, g.pads, g.out
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


def _pointwise(x: np.ndarray, w: np.ndarray, wg: np.ndarray, g: ConvGeometry, bias: np.ndarray | None) -> np.ndarray:
    """A 1x1 conv with unit strides and no pads: the input already is the column matrix.

    A channels-last input (one group) is one GEMM over its rows with a channels-last result;
    a channels-first one is ``W @ x`` per image and group, channels-first."""
    out = g.out
    n, c = x.shape[:2]
    group, mg, cg = wg.shape
    rows = channels_last(x) if group == 1 else None
    if rows is not None:
        return channels_first(rows_times(rows.reshape(-1, c), packed(w), bias).reshape(n, *out, -1))
    if bias is not None and cg < mg and math.prod(out) >= BIAS_ROW_LENGTH:
        # expanding: copying the (smaller) input lets the GEMM add the bias
        return _batched(x, wg, g, bias)
    length = math.prod(out)
    y = np.matmul(wg, x.reshape(n, group, cg, length)).reshape(n, group * mg, length)
    if bias is not None:
        y += bias.reshape(-1, 1)
    return y


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
    n, c = x.shape[:2]
    m, cg = w.shape[:2]
    kernel = list(w.shape[2:])
    if cg * group != c or m % group:
        raise ExecutionError.at(
            "W",
            f"{c // max(group, 1)} input channels per group and M divisible by {group}",
            str(w.shape),
        )
    dtype = compute_dtype(x.dtype)
    g = ConvGeometry.of(x.shape[2:], kernel, strides, dilations, pads)
    out = g.out
    if n == 0:  # the layouts' reshapes cannot infer an axis of an empty batch
        return np.zeros((0, m, *(max(o, 0) for o in out)), x.dtype)
    xc = x.astype(dtype, copy=False)
    wc = w.astype(dtype, copy=False)
    wg = wc.reshape(group, m // group, cg * math.prod(kernel))
    bias = None if b is None else b.astype(dtype, copy=False)
    if g.pointwise:
        y = _pointwise(xc, wc, wg, g, bias)
    elif wg.shape[2] <= GEMM_ROWS and not (cg == 1 and group > 1):
        y = _batched(xc, wg, g, bias)
    elif cg == 1 and group > 1:
        y = depthwise(xc, wc, g, bias)
    else:
        y = _wide(xc, wc, wg, g, bias)
    return y.reshape(n, m, *out).astype(x.dtype, copy=False)


def _wide(x: np.ndarray, w: np.ndarray, wg: np.ndarray, g: ConvGeometry, bias: np.ndarray | None) -> np.ndarray:
    """The layouts for many columns per group (``C/G*K > GEMM_ROWS``), bias added."""
    group, m = wg.shape[0], w.shape[0]
    out = g.out
    if group == 1 and g.unit and x.shape[1] >= WIDE_CHANNELS and (
            math.prod(padded_size(x.shape[2:], g.pads)) <= SHIFTED_WASTE * math.prod(out)
            or (2 * m <= x.shape[1] and math.prod(out) >= SHIFTED_LENGTH)):
        return shifted(x, w, g, bias)
    if group == 1:
        return gemm_channels_last(x, w, g, bias)
    if g.unit and _flat_waste(x.shape[2:], g) <= FLAT_WASTE:
        return _gemm_flat(x, wg, g, bias)
    return _gemm(x, wg, g, bias)
