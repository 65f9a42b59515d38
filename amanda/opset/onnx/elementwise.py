"""Elementwise arithmetic and math of the ONNX default domain.

Every result keeps the dtype ONNX specifies (the inputs' dtype, except for the
predicates IsNaN/IsInf), whatever numpy's own promotion would pick. Most ops are
rows of tables registered in a loop at the bottom.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from amanda.autodiff.node import Node, const, unbroadcast
from amanda.autodiff.rules_unary import unary_vjp
from amanda.build import ops
from amanda.exec.kernels.math_util import as_array, attr_str, erf, legacy_broadcast, wide
from amanda.exec.kernels.registry import kernel
from amanda.ops import define
from amanda.types.node import Node as TypedNode
from amanda.types.rules.elementwise import bool_like_first, broadcasting, legacy, same_as_first
from amanda.types.tensor_type import TensorType

Attrs = Mapping[str, Any]


def _same_dtype(fn: Callable[..., Any], x: np.ndarray, *rest: np.ndarray) -> tuple:
    return (as_array(fn(x, *rest)).astype(x.dtype, copy=False),)


def _in_wide(fn: Callable[..., Any]) -> Callable[[np.ndarray], Any]:
    """Run ``fn`` in float32 for narrow floats numpy has no loops for (bfloat16, float8)."""

    def run(x: np.ndarray) -> Any:
        return fn(x.astype(wide(x.dtype), copy=False))

    return run


# ---- unary ops: op type -> (numpy function, first opset) ----
# Later versions of these ops only widened the accepted types, so one kernel serves all.
_UNARY: dict[str, tuple[Callable[[np.ndarray], Any], int]] = {
    "Neg": (np.negative, 1),
    "Abs": (np.abs, 1),
    "Reciprocal": (_in_wide(np.reciprocal), 1),
    "Sqrt": (_in_wide(np.sqrt), 1),
    "Exp": (_in_wide(np.exp), 1),
    "Log": (_in_wide(np.log), 1),
    "Sin": (_in_wide(np.sin), 7),
    "Cos": (_in_wide(np.cos), 7),
    "Tan": (_in_wide(np.tan), 7),
    "Asin": (_in_wide(np.arcsin), 7),
    "Acos": (_in_wide(np.arccos), 7),
    "Atan": (_in_wide(np.arctan), 7),
    "Sinh": (_in_wide(np.sinh), 9),
    "Cosh": (_in_wide(np.cosh), 9),
    "Tanh": (_in_wide(np.tanh), 1),
    "Asinh": (_in_wide(np.arcsinh), 9),
    "Acosh": (_in_wide(np.arccosh), 9),
    "Atanh": (_in_wide(np.arctanh), 9),
    "Floor": (_in_wide(np.floor), 1),
    "Ceil": (_in_wide(np.ceil), 1),
    # numpy rounds half to even, as ONNX Round does
    "Round": (_in_wide(np.round), 11),
    "Sign": (np.sign, 9),
    "Erf": (erf, 9),
    "BitwiseNot": (np.invert, 18),
}


def _unary_kernel(op_type: str, fn: Callable[[np.ndarray], Any]) -> Callable[..., tuple]:
    def run(attrs: Attrs, x: np.ndarray) -> tuple:
        return _same_dtype(fn, x)

    run.__name__ = run.__qualname__ = f"{op_type.lower()}_kernel"
    run.__doc__ = f"ONNX {op_type}: elementwise, same dtype as the input."
    return run


# ---- binary ops with numpy broadcasting and the first input's dtype ----
def _div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Division; integers truncate toward zero, as C and the ONNX reference do."""
    if a.dtype.kind not in "iu":
        return np.divide(a, b)
    q = np.floor_divide(a, b)
    inexact = (np.remainder(a, b) != 0) & ((a < 0) != (b < 0))
    return q + inexact.astype(q.dtype)


_BINARY: dict[str, tuple[Callable[[np.ndarray, np.ndarray], Any], int]] = {
    "Add": (np.add, 1),
    "Sub": (np.subtract, 1),
    "Mul": (np.multiply, 1),
    "Div": (_div, 1),
    "BitwiseAnd": (np.bitwise_and, 18),
    "BitwiseOr": (np.bitwise_or, 18),
    "BitwiseXor": (np.bitwise_xor, 18),
}


