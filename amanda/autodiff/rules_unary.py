"""Vector-Jacobian rules of elementwise ops of one input: each op's derivative, built from its
input ``x``, output ``y`` and output gradient ``g``, in the table ``SLOPES``.

An op type missing from the table is an error naming the op, never some other op's
derivative. Piecewise-constant ops (Sign, Floor, Ceil, Round) have a zero derivative wherever
they have one, and get zeros.

>>> sorted(SLOPES)[:4]
['Abs', 'Acos', 'Acosh', 'Asin']
"""

from __future__ import annotations

import math
from collections.abc import Callable

from amanda.autodiff.node import Node, const
from amanda.build import ops
from amanda.build.values import Value

__all__ = ["SLOPES", "unary_vjp"]

Slope = Callable[[Node, Value, Value, Value], Value]


def _where_positive(x: Value, g: Value, other: Value | None) -> Value:
    """``g`` where ``x > 0``, ``other`` (zeros when None) elsewhere."""
    return ops.Where(ops.Greater(x, const(0, x)), g, const(0, g) if other is None else other)


def _over_root(g: Value, x: Value, sign: float, shift: float) -> Value:
    """``g / sqrt(sign * x^2 + shift)`` (the inverse sines' and hyperbolic ones' derivatives)."""
    return ops.Div(g, ops.Sqrt(ops.Add(ops.Mul(ops.Mul(x, x), const(sign, x)), const(shift, x))))


def _gelu(n: Node, x: Value, y: Value, g: Value) -> Value:
    """d gelu(x) / dx, exact (erf) or with the tanh approximation, times ``g``."""
    if n.attr("approximate", "none") == "tanh":
        c = math.sqrt(2 / math.pi)
        x2 = ops.Mul(x, x)
        t = ops.Tanh(ops.Mul(const(c, x), ops.Add(x, ops.Mul(const(0.044715, x), ops.Mul(x2, x)))))
        du = ops.Mul(const(c, x), ops.Add(const(1, x), ops.Mul(const(3 * 0.044715, x), x2)))
        left = ops.Mul(const(0.5, x), ops.Add(const(1, x), t))
        slope = ops.Add(left, ops.Mul(ops.Mul(const(0.5, x), x), ops.Mul(ops.Sub(const(1, x), ops.Mul(t, t)), du)))
        return ops.Mul(g, slope)
    cdf = ops.Mul(const(0.5, x), ops.Add(const(1, x), ops.Erf(ops.Mul(x, const(1 / math.sqrt(2), x)))))
    pdf = ops.Mul(const(1 / math.sqrt(2 * math.pi), x), ops.Exp(ops.Mul(ops.Mul(x, x), const(-0.5, x))))
    return ops.Mul(g, ops.Add(cdf, ops.Mul(x, pdf)))


def _hard_sigmoid(n: Node, x: Value, y: Value, g: Value) -> Value:
    """``alpha`` where ``0 < alpha*x + beta < 1``, zero where the op clipped."""
    alpha = float(n.attr("alpha", 0.2))
    t = ops.Add(ops.Mul(x, const(alpha, x)), const(float(n.attr("beta", 0.5)), x))
    inside = ops.And(ops.Greater(t, const(0, t)), ops.Less(t, const(1, t)))
    return ops.Where(inside, ops.Mul(g, const(alpha, g)), const(0, g))


def _hard_swish(n: Node, x: Value, y: Value, g: Value) -> Value:
    """``x * hardsigmoid(x)`` (alpha 1/6, beta 1/2): 0 below -3, 1 above 3, ``x/3 + 1/2`` between."""
    middle = ops.Mul(g, ops.Add(ops.Mul(x, const(1 / 3, x)), const(0.5, x)))
    return ops.Where(ops.Greater(x, const(3, x)), g, ops.Where(ops.Less(x, const(-3, x)), const(0, g), middle))


def _mish(n: Node, x: Value, y: Value, g: Value) -> Value:
    """``x * tanh(softplus(x))``: ``t + x * sigmoid(x) * (1 - t^2)`` with ``t = tanh(softplus(x))``."""
    t = ops.Tanh(ops.Softplus(x))
    return ops.Mul(g, ops.Add(t, ops.Mul(ops.Mul(x, ops.Sigmoid(x)), ops.Sub(const(1, t), ops.Mul(t, t)))))


def _swish(n: Node, x: Value, y: Value, g: Value) -> Value:
    """``x * sigmoid(alpha x)``: ``s + alpha * x * s * (1 - s)``."""
    alpha = float(n.attr("alpha", 1.0))
    s = ops.Sigmoid(ops.Mul(x, const(alpha, x)))
    return ops.Mul(g, ops.Add(s, ops.Mul(ops.Mul(ops.Mul(x, const(alpha, x)), s), ops.Sub(const(1, s), s))))


