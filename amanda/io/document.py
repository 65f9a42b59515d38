"""The document model (docs/format.md): plain dicts and lists <-> containers, edges and ports.

Kinds: ``graph``, ``subgraph``, ``op`` (containers), ``edge``, ``input_port`` and
``output_port``. Optional extensions: ``uid``, ``tombstones`` (edges deleted below),
``control_ports`` (named control ports). Attribute values that YAML/JSON would lose (arrays,
bytes, containers, dtypes, NaN …) are written as one-key marker mappings such as
``{__ndarray__: {dtype, shape, data}}`` (base64 of the raw bytes, which YAML writes folded into
lines); :mod:`amanda.io.markers` lists them.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Any

import numpy as np

from amanda.containers.arguments import expect_type
from amanda.containers.container import Container
from amanda.containers.edge import SELF, Edge, Endpoint, Port
from amanda.containers.refs import AttrRef
from amanda.containers.values import EMPTY, dtype_text
from amanda.errors import AmandaError, FormatError
from amanda.io.array_markers import decode_array, decode_bytes
from amanda.io.markers import READER as _READ
from amanda.io.markers import (
    decode_dtype,
    decode_float,
    decode_int,
    decode_str,
    encode_scalar,
    marker_body,
)
from amanda.io.markers import fail as _fail
from amanda.io.onnx.calls import FUNCTION_ATTR, shared_body
from amanda.plain_reader import dotted
from amanda.progress import progress

__all__ = ["DocPath", "from_document", "to_document"]

DocPath = tuple  # keys and indexes from the document root, for error messages
_BODIES: ContextVar[dict | None] = ContextVar("_BODIES", default=None)  # call bodies of one load

_PORT_FIELDS = frozenset({"name", "attrs"})
_ENDPOINT_FIELDS = frozenset({"op", "port"})
_EDGE_FIELDS = frozenset({"output_port", "input_port", "attrs"})
_OP_FIELDS = frozenset(
    {"type", "name", "input_ports", "output_ports", "attrs", "uid", "control_ports", "namespace"}
)
_SUBGRAPH_FIELDS = _OP_FIELDS | {"ops", "edges", "tombstones"}
_KINDS = ("graph", "subgraph", "op", "edge", "input_port", "output_port")


def from_document(doc: Any) -> Container | Edge | Port:
    """Build what a parsed document describes; raise FormatError naming the bad field."""
    if not isinstance(doc, Mapping) or len(doc) != 1:
        keys = list(doc) if isinstance(doc, Mapping) else type(doc).__name__
        raise _fail((), f"a mapping with one of the keys {', '.join(_KINDS)}", keys)
    ((kind, body),) = doc.items()
    if kind in ("graph", "subgraph", "op"):
        token = _BODIES.set({})
        try:
            return _container(body, (kind,), kind)
        finally:
            _BODIES.reset(token)
    if kind == "edge":
        return _edge(body, (kind,))
    if kind in ("input_port", "output_port"):
        return _port(body, (kind,))
    raise _fail((), f"one of the keys {', '.join(_KINDS)}", kind)


def _container(body: Any, path: DocPath, kind: str) -> Container:
    if body is None:
        body = {}
    fields = _READ.fields(body, path, _OP_FIELDS if kind == "op" else _SUBGRAPH_FIELDS, what=kind)
    attrs = dict(_attrs(fields.get("attrs"), path + ("attrs",)))
    builtin = _builtins(fields, attrs)
    if "namespace" in fields:
        attrs["namespace"] = _READ.text(fields["namespace"], path + ("namespace",), optional=False)
    items = _READ.listed(fields.get("ops"), path + ("ops",))
    children = []
    # a bar (on a terminal, after a second) over the top container's ops, not inner ones
    with progress(len(items), "loading", quiet=len(path) > 1) as bar:
        for i, item in enumerate(items):
            children.append(_child(item, path + ("ops", i)))
            bar.update()
    try:
        built = Container(
            _READ.text(builtin["type"], path + ("attrs" if "type" not in fields else "type",)),
            _READ.text(builtin["name"], path + ("attrs" if "name" not in fields else "name",)),
            inputs=_each(fields, path, "input_ports", _port),
            outputs=_each(fields, path, "output_ports", _port),
            children=children,
            edges=_each(fields, path, "edges", _edge),
            tombstones=_each(fields, path, "tombstones", _edge),
            attrs=attrs,
            uid=_READ.text(fields.get("uid"), path + ("uid",)),
            controls=_each(fields, path, "control_ports", _port),
        )
        bodies = _BODIES.get()
        # calls of one function share one body, as import made them (the document repeats it)
        return shared_body(built, bodies) if children and bodies is not None and FUNCTION_ATTR in attrs else built
    except FormatError:
        raise
    except AmandaError as exc:
        raise FormatError(
            f"at {dotted(path)}: {exc}", path=path, expected=exc.expected, found=exc.found
        ) from exc
    except TypeError as exc:
        raise FormatError(f"at {dotted(path)}: {exc}", path=path) from exc


def _builtins(fields: Mapping[str, Any], attrs: dict) -> dict[str, Any]:
    """The container's name and type: the format allows them under attrs (`op: attrs: name: g`);
    a field given on its own wins, and then an attribute of that name is just an attribute."""
    builtin = {}
    for key in ("name", "type"):
        if key not in fields and key in attrs:
            builtin[key] = attrs.pop(key)
        else:
            builtin[key] = fields.get(key)
    return builtin


def _each(fields: Mapping[str, Any], path: DocPath, key: str, read: Callable[[Any, DocPath], Any]) -> list:
    """The list field ``key`` of a container, each item read by ``read`` at its own path."""
    return [read(item, path + (key, i)) for i, item in enumerate(_READ.listed(fields.get(key), path + (key,)))]


def _child(item: Any, path: DocPath) -> Container:
    # an entry of `ops` is an op or a subgraph, told apart by whether it has `ops`
    if isinstance(item, Mapping) and ("ops" in item or "edges" in item or "tombstones" in item):
        return _container(item, path, "subgraph")
    return _container(item, path, "op")


def _port(value: Any, path: DocPath) -> Port:
    if type(value) is dict and len(value) == 1 and type(value.get("name")) is str and value["name"]:
        return Port(value["name"])
    fields = _READ.fields(value, path, _PORT_FIELDS, what="a port")
    name = _READ.text(fields.get("name"), path + ("name",), optional=False)
    return Port(name, attrs=_attrs(fields.get("attrs"), path + ("attrs",)))  # type: ignore[arg-type]  # not None


def _edge(value: Any, path: DocPath) -> Edge:
    if type(value) is dict and len(value) == 2 and "output_port" in value and "input_port" in value:
        return tuple.__new__(
            Edge,
            (
                _endpoint(value["output_port"], path + ("output_port",)),
                _endpoint(value["input_port"], path + ("input_port",)),
                EMPTY,
            ),
        )
    fields = _READ.fields(value, path, _EDGE_FIELDS, what="an edge")
    for key in ("output_port", "input_port"):
        if key not in fields:
            raise _fail(path, f"the field {key}", "<missing>")
    return Edge(
        _endpoint(fields["output_port"], path + ("output_port",)),
        _endpoint(fields["input_port"], path + ("input_port",)),
        attrs=_attrs(fields.get("attrs"), path + ("attrs",)),
    )


def _endpoint(value: Any, path: DocPath) -> Endpoint:
    if type(value) is dict and len(value) == 2:
        op, port = value.get("op"), value.get("port")
        if (
            type(op) is str
            and op
            and (type(port) is str and port or type(port) is int and port >= -1)
        ):
            return tuple.__new__(Endpoint, (op, port))
    fields = _READ.fields(value, path, _ENDPOINT_FIELDS, what="an endpoint {op, port}")
    for key in ("op", "port"):
        if key not in fields:
            raise _fail(path, f"the field {key}", "<missing>")
    op = _endpoint_op(fields["op"], path + ("op",))
    port = fields["port"]
    if isinstance(port, bool) or not isinstance(port, (str, int)) or port == "":
        raise _fail(path + ("port",), "a port name or index (-1 for control)", port)
    if isinstance(port, int) and port < -1:
        raise _fail(path + ("port",), "a port index >= -1", port)
    return Endpoint(SELF if op is None else op, port)


def _endpoint_op(op: Any, path: DocPath) -> Any:
    """The ``op`` field of an endpoint: None (the container itself), a name, an index or a path."""
    if isinstance(op, list):
        if not op or not all(isinstance(p, (str, int)) and not isinstance(p, bool) for p in op):
            raise _fail(path, "a list of child names or indexes", op)
        return tuple(op)
    if op is not None and (isinstance(op, bool) or not isinstance(op, (str, int))):
        raise _fail(path, "an op name, index or path", op)
    return op


# -- attribute values -----------------------------------------------------------------------


def _attrs(value: Any, path: DocPath) -> dict:
    if value is None:
        return {}
    if type(value) is dict:
        plain = _PLAIN_TYPES
        for key, item in value.items():
            if type(item) not in plain or type(key) is not str:
                break
        else:
            return value
    if not isinstance(value, Mapping):
        raise _fail(path, "a mapping of attributes", value)
    out = {}
    for key, item in value.items():
        if not isinstance(key, str):
            raise _fail(path + (key,), "a string attribute name", key)
        out[key] = _decode(item, path + (key,))
    return out


_PLAIN = (str, int, float, bool, type(None))
_PLAIN_TYPES = frozenset(_PLAIN)


def decode_value(value: Any, path: DocPath) -> Any:
    """An attribute value from its document form (arrays and bytes from their markers)."""
    return _decode(value, path)


def _decode(value: Any, path: DocPath) -> Any:
    if isinstance(value, _PLAIN):
        return value
    if isinstance(value, list):
        return [_decode(v, path + (i,)) for i, v in enumerate(value)]
    if isinstance(value, Mapping):
        for marker, decoder in _MARKERS.items():
            if marker in value:
                return decoder(value, path)
        return {k: _decode(v, path + (k,)) for k, v in value.items() if _key_ok(k, path)}
    if isinstance(value, bytes):
        return value
    raise _fail(
        path, "a string, number, boolean, null, list, mapping or array", f"<{type(value).__name__}>"
    )


def _decode_container(value: Mapping, path: DocPath) -> Container:
    body, where = marker_body(value, path, "__container__", "a container document")
    if not isinstance(body, Mapping) or len(body) != 1 or next(iter(body)) not in _CONTAINER_KINDS:
        raise _fail(where, "a mapping with one of the keys graph, subgraph, op", body)
    ((kind, inner),) = body.items()
    return _container(inner, where + (kind,), kind)


def _decode_mapping(value: Mapping, path: DocPath) -> dict:
    body, where = marker_body(value, path, "__mapping__", "a mapping")
    if not isinstance(body, Mapping):
        raise _fail(where, "a mapping", body)
    return {k: _decode(v, where + (k,)) for k, v in body.items() if _key_ok(k, where)}


def _decode_ref(value: Mapping, path: DocPath) -> AttrRef:
    body, where = marker_body(value, path, "__ref__", "{name, type}")
    if not isinstance(body, Mapping) or set(body) - {"name", "type"}:
        raise _fail(where, "a mapping with the keys name and type", body)
    try:
        return AttrRef(_decode(body.get("name"), where + ("name",)), body.get("type", ""))
    except TypeError:
        raise _fail(where, "a name (a non-empty string) and a type name (a string)", body) from None


def _key_ok(key: Any, path: DocPath) -> bool:
    if not isinstance(key, str):
        raise _fail(path + (key,), "a string key", key)
    return True


_MARKERS = {
    "__ndarray__": decode_array,
    "__bytes__": decode_bytes,
    "__container__": _decode_container,
    "__dtype__": decode_dtype,
    "__float__": decode_float,
    "__int__": decode_int,
    "__str__": decode_str,
    "__mapping__": _decode_mapping,
    "__ref__": _decode_ref,
}
_CONTAINER_KINDS = ("graph", "subgraph", "op")


def encode_value(value: Any) -> Any:
    """The document form of an attribute value (arrays and bytes as markers)."""
    return _encode(value)


def _encode(value: Any) -> Any:
    if type(value) in _PLAIN_TYPES:
        return encode_scalar(value)
    if isinstance(value, np.ndarray):
        return {
            "__ndarray__": {
                "dtype": dtype_text(value.dtype),
                "shape": list(value.shape),
                "data": base64.b64encode(np.ascontiguousarray(value).tobytes()).decode("ascii"),
            }
        }
    if isinstance(value, tuple):
        return [_encode(v) for v in value]
    if isinstance(value, Mapping):
        encoded = {k: _encode(v) for k, v in value.items()}
        if any(k.startswith("__") for k in encoded):
            return {"__mapping__": encoded}  # read back as a mapping, not as a marker
        return encoded
    if isinstance(value, bytes):
        return {"__bytes__": base64.b64encode(value).decode("ascii")}
    if isinstance(value, Container):
        return {"__container__": to_document(value)}
    if isinstance(value, np.dtype):
        return {"__dtype__": dtype_text(value)}
    if isinstance(value, AttrRef):
        return {"__ref__": {"name": encode_scalar(value.name), "type": value.type}}
    raise TypeError(f"cannot write a {type(value).__name__} attribute")


# -- writing --------------------------------------------------------------------------------


def to_document(item: Container | Edge | Port) -> dict:
    """The document describing a container (``graph``/``subgraph``/``op``), an edge or a port."""
    if isinstance(item, Edge):
        return {"edge": _edge_doc(item, None)}
    if isinstance(item, Port):
        return {"input_port": _port_doc(item)}
    expect_type(item, Container, "item", "a Container, an Edge or a Port")
    if item.is_op and not (item.edges or item.tombstones):
        kind = "op"  # `op` bodies have no edges: an op with pass-through edges is a subgraph
    else:
        kind = "graph" if item.name is None and item.type is None else "subgraph"
    return {kind: _container_doc(item, kind)}


def _container_doc(c: Container, kind: str) -> dict:
    attrs = dict(c.attrs)
    doc = _header_doc(c, kind, attrs)
    if attrs:
        doc["attrs"] = {k: _encode(v) for k, v in attrs.items()}
    if c.inputs:
        doc["input_ports"] = [_port_doc(p) for p in c.inputs]
    if c.outputs:
        doc["output_ports"] = [_port_doc(p) for p in c.outputs]
    if c.controls:
        doc["control_ports"] = [_port_doc(p) for p in c.controls]
    if c.children:
        doc["ops"] = [
            _container_doc(child, "op" if child.is_op else "subgraph") for child in c.children
        ]
    if c.edges:
        doc["edges"] = [_edge_doc(e, c.name) for e in c.edges]
    if c.tombstones:
        doc["tombstones"] = [_edge_doc(e, c.name) for e in c.tombstones]
    return doc


def _header_doc(c: Container, kind: str, attrs: dict) -> dict[str, Any]:
    """A container's namespace (a graph's, taken out of ``attrs``), type, name and uid."""
    doc: dict[str, Any] = {}
    namespace = attrs.get("namespace")
    if kind == "graph" and type(namespace) is str and namespace:
        doc["namespace"] = attrs.pop("namespace")
    # written even when empty if an attribute shares the name, so reading does not lift it
    if c.type is not None or "type" in attrs:
        doc["type"] = c.type
    if c.name is not None or "name" in attrs:
        doc["name"] = c.name
    doc["uid"] = c.uid
    return doc


def _port_doc(port: Port) -> dict:
    if port.attrs:
        return {"name": port.name, "attrs": {k: _encode(v) for k, v in port.attrs.items()}}
    return {"name": port.name}


def _edge_doc(edge: Edge, own_name: str | None) -> dict:
    doc = {
        "output_port": _endpoint_doc(edge.src, own_name),
        "input_port": _endpoint_doc(edge.dst, own_name),
    }
    if edge.attrs:
        doc["attrs"] = {k: _encode(v) for k, v in edge.attrs.items()}
    return doc


def _endpoint_doc(end: Endpoint, own_name: str | None) -> dict:
    op = end.op
    if op is SELF:
        written: Any = own_name
    elif isinstance(op, tuple):
        written = op[0] if len(op) == 1 else list(op)
    else:
        written = op
    return {"op": written, "port": end.port}
