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


@rule("HannWindow", "HammingWindow", "BlackmanWindow")
def window(node: Node) -> list:
    """A 1-D window of the given size in ``output_datatype``."""
    size = node.ints(0)
    return [TensorType(_code(node, "output_datatype", 1), (size[0] if size else None,))]


@rule("MelWeightMatrix")
def mel_weight_matrix(node: Node) -> list:
    """``[dft_length // 2 + 1, num_mel_bins]``."""
    bins, n = node.ints(0), node.ints(1)
    shape = (n[0] // 2 + 1 if n else None, bins[0] if bins else None)
    return [TensorType(_code(node, "output_datatype", 1), shape)]


@rule("DFT")
def dft(node: Node) -> list:
    """The input's shape with the last axis 2 (1 for an inverse one-sided transform), the
    transformed axis resized to the DFT length (or its one-sided half)."""
    x = node.shape(0)
    if x is None:
        return [TensorType(node.dtype(0), None)]
    inverse, onesided = bool(node.attr("inverse", 0)), bool(node.attr("onesided", 0))
    if node.opset >= 20:
        given = node.ints(2) if node.present(2) else [-2]
        axis = given[0] if given else None
    else:
        axis = int(node.attr("axis", 1))
    shape = list(x)
    if axis is None:
        return [TensorType(node.dtype(0), (None,) * len(x))]
    axis = axis % len(x)
    lengths = node.ints(1) if node.present(1) else None
    length = lengths[0] if lengths else None
    if inverse and onesided:
        n = length if length is not None else (2 * (x[axis] - 1) if type(x[axis]) is int else None)
        shape[axis], shape[-1] = n, 1
    else:
        n = length if length is not None else x[axis]
        shape[axis] = (n // 2 + 1 if type(n) is int else None) if onesided else n
        shape[-1] = 2
    return [TensorType(node.dtype(0), tuple(shape))]


@rule("STFT")
def stft(node: Node) -> list:
    """``[batch, frames, bins, 2]``."""
    x = node.shape(0)
    step = node.ints(1)
    lengths = node.ints(3) if node.present(3) else None
    length = lengths[0] if lengths else None
    if length is None and node.present(2):
        w = node.shape(2)
        length = w[0] if w is not None and type(w[0]) is int else None
    frames = None
    if x is not None and type(x[1]) is int and length and step:
        frames = 1 + (x[1] - length) // step[0]
    real = x is not None and x[-1] == 1
    bins = (length // 2 + 1 if real and int(node.attr("onesided", 1)) else length) if length else None
    return [TensorType(node.dtype(0), (x[0] if x else None, frames, bins, 2))]


@rule("NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss")
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
