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

from amanda.exec.kernels.math_util import as_array, attr_str
from amanda.exec.kernels.registry import kernel

try:
    import ml_dtypes
except ImportError:  # pragma: no cover - ml_dtypes ships with onnx
    ml_dtypes = None  # type: ignore[assignment]

Attrs = Mapping[str, Any]

_NUMPY_TYPES: dict[int, Any] = {
    1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32,
    7: np.int64, 8: object, 9: np.bool_, 10: np.float16, 11: np.float64, 12: np.uint32,
    13: np.uint64, 14: np.complex64, 15: np.complex128,
}
_ML_TYPES: dict[int, str] = {
    16: "bfloat16", 17: "float8_e4m3fn", 18: "float8_e4m3fnuz", 19: "float8_e5m2",
    20: "float8_e5m2fnuz", 21: "uint4", 22: "int4", 23: "float4_e2m1fn",
    24: "float8_e8m0fnu", 25: "uint2", 26: "int2", 27: "float6_e2m3fn", 28: "float6_e3m2fn",
}
_FLOAT8 = frozenset({17, 18, 19, 20})
_E8M0 = 24


def onnx_dtype(code: int) -> np.dtype:
    """The numpy dtype of an ONNX ``TensorProto.DataType`` number.

    >>> onnx_dtype(7)
    dtype('int64')
    """
    if code in _NUMPY_TYPES:
        return np.dtype(_NUMPY_TYPES[code])
    if code in _ML_TYPES and ml_dtypes is not None:
        return np.dtype(getattr(ml_dtypes, _ML_TYPES[code]))
    raise ValueError(f"unsupported ONNX data type {code}")


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
    """ONNX Cast to the type numbered ``to``; float8 targets saturate unless ``saturate=0``."""
    saturate = bool(int(attrs.get("saturate", 1)))
    round_mode = attr_str(attrs, "round_mode", "up")
    with np.errstate(all="ignore"):
        return (_cast(x, int(attrs["to"]), saturate, round_mode),)


def _code_of(dtype: np.dtype) -> int:
    for code in (*_NUMPY_TYPES, *_ML_TYPES):
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
