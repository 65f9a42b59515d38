"""TensorFlow values <-> Python: ``DataType`` names, ``TensorProto`` <-> numpy, ``AttrValue``.

DataTypes are named as TensorFlow names them (``DT_FLOAT`` -> ``float32``, ``DT_HALF`` ->
``float16``, ``DT_RESOURCE`` -> ``resource``, reference types ``float32_ref``). A tensor's
values come from ``tensor_content`` (raw little-endian bytes) or from the typed ``*_val`` field
of its dtype; where that field holds fewer values than the shape has elements, the last one is
repeated (TensorFlow's rule; none at all means zeros). String tensors become ``bytes_`` arrays,
``bfloat16`` ones float32 arrays (exact) and quantized ones their storage integers; the
op's ``dtype`` attribute keeps the TensorFlow type for export.

Attribute values (``AttrValue``): ``s`` -> str (bytes when not UTF-8), ``i`` -> int, ``f`` ->
float, ``b`` -> bool, ``type`` -> dtype name, ``shape`` -> tuple of dims (None for an unknown
dim) or None (unknown rank), ``tensor`` -> array, ``func`` -> the function's name (a mapping
``{"name", "attr"}`` when it carries attributes), ``placeholder`` -> an
:class:`~amanda.containers.refs.AttrRef`, ``list`` -> a tuple of those. :func:`attr_from_proto`
also says which field it read (``"type"``, ``"list(shape)"`` ...) so that export writes the same.

>>> proto = tensor_to_proto(np.arange(6, dtype=np.float32).reshape(2, 3))
>>> tensor_from_proto(proto, "c").tolist()
[[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from amanda.containers.refs import AttrRef
from amanda.errors import FormatError
from amanda.io.tensorflow.protos import data_types, message

__all__ = ["MAX_ELEMENTS", "STORAGE", "attr_from_proto", "attr_to_proto", "dtype_enum", "dtype_name",
           "tensor_from_proto", "tensor_to_proto"]

MAX_ELEMENTS = 1 << 31
"""The most elements a constant may expand to (a one-value tensor of a huge shape would
otherwise fill memory)."""

_RENAMED = {"float": "float32", "double": "float64", "half": "float16"}
# storage dtype of each TensorFlow type with numeric values (bfloat16 is read into float32)
STORAGE = {"float32": "<f4", "float64": "<f8", "float16": "<f2", "int8": "i1", "int16": "<i2",
            "int32": "<i4", "int64": "<i8", "uint8": "u1", "uint16": "<u2", "uint32": "<u4",
            "uint64": "<u8", "bool": "?", "complex64": "<c8", "complex128": "<c16", "qint8": "i1",
            "quint8": "u1", "qint16": "<i2", "quint16": "<u2", "qint32": "<i4"}
# the typed field each type's values live in, when not in tensor_content
_FIELD = {"float32": "float_val", "float64": "double_val", "float16": "half_val", "bfloat16": "half_val",
          "int64": "int64_val", "bool": "bool_val", "complex64": "scomplex_val",
          "complex128": "dcomplex_val", "uint32": "uint32_val", "uint64": "uint64_val",
          "string": "string_val"}


@functools.cache
def _names() -> tuple[dict[int, str], dict[str, int]]:
    by_number: dict[int, str] = {}
    for number, enum in data_types().items():
        if number == 0:
            continue
        base = enum[3:].lower()
        ref = base.endswith("_ref")
        base = base[:-4] if ref else base
        base = _RENAMED.get(base, base)
        by_number[number] = base + "_ref" if ref else base
    return by_number, {name: number for number, name in by_number.items()}


def dtype_name(number: int, where: str = "") -> str:
    """The name of TensorFlow ``DataType`` ``number``.

    >>> dtype_name(1), dtype_name(19), dtype_name(101)
    ('float32', 'float16', 'float32_ref')
    """
    found = _names()[0].get(number)
    if found is None:
        raise FormatError(f"{where}: unknown TensorFlow DataType {number}" if where else
                          f"unknown TensorFlow DataType {number}", path=where or None,
                          expected="a DataType of tensorflow/core/framework/types.proto", found=str(number))
    return found


def dtype_enum(name: Any, where: str = "") -> int:
    """The ``DataType`` number of a dtype name (or numpy dtype).

    >>> dtype_enum("float32"), dtype_enum(np.dtype("int64")), dtype_enum("resource")
    (1, 9, 20)
    """
    text = name.name if isinstance(name, np.dtype) else str(name)
    text = {"bytes": "string", "str": "string"}.get(text, text) if not isinstance(name, np.dtype) or \
        name.kind not in "SU" else "string"
    found = _names()[1].get(text)
    if found is None:
        from amanda.namespaces.schema import suggest

        raise FormatError.at(where or "dtype", "a TensorFlow dtype name", repr(text),
                             suggest(text, list(_names()[1])))
    return found


def _shape(proto: Any, where: str) -> tuple[int | None, ...] | None:
    if proto.unknown_rank:
        return None
    return tuple(None if d.size < 0 else d.size for d in proto.dim)


def _bad(where: str, expected: str, found: str) -> FormatError:
    return FormatError(f"{where}: expected {expected}, found {found}", path=where, expected=expected, found=found)


def tensor_from_proto(proto: Any, where: str) -> np.ndarray:
    """The read-only array a ``TensorProto`` holds; FormatError naming ``where`` for a dtype
    without values (resource, variant), a partly known shape, or contents of the wrong size."""
    kind = dtype_name(proto.dtype, where + ".dtype")
    known = _shape(proto.tensor_shape, where)
    if known is None or None in known:
        raise _bad(where + ".tensor_shape", "a fully known shape", "an unknown dimension or rank")
    dims = tuple(d for d in known if d is not None)
    size = math.prod(dims)
    if size > MAX_ELEMENTS:
        raise _bad(where + ".tensor_shape", f"at most {MAX_ELEMENTS} elements", f"{size} {dims}")
    if kind == "string":
        values = list(proto.string_val)
        return _frozen(np.array(_filled(values, size, b"", where), dtype=np.bytes_).reshape(dims))
    storage = STORAGE.get(kind)
    if storage is None and kind != "bfloat16":
        raise _bad(where + ".dtype", "a tensor dtype with values", kind)
    content = proto.tensor_content
    if content:
        item = 2 if kind == "bfloat16" else np.dtype(storage).itemsize
        if len(content) != size * item:
            raise _bad(where + ".tensor_content", f"{size * item} bytes for {kind}{list(dims)}", f"{len(content)}")
        if kind == "bfloat16":
            return _frozen(_bfloat16(np.frombuffer(content, "<u2")).reshape(dims))
        return _frozen(np.frombuffer(content, storage).reshape(dims))
    return _frozen(_typed(proto, kind, storage, size, where).reshape(dims))


def _bfloat16(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def _typed(proto: Any, kind: str, storage: str | None, size: int, where: str) -> np.ndarray:
    field = _FIELD.get(kind, "int_val")
    values: Any = list(getattr(proto, field))
    if field.endswith("complex_val"):
        if len(values) % 2:
            raise _bad(f"{where}.{field}", "pairs of (real, imaginary) values", f"{len(values)} values")
        values = [complex(re, im) for re, im in zip(values[::2], values[1::2], strict=True)]
    if len(values) > size:
        raise _bad(f"{where}.{field}", f"at most {size} values", f"{len(values)}")
    values = _filled(values, size, 0, where)
    if kind == "bfloat16":
        return _bfloat16(np.array(values, dtype=np.uint32).astype(np.uint16))
    if kind == "float16":
        return np.array(values, dtype=np.uint16).view(np.float16)
    try:
        return np.array(values, dtype=storage)
    except (OverflowError, ValueError):
        raise _bad(f"{where}.{field}", f"values that fit {kind}", "values out of range") from None


def _filled(values: list, size: int, zero: Any, where: str) -> list:
    """``values`` with the last one repeated up to ``size`` (zeros when there are none)."""
    if len(values) >= size:
        return values
    return values + [values[-1] if values else zero] * (size - len(values))


def _frozen(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)
    return array


def tensor_to_proto(array: Any, dtype: str | None = None) -> Any:
    """A ``TensorProto`` of ``array`` (raw bytes in ``tensor_content``; strings in
    ``string_val``), typed ``dtype`` (a TensorFlow dtype name) where given, else by the array."""
    array = np.asarray(array)
    kind = dtype or ("string" if array.dtype.kind in "SU" else dtype_name(dtype_enum(array.dtype)))
    kind = kind[:-4] if kind.endswith("_ref") else kind
    proto = message("tensorflow.TensorProto")(dtype=dtype_enum(kind))
    for size in array.shape:
        proto.tensor_shape.dim.add(size=int(size))
    if kind == "string":
        proto.string_val.extend(v if isinstance(v, bytes) else str(v).encode() for v in array.ravel().tolist())
    elif kind == "bfloat16":
        bits = np.ascontiguousarray(array, dtype="<f4").view("<u4") >> 16
        proto.tensor_content = bits.astype("<u2").tobytes()
    elif kind in STORAGE:
        proto.tensor_content = np.ascontiguousarray(array, dtype=STORAGE[kind]).tobytes()
    else:
        raise FormatError.at("tensor", "a tensor dtype with values", kind)
    return proto


# -- AttrValue ------------------------------------------------------------------------------------

_SCALAR_FIELDS = ("s", "i", "f", "b", "type", "shape", "tensor", "func")


def _one(field: str, value: Any, where: str) -> Any:
    if field == "s":
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return bytes(value)
    if field == "f":
        return float(str(np.float32(value)))  # the shortest text of the float32: 0.1, not 0.10000000149
    if field == "type":
        return dtype_name(value, where)
    if field == "shape":
        return _shape(value, where)
    if field == "tensor":
        return tensor_from_proto(value, where)
    if field == "func":
        if not value.attr:
            return value.name
        return {"name": value.name, "attr": {k: attr_from_proto(v, f"{where}.{k}")[0]
                                             for k, v in sorted(value.attr.items())}}
    return value  # i, b


def attr_from_proto(proto: Any, where: str) -> tuple[Any, str]:
    """(value, the field read) of one ``AttrValue``; ``where`` names it in errors.

    >>> attr = message("tensorflow.AttrValue")(type=1)
    >>> attr_from_proto(attr, "n.T")
    ('float32', 'type')
    """
    field = proto.WhichOneof("value")
    if field is None:
        return None, ""
    if field == "placeholder":
        return AttrRef(proto.placeholder), "placeholder"
    if field != "list":
        return _one(field, getattr(proto, field), where), field
    items = proto.list
    for name in _SCALAR_FIELDS:
        values = getattr(items, name)
        if len(values):
            return tuple(_one(name, v, f"{where}[{i}]") for i, v in enumerate(values)), f"list({name})"
    return (), "list"


def _fill(proto: Any, field: str, value: Any, where: str) -> None:
    if field == "s":
        proto.s = value if isinstance(value, bytes) else str(value).encode("utf-8")
    elif field == "i":
        proto.i = int(value)
    elif field == "f":
        proto.f = float(value)
    elif field == "b":
        proto.b = bool(value)
    elif field == "type":
        proto.type = dtype_enum(value, where)
    elif field == "shape":
        _fill_shape(proto.shape, value)
    elif field == "tensor":
        proto.tensor.CopyFrom(tensor_to_proto(value))
    elif field == "func":
        _fill_func(proto.func, value, where)
    else:
        raise FormatError.at(where, "an AttrValue field (s, i, f, b, type, shape, tensor, func)", repr(field))


def _fill_shape(proto: Any, value: Any) -> None:
    proto.SetInParent()  # a scalar's shape has no dims: the field must be set all the same
    if value is None:
        proto.unknown_rank = True
        return
    for size in value:
        proto.dim.add(size=-1 if size is None else int(size))


def _fill_func(proto: Any, value: Any, where: str) -> None:
    if isinstance(value, Mapping):
        proto.name = str(value["name"])
        for key, item in value.get("attr", {}).items():
            proto.attr[key].CopyFrom(attr_to_proto(item, guess_kind(item), f"{where}.{key}"))
    else:
        proto.name = str(value)


def guess_kind(value: Any) -> str:
    """The ``AttrValue`` field a value with no recorded kind is written to.

    >>> guess_kind(3), guess_kind("SAME"), guess_kind((1, 2)), guess_kind(np.zeros(2))
    ('i', 's', 'list(i)', 'tensor')
    """
    if isinstance(value, AttrRef):
        return "placeholder"
    if isinstance(value, (tuple, list)):
        return f"list({guess_kind(value[0])})" if value else "list"
    if isinstance(value, (bool, np.bool_)):
        return "b"
    if isinstance(value, (int, np.integer)):
        return "i"
    if isinstance(value, (float, np.floating)):
        return "f"
    if isinstance(value, np.ndarray):
        return "tensor"
    if isinstance(value, np.dtype):
        return "type"
    return "s"


def attr_to_proto(value: Any, kind: str, where: str) -> Any:
    """An ``AttrValue`` holding ``value`` in field ``kind`` (as :func:`attr_from_proto` says)."""
    proto = message("tensorflow.AttrValue")()
    if kind == "placeholder":
        proto.placeholder = value.name if isinstance(value, AttrRef) else str(value)
    elif kind == "list" or kind.startswith("list("):
        items = proto.list
        items.SetInParent()
        field = kind[5:-1] if kind != "list" else ""
        for i, item in enumerate(value or ()):
            holder = message("tensorflow.AttrValue")()
            _fill(holder, field, item, f"{where}[{i}]")
            if field in ("shape", "tensor", "func"):
                getattr(items, field).add().CopyFrom(getattr(holder, field))
            else:
                getattr(items, field).append(getattr(holder, field))
    elif value is not None or kind == "shape":  # None: a shape of unknown rank
        _fill(proto, kind, value, where)
    return proto
