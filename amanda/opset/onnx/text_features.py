"""TfIdfVectorizer of the ONNX default domain: counts of pooled n-grams, with skips.

The pool lists every n-gram of each length back to back (``ngram_counts[i]`` is where the
(i+1)-grams start); ``ngram_indexes`` gives each pooled n-gram's output column. An n-gram
with skip ``s`` takes every (s+1)-th token; unigrams are counted once, not once per skip.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from amanda.exec.kernels.math_util import attr_str
from amanda.exec.kernels.registry import kernel
from amanda.ops import define
from amanda.types.node import Node
from amanda.types.tensor_type import TensorType

Attrs = Mapping[str, Any]


def _pool(attrs: Attrs) -> tuple[dict[tuple, int], int]:
    """Pooled n-gram -> output column, and the output width."""
    if attrs.get("pool_strings"):
        tokens: list[Any] = [t.decode() if isinstance(t, bytes) else str(t) for t in attrs["pool_strings"]]
    else:
        tokens = [int(t) for t in attrs.get("pool_int64s", ())]
    starts = [int(c) for c in attrs.get("ngram_counts", ())] + [len(tokens)]
    indexes = [int(i) for i in attrs.get("ngram_indexes", ())]
    table: dict[tuple, int] = {}
    k = 0
    for n in range(1, len(starts)):
        segment = tokens[starts[n - 1]:starts[n]]
        for j in range(0, len(segment), n):
            table[tuple(segment[j:j + n])] = indexes[k]
            k += 1
    return table, (max(indexes) + 1 if indexes else 0)


@kernel("TfIdfVectorizer", since=9)
def tfidf_vectorizer_kernel(attrs: Attrs, x: np.ndarray) -> tuple:
    """ONNX TfIdfVectorizer in TF, IDF or TFIDF mode over 1-D or 2-D token input."""
    table, width = _pool(attrs)
    low, high = int(attrs.get("min_gram_length", 1)), int(attrs.get("max_gram_length", 1))
    skips = int(attrs.get("max_skip_count", 0))
    rows = x.reshape(1, -1) if x.ndim == 1 else x
    counts = np.zeros((rows.shape[0], width), np.float64)
    for r, row in enumerate(rows):
        tokens = [t.decode() if isinstance(t, bytes) else (t if isinstance(t, str) else int(t)) for t in row]
        for n in range(low, high + 1):
            for skip in range(skips + 1 if n > 1 else 1):
                step = skip + 1
                for start in range(len(tokens) - (n - 1) * step):
                    column = table.get(tuple(tokens[start:start + (n - 1) * step + 1:step]))
                    if column is not None:
                        counts[r, column] += 1
    mode = attr_str(attrs, "mode", "TF")
    full = np.ones(width)  # the i-th weight belongs to the i-th pooled n-gram's column
    for i, w in zip(attrs.get("ngram_indexes", ()), attrs.get("weights") or ()):
        full[int(i)] = float(w)
    if mode == "IDF":
        counts = (counts > 0) * full
    elif mode == "TFIDF":
        counts = counts * full
    out = counts.astype(np.float32)
    return (out.reshape(-1) if x.ndim == 1 else out,)


def tfidf_vectorizer(node: Node) -> list:
    """float32 ``[max(ngram_indexes) + 1]`` per row."""
    x = node.shape(0)
    width = max((int(i) for i in node.attr("ngram_indexes", ())), default=-1) + 1
    shape = None if x is None else ((width,) if len(x) == 1 else (x[0], width))
    return [TensorType("float32", shape)]


define("TfIdfVectorizer", type_rule=tfidf_vectorizer, no_gradient="string data (TfIdfVectorizer: counts of tokens)")
