"""Ops: the one registry of what amanda knows about each op type, and the op builders.

``amanda.ops.registry`` holds one :class:`~amanda.ops.registry.OpDef` per (namespace family,
domain, op type): kernels, type rule, gradient, effect, bodies, in-place facts …;
``amanda.ops.define`` (:mod:`amanda.ops.definition`) registers one op's facts side by side (docs/design.md, "Ops"). Any other
attribute is an op builder of the default namespace (``amanda.ops.Relu(x)``, see
docs/building.md), looked up in the ``op_builders`` engine that ``amanda.build`` installs.

>>> import amanda
>>> amanda.ops.registry.entry("amanda/onnx", "Relu").pure
True
>>> amanda.ops.Relu.schema.type
'Relu'
"""

from __future__ import annotations

from typing import Any

from amanda.engines import engine
from amanda.ops import catalog as catalog  # the shipped ops' effects, bodies and dtype facts
from amanda.ops import gradients as gradients  # and what is said of those with no gradient rule
from amanda.ops.definition import OpDefinition, define
from amanda.ops.effects import Effect
from amanda.ops.registry import OpDef

__all__ = ["Effect", "OpDef", "OpDefinition", "define"]


def __getattr__(name: str) -> Any:
    """An op builder of the default namespace (``amanda.ops.MatMul``)."""
    if name.startswith("_"):
        raise AttributeError(name)
    return getattr(engine("op_builders")(), name)  # the builder sits above the registry


def __dir__() -> list[str]:
    return sorted({*globals(), *dir(engine("op_builders")())})
