"""Attribute values YAML and JSON cannot hold as themselves, written as one-key mappings.

The document model (:mod:`amanda.io.document`) writes every attribute value so that it reads
back equal. Values that plain YAML/JSON would lose are written as *markers*:

- arrays: ``{__ndarray__: {dtype, shape, data}}`` (base64 of the raw bytes);
- ``bytes``: ``{__bytes__: base64}``;
- containers (ONNX ``If``/``Loop``/``Scan`` bodies): ``{__container__: {op|subgraph|graph: …}}``;
- dtypes: ``{__dtype__: '<f4'}`` (the name for ml_dtypes types: ``bfloat16``);
- NaN and infinities: ``{__float__: nan}``, ``inf``, ``-inf`` (JSON has no such numbers);
- integers past 13,000 bits: ``{__int__: '0x…'}`` (Python refuses longer decimals);
- strings that are not UTF-8 (lone surrogates): ``{__str__: base64 of surrogatepass UTF-8}``;
- a mapping with a key starting with ``__``: ``{__mapping__: {…}}``, so it is not a marker;
- a function body's reference to the calling container's attribute
  (:class:`~amanda.containers.refs.AttrRef`): ``{__ref__: {name: alpha, type: float}}``.

This module holds the scalar markers and the error helpers; arrays, bytes, containers,
mappings and references are written and read in :mod:`amanda.io.document`.

>>> encode_scalar(float("-inf")), decode_float({"__float__": "-inf"}, ())
({'__float__': '-inf'}, -inf)
"""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from amanda.containers.values import dtype_from_text, dtype_text, utf8_text
from amanda.errors import FormatError
from amanda.plain_reader import PlainReader

__all__ = ["READER", "decode_dtype", "decode_float", "decode_int", "decode_str", "encode_scalar", "fail"]

DocPath = tuple  # keys and indexes from the document root, for error messages

BIG_INT_BITS = 13_000  # about 3,900 digits: below Python's 4,300-digit limit on int <-> str
_NON_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
READER = PlainReader(FormatError)  # documents' fields: FormatErrors at paths like graph.ops[3].name


def fail(path: DocPath, expected: str, found: Any) -> FormatError:
    """A FormatError at ``path`` (shown as ``graph.ops[3].name``) saying what was expected and
    (shortly) what was found."""
    shown = found if isinstance(found, str) and found.startswith("<") else repr(found)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    return READER.error(path, expected, shown)  # type: ignore[return-value]


def marker_body(value: Mapping, path: DocPath, marker: str, expected: str) -> tuple[Any, DocPath]:
    """The body of a one-key marker mapping and its path; FormatError if other keys are there."""
    if len(value) != 1:
        raise fail(path, f"{{{marker}: {expected}}} alone", list(value))
    return value[marker], path + (marker,)


def encode_scalar(value: Any) -> Any:
    """A str, float or int as written: itself, or a marker when YAML/JSON would lose it.

    >>> encode_scalar(1.5), encode_scalar(float("nan")), encode_scalar("\\ud800")
    (1.5, {'__float__': 'nan'}, {'__str__': '7aCA'})
    """
    kind = type(value)
    if kind is str:
        return value if utf8_text(value) else _encode_str(value)
    if kind is float:
        return value if math.isfinite(value) else {"__float__": repr(value)}
    if kind is int:
        return value if value.bit_length() <= BIG_INT_BITS else {"__int__": hex(value)}
    return value


def _encode_str(text: str) -> dict:
    return {"__str__": base64.b64encode(text.encode("utf-8", "surrogatepass")).decode("ascii")}


def decode_dtype(value: Mapping, path: DocPath) -> np.dtype:
    """The dtype of ``{__dtype__: text}``."""
    text, where = marker_body(value, path, "__dtype__", "a dtype string")
    try:
        dtype = dtype_from_text(text)
        dtype_text(dtype)  # one amanda can store
    except TypeError:
        raise fail(where, "a numpy dtype string such as '<f4'", text) from None
    return dtype


def decode_float(value: Mapping, path: DocPath) -> float:
    """The float of ``{__float__: nan | inf | -inf}``."""
    text, where = marker_body(value, path, "__float__", "nan, inf or -inf")
    if not isinstance(text, str) or text not in _NON_FINITE:
        raise fail(where, "one of nan, inf, -inf", text)
    return _NON_FINITE[text]


def decode_int(value: Mapping, path: DocPath) -> int:
    """The int of ``{__int__: hexadecimal text}``."""
    text, where = marker_body(value, path, "__int__", "hexadecimal text")
    try:
        return int(text, 16)
    except (TypeError, ValueError):
        raise fail(where, "hexadecimal text such as '-0x1f'", text) from None


def decode_str(value: Mapping, path: DocPath) -> str:
    """The string of ``{__str__: base64}`` (UTF-8 with lone surrogates allowed)."""
    text, where = marker_body(value, path, "__str__", "base64 text")
    try:
        return base64.b64decode(text, validate=True).decode("utf-8", "surrogatepass")
    except (TypeError, ValueError):
        raise fail(where, "base64 of UTF-8 text (surrogates allowed)", text) from None
