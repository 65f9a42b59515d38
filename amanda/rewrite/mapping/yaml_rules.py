"""Loading mapping tables from YAML: data only, checked completely before anything runs.

The document is parsed with the safe loader that accepts only plain YAML (scalars, lists,
mappings; every other tag, Python's included, is refused), every field is checked, every
``${...}`` is compiled as JMESPath and may only read variables of its rule's matcher. Any problem
is a ``MappingError`` naming the document path (``mapping.rules[2].map.ops.$g.type``) and line.
docs/mapping.md has the grammar.

>>> table = load_mapping('''
... mapping:
...   source: amanda/tensorflow
...   target: amanda/onnx/17
...   rules:
...     - name: relu
...       match: { ops: { $r: Relu } }
...       map:
...         ops: { $r: { type: Relu, inputs: [X], outputs: [Y] } }
... ''')
>>> table.rule_names, table.rule("relu").pattern.variables
(['relu'], ('r',))
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from amanda.containers.arguments import shown
from amanda.errors import MappingError
from amanda.plain_reader import PlainReader, dotted, read_yaml, source_text
from amanda.rewrite.mapping.expressions import (
    compile_value,
    evaluate_value,
    template_variables,
    truthy,
)
from amanda.rewrite.mapping.pattern import NAMESPACE_CHOICES, EdgePattern, OpPattern, Pattern
from amanda.rewrite.mapping.rule import RELABEL, Match, NewOp, Replacement, Rule
from amanda.rewrite.mapping.table import MappingTable

__all__ = ["load_mapping", "table_from_data"]

_TOP = ("name", "source", "target", "doc", "on_unmatched", "fixed_point", "max_iterations", "rules")
_RULE = ("name", "doc", "tags", "apply_after", "match", "map")
_MATCH = ("ops", "edges", "where")
_OP_MATCH = ("type", "attrs", "namespace")
_MAP = ("ops", "edges", "ports", "inputs")
_OP_MAP = ("type", "name", "inputs", "outputs", "attrs", "keep_attrs", "drop_attrs")
_TYPE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:/-]*$")
_GLOBALS = {"$source", "$target"}
Path = tuple[str, ...]


class _Reader(PlainReader):
    """The plain-data reader of mapping tables (MappingErrors), with the templates' compiler."""

    __slots__ = ()

    def compiled(self, value: Any, path: Path, variables: set[str]) -> Any:
        """``value`` with its ``${...}`` templates compiled; they may read only ``variables``."""
        try:
            result = compile_value(value, path)
        except MappingError as exc:
            raise self.error(path, str(exc.expected), exc.found) from None
        unknown = sorted(template_variables(result) - variables - _GLOBALS)
        if unknown:
            raise self.error(path, f"expressions reading the matcher's variables ({', '.join(sorted(variables))})",
                             ", ".join(unknown))
        return result


def _variable(key: Any, path: Path, r: _Reader) -> str:
    if not isinstance(key, str) or not key.startswith("$") or not key[1:].isidentifier() or key == "$SELF":
        raise r.error(path, "a variable like $m", repr(key))
    return key[1:]


def _type_names(value: Any, path: Path, r: _Reader) -> tuple[str, ...] | None:
    if value == "*":
        return None
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or not names or not all(isinstance(v, str) and _TYPE_NAME.match(v)
                                                          for v in names):
        raise r.error(path, "an op type name, a list of them, or '*'", shown(value))
    return tuple(names)


def _op_pattern(value: Any, path: Path, r: _Reader) -> OpPattern:
    if not isinstance(value, dict):
        return OpPattern(_type_names(value, path, r))
    data = r.fields(value, path, _OP_MATCH)
    types = _type_names(data.get("type", "*"), (*path, "type"), r)
    attrs = data.get("attrs") or {}
    if not isinstance(attrs, dict):
        raise r.error((*path, "attrs"), "a mapping of literal attribute values", shown(attrs))
    for key, literal in attrs.items():
        if isinstance(literal, str) and "${" in literal:
            raise r.error((*path, "attrs", str(key)), "a literal value (use match.where for expressions)",
                          repr(literal))
    namespace = data.get("namespace", "source")
    if namespace not in NAMESPACE_CHOICES:
        raise r.error((*path, "namespace"), f"one of {', '.join(NAMESPACE_CHOICES)}", repr(namespace))
    return OpPattern(types, attrs, namespace)


