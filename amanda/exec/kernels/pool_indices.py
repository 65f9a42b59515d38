"""MaxPool's maxima with the flat input index of each (its ``Indices`` output, which its
gradient scatters back to): the general separable selection, and a fast path for windows that
tile the input. ``geometry`` is :mod:`amanda.opset.onnx.pool`'s ``_Geometry`` of the call.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

__all__ = ["max_with_indices", "tiled_max_with_indices"]


def _steps(size: tuple, column_major: bool) -> list[int]:
    """How far one step along each spatial axis moves a flat index (row- or column-major)."""
    return [math.prod(size[:i] if column_major else size[i + 1 :]) for i in range(len(size))]


@functools.lru_cache(maxsize=64)
def _corners(
    batch: tuple, size: tuple, out: tuple, strides: tuple, pads: tuple, column_major: bool
) -> np.ndarray:
    """The flat input index of each window's first (top-left) element, shaped like the output;
    one read-only table per geometry, so a training step does not rebuild it every time."""
    nd = len(size)
    steps = _steps(size, column_major)
    index = (np.arange(batch[0] * batch[1], dtype=np.int64) * math.prod(size)).reshape(
        *batch, *([1] * nd)
    )
    for i in range(nd):
        o = np.arange(out[i], dtype=np.int64).reshape([-1 if a == i else 1 for a in range(nd)])
        index = index + (o * strides[i] - pads[i]) * steps[i]
    index = np.ascontiguousarray(np.broadcast_to(index, (*batch, *out)))
    index.flags.writeable = False
    return index


def _memory_order(x: np.ndarray) -> list[int]:
    """The axes of ``x`` from outermost to innermost in memory (channels-last: N, spatial…, C)."""
    order = sorted(range(x.ndim), key=lambda a: -x.strides[a])
    return order if x.transpose(order).flags.c_contiguous else list(range(x.ndim))


@functools.lru_cache(maxsize=64)
def _laid_corners(shape: tuple, out: tuple, strides: tuple, order: tuple, column_major: bool) -> np.ndarray:
    """:func:`_corners` without pads, copied into the axis ``order`` (read-only)."""
    table = _corners(shape[:2], shape[2:], out, strides, (0,) * len(out), column_major)
    laid = np.ascontiguousarray(table.transpose(order))
    laid.flags.writeable = False
    return laid


def tiled_max_with_indices(x: np.ndarray, geometry: Any, column_major: bool) -> tuple:
    """:func:`max_with_indices` for windows that tile the input (strides equal to the kernel,
    no pads or dilations): one copy (in the input's own memory order) lays each window offset
    out as a contiguous row, so the selection runs on long rows instead of on strided views
    whose inner runs are a few values long (the digits CNN's 2x2 pool on a channels-last
    (32, 16, 8, 8) in the CNN step: 220 -> 115-145 µs). Ties go to the first offset in row-major order."""
    nd = len(geometry.size)
    kernel, out = geometry.kernel, geometry.out
    order = _memory_order(x)
    crop = x[(slice(None), slice(None), *(slice(0, o * k) for o, k in zip(out, kernel)))].transpose(order)
    split: list[int] = []
    outer: list[int] = []
    inner: dict[int, int] = {}
    for a in order:
        if a < 2:
            outer.append(len(split))
            split.append(x.shape[a])
        else:
            outer.append(len(split))
            inner[a - 2] = len(split) + 1
            split += [out[a - 2], kernel[a - 2]]
    moved = crop.reshape(split).transpose([inner[i] for i in range(nd)] + outer)
    rows = np.ascontiguousarray(moved).reshape(math.prod(kernel), -1)
    steps = _steps(tuple(geometry.size), column_major)
    deltas = [sum(c * s for c, s in zip(np.unravel_index(j, kernel), steps)) for j in range(len(rows))]
    best = rows[0].copy()
    offset = np.zeros(best.shape, dtype=np.int64)
    for j in range(1, len(rows)):
        better = np.greater(rows[j], best)
        np.maximum(best, rows[j], out=best)
        offset += better * (deltas[j] - offset)  # arithmetic select, as below
    laid = [x.shape[a] if a < 2 else out[a - 2] for a in order]
    offset = offset.reshape(laid)
    offset += _laid_corners(x.shape, tuple(out), tuple(geometry.strides), tuple(order), column_major)
    back = list(np.argsort(order))
    return best.reshape(laid).transpose(back), offset.transpose(back)

def max_with_indices(
    padded: np.ndarray, x_shape: tuple, geometry: Any, column_major: bool
) -> tuple:
    """Window maxima and the flat input index of each (first occurrence in row-major order)."""
    nd = len(geometry.size)
    y = padded
    chosen: list[np.ndarray] = []  # winning kernel offset per reduced axis, innermost first
    # innermost axis first: ties then resolve to the smallest outer offset, i.e. row-major order
    for i in reversed(range(nd)):
        parts = geometry.taps(y, i)
        carried = [geometry.taps(c, i) for c in chosen]
        best = parts[0]
        # small offsets keep the temporaries small (fresh pages are costly)
        offset = np.zeros(best.shape, dtype=np.int16)
        kept = [c[0] for c in carried]
        for j in range(1, len(parts)):
            # arithmetic select: masked copies (copyto/where) are several times slower
            better = np.greater(parts[j], best)
            best = np.maximum(best, parts[j])
            offset += better * (j - offset)
            kept = [keep + better * (c[j] - keep) for keep, c in zip(kept, carried)]
        y, chosen = best, kept + [offset]
    # chosen[k] belongs to spatial axis nd - 1 - k: the winner's flat index is its window's
    # corner (a cached table) plus each axis's winning offset times that axis's step
    steps = _steps(tuple(geometry.size), column_major)
    index = chosen[nd - 1].astype(np.int64)
    if geometry.dilations[0] * steps[0] != 1:
        index *= geometry.dilations[0] * steps[0]
    for i in range(1, nd):
        index += chosen[nd - 1 - i] * np.int64(geometry.dilations[i] * steps[i])
    index += _corners(tuple(x_shape[:2]), tuple(geometry.size), tuple(geometry.out),
                      tuple(geometry.strides), tuple(geometry.pads[:nd]), column_major)
    return (y if y.base is None else y.copy()), index
