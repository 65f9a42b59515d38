"""Random ops of the ONNX default domain: RandomNormal, RandomUniform, their ``Like``
forms, Bernoulli and Multinomial.

With a ``seed`` attribute an op draws the same values on every run (numpy's PCG64 seeded
with the integer value of ``seed``); without one it draws fresh values each run.
The ``dtype`` attribute is an ONNX data type number; the ``Like`` forms default to the
input's dtype.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from amanda.exec.kernels.onnx_dtypes import onnx_dtype
from amanda.exec.kernels.registry import kernel
from amanda.ops import define
from amanda.types.node import Node
from amanda.types.rules.generators import dtype_from_attr
from amanda.types.tensor_type import TensorType

Attrs = Mapping[str, Any]


def _rng(attrs: Attrs) -> np.random.Generator:
    seed = attrs.get("seed")
    if seed is None or not np.isfinite(float(seed)):
        return np.random.default_rng()
    return np.random.default_rng(abs(int(float(seed))))


def _dtype(attrs: Attrs, like: np.ndarray | None = None, default: int = 1) -> np.dtype:
    code = attrs.get("dtype")
    if code is None or int(code) == 0:
        return like.dtype if like is not None else onnx_dtype(default)
    return onnx_dtype(int(code))


def _shape(attrs: Attrs) -> tuple[int, ...]:
    return tuple(int(d) for d in attrs.get("shape", ()))


def _normal(attrs: Attrs, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    values = _rng(attrs).standard_normal(shape) * float(attrs.get("scale", 1.0)) + float(attrs.get("mean", 0.0))
    return values.astype(dtype)


def _uniform(attrs: Attrs, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    low, high = float(attrs.get("low", 0.0)), float(attrs.get("high", 1.0))
    return _rng(attrs).uniform(low, high, shape).astype(dtype)


@kernel("RandomNormal", since=1)
def random_normal_kernel(attrs: Attrs) -> tuple:
    """ONNX RandomNormal: ``shape`` values from N(mean, scale^2)."""
    return (_normal(attrs, _shape(attrs), _dtype(attrs)),)


@kernel("RandomNormalLike", since=1)
def random_normal_like_kernel(attrs: Attrs, x: np.ndarray) -> tuple:
    """ONNX RandomNormalLike: normal values shaped like ``x``."""
    return (_normal(attrs, x.shape, _dtype(attrs, x)),)


@kernel("RandomUniform", since=1)
def random_uniform_kernel(attrs: Attrs) -> tuple:
    """ONNX RandomUniform: ``shape`` values from U[low, high)."""
    return (_uniform(attrs, _shape(attrs), _dtype(attrs)),)


@kernel("RandomUniformLike", since=1)
def random_uniform_like_kernel(attrs: Attrs, x: np.ndarray) -> tuple:
    """ONNX RandomUniformLike: uniform values shaped like ``x``."""
    return (_uniform(attrs, x.shape, _dtype(attrs, x)),)


@kernel("Bernoulli", since=15)
def bernoulli_kernel(attrs: Attrs, p: np.ndarray) -> tuple:
    """ONNX Bernoulli: 1 with probability ``p``, else 0, in ``dtype`` (default ``p``'s)."""
    draws = _rng(attrs).random(p.shape) < p
    return (draws.astype(_dtype(attrs, p)),)


@kernel("Multinomial", since=7)
def multinomial_kernel(attrs: Attrs, logits: np.ndarray) -> tuple:
    """ONNX Multinomial: ``sample_size`` class indices per row of unnormalised log-probabilities."""
    count = int(attrs.get("sample_size", 1))
    wide = logits.astype(np.float64)
    probs = np.exp(wide - wide.max(axis=1, keepdims=True))
    cumulative = np.cumsum(probs / probs.sum(axis=1, keepdims=True), axis=1)
    draws = _rng(attrs).random((logits.shape[0], count))
    picks = np.empty((logits.shape[0], count), np.int64)
    for row in range(logits.shape[0]):
        picks[row] = np.minimum(np.searchsorted(cumulative[row], draws[row], side="right"), logits.shape[1] - 1)
    return (picks.astype(onnx_dtype(int(attrs.get("dtype", 6)))),)


def multinomial(node: Node) -> list:
    """``[batch, sample_size]`` class indices (int32 by default)."""
    x = node.shape(0)
    return [TensorType(dtype_from_attr(node, "dtype", 6), (x[0] if x else None, int(node.attr("sample_size", 1))))]


define("Multinomial", type_rule=multinomial, no_gradient="a random draw")


# ---- type rules and gradients shared by several ops of this family ----


def random_from_shape(node: Node) -> list:
    """``shape`` values in ``dtype`` (default float32)."""
    return [TensorType(dtype_from_attr(node, "dtype", 1), tuple(int(d) for d in node.attr("shape", ())))]


def random_like(node: Node) -> list:
    """The input's shape, in ``dtype`` or the input's dtype."""
    return [TensorType(dtype_from_attr(node, "dtype", 0) or node.dtype(0), node.shape(0))]


# each op's type rule and gradient, beside the kernels registered above
define("Bernoulli", type_rule=random_like, no_gradient="a random draw")
define("RandomNormal", type_rule=random_from_shape, no_gradient="a random draw")
define("RandomNormalLike", type_rule=random_like, no_gradient="its values do not depend on its input's values")
define("RandomUniform", type_rule=random_from_shape, no_gradient="a random draw")
define("RandomUniformLike", type_rule=random_like, no_gradient="its values do not depend on its input's values")
