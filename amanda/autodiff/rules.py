"""The table of vector-Jacobian rules: ``(namespace family, op type) -> rule``.

A rule takes a :class:`~amanda.autodiff.node.Node` (the forward op, its input and output
values, its outputs' gradients) and returns one gradient (or None) per input port, built
with builder ops. Ops that share a rule share the function: every elementwise op of one
input is ``unary_vjp``; Reshape, Flatten, Squeeze and Unsqueeze are ``reshape_vjp``.

>>> RULES[("onnx", "Relu")].__name__
'unary_vjp'
>>> family("amanda/onnx/17")
'onnx'
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from amanda.autodiff.rules_math import (
    add_vjp,
    div_vjp,
    gemm_vjp,
    log_softmax_vjp,
    matmul_vjp,
    mul_vjp,
    pow_vjp,
    reduce_vjp,
    softmax_vjp,
    sub_vjp,
    unary_vjp,
)
from amanda.autodiff.rules_nn import avgpool_vjp, batchnorm_vjp, conv_vjp, layernorm_vjp, maxpool_vjp, softmax_xent_vjp
from amanda.autodiff.rules_shape import (
    cast_vjp,
    concat_vjp,
    dropout_vjp,
    expand_vjp,
    reshape_vjp,
    select_vjp,
    split_vjp,
    transpose_vjp,
    where_vjp,
)

__all__ = ["RULES", "family"]

Rule = Callable[[Any], list]

_ONNX: dict[str, Rule] = {
    "Add": add_vjp, "Sub": sub_vjp, "Mul": mul_vjp, "Div": div_vjp, "Pow": pow_vjp,
    "MatMul": matmul_vjp, "Gemm": gemm_vjp,
    **dict.fromkeys(["Neg", "Sqrt", "Exp", "Log", "Abs", "Tanh", "Sigmoid", "Relu", "LeakyRelu", "Elu", "Erf",
                     "Gelu", "Identity"], unary_vjp),
    "Softmax": softmax_vjp, "LogSoftmax": log_softmax_vjp,
    **dict.fromkeys(["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "GlobalAveragePool"], reduce_vjp),
    **dict.fromkeys(["Reshape", "Flatten", "Squeeze", "Unsqueeze"], reshape_vjp),
    "Expand": expand_vjp, "Transpose": transpose_vjp, "Concat": concat_vjp, "Split": split_vjp,
    **dict.fromkeys(["Slice", "Gather"], select_vjp),
    "Where": where_vjp, "Cast": cast_vjp, "Dropout": dropout_vjp,
    "Conv": conv_vjp, "MaxPool": maxpool_vjp, "AveragePool": avgpool_vjp,
    "BatchNormalization": batchnorm_vjp, "LayerNormalization": layernorm_vjp,
    "SoftmaxCrossEntropyLoss": softmax_xent_vjp,
}

#: (namespace family, op type) -> vector-Jacobian rule
RULES: dict[tuple[str, str], Rule] = {("onnx", op_type): rule for op_type, rule in _ONNX.items()}


def family(namespace: str) -> str:
    """A namespace's family: ``amanda/onnx/17`` -> ``onnx``."""
    parts = str(namespace).split("/")
    return parts[1] if len(parts) >= 3 and parts[0] == "amanda" else parts[0]
