"""The seed's document model: plain dicts and lists <-> containers, edges and ports.

Kinds: ``graph``, ``subgraph``, ``op`` (containers), ``edge``, ``input_port`` and
``output_port``. Optional extensions: ``uid``, ``tombstones`` (edges deleted below),
``control_ports`` (named control ports). Arrays in attributes are written as
``{__ndarray__: {dtype, shape, data}}`` (base64 of the raw bytes, which YAML writes folded
into lines) so they round-trip exactly; ``bytes`` as ``{__bytes__: base64}``.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from amanda.containers.container import Container
from amanda.containers.edge import SELF, Edge, Endpoint, Port
from amanda.containers.values import EMPTY, freeze_array
from amanda.errors import AmandaError, FormatError

__all__ = ["DocPath", "from_document", "to_document"]

DocPath = tuple  # keys and indexes from the document root, for error messages

_PORT_FIELDS = frozenset({"name", "attrs"})
_ENDPOINT_FIELDS = frozenset({"op", "port"})
_EDGE_FIELDS = frozenset({"output_port", "input_port", "attrs"})
_OP_FIELDS = frozenset(
    {"type", "name", "input_ports", "output_ports", "attrs", "uid", "control_ports", "namespace"}
)
_SUBGRAPH_FIELDS = _OP_FIELDS | {"ops", "edges", "tombstones"}
_KINDS = ("graph", "subgraph", "op", "edge", "input_port", "output_port")


def show(path: DocPath) -> str:
    """``graph.ops[3].name`` from ``("graph", "ops", 3, "name")``."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "<document>"


def _fail(path: DocPath, expected: str, found: Any) -> FormatError:
    shown = found if isinstance(found, str) and found.startswith("<") else repr(found)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    return FormatError(
        f"at {show(path)}: expected {expected}, found {shown}",
        path=path,
        expected=expected,
        found=shown,
    )


def from_document(doc: Any) -> Container | Edge | Port:
    """Build what a parsed document describes; raise FormatError naming the bad field."""
    if not isinstance(doc, Mapping) or len(doc) != 1:
        keys = list(doc) if isinstance(doc, Mapping) else type(doc).__name__
        raise _fail((), f"a mapping with one of the keys {', '.join(_KINDS)}", keys)
    ((kind, body),) = doc.items()
    if kind in ("graph", "subgraph", "op"):
        return _container(body, (kind,), kind)
    if kind == "edge":
        return _edge(body, (kind,))
    if kind in ("input_port", "output_port"):
        return _port(body, (kind,))
    raise _fail((), f"one of the keys {', '.join(_KINDS)}", kind)


def _mapping(value: Any, path: DocPath, allowed: frozenset, what: str) -> Mapping:
    if type(value) is not dict and not isinstance(value, Mapping):
        raise _fail(path, f"a mapping ({what})", value)
    if not allowed.issuperset(value):
        unknown = [k for k in value if k not in allowed]
        raise _fail(
            path + (unknown[0],),
            f"one of the fields {', '.join(sorted(allowed))} of {what}",
            f"<field {unknown[0]!r}>",
        )
    return value


def _list(value: Any, path: DocPath) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _fail(path, "a list", value)
    return value


def _string(value: Any, path: DocPath, optional: bool = True) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value:
        raise _fail(path, "a non-empty string", value)
    return value


