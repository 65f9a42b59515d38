"""Reductions of the ONNX default domain: Reduce*, ArgMax/ArgMin and CumSum.

The ``axes`` of a Reduce op moved from an attribute to an optional input at
opset 13 for ReduceSum and at opset 18 for the others; both spellings share
one implementation. Empty ``axes`` reduce everything unless
``noop_with_empty_axes`` is set, which makes the op an identity.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from amanda.exec.kernels.math_util import as_array, axes_from, normalize_axes, wide
from amanda.exec.kernels.registry import kernel

Attrs = Mapping[str, Any]
Reducer = Callable[[np.ndarray, tuple[int, ...]], np.ndarray]


def _lowest(dtype: np.dtype) -> Any:
    if dtype.kind == "f":
        return -np.inf
    if dtype.kind == "b":
        return False
    return np.iinfo(dtype).min


def _highest(dtype: np.dtype) -> Any:
    if dtype.kind == "f":
        return np.inf
    if dtype.kind == "b":
        return True
    return np.iinfo(dtype).max


def _sum(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    # dtype=x.dtype: numpy would widen small integers, ONNX keeps (and wraps) them
    return np.sum(x, axis=axes, keepdims=True, dtype=x.dtype)


def _log_sum_exp(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    top = np.max(x, axis=axes, keepdims=True, initial=_lowest(x.dtype))
    top = np.where(np.isfinite(top), top, 0)  # empty or all -inf: do not shift
    return np.log(np.sum(np.exp(x - top), axis=axes, keepdims=True)) + top


_REDUCERS: dict[str, tuple[Reducer, int]] = {
    "ReduceSum": (_sum, 13),
    "ReduceMean": (lambda x, ax: np.mean(x, axis=ax, keepdims=True), 18),
    "ReduceMax": (lambda x, ax: np.max(x, axis=ax, keepdims=True, initial=_lowest(x.dtype)), 18),
    "ReduceMin": (lambda x, ax: np.min(x, axis=ax, keepdims=True, initial=_highest(x.dtype)), 18),
    "ReduceProd": (lambda x, ax: np.prod(x, axis=ax, keepdims=True, dtype=x.dtype), 18),
    "ReduceL1": (lambda x, ax: _sum(np.abs(x), ax), 18),
    "ReduceL2": (lambda x, ax: np.sqrt(_sum(x * x, ax)), 18),
    "ReduceLogSum": (lambda x, ax: np.log(_sum(x, ax)), 18),
    "ReduceLogSumExp": (_log_sum_exp, 18),
    "ReduceSumSquare": (lambda x, ax: _sum(x * x, ax), 18),
}


def _reduce(fn: Reducer, attrs: Attrs, x: np.ndarray, axes: list[int] | None) -> tuple:
    if not axes:
        if int(attrs.get("noop_with_empty_axes", 0)):
            return (x,)
        axes = list(range(x.ndim))
    ax = normalize_axes(axes, x.ndim)
    # float16/bfloat16 accumulate in float32; integers keep their own type
    work = x.astype(wide(x.dtype), copy=False) if x.dtype.kind not in "biu" else x
    with np.errstate(all="ignore"):
        out = as_array(fn(work, ax))
    if not int(attrs.get("keepdims", 1)):
        out = out.reshape([d for i, d in enumerate(out.shape) if i not in ax])
    return (out.astype(x.dtype, copy=False),)


def _attr_axes_kernel(op_type: str, fn: Reducer) -> Callable[..., tuple]:
    def run(attrs: Attrs, x: np.ndarray) -> tuple:
        return _reduce(fn, attrs, x, axes_from(attrs, None, from_input=False))

    run.__name__ = run.__qualname__ = f"{op_type.lower()}_attr_kernel"
    run.__doc__ = f"ONNX {op_type} with an ``axes`` attribute."
    return run


def _input_axes_kernel(op_type: str, fn: Reducer) -> Callable[..., tuple]:
    def run(attrs: Attrs, x: np.ndarray, axes: np.ndarray | None = None) -> tuple:
        return _reduce(fn, attrs, x, axes_from(attrs, axes, from_input=True))

    run.__name__ = run.__qualname__ = f"{op_type.lower()}_input_kernel"
    run.__doc__ = f"ONNX {op_type} with an optional ``axes`` input."
    return run


for _op, (_fn, _input_since) in _REDUCERS.items():
    kernel(_op, since=1)(_attr_axes_kernel(_op, _fn))
    kernel(_op, since=_input_since)(_input_axes_kernel(_op, _fn))


def _arg_extreme(pick: Callable[..., np.ndarray]) -> Callable[..., tuple]:
    def run(attrs: Attrs, x: np.ndarray) -> tuple:
        axis = int(attrs.get("axis", 0))
        axis = axis + x.ndim if axis < 0 else axis
        if int(attrs.get("select_last_index", 0)):
            # the last extreme is the first one of the reversed axis
            idx = x.shape[axis] - 1 - pick(np.flip(x, axis), axis=axis)
        else:
            idx = pick(x, axis=axis)
        idx = as_array(idx, dtype=np.int64)
        if int(attrs.get("keepdims", 1)):
            idx = np.expand_dims(idx, axis)
        return (idx,)

    return run


argmax_kernel = kernel("ArgMax", since=1)(_arg_extreme(np.argmax))
argmin_kernel = kernel("ArgMin", since=1)(_arg_extreme(np.argmin))


def _cumulative(attrs: Attrs, x: np.ndarray, axis: np.ndarray, scan: Callable[..., np.ndarray],
                identity: Callable[..., np.ndarray]) -> tuple:
    """A running ``scan`` along a scalar ``axis`` input, optionally ``exclusive`` (shifted by one,
    starting from the ``identity``) and ``reverse``."""
    ax = int(np.asarray(axis).reshape(-1)[0])
    ax = ax + x.ndim if ax < 0 else ax
    reverse = int(attrs.get("reverse", 0))
    work = np.flip(x, ax) if reverse else x
    out = scan(work, axis=ax, dtype=x.dtype)
    if int(attrs.get("exclusive", 0)):
        head = identity(np.take(out, [0], axis=ax))
        out = np.concatenate([head, np.take(out, np.arange(out.shape[ax] - 1), axis=ax)], axis=ax)
    if reverse:
        out = np.flip(out, ax)
    return (as_array(out).astype(x.dtype, copy=False),)


@kernel("CumSum", since=11)
def cumsum_kernel(attrs: Attrs, x: np.ndarray, axis: np.ndarray) -> tuple:
    """ONNX CumSum along a scalar ``axis`` input, optionally ``exclusive`` and ``reverse``."""
    return _cumulative(attrs, x, axis, np.cumsum, np.zeros_like)


@kernel("CumProd", since=26)
def cumprod_kernel(attrs: Attrs, x: np.ndarray, axis: np.ndarray) -> tuple:
    """ONNX CumProd along a scalar ``axis`` input, optionally ``exclusive`` and ``reverse``."""
    return _cumulative(attrs, x, axis, np.cumprod, np.ones_like)
