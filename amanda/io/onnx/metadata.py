"""``metadata_props`` entries amanda reads and writes: uids and attributes ONNX has no slot for.

An op's uid travels as ``amanda.uid`` (in node, initializer, graph and model metadata); an
attribute that is not an ONNX attribute of the op (``debug: true``) as ``amanda.attr.<name>``
holding JSON in amanda's document encoding; every other entry is plain metadata.

>>> from onnx import NodeProto
>>> node = NodeProto()
>>> write_metadata(node.metadata_props, {"k": "v"}, "uid-1", {"debug": True})
>>> read_metadata(node.metadata_props)
({'k': 'v'}, {'debug': True}, 'uid-1')
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from amanda.errors import AmandaError, FormatError
from amanda.safe_load import load_text

__all__ = ["ATTR_KEY", "UID_KEY", "graph_info", "node_info", "read_metadata", "read_pairs",
           "write_metadata"]

UID_KEY = "amanda.uid"  # metadata_props key holding an op's (or graph's) uid
ATTR_KEY = "amanda.attr."  # metadata_props prefix of amanda attributes ONNX has no slot for


def read_metadata(props: Any, where: str = "") -> tuple[dict[str, str], dict[str, Any], str | None]:
    """(plain metadata, amanda attributes, uid) from ``metadata_props`` entries."""
    return read_pairs([(entry.key, entry.value) for entry in props], where)


def read_pairs(pairs: Any, where: str = "") -> tuple[dict[str, str], dict[str, Any], str | None]:
    """(plain metadata, amanda attributes, uid) from ``metadata_props`` entries already read as
    (key, value) pairs (each entry's fields read once: ``amanda.io.onnx.node_fields``).

    >>> read_pairs([("k", "v"), (UID_KEY, "u")])
    ({'k': 'v'}, {}, 'u')
    """
    plain: dict[str, str] = dict(pairs)
    if "amanda." not in "\n".join(plain):  # no amanda entry (an exporter's metadata): all plain, in C
        return plain, {}, None
    plain = {}
    extra: dict[str, Any] = {}
    uid = None
    for key, value in pairs:
        if key == UID_KEY:
            uid = value or None
        elif key.startswith(ATTR_KEY):
            from amanda.io.document import decode_value as _decode

            try:
                extra[key[len(ATTR_KEY) :]] = _decode(load_text(value, "json"), (key,))
            except (ValueError, AmandaError) as exc:
                raise FormatError(
                    f"{where}metadata {key!r} is not an amanda attribute: {exc}",
                    path=key,
                    expected="JSON written by amanda",
                    found=value[:60],
                ) from None
        else:
            plain[key] = value
    return plain, extra, uid


def write_metadata(
    target: Any, plain: Mapping[str, Any] | None, uid: str | None, extra: Mapping[str, Any]
) -> None:
    """Append plain entries, ``amanda.attr.*`` entries and the uid to ``metadata_props``."""
    if plain:
        for key, value in plain.items():
            target.add(key=str(key), value=str(value))
    for key, value in extra.items():
        from amanda.io.document import encode_value as _encode

        try:
            text = json.dumps(_encode(value))
        except (TypeError, ValueError) as exc:
            raise FormatError(
                f"attribute {key!r} cannot be kept in ONNX metadata: {exc}", path=key
            ) from None
        target.add(key=ATTR_KEY + key, value=text)
    if uid:
        target.add(key=UID_KEY, value=uid)


def node_info(original: str | None, doc: str, overload: str, hints: dict[str, str]) -> dict[str, Any]:
    """What a node's ``onnx_node`` attribute keeps: its name where the op was renamed (``""``
    for a node without one), its doc string and overload, and the attribute types the schema
    does not give; empty values are left out.

    >>> node_info("", "doc", "", {}), node_info(None, "", "", {"alpha": "float"})
    ({'name': '', 'doc_string': 'doc'}, {'attr_types': {'alpha': 'float'}})
    """
    info: dict[str, Any] = {}
    for field, value in (("name", original), ("doc_string", doc), ("overload", overload), ("attr_types", hints)):
        if value or (field == "name" and value is not None):
            info[field] = value
    return info


def graph_info(g: Any, meta: dict) -> dict[str, Any]:
    """What a graph says of itself beyond its nodes: doc string, metadata, quantization."""
    info: dict[str, Any] = {}
    if g.doc_string:
        info["doc_string"] = g.doc_string
    if meta:
        info["metadata_props"] = meta
    if g.quantization_annotation:
        info["quantization_annotation"] = tuple(q.SerializeToString() for q in g.quantization_annotation)
    return info