def _pattern(value: Any, path: Path, r: _Reader) -> tuple[Pattern, set[str]]:
    data = r.fields(value, path, _MATCH, required=("ops",))
    ops_data = data["ops"]
    if not isinstance(ops_data, dict) or not ops_data:
        raise r.error((*path, "ops"), "a mapping of variables to op patterns", shown(ops_data))
    ops = {_variable(k, (*path, "ops", str(k)), r): _op_pattern(v, (*path, "ops", str(k)), r)
           for k, v in ops_data.items()}
    edges = []
    for i, text in enumerate(r.strings(data.get("edges"), (*path, "edges"), one_or_none=True)):
        try:
            edge = EdgePattern.parse(text, dotted((*path, "edges", str(i))))
        except MappingError as exc:
            raise r.error((*path, "edges", str(i)), str(exc.expected), exc.found) from None
        for var in (edge.src, edge.dst):
            if var not in ops:
                raise r.error((*path, "edges", str(i)), f"edges between matched variables ({', '.join(ops)})",
                              f"${var}")
        edges.append(edge)
    where = None
    if "where" in data:
        guard = r.compiled(data["where"], (*path, "where"), {"$" + v for v in ops})
        where = _Guard(guard)
    return Pattern(ops, edges, where), set(ops)


class _Guard:
    """A compiled ``where`` expression: true when its value is JMESPath-truthy."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def __call__(self, match: Match) -> bool:
        return truthy(evaluate_value(self.value, match.view()))


def _op_spec(value: Any, path: Path, r: _Reader, variables: set[str]) -> dict[str, Any]:
    if value is None:
        return {}
    data = r.fields(value, path, _OP_MAP)
    if "type" in data and isinstance(data["type"], str) and "${" not in data["type"]:
        _type_names(data["type"], (*path, "type"), r)
    keep = data.get("keep_attrs")
    if keep is not None and not isinstance(keep, bool):
        r.strings(keep, (*path, "keep_attrs"), one_or_none=True)
    r.strings(data.get("drop_attrs"), (*path, "drop_attrs"), one_or_none=True)
    if "attrs" in data and not isinstance(data["attrs"], dict):
        raise r.error((*path, "attrs"), "a mapping of attribute values", shown(data["attrs"]))
    return {key: r.compiled(v, (*path, key), variables) for key, v in data.items()}


def _mapper(value: Any, path: Path, r: _Reader, matched: set[str]) -> Any:
    if value == "relabel":
        return _relabel
    data = r.fields(value, path, _MAP)
    variables = {"$" + v for v in matched}
    ops_data = data.get("ops") or {}
    if not isinstance(ops_data, dict):
        raise r.error((*path, "ops"), "a mapping of variables to ops", shown(ops_data))
    ops = {_variable(k, (*path, "ops", str(k)), r): _op_spec(v, (*path, "ops", str(k)), r, variables)
           for k, v in ops_data.items()}
    for var, spec in ops.items():
        if var not in matched and "type" not in spec:
            raise r.error((*path, "ops", "$" + var), f"a type for the created op ${var}", "none")
    edges = [r.compiled(e, (*path, "edges", str(i)), variables)
             for i, e in enumerate(r.strings(data.get("edges"), (*path, "edges"), one_or_none=True))]
    for i, edge in enumerate(edges):
        if isinstance(edge, str):
            _check_edge(edge, set(ops), (*path, "edges", str(i)), r)
    ports = data.get("ports") or {}
    if not isinstance(ports, dict):
        raise r.error((*path, "ports"), "a mapping '$var.port' -> endpoint(s) or null", shown(ports))
    for key in ports:
        var = str(key).partition(".")[0].lstrip("$")
        if var not in matched:
            raise r.error((*path, "ports", str(key)), f"a port of a matched variable ({', '.join(sorted(matched))})",
                          repr(key))
    inputs = data.get("inputs") or []
    if not isinstance(inputs, list):
        raise r.error((*path, "inputs"), "a list of ports", shown(inputs))
    return _YamlMapper(ops, edges, r.compiled(ports, (*path, "ports"), variables),
                       r.compiled(inputs, (*path, "inputs"), variables), dotted(path))


def _check_edge(text: str, variables: set[str], path: Path, r: _Reader) -> None:
    try:
        edge = EdgePattern.parse(text, dotted(path))
    except MappingError as exc:
        raise r.error(path, str(exc.expected), exc.found) from None
    for var in (edge.src, edge.dst):
        if var != "SELF" and var not in variables:
            raise r.error(path, f"edges between the mapper's ops ({', '.join(sorted(variables))}) or SELF",
                          f"${var}")


def _relabel(match: Match) -> Any:
    return RELABEL


class _YamlMapper:
    """The function of a YAML rule: evaluates the mapper's templates over a match."""

    def __init__(self, ops: dict[str, dict[str, Any]], edges: list[Any], ports: Any, inputs: Any,
                 where: str) -> None:
        self.ops, self.edges, self.ports, self.inputs, self.where = ops, edges, ports, inputs, where

    def __call__(self, match: Match) -> Replacement:
        data = match.view()
        ops = {}
        for var, spec in self.ops.items():
            values = {k: evaluate_value(v, data) for k, v in spec.items()}
            type_ = values.get("type")
            if type_ is not None and not (isinstance(type_, str) and _TYPE_NAME.match(type_)):
                raise MappingError.at(f"{self.where}.ops.${var}.type", "an op type name", repr(type_))
            ops[var] = NewOp(type=type_, name=values.get("name"), inputs=values.get("inputs"),
                             outputs=values.get("outputs"), attrs=values.get("attrs"),
                             keep_attrs=values.get("keep_attrs"), drop_attrs=tuple(values.get("drop_attrs") or ()))
        ports = evaluate_value(self.ports, data)
        inputs = evaluate_value(self.inputs, data)
        edges = [evaluate_value(e, data) for e in self.edges]
        return Replacement(ops, edges, {str(k): v for k, v in ports.items()}, inputs)


