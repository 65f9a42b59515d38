"""Dtype names: the ONNX element types by number and name, the canonical name of any dtype,
and why a dtype a user gave is not one amanda accepts (``'float'`` and ``'int'`` are refused as
ambiguous, never guessed).

>>> dtype_name(np.float32), ONNX_DTYPES[1], dtype_problem("float32") is None
('float32', 'float32', True)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from amanda.containers.arguments import brief
from amanda.errors import suggest

__all__ = ["ONNX_DTYPES", "VALID_DTYPES", "dtype_name", "dtype_problem"]


def dtype_name(dtype: Any) -> str | None:
    """The canonical name of a dtype (``np.float32`` -> ``'float32'``); None stays None.

    >>> dtype_name(np.float32), dtype_name("string"), dtype_name(None)
    ('float32', 'string', None)
    """
    if dtype is None or (isinstance(dtype, str) and dtype in _NAMES):
        return dtype
    try:
        return _DTYPE_NAMES[dtype]
    except (KeyError, TypeError):
        pass
    try:
        name = np.dtype(dtype).name  # numpy computes .name in Python, slowly: memoise it
    except (TypeError, ValueError, RecursionError):  # ValueError: a list numpy reads as a record dtype
        return dtype if isinstance(dtype, str) else brief(dtype)
    name = "string" if name.startswith(("str", "bytes", "object")) else name
    try:
        _DTYPE_NAMES[dtype] = name
    except TypeError:
        pass
    return name


_DTYPE_NAMES: dict[Any, str] = {}


ONNX_DTYPES: dict[int, str] = dict(enumerate([
    "?", "float32", "uint8", "int8", "uint16", "int16", "int32", "int64", "string", "bool",
    "float16", "float64", "uint32", "uint64", "complex64", "complex128", "bfloat16",
    "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "uint4", "int4",
    "float4_e2m1fn", "float8_e8m0fnu", "uint2", "int2", "float6_e2m3fn", "float6_e3m2fn",
]))
"""ONNX ``TensorProto.DataType`` numbers -> the dtype names port attributes use."""
del ONNX_DTYPES[0]
_NAMES = frozenset(ONNX_DTYPES.values())
VALID_DTYPES: tuple[str, ...] = tuple(sorted(_NAMES))
"""Every dtype name a port, ``Input`` or a document may give, sorted."""

# names that numpy reads as one width and other frameworks as another: refused, never guessed
_AMBIGUOUS = {
    "float": "float32 (torch.float, tf.float32, ONNX FLOAT) or float64 (numpy's float)",
    "int": "int32 (ONNX INT32, C's int) or int64 (numpy's and torch's default int)",
    "uint": "uint32 or uint64",
    "complex": "complex64 or complex128",
}


def dtype_problem(dtype: Any) -> tuple[str, str, str] | None:
    """Why ``dtype`` is not a dtype amanda accepts, as ``(expected, found, hint)``; None if it is.

    A name must be one of :data:`VALID_DTYPES` exactly; numpy dtypes and scalar types are read by
    their name. ``'float'`` and ``'int'`` (and Python's ``float`` and ``int``) are refused as
    ambiguous: numpy reads them as 64 bits, torch and ONNX users mean 32.

    >>> dtype_problem("float32") is None, dtype_problem(np.float16) is None
    (True, True)
    >>> dtype_problem("float")[2]
    "'float' is ambiguous: float32 (torch.float, tf.float32, ONNX FLOAT) or float64 (numpy's float)"
    >>> dtype_problem("boolean")[2]
    "did you mean 'bool'?"
    """
    expected = f"a dtype name ({', '.join(VALID_DTYPES)})"
    if isinstance(dtype, str):
        if dtype in _NAMES:
            return None
        if dtype in _AMBIGUOUS:
            return expected, repr(dtype), f"{dtype!r} is ambiguous: {_AMBIGUOUS[dtype]}"
        try:  # numpy's other spellings ('double', 'f4'): name the one amanda uses
            spelled = dtype_name(np.dtype(dtype))
        except (TypeError, ValueError):
            spelled = None
        if spelled in _NAMES:
            return expected, repr(dtype), f"write {spelled!r}"
        return expected, repr(dtype)[:80], suggest(dtype, VALID_DTYPES)
    if dtype is float or dtype is int or dtype is complex:
        name = dtype.__name__
        return expected, name, f"Python's {name} is ambiguous: {_AMBIGUOUS[name]}"
    if isinstance(dtype, (np.dtype, type)):
        return None if dtype_name(dtype) in _NAMES else (expected, repr(dtype)[:80], "")
    return expected, repr(dtype)[:80], ""
