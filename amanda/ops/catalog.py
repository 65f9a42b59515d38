"""The facts of amanda's shipped ops that belong to no kernel, rule or gradient: effects, the
attributes holding bodies, fresh outputs and dtype rules. This module is their one home; every
other module asks the registry (:func:`amanda.ops.registry.op_types`, ``entry(...).effect``).

>>> from amanda.ops.registry import entry
>>> entry("amanda/onnx", "If").bodies, entry("amanda/core", "Read").effect.value
(('then_branch', 'else_branch'), 'stateful')
"""

from __future__ import annotations

from amanda.ops.effects import Effect
from amanda.ops.registry import declare, register_fact

__all__: list[str] = []

TENSORFLOW = "amanda/tensorflow"
FUSED = "amanda/fused"

# draws new values on each run: never merged, removed, folded or cached
for _op in ("RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli"):
    declare(_op, effect=Effect.RANDOM)

# runs graphs held in its attributes
for _op, _bodies in (("If", ("then_branch", "else_branch")), ("Loop", ("body",)), ("Scan", ("body",)),
                     ("SequenceMap", ("body",))):
    declare(_op, effect=Effect.CONTROL, bodies=_bodies)

# reads or writes session state, with no kernel to say so (``exec.state.stateful_kernel``
# declares the effect of the ops it registers, amanda/core's Variable, Read, Assign …)
for _op in ("Variable", "ReadVariable", "Print"):
    declare(_op, family=TENSORFLOW, effect=Effect.STATEFUL)

# creates a TensorFlow variable: a SavedModel's checkpoint holds its initial value
VARIABLE = "tensorflow.variable"
for _op in ("VarHandleOp", "VariableV2", "Variable"):
    register_fact(TENSORFLOW, _op, VARIABLE, True)

# lowered TensorFlow control flow (a loop frame's and a conditional's plumbing), which the
# TensorFlow -> ONNX table raises back to While and If before its rules run
LOWERED_CONTROL_FLOW = "tensorflow.lowered_control_flow"
for _op in ("Enter", "Exit", "Merge", "Switch", "NextIteration", "LoopCond"):
    register_fact(TENSORFLOW, _op, LOWERED_CONTROL_FLOW, True)

# binary ops whose two operands may be swapped (what a rewrite rule with ``commute=True`` tries)
COMMUTATIVE = "commutative"
for _op in ("Add", "Mul", "And", "Or", "Xor", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "Equal", "Max", "Mean", "Min",
            "Sum"):
    register_fact("amanda/onnx", _op, COMMUTATIVE, True)

# kernels that run unchanged on the arrays of a library implementing NumPy's dispatch protocols
# (CuPy's on a GPU): each passes every ONNX node case of the dtypes such a device holds on arrays
# that refuse host memory, with no Python-level loop (tests/exec/test_backend_arrays.py); the
# ``cupy`` device runs them. Mod passes there but not on CuPy: its fmod gives other values than
# C's on ONNX's edge cases (infinities, zeros), as seen on an H100 with CuPy 14
DEVICE_ARRAYS = "device_arrays"
for _op in (
    "Abs", "Acos", "Acosh", "Add", "And", "ArgMax", "ArgMin", "Asin", "Asinh", "Atan", "Atanh",
    "BatchNormalization", "BitShift", "BitwiseAnd", "BitwiseNot", "BitwiseOr", "BitwiseXor", "Cast",
    "CastLike", "Ceil", "Celu", "Clip", "Cos", "Cosh", "DequantizeLinear", "Div", "Einsum", "Elu", "Equal",
    "Exp", "Flatten", "Floor", "Gather", "GatherElements", "Gelu", "Gemm", "GlobalMaxPool", "Greater", "GreaterOrEqual",
    "GroupNormalization", "HardSigmoid", "HardSwish", "Identity", "InstanceNormalization", "IsInf", "IsNaN",
    "LRN", "LayerNormalization", "LeakyRelu", "Less", "LessOrEqual", "Log", "LogSoftmax", "LpNormalization",
    "MatMul", "Max", "Mean", "MeanVarianceNormalization", "Min", "Mish", "Mul", "Neg", "Not", "Or",
    "PRelu", "Pad", "RMSNormalization", "Reciprocal", "ReduceL1", "ReduceL2", "ReduceLogSum",
    "ReduceLogSumExp", "ReduceMax", "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSum", "ReduceSumSquare",
    "Relu", "Reshape", "RotaryEmbedding", "Round", "STFT", "Scatter", "Selu", "Shrink", "Sign", "Sin", "Sinh",
    "Slice", "Softplus", "Softsign", "Sqrt", "Squeeze", "Sub", "Sum", "SwiGLU", "Swish", "Tan", "Tanh",
    "TensorScatter", "ThresholdedRelu", "Tile", "Transpose", "Trilu", "Unsqueeze", "Where", "Xor",
):
    register_fact("amanda/onnx", _op, DEVICE_ARRAYS, True)

# the output is the op's ``value`` attribute: known before any run
declare("Constant", constant=True)

# kernels that always return memory shared with nothing else (a test checks each against the
# ONNX backend cases), so a later op may write into it
for _op in ("Add", "Sub", "Mul", "Div", "MatMul", "Gemm", "Conv", "ConvTranspose", "Relu", "Sigmoid",
            "Tanh", "Exp", "Sqrt", "Neg", "Softmax", "LayerNormalization", "BatchNormalization",
            "MaxPool", "AveragePool", "Erf", "Pow", "LeakyRelu", "Gelu"):
    declare(_op, fresh=True)
for _op in ("Gelu", "Swish", "MatMulAdd"):  # amanda's own fused ops
    declare(_op, family=FUSED, fresh=True)

# the first output has the dtype of the first input (not TopK's Indices nor Dropout's mask)
for _op in (
    "Abs", "Add", "AveragePool", "BatchNormalization", "Ceil", "Clip", "Concat", "Conv", "ConvTranspose",
    "DepthToSpace", "Div", "Dropout", "Elu", "Exp", "Expand", "Flatten", "Floor", "Gather", "Gemm",
    "GlobalAveragePool", "GlobalLpPool", "GlobalMaxPool", "HardSigmoid", "Identity", "InstanceNormalization",
    "LRN", "LeakyRelu", "Log", "LogSoftmax", "LpNormalization", "LpPool", "MatMul", "Max", "MaxPool", "Mean",
    "Min", "Mul", "Neg", "PRelu", "Pad", "Pow", "Reciprocal", "ReduceL1", "ReduceL2", "ReduceLogSum",
    "ReduceLogSumExp", "ReduceMax", "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSum", "ReduceSumSquare",
    "Relu", "Reshape", "Resize", "Selu", "Sigmoid", "Slice", "Softmax", "Softplus", "Softsign", "SpaceToDepth",
    "Split", "Sqrt", "Squeeze", "Sub", "Sum", "Tanh", "Tile", "TopK", "Transpose", "Unsqueeze", "Upsample",
):
    declare(_op, dtype_rule="same")
