"""The table of vector-Jacobian rules: ``(namespace family, op type) -> rule``.

A rule takes a :class:`~amanda.autodiff.node.Node` (the forward op, its input and output
values, its outputs' gradients) and returns one gradient (or None) per input port, built
with builder ops. Ops that share a rule share the function: every elementwise op of one
input is ``unary_vjp``; Reshape, Flatten, Squeeze and Unsqueeze are ``reshape_vjp``.

>>> RULES[("amanda/onnx", "Relu")].__name__
'unary_vjp'
>>> family("amanda/onnx/17"), family("amanda/onnx/com.example/2")
('amanda/onnx', 'amanda/onnx')
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import Any

from amanda.autodiff.rules_shape import (
    no_gradient_vjp,
)
from amanda.exec.kernels.registry import ONNX as ONNX
from amanda.exec.kernels.registry import OpDef, entries, entry
from amanda.namespaces.name import NamespaceName

__all__ = ["RULES", "VJP", "WITHOUT_RULE", "family", "rule_for"]

Rule = Callable[[Any], list]

#: differentiable ops with a kernel that have no rule yet, and what one would take: ``grad`` of a
#: model using one between ``wrt`` and the loss is a SchemaError naming the op
WITHOUT_RULE: Mapping[str, str] = MappingProxyType({})

#: the registry fact holding an op type's vector-Jacobian rule
VJP = "autodiff.vjp"

def _rule_of(found: OpDef | None) -> Rule | None:
    if found is None:
        return None
    if found.vjp is not None:
        return found.vjp
    return no_gradient_vjp if found.no_gradient is not None else None


class _Rules(Mapping[tuple[str, str], Rule]):
    """(namespace family, op type) -> vector-Jacobian rule: a live, read-only listing of the
    registry's rules in the default domain (``no_gradient_vjp`` for an op marked ``no_gradient``)."""

    def __getitem__(self, key: tuple[str, str]) -> Rule:
        found = _rule_of(entry(key[0], key[1]))
        if found is None:
            raise KeyError(key)
        return found

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter([(e.family, e.op_type) for e in entries(domain="") if _rule_of(e) is not None])

    def __len__(self) -> int:
        return sum(1 for _ in self)


RULES: Mapping[tuple[str, str], Rule] = _Rules()


def rule_for(namespace: str, op_type: str) -> Rule | None:
    """The vector-Jacobian rule of ``op_type`` in ``namespace`` (from the op registry), or None;
    ``no_gradient_vjp`` for an op marked ``no_gradient``.

    >>> rule_for("amanda/onnx/17", "Relu").__name__, rule_for("amanda/onnx/17", "NoSuchOp")
    ('unary_vjp', None)
    """
    name = NamespaceName.parse(namespace)
    return _rule_of(entry(name.family, str(op_type), domain=name.domain))


def family(namespace: str) -> str:
    """A namespace's family, as :meth:`NamespaceName.parse` reads it: ``amanda/onnx/17`` ->
    ``amanda/onnx``."""
    return NamespaceName.parse(namespace).family
