"""Attribute types: the names schemas use, value checks, and plain-data forms of values.

The type names follow ONNX's ``AttrType`` in lower case (``int``, ``floats``, ``tensor``,
``sparse_tensor``, ``type_proto`` …) plus ``bool``, ``dtype``, ``shape`` and their plurals for
frameworks that have them (TensorFlow), and ``func``/``any`` for values amanda does not check.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from amanda.containers.refs import AttrRef

__all__ = [
    "ATTR_TYPES",
    "ONNX_DTYPES",
    "attr_value_problem",
    "coerce_default",
    "tensor_from_data",
    "tensor_to_data",
    "value_key",
]

_SCALAR_TYPES = ("int", "float", "string", "bool", "dtype", "shape", "tensor", "graph",
                 "sparse_tensor", "type_proto", "func")
ATTR_TYPES: frozenset[str] = frozenset(
    {*_SCALAR_TYPES, *(t + "s" for t in _SCALAR_TYPES), "any"}
)

#: ONNX ``TensorProto.DataType`` values (onnx 1.23) by enum number; 0 (UNDEFINED) is not a dtype.
ONNX_DTYPES: Mapping[int, str] = {
    1: "FLOAT", 2: "UINT8", 3: "INT8", 4: "UINT16", 5: "INT16", 6: "INT32", 7: "INT64",
    8: "STRING", 9: "BOOL", 10: "FLOAT16", 11: "DOUBLE", 12: "UINT32", 13: "UINT64",
    14: "COMPLEX64", 15: "COMPLEX128", 16: "BFLOAT16", 17: "FLOAT8E4M3FN", 18: "FLOAT8E4M3FNUZ",
    19: "FLOAT8E5M2", 20: "FLOAT8E5M2FNUZ", 21: "UINT4", 22: "INT4", 23: "FLOAT4E2M1",
    24: "FLOAT8E8M0", 25: "UINT2", 26: "INT2", 27: "FLOAT6E2M3", 28: "FLOAT6E3M2",
}

#: dtype names numpy lacks: bfloat16, strings, and TensorFlow's handles and quantized types
_OTHER_DTYPES = frozenset({"bfloat16", "string", "resource", "variant", "qint8", "quint8", "qint16",
                           "quint16", "qint32"})

# Types whose values amanda does not look into (other containers, protos, functions).
_UNCHECKED = frozenset({"graph", "graphs", "sparse_tensor", "sparse_tensors", "type_proto",
                        "type_protos", "func", "funcs", "any"})


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _is_float(value: Any) -> bool:
    return _is_int(value) or isinstance(value, (float, np.floating))


def _is_dtype(value: Any) -> bool:
    """A numpy dtype (object, type, canonical name), an ONNX enum name, or an ONNX enum int."""
    if _is_int(value):
        return int(value) in ONNX_DTYPES
    if isinstance(value, np.dtype):
        return True
    if isinstance(value, type) and issubclass(value, np.generic):
        return True
    if isinstance(value, str):
        if value in ONNX_DTYPES.values() or value in _OTHER_DTYPES or (
                value.endswith("_ref") and _is_dtype(value[:-4])):
            return True  # ONNX enum names such as 'FLOAT', dtypes numpy lacks, TF's ref types
        try:
            return np.dtype(value).name == value
        except TypeError:
            return False
    return False


def _is_dim(value: Any) -> bool:
    return value is None or isinstance(value, str) or _is_int(value)


def _is_seq(value: Any) -> bool:
    if isinstance(value, np.ndarray):
        return value.ndim == 1
    return isinstance(value, (list, tuple))


_ELEMENT_CHECKS = {
    "int": (_is_int, "an int"),
    "float": (_is_float, "a number"),
    "string": (lambda v: isinstance(v, (str, bytes)), "a string"),
    "bool": (lambda v: isinstance(v, (bool, np.bool_)), "a bool"),
    "dtype": (_is_dtype, "a numpy dtype name or an ONNX TensorProto data type int"),
}


def _shape_problem(value: Any) -> str | None:
    if not _is_seq(value) or not all(_is_dim(d) for d in value):
        return "a shape (a list of ints, names or nulls)"
    return None


def _tensor_problem(value: Any) -> str | None:
    if isinstance(value, (np.ndarray, np.generic)) or _is_float(value) or \
            isinstance(value, (bool, list, tuple)):
        try:
            np.asarray(value)
        except ValueError:
            return "a tensor (a numpy array or nested lists of numbers)"
        return None
    return "a tensor (a numpy array or nested lists of numbers)"


def _element_problem(type_: str, value: Any) -> str | None:
    if type_ in _ELEMENT_CHECKS:
        check, text = _ELEMENT_CHECKS[type_]
        return None if check(value) else text
    if type_ == "shape":
        return _shape_problem(value)
    if type_ == "tensor":
        return _tensor_problem(value)
    return None


def attr_value_problem(type_: str, value: Any) -> str | None:
    """What a value of attribute type ``type_`` should be, or None when ``value`` fits.

    >>> attr_value_problem("int", 3) is None
    True
    >>> attr_value_problem("ints", [1, "2"])
    'a list of ints'
    >>> attr_value_problem("dtype", "float32"), attr_value_problem("dtype", 1)
    (None, None)
    """
    if isinstance(value, AttrRef):  # a function body's reference: its declared type must fit
        return None if value.type in ("", "undefined", type_) else f"a reference of type {type_}"
    if type_ in _UNCHECKED:
        return None
    if type_ in _SCALAR_TYPES:
        return _element_problem(type_, value)
    element = type_[:-1]
    if element in ("tensor", "shape"):
        plural = f"a list of {element}s"
    else:
        plural = f"a list of {'strings' if element == 'string' else element + 's'}"
    if not _is_seq(value) or isinstance(value, (str, bytes)):
        return plural
    if any(_element_problem(element, item) is not None for item in value):
        return plural
    return None


def _coerce_element(type_: str, value: Any) -> Any:
    if type_ == "float" and _is_float(value) and not isinstance(value, float):
        return float(value)
    if type_ == "int" and _is_int(value):
        return int(value)
    if type_ == "string" and isinstance(value, bytes):
        return value.decode("utf-8")
    if type_ == "bool" and isinstance(value, np.bool_):
        return bool(value)
    if type_ == "tensor" and not isinstance(value, np.ndarray):
        if isinstance(value, Mapping):
            return tensor_from_data(value)
        value = np.asarray(value)
    if type_ == "tensor":
        value = np.array(value, copy=True)
        value.setflags(write=False)
    if type_ == "shape" and _is_seq(value):
        return tuple(int(d) if _is_int(d) else d for d in value)
    return value


def coerce_default(type_: str, value: Any) -> Any:
    """Bring a default value to its canonical form for ``type_`` (lists become tuples).

    >>> coerce_default("floats", [1, 2.5])
    (1.0, 2.5)
    >>> coerce_default("string", b"NOTSET")
    'NOTSET'
    """
    if value is None or type_ in _UNCHECKED:
        return value
    if type_ in _SCALAR_TYPES:
        return _coerce_element(type_, value)
    if _is_seq(value):
        if isinstance(value, np.ndarray):
            value = value.tolist()
        return tuple(_coerce_element(type_[:-1], item) for item in value)
    return value


def tensor_to_data(array: np.ndarray) -> dict[str, Any]:
    """The JSON/YAML-friendly form of a tensor: ``{dtype, shape, values}``.

    >>> tensor_to_data(np.array([1.5, 2.0], dtype=np.float32))
    {'dtype': 'float32', 'shape': [2], 'values': [1.5, 2.0]}
    """
    array = np.asarray(array)
    values = array.ravel().tolist()
    if array.dtype.kind in "SU":
        values = [v.decode("utf-8") if isinstance(v, bytes) else v for v in values]
    dtype = "string" if array.dtype.kind in "SUO" else array.dtype.name
    return {"dtype": dtype, "shape": list(array.shape), "values": values}


def tensor_from_data(data: Mapping[str, Any]) -> np.ndarray:
    """Rebuild a read-only array from :func:`tensor_to_data`'s form.

    >>> tensor_from_data({"dtype": "int64", "shape": [1, 2], "values": [3, 4]}).tolist()
    [[3, 4]]
    """
    dtype = object if data.get("dtype") == "string" else np.dtype(data["dtype"])
    shape = tuple(int(d) for d in data.get("shape", ()))
    values = list(data.get("values", ()))
    array = np.array(values, dtype=dtype).reshape(shape)
    array.setflags(write=False)
    return array


def value_key(value: Any) -> Any:
    """A hashable key such that equal keys mean equal values (NaN equals NaN, arrays by content)."""
    if isinstance(value, float):
        return ("float", "nan") if math.isnan(value) else ("float", value)
    if isinstance(value, np.ndarray):
        if value.dtype.kind == "O":
            return ("ndarray", "O", value.shape, tuple(value_key(v) for v in value.ravel()))
        return ("ndarray", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, (tuple, list)):
        return ("seq", tuple(value_key(v) for v in value))
    if isinstance(value, Mapping):
        return ("map", tuple(sorted((str(k), value_key(v)) for k, v in value.items())))
    if isinstance(value, np.generic):
        return value_key(value.item())
    return (type(value).__name__, value)
