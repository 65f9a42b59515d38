"""Cast and CastLike of the ONNX default domain.

The ``to`` attribute is an ONNX ``TensorProto.DataType`` number. Narrow types
(bfloat16, float8, float4, int4, int2 ...) are ml_dtypes types, the same numpy
dtypes ``onnx.numpy_helper`` produces; they are optional, so a model using
them needs ml_dtypes installed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from amanda.autodiff.node import Node as GradNode
from amanda.autodiff.rules_shape import rest
from amanda.build import ops
from amanda.exec.kernels.math_util import as_array, attr_str
from amanda.exec.kernels.onnx_dtypes import ML_TYPES, NUMPY_TYPES, ml_dtypes, onnx_dtype
from amanda.exec.kernels.registry import kernel
from amanda.namespaces.attr_types import ONNX_DTYPES as ONNX_TYPE_NAMES
from amanda.ops import define
from amanda.types.node import Node, Partial
from amanda.types.rules.generators import dtype_from_attr
from amanda.types.tensor_type import ONNX_DTYPES, TensorType

Attrs = Mapping[str, Any]

_FLOAT8 = frozenset({17, 18, 19, 20})
_E8M0 = 24


def _to_e8m0(x: np.ndarray, saturate: bool, round_mode: str) -> np.ndarray:
    """float -> float8_e8m0 (a bare exponent), rounding as ONNX's ``round_mode`` says."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    exponent = ((bits >> 23) & 0xFF).astype(np.uint16)
    special = exponent == 0xFF  # NaN and inf keep the all-ones exponent
    if round_mode == "up":
        up = ((bits & 0x7FFFFF) > 0) & ~special
    elif round_mode == "nearest":
        guard = (bits & 0x400000) > 0
        rest = (bits & 0x3FFFFF) > 0
        up = guard & (rest | (exponent > 0)) & ~special
    else:  # "down": truncate the mantissa
        up = np.zeros_like(special)
    if saturate:
        up &= exponent != 0xFE
    out = np.where(special, 0xFF, exponent + up).astype(np.uint8)
    return out.view(ml_dtypes.float8_e8m0fnu)


def _cast(x: np.ndarray, code: int, saturate: bool, round_mode: str) -> np.ndarray:
    dtype = onnx_dtype(code)
    if dtype == object:  # noqa: E721  # a numpy dtype compared with its type code
        # numpy writes floats as their shortest round-tripping repr
        return x.astype(str).astype(object)
    if x.dtype == object or x.dtype.kind in "US":
        text = x.astype(str)
        # integers parse exactly; floats (with "NaN", "INF" ...) parse through float64
        return text.astype(dtype) if dtype.kind in "iu" else text.astype(np.float64).astype(dtype)
    if code == _E8M0:
        return _to_e8m0(x, saturate, round_mode)
    if code in _FLOAT8 and saturate and x.dtype.kind in "fV":
        info = ml_dtypes.finfo(dtype)
        wide = x.astype(np.float32)
        return np.clip(wide, float(info.min), float(info.max)).astype(dtype)
    return as_array(x.astype(dtype))


@kernel("Cast", since=1)
def cast_kernel(attrs: Attrs, x: np.ndarray) -> tuple:
    """ONNX Cast to the type numbered ``to``; float8 targets saturate unless ``saturate=0``.
    A cast to the input's own numeric type returns the input, as Identity does (no copy: Cast
    is not ``fresh``, so no later op writes into its output)."""
    if type(x) is np.ndarray and x.dtype == onnx_dtype(int(attrs["to"])) and x.dtype.kind not in "OUS":
        return (x,)
    saturate = bool(int(attrs.get("saturate", 1)))
    round_mode = attr_str(attrs, "round_mode", "up")
    return (_cast(x, int(attrs["to"]), saturate, round_mode),)


def _code_of(dtype: np.dtype) -> int:
    for code in (*NUMPY_TYPES, *ML_TYPES):
        try:
            if onnx_dtype(code) == dtype:
                return code
        except ValueError:
            continue
    raise ValueError(f"no ONNX data type for {dtype}")


@kernel("CastLike", since=15)
def castlike_kernel(attrs: Attrs, x: np.ndarray, target: np.ndarray) -> tuple:
    """ONNX CastLike: Cast to the dtype of ``target``."""
    return cast_kernel({**attrs, "to": _code_of(target.dtype)}, x)


@kernel("BitCast", since=26)
def bitcast_kernel(attrs: Attrs, x: np.ndarray) -> tuple:
    """ONNX BitCast: the same bytes read as the ``to`` type, which must have the same width."""
    target = onnx_dtype(int(attrs["to"]))
    if target.itemsize != x.dtype.itemsize:
        raise ValueError(f"BitCast needs types of one width, found {x.dtype} and {target}")
    return (np.ascontiguousarray(x).view(target).reshape(x.shape),)


def bitcast(node: Node) -> list:
    """The input's shape in ``to``."""
    return [TensorType(dtype_from_attr(node, "to", 1), node.shape(0))]


define("BitCast", type_rule=bitcast, no_gradient="a bit-level op (integer bits)")


# ---- type rules and gradients shared by several ops of this family ----


def cast(node: Node) -> list:
    """The attribute ``to`` gives the dtype; integer shape values pass through."""
    code = node.attr("to", 0)
    if isinstance(code, str):  # Cast-1 names the type ("FLOAT")
        code = {name: number for number, name in ONNX_TYPE_NAMES.items()}.get(code.upper(), 0)
    to = ONNX_DTYPES.get(int(code))
    value = node.value(0)
    if isinstance(value, Partial) and to in ("int64", "int32"):
        node.set_value(0, value)
    return [TensorType(to, node.shape(0))]


def cast_like(node: Node) -> list:
    """The first input's shape with the second input's dtype."""
    return [TensorType(node.dtype(1), node.shape(0))]


def cast_vjp(n: GradNode) -> list:
    """Cast, CastLike: the gradient cast back to the input's dtype (none for non-float inputs)."""
    x = n.given(0)
    if x.type.dtype not in ("float16", "float32", "float64", "bfloat16"):
        return rest(n, None)
    return rest(n, ops.Cast(n.grad(), to=np.dtype(x.type.dtype)))


# each op's type rule and gradient, beside the kernels registered above
define("Cast", type_rule=cast, vjp=cast_vjp)
define("CastLike", type_rule=cast_like, vjp=cast_vjp)
