"""Patterns of common subgraphs, written once: the optimiser's fusions build their rules from
them, and so can users (``Rule("gelu", erf_gelu, lambda op, x: op.Gelu(x))``).

The forms are the ones onnxscript's rewriter matches (``ort_fusions/erfgelu.py``,
``ort_fusions/gelu.py``, ``rules/fusion/_layer_norm.py``) and the ones torch's exporters write,
so the two find the same subgraphs (tools/compare_rewrite.py).

>>> from amanda.rewrite import Rule
>>> [Rule(f.__name__, f).root.type for f in (erf_gelu, erf_gelu_half_inside, tanh_gelu, silu, matmul_add)]
['Mul', 'Mul', 'Mul', 'Mul', 'Add']
>>> len(LAYER_NORM_PATTERNS)
4
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

__all__ = ["LAYER_NORM_PATTERNS", "erf_gelu", "erf_gelu_half_inside", "layer_norm", "matmul_add", "silu", "tanh_gelu",
           "tanh_gelu_half_inside"]


def erf_gelu(op: Any, x: Any) -> Any:
    """``0.5 * (x * (erf(x / sqrt 2) + 1))``, GELU as torch's exporters write it."""
    return op.Mul(op.Mul(x, op.Add(op.Erf(op.Div(x, math.sqrt(2))), 1.0)), 0.5)


def erf_gelu_half_inside(op: Any, x: Any) -> Any:
    """``x * (0.5 * (erf(x / sqrt 2) + 1))``, the same GELU with the half taken first."""
    return op.Mul(x, op.Mul(op.Add(op.Erf(op.Div(x, math.sqrt(2))), 1.0), 0.5))


def _tanh_inner(op: Any, x: Any) -> Any:
    return op.Tanh(op.Mul(op.Add(x, op.Mul(op.Pow(x, 3.0), 0.044715)), math.sqrt(2 / math.pi)))


def tanh_gelu(op: Any, x: Any) -> Any:
    """``(0.5 * x) * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x ** 3)))``, GPT-2's GELU as exported."""
    return op.Mul(op.Mul(x, 0.5), op.Add(_tanh_inner(op, x), 1.0))


def tanh_gelu_half_inside(op: Any, x: Any) -> Any:
    """``x * (0.5 * (1 + tanh(...)))``, the same with the half taken first (onnxscript's form)."""
    return op.Mul(x, op.Mul(op.Add(_tanh_inner(op, x), 1.0), 0.5))


def silu(op: Any, x: Any) -> Any:
    """``x * sigmoid(x)`` (SiLU, Swish with beta 1)."""
    return op.Mul(x, op.Sigmoid(x))


def matmul_add(op: Any, a: Any, b: Any, c: Any) -> Any:
    """``MatMul(a, b) + c`` (a Linear layer; the optimiser's guard asks for constant b and c)."""
    return op.Add(op.MatMul(a, b, _as="mm"), c)


def layer_norm(squared_by_pow: bool, divided: bool) -> Callable[..., Any]:
    """LayerNorm over the last axis, written out: the square as ``Pow(d, 2)`` or ``Mul(d, d)``,
    the normalisation as ``Div(d, std)`` or ``Mul(d, Reciprocal(std))``."""
    def pattern(op: Any, x: Any, scale: Any, epsilon: Any) -> Any:
        d = op.Sub(x, op.ReduceMean(x, [-1], keepdims=1))
        variance = op.ReduceMean(op.Pow(d, 2) if squared_by_pow else op.Mul(d, d), [-1], keepdims=1)
        std = op.Sqrt(op.Add(variance, epsilon))
        return op.Mul(op.Div(d, std) if divided else op.Mul(d, op.Reciprocal(std)), scale)

    pattern.__name__ = f"layer_norm_{'pow' if squared_by_pow else 'mul'}_{'div' if divided else 'reciprocal'}"
    return pattern


LAYER_NORM_PATTERNS = tuple(layer_norm(p, d) for p in (False, True) for d in (False, True))
