"""Checking one op against its schema: ports, required inputs, attributes and their types.

Variadic rule: when the schema's last port is variadic, every port the op declares that does not
carry the name of one of the schema's other ports counts as one value of that variadic port
(``inputs``, ``inputs_1``, ``x`` … all fit ONNX ``Concat``); there must be at least
``min_arity`` of them unless the port is optional. Without a trailing variadic port, a port name
the schema does not know is reported.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from amanda.containers.arguments import brief, expect_mapping, expect_str, expect_type, shown
from amanda.containers.records import Path
from amanda.errors import ArgumentError, Problem
from amanda.namespaces.attr_types import attr_value_problem
from amanda.namespaces.history import moved_hint
from amanda.namespaces.schema import OpSchema, PortSchema, suggest

__all__ = ["RESERVED_ATTRS", "validate_op"]

#: Attribute keys any op may carry whatever its schema (the namespace override).
RESERVED_ATTRS: frozenset[str] = frozenset({"namespace"})


def _port_problems(schema: OpSchema, path: Path, side: str,
                   ports: tuple[PortSchema, ...], names: Sequence[str]) -> list[Problem]:
    problems: list[Problem] = []
    kind = side[:-1]  # 'input' / 'output'
    variadic = ports[-1] if ports and ports[-1].variadic else None
    fixed = {p.name: p for p in ports if p is not variadic}
    schema_names = [p.name for p in ports]
    extra = 0
    for name in names:
        if name in fixed:
            continue
        if variadic is not None:
            extra += 1
            continue
        problems.append(Problem(
            path, f"an {kind} port of {schema.type} ({', '.join(schema_names) or 'none'})",
            f"{kind} port {name!r}", suggest(name, schema_names) or (
                moved_hint(schema, name, "input") if kind == "input" else "")))
    declared = set(names)
    for port in fixed.values():
        if not port.optional and port.name not in declared:
            problems.append(Problem(path, f"the required {kind} port {port.name!r} of "
                                    f"{schema.type}", f"{kind}s {list(names)}"))
    if variadic is not None and not variadic.optional and extra < variadic.min_arity:
        problems.append(Problem(
            path, f"at least {variadic.min_arity} value(s) of the variadic {kind} "
            f"{variadic.name!r} of {schema.type}", f"{extra}"))
    return problems


def validate_op(schema: OpSchema, path: Path, op_type: str,
                input_names: Sequence[str], output_names: Sequence[str],
                attrs: Mapping[str, Any], ignore: Collection[str] = RESERVED_ATTRS,
                ) -> list[Problem]:
    """Every way the op at ``path`` does not fit ``schema`` (empty when it fits).

    Reports unknown input/output port names, required schema ports the op does not declare,
    too few values of a variadic port, missing required attributes, unknown attributes (except
    the keys in ``ignore``), attribute values of the wrong type and dtype attributes outside their
    type constraint (TensorFlow's MatMul ``T="string"``). An attribute set to None
    counts as unset.

    >>> from amanda.namespaces import namespace
    >>> schema = namespace("amanda/onnx/13").schema("ReduceSum")
    >>> validate_op(schema, ("m", "sum"), "ReduceSum", ["data"], ["reduced"], {"keepdims": 1})
    []
    >>> [str(p) for p in validate_op(schema, ("sum",), "ReduceSum", ["data"], ["reduced"],
    ...                              {"axes": [1]})]  # doctest: +NORMALIZE_WHITESPACE
    ["at sum: expected an attribute of ReduceSum (keepdims, noop_with_empty_axes), found 'axes'
    (axes is an input of ReduceSum from opset 13 (an attribute before): pass it as an input)"]
    """
    expect_type(schema, OpSchema, "schema", "an OpSchema")
    expect_str(op_type, "op_type", "an op type (a non-empty string)")
    for where, names in (("input_names", input_names), ("output_names", output_names)):
        if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
            raise ArgumentError.at(where, "a list of port names", shown(names))
    expect_mapping(attrs, "attrs", "a mapping of attribute values")
    problems: list[Problem] = []
    if op_type != schema.type:
        problems.append(Problem(path, f"an op of type {schema.type!r} for this schema",
                                repr(op_type)))
    problems += _port_problems(schema, path, "inputs", schema.inputs, list(input_names))
    problems += _port_problems(schema, path, "outputs", schema.outputs, list(output_names))
    for name, attr in schema.attrs.items():
        if attr.required and attrs.get(name) is None:
            problems.append(Problem(path, f"the required attribute {name!r} ({attr.type}) of "
                                    f"{schema.type}", "it missing"))
    for name, value in attrs.items():
        if name in ignore or value is None:
            continue
        found = schema.attrs.get(name)
        if found is None:
            known = ", ".join(schema.attrs) or "none"
            problems.append(Problem(path, f"an attribute of {schema.type} ({known})",
                                    repr(name), suggest(name, schema.attrs) or moved_hint(schema, name, "attribute")))
            continue
        wanted = attr_value_problem(found.type, value)
        if wanted is not None:
            problems.append(Problem(path, f"attribute {name!r} ({found.type}) to be {wanted}",
                                    f"{type(value).__name__} {brief(value)}"))
        elif _outside(schema, name, found.type, value):
            allowed = schema.type_constraints[name]
            problems.append(Problem(path, f"attribute {name!r} of {schema.type} to be one of "
                                    f"{', '.join(allowed)}", repr(value), suggest(value, allowed)))
    return problems


def _outside(schema: OpSchema, name: str, type_: str, value: Any) -> bool:
    """A dtype attribute (TensorFlow's ``T``) set to a type its constraint does not allow."""
    allowed = schema.type_constraints.get(name)
    return type_ == "dtype" and bool(allowed) and isinstance(value, str) and value not in (allowed or ())
