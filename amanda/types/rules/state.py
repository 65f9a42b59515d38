"""Type rules of amanda's own op families: the session-state ops of ``amanda/core`` and of
TensorFlow graphs, the optimiser step of ``amanda/train``, the fused ops ``optimize`` makes and
the Send/Recv pairs that join the parts of a partitioned model (``amanda/dist``).

A variable's reference is typed as the value it refers to, so that ``Read`` gives that type.
"""

from __future__ import annotations

import numpy as np

from amanda.types.dtypes import dtype_name
from amanda.types.node import Node
from amanda.types.rules import rule
from amanda.types.tensor_type import TensorType

__all__ = ["adam_step", "assigned", "declared_only", "first_input", "no_outputs", "passed_on", "variable"]

CORE = "amanda/core"
TENSORFLOW = "amanda/tensorflow"
TRAIN = "amanda/train"
FUSED = "amanda/fused"
DIST = "amanda/dist"



@rule("Variable", family=CORE)
def variable(node: Node) -> list:
    """The type of the variable's initial ``value``, or of zeros of ``shape`` and ``dtype``;
    unknown when it has neither (a run then refuses it)."""
    value = node.attr("value")
    if value is not None:
        array = np.asarray(value)
        return [TensorType(dtype_name(array.dtype), array.shape)]
    shape = node.attr("shape")
    if shape is None:
        return [None]
    return [TensorType(dtype_name(np.dtype(node.attr("dtype", "float32"))), tuple(int(d) for d in shape))]


@rule("Read", "AssignAdd", family=CORE)
@rule("Identity", "Assign", "AssignAdd", "AssignSub", family=TENSORFLOW)
def first_input(node: Node) -> list:
    """The variable's value (or reference) that arrives first: its type is the output's."""
    return [node.type(0)]


@rule("Send", "Recv", family=DIST)
def passed_on(node: Node) -> list:
    """The value passed on (Send of a control edge alone passes an empty boolean token)."""
    return [node.type(0) if node.present(0) else TensorType("bool", (0,))]


@rule("Assign", family=CORE)
def assigned(node: Node) -> list:
    """The new value, as assigned."""
    return [node.type(1)]


@rule("VariableV2", "Placeholder", family=TENSORFLOW)
def declared_only(node: Node) -> list:
    """A TensorFlow variable or placeholder: typed by what its output port declares."""
    return [None]


@rule("NoOp", family=TENSORFLOW)
def no_outputs(node: Node) -> list:
    """A NoOp orders the ops around it and has no outputs."""
    return []


@rule("AdamStep", family=TRAIN)
def adam_step(node: Node) -> list:
    """The new weight and moments have the types of the old ones."""
    return [node.type(0), node.type(2), node.type(3)]
