"""Cleanup passes: dead-code elimination, identity removal, common-subexpression elimination.

Each is a pure transform of a container: the input is never modified, untouched ops are the
same objects (same paths, uids and metadata), and the result pairs the new model with a
:class:`PassReport` of what changed.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from amanda.containers import SELF, Container, Endpoint
from amanda.containers.arguments import expect_container
from amanda.namespaces.name import NamespaceName
from amanda.ops.registry import ONNX, effect_of
from amanda.passes.level import Level, level_namespaces, on_levels, producer_name
from amanda.passes.report import PassReport, PassResult
from amanda.passes.rules import apply_rules
from amanda.rewrite import Match, Optional, Rule

__all__ = ["IDENTITIES", "eliminate_common_subexpressions", "eliminate_dead_code", "remove_identities"]

def effectful(node: Container, namespace: str | None = None) -> bool:
    """Whether op ``node`` (in its own namespace, else ``namespace``, the level's) has effects
    beyond its outputs (randomness, state, I/O, bodies): such ops are never removed, merged or
    folded. An op of no known namespace is read as ONNX's, else at its least pure over the
    families that know it.

    >>> from amanda.containers import op
    >>> effectful(op("RandomNormal", "r")), effectful(op("Identity", "i"), "amanda/onnx/17")
    (True, False)
    """
    op_type = str(node.type)
    if effect_of(op_type).pure:
        return False  # pure in every family that knows it: no need to read the namespace
    ns = node.attrs.get("namespace", namespace)
    name = NamespaceName.parse(str(ns)) if ns else None
    return not effect_of(op_type, name.family if name else ONNX, name.domain if name else "").pure


def _removable(node: Container, namespace: str | None) -> bool:
    return node.is_op and bool(node.outputs) and not effectful(node, namespace)


def _dead_level(model: Container, path: tuple, namespaces: Any) -> tuple[Container, dict]:
    level = Level.of(model)
    if level is None:
        return model, {}
    live: set[str] = set()
    stack = [name for name, node in level.ops.items()
             if name in level.pinned or not _removable(node, namespaces.get(path))
             or any(r.op is SELF for p in node.outputs for r in level.reads(Endpoint((name,), p.name)))]
    while stack:
        name = stack.pop()
        if name in live:
            continue
        live.add(name)
        stack.extend(p for p in map(producer_name, level.inputs(name)) if p is not None and p not in live)
    dead = [name for name in level.ops if name not in live]
    return (level.rebuild(drop=dead), {"removed": dead}) if dead else (model, {})


def eliminate_dead_code(model: Container) -> PassResult:
    """Remove ops whose outputs reach no output of their level (effectful and pinned ops stay).

    >>> import amanda
    >>> g = amanda.Container(None, "g", inputs=["x"], outputs=["y"], children=[amanda.op("Relu", "r", ["X"], ["Y"]),
    ...     amanda.op("Neg", "unused", ["X"], ["Y"])], edges=[("g:x", "r:X"), ("g:x", "unused:X"), ("r:Y", "g:y")])
    >>> out, report = eliminate_dead_code(g)
    >>> [c.name for c in out.children], report.removed
    (['r'], ('unused',))
    """
    expect_container(model, "model")
    out, changes = on_levels(model, _dead_level, level_namespaces(model))
    return PassResult(out, PassReport.of("eliminate_dead_code", changes))


def _not_input_to_output(m: Match) -> bool:
    """False for an op passing a level input straight to a level output: it keeps the ports distinct."""
    view = m.view
    result = view.endpoint(m.root, view.ops[m.root].outputs[0].name)
    return view.key(m.values["x"]) is not None or all(view.key(r) is not None for r in view.reads(result))


# an Identity, and an inference Dropout (its mask unread, no training_mode input), pass x on
IDENTITIES = (Rule("identity", lambda op, x: op.Identity(x), lambda op, x: x, guard=_not_input_to_output,
                   check=False),
              Rule("dropout", lambda op, x, ratio: op.Dropout(x, Optional(ratio)), lambda op, x: x,
                   guard=_not_input_to_output, check=False))


def remove_identities(model: Container) -> PassResult:
    """Remove Identity ops (and inference-mode Dropout whose mask is unused), rewiring readers.

    >>> import amanda
    >>> g = amanda.Container(None, "g", inputs=["x"], outputs=["y"], children=[amanda.op("Identity", "i", ["input"], ["output"]),
    ...     amanda.op("Relu", "r", ["X"], ["Y"])], edges=[("g:x", "i:input"), ("i:output", "r:X"), ("r:Y", "g:y")])
    >>> out, report = remove_identities(g)
    >>> [c.name for c in out.children], list(out.edges)
    (['r'], [Edge('SELF:x', 'r:X'), Edge('r:Y', 'SELF:y')])
    """
    expect_container(model, "model")
    return apply_rules("remove_identities", model, IDENTITIES, kind="removed")


# larger arrays (weights) are compared by the memory they view: hashing every weight's bytes
# costs more than merging the rare duplicate saves (attrs hand out fresh views, so not id())
MERGED_ELEMENTS = 4096


def _attr_key(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        if value.size > MERGED_ELEMENTS:
            return ("buffer", value.dtype.str, value.shape, value.strides, value.__array_interface__["data"][0])
        return ("ndarray", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, (list, tuple)):
        return tuple(_attr_key(v) for v in value)
    if isinstance(value, (str, bytes, int, float, bool, type(None))):
        return value
    return ("object", id(value))  # anything else is never merged with another op's


def _signature(node: Container, level: Level) -> Any:
    attrs = tuple(sorted((k, _attr_key(v)) for k, v in node.attrs.items()))
    return (node.type, attrs, tuple(p.name for p in node.inputs), tuple(p.name for p in node.outputs),
            tuple(level.inputs(node.name)))


def _cse_level(model: Container, path: tuple, namespaces: Any) -> tuple[Container, dict]:
    level = Level.of(model)
    if level is None:
        return model, {}
    first: dict[Any, str] = {}
    rewire: dict[Endpoint, Endpoint] = {}
    gone = []
    for name in level.order():
        node = level.ops[name]
        if not _removable(node, namespaces.get(path)) or name in level.pinned:
            continue
        inputs = [rewire.get(s, s) if s is not None else None for s in level.inputs(name)]
        level.source.update({(name, p.name): s for p, s in zip(node.inputs, inputs) if s is not None})
        key = _signature(node, level)
        kept = first.setdefault(key, name)
        if kept == name:
            continue
        if any(r.op is SELF for i in range(len(node.outputs)) for r in level.reads(level.output(name, i))):
            continue  # two level outputs fed by one op would need an edge per output: keep both
        rewire.update({level.output(name, i): level.output(kept, i) for i in range(len(node.outputs))})
        gone.append(name)
    return (level.rebuild(drop=gone, rewire=rewire), {"removed": gone}) if gone else (model, {})


def eliminate_common_subexpressions(model: Container) -> PassResult:
    """Merge ops of the same type and attributes reading the same sources (equal constants too).

    >>> import amanda
    >>> g = amanda.Container(None, "g", inputs=["x"], outputs=["y", "z"], children=[amanda.op("Relu", "a", ["X"], ["Y"]),
    ...     amanda.op("Relu", "b", ["X"], ["Y"]), amanda.op("Add", "s", ["A", "B"], ["C"])],
    ...     edges=[("g:x", "a:X"), ("g:x", "b:X"), ("a:Y", "s:A"), ("b:Y", "s:B"), ("s:C", "g:y"), ("a:Y", "g:z")])
    >>> out, report = eliminate_common_subexpressions(g)
    >>> report.removed, [e for e in out.edges if e.dst.op != amanda.SELF]
    (('b',), [Edge('SELF:x', 'a:X'), Edge('a:Y', 's:A'), Edge('a:Y', 's:B')])
    """
    expect_container(model, "model")
    out, changes = on_levels(model, _cse_level, level_namespaces(model))
    return PassResult(out, PassReport.of("eliminate_common_subexpressions", changes))
