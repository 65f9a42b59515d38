"""Type rules: each op's ``type_rule`` in the op registry (:mod:`amanda.ops.registry`), by
(namespace family, domain, op type); ``rule`` is the way in for rule modules.

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

from amanda.ops.registry import ONNX, declare, entry, op_types

__all__ = ["ONNX", "Rule", "by_name", "lookup", "rule", "rule_op_types"]

Rule = Callable[[Any], Sequence[Any]]


def rule(*op_types: str, family: str = ONNX, domain: str = "") -> Callable[[Rule], Rule]:
    """Register ``fn`` as the type rule of every op type named."""

    def register(fn: Rule) -> Rule:
        for op_type in op_types:
            declare(op_type, family=family, domain=domain, type_rule=fn)
        return fn

    return register


def by_name(node: Any, **types: Any) -> list:
    """Output types in the op's declared port order, picked by the schema's port names (an
    op may declare only some of its optional outputs, LSTM writing just ``Y_h``)."""
    return [types.get(name) for name in node.op.output_names]


def lookup(family: str, domain: str, op_type: str) -> Rule | None:
    """The rule of ``op_type`` in a namespace family and domain, or None."""
    found = entry(family, op_type, domain=domain)
    return None if found is None else found.type_rule


def rule_op_types(family: str = ONNX, domain: str = "") -> list[str]:
    """Sorted op types that have a rule."""
    return sorted(op_types(family, domain=domain, where=lambda e: e.type_rule is not None))


from amanda.types.rules import (  # noqa: F401, E402  (each module registers its rules; after rule())
    control,
    elementwise,
    generators,
    indexing,
    linalg,
    shape,
    spatial,
    state,
)
