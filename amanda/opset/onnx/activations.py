"""Activation functions of the ONNX default domain.

Each row of the table is ``op type -> (function of (x, attrs), first opset)``;
functions compute in float32 or wider and the kernel casts back to the input
dtype, as ONNX keeps the input type. Defaults are the ONNX attribute defaults.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from amanda.autodiff.node import Node, const, unbroadcast
from amanda.autodiff.rules_unary import unary_vjp
from amanda.build import ops
from amanda.build.values import Value
from amanda.exec.kernels.math_util import as_array, attr_str, erf, gelu32, wide
from amanda.exec.kernels.registry import kernel
from amanda.ops import define
from amanda.ops.catalog import FUSED
from amanda.types.node import Node as TypedNode
from amanda.types.rules.elementwise import dtype_of_all, same_as_first
from amanda.types.tensor_type import TensorType

Attrs = Mapping[str, Any]

_SELU_ALPHA = 1.67326319217681884765625
_SELU_GAMMA = 1.05070102214813232421875


def _f(attrs: Attrs, name: str, default: float) -> float:
    return float(attrs.get(name, default))


def _sigmoid(x: np.ndarray) -> np.ndarray:
    # the tanh form never overflows, unlike 1 / (1 + exp(-x)); computed in one buffer
    # (about 1.5x faster than four temporaries on EfficientNet's activations)
    x = np.asarray(x)
    if x.dtype.kind != "f":
        return 0.5 * (1.0 + np.tanh(0.5 * x))
    y = np.multiply(x, 0.5, out=np.empty_like(x))
    np.tanh(y, out=y)
    y += 1.0
    y *= 0.5
    return y


def _softplus(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(0.0, x).astype(x.dtype, copy=False)


def _elu(x: np.ndarray, a: Attrs) -> np.ndarray:
    alpha = _f(a, "alpha", 1.0)
    return np.where(x < 0, alpha * np.expm1(np.minimum(x, 0)), x)


def _selu(x: np.ndarray, a: Attrs) -> np.ndarray:
    alpha, gamma = _f(a, "alpha", _SELU_ALPHA), _f(a, "gamma", _SELU_GAMMA)
    return gamma * np.where(x <= 0, alpha * np.expm1(np.minimum(x, 0)), x)


def _celu(x: np.ndarray, a: Attrs) -> np.ndarray:
    alpha = _f(a, "alpha", 1.0)
    return np.maximum(x, 0) + np.minimum(0, alpha * np.expm1(np.minimum(x, 0) / alpha))


_TANH_SCALE = math.sqrt(2.0 / math.pi)
_INV_SQRT2 = 1.0 / math.sqrt(2.0)


def _gelu(x: np.ndarray, a: Attrs) -> np.ndarray:
    if attr_str(a, "approximate", "none") == "tanh":
        # python floats, not numpy float64 scalars, so float32 stays float32 (NEP 50)
        inner = _TANH_SCALE * (x + 0.044715 * (x * x * x))
        return 0.5 * x * (1.0 + np.tanh(inner))
    if x.dtype == np.float32:
        return gelu32(x)
    return 0.5 * x * (1.0 + erf(x * _INV_SQRT2))


def _hard_sigmoid(x: np.ndarray, a: Attrs) -> np.ndarray:
    # max(0, min(1, alpha * x + beta)) in one buffer (python floats keep float32, NEP 50)
    y = np.multiply(x, _f(a, "alpha", 0.2))
    y += _f(a, "beta", 0.5)
    return np.clip(y, 0, 1, out=y)


def _hard_swish(x: np.ndarray, a: Attrs) -> np.ndarray:
    # x * HardSigmoid(x) with ONNX's alpha = 1/6, beta = 0.5, in one buffer
    y = _hard_sigmoid(x, {"alpha": 1.0 / 6.0})
    y *= x
    return y


def _swish(x: np.ndarray, a: Attrs) -> np.ndarray:
    alpha = _f(a, "alpha", 1.0)
    if x.dtype.kind != "f":
        return x * _sigmoid(alpha * x)
    # x * sigmoid(alpha x) = x * (1 + tanh(alpha x / 2)) / 2: the tanh form, in one buffer
    y = np.multiply(x, 0.5 * alpha)
    np.tanh(y, out=y)
    y += 1.0
    y *= x
    y *= 0.5
    return y


def _shrink(x: np.ndarray, a: Attrs) -> np.ndarray:
    bias, lambd = _f(a, "bias", 0.0), _f(a, "lambd", 0.5)
    return np.where(x < -lambd, x + bias, np.where(x > lambd, x - bias, 0))


_ACTIVATIONS: dict[str, tuple[Callable[[np.ndarray, Attrs], Any], int]] = {
    "Relu": (lambda x, a: np.maximum(x, 0), 1),
    "LeakyRelu": (lambda x, a: np.where(x < 0, _f(a, "alpha", 0.01) * x, x), 1),
    "Elu": (_elu, 1),
    "Selu": (_selu, 1),
    "Celu": (_celu, 12),
    "Sigmoid": (lambda x, a: _sigmoid(x), 1),
    "HardSigmoid": (_hard_sigmoid, 1),
    "HardSwish": (_hard_swish, 14),
    "Softplus": (lambda x, a: _softplus(x), 1),
    "Softsign": (lambda x, a: x / (1 + np.abs(x)), 1),
    "ThresholdedRelu": (lambda x, a: np.where(x > _f(a, "alpha", 1.0), x, 0), 10),
    "Gelu": (_gelu, 20),
    "Mish": (lambda x, a: x * np.tanh(_softplus(x)), 18),
    "Shrink": (_shrink, 9),
    "Swish": (_swish, 24),
}


def _activation_kernel(
    op_type: str, fn: Callable[[np.ndarray, Attrs], Any]
) -> Callable[..., tuple]:
    def run(attrs: Attrs, x: np.ndarray) -> tuple:
        # integer inputs (Relu, Shrink) stay integer; narrow floats compute in float32
        work = x if x.dtype.kind in "iu" else x.astype(wide(x.dtype), copy=False)
        return (as_array(fn(work, attrs)).astype(x.dtype, copy=False),)

    run.__name__ = run.__qualname__ = f"{op_type.lower()}_kernel"
    run.__doc__ = f"ONNX {op_type}: elementwise, same dtype as the input."
    return run


for _op, (_fn, _since) in _ACTIVATIONS.items():
    kernel(_op, since=_since)(_activation_kernel(_op, _fn))


# ops amanda's plans fuse elementwise chains into (amanda/passes/fuse.py); not ONNX ops, so a
# Session uses them only inside its plans and optimised models never export them
_FUSED_WHY = "a fused op made by optimize: differentiate before optimising"
for _op in ("Gelu", "Swish"):
    kernel(_op, family=FUSED)(_activation_kernel(_op, _ACTIVATIONS[_op][0]))
    define(_op, family=FUSED, type_rule=same_as_first, gradient_gap=_FUSED_WHY)


@kernel("PRelu", since=1)
def prelu_kernel(attrs: Attrs, x: np.ndarray, slope: np.ndarray) -> tuple:
    """ONNX PRelu: ``slope * x`` where ``x < 0``; ``slope`` broadcasts to ``x``."""
    return (as_array(np.where(x < 0, x * slope, x)).astype(x.dtype, copy=False),)


def prelu(node: TypedNode) -> list:
    """The input's type; the slope must broadcast to it."""
    dtype_of_all(node, [0, 1])
    shape = node.broadcast(node.shape(0), node.shape(1))
    return [TensorType(node.dtype(0), shape if node.shape(0) is None else node.shape(0))]