def _container(body: Any, path: DocPath, kind: str) -> Container:
    if body is None:
        body = {}
    fields = _mapping(body, path, _OP_FIELDS if kind == "op" else _SUBGRAPH_FIELDS, kind)
    attrs = dict(_attrs(fields.get("attrs"), path + ("attrs",)))
    # the seed allows the builtin attributes under attrs (`op: attrs: name: g`); a field
    # given on its own wins, and then an attribute of that name is just an attribute
    builtin = {}
    for key in ("name", "type"):
        if key not in fields and key in attrs:
            builtin[key] = attrs.pop(key)
        else:
            builtin[key] = fields.get(key)
    if "namespace" in fields:
        attrs["namespace"] = _string(fields["namespace"], path + ("namespace",), optional=False)
    children = [
        _child(item, path + ("ops", i))
        for i, item in enumerate(_list(fields.get("ops"), path + ("ops",)))
    ]
    try:
        return Container(
            _string(builtin["type"], path + ("attrs" if "type" not in fields else "type",)),
            _string(builtin["name"], path + ("attrs" if "name" not in fields else "name",)),
            [
                _port(p, path + ("input_ports", i))
                for i, p in enumerate(_list(fields.get("input_ports"), path + ("input_ports",)))
            ],
            [
                _port(p, path + ("output_ports", i))
                for i, p in enumerate(_list(fields.get("output_ports"), path + ("output_ports",)))
            ],
            children,
            [
                _edge(e, path + ("edges", i))
                for i, e in enumerate(_list(fields.get("edges"), path + ("edges",)))
            ],
            [
                _edge(e, path + ("tombstones", i))
                for i, e in enumerate(_list(fields.get("tombstones"), path + ("tombstones",)))
            ],
            attrs,
            _string(fields.get("uid"), path + ("uid",)),
            [
                _port(p, path + ("control_ports", i))
                for i, p in enumerate(_list(fields.get("control_ports"), path + ("control_ports",)))
            ],
        )
    except FormatError:
        raise
    except AmandaError as exc:
        raise FormatError(
            f"at {show(path)}: {exc}", path=path, expected=exc.expected, found=exc.found
        ) from exc
    except TypeError as exc:
        raise FormatError(f"at {show(path)}: {exc}", path=path) from exc


def _child(item: Any, path: DocPath) -> Container:
    # an entry of `ops` is an op or a subgraph, told apart by whether it has `ops`
    if isinstance(item, Mapping) and ("ops" in item or "edges" in item or "tombstones" in item):
        return _container(item, path, "subgraph")
    return _container(item, path, "op")


