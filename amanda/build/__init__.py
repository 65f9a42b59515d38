"""The typed op builder: symbolic inputs, op functions generated from namespace schemas, and
``model(inputs, outputs)`` (docs/building.md)."""

from amanda.build.builder import DEFAULT_NAMESPACE, OpBuilder, Ops, ops
from amanda.build.model import model
from amanda.build.values import Call, Input, Value

__all__ = ["DEFAULT_NAMESPACE", "Call", "Input", "OpBuilder", "Ops", "Value", "model", "ops"]
