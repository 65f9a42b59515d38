"""ONNX ``TensorProto.DataType`` numbers as numpy dtypes: shared by the kernels that take a dtype
attribute (Cast, the random ops, quantisation, windows, attention).

Narrow types (bfloat16, float8, float4, int4, int2 ...) are ml_dtypes types, the same numpy
dtypes ``onnx.numpy_helper`` produces; they are optional, so a model using them needs ml_dtypes
installed.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["ML_TYPES", "NUMPY_TYPES", "ml_dtypes", "onnx_dtype"]

try:
    import ml_dtypes
except ImportError:  # pragma: no cover - ml_dtypes ships with onnx
    ml_dtypes = None  # type: ignore[assignment]

NUMPY_TYPES: dict[int, Any] = {
    1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32,
    7: np.int64, 8: object, 9: np.bool_, 10: np.float16, 11: np.float64, 12: np.uint32,
    13: np.uint64, 14: np.complex64, 15: np.complex128,
}
ML_TYPES: dict[int, str] = {
    16: "bfloat16", 17: "float8_e4m3fn", 18: "float8_e4m3fnuz", 19: "float8_e5m2",
    20: "float8_e5m2fnuz", 21: "uint4", 22: "int4", 23: "float4_e2m1fn",
    24: "float8_e8m0fnu", 25: "uint2", 26: "int2", 27: "float6_e2m3fn", 28: "float6_e3m2fn",
}


def onnx_dtype(code: int) -> np.dtype:
    """The numpy dtype of an ONNX ``TensorProto.DataType`` number.

    >>> onnx_dtype(7)
    dtype('int64')
    """
    found = _DTYPES.get(code)
    if found is not None:
        return found
    if code in NUMPY_TYPES:
        found = np.dtype(NUMPY_TYPES[code])
    elif code in ML_TYPES and ml_dtypes is not None:
        found = np.dtype(getattr(ml_dtypes, ML_TYPES[code]))
    else:
        raise ValueError(f"unsupported ONNX data type {code}")
    _DTYPES[code] = found  # a Cast asks on every run
    return found


_DTYPES: dict[int, np.dtype] = {}
