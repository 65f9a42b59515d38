"""Ops that make values from attributes or reduce to losses: random ops, windows,
MelWeightMatrix, the Fourier transforms, losses, BitCast, strings and TfIdfVectorizer."""

from __future__ import annotations

from amanda.types.node import Node
from amanda.types.rules import by_name, rule
from amanda.types.tensor_type import ONNX_DTYPES, TensorType


def _code(node: Node, name: str, default: int) -> str | None:
    code = int(node.attr(name, default))
    return ONNX_DTYPES.get(code) if code else None


@rule("RandomNormal", "RandomUniform")
def random_from_shape(node: Node) -> list:
    """``shape`` values in ``dtype`` (default float32)."""
    return [TensorType(_code(node, "dtype", 1), tuple(int(d) for d in node.attr("shape", ())))]


@rule("RandomNormalLike", "RandomUniformLike", "Bernoulli")
def random_like(node: Node) -> list:
    """The input's shape, in ``dtype`` or the input's dtype."""
    return [TensorType(_code(node, "dtype", 0) or node.dtype(0), node.shape(0))]


@rule("Multinomial")
def multinomial(node: Node) -> list:
    """``[batch, sample_size]`` class indices (int32 by default)."""
    x = node.shape(0)
    return [TensorType(_code(node, "dtype", 6), (x[0] if x else None, int(node.attr("sample_size", 1))))]


def window(node: Node) -> list:
    """A 1-D window of the given size in ``output_datatype``."""
    size = node.ints(0)
    return [TensorType(_code(node, "output_datatype", 1), (size[0] if size else None,))]


def loss(node: Node) -> list:
    """A scalar (``mean``/``sum``) or the target's shape (``none``); SoftmaxCrossEntropyLoss
    also gives the log-probabilities, shaped like the scores."""
    reduction = node.attr("reduction", "mean")
    reduction = reduction.decode() if isinstance(reduction, bytes) else reduction
    shape = node.shape(1) if reduction == "none" else ()
    value = TensorType(node.dtype(0), shape)
    return by_name(node, loss=value, output=value, log_prob=TensorType(node.dtype(0), node.shape(0)))


@rule("StringConcat")
def string_concat(node: Node) -> list:
    """Strings, broadcast."""
    return [TensorType("string", node.broadcast(node.shape(0), node.shape(1)))]


@rule("StringSplit")
def string_split(node: Node) -> list:
    """Substrings ``[*input, longest]`` and int64 counts shaped like the input."""
    x = node.shape(0)
    return by_name(node, Y=TensorType("string", None if x is None else (*x, None)), Z=TensorType("int64", x))


@rule("StringNormalizer")
def string_normalizer(node: Node) -> list:
    """Strings of the input's rank (stop words make the length unknown)."""
    x = node.shape(0)
    return [TensorType("string", None if x is None else (*x[:-1], None))]


@rule("RegexFullMatch")
def regex_full_match(node: Node) -> list:
    """Booleans shaped like the input."""
    return [TensorType("bool", node.shape(0))]


@rule("TfIdfVectorizer")
def tfidf_vectorizer(node: Node) -> list:
    """float32 ``[max(ngram_indexes) + 1]`` per row."""
    x = node.shape(0)
    width = max((int(i) for i in node.attr("ngram_indexes", ())), default=-1) + 1
    shape = None if x is None else ((width,) if len(x) == 1 else (x[0], width))
    return [TensorType("float32", shape)]