def _rule(value: Any, path: Path, r: _Reader) -> Rule:
    data = r.fields(value, path, _RULE, required=("name", "match", "map"))
    name = data["name"]
    if not isinstance(name, str) or not name:
        raise r.error((*path, "name"), "a rule name", shown(name))
    pattern, variables = _pattern(data["match"], (*path, "match"), r)
    mapper = _mapper(data["map"], (*path, "map"), r, variables)
    doc = data.get("doc", "")
    if not isinstance(doc, str):
        raise r.error((*path, "doc"), "a string", shown(doc))
    return Rule(name, pattern, mapper, r.strings(data.get("apply_after"), (*path, "apply_after"), one_or_none=True),
                r.strings(data.get("tags"), (*path, "tags"), one_or_none=True), doc)


def table_from_data(data: Any, lines: Mapping[Path, int] | None = None) -> MappingTable:
    """Build a ``MappingTable`` from a parsed ``{mapping: ...}`` document."""
    r = _Reader(MappingError, lines)
    top = r.fields(data, (), ("mapping",), required=("mapping",))
    path: Path = ("mapping",)
    body = r.fields(top["mapping"], path, _TOP, required=("source", "target", "rules"))
    for key in ("source", "target", "name", "doc"):
        if key in body and not isinstance(body[key], str):
            raise r.error((*path, key), "a string", shown(body[key]))
    if body.get("on_unmatched", "error") not in ("error", "pass"):
        raise r.error((*path, "on_unmatched"), "error or pass", repr(body["on_unmatched"]))
    if not isinstance(body.get("fixed_point", False), bool):
        raise r.error((*path, "fixed_point"), "a bool", shown(body["fixed_point"]))
    iterations = body.get("max_iterations", 100)
    if not isinstance(iterations, int) or isinstance(iterations, bool) or iterations < 1:
        raise r.error((*path, "max_iterations"), "an int >= 1", shown(iterations))
    rules_data = body["rules"]
    if not isinstance(rules_data, list):
        raise r.error((*path, "rules"), "a list of rules", shown(rules_data))
    rules = [_rule(item, (*path, "rules", str(i)), r) for i, item in enumerate(rules_data)]
    try:
        return MappingTable(body["source"], body["target"], rules, name=body.get("name"),
                            on_unmatched=body.get("on_unmatched", "error"),
                            fixed_point=body.get("fixed_point", False), max_iterations=iterations,
                            doc=body.get("doc", ""))
    except MappingError as exc:
        raise r.error((*path, "rules"), str(exc.expected), exc.found) from None


def load_mapping(source: str | bytes | os.PathLike[str]) -> MappingTable:
    """Load a mapping table from a YAML file path or YAML text; nothing in it is ever executed.

    A ``str`` is read as a path when it names a file or has neither a newline nor a ':'.
    Raises ``MappingError`` (with the field's path and line) for anything malformed or unsafe.
    """
    data, lines = read_yaml(source_text(source, MappingError, "mapping"), MappingError)
    return table_from_data(data, lines)

