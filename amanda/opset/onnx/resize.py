"""Resize and Upsample: separable resampling, one axis at a time.

Each resized axis maps output positions to source coordinates (the
``coordinate_transformation_mode``), then either gathers the nearest source
index or sums a few weighted taps (linear, cubic; antialias widens the filter
when downsampling). Loops run over taps, never over pixels.

Gradients. The vector-Jacobian rule of Resize (and Upsample, Resize-10's form).

Every mode of Resize (nearest, linear, cubic; any coordinate transformation, antialias,
``axes``, ``roi``) resamples one axis at a time, and each axis is a linear map of the input:
an ``out x in`` matrix. The rule computes that matrix when it builds the backward ops, by
resizing the identity with the kernel's own code (so forward and backward cannot disagree),
and sends the gradient back through the transposed matrices, one ``MatMul`` per resized axis.
Shapes, scales, sizes and roi must be known when ``grad`` runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from amanda.autodiff.node import Node, const
from amanda.build import ops
from amanda.build.values import Value
from amanda.errors import ExecutionError
from amanda.exec.kernels.math_util import axis_of
from amanda.exec.kernels.registry import kernel
from amanda.ops import define
from amanda.types.node import Node as TypedNode
from amanda.types.node import Partial
from amanda.types.rules.indexing import resize as resize_type
from amanda.types.rules.indexing import scaled, unknown
from amanda.types.tensor_type import TensorType


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


# ---- type rules and gradients shared by several ops of this family ----


#: the modes the rule differentiates (every mode the kernel runs: each is linear in the input)
MODES = ("nearest", "linear", "cubic")


def _given(n: Node, i: int, what: str) -> np.ndarray | None:
    """The constant input ``i`` (None when absent or empty)."""
    if i >= len(n.inputs) or n.inputs[i] is None:
        return None
    value = n.known(i, what)
    return value if value.size else None


def _geometry(n: Node, shape: list[int]) -> tuple[list[int], list[float], list[float] | None, dict, dict]:
    """Output shape, per-axis scales, full roi, the attributes the kernel reads and its
    keyword arguments (the older ops' coordinate and rounding rules)."""
    mode = str(n.attr("mode", "nearest"))
    legacy = n.op.type == "Upsample" or (n.opset is not None and n.opset < 11)
    if legacy:
        scales = n.attr("scales") if len(n.inputs) < 2 else n.known(1, "scales input")
        factors = [float(v) for v in np.asarray(scales).reshape(-1)]
        out = [math.floor(d * s) for d, s in zip(shape, factors)]
        attrs: dict[str, Any] = {"mode": "linear" if mode in ("linear", "bilinear") else mode}
        return out, factors, None, attrs, {"coordinate_mode": "asymmetric", "nearest_rule": _legacy_rule(factors)}
    roi, scales, sizes = _given(n, 1, "roi"), _given(n, 2, "scales"), _given(n, 3, "sizes")
    out, factors, full_roi = _plan(np.broadcast_to(np.zeros(()), shape), scales, sizes, roi, n.op.attrs)
    attrs = n.own_attrs()
    attrs["extrapolation_value"] = 0.0  # a constant fill: no gradient reaches the input from there
    return out, factors, full_roi, attrs, {}


def _matrix(size: int, out: int, factor: float, roi: tuple[float, float] | None, attrs: dict,
            kwargs: dict[str, Any]) -> np.ndarray:
    """The ``size x out`` matrix of one axis's resampling: row ``i`` is what input ``i`` adds
    to each output position."""
    flat_roi = None if roi is None else [0.0, roi[0], 1.0, roi[1]]
    return np.asarray(resize_array(np.eye(size), (size, out), (1.0, factor), attrs, flat_roi, **kwargs), np.float64)


def resize_vjp(n: Node) -> list:
    """Resize and Upsample, every mode: the gradient through each resized axis's transposed
    resampling matrix; none to roi, scales or sizes."""
    x = n.given(0)
    dims = x.type.shape
    if dims is None or not all(type(d) is int for d in dims):
        raise n.fail("an input of known shape", repr(x.type))
    mode = str(n.attr("mode", "nearest"))
    if mode not in (*MODES, "bilinear"):
        raise n.fail(f"a mode Resize is differentiable for ({', '.join(MODES)})", f"mode {mode!r}")
    shape = [int(d) for d in dims]
    out, factors, roi, attrs, kwargs = _geometry(n, shape)
    g: Value = n.grad()
    r = len(shape)
    for axis in range(r):
        axis_roi = None if roi is None else (float(roi[axis]), float(roi[r + axis]))
        matrix = _matrix(shape[axis], int(out[axis]), float(factors[axis]), axis_roi, attrs, kwargs)
        if matrix.shape[0] == matrix.shape[1] and np.array_equal(matrix, np.eye(matrix.shape[0])):
            continue
        perm = list(range(r))
        perm[axis], perm[-1] = perm[-1], perm[axis]
        moved = g if axis == r - 1 else ops.Transpose(g, perm=perm)
        back = ops.MatMul(moved, const(matrix.T, x))
        g = back if axis == r - 1 else ops.Transpose(back, perm=perm)
    return [g] + [None] * (len(n.inputs) - 1)


def upsample_type(node: TypedNode) -> list:
    """The input's dims times ``scales`` (rounded down)."""
    shape = node.shape(0)
    scales: Any = node.attr("scales")
    if scales is None:
        v = node.value(1)
        scales = None if v is None or isinstance(v, Partial) else v.reshape(-1).tolist()
    if shape is None or scales is None:
        return unknown(node)
    return [TensorType(node.dtype(0), scaled(node, shape, scales))]


# each op's type rule and gradient, beside the kernels registered above
define("Resize", type_rule=resize_type, vjp=resize_vjp)
define("Upsample", type_rule=upsample_type, vjp=resize_vjp)
