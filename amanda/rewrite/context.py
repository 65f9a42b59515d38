"""What a driver tells rules about where they apply, and the questions rules ask of it.

A driver (the optimiser's passes, :func:`amanda.passes.rules.apply_rules`) gives each match a
:class:`MatchContext`: the namespace of the level matched, whether ops of amanda's own (namespace
``amanda/fused``, run only by amanda) may be made there, and the inferred types of the model
with the level's path. Rules ask it two things: :func:`target`, where an op that needs an ONNX
opset can live, and :func:`rank`, the inferred rank of an input of a matched op;
:func:`const_value` reads the array of a ``const`` variable. A match made
without a context (:func:`amanda.rewrite.rewrite`) reads as ``MatchContext()``: the ops' own
namespace, no op of amanda's own, no types.

>>> onnx_opset("amanda/onnx/20"), onnx_opset("amanda/onnx/com.example/2"), onnx_opset(None)
(20, 0, 0)
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from amanda.errors import ArgumentError
from amanda.namespaces.name import NamespaceName
from amanda.ops.catalog import FUSED

__all__ = ["MatchContext", "const_value", "context_of", "onnx_opset", "rank", "target"]


class MatchContext(NamedTuple):
    """A match's context: the level's ``namespace``, whether amanda's own ops may be made
    (``internal``), and ``types`` (a :class:`~amanda.types.TypeMap` of the model, or None)
    with the level's ``path`` in that model. (A named tuple: a pass makes one per level.)"""

    namespace: str | None = None
    internal: bool = False
    types: Any = None
    path: tuple = ()


def onnx_opset(namespace: Any) -> int:
    """The opset of a namespace of ONNX's default domain (``amanda/onnx/20`` -> 20); 0 for any
    other name, one without a version, or no name."""
    if not isinstance(namespace, str) or not namespace:
        return 0
    name = NamespaceName.parse(namespace)
    return (name.opset or 0) if name.is_onnx else 0


def context_of(match: Any) -> MatchContext:
    """The context ``match`` was made with (``MatchContext()`` for none or one of another kind)."""
    return match.context if isinstance(match.context, MatchContext) else MatchContext()


def target(match: Any, since: int) -> dict[str, Any] | None:
    """The attributes placing an op that ONNX defines from opset ``since`` in place of
    ``match``: the matched ops' own namespace (the first that sets one, else the level's)
    when its opset is ``since`` or later; amanda's own (``{"namespace": "amanda/fused"}``)
    when the context allows it; else None (the op cannot be made here)."""
    context = context_of(match)
    found = next((match.view.ops[k].attrs["namespace"] for k in match.keys if "namespace" in match.view.ops[k].attrs),
                 None)
    own = {} if found is None else {"namespace": found}
    if onnx_opset(own.get("namespace", context.namespace)) >= since:
        return own
    return {"namespace": FUSED} if context.internal else None


def rank(match: Any, capture: str, port: int = 0) -> int | None:
    """The inferred rank of input ``port`` of the op captured as ``capture``, from the
    context's types (None when there are none or the rank is unknown)."""
    context = context_of(match)
    if context.types is None:
        return None
    node = match.op(capture)
    found = context.types.input(context.path + (node.name,), node.inputs[port].name)
    shape = getattr(found, "shape", None)
    return len(shape) if isinstance(shape, tuple) else None


def const_value(match: Any, var: str) -> np.ndarray:
    """The array of ``const`` variable ``var`` of ``match`` (the rule's requirements have
    checked that a ``Constant`` produces it); an ArgumentError when none does."""
    found = match.constant(var)
    if found is None:
        raise ArgumentError.at(f"{match.rule.name}.{var}", "the value of a Constant op", "another value")
    return found
