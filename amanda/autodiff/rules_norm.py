"""Vector-Jacobian rules of the normalisations without learned statistics beyond a scale:
LpNormalization, MeanVarianceNormalization, RMSNormalization (BatchNormalization,
InstanceNormalization and LayerNormalization are in :mod:`amanda.autodiff.rules_nn`).

Each follows its kernel's formula: MeanVarianceNormalization divides by ``std + 1e-9``,
LpNormalization gives zeros (and a zero gradient) where the norm is zero.
"""

from __future__ import annotations

import numpy as np

from amanda.autodiff.node import Node, axes_of, const, rank, unbroadcast
from amanda.build import ops
from amanda.build.values import Value

__all__ = ["lpnorm_vjp", "mvn_vjp", "rms_vjp"]


def _mean(v: Value, axes: list[int]) -> Value:
    return ops.ReduceMean(v, axes=axes, keepdims=1)


def lpnorm_vjp(n: Node) -> list:
    """LpNormalization, ``y = x / |x|_p`` along ``axis`` (p 1 or 2):
    ``(g - dN/dx * sum(g*y)) / N`` with ``dN/dx = sign(x)`` or ``y``."""
    x = n.given(0)
    p = int(n.attr("p", 2))
    if p not in (1, 2):
        raise n.fail("p = 1 or 2", f"p = {p}")
    axis = np.array([int(n.attr("axis", -1)) % rank(x, n)], np.int64)
    y, g = n.outputs[0], n.grad()
    reduce = ops.ReduceL1 if p == 1 else ops.ReduceL2
    norm = reduce(x, axes=[int(axis[0])], keepdims=1)  # the builder's opset 17: axes an attribute
    zero = ops.Equal(norm, const(0, norm))
    safe = ops.Where(zero, const(1, norm), norm)
    slope = ops.Sign(x) if p == 1 else y
    gx = ops.Div(ops.Sub(g, ops.Mul(slope, ops.ReduceSum(ops.Mul(g, y), axis, keepdims=1))), safe)
    return [ops.Where(zero, const(0, g), gx)]


def mvn_vjp(n: Node) -> list:
    """MeanVarianceNormalization, ``y = c / (s + 1e-9)`` with ``c = x - mean`` and
    ``s = sqrt(mean(c^2))`` over ``axes``: ``t = g/d - c * mean(g*c) / (d^2 s)``, centred."""
    x = n.given(0)
    axes = axes_of(n.attr("axes", [0, 2, 3]), rank(x, n))
    g = n.grad()
    c = ops.Sub(x, _mean(x, axes))
    s = ops.Sqrt(_mean(ops.Mul(c, c), axes))
    d = ops.Add(s, const(1e-9, s))
    t = ops.Sub(ops.Div(g, d), ops.Div(ops.Mul(c, _mean(ops.Mul(g, c), axes)), ops.Mul(ops.Mul(d, d), s)))
    return [ops.Sub(t, _mean(t, axes))]


def rms_vjp(n: Node) -> list:
    """RMSNormalization, ``y = x * r * scale`` with ``r = 1/sqrt(mean(x^2) + eps)`` over the
    axes from ``axis`` on: ``r * gs - r^3 * x * mean(gs * x)`` (``gs = g * scale``), and the
    scale's ``g * x * r`` summed over its broadcast axes."""
    x, scale = n.given(0, 1)
    r_ = rank(x, n)
    axes = list(range(int(n.attr("axis", -1)) % r_, r_))
    g = n.grad()
    r = ops.Reciprocal(ops.Sqrt(ops.Add(_mean(ops.Mul(x, x), axes), const(float(n.attr("epsilon", 1e-5)), x))))
    gs = ops.Mul(g, scale)
    gx = ops.Sub(ops.Mul(r, gs), ops.Mul(ops.Mul(ops.Mul(r, ops.Mul(r, r)), x), _mean(ops.Mul(gs, x), axes)))
    return [gx if n.need(0) else None, unbroadcast(ops.Mul(g, ops.Mul(x, r)), scale) if n.need(1) else None]
