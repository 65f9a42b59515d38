"""The vector-Jacobian rule of Resize (and Upsample, Resize-10's form).

Every mode of Resize (nearest, linear, cubic; any coordinate transformation, antialias,
``axes``, ``roi``) resamples one axis at a time, and each axis is a linear map of the input:
an ``out x in`` matrix. The rule computes that matrix when it builds the backward ops, by
resizing the identity with the kernel's own code (so forward and backward cannot disagree),
and sends the gradient back through the transposed matrices, one ``MatMul`` per resized axis.
Shapes, scales, sizes and roi must be known when ``grad`` runs.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from amanda.autodiff.node import Node, const
from amanda.build import ops
from amanda.build.values import Value
from amanda.exec.kernels.resize import _legacy_rule, _plan, resize_array

__all__ = ["resize_vjp"]

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
