"""String ops of the ONNX default domain: StringConcat, StringSplit, StringNormalizer and
RegexFullMatch. String tensors are numpy arrays of Python ``str`` (dtype object).

RegexFullMatch uses Python's ``re``, which reads RE2's syntax for everything but RE2's
few extensions (``\\C``, ``\\pN`` classes without braces); a pattern ``re`` rejects is an error.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from amanda.exec.kernels.math_util import attr_str
from amanda.exec.kernels.registry import kernel
from amanda.ops import define
from amanda.types.node import Node
from amanda.types.rules import by_name
from amanda.types.tensor_type import TensorType

Attrs = Mapping[str, Any]


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _strings(values: Any) -> np.ndarray:
    """An object array of ``str`` (bytes decoded as UTF-8)."""
    array = np.asarray(values, dtype=object)
    return np.vectorize(_text, otypes=[object])(array) if array.size else array


@kernel("StringConcat", since=20)
def string_concat_kernel(attrs: Attrs, x: np.ndarray, y: np.ndarray) -> tuple:
    """ONNX StringConcat: elementwise concatenation with broadcasting."""
    joined = np.char.add(_strings(x).astype(str), _strings(y).astype(str))
    return (np.asarray(joined, dtype=object).reshape(np.shape(joined)),)


def string_concat(node: Node) -> list:
    """Strings, broadcast."""
    return [TensorType("string", node.broadcast(node.shape(0), node.shape(1)))]


define("StringConcat", type_rule=string_concat, no_gradient="string data (TfIdfVectorizer: counts of tokens)")


@kernel("StringSplit", since=20)
def string_split_kernel(attrs: Attrs, x: np.ndarray) -> tuple:
    """ONNX StringSplit: substrings padded with '' to the longest split, and their counts.

    No delimiter (or an empty one) splits on runs of whitespace, as ``str.split()`` does."""
    delimiter = attrs.get("delimiter")
    delimiter = _text(delimiter) if delimiter is not None and _text(delimiter) else None
    maxsplit = attrs.get("maxsplit")
    limit = -1 if maxsplit is None else int(maxsplit)
    # an empty string has no substrings, whatever the delimiter (as onnxruntime splits)
    flat = [_text(s).split(delimiter, limit) if _text(s) else [] for s in np.asarray(x, dtype=object).reshape(-1)]
    if delimiter is None:  # whitespace splitting trims the unsplit remainder too
        flat = [[part.strip() for part in parts] for parts in flat]
    width = max((len(parts) for parts in flat), default=0)
    out = np.full((len(flat), width), "", dtype=object)
    for i, parts in enumerate(flat):
        out[i, : len(parts)] = parts
    counts = np.array([len(parts) for parts in flat], np.int64).reshape(x.shape)
    return (out.reshape(x.shape + (width,)), counts)


def string_split(node: Node) -> list:
    """Substrings ``[*input, longest]`` and int64 counts shaped like the input."""
    x = node.shape(0)
    return by_name(node, Y=TensorType("string", None if x is None else (*x, None)), Z=TensorType("int64", x))


define("StringSplit", type_rule=string_split, no_gradient="string data (TfIdfVectorizer: counts of tokens)")


@kernel("StringNormalizer", since=10)
def string_normalizer_kernel(attrs: Attrs, x: np.ndarray) -> tuple:
    """ONNX StringNormalizer: drop stop words, then lower- or upper-case ([C] or [1, C] input).

    Case changes follow Unicode's rules whatever the ``locale`` attribute says."""
    words = [_text(w) for w in attrs.get("stopwords", ())]
    sensitive = bool(int(attrs.get("is_case_sensitive", 0)))
    action = attr_str(attrs, "case_change_action", "NONE")
    stop = set(words) if sensitive else {w.lower() for w in words}
    values = [_text(s) for s in np.asarray(x, dtype=object).reshape(-1)]
    kept = [s for s in values if (s if sensitive else s.lower()) not in stop]
    if action == "LOWER":
        kept = [s.lower() for s in kept]
    elif action == "UPPER":
        kept = [s.upper() for s in kept]
    if not kept:
        kept = [""]
    out = np.array(kept, dtype=object)
    return (out.reshape(1, -1) if x.ndim == 2 else out,)


def string_normalizer(node: Node) -> list:
    """Strings of the input's rank (stop words make the length unknown)."""
    x = node.shape(0)
    return [TensorType("string", None if x is None else (*x[:-1], None))]


define("StringNormalizer", type_rule=string_normalizer, no_gradient="string data (TfIdfVectorizer: counts of tokens)")


@kernel("RegexFullMatch", since=20)
def regex_full_match_kernel(attrs: Attrs, x: np.ndarray) -> tuple:
    """ONNX RegexFullMatch: whether each string matches ``pattern`` whole."""
    pattern = re.compile(attr_str(attrs, "pattern", ""))
    flat = [pattern.fullmatch(_text(s)) is not None for s in np.asarray(x, dtype=object).reshape(-1)]
    return (np.array(flat, dtype=bool).reshape(x.shape),)


def regex_full_match(node: Node) -> list:
    """Booleans shaped like the input."""
    return [TensorType("bool", node.shape(0))]


define("RegexFullMatch", type_rule=regex_full_match, no_gradient="string data (TfIdfVectorizer: counts of tokens)")
