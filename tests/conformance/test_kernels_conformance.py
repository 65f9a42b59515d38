"""ONNX backend node tests for the math kernels (elementwise, activations, reductions,
linear algebra, normalization, casts): each op type passes at least 95% of its cases."""

from __future__ import annotations

import onnx_cases
import pytest

MIN_PASS_RATE = 0.95

MATH_OP_TYPES = [
    # elementwise arithmetic and math
    "Add", "Sub", "Mul", "Div", "Pow", "Mod", "Neg", "Abs", "Reciprocal", "Sqrt", "Exp", "Log",
    "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Tanh", "Asinh", "Acosh",
    "Atanh", "Floor", "Ceil", "Round", "Sign", "Erf", "IsNaN", "IsInf", "Max", "Min", "Mean",
    "Sum", "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot",
    # logic
    "And", "Or", "Xor", "Not", "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual",
    "Where",
    # activations
    "Relu", "LeakyRelu", "PRelu", "Elu", "Selu", "Celu", "Sigmoid", "HardSigmoid", "HardSwish",
    "Softplus", "Softsign", "ThresholdedRelu", "Gelu", "Mish", "Shrink", "Clip",
    "Softmax", "LogSoftmax", "Hardmax",
    # reductions
    "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
    "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare", "ArgMax", "ArgMin", "CumSum",
    # linear algebra
    "MatMul", "Gemm", "Einsum", "MatMulInteger",
    # normalization
    "BatchNormalization", "LayerNormalization", "InstanceNormalization", "GroupNormalization",
    "LpNormalization", "MeanVarianceNormalization",
    # identity and casts
    "Dropout", "Identity", "Cast", "CastLike",
]


@pytest.mark.parametrize("op_type", MATH_OP_TYPES)
def test_op_passes_backend_cases(op_type: str) -> None:
    """At least 95% of the op's ONNX backend node cases pass, dtypes and shapes included."""
    passed, total, failures = onnx_cases.pass_counts([op_type])[op_type]
    for line in failures:
        print(line)
    assert total > 0, f"no backend cases for {op_type}"
    assert passed >= MIN_PASS_RATE * total, f"{op_type}: {passed}/{total} passed"
