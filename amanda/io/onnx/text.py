"""Text fields of an ONNX model that are not UTF-8 (protobuf hands them out as ``bytes``).

Read on, such a field would become a name no container can hold, or text written back changed,
so the import refuses it with a FormatError naming the field (``graph.node[3].name``). A field the
import does not read (a node's ``device_configurations``) is not checked.
Attribute strings are ``bytes`` fields in ONNX, so any bytes are fine there (they stay bytes).

The check costs one walk over the model's messages. The nodes, by far the most of them, are
skipped by that walk (:func:`check_text_outside_nodes`) and checked instead by the importer from
the values it reads anyway (with :func:`attribute_text_ok` and :func:`props_text_ok`); only when that finds a fault does the full
walk (:func:`check_text`) run, to name the field.
"""

from __future__ import annotations

from itertools import chain, count, repeat
from typing import Any

from google.protobuf.descriptor import FieldDescriptor  # type: ignore[import-untyped]

from amanda.errors import FormatError

__all__ = ["attribute_text_ok", "check_text", "check_text_outside_nodes", "props_text_ok", "value_info_text_ok"]

_STRING = FieldDescriptor.TYPE_STRING
_MESSAGE = FieldDescriptor.TYPE_MESSAGE
_ONLY_STR = frozenset({str})
_READ_BY_THE_IMPORTER = ("node", "value_info")  # a graph's fields whose text the importer checks
_SCALAR_ATTRIBUTES = frozenset({1, 2, 3, 6, 7, 8})  # FLOAT, INT, STRING and their lists
# the text and message fields of a node and a tensor the import checks by name, the others
# (device_configurations) it does not read; a test pins these to the installed onnx
NODE_TEXT_FIELDS = frozenset({"input", "output", "name", "op_type", "domain", "overload", "doc_string",
                              "attribute", "metadata_props"})
TENSOR_TEXT_FIELDS = frozenset({"name", "doc_string", "external_data", "metadata_props", "segment"})
# the text and message fields of a tensor-typed value_info, level by level, checked by name
# (a value_info per value in the exports of torch's dynamo exporter: the bulk of the walk)
VALUE_INFO_TEXT_FIELDS = {
    "ValueInfoProto": frozenset({"name", "doc_string", "type", "metadata_props"}),
    "TypeProto": frozenset({"denotation", "tensor_type", "sequence_type", "map_type", "optional_type",
                            "sparse_tensor_type", "opaque_type"}),  # one of the types at most
    "TypeProto.Tensor": frozenset({"shape"}),
    "TensorShapeProto": frozenset({"dim"}),
    "TensorShapeProto.Dimension": frozenset({"dim_param", "denotation"}),
}
_PLANS: dict[Any, tuple[tuple[str, bool, bool], ...]] = {}
_PROTOS: dict[str, Any] = {}  # descriptors of AttributeProto, GraphProto, NodeProto (onnx loads late)


def check_text(model: Any, source: str | None = None) -> None:
    """Raise FormatError naming the first text field (a name, a doc string, a metadata value …)
    of ``model`` that is not UTF-8.

    >>> import onnx
    >>> model = onnx.ModelProto()
    >>> model.ParseFromString(b"\\x3a\\x05\\x0a\\x03\\x0a\\x01\\xff")  # graph { node { input: b"\\xff" } }
    7
    >>> check_text(model, "m.onnx")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    amanda.errors.FormatError: m.onnx: graph.node[0].input[0] is not UTF-8 text: b'\\xff'...
    """
    _walk(model, None, source, skip_nodes=False)


def check_text_outside_nodes(message: Any, source: str | None = None) -> None:
    """:func:`check_text` for every field except the nodes and value_info of graphs (a
    function's nodes are checked), which the importer checks as it reads them
    (:func:`value_info_text_ok`).

    >>> import onnx
    >>> model = onnx.ModelProto()
    >>> model.ParseFromString(b"\\x3a\\x05\\x0a\\x03\\x0a\\x01\\xff")
    7
    >>> check_text_outside_nodes(model)  # the bad text is in a node
    """
    _walk(message, None, source, skip_nodes=True)


def attribute_text_ok(attr: Any) -> bool:
    """Whether the text fields of an ``AttributeProto`` are all text (a tensor's and a type's
    too); the nodes of graph attributes are left to the import of those nodes.

    >>> from onnx import helper
    >>> attribute_text_ok(helper.make_attribute("mode", "é"))
    True
    """
    if type(attr.name) is not str or type(attr.ref_attr_name) is not str or type(attr.doc_string) is not str:
        return False
    kind = attr.type
    if kind == 4:  # TENSOR (every Constant node)
        return _tensor_ok(attr.t) or _walk_ok(attr.t)
    return kind in _SCALAR_ATTRIBUTES or _walk_ok(attr)


def value_info_text_ok(info: Any) -> bool:
    """Whether every text field of a ``ValueInfoProto`` is text.

    >>> from onnx import helper
    >>> value_info_text_ok(helper.make_tensor_value_info("x", 1, ["n"]))
    True
    """
    return _value_info_ok(info) or _walk_ok(info)


