"""Cutting and padding along axes: Slice, Pad, CenterCropPad, Compress, ReverseSequence, Trilu."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from amanda.errors import ExecutionError
from amanda.exec.kernels.math_util import axis_of, int_list
from amanda.exec.kernels.registry import kernel


def _bound(start: int, end: int, step: int, dim: int) -> slice:
    """ONNX Slice clamping for one axis, as a python slice."""
    if step == 0:
        raise ExecutionError.at("steps", "non-zero steps", "0")
    start = start + dim if start < 0 else start
    end = end + dim if end < 0 else end
    if step > 0:
        return slice(min(max(start, 0), dim), min(max(end, 0), dim), step)
    start = min(max(start, 0), dim - 1)
    end = min(max(end, -1), dim - 1)
    # end == -1 means "through index 0", which a python slice spells as None
    return slice(start, None if end < 0 else end, step)


def slice_array(
    x: np.ndarray,
    starts: Sequence[int],
    ends: Sequence[int],
    axes: Sequence[int] | None = None,
    steps: Sequence[int] | None = None,
) -> np.ndarray:
    """``x[starts:ends:steps]`` along ``axes`` with ONNX clamping rules.

    >>> slice_array(np.arange(5), [-1], [-100], steps=[-2]).tolist()
    [4, 2, 0]"""
    axes = list(range(len(starts))) if not axes else list(axes)
    steps = [1] * len(starts) if not steps else list(steps)
    index = [slice(None)] * x.ndim
    for s, e, a, st in zip(starts, ends, axes, steps):
        a = axis_of(a, x.ndim, "axes")
        index[a] = _bound(int(s), int(e), int(st), x.shape[a])
    return x[tuple(index)]


@kernel("Slice", since=1)
def slice_v1(attrs: Mapping[str, Any], x: np.ndarray) -> tuple:
    """ONNX Slice-1: ``starts``, ``ends``, ``axes`` attributes."""
    starts = int_list(attrs.get("starts"))
    ends = int_list(attrs.get("ends"))
    return (slice_array(x, starts, ends, int_list(attrs.get("axes"))).copy(),)


@kernel("Slice", since=10)
def slice_(
    attrs: Mapping[str, Any],
    x: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    axes: np.ndarray | None = None,
    steps: np.ndarray | None = None,
) -> tuple:
    """ONNX Slice-10+: ``starts``, ``ends``, ``axes``, ``steps`` inputs."""
    out = slice_array(x, int_list(starts), int_list(ends), int_list(axes), int_list(steps))
    return (out.copy(),)


_MODES = ("constant", "reflect", "edge", "wrap")


def pad_array(
    x: np.ndarray, pads: Sequence[int], mode: str, value: Any, axes: Sequence[int] | None = None
) -> np.ndarray:
    """Pad (or, for negative pads, crop) ``x`` along ``axes`` the ONNX way.

    >>> pad_array(np.array([1, 2, 3]), [1, -1], "edge", 0).tolist()
    [1, 1, 2]"""
    axes = list(range(x.ndim)) if axes is None else [axis_of(a, x.ndim, "axes") for a in axes]
    if len(pads) != 2 * len(axes):
        raise ExecutionError.at("pads", f"{2 * len(axes)} values", str(list(pads)))
    if mode not in _MODES:
        raise ExecutionError.at("mode", "constant, reflect, edge or wrap", mode)
    crop = [slice(None)] * x.ndim
    width = [(0, 0)] * x.ndim
    for i, a in enumerate(axes):
        begin, end = int(pads[i]), int(pads[len(axes) + i])
        crop[a] = slice(max(0, -begin), x.shape[a] - max(0, -end))
        width[a] = (max(0, begin), max(0, end))
    x = x[tuple(crop)]
    if mode == "constant":
        return np.pad(x, width, mode="constant", constant_values=np.asarray(value, dtype=x.dtype))
    return np.pad(x, width, mode=mode)  # type: ignore[call-overload]


def _scalar(value: np.ndarray | None, default: Any) -> Any:
    if value is None or np.asarray(value).size == 0:
        return default
    return np.asarray(value).reshape(-1)[0]


@kernel("Pad", since=1)
def pad_v1(attrs: Mapping[str, Any], x: np.ndarray) -> tuple:
    """ONNX Pad-1/2: ``pads`` (Pad-1: ``paddings``), ``mode`` and ``value`` attributes."""
    pads = int_list(attrs.get("pads", attrs.get("paddings")))
    return (pad_array(x, pads, attrs.get("mode", "constant"), attrs.get("value", 0.0)),)


@kernel("Pad", since=11)
def pad(
    attrs: Mapping[str, Any],
    x: np.ndarray,
    pads: np.ndarray,
    constant_value: np.ndarray | None = None,
    axes: np.ndarray | None = None,
) -> tuple:
    """ONNX Pad-11+: ``pads``, ``constant_value`` and (from 18) ``axes`` inputs."""
    axis_list = None if axes is None else int_list(axes)
    value = _scalar(constant_value, 0)
    return (pad_array(x, int_list(pads), attrs.get("mode", "constant"), value, axis_list),)


@kernel("CenterCropPad", since=18)
def center_crop_pad(attrs: Mapping[str, Any], x: np.ndarray, shape: np.ndarray) -> tuple:
    """ONNX CenterCropPad: crop or zero-pad ``axes`` to ``shape``, centred (odd extra at end)."""
    axes = attrs.get("axes")
    axes = (
        list(range(x.ndim))
        if axes is None
        else [axis_of(a, x.ndim, "axes") for a in int_list(axes)]
    )
    target = int_list(shape)
    src = [slice(None)] * x.ndim
    dst = [slice(None)] * x.ndim
    out_shape = list(x.shape)
    for a, size in zip(axes, target):
        dim = x.shape[a]
        out_shape[a] = size
        if size < dim:
            start = (dim - size) // 2
            src[a] = slice(start, start + size)
        elif size > dim:
            start = (size - dim) // 2
            dst[a] = slice(start, start + dim)
    out = np.zeros(out_shape, dtype=x.dtype)
    out[tuple(dst)] = x[tuple(src)]
    return (out,)


@kernel("Compress", since=9)
def compress(attrs: Mapping[str, Any], x: np.ndarray, condition: np.ndarray) -> tuple:
    """ONNX Compress: keep the slices where ``condition`` is true (flattened without ``axis``)."""
    axis = attrs.get("axis")
    cond = np.asarray(condition).astype(bool).reshape(-1)
    if axis is None:
        return (np.compress(cond, x.reshape(-1)),)
    return (np.compress(cond, x, axis=axis_of(axis, x.ndim)),)


@kernel("ReverseSequence", since=10)
def reverse_sequence(attrs: Mapping[str, Any], x: np.ndarray, sequence_lens: np.ndarray) -> tuple:
    """ONNX ReverseSequence: reverse the first ``sequence_lens[b]`` steps of each batch entry."""
    batch_axis = axis_of(attrs.get("batch_axis", 1), x.ndim, "batch_axis")
    time_axis = axis_of(attrs.get("time_axis", 0), x.ndim, "time_axis")
    steps = x.shape[time_axis]
    t = np.arange(steps).reshape(-1, 1)
    lens = np.asarray(sequence_lens, dtype=np.int64).reshape(1, -1)
    source = np.where(t < lens, lens - 1 - t, t)  # (time, batch)
    shape = [1] * x.ndim
    shape[time_axis], shape[batch_axis] = steps, x.shape[batch_axis]
    if time_axis > batch_axis:
        source = source.T
    index = np.broadcast_to(source.reshape(shape), x.shape)
    return (np.take_along_axis(x, index, axis=time_axis),)


@kernel("Trilu", since=14)
def trilu(attrs: Mapping[str, Any], x: np.ndarray, k: np.ndarray | None = None) -> tuple:
    """ONNX Trilu: the upper (``upper=1``) or lower triangle of the last two axes, offset ``k``."""
    offset = int(_scalar(k, 0))
    if int(attrs.get("upper", 1)):
        return (np.triu(x, offset),)
    return (np.tril(x, offset),)