def _binary_kernel(
    op_type: str, fn: Callable[[np.ndarray, np.ndarray], Any]
) -> Callable[..., tuple]:
    def run(attrs: Attrs, a: np.ndarray, b: np.ndarray) -> tuple:
        b = legacy_broadcast(attrs, a, b)
        if a.dtype.kind not in "biufc":  # bfloat16 and friends: compute in float32
            wa, wb = a.astype(np.float32), b.astype(np.float32)
            return (as_array(fn(wa, wb)).astype(a.dtype),)
        return _same_dtype(fn, a, b)

    run.__name__ = run.__qualname__ = f"{op_type.lower()}_kernel"
    run.__doc__ = f"ONNX {op_type}: elementwise with broadcasting, same dtype as the inputs."
    return run


# ---- variadic ops: numpy reduction over the inputs with broadcasting ----
_VARIADIC: dict[str, tuple[Callable[..., Any], int]] = {
    "Max": (np.maximum, 1),
    "Min": (np.minimum, 1),
    "Sum": (np.add, 1),
    "Mean": (np.add, 1),
}


def _variadic_kernel(op_type: str, fn: Callable[..., Any]) -> Callable[..., tuple]:
    def run(attrs: Attrs, *xs: np.ndarray) -> tuple:
        dtype = xs[0].dtype
        work = [x.astype(wide(dtype), copy=False) for x in xs]
        out = as_array(functools.reduce(fn, work))
        if op_type == "Mean":
            out = out / len(xs)
        return (as_array(out).astype(dtype, copy=False),)

    run.__name__ = run.__qualname__ = f"{op_type.lower()}_kernel"
    run.__doc__ = f"ONNX {op_type}: over any number of broadcast inputs."
    return run


for _op, (_unary, _since) in _UNARY.items():
    kernel(_op, since=_since)(_unary_kernel(_op, _unary))
for _op, (_binary, _since) in _BINARY.items():
    kernel(_op, since=_since)(_binary_kernel(_op, _binary))
for _op, (_variadic, _since) in _VARIADIC.items():
    kernel(_op, since=_since)(_variadic_kernel(_op, _variadic))


# ---- ops with attributes or non-uniform dtypes ----
# float exponents with a cheaper exact form; others go through np.power in the base's dtype
_POWERS: dict[float, Callable[[np.ndarray], np.ndarray]] = {
    1.0: lambda x: x.copy(),
    2.0: lambda x: x * x,
    3.0: lambda x: x * x * x,
    0.5: np.sqrt,
    -1.0: lambda x: 1.0 / x,
}