def _tensor_ok(tensor: Any) -> bool:
    """Whether a tensor's text fields (name, doc string, the keys and values of its external
    data entries) are text and it has none of the others set (False leaves the rest to the
    walk)."""
    if (type(tensor.name) is not str or type(tensor.doc_string) is not str or tensor.metadata_props
            or tensor.HasField("segment")):
        return False
    external = tensor.external_data
    return not external or _ONLY_STR.issuperset(map(type, chain.from_iterable((e.key, e.value) for e in external)))


def _value_info_ok(info: Any) -> bool:
    """Whether a ValueInfoProto of a tensor type (or none) holds only text; False for any other
    kind too (the walk then checks it). Field by field: a walk over its nested messages costs
    ten times as much."""
    if type(info.name) is not str or type(info.doc_string) is not str or info.metadata_props:
        return False
    kind = info.type
    if type(kind.denotation) is not str or kind.WhichOneof("value") not in (None, "tensor_type"):
        return False
    return all(type(d.dim_param) is str and type(d.denotation) is str for d in kind.tensor_type.shape.dim)


def props_text_ok(props: Any) -> bool:
    """Whether every key and value of ``metadata_props`` entries is text.

    >>> from onnx import StringStringEntryProto
    >>> props_text_ok([StringStringEntryProto(key="k", value="é")])
    True
    """
    return all(type(p.key) is str and type(p.value) is str for p in props)


def _walk_ok(message: Any, only: str | None = None) -> bool:
    try:
        _walk(message, None, None, skip_nodes=True, only=only)
    except FormatError:
        return False
    return True


def _walk(root: Any, where: Any, source: str | None, skip_nodes: bool, only: str | None = None) -> None:
    attribute, graph = _proto("AttributeProto"), _proto("GraphProto")
    by_fields = {_proto("ValueInfoProto"): _value_info_ok, _proto("TensorProto"): _tensor_ok}
    stack: list[tuple[Any, Any]] = [(root, where)]
    pop, extend, append = stack.pop, stack.extend, stack.append
    while stack:
        message, where = pop()
        descriptor = message.DESCRIPTOR
        fields_ok = by_fields.get(descriptor)
        if fields_ok is not None and message is not root and fields_ok(message):
            continue  # the usual kinds, checked field by field; a fault is named by the walk
        if descriptor is attribute and message.type in _SCALAR_ATTRIBUTES:
            # a number, string or list of them: the import reads nothing else of it (most
            # attributes are these, and skipping their unset message fields halves the walk)
            _check_attribute_texts(message, where, source)
            continue
        for name, is_text, repeated in _text_plan(descriptor):
            if only is not None and message is root and name != only:
                continue
            if repeated:
                items = getattr(message, name)
                if not items or (skip_nodes and name in _READ_BY_THE_IMPORTER and descriptor is graph):
                    continue
                if not is_text:
                    extend(zip(items, zip(repeat(where), repeat(name), count())))
                elif not _ONLY_STR.issuperset(map(type, items)):
                    _bad_text_item(items, (where, name), source)
            elif is_text:
                _check_text(message, name, where, source)
            elif message.HasField(name):
                append((getattr(message, name), (where, name, None)))


def _check_attribute_texts(message: Any, where: Any, source: str | None) -> None:
    """The text fields of a scalar attribute: the only ones of it the import reads."""
    for name in ("name", "ref_attr_name", "doc_string"):
        _check_text(message, name, where, source)


def _check_text(message: Any, name: str, where: Any, source: str | None) -> None:
    """One singular text field of ``message`` must hold text."""
    item = getattr(message, name)
    if type(item) is not str:
        _bad_text((where, name, None), item, source)


def _bad_text_item(items: Any, where: tuple[Any, str], source: str | None) -> None:
    """Name the first item of a repeated text field that is not text."""
    i = next(i for i, item in enumerate(items) if type(item) is not str)
    _bad_text((*where, i), items[i], source)


def _proto(name: str) -> Any:
    descriptor = _PROTOS.get(name)
    if descriptor is None:
        import onnx

        descriptor = _PROTOS[name] = getattr(onnx, name).DESCRIPTOR
    return descriptor


def _text_plan(descriptor: Any) -> tuple[tuple[str, bool, bool], ...]:
    """``(field name, is text, is repeated)`` for the text and message fields of a message type;
    bytes fields (tensor data, attribute strings) are never read, so never copied."""
    plan = _PLANS.get(descriptor)
    if plan is None:
        plan = _PLANS[descriptor] = tuple(
            (f.name, f.type == _STRING, f.is_repeated)
            for f in descriptor.fields
            if f.type in (_STRING, _MESSAGE)
        )
    return plan


def _bad_text(where: Any, value: Any, source: str | None) -> None:
    parts: list[str] = []
    while where is not None:
        where, name, index = where
        parts.append(name if index is None else f"{name}[{index}]")
    field = ".".join(reversed(parts))
    raise FormatError(
        f"{source + ': ' if source else ''}{field} is not UTF-8 text: {bytes(value)[:40]!r}; "
        "ONNX text fields (names, doc strings, metadata) must be UTF-8",
        path=field,
        expected="UTF-8 text",
        found=repr(bytes(value)[:40]),
    )
