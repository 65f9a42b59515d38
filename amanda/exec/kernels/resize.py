"""Resize and Upsample: separable resampling, one axis at a time.

Each resized axis maps output positions to source coordinates (the
``coordinate_transformation_mode``), then either gathers the nearest source
index or sums a few weighted taps (linear, cubic; antialias widens the filter
when downsampling). Loops run over taps, never over pixels.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from amanda.errors import ExecutionError
from amanda.exec.kernels.math_util import axis_of
from amanda.exec.kernels.registry import kernel


def source_coords(
    mode: str, out_len: int, in_len: int, scale: float, roi: tuple[float, float] | None
) -> tuple[np.ndarray, np.ndarray | None]:
    """Source coordinate of every output index, and the tf_crop_and_resize out-of-range mask."""
    y = np.arange(out_len, dtype=np.float64)
    width = scale * in_len  # the real-valued output length
    if mode == "half_pixel":
        return (y + 0.5) / scale - 0.5, None
    if mode == "pytorch_half_pixel":
        return (np.full(out_len, -0.5) if width == 1 else (y + 0.5) / scale - 0.5), None
    if mode == "asymmetric":
        return y / scale, None
    if mode == "align_corners":
        return (np.zeros(out_len) if width == 1 else y * (in_len - 1) / (width - 1)), None
    if mode == "half_pixel_symmetric":
        offset = in_len / 2 * (1 - out_len / width)
        return offset + (y + 0.5) / scale - 0.5, None
    if mode == "tf_crop_and_resize":
        lo, hi = roi if roi is not None else (0.0, 1.0)
        if width == 1:
            x = np.full(out_len, (hi - lo) * (in_len - 1) / 2)
        else:
            x = y * (hi - lo) * (in_len - 1) / (width - 1)
        x = x + lo * (in_len - 1)
        return x, (x < 0) | (x > in_len - 1)
    raise ExecutionError.at("coordinate_transformation_mode", "a known mode", mode)


def nearest_index(x: np.ndarray, rule: str, in_len: int) -> np.ndarray:
    """The nearest source index for coordinates ``x`` under ``nearest_mode``.

    >>> nearest_index(np.array([0.5, 1.5]), "round_prefer_ceil", 2).tolist()
    [1, 1]"""
    floor = np.floor(x)
    frac = x - floor
    if rule == "round_prefer_floor":
        up = frac > 0.5
    elif rule == "round_prefer_ceil":
        up = frac >= 0.5
    elif rule == "floor":
        up = np.zeros_like(frac, dtype=bool)
    elif rule == "ceil":
        up = frac > 0
    else:
        raise ExecutionError.at(
            "nearest_mode", "round_prefer_floor, round_prefer_ceil, floor or ceil", rule
        )
    return np.clip(floor + up, 0, in_len - 1).astype(np.intp)


def _linear(d: np.ndarray, a: float) -> np.ndarray:
    return np.clip(1 - np.abs(d), 0, 1)


def _cubic(d: np.ndarray, a: float) -> np.ndarray:
    d = np.abs(d)
    near = ((a + 2) * d - (a + 3)) * d * d + 1
    far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return np.where(d <= 1, near, np.where(d < 2, far, 0.0))


# filter -> (support radius, kernel(distance, cubic_coeff_a))
_FILTERS: dict[str, tuple[int, Callable[[np.ndarray, float], np.ndarray]]] = {
    "linear": (1, _linear),
    "cubic": (2, _cubic),
}


def taps(
    x: np.ndarray,
    in_len: int,
    scale: float,
    filt: str,
    a: float,
    antialias: bool,
    exclude_outside: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """Source indices and weights ``(out, n)`` of each output position."""
    radius, fn = _FILTERS[filt]
    s = min(scale, 1.0) if antialias else 1.0
    first = math.floor(-radius / s) + 1
    n = 2 - 2 * first
    # base is the last source pixel strictly left of x (x itself when x is an integer - 1)
    base = np.ceil(x) - 1
    ratio = x - base  # in (0, 1]
    offsets = np.arange(first, first + n)
    weights = fn(s * (offsets[None, :] - ratio[:, None]), a)
    if antialias:
        weights = weights / weights.sum(axis=1, keepdims=True)
    index = base.astype(np.int64)[:, None] + offsets[None, :]
    if exclude_outside:
        weights = np.where((index < 0) | (index >= in_len), 0.0, weights)
        total = weights.sum(axis=1, keepdims=True)
        weights = weights / np.where(total == 0, 1.0, total)
    return np.clip(index, 0, in_len - 1).astype(np.intp), weights


def _along(data: np.ndarray, axis: int, index: np.ndarray, weights: np.ndarray) -> np.ndarray:
    shape = [1] * data.ndim
    shape[axis] = index.shape[0]
    out = np.take(data, index[:, 0], axis=axis) * weights[:, 0].reshape(shape)
    for j in range(1, index.shape[1]):
        out += np.take(data, index[:, j], axis=axis) * weights[:, j].reshape(shape)
    return out


def resize_array(
    x: np.ndarray,
    out_shape: Sequence[int],
    scales: Sequence[float],
    attrs: Mapping[str, Any],
    roi: Sequence[float] | None = None,
    *,
    coordinate_mode: str = "half_pixel",
    nearest_rule: str = "round_prefer_floor",
) -> np.ndarray:
    """Resample every axis of ``x`` whose size, scale or roi asks for it."""
    mode = attrs.get("mode", "nearest")
    coordinate_mode = attrs.get("coordinate_transformation_mode", coordinate_mode)
    nearest_rule = attrs.get("nearest_mode", nearest_rule)
    a = float(attrs.get("cubic_coeff_a", -0.75))
    antialias = bool(attrs.get("antialias", 0))
    exclude = bool(attrs.get("exclude_outside", 0))
    extrapolation = float(attrs.get("extrapolation_value", 0.0))
    rank = x.ndim
    if mode not in ("nearest", "linear", "cubic"):
        raise ExecutionError.at("mode", "nearest, linear or cubic", mode)
    y = x if mode == "nearest" else x.astype(np.float64)
    for axis in range(rank):
        in_len, out_len, scale = x.shape[axis], int(out_shape[axis]), float(scales[axis])
        axis_roi = None if roi is None else (float(roi[axis]), float(roi[rank + axis]))
        unit_roi = axis_roi is None or axis_roi == (0.0, 1.0)
        if out_len == in_len and math.isclose(scale, 1.0) and unit_roi:
            continue
        coords, outside = source_coords(coordinate_mode, out_len, in_len, scale, axis_roi)
        if mode == "nearest":
            y = np.take(y, nearest_index(coords, nearest_rule, in_len), axis=axis)
        else:
            index, weights = taps(coords, in_len, scale, mode, a, antialias, exclude)
            y = _along(y, axis, index, weights)
        if outside is not None and outside.any():
            shape = [1] * rank
            shape[axis] = out_len
            y = np.where(outside.reshape(shape), np.asarray(extrapolation, dtype=y.dtype), y)
    # nothing resized: hand back a copy, never the caller's array
    return x.copy() if y is x else _cast_back(y, x.dtype)


def _cast_back(y: np.ndarray, dtype: np.dtype) -> np.ndarray:
    if y.dtype == dtype:
        return y
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return np.clip(np.round(y), info.min, info.max).astype(dtype)
    return y.astype(dtype)


def _plan(
    x: np.ndarray,
    scales: np.ndarray | None,
    sizes: np.ndarray | None,
    roi: np.ndarray | None,
    attrs: Mapping[str, Any],
) -> tuple[list[int], list[float], list[float] | None]:
    """Full-rank output shape, scales and roi from the Resize inputs and ``axes``."""
    rank = x.ndim
    axes_attr = attrs.get("axes")
    axes = list(range(rank)) if axes_attr is None else [axis_of(v, rank, "axes") for v in axes_attr]
    full_roi = None
    if roi is not None and np.asarray(roi).size:
        r = np.asarray(roi, dtype=np.float64).reshape(-1)
        full_roi = [0.0] * rank + [1.0] * rank
        for i, ax in enumerate(axes):
            full_roi[ax], full_roi[rank + ax] = r[i], r[len(axes) + i]
    out = list(x.shape)
    factors = [1.0] * rank
    if sizes is not None and np.asarray(sizes).size:
        wanted = [int(v) for v in np.asarray(sizes).reshape(-1)]
        ratios = {ax: wanted[i] / x.shape[ax] for i, ax in enumerate(axes)}
        policy = attrs.get("keep_aspect_ratio_policy", "stretch")
        if policy == "stretch":
            for ax in axes:
                out[ax], factors[ax] = wanted[axes.index(ax)], ratios[ax]
        elif policy in ("not_larger", "not_smaller"):
            pick = min if policy == "not_larger" else max
            scale = pick(ratios.values())
            for ax in axes:
                out[ax], factors[ax] = int(scale * x.shape[ax] + 0.5), scale
        else:
            raise ExecutionError.at(
                "keep_aspect_ratio_policy", "stretch, not_larger or not_smaller", policy
            )
    elif scales is not None and np.asarray(scales).size:
        given = [float(v) for v in np.asarray(scales).reshape(-1)]
        for i, ax in enumerate(axes):
            factors[ax] = given[i]
            out[ax] = math.floor(x.shape[ax] * given[i])
    else:
        raise ExecutionError.at("Resize", "a scales or sizes input", "neither")
    return out, factors, full_roi


@kernel("Resize", since=10)
def resize_v10(attrs: Mapping[str, Any], x: np.ndarray, scales: np.ndarray) -> tuple:
    """ONNX Resize-10: ``scales`` input, asymmetric coordinates (Upsample's rules)."""
    return upsample(attrs, x, scales)


@kernel("Resize", since=11)
def resize(
    attrs: Mapping[str, Any],
    x: np.ndarray,
    roi: np.ndarray | None = None,
    scales: np.ndarray | None = None,
    sizes: np.ndarray | None = None,
) -> tuple:
    """ONNX Resize-11+: nearest/linear/cubic, every coordinate mode, antialias, axes."""
    out, factors, full_roi = _plan(x, scales, sizes, roi, attrs)
    return (resize_array(x, out, factors, attrs, full_roi),)


def _legacy_rule(scales: Sequence[float]) -> str:
    # opset < 11 nearest truncates when upsampling (onnxruntime's "simple" rule)
    return "floor" if all(s >= 1 for s in scales) else "ceil"


@kernel("Upsample", since=7)
def upsample_v7(attrs: Mapping[str, Any], x: np.ndarray) -> tuple:
    """ONNX Upsample-7: ``scales`` attribute."""
    return upsample(
        {k: v for k, v in attrs.items() if k != "scales"}, x, np.asarray(attrs["scales"])
    )


@kernel("Upsample", since=9)
def upsample(attrs: Mapping[str, Any], x: np.ndarray, scales: np.ndarray) -> tuple:
    """ONNX Upsample-9 (and Resize-10): ``floor(size * scale)`` with asymmetric coordinates."""
    factors = [float(v) for v in np.asarray(scales).reshape(-1)]
    out = [math.floor(n * s) for n, s in zip(x.shape, factors)]
    mode = attrs.get("mode", "nearest")
    legacy = {"mode": "linear" if mode in ("linear", "bilinear") else mode}
    y = resize_array(
        x, out, factors, legacy, coordinate_mode="asymmetric", nearest_rule=_legacy_rule(factors)
    )
    return (y,)
