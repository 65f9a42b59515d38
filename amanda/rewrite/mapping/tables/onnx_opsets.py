"""ONNX opset adapters: ``amanda/onnx/N`` <-> ``amanda/onnx/N+1`` for N from 1 to the newest.

Each adapter is the specific rules of ``onnx_changes`` (opsets 12 on) or ``onnx_legacy`` and
``onnx_legacy_late`` (opsets 2 to 11) for that step, then one generic rule: an
op whose schema is compatible across the step is relabelled. Compatible means its ports, its
attributes and their types fit the other opset's schema (``validate_op``); an attribute the other
opset lacks may be dropped only when set to its default (or, going up, when ``DROPPED`` says
it never meant anything, as ``consumed_inputs``), an attribute whose default changed is
written out explicitly, an attribute value the older opset does not know (``VALUES_ADDED``) blocks
going down, and an If/Loop/Scan body must hold only ops whose signature did not change. Anything
else is left unmatched, so ``convert`` reports it rather than guessing.

>>> table = adapter(12, 13)
>>> table.source, table.target, table.rule_names[:2]
('amanda/onnx/12', 'amanda/onnx/13', ['reducesum_axes_to_input', 'squeeze_axes_to_input'])
"""

from __future__ import annotations

import functools
from typing import Any

from amanda.containers.edge import Port
from amanda.namespaces.attr_types import value_key
from amanda.namespaces.model_fit import IGNORED_ATTRS
from amanda.namespaces.op_fit import validate_op
from amanda.rewrite.mapping.pattern import Pattern
from amanda.rewrite.mapping.rule import RELABEL, Match, NewOp, Replacement, Rule, Skip
from amanda.rewrite.mapping.table import MappingTable
from amanda.rewrite.mapping.tables.onnx_changes import CHANGES, VALUES_ADDED
from amanda.rewrite.mapping.tables.onnx_legacy import DROPPED
from amanda.rewrite.mapping.tables.onnx_legacy_late import ALL_LEGACY, nonnegative_axes

__all__ = ["FIRST", "adapter", "changed_types", "changes", "name", "newest", "opset_pairs"]

FIRST = 1


def changes(version: int) -> list[tuple[tuple[str, ...], list[Any], list[Any]]]:
    """The specific rules of the step between opsets ``version - 1`` and ``version``."""
    return list(CHANGES.get(version, ())) + list(ALL_LEGACY.get(version, ()))


def changed_types(version: int) -> frozenset[str]:
    """Op types that specific rules handle in the step to or from opset ``version``."""
    return frozenset(t for types, _, _ in changes(version) for t in types)


def _dropped(version: int, op_type: str) -> frozenset[str]:
    """Attributes going up to ``version`` drops whatever their value."""
    return frozenset(a for a, types in DROPPED.get(version, {}).items() if types is None or op_type in types)


def name(version: int) -> str:
    """The namespace of ONNX opset ``version``."""
    return f"amanda/onnx/{version}"


def newest() -> int:
    """The newest default-domain opset amanda's ONNX vocabulary has."""
    from amanda.namespaces.onnx_vocab import onnx_domains

    return onnx_domains()[""][1]


def opset_pairs() -> list[tuple[int, int]]:
    """Adjacent opsets with adapters between them: (11, 12) … (newest - 1, newest)."""
    return [(v, v + 1) for v in range(FIRST, newest())]


@functools.cache
def _schema(version: int, op_type: str) -> Any:
    from amanda.errors import SchemaError
    from amanda.namespaces.namespace import namespace

    try:
        return namespace(name(version)).schema(op_type)
    except SchemaError:
        return None


def _signature(schema: Any) -> Any:
    ports = tuple((p.name, p.optional, p.variadic) for side in (schema.inputs, schema.outputs) for p in side)
    attrs = tuple(sorted((a.name, a.type, a.required, value_key(a.default)) for a in schema.attrs.values()))
    return ports, attrs


def _bodies(op: Any) -> list[Any]:
    found = []
    for value in op.attrs.values():
        for item in value if isinstance(value, tuple) else (value,):
            if getattr(item, "_amanda_frozen", False) and hasattr(item, "children"):
                found.append(item)
    return found


def _body_problem(op: Any, low: int, high: int) -> str | None:
    for body in _bodies(op):
        for leaf in body:
            a, b = _schema(low, leaf.type), _schema(high, leaf.type)
            if a is None or b is None or _signature(a) != _signature(b) or leaf.type in changed_types(high):
                return f"its body holds {leaf.type}, which changed between opsets {low} and {high}"
            problem = _body_problem(leaf, low, high)
            if problem:
                return problem
    return None


def _attr_updates(op: Any, old: Any, new: Any, source: int, target: int) -> dict[str, Any] | Skip:
    """Attributes to set (None: unset) for ``op`` to mean the same under schema ``new``."""
    updates: dict[str, Any] = {}
    meaningless = _dropped(target, str(op.type)) if target > source else frozenset()
    for key, value in op.attrs.items():
        if key in IGNORED_ATTRS or key in new.attrs or value is None:
            continue
        default = old.attrs[key].default if key in old.attrs else None
        if key in meaningless or (default is not None and value_key(value) == value_key(default)):
            updates[key] = None
        else:
            return Skip(f"attribute {key}={value!r} has no equivalent in opset {target}")
    for key, attr in old.attrs.items():
        if key in op.attrs or key not in new.attrs or attr.default is None:
            continue
        if value_key(attr.default) != value_key(new.attrs[key].default):
            updates[key] = attr.default  # the value the op meant by leaving it unset
    return updates


