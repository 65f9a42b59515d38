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

from amanda.exec.kernels.math_util import as_array, attr_str, erf, legacy_broadcast, wide
from amanda.exec.kernels.registry import kernel

Attrs = Mapping[str, Any]


def _same_dtype(fn: Callable[..., Any], x: np.ndarray, *rest: np.ndarray) -> tuple:
    with np.errstate(all="ignore"):
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
        with np.errstate(all="ignore"):
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
    with np.errstate(all="ignore"):
        if x.dtype.kind in "fc" or x.dtype.kind not in "biu":
            out = _float_pow(x, y)
        # exact integer powers; numpy refuses negative integer exponents, so those
        # (and float exponents of integer bases) go through float64 and are cast back
        elif y.dtype.kind in "iu" and not np.any(y < 0):
            out = np.power(x.astype(np.int64), y.astype(np.int64))
        else:
            out = np.power(x.astype(np.float64), y.astype(np.float64))
    return (as_array(out).astype(x.dtype, copy=False),)


@kernel("Mod", since=10)
def mod_kernel(attrs: Attrs, a: np.ndarray, b: np.ndarray) -> tuple:
    """ONNX Mod: ``fmod=0`` takes the divisor's sign (integers only), ``fmod=1`` the dividend's."""
    fn = np.fmod if int(attrs.get("fmod", 0)) else np.mod
    return _same_dtype(fn, a, b)


@kernel("BitShift", since=11)
def bitshift_kernel(attrs: Attrs, x: np.ndarray, y: np.ndarray) -> tuple:
    """ONNX BitShift of unsigned integers; ``direction`` is LEFT or RIGHT."""
    direction = attr_str(attrs, "direction", "").upper()
    fn = np.left_shift if direction == "LEFT" else np.right_shift
    return _same_dtype(fn, x, y.astype(x.dtype, copy=False))


@kernel("IsNaN", since=9)
def isnan_kernel(attrs: Attrs, x: np.ndarray) -> tuple:
    """ONNX IsNaN: a bool tensor."""
    return (as_array(np.isnan(x.astype(wide(x.dtype), copy=False))),)


@kernel("IsInf", since=10)
def isinf_kernel(attrs: Attrs, x: np.ndarray) -> tuple:
    """ONNX IsInf: a bool tensor, each sign selectable with ``detect_negative/positive``."""
    x = x.astype(wide(x.dtype), copy=False)
    neg = bool(int(attrs.get("detect_negative", 1)))
    pos = bool(int(attrs.get("detect_positive", 1)))
    out = np.isinf(x) & ((neg & (x < 0)) | (pos & (x > 0)))
    return (as_array(out),)