def prelu_vjp(n: Node) -> list:
    """PRelu: ``g`` where ``x > 0``, ``g * slope`` elsewhere; the slope gets ``g * x`` there,
    summed over the axes it was broadcast along."""
    x, slope = n.given(0, 1)
    g = n.grad()
    positive = ops.Greater(x, const(0, x))
    zero = const(0, g)
    return [ops.Where(positive, g, ops.Mul(g, slope)) if n.need(0) else None,
            unbroadcast(ops.Where(positive, zero, ops.Mul(g, x)), slope) if n.need(1) else None]


define("PRelu", type_rule=prelu, vjp=prelu_vjp)


def _clip(x: np.ndarray, low: Any, high: Any) -> tuple:
    out = x
    # maximum then minimum: when min > max every value becomes max, as ONNX says
    if low is not None:
        out = np.maximum(out, np.asarray(low).astype(x.dtype))
    if high is not None:
        out = np.minimum(out, np.asarray(high).astype(x.dtype))
    return (as_array(out).astype(x.dtype, copy=False),)


@kernel("Clip", since=1)
def clip_attr_kernel(attrs: Attrs, x: np.ndarray) -> tuple:
    """ONNX Clip before opset 11: bounds are the ``min``/``max`` attributes."""
    return _clip(x, attrs.get("min"), attrs.get("max"))