def _down_fixes(m: Match, source: int, target: int) -> dict[str, Any] | Skip:
    """Going down: attribute values the target opset does not know yet block; negative axes
    (from 11) are counted from the front."""
    op = m["op"]
    for (op_type, added), values in VALUES_ADDED.items():
        if op_type == op.type and target < added <= source:
            for key, bad in values.items():
                if op.attrs.get(key) in bad:
                    return Skip(f"{key}={op.attrs[key]!r} does not exist before opset {added}")
    return nonnegative_axes(m) if target < 11 <= source else {}


def _compatible(m: Match, source: int, target: int) -> Any:
    """The generic rule: relabel, adjusting attributes whose defaults or existence changed."""
    op = m["op"]
    old, new = _schema(source, op.type), _schema(target, op.type)
    if new is None:
        return Skip(f"{op.type} is not in opset {target}")
    if old is None:
        return Skip(f"{op.type} is not in opset {source}")
    found = _attr_updates(op, old, new, source, target)
    fixes = _down_fixes(m, source, target) if target < source else {}
    if isinstance(found, Skip) or isinstance(fixes, Skip):
        return found if isinstance(found, Skip) else fixes
    updates = {**found, **fixes}
    attrs = {k: v for k, v in op.attrs.items() if updates.get(k, v) is not None}
    attrs.update({k: v for k, v in updates.items() if v is not None})
    in_renames, out_renames = _renames(old.inputs, new.inputs), _renames(old.outputs, new.outputs)
    inputs = [in_renames.get(p.name, p.name) for p in op.inputs if not p.attrs.get("captured")]
    outputs = [out_renames.get(p, p) for p in op.output_names]
    problems = validate_op(new, m.path("op"), str(op.type), inputs, outputs, attrs, IGNORED_ATTRS)
    if problems:
        return Skip("; ".join(f"expected {p.expected}, found {p.found}" for p in problems))
    problem = _body_problem(op, min(source, target), max(source, target))
    if problem:
        return Skip(problem)
    return _relabelled(op, updates, in_renames, out_renames)


def _relabelled(op: Any, updates: dict[str, Any], in_renames: dict[str, str],
                out_renames: dict[str, str]) -> Any:
    """The result of a compatible relabelling: the plain relabel, new attributes, or renamed ports."""
    renamed = any(p in in_renames for p in op.input_names) or any(p in out_renames for p in op.output_names)
    if not updates and not renamed:
        return RELABEL
    if not renamed:
        return Replacement({"op": NewOp(attrs=updates)})
    # same order, new names: the driver re-attaches renamed ports by position
    spec = NewOp(inputs=[Port(in_renames.get(p.name, p.name), attrs=p.attrs) for p in op.inputs],
                 outputs=[Port(out_renames.get(p.name, p.name), attrs=p.attrs) for p in op.outputs],
                 attrs=updates)
    return Replacement({"op": spec})


def _renames(old: Any, new: Any) -> dict[str, str]:
    """Ports renamed at the same position between two schemas (BatchNormalization's mean ->
    input_mean at 14)."""
    return {a.name: b.name for a, b in zip(old, new)
            if a.name != b.name and not a.variadic and not b.variadic}


def adapter(source: int, target: int) -> MappingTable:
    """The table between adjacent opsets ``source`` and ``target`` (either direction)."""
    if abs(source - target) != 1:
        raise ValueError(f"adapters join adjacent opsets, not {source} and {target}")
    high = max(source, target)
    up = target > source
    rules: list[Rule] = []
    for types, up_rules, down_rules in changes(high):
        prefix = "reduce" if len(types) > 1 and all(t.startswith("Reduce") for t in types) else types[0].lower()
        for pattern, function in up_rules if up else down_rules:
            rules.append(Rule(f"{prefix}_{function.__name__}", pattern, function))
    special = changed_types(high)

    def compatible(m: Match) -> Any:
        return _compatible(m, source, target)

    compatible.__name__ = "compatible"
    generic = Pattern({"op": "*"}, where=lambda m: m["op"].type not in special)
    rules.append(Rule("compatible", generic, compatible,
                      doc="relabel ops whose schema fits both opsets"))
    return MappingTable(name(source), name(target), _unique(rules), name=f"onnx_{source}_to_{target}")


def _unique(rules: list[Rule]) -> list[Rule]:
    """Rules made from the same helper get distinct names (``axes_to_input``, ``…_2``)."""
    seen: dict[str, int] = {}
    out = []
    for rule in rules:
        count = seen.get(rule.name, 0)
        seen[rule.name] = count + 1
        out.append(rule if not count else Rule(f"{rule.name}_{count + 1}", rule.pattern, rule.function,
                                               rule.apply_after, rule.tags, rule.doc))
    return out
