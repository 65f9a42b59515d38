"""Logical ops, comparisons and Where of the ONNX default domain.

Comparisons and logical ops return bool tensors with numpy broadcasting.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from amanda.autodiff.node import Node, const, unbroadcast
from amanda.build import ops
from amanda.exec.kernels.math_util import as_array, legacy_broadcast, wide
from amanda.exec.kernels.registry import kernel
from amanda.ops import define
from amanda.types.node import Node as TypedNode
from amanda.types.rules.elementwise import bool_like_first, broadcasting, dtype_of_all, legacy
from amanda.types.tensor_type import TensorType

Attrs = Mapping[str, Any]

# op type -> (numpy function, first opset); later versions only widened the types
_BOOL_BINARY: dict[str, tuple[Callable[[Any, Any], Any], int]] = {
    "And": (np.logical_and, 1),
    "Or": (np.logical_or, 1),
    "Xor": (np.logical_xor, 1),
    "Equal": (np.equal, 1),
    "Less": (np.less, 1),
    "Greater": (np.greater, 1),
    "LessOrEqual": (np.less_equal, 12),
    "GreaterOrEqual": (np.greater_equal, 12),
}


def _comparable(x: np.ndarray) -> np.ndarray:
    # bfloat16/float8 compare exactly in float32; strings stay objects
    return x if x.dtype.kind in "biufcOUS" else x.astype(wide(x.dtype))


def _bool_kernel(op_type: str, fn: Callable[[Any, Any], Any]) -> Callable[..., tuple]:
    def run(attrs: Attrs, a: np.ndarray, b: np.ndarray) -> tuple:
        b = legacy_broadcast(attrs, a, b)
        return (as_array(fn(_comparable(a), _comparable(b)), dtype=np.bool_),)

    run.__name__ = run.__qualname__ = f"{op_type.lower()}_kernel"
    run.__doc__ = f"ONNX {op_type}: a bool tensor, with broadcasting."
    return run


for _op, (_fn, _since) in _BOOL_BINARY.items():
    kernel(_op, since=_since)(_bool_kernel(_op, _fn))


@kernel("Not", since=1)
def not_kernel(attrs: Attrs, x: np.ndarray) -> tuple:
    """ONNX Not: logical negation of a bool tensor."""
    return (as_array(np.logical_not(x)),)


define("Not", type_rule=bool_like_first, no_gradient="a logical op (boolean output)")


@kernel("Where", since=9)
def where_kernel(attrs: Attrs, condition: np.ndarray, x: np.ndarray, y: np.ndarray) -> tuple:
    """ONNX Where: ``x`` where ``condition`` holds, else ``y``, all three broadcast.

    A large float tensor against a scalar (ReLU's and Where's gradients) is selected by its
    bits, without branches: ``np.where`` branches on each element, and on a condition that
    flips unpredictably (half the units active) it is several times slower (the digits CNN's
    (32, 16, 8, 8) gradient: 110 -> 30 µs). The same bits either way."""
    condition = condition.astype(bool, copy=False)
    fast = _bitwise_where(condition, x, y) if condition.size >= _BITWISE_WHERE_SIZE else None
    out = np.where(condition, x, y) if fast is None else fast
    return (as_array(out).astype(x.dtype, copy=False),)


_BITWISE_WHERE_SIZE = 4096  # below this np.where's one pass beats three


def _bitwise_where(condition: np.ndarray, x: Any, y: Any) -> np.ndarray | None:
    """``np.where(condition, x, y)`` as ``x_bits & mask | y_bits & ~mask`` when one of ``x`` and
    ``y`` is a float scalar and the other a float tensor of the full shape; None otherwise."""
    x, y = as_array(x), as_array(y)
    if x.ndim == 0 and y.ndim > 0:
        return _bitwise_where(np.logical_not(condition), y, x)
    if y.ndim != 0 or x.dtype != y.dtype or x.dtype.kind != "f" or x.shape != condition.shape:
        return None
    bits = np.dtype(f"u{x.dtype.itemsize}")
    mask = np.subtract(bits.type(0), condition, dtype=bits)  # all ones where the condition holds
    out = np.bitwise_and(x.view(bits), mask)
    other = y.view(bits)
    if other != 0:  # y is not +0.0
        np.bitwise_or(out, np.bitwise_and(np.invert(mask, out=mask), other, out=mask), out=out)
    return out.view(x.dtype)


def where(node: TypedNode) -> list:
    """X and Y share a dtype; the condition is bool; all three broadcast."""
    if node.dtype(0) not in (None, "bool"):
        raise node.fail("a bool condition", str(node.dtype(0)))
    dtype = dtype_of_all(node, [1, 2])
    return [TensorType(dtype, node.broadcast(node.shape(0), node.shape(1), node.shape(2)))]


def where_vjp(n: Node) -> list:
    """Where: the gradient to the chosen side, zeros to the other."""
    cond, a, b = n.given(0, 1, 2)
    g = n.grad()
    zero = const(0, g)
    return [None, unbroadcast(ops.Where(cond, g, zero), a) if n.need(1) else None,
            unbroadcast(ops.Where(cond, zero, g), b) if n.need(2) else None]


define("Where", type_rule=where, vjp=where_vjp)


# ---- type rules and gradients shared by several ops of this family ----


def comparison(node: TypedNode) -> list:
    """A bool tensor of the broadcast shape of two inputs of one dtype."""
    dtype_of_all(node, [0, 1])
    shape = node.shape(0) if legacy(node) else node.broadcast(node.shape(0), node.shape(1))
    return [TensorType("bool", shape)]


# each op's type rule and gradient, beside the kernels registered above
define("And", type_rule=broadcasting, no_gradient="a logical op (boolean output)")
define("Equal", type_rule=comparison, no_gradient="a comparison (boolean output)")
define("Greater", type_rule=comparison, no_gradient="a comparison (boolean output)")
define("GreaterOrEqual", type_rule=comparison, no_gradient="a comparison (boolean output)")
define("Less", type_rule=comparison, no_gradient="a comparison (boolean output)")
define("LessOrEqual", type_rule=comparison, no_gradient="a comparison (boolean output)")
define("Or", type_rule=broadcasting, no_gradient="a logical op (boolean output)")
define("Xor", type_rule=broadcasting, no_gradient="a logical op (boolean output)")
