"""The typed op builder: symbolic inputs, op functions generated from namespace schemas, and
``model(inputs, outputs)`` (docs/building.md)."""

from amanda.build.builder import DEFAULT_NAMESPACE, OpBuilder, Ops, ops
from amanda.build.model import apply, model
from amanda.build.values import Call, Input, Value
from amanda.engines import install

__all__ = ["DEFAULT_NAMESPACE", "Call", "Input", "OpBuilder", "Ops", "Value", "model", "ops"]

install("apply", apply)  # layer(x) on builder values
install("op_builders", lambda: ops)  # amanda.ops.Relu(x)