def _selu(n: Node, x: Value, y: Value, g: Value) -> Value:
    gamma = float(n.attr("gamma", 1.05070102214813232421875))
    alpha = float(n.attr("alpha", 1.67326319217681884765625))
    return _where_positive(x, ops.Mul(g, const(gamma, g)), ops.Mul(g, ops.Add(y, const(gamma * alpha, y))))


def _celu(n: Node, x: Value, y: Value, g: Value) -> Value:
    alpha = float(n.attr("alpha", 1.0))
    return _where_positive(x, g, ops.Mul(g, ops.Exp(ops.Div(x, const(alpha, x)))))


def _zero(n: Node, x: Value, y: Value, g: Value) -> Value:
    """A piecewise-constant op: zero wherever the derivative exists."""
    return ops.Mul(g, const(0, g))


#: op type -> ``slope(node, x, y, g)``: the input gradient of each elementwise op of one input
SLOPES: dict[str, Slope] = {
    "Identity": lambda n, x, y, g: g,
    "Neg": lambda n, x, y, g: ops.Neg(g),
    "Exp": lambda n, x, y, g: ops.Mul(g, y),
    "Log": lambda n, x, y, g: ops.Div(g, x),
    "Sqrt": lambda n, x, y, g: ops.Div(g, ops.Mul(y, const(2, y))),
    "Reciprocal": lambda n, x, y, g: ops.Neg(ops.Mul(g, ops.Mul(y, y))),
    "Abs": lambda n, x, y, g: ops.Mul(g, ops.Sign(x)),
    "Tanh": lambda n, x, y, g: ops.Mul(g, ops.Sub(const(1, y), ops.Mul(y, y))),
    "Sigmoid": lambda n, x, y, g: ops.Mul(g, ops.Mul(y, ops.Sub(const(1, y), y))),
    "Relu": lambda n, x, y, g: _where_positive(x, g, None),
    "LeakyRelu": lambda n, x, y, g: _where_positive(x, g, ops.Mul(g, const(n.attr("alpha", 0.01), g))),
    "Elu": lambda n, x, y, g: _where_positive(x, g, ops.Mul(g, ops.Add(y, const(n.attr("alpha", 1.0), y)))),
    "Selu": _selu,
    "Celu": _celu,
    "ThresholdedRelu": lambda n, x, y, g: ops.Where(ops.Greater(x, const(n.attr("alpha", 1.0), x)), g,
                                                     const(0, g)),
    "Shrink": lambda n, x, y, g: ops.Where(ops.Greater(ops.Abs(x), const(n.attr("lambd", 0.5), x)), g,
                                           const(0, g)),
    "Erf": lambda n, x, y, g: ops.Mul(g, ops.Mul(const(2 / math.sqrt(math.pi), x),
                                                 ops.Exp(ops.Neg(ops.Mul(x, x))))),
    "Gelu": _gelu,
    "HardSigmoid": _hard_sigmoid,
    "HardSwish": _hard_swish,
    "Mish": _mish,
    "Swish": _swish,
    "Softplus": lambda n, x, y, g: ops.Mul(g, ops.Sigmoid(x)),
    "Softsign": lambda n, x, y, g: ops.Div(g, ops.Mul(*[ops.Add(const(1, x), ops.Abs(x))] * 2)),
    "Sin": lambda n, x, y, g: ops.Mul(g, ops.Cos(x)),
    "Cos": lambda n, x, y, g: ops.Neg(ops.Mul(g, ops.Sin(x))),
    "Tan": lambda n, x, y, g: ops.Mul(g, ops.Add(const(1, y), ops.Mul(y, y))),
    "Asin": lambda n, x, y, g: _over_root(g, x, -1, 1),
    "Acos": lambda n, x, y, g: ops.Neg(_over_root(g, x, -1, 1)),
    "Atan": lambda n, x, y, g: ops.Div(g, ops.Add(const(1, x), ops.Mul(x, x))),
    "Sinh": lambda n, x, y, g: ops.Mul(g, ops.Cosh(x)),
    "Cosh": lambda n, x, y, g: ops.Mul(g, ops.Sinh(x)),
    "Asinh": lambda n, x, y, g: _over_root(g, x, 1, 1),
    "Acosh": lambda n, x, y, g: _over_root(g, x, 1, -1),
    "Atanh": lambda n, x, y, g: ops.Div(g, ops.Sub(const(1, x), ops.Mul(x, x))),
    **dict.fromkeys(["Sign", "Floor", "Ceil", "Round"], _zero),
}


def unary_vjp(n: Node) -> list:
    """Elementwise ops of one input (the op types of ``SLOPES``); any other op type is an error
    naming the op."""
    slope = SLOPES.get(str(n.op.type))
    if slope is None:
        raise n.fail(f"an elementwise op with a known derivative ({', '.join(sorted(SLOPES))})", str(n.op.type))
    x = n.given(0)
    return [slope(n, x, n.outputs[0], n.grad())] + [None] * (len(n.inputs) - 1)