def _port(value: Any, path: DocPath) -> Port:
    if type(value) is dict and len(value) == 1 and type(value.get("name")) is str and value["name"]:
        return Port(value["name"])
    fields = _mapping(value, path, _PORT_FIELDS, "a port")
    name = _string(fields.get("name"), path + ("name",), optional=False)
    return Port(name, _attrs(fields.get("attrs"), path + ("attrs",)))  # type: ignore[arg-type]  # not None


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
    fields = _mapping(value, path, _EDGE_FIELDS, "an edge")
    for key in ("output_port", "input_port"):
        if key not in fields:
            raise _fail(path, f"the field {key}", "<missing>")
    return Edge(
        _endpoint(fields["output_port"], path + ("output_port",)),
        _endpoint(fields["input_port"], path + ("input_port",)),
        _attrs(fields.get("attrs"), path + ("attrs",)),
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
    fields = _mapping(value, path, _ENDPOINT_FIELDS, "an endpoint {op, port}")
    for key in ("op", "port"):
        if key not in fields:
            raise _fail(path, f"the field {key}", "<missing>")
    op = fields["op"]
    if isinstance(op, list):
        if not op or not all(isinstance(p, (str, int)) and not isinstance(p, bool) for p in op):
            raise _fail(path + ("op",), "a list of child names or indexes", op)
        op = tuple(op)
    elif op is not None and (isinstance(op, bool) or not isinstance(op, (str, int))):
        raise _fail(path + ("op",), "an op name, index or path", op)
    port = fields["port"]
    if isinstance(port, bool) or not isinstance(port, (str, int)) or port == "":
        raise _fail(path + ("port",), "a port name or index (-1 for control)", port)
    if isinstance(port, int) and port < -1:
        raise _fail(path + ("port",), "a port index >= -1", port)
    return Endpoint(SELF if op is None else op, port)


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
        if "__ndarray__" in value:
            return _decode_array(value, path)
        if "__bytes__" in value:
            return _decode_bytes(value, path)
        return {k: _decode(v, path + (k,)) for k, v in value.items() if _key_ok(k, path)}
    if isinstance(value, bytes):
        return value
    raise _fail(
        path, "a string, number, boolean, null, list, mapping or array", f"<{type(value).__name__}>"
    )


def _key_ok(key: Any, path: DocPath) -> bool:
    if not isinstance(key, str):
        raise _fail(path + (key,), "a string key", key)
    return True


_MAX_DIMS = 64  # numpy's own limits
_MAX_BYTES = 2**63 - 1


def _decode_array(value: Mapping, path: DocPath) -> np.ndarray:
    spec = value["__ndarray__"]
    where = path + ("__ndarray__",)
    if len(value) != 1 or not isinstance(spec, Mapping) or set(spec) != {"dtype", "shape", "data"}:
        raise _fail(where, "{dtype, shape, data}", spec)
    dtype = _array_dtype(spec["dtype"], where + ("dtype",))
    shape = spec["shape"]
    if (
        not isinstance(shape, list)
        or len(shape) > _MAX_DIMS
        or not all(type(d) is int and d >= 0 for d in shape)
        or math.prod(max(d, 1) for d in shape) * dtype.itemsize > _MAX_BYTES  # numpy's bound
    ):
        raise _fail(where + ("shape",), f"at most {_MAX_DIMS} sizes of an array numpy can hold", shape)
    raw = _base64(spec["data"], where + ("data",))
    size = math.prod(shape) * dtype.itemsize  # Python ints: no overflow
    if len(raw) != size:
        raise _fail(where + ("data",), f"{size} bytes for shape {shape}", f"<{len(raw)} bytes>")
    array = np.frombuffer(raw, dtype=dtype).reshape(shape).copy()
    array.setflags(write=False)  # owned and read-only: freeze_array keeps it without a copy
    return freeze_array(array)


def _array_dtype(text: Any, path: DocPath) -> np.dtype:
    """A plain numpy dtype from its string; never objects, records, sub-arrays or size 0."""
    expected = "a numpy dtype string such as '<f4'"
    if not isinstance(text, str) or len(text) > 16:
        raise _fail(path, expected, text)
    try:
        dtype = np.dtype(text)
    except (TypeError, ValueError, SyntaxError):
        raise _fail(path, expected, text) from None
    if dtype.hasobject or dtype.fields is not None or dtype.subdtype is not None:
        raise _fail(path, "a dtype of plain values (no objects, records or sub-arrays)", text)
    if dtype.itemsize == 0:
        raise _fail(path, "a dtype whose items have a size", text)
    return dtype


def _base64(text: Any, path: DocPath) -> bytes:
    """Bytes from base64 text, on one line or folded into several (as YAML is written)."""
    if not isinstance(text, str):
        raise _fail(path, "base64 text", text)
    if "\n" in text or " " in text:
        text = "".join(text.split())
    try:
        return base64.b64decode(text, validate=True)
    except ValueError:
        raise _fail(path, "base64 text", text) from None


def _decode_bytes(value: Mapping, path: DocPath) -> bytes:
    if len(value) != 1 or not isinstance(value["__bytes__"], str):
        raise _fail(path, "{__bytes__: base64 text}", value)
    return _base64(value["__bytes__"], path + ("__bytes__",))


def encode_value(value: Any) -> Any:
    """The document form of an attribute value (arrays and bytes as markers)."""
    return _encode(value)


def _encode(value: Any) -> Any:
    if isinstance(value, _PLAIN):
        return value
    if isinstance(value, np.ndarray):
        return {
            "__ndarray__": {
                "dtype": value.dtype.str,
                "shape": list(value.shape),
                "data": base64.b64encode(np.ascontiguousarray(value).tobytes()).decode("ascii"),
            }
        }
    if isinstance(value, tuple):
        return [_encode(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _encode(v) for k, v in value.items()}
    if isinstance(value, bytes):
        return {"__bytes__": base64.b64encode(value).decode("ascii")}
    if isinstance(value, Container):
        return to_document(value)
    if isinstance(value, np.dtype):
        return value.str
    raise TypeError(f"cannot write a {type(value).__name__} attribute")


# -- writing --------------------------------------------------------------------------------


def to_document(item: Container | Edge | Port) -> dict:
    """The document describing a container (``graph``/``subgraph``/``op``), an edge or a port."""
    if isinstance(item, Edge):
        return {"edge": _edge_doc(item, None)}
    if isinstance(item, Port):
        return {"input_port": _port_doc(item)}
    kind = (
        "op" if item.is_op else ("graph" if item.name is None and item.type is None else "subgraph")
    )
    return {kind: _container_doc(item, kind)}


def _container_doc(c: Container, kind: str) -> dict:
    doc: dict[str, Any] = {}
    attrs = dict(c.attrs)
    if kind == "graph" and "namespace" in attrs:
        doc["namespace"] = attrs.pop("namespace")
    # written even when empty if an attribute shares the name, so reading does not lift it
    if c.type is not None or "type" in attrs:
        doc["type"] = c.type
    if c.name is not None or "name" in attrs:
        doc["name"] = c.name
    doc["uid"] = c.uid
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
