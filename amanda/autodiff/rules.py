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

from collections.abc import Callable, Mapping
from types import MappingProxyType
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
from amanda.containers.checks import expect_str
from amanda.exec.kernels.registry import ONNX, fact, register_fact

__all__ = ["RULES", "VJP", "family", "rule_for"]

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

#: the registry fact holding an op type's vector-Jacobian rule
VJP = "autodiff.vjp"
for _op_type, _rule in _ONNX.items():  # the rules live in the op registry, beside the kernels
    register_fact(ONNX, _op_type, VJP, _rule)

#: (namespace family, op type) -> vector-Jacobian rule: a read-only listing of the registry's facts
RULES: Mapping[tuple[str, str], Rule] = MappingProxyType(
    {("onnx", op_type): fact(ONNX, op_type, VJP) for op_type in _ONNX})


def rule_for(namespace: str, op_type: str) -> Rule | None:
    """The vector-Jacobian rule of ``op_type`` in ``namespace`` (from the op registry), or None.

    >>> rule_for("amanda/onnx/17", "Relu").__name__, rule_for("amanda/onnx/17", "NoSuchOp")
    ('unary_vjp', None)
    """
    registry_family = "/".join(p for p in str(namespace).split("/") if not p.isdigit())
    return fact(registry_family, str(op_type), VJP)


def family(namespace: str) -> str:
    """A namespace's family: ``amanda/onnx/17`` -> ``onnx``."""
    expect_str(namespace, "namespace", "a namespace name such as 'amanda/onnx/17'")
    parts = namespace.split("/")
    return parts[1] if len(parts) >= 3 and parts[0] == "amanda" else parts[0]