def _float_pow(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``x ** y`` for a float base, computed in the base's (widened) dtype, never float64 detours."""
    work = x.astype(wide(x.dtype), copy=False)
    if y.size == 1:
        fast = _POWERS.get(float(y.reshape(-1)[0]))
        if fast is not None:
            return np.asarray(fast(work)).reshape(np.broadcast_shapes(work.shape, y.shape))
    return np.power(work, y.astype(work.dtype, copy=False))


@kernel("Pow", since=1)
def pow_kernel(attrs: Attrs, x: np.ndarray, y: np.ndarray) -> tuple:
    """ONNX Pow: the result has the base's dtype, whatever the exponent's."""
    y = legacy_broadcast(attrs, x, y)
    if x.dtype.kind in "fc" or x.dtype.kind not in "biu":
        out = _float_pow(x, y)
    # exact integer powers; numpy refuses negative integer exponents, so those
    # (and float exponents of integer bases) go through float64 and are cast back
    elif y.dtype.kind in "iu" and not np.any(y < 0):
        out = np.power(x.astype(np.int64), y.astype(np.int64))
    else:
        out = np.power(x.astype(np.float64), y.astype(np.float64))
    return (as_array(out).astype(x.dtype, copy=False),)


def power(node: TypedNode) -> list:
    """The base's dtype, broadcast with the exponent."""
    shape = node.shape(0) if legacy(node) else node.broadcast(node.shape(0), node.shape(1))
    return [TensorType(node.dtype(0), shape)]


def pow_vjp(n: Node) -> list:
    """Pow: ``g*b*a^(b-1)`` and ``g*y*log(a)``."""
    g = n.grad()
    a, b = n.inputs
    out: list = [None, None]
    if n.need(0):
        bb = b if b.type.dtype == a.type.dtype else ops.Cast(b, to=np.dtype(a.type.dtype))
        out[0] = unbroadcast(ops.Mul(g, ops.Mul(bb, ops.Pow(a, ops.Sub(bb, const(1, a))))), a)
    if n.need(1):
        out[1] = unbroadcast(ops.Mul(ops.Mul(g, n.outputs[0]), ops.Log(a)), b)
    return out


define("Pow", type_rule=power, vjp=pow_vjp)


@kernel("Mod", since=10)
def mod_kernel(attrs: Attrs, a: np.ndarray, b: np.ndarray) -> tuple:
    """ONNX Mod: ``fmod=0`` takes the divisor's sign (integers only), ``fmod=1`` the dividend's."""
    fn = np.fmod if int(attrs.get("fmod", 0)) else np.mod
    return _same_dtype(fn, a, b)


def mod_vjp(n: Node) -> list:
    """Mod of floats (``fmod`` or numpy's): ``y = a - b * q`` with ``q = (a - y) / b`` constant
    almost everywhere: ``g`` and ``-g * q``."""
    a, b = n.given(0, 1)
    g = n.grad()
    q = ops.Div(ops.Sub(a, n.outputs[0]), b)
    return [unbroadcast(g, a) if n.need(0) else None, unbroadcast(ops.Neg(ops.Mul(g, q)), b) if n.need(1) else None]


define("Mod", type_rule=broadcasting, vjp=mod_vjp)


@kernel("BitShift", since=11)
def bitshift_kernel(attrs: Attrs, x: np.ndarray, y: np.ndarray) -> tuple:
    """ONNX BitShift of unsigned integers; ``direction`` is LEFT or RIGHT."""
    direction = attr_str(attrs, "direction", "").upper()
    fn = np.left_shift if direction == "LEFT" else np.right_shift
    return _same_dtype(fn, x, y.astype(x.dtype, copy=False))


define("BitShift", type_rule=broadcasting, no_gradient="a bit-level op (integer bits)")


@kernel("IsNaN", since=9)
def isnan_kernel(attrs: Attrs, x: np.ndarray) -> tuple:
    """ONNX IsNaN: a bool tensor."""
    return (as_array(np.isnan(x.astype(wide(x.dtype), copy=False))),)


define("IsNaN", type_rule=bool_like_first, no_gradient="a comparison (boolean output)")


@kernel("IsInf", since=10)
def isinf_kernel(attrs: Attrs, x: np.ndarray) -> tuple:
    """ONNX IsInf: a bool tensor, each sign selectable with ``detect_negative/positive``."""
    x = x.astype(wide(x.dtype), copy=False)
    neg = bool(int(attrs.get("detect_negative", 1)))
    pos = bool(int(attrs.get("detect_positive", 1)))
    out = np.isinf(x) & ((neg & (x < 0)) | (pos & (x > 0)))
    return (as_array(out),)


define("IsInf", type_rule=bool_like_first, no_gradient="a comparison (boolean output)")


# ---- type rules and gradients shared by several ops of this family ----


def add_vjp(n: Node) -> list:
    """Add (and Sum, of any number of inputs): the gradient passes to every input, summed over
    broadcast axes."""
    g = n.grad()
    return [unbroadcast(g, x) if n.need(i) else None for i, x in enumerate(n.inputs)]


def variadic_vjp(n: Node) -> list:
    """Mean: the gradient divided by the input count; Max, Min: to the inputs equal to the
    output (shared evenly between ties), each summed over its broadcast axes."""
    g = n.grad()
    if n.op.type == "Mean":
        share = ops.Div(g, const(len(n.inputs), g))
        return [unbroadcast(share, x) if n.need(i) else None for i, x in enumerate(n.inputs)]
    if n.op.type not in ("Max", "Min"):
        raise n.fail("Mean, Max or Min", str(n.op.type))
    y = n.outputs[0]
    hits = [ops.Cast(ops.Equal(x, y), to=np.dtype(g.type.dtype)) for x in [n.given(i) for i in range(len(n.inputs))]]
    ties = hits[0] if len(hits) == 1 else ops.Sum(*hits)
    share = ops.Div(g, ties)
    return [unbroadcast(ops.Mul(share, hit), x) if n.need(i) else None
            for i, (x, hit) in enumerate(zip(n.inputs, hits))]


def sub_vjp(n: Node) -> list:
    """Sub: ``g`` and ``-g``."""
    g = n.grad()
    a, b = n.inputs
    return [unbroadcast(g, a) if n.need(0) else None, unbroadcast(ops.Neg(g), b) if n.need(1) else None]


def mul_vjp(n: Node) -> list:
    """Mul: ``g*b`` and ``g*a``."""
    g = n.grad()
    a, b = n.inputs
    return [unbroadcast(ops.Mul(g, b), a) if n.need(0) else None,
            unbroadcast(ops.Mul(g, a), b) if n.need(1) else None]


def div_vjp(n: Node) -> list:
    """Div: ``g/b`` and ``-g*y/b``."""
    g = n.grad()
    a, b = n.inputs
    y = n.outputs[0]
    return [unbroadcast(ops.Div(g, b), a) if n.need(0) else None,
            unbroadcast(ops.Neg(ops.Div(ops.Mul(g, y), b)), b) if n.need(1) else None]


# each op's type rule and gradient, beside the kernels registered above
define("Abs", type_rule=same_as_first, vjp=unary_vjp)
define("Acos", type_rule=same_as_first, vjp=unary_vjp)
define("Acosh", type_rule=same_as_first, vjp=unary_vjp)
define("Add", type_rule=broadcasting, vjp=add_vjp)
define("Asin", type_rule=same_as_first, vjp=unary_vjp)
define("Asinh", type_rule=same_as_first, vjp=unary_vjp)
define("Atan", type_rule=same_as_first, vjp=unary_vjp)
define("Atanh", type_rule=same_as_first, vjp=unary_vjp)
define("BitwiseAnd", type_rule=broadcasting, no_gradient="a bit-level op (integer bits)")
define("BitwiseNot", type_rule=same_as_first, no_gradient="a bit-level op (integer bits)")
define("BitwiseOr", type_rule=broadcasting, no_gradient="a bit-level op (integer bits)")
define("BitwiseXor", type_rule=broadcasting, no_gradient="a bit-level op (integer bits)")
define("Ceil", type_rule=same_as_first, vjp=unary_vjp)
define("Cos", type_rule=same_as_first, vjp=unary_vjp)
define("Cosh", type_rule=same_as_first, vjp=unary_vjp)
define("Div", type_rule=broadcasting, vjp=div_vjp)
define("Erf", type_rule=same_as_first, vjp=unary_vjp)
define("Exp", type_rule=same_as_first, vjp=unary_vjp)
define("Floor", type_rule=same_as_first, vjp=unary_vjp)
define("Log", type_rule=same_as_first, vjp=unary_vjp)
define("Max", type_rule=broadcasting, vjp=variadic_vjp)
define("Mean", type_rule=broadcasting, vjp=variadic_vjp)
define("Min", type_rule=broadcasting, vjp=variadic_vjp)
define("Mul", type_rule=broadcasting, vjp=mul_vjp)
define("Neg", type_rule=same_as_first, vjp=unary_vjp)
define("Reciprocal", type_rule=same_as_first, vjp=unary_vjp)
define("Round", type_rule=same_as_first, vjp=unary_vjp)
define("Sign", type_rule=same_as_first, vjp=unary_vjp)
define("Sin", type_rule=same_as_first, vjp=unary_vjp)
define("Sinh", type_rule=same_as_first, vjp=unary_vjp)
define("Sqrt", type_rule=same_as_first, vjp=unary_vjp)
define("Sub", type_rule=broadcasting, vjp=sub_vjp)
define("Sum", type_rule=broadcasting, vjp=add_vjp)
define("Tan", type_rule=same_as_first, vjp=unary_vjp)
define("Tanh", type_rule=same_as_first, vjp=unary_vjp)
