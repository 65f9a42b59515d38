"""The array and bytes markers of documents: ``{__ndarray__: {dtype, shape, data}}`` and
``{__bytes__: base64}``, read with every field checked (plain dtypes only, at most 64
dimensions, sizes numpy can hold, data of exactly the right length)."""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from amanda.containers.values import dtype_from_text, freeze_array
from amanda.io.markers import fail as _fail

__all__ = ["decode_array", "decode_bytes"]

DocPath = tuple


_MAX_DIMS = 64  # numpy's own limits
_MAX_BYTES = 2**63 - 1


def decode_array(value: Mapping, path: DocPath) -> np.ndarray:
    spec = value["__ndarray__"]
    where = path + ("__ndarray__",)
    if len(value) != 1 or not isinstance(spec, Mapping) or set(spec) != {"dtype", "shape", "data"}:
        raise _fail(where, "{dtype, shape, data}", spec)
    dtype = _array_dtype(spec["dtype"], where + ("dtype",))
    shape = spec["shape"]
    if (
        not isinstance(shape, list)
        or len(shape) > _MAX_DIMS
        or not all(type(d) is int and d >= 0 for d in shape)
        or math.prod(max(d, 1) for d in shape) * dtype.itemsize > _MAX_BYTES  # numpy's bound
    ):
        raise _fail(where + ("shape",), f"at most {_MAX_DIMS} sizes of an array numpy can hold", shape)
    raw = _base64(spec["data"], where + ("data",))
    size = math.prod(shape) * dtype.itemsize  # Python ints: no overflow
    if len(raw) != size:
        raise _fail(where + ("data",), f"{size} bytes for shape {shape}", f"<{len(raw)} bytes>")
    # read-only over the immutable decoded bytes: stored without another copy
    return freeze_array(np.frombuffer(raw, dtype=dtype).reshape(shape))


def _array_dtype(text: Any, path: DocPath) -> np.dtype:
    """A plain numpy dtype from its string; never objects, records, sub-arrays or size 0."""
    expected = "a numpy dtype string such as '<f4'"
    if not isinstance(text, str) or len(text) > 16:
        raise _fail(path, expected, text)
    try:
        dtype = dtype_from_text(text)  # ml_dtypes' types (bfloat16 …) by name
    except (TypeError, ValueError, SyntaxError):
        raise _fail(path, expected, text) from None
    if dtype.hasobject or dtype.fields is not None or dtype.subdtype is not None:
        raise _fail(path, "a dtype of plain values (no objects, records or sub-arrays)", text)
    if dtype.itemsize == 0:
        raise _fail(path, "a dtype whose items have a size", text)
    return dtype


def _base64(text: Any, path: DocPath) -> bytes:
    """Bytes from base64 text, on one line or folded into several (as YAML is written)."""
    if not isinstance(text, str):
        raise _fail(path, "base64 text", text)
    if "\n" in text or " " in text:
        text = "".join(text.split())
    try:
        return base64.b64decode(text, validate=True)
    except ValueError:
        raise _fail(path, "base64 text", text) from None


def decode_bytes(value: Mapping, path: DocPath) -> bytes:
    if len(value) != 1 or not isinstance(value["__bytes__"], str):
        raise _fail(path, "{__bytes__: base64 text}", value)
    return _base64(value["__bytes__"], path + ("__bytes__",))
