"""What amanda says about the gradients of the shipped ops that have no vector-Jacobian rule:
``no_gradient`` (no input gets a gradient through the op, and why) or ``gradient_gap`` (the op
has a gradient, amanda has no rule for it yet: ``grad`` through it is an error naming the op
and this reason). The rules themselves live in :mod:`amanda.autodiff` (they build backward
ops with the builder, a layer above this one).

>>> from amanda.ops.registry import entry
>>> entry("amanda/onnx", "ArgMax").no_gradient, entry("amanda/onnx", "ArgMax").differentiable
('integer output (positions)', False)
"""

from __future__ import annotations

from amanda.ops.catalog import TENSORFLOW
from amanda.ops.registry import ONNX, declare


def _mark(op_types: tuple[str, ...], family: str = ONNX, **reason: str) -> None:
    for op_type in op_types:
        declare(op_type, family=family, **reason)

__all__: list[str] = []

CORE = "amanda/core"
TRAIN = "amanda/train"
DIST = "amanda/dist"

Marks = tuple[tuple[str, str, tuple[str, ...]], ...]

# no input gets a gradient through these: their outputs are integers, booleans, shapes, or
# values the inputs give only the shape of
NO_GRADIENT: Marks = ()

# these have a gradient that amanda has no rule for (yet)
GAPS: Marks = (
    (CORE, "session state: gradients are taken with respect to values, not through variable ops", (
        "Variable", "Read", "Assign", "AssignAdd",
    )),
    (TENSORFLOW, "a TensorFlow op: amanda differentiates a graph in its ONNX form", (
        "VariableV2", "Assign", "AssignAdd", "AssignSub", "Identity", "NoOp", "Placeholder",
    )),
    (TRAIN, "an optimiser's update step", ("AdamStep",)),
    (DIST, "a transfer between the parts of a partitioned model: differentiate before partitioning", ("Send", "Recv")),
)

for _family, _reason, _ops in NO_GRADIENT:
    _mark(_ops, _family, no_gradient=_reason)
for _family, _reason, _ops in GAPS:
    _mark(_ops, _family, gradient_gap=_reason)
