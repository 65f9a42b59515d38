"""Softmax, LogSoftmax and Hardmax of the ONNX default domain.

Before opset 13 these ops view the input as a 2-D matrix split at ``axis``
(default 1) and normalise each row; from opset 13 they normalise along the one
axis given (default -1).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from amanda.autodiff.node import Node, rank
from amanda.build import ops
from amanda.exec.kernels.math_util import as_array, row_sums, wide
from amanda.exec.kernels.registry import kernel
from amanda.ops import define
from amanda.types.rules.elementwise import along_axis

Attrs = Mapping[str, Any]


# A row shifted by any c with max(row) <= c <= max(row) + SHIFT_SLACK neither overflows
# nor loses a term larger than exp(-(87 - SHIFT_SLACK)) of the row's largest to underflow.
SHIFT_SLACK = 60.0


def _softmax_rows(xs: np.ndarray, e: np.ndarray) -> None:
    """Softmax of each row of the 2-D ``xs`` into ``e``.

    A row-wise max costs numpy one inner-loop call per row (about as much as the rest
    of the op), so the rows are shifted by the array's one max instead; a row whose sum
    shows it sat more than ``SHIFT_SLACK`` below that max (or held inf or nan) is redone
    by its own max.
    """
    np.subtract(xs, xs.max(), out=e)
    np.exp(e, out=e)
    total = row_sums(e)
    redo = ~(total >= xs.shape[1] * np.exp(-SHIFT_SLACK))  # also true for nan
    if redo.any():
        rows = np.flatnonzero(redo)
        own = xs[rows]
        own = np.exp(own - own.max(axis=1, keepdims=True))
        e[rows] = own
        total[rows] = np.sum(own, axis=1)
    np.reciprocal(total, out=total)
    e *= total[:, None]


def _softmax(x: np.ndarray, axis: int) -> np.ndarray:
    if axis == x.ndim - 1 and x.size and x.shape[-1]:
        rows = x.reshape(-1, x.shape[-1])
        out = np.empty(rows.shape, x.dtype)
        _softmax_rows(rows, out)
        return out.reshape(x.shape)
    # one buffer, reused in place: fresh pages cost as much as the arithmetic here
    e = np.subtract(x, np.max(x, axis=axis, keepdims=True))
    np.exp(e, out=e)
    total = np.sum(e, axis=axis, keepdims=True)
    np.reciprocal(total, out=total)
    e *= total
    return e


def _log_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    shifted = x - np.max(x, axis=axis, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


def _hardmax(x: np.ndarray, axis: int) -> np.ndarray:
    # one-hot of the first maximum along the axis
    first = np.expand_dims(np.argmax(x, axis=axis), axis)
    return (np.arange(x.shape[axis]).reshape(
        [-1 if d == axis else 1 for d in range(x.ndim)]
    ) == first).astype(x.dtype)


_FUNCTIONS: dict[str, Callable[[np.ndarray, int], np.ndarray]] = {
    "Softmax": _softmax,
    "LogSoftmax": _log_softmax,
    "Hardmax": _hardmax,
}


def _coerced_2d(fn: Callable[[np.ndarray, int], np.ndarray]) -> Callable[..., tuple]:
    def run(attrs: Attrs, x: np.ndarray) -> tuple:
        axis = int(attrs.get("axis", 1))
        axis = axis + x.ndim if axis < 0 else axis
        rows = int(np.prod(x.shape[:axis], dtype=np.int64))
        work = x.astype(wide(x.dtype), copy=False).reshape(rows, -1)
        return (as_array(fn(work, 1)).reshape(x.shape).astype(x.dtype, copy=False),)

    return run


def _per_axis(fn: Callable[[np.ndarray, int], np.ndarray]) -> Callable[..., tuple]:
    def run(attrs: Attrs, x: np.ndarray) -> tuple:
        axis = int(attrs.get("axis", -1))
        axis = axis + x.ndim if axis < 0 else axis
        work = x.astype(wide(x.dtype), copy=False)
        return (as_array(fn(work, axis)).astype(x.dtype, copy=False),)

    return run


for _op, _fn in _FUNCTIONS.items():
    for _since, _make in ((1, _coerced_2d), (13, _per_axis)):
        _kernel = _make(_fn)
        _kernel.__name__ = _kernel.__qualname__ = f"{_op.lower()}_v{_since}_kernel"
        _kernel.__doc__ = f"ONNX {_op} from opset {_since}."
        kernel(_op, since=_since)(_kernel)


# ---- type rules and gradients shared by several ops of this family ----


def _softmax_axis(n: Node) -> np.ndarray:
    """The axis a (Log)Softmax normalised over; before opset 13 only the last axis is one axis."""
    r = rank(n.outputs[0], n)
    old = n.opset is not None and n.opset < 13
    axis = int(n.attr("axis", 1 if old else -1)) % max(r, 1)
    if old and axis != r - 1:
        raise n.fail("a softmax over one axis (opset 13 or later, or the last axis)",
                     f"opset {n.opset} flattening axes {axis}.. of rank {r}")
    return np.array([axis], np.int64)


def softmax_vjp(n: Node) -> list:
    """Softmax: ``y * (g - sum(g*y, axis))``."""
    y, g = n.outputs[0], n.grad()
    axis = _softmax_axis(n)
    return [ops.Mul(y, ops.Sub(g, ops.ReduceSum(ops.Mul(g, y), axis, keepdims=1)))]


def log_softmax_vjp(n: Node) -> list:
    """LogSoftmax: ``g - exp(y) * sum(g, axis)``."""
    y, g = n.outputs[0], n.grad()
    axis = _softmax_axis(n)
    return [ops.Sub(g, ops.Mul(ops.Exp(y), ops.ReduceSum(g, axis, keepdims=1)))]


# each op's type rule and gradient, beside the kernels registered above
define("Hardmax", type_rule=along_axis, no_gradient="piecewise constant (a one-hot of the maximum's position)")
define("LogSoftmax", type_rule=along_axis, vjp=log_softmax_vjp)
define("Softmax", type_rule=along_axis, vjp=softmax_vjp)
