"""Type rules: a table from (namespace family, domain, op type) to a rule function.

A rule is ``rule(node) -> sequence of output types`` (see :class:`amanda.types.node.Node`);
it raises ``TypeMismatch`` for an ill-typed op and may record known output values with
``node.set_value``. Rules are written once per family where ops share one (unary elementwise,
broadcasting binary, reductions, pooling …) and individually where they must be.

>>> lookup("amanda/onnx", "", "Relu").__name__
'same_as_first'
>>> lookup("amanda/onnx", "", "NoSuchOp") is None
True
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["ONNX", "Rule", "by_name", "lookup", "rule", "rule_op_types"]

ONNX = "amanda/onnx"

Rule = Callable[[Any], Sequence[Any]]
_RULES: dict[tuple[str, str, str], Rule] = {}


def rule(*op_types: str, family: str = ONNX, domain: str = "") -> Callable[[Rule], Rule]:
    """Register ``fn`` as the type rule of every op type named."""

    def register(fn: Rule) -> Rule:
        for op_type in op_types:
            _RULES[(family, domain, op_type)] = fn
        return fn

    return register


def by_name(node: Any, **types: Any) -> list:
    """Output types in the op's declared port order, picked by the schema's port names (an
    op may declare only some of its optional outputs, LSTM writing just ``Y_h``)."""
    return [types.get(name) for name in node.op.output_names]


def lookup(family: str, domain: str, op_type: str) -> Rule | None:
    """The rule of ``op_type`` in a namespace family and domain, or None."""
    return _RULES.get((family, domain, op_type))


def rule_op_types(family: str = ONNX, domain: str = "") -> list[str]:
    """Sorted op types that have a rule."""
    return sorted(t for (f, d, t) in _RULES if f == family and d == domain)


from amanda.types.rules import (  # noqa: F401, E402  (each module registers its rules; after rule())
    control,
    elementwise,
    generators,
    indexing,
    linalg,
    quantize,
    sequence,
    shape,
    spatial,
    vision,
)