def clip_vjp(n: Node) -> list:
    """Clip: the gradient where ``min <= x <= max``; each bound gets the gradient of the
    elements it clipped (summed, it is a scalar)."""
    x = n.given(0)
    g = n.grad()
    zero = const(0, g)
    low, high = _bound(n, 1, "min"), _bound(n, 2, "max")
    # max(x, min) then min(., max): with min > max every element is max
    above = None if high is None else ops.Greater(x if low is None else ops.Max(x, low), high)
    below = None if low is None else ops.Less(x, low)
    if below is not None and above is not None:
        below = ops.And(below, ops.Not(above))
    gx = g
    for mask in (below, above):
        gx = gx if mask is None else ops.Where(mask, zero, gx)
    out: list = [gx] + [None] * (len(n.inputs) - 1)
    for i, mask in ((1, below), (2, above)):
        if mask is not None and n.need(i):
            out[i] = unbroadcast(ops.Where(mask, g, zero), n.inputs[i])
    return out


define("Clip", type_rule=same_as_first, vjp=clip_vjp)


@kernel("Clip", since=11)
def clip_kernel(
    attrs: Attrs, x: np.ndarray, low: np.ndarray | None = None, high: np.ndarray | None = None
) -> tuple:
    """ONNX Clip from opset 11: bounds are optional scalar inputs."""
    return _clip(x, low, high)


# ---- type rules and gradients shared by several ops of this family ----


def _bound(n: Node, i: int, name: str) -> Value | None:
    """Clip's bound ``i`` (``min`` 1, ``max`` 2): an input from opset 11, an attribute before."""
    if n.opset is not None and n.opset < 11:
        value = n.attr(name)
        return None if value is None else const(float(value), n.inputs[0])  # type: ignore[return-value]
    return n.inputs[i] if i < len(n.inputs) else None


# each op's type rule and gradient, beside the kernels registered above
define("Celu", type_rule=same_as_first, vjp=unary_vjp)
define("Elu", type_rule=same_as_first, vjp=unary_vjp)
define("Gelu", type_rule=same_as_first, vjp=unary_vjp)
define("HardSigmoid", type_rule=same_as_first, vjp=unary_vjp)
define("HardSwish", type_rule=same_as_first, vjp=unary_vjp)
define("LeakyRelu", type_rule=same_as_first, vjp=unary_vjp)
define("Mish", type_rule=same_as_first, vjp=unary_vjp)
define("Relu", type_rule=same_as_first, vjp=unary_vjp)
define("Selu", type_rule=same_as_first, vjp=unary_vjp)
define("Shrink", type_rule=same_as_first, vjp=unary_vjp)
define("Sigmoid", type_rule=same_as_first, vjp=unary_vjp)
define("Softplus", type_rule=same_as_first, vjp=unary_vjp)
define("Softsign", type_rule=same_as_first, vjp=unary_vjp)
define("Swish", type_rule=same_as_first, vjp=unary_vjp)
define("ThresholdedRelu", type_rule=same_as_first, vjp=unary_vjp)
