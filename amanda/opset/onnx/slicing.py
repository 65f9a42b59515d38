"""Cutting and padding along axes: Slice, Pad, CenterCropPad, Compress, ReverseSequence, Trilu."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from amanda.autodiff.node import Node as GradNode
from amanda.autodiff.node import rank, shape_of
from amanda.autodiff.rules_decomposed import replay_vjp
from amanda.autodiff.rules_shape import disjoint_select_vjp, repeated_select_vjp, rest
from amanda.build import ops
from amanda.errors import ExecutionError
from amanda.exec.kernels.math_util import axis_of, host, int_list
from amanda.exec.kernels.registry import kernel
from amanda.ops import define
from amanda.types.node import Node, Partial, from_dims
from amanda.types.rules.elementwise import same_as_first
from amanda.types.rules.indexing import unknown
from amanda.types.tensor_type import Dim, TensorType


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


def slice__type(node: Node) -> list:
    """Per-axis Python slicing with ``starts``, ``ends``, ``axes`` and ``steps``."""
    shape = node.shape(0)
    if node.opset < 10:
        starts, ends, axes, steps = node.attr("starts"), node.attr("ends"), node.attr("axes"), None
    else:
        starts, ends = node.ints(1), node.ints(2)
        axes = node.ints(3) if node.present(3) else None
        steps = node.ints(4) if node.present(4) else None
        if (node.present(3) and axes is None) or (node.present(4) and steps is None):
            starts = None
    if shape is None or starts is None or ends is None:
        return [TensorType(node.dtype(0), None if shape is None else (None,) * len(shape))]
    axes = list(axes) if axes else list(range(len(starts)))
    steps = list(steps) if steps else [1] * len(starts)
    out = list(shape)
    for s, e, a, st in zip(starts, ends, axes, steps):
        if st == 0:
            raise node.fail("non-zero steps", "0")
        a = node.axis(int(a), len(shape))
        out[a] = _slice_len(shape[a], int(s), int(e), int(st))  # type: ignore[index]
    dims = node.dims(0)
    if isinstance(node.value(0), Partial) and len(axes) == 1 and dims is not None:
        node.set_value(0, from_dims(dims[slice(int(starts[0]), int(ends[0]), int(steps[0]))]))
    return [TensorType(node.dtype(0), out)]


define("Slice", type_rule=slice__type, vjp=disjoint_select_vjp)


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
    if value is None or np.size(value) == 0:
        return default
    return host(value).reshape(-1)[0]


@kernel("Pad", since=1)
def pad_v1(attrs: Mapping[str, Any], x: np.ndarray) -> tuple:
    """ONNX Pad-1/2: ``pads`` (Pad-1: ``paddings``), ``mode`` and ``value`` attributes."""
    pads = int_list(attrs.get("pads", attrs.get("paddings")))
    return (pad_array(x, pads, attrs.get("mode", "constant"), attrs.get("value", 0.0)),)


def pad_type(node: Node) -> list:
    """Each padded dim grows by its begin and end pads."""
    shape = node.shape(0)
    pads = node.attr("pads") if node.opset < 11 else node.ints(1)
    if shape is None or pads is None:
        return [TensorType(node.dtype(0), None if shape is None else (None,) * len(shape))]
    axes = node.ints(3) if node.present(3) else list(range(len(shape)))
    if axes is None:
        return [TensorType(node.dtype(0), (None,) * len(shape))]
    if len(pads) != 2 * len(axes):
        raise node.fail(f"{2 * len(axes)} pads", str(len(pads)))
    out = list(shape)
    for k, given in enumerate(axes):
        a = node.axis(given, len(shape))
        d = shape[a]
        grow = int(pads[k]) + int(pads[k + len(axes)])
        out[a] = d + grow if type(d) is int else (d if grow == 0 else None)  # type: ignore[index]
    return [TensorType(node.dtype(0), out)]


def pad_vjp(n: GradNode) -> list:
    """Pad. Constant mode: the gradient padded by the negated pads (a crop where the op padded,
    zeros where it cropped); the pad value gets the rest of the gradient. Edge, reflect and
    wrap modes copy elements: the forward op replayed on positions, as Slice."""
    n.given(0)
    if n.attr("mode", "constant") != "constant":
        return repeated_select_vjp(n)
    old = n.opset is not None and n.opset < 11
    pads = np.asarray(n.attr("pads") if old else n.known(1, "pads input"), np.int64).reshape(-1)
    g = n.grad()
    if len(n.inputs) > 3 and n.inputs[3] is not None:  # pads of some axes (opset 18): made full
        r = rank(n.inputs[0], n)  # type: ignore[arg-type]
        axes = [int(a) % r for a in n.known(3, "axes input").reshape(-1)]
        full = np.zeros(2 * r, np.int64)
        for i, a in enumerate(axes):
            full[a], full[r + a] = pads[i], pads[len(axes) + i]
        pads = full
    gx = ops.Pad(g, -pads)
    out: list = [gx] + [None] * (len(n.inputs) - 1)
    if n.need(2):  # the pad value fills what the input did not
        out[2] = ops.Reshape(ops.Sub(ops.ReduceSum(g, keepdims=0), ops.ReduceSum(gx, keepdims=0)),
                             shape_of(n.inputs[2]))  # type: ignore[arg-type]
    return out


define("Pad", type_rule=pad_type, vjp=pad_vjp)


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


def center_crop_pad_type(node: Node) -> list:
    """The listed axes (all by default) take the sizes of the shape input."""
    shape, sizes = node.shape(0), node.dims(1)
    if shape is None or sizes is None:
        return unknown(node)
    axes = node.attr("axes") or list(range(len(shape)))
    out = list(shape)
    for a, s in zip(axes, sizes):
        out[node.axis(int(a), len(shape))] = s  # type: ignore[index]
    return [TensorType(node.dtype(0), out)]


define("CenterCropPad", type_rule=center_crop_pad_type, vjp=replay_vjp)


@kernel("Compress", since=9)
def compress(attrs: Mapping[str, Any], x: np.ndarray, condition: np.ndarray) -> tuple:
    """ONNX Compress: keep the slices where ``condition`` is true (flattened without ``axis``)."""
    axis = attrs.get("axis")
    cond = np.asarray(condition).astype(bool).reshape(-1)
    if axis is None:
        return (np.compress(cond, x.reshape(-1)),)
    return (np.compress(cond, x, axis=axis_of(axis, x.ndim)),)


def compress_type(node: Node) -> list:
    """The kept entries along ``axis`` (all of them flattened without one)."""
    shape, axis = node.shape(0), node.attr("axis")
    if node.dtype(1) not in (None, "bool"):
        raise node.fail("a bool condition", str(node.dtype(1)))
    if axis is None or shape is None:
        return [TensorType(node.dtype(0), (None,) if axis is None else None)]
    a = node.axis(int(axis), len(shape))
    return [TensorType(node.dtype(0), [None if i == a else d for i, d in enumerate(shape)])]


define("Compress", type_rule=compress_type, vjp=disjoint_select_vjp)


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


define("ReverseSequence", type_rule=same_as_first, vjp=disjoint_select_vjp)


@kernel("Trilu", since=14)
def trilu(attrs: Mapping[str, Any], x: np.ndarray, k: np.ndarray | None = None) -> tuple:
    """ONNX Trilu: the upper (``upper=1``) or lower triangle of the last two axes, offset ``k``."""
    offset = int(_scalar(k, 0))
    if int(attrs.get("upper", 1)):
        return (np.triu(x, offset),)
    return (np.tril(x, offset),)


def trilu_vjp(n: GradNode) -> list:
    """Trilu: the same triangle of the gradient (the op is a mask)."""
    n.given(0)
    k = n.inputs[1] if len(n.inputs) > 1 else None
    return rest(n, ops.Trilu(n.grad(), k, upper=int(n.attr("upper", 1))))


define("Trilu", type_rule=same_as_first, vjp=trilu_vjp)


# ---- type rules and gradients shared by several ops of this family ----


def _slice_len(d: Dim, start: int, end: int, step: int) -> Dim:
    if type(d) is int:
        return len(range(*slice(start, end, step).indices(d)))
    if start == 0 and step == 1 and end >= 2**31 - 1:
        return d
    return None
