"""ONNX tensors and types <-> numpy arrays and plain values (used by import and export).

Tensors become read-only numpy arrays: dtypes numpy lacks (bfloat16, float8, int4 …) use
``ml_dtypes`` (an onnx dependency), string tensors become ``bytes_`` (``S``) arrays. Types
become port attributes: ``dtype`` (a name such as ``'float32'``) and ``shape`` (a tuple of
ints, symbolic names and ``None``) for tensors, ``type`` (a nested mapping) for the rest.

>>> import numpy as np
>>> tensor = array_to_tensor(np.arange(3, dtype=np.int64), "t")
>>> tensor.name, list(tensor.dims), tensor_to_array(tensor).tolist()
('t', [3], [0, 1, 2])
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from amanda.containers.edge import Port
from amanda.containers.maps import map_of
from amanda.containers.values import ScalarMap, freeze_array
from amanda.errors import FormatError
from amanda.io.onnx.spans import array_at

__all__ = [
    "DTYPE_NAMES",
    "ELEM_TYPES",
    "VIEWED_TYPES",
    "array_to_tensor",
    "attrs_to_type",
    "require_onnx",
    "sparse_to_value",
    "tensor_to_array",
    "type_to_attrs",
    "type_to_value",
    "typed_port",
    "value_port",
    "value_to_sparse",
    "value_to_type",
]


def require_onnx() -> Any:
    """The ``onnx`` module, or a FormatError telling how to install it."""
    try:
        import onnx
    except ImportError:
        raise FormatError(
            "reading or writing ONNX needs the onnx package: pip install 'amanda[onnx]'",
            expected="the onnx package",
            found="not installed",
        ) from None
    return onnx


def _dtype_tables() -> tuple[dict[int, str], dict[str, int]]:
    onnx = require_onnx()
    names: dict[int, str] = {}
    for enum_name, number in onnx.TensorProto.DataType.items():
        if number == 0:
            continue
        if enum_name == "STRING":
            names[number] = "string"
            continue
        try:
            names[number] = onnx.helper.tensor_dtype_to_np_dtype(number).name
        except (KeyError, ValueError, TypeError):  # a data type newer than this numpy mapping
            names[number] = enum_name.lower()
    return names, {name: number for number, name in names.items()}


class _Tables:
    """ONNX element types <-> dtype names, built on first use (onnx is imported lazily)."""

    names: dict[int, str] | None = None
    numbers: dict[str, int] | None = None


def _tables() -> tuple[dict[int, str], dict[str, int]]:
    if _Tables.names is None:
        _Tables.names, _Tables.numbers = _dtype_tables()
    return _Tables.names, _Tables.numbers  # type: ignore[return-value]


class _LazyTable(Mapping):
    def __init__(self, which: int) -> None:
        self._which = which

    def _table(self) -> dict:
        return _tables()[self._which]

    def __getitem__(self, key: Any) -> Any:
        return self._table()[key]

    def __iter__(self) -> Any:
        return iter(self._table())

    def __len__(self) -> int:
        return len(self._table())


DTYPE_NAMES: Mapping[int, str] = _LazyTable(0)
"""ONNX ``TensorProto.DataType`` number -> dtype name (``1 -> 'float32'``, ``8 -> 'string'``)."""
ELEM_TYPES: Mapping[str, int] = _LazyTable(1)
"""dtype name -> ONNX ``TensorProto.DataType`` number."""

# Element types whose raw bytes numpy reads directly (little-endian, one element per item).
_RAW = {
    1: "<f4",
    2: "u1",
    3: "i1",
    4: "<u2",
    5: "<i2",
    6: "<i4",
    7: "<i8",
    9: "?",
    10: "<f2",
    11: "<f8",
    12: "<u4",
    13: "<u8",
    14: "<c8",
    15: "<c16",
}
_RAW_DTYPES = {number: np.dtype(code) for number, code in _RAW.items()}
VIEWED_TYPES = frozenset(_RAW)  # element types whose raw bytes are read as a view (spans.stripped)
_RAW_BY_DTYPE = {np.dtype(code): number for number, code in _RAW.items()}  # dtype.name is slow
_STRING = 8
_EXTERNAL = 1  # TensorProto.EXTERNAL


def _frozen(array: np.ndarray) -> np.ndarray:
    # over the proto's immutable raw bytes: shared, not copied; anything else is copied once
    return freeze_array(array)


def tensor_to_array(tensor: Any, where: str = "", span: tuple[int, int] | None = None, data: bytes = b"") -> Any:
    """A read-only array with the tensor's dtype, shape and values.

    ``span``: where the tensor's raw bytes lie in ``data``, the bytes its message was parsed
    from (``amanda.io.onnx.spans``): the array is then a view of them, not a copy.

    String tensors give ``bytes_`` arrays (numpy drops trailing NUL bytes of each string).
    A tensor whose data lies in an external file gives a lazy tensor while a model is loaded
    from its file (``amanda.io.onnx.external``), and raises FormatError otherwise.
    """
    number = tensor.data_type
    dims = tuple(tensor.dims[:])  # a slice is made in C: faster than iterating
    if tensor.data_location == _EXTERNAL:
        from amanda.io.onnx.external import external_tensor

        return external_tensor(tensor, where)
    dtype = _RAW_DTYPES.get(number)
    try:
        if span is not None and dtype is not None:
            viewed = array_at(data, span, dtype, dims)
            if viewed is not None:
                return _frozen(viewed if dtype.isnative else viewed.astype(dtype.newbyteorder("=")))
        # each read of a bytes field copies it out of the parsed message: read it once (a
        # message parsed without its raw data, amanda.io.onnx.spans.stripped: from the span)
        raw = tensor.raw_data if dtype is not None else b""
        if not raw and span is not None and span[1]:
            raw = data[span[0] : span[0] + span[1]]
        if raw and dtype is not None:
            array = np.frombuffer(raw, dtype=dtype).reshape(dims)
            return _frozen(array if dtype.isnative else array.astype(dtype.newbyteorder("=")))
        if number == _STRING:
            return _frozen(np.array(list(tensor.string_data), dtype=np.bytes_).reshape(dims))
        if number not in DTYPE_NAMES:
            raise ValueError(f"unknown data type {number}")
        from onnx import numpy_helper

        return _frozen(np.asarray(numpy_helper.to_array(tensor)))
    except (ValueError, TypeError) as exc:
        raise FormatError(
            f"{where}tensor {tensor.name!r} cannot be read: {exc}",
            path=tensor.name,
            expected="tensor data matching its dims and data type",
            found=str(exc),
        ) from None


def array_to_tensor(array: Any, name: str = "") -> Any:
    """A ``TensorProto`` holding ``array`` (raw little-endian bytes where ONNX allows)."""
    onnx = require_onnx()
    array = np.asarray(array)
    if not array.flags.writeable:  # a weight still in its file is written where it lies, in a dump
        from amanda.io.onnx.external import external_reference

        reference = external_reference(array, name)
        if reference is not None:
            return reference
    tensor = onnx.TensorProto()
    tensor.name = name
    tensor.dims.extend(array.shape)
    number = _RAW_BY_DTYPE.get(array.dtype)
    if number is not None:
        tensor.data_type = number
        tensor.raw_data = np.ascontiguousarray(array, dtype=_RAW_DTYPES[number]).tobytes()
        return tensor
    if array.dtype.kind in "SUO":
        tensor.data_type = _STRING
        tensor.string_data.extend(_as_bytes(v) for v in array.ravel().tolist())
        return tensor
    from onnx import numpy_helper

    return numpy_helper.from_array(array, name)


def _as_bytes(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    raise FormatError(
        f"a string tensor holds {type(value).__name__} values", expected="str or bytes"
    )


def sparse_to_value(sparse: Any, where: str = "") -> dict[str, Any]:
    """A sparse tensor as ``{values, indices, dims}`` (arrays and a tuple of ints)."""
    return {
        "values": tensor_to_array(sparse.values, where),
        "indices": tensor_to_array(sparse.indices, where),
        "dims": tuple(int(d) for d in sparse.dims),
    }


def value_to_sparse(value: Mapping[str, Any], name: str = "") -> Any:
    """A ``SparseTensorProto`` from ``{values, indices, dims}``."""
    onnx = require_onnx()
    if not isinstance(value, Mapping) or not {"values", "indices", "dims"} <= set(value):
        raise FormatError(
            "a sparse tensor is {values, indices, dims}",
            expected="{values, indices, dims}",
            found=repr(value)[:80],
        )
    sparse = onnx.SparseTensorProto()
    sparse.values.CopyFrom(array_to_tensor(value["values"], name))
    sparse.indices.CopyFrom(array_to_tensor(np.asarray(value["indices"], dtype=np.int64)))
    sparse.dims.extend(int(d) for d in value["dims"])
    return sparse


# -- types ---------------------------------------------------------------------------------


def _shape(shape: Any) -> tuple:
    dims = []
    for dim in shape.dim:
        which = dim.WhichOneof("value")
        dims.append(
            dim.dim_value
            if which == "dim_value"
            else dim.dim_param
            if which == "dim_param"
            else None
        )
    return tuple(dims)


def _tensor_value(tensor_type: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if tensor_type.elem_type:
        out["dtype"] = DTYPE_NAMES.get(tensor_type.elem_type, str(tensor_type.elem_type))
    if tensor_type.HasField("shape"):
        out["shape"] = _shape(tensor_type.shape)
    return out


def type_to_value(type_proto: Any) -> dict[str, Any]:
    """A ``TypeProto`` as a nested mapping: ``{tensor: {dtype, shape}}``, ``{sequence: …}``,
    ``{optional: …}``, ``{map: {key, value}}``, ``{sparse_tensor: {dtype, shape}}``."""
    which = type_proto.WhichOneof("value")
    out: dict[str, Any] = {}
    if which == "tensor_type":
        out["tensor"] = _tensor_value(type_proto.tensor_type)
    elif which == "sparse_tensor_type":
        out["sparse_tensor"] = _tensor_value(type_proto.sparse_tensor_type)
    elif which == "sequence_type":
        out["sequence"] = type_to_value(type_proto.sequence_type.elem_type)
    elif which == "optional_type":
        out["optional"] = type_to_value(type_proto.optional_type.elem_type)
    elif which == "map_type":
        key = DTYPE_NAMES.get(type_proto.map_type.key_type, str(type_proto.map_type.key_type))
        out["map"] = {"key": key, "value": type_to_value(type_proto.map_type.value_type)}
    if type_proto.denotation:
        out["denotation"] = type_proto.denotation
    return out


def type_to_attrs(value_info: Any) -> dict[str, Any]:
    """Port attributes for a ``ValueInfoProto``: ``dtype``/``shape`` for a tensor, else ``type``."""
    if not value_info.HasField("type"):
        out: dict[str, Any] = {}
    elif value_info.type.WhichOneof("value") == "tensor_type" and not value_info.type.denotation:
        out = _tensor_value(value_info.type.tensor_type)
    else:
        out = {"type": type_to_value(value_info.type)}
    if value_info.doc_string:
        out["doc_string"] = value_info.doc_string
    return out


def value_port(port: str, value: str, typed: Any) -> Any:
    """The output port ``port`` (a schema name) carrying the value ``value``, typed by the
    graph's ``ValueInfoProto`` for it (``typed``, or None). A tensor type's attributes are
    strings and a tuple of dims (ints, strings, None), frozen as made, so the port is assembled
    without walking them again; any other type goes through ``Port``.

    >>> value_port("Y", "y", None).attrs["onnx_name"]
    'y'
    """
    return typed_port(port, value, None if typed is None else type_to_attrs(typed))


def typed_port(port: str, value: str, typed: dict[str, Any] | None) -> Any:
    """:func:`value_port` for the port attributes :func:`type_to_attrs` made of the value's
    ``ValueInfoProto`` (``typed``, or None).

    >>> typed_port("Y", "y", {"dtype": "float32", "shape": (2,)}).attrs["shape"]
    (2,)
    """
    if typed is None:  # strings only: what freeze_attrs makes of them
        return tuple.__new__(Port, (port, map_of({"onnx_name": value}, ScalarMap)))
    attrs = {"onnx_name": value, **typed}
    if "type" in attrs:
        return Port(port, attrs=attrs)
    return tuple.__new__(Port, (port, map_of(attrs)))


def _fill_tensor(target: Any, value: Mapping[str, Any]) -> None:
    dtype = value.get("dtype")
    if dtype is not None:
        number = ELEM_TYPES.get(str(dtype))
        if number is None:
            try:
                number = ELEM_TYPES.get(np.dtype(dtype).name)
            except TypeError:
                number = None
        if number is None:
            raise FormatError(
                f"unknown tensor dtype {dtype!r}",
                expected="a dtype name such as 'float32'",
                found=repr(dtype),
            )
        target.elem_type = number
    shape = value.get("shape")
    if shape is not None:
        proto_shape = target.shape
        proto_shape.SetInParent()  # a scalar's shape is present but empty
        for dim in shape:
            entry = proto_shape.dim.add()
            if isinstance(dim, str):
                entry.dim_param = dim
            elif dim is not None:
                if not 0 <= int(dim) < 2**63:
                    raise FormatError(f"a dimension {dim} outside ONNX's range", expected="a dimension from 0 to 2**63 - 1",
                                      found=str(dim))
                entry.dim_value = int(dim)


def value_to_type(value: Mapping[str, Any]) -> Any:
    """The ``TypeProto`` of a mapping made by :func:`type_to_value`."""
    onnx = require_onnx()
    proto = onnx.TypeProto()
    _fill_type(proto, value)
    return proto


def _fill_type(proto: Any, value: Mapping[str, Any]) -> None:
    if not isinstance(value, Mapping):
        raise FormatError(
            f"a type is a mapping such as {{tensor: {{dtype: float32}}}}, found {value!r}"
        )
    if "tensor" in value:
        proto.tensor_type.SetInParent()
        _fill_tensor(proto.tensor_type, value["tensor"])
    elif "sparse_tensor" in value:
        proto.sparse_tensor_type.SetInParent()
        _fill_tensor(proto.sparse_tensor_type, value["sparse_tensor"])
    elif "sequence" in value:
        _fill_type(proto.sequence_type.elem_type, value["sequence"])
    elif "optional" in value:
        _fill_type(proto.optional_type.elem_type, value["optional"])
    elif "map" in value:
        entry = value["map"]
        proto.map_type.key_type = ELEM_TYPES[str(entry["key"])]
        _fill_type(proto.map_type.value_type, entry["value"])
    if value.get("denotation"):
        proto.denotation = value["denotation"]


def attrs_to_type(attrs: Mapping[str, Any]) -> Any | None:
    """The ``TypeProto`` that port attributes describe, or None when they give no type."""
    if "type" in attrs and attrs["type"] is not None:
        return value_to_type(attrs["type"])
    if attrs.get("dtype") is None and attrs.get("shape") is None:
        return None
    return value_to_type({"tensor": {"dtype": attrs.get("dtype"), "shape": attrs.get("shape")}})
