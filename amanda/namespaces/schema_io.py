"""The namespace schema format: YAML text <-> plain data <-> ``Namespace``.

::

    namespace_schema:
      namespace: amanda/tensorflow/1.13.1
      parent: amanda/tensorflow        # optional; fallback: true looks unknown ops up there
      fallback: false
      source: tensorflow op_def 1.13.1 # where the definitions come from
      op_schemas:
        - type: MatMul
          since_version: 1             # optional, as are domain, doc, deprecated
          attrs: { T: dtype, transpose_a: bool = false, transpose_b: bool = false }
          input_ports: [a, b]
          output_ports: [product]

An attribute is ``type`` (required), ``type = default`` (optional; the default is a YAML flow
value, ``null`` meaning no default) or a mapping ``{type, required, default}``. A port is a name
or a mapping ``{name, optional, variadic, type_constraint (alias type_attr), allowed_types,
homogeneous, min_arity}``. ``type_constraints`` maps a type parameter to its allowed types;
``subgraph`` is free-form plain data describing a subgraph type's inner ops and edges.
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Mapping
from typing import Any

import numpy as np
import yaml

from amanda.containers.arguments import expect_type, shown
from amanda.errors import SchemaError, format_path
from amanda.namespaces.attr_types import tensor_to_data
from amanda.namespaces.namespace import Namespace
from amanda.namespaces.schema import AttrSchema, OpSchema, PortSchema
from amanda.plain_reader import Path, PlainReader, read_yaml, source_text

__all__ = [
    "dump_namespace_schema",
    "load_namespace_schema",
    "namespace_from_data",
    "namespace_to_data",
    "op_schema_from_data",
    "op_schema_to_data",
]

_TOP = ("namespace", "parent", "fallback", "source", "version", "retired", "op_schemas")
_OP = ("type", "domain", "since_version", "deprecated", "doc", "attrs", "input_ports",
       "output_ports", "type_constraints", "subgraph")
_PORT = ("name", "optional", "variadic", "type_constraint", "type_attr", "allowed_types",
         "homogeneous", "min_arity")
_ATTR = ("type", "required", "default")
_SPEC = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:=(.*))?$", re.DOTALL)
_PORT_DEFAULTS = {"optional": False, "variadic": False, "type_constraint": None,
                  "allowed_types": (), "homogeneous": True, "min_arity": 1}


def _reader(lines: Mapping[Path, int] | None) -> PlainReader:
    """The plain-data reader of schemas: SchemaErrors at paths shown as ``a/b/0``."""
    return PlainReader(SchemaError, lines, format_path)


def _port(value: Any, path: Path, r: PlainReader) -> PortSchema:
    if isinstance(value, str):
        data: Mapping[str, Any] = {"name": value}
    else:
        data = r.fields(value, path, _PORT, required=("name",))
    if "type_constraint" in data and "type_attr" in data:
        raise r.error(path + ("type_attr",), "type_constraint or type_attr", "both")
    tc = data.get("type_constraint", data.get("type_attr"))
    if tc is not None and not isinstance(tc, str):
        raise r.error(path + ("type_constraint",), "a type parameter name", shown(tc))
    kwargs: dict[str, Any] = {"type_constraint": tc}
    for key in ("optional", "variadic", "homogeneous"):
        kwargs[key] = r.get(data, key, path, (bool,), "a bool", _PORT_DEFAULTS[key])
    kwargs["min_arity"] = r.get(data, "min_arity", path, (int,), "an int >= 0", 1)
    if "allowed_types" in data:
        kwargs["allowed_types"] = r.strings(data["allowed_types"], path + ("allowed_types",))
    try:
        return PortSchema(r.get(data, "name", path, (str,), "a port name"), **kwargs)
    except SchemaError as exc:
        raise r.wrap(path, exc) from None


def _parse_default(text: str, path: Path, r: PlainReader) -> Any:
    try:
        value, _ = read_yaml(text, SchemaError, path, format_path)
    except SchemaError as exc:
        raise r.error(path, str(exc.expected), f"{exc.found} in the default {text.strip()!r}"
                      ) from None
    return value


def _attr(name: Any, spec: Any, path: Path, r: PlainReader) -> AttrSchema:
    if not isinstance(name, str):
        raise r.error(path, "an attribute name (a string)", shown(name))
    if isinstance(spec, str):
        match = _SPEC.match(spec)
        if match is None:
            raise r.error(path, "an attribute spec 'type' or 'type = default'", repr(spec))
        type_, default_text = match.group(1), match.group(2)
        if default_text is not None and not default_text.strip():
            raise r.error(path, "a default value after '='", repr(spec))
        required = default_text is None
        default = None if required else _parse_default(default_text, path, r)
    else:
        data = r.fields(spec, path, _ATTR, required=("type",))
        type_ = r.get(data, "type", path, (str,), "an attribute type")
        default = data.get("default")
        required = r.get(data, "required", path, (bool,), "a bool", "default" not in data)
    try:
        return AttrSchema(name, type_, required=required, default=default)
    except SchemaError as exc:
        raise r.wrap(path, exc) from None


def op_schema_from_data(data: Any, path: Path = (), lines: Mapping[Path, int] | None = None,
                        ) -> OpSchema:
    """Build an ``OpSchema`` from its plain-data form (one entry of ``op_schemas``).

    >>> op_schema_from_data({"type": "Relu", "input_ports": ["X"], "output_ports": ["Y"]})
    ... # doctest: +ELLIPSIS
    OpSchema(type='Relu', domain='', since_version=1, inputs=(PortSchema(name='X', ...
    """
    r = _reader(lines)
    data = r.fields(data, path, _OP, required=("type",))
    op_type = r.get(data, "type", path, (str,), "an op type name")
    attrs = r.get(data, "attrs", path, (dict,), "a mapping of attribute specs", {})
    tcs = r.get(data, "type_constraints", path, (dict,), "a mapping of type lists", {})
    constraints = {k: r.strings(v, path + ("type_constraints", str(k))) for k, v in tcs.items()}
    ports = {}
    for side in ("input_ports", "output_ports"):
        items = r.get(data, side, path, (list,), "a list of ports", [])
        ports[side] = [_port(p, path + (side, str(i)), r) for i, p in enumerate(items)]
    subgraph = r.get(data, "subgraph", path, (dict,), "a mapping")
    attr_map = {str(k): _attr(k, v, path + ("attrs", str(k)), r) for k, v in attrs.items()}
    try:
        return OpSchema(
            op_type,
            domain=r.get(data, "domain", path, (str,), "a string", ""),
            since_version=r.get(data, "since_version", path, (int,), "an int", 1),
            inputs=tuple(ports["input_ports"]),
            outputs=tuple(ports["output_ports"]),
            attrs=attr_map,
            type_constraints=constraints,
            doc=r.get(data, "doc", path, (str,), "a string", ""),
            deprecated=r.get(data, "deprecated", path, (bool,), "a bool", False),
            subgraph=subgraph,
        )
    except SchemaError as exc:
        raise r.wrap(path, exc) from None


def namespace_from_data(data: Any, lines: Mapping[Path, int] | None = None) -> Namespace:
    """Build a ``Namespace`` from a parsed ``{namespace_schema: ...}`` document.

    >>> namespace_from_data({"namespace_schema": {"namespace": "x/1"}}).name
    'x/1'
    """
    r = _reader(lines)
    top = r.fields(data, (), ("namespace_schema",), required=("namespace_schema",))
    path: Path = ("namespace_schema",)
    body = r.fields(top["namespace_schema"], path, _TOP, required=("namespace",))
    items = r.get(body, "op_schemas", path, (list,), "a list of op schemas", [])
    schemas: dict[str, OpSchema] = {}
    for i, item in enumerate(items):
        where = path + ("op_schemas", str(i))
        schema = op_schema_from_data(item, where, lines)
        if schema.type in schemas:
            raise r.error(where + ("type",), "one schema per op type",
                          f"{schema.type!r} a second time")
        schemas[schema.type] = schema
    retired = r.get(body, "retired", path, (dict,), "a mapping op type -> note", {})
    try:
        return Namespace(
            r.get(body, "namespace", path, (str,), "a namespace name"),
            schemas=schemas,
            parent=r.get(body, "parent", path, (str,), "a namespace name"),
            fallback=r.get(body, "fallback", path, (bool,), "a bool", False),
            source=r.get(body, "source", path, (str,), "a string", ""),
            version=r.get(body, "version", path, (str, int), "a version string or int"),
            retired={str(k): str(v) for k, v in retired.items()},
        )
    except SchemaError as exc:
        raise r.wrap(path, exc) from None


def load_namespace_schema(source: str | bytes | os.PathLike[str]) -> Namespace:
    """Load a namespace schema from a YAML file path or YAML text (safe loader only).

    A ``str`` is read as a path when it names a file or has neither a newline nor a ':'.

    >>> ns = load_namespace_schema('''
    ... namespace_schema:
    ...   namespace: amanda/tensorflow/1.13.1
    ...   op_schemas:
    ...     - type: MatMul
    ...       attrs: { T: dtype, transpose_a: bool = false, transpose_b: bool = false }
    ...       input_ports: [a, b]
    ...       output_ports: [product]
    ... ''')
    >>> ns.schema("MatMul").attr("transpose_b").default, ns.version
    (False, '1.13.1')
    """
    data, lines = read_yaml(source_text(source, SchemaError, "schema"), SchemaError, show=format_path)
    return namespace_from_data(data, lines)


# --- dumping ----------------------------------------------------------------------------------

def _plain(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return tensor_to_data(value)
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return value


def _flow(value: Any) -> str:
    text = yaml.dump(value, Dumper=_Dumper, default_flow_style=True, width=10**9,
                     allow_unicode=True)
    if text.endswith("\n...\n"):
        text = text[:-4]
    return text.removesuffix("\n")


def _attr_to_data(attr: AttrSchema, style: str) -> Any:
    if style == "spec" and (attr.required or attr.default is not None):
        return attr.type if attr.required else f"{attr.type} = {_flow(_plain(attr.default))}"
    data: dict[str, Any] = {"type": attr.type}
    if attr.default is not None:
        data["default"] = _plain(attr.default)
    elif not attr.required:
        data["required"] = False
    return data


def _port_to_data(port: PortSchema, constraints: Mapping[str, tuple[str, ...]]) -> Any:
    data: dict[str, Any] = {"name": port.name}
    implied = constraints.get(port.type_constraint or "", ())
    for key, default in _PORT_DEFAULTS.items():
        value = getattr(port, key)
        if value != default and not (key == "allowed_types" and value == implied):
            data[key] = list(value) if key == "allowed_types" else value
    return port.name if len(data) == 1 else data


def op_schema_to_data(schema: OpSchema, attr_style: str = "spec") -> dict[str, Any]:
    """The plain-data form of an op schema; ``attr_style`` is ``'spec'`` or ``'mapping'``.

    >>> op_schema_to_data(OpSchema("Neg", inputs=["X"], outputs=["Y"]))
    {'type': 'Neg', 'input_ports': ['X'], 'output_ports': ['Y']}
    """
    data: dict[str, Any] = {"type": schema.type}
    if schema.domain:
        data["domain"] = schema.domain
    if schema.since_version != 1:
        data["since_version"] = schema.since_version
    if schema.deprecated:
        data["deprecated"] = True
    if schema.attrs:
        data["attrs"] = {n: _attr_to_data(a, attr_style) for n, a in schema.attrs.items()}
    for side, ports in (("input_ports", schema.inputs), ("output_ports", schema.outputs)):
        data[side] = [_port_to_data(p, schema.type_constraints) for p in ports]
    if schema.type_constraints:
        data["type_constraints"] = {k: list(v) for k, v in schema.type_constraints.items()}
    if schema.subgraph is not None:
        data["subgraph"] = _plain(schema.subgraph)
    if schema.doc:
        data["doc"] = schema.doc
    return data


def namespace_to_data(ns: Namespace, attr_style: str = "spec") -> dict[str, Any]:
    """The plain-data ``{namespace_schema: ...}`` form of a namespace.

    >>> namespace_to_data(Namespace("x/1"))
    {'namespace_schema': {'namespace': 'x/1', 'op_schemas': []}}
    """
    body: dict[str, Any] = {"namespace": ns.name}
    if ns.parent is not None and not (ns.fallback and ns.parent == ns.name.rsplit("/", 1)[0]):
        body["parent"] = ns.parent
    if ns.fallback:
        body["fallback"] = True
    if ns.source:
        body["source"] = ns.source
    if ns.version != Namespace(ns.name).version:
        body["version"] = ns.version
    if ns.retired:
        body["retired"] = dict(ns.retired)
    body["op_schemas"] = [op_schema_to_data(s, attr_style) for s in ns.schemas.values()]
    return {"namespace_schema": body}


class _Dumper(yaml.SafeDumper):
    """Safe dumper writing multi-line strings as literal blocks."""


def _represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.Node:
    # Control and YAML line-break characters only survive in double quotes (as escapes).
    if any(c in "\x85\u2028\u2029" or (unicodedata.category(c)[0] == "C" and c != "\n")
           for c in data):
        style: str | None = '"'
    else:
        style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(str, _represent_str)


def dump_namespace_schema(ns: Namespace) -> str:
    """YAML text for ``ns`` that ``load_namespace_schema`` reads back to an equal namespace.

    >>> ns = Namespace("x/1", schemas=[OpSchema("Neg", inputs=["X"], outputs=["Y"])])
    >>> load_namespace_schema(dump_namespace_schema(ns)) == ns
    True
    """
    expect_type(ns, Namespace, "ns", "a Namespace")
    return yaml.dump(namespace_to_data(ns), Dumper=_Dumper, sort_keys=False,
                     default_flow_style=None, width=100, allow_unicode=True)
