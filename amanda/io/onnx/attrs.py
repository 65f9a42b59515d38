"""ONNX node attributes <-> Python values.

FLOAT -> float (the shortest decimal that is the same float32), INT -> int, STRING -> str
(bytes when not UTF-8), TENSOR -> read-only array, GRAPH -> Container, SPARSE_TENSOR ->
``{values, indices, dims}``, TYPE_PROTO -> a nested type mapping (see ``onnx_values``), and
the plural kinds -> tuples of those. Export picks the attribute type from the op schema when
there is one, else from a hint, else from the Python value.

>>> attr = value_to_attr("perm", (0, 2, 1), None)
>>> attr.type == attr.INTS, attr_to_value(attr)[0]
(True, (0, 2, 1))
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from amanda.containers.refs import AttrRef
from amanda.errors import FormatError
from amanda.io.onnx.text import attribute_text_ok
from amanda.io.onnx.values import (
    array_to_tensor,
    require_onnx,
    sparse_to_value,
    tensor_to_array,
    type_to_value,
    value_to_sparse,
    value_to_type,
)

__all__ = [
    "ATTR_TYPE_NAMES", "attr_to_value", "fill_attr", "infer_attr_type", "read_attributes", "value_to_attr",
]

# AttributeProto.AttributeType numbers by their lower-case names (the names op schemas use)
ATTR_TYPE_NAMES: dict[int, str] = {
    1: "float",
    2: "int",
    3: "string",
    4: "tensor",
    5: "graph",
    6: "floats",
    7: "ints",
    8: "strings",
    9: "tensors",
    10: "graphs",
    11: "sparse_tensor",
    12: "sparse_tensors",
    13: "type_proto",
    14: "type_protos",
}
_ATTR_NUMBERS = {name: number for number, name in ATTR_TYPE_NAMES.items()}

GraphIn = Callable[[Any, str], Any]  # (GraphProto, attribute name) -> Container
GraphOut = Callable[[Any, str], Any]  # (Container, attribute name) -> GraphProto


def _float(value: float) -> float:
    # the float32 an attribute holds, written as the shortest decimal that reads back to it
    return float(str(np.float32(value)))


def _string(value: bytes) -> str | bytes:
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return value


def _undefined_type(attr: Any) -> int:
    """The type of an attribute written without one (old exporters): the field that is set."""
    for number, field in (
        (1, "f"),
        (2, "i"),
        (3, "s"),
        (4, "t"),
        (5, "g"),
        (11, "sparse_tensor"),
        (13, "tp"),
    ):
        if attr.HasField(field):
            return number
    for number, field in (
        (6, "floats"),
        (7, "ints"),
        (8, "strings"),
        (9, "tensors"),
        (10, "graphs"),
        (12, "sparse_tensors"),
        (14, "type_protos"),
    ):
        if len(getattr(attr, field)):
            return number
    return 0


def attr_to_value(attr: Any, graph: GraphIn | None = None, where: str = "") -> tuple[Any, str]:
    """``(value, type name)`` of an ``AttributeProto``; GRAPH bodies go through ``graph``."""
    kind = attr.type or _undefined_type(attr)
    if attr.ref_attr_name:
        raise FormatError(
            f"{where}attribute {attr.name!r} refers to function attribute {attr.ref_attr_name!r} "
            "outside a function body",
            path=attr.name,
            expected="a value",
            found="ref_attr_name",
        )
    if kind == 2:
        return attr.i, "int"
    if kind == 1:
        return _float(attr.f), "float"
    if kind == 3:
        return _string(attr.s), "string"
    if kind == 7:
        return tuple(attr.ints[:]), "ints"
    if kind == 6:
        return tuple(_float(v) for v in attr.floats), "floats"
    if kind == 4:
        return tensor_to_array(attr.t, where), "tensor"
    if kind == 8:
        return tuple(_string(v) for v in attr.strings), "strings"
    if kind == 9:
        return tuple(tensor_to_array(t, where) for t in attr.tensors), "tensors"
    return _structured_value(attr, kind, graph, where)


def _structured_value(attr: Any, kind: int, graph: GraphIn | None, where: str) -> tuple[Any, str]:
    """``(value, type name)`` of an attribute holding graphs, sparse tensors or types (the rare
    kinds, read after numbers, strings and tensors)."""
    if kind in (5, 10):
        if graph is None:
            raise FormatError(f"{where}graph attribute {attr.name!r} needs a graph converter")
        if kind == 5:
            return graph(attr.g, attr.name), "graph"
        return tuple(graph(g, f"{attr.name}[{i}]") for i, g in enumerate(attr.graphs)), "graphs"
    if kind == 11:
        return sparse_to_value(attr.sparse_tensor, where), "sparse_tensor"
    if kind == 12:
        return tuple(sparse_to_value(s, where) for s in attr.sparse_tensors), "sparse_tensors"
    if kind == 13:
        return type_to_value(attr.tp), "type_proto"
    if kind == 14:
        return tuple(type_to_value(t) for t in attr.type_protos), "type_protos"
    raise FormatError(
        f"{where}attribute {attr.name!r} has no value",
        path=attr.name,
        expected="an attribute type",
        found=f"type {attr.type}",
    )


def _is_container(value: Any) -> bool:
    return getattr(value, "_amanda_frozen", False) and hasattr(value, "children")


def _element_type(value: Any) -> str | None:
    if isinstance(value, (bool, np.bool_)):
        return "int"
    if isinstance(value, (int, np.integer)):
        return "int"
    if isinstance(value, (float, np.floating)):
        return "float"
    if isinstance(value, (str, bytes)):
        return "string"
    if isinstance(value, np.ndarray):
        return "tensor"
    if _is_container(value):
        return "graph"
    if isinstance(value, Mapping):
        return "sparse_tensor" if "values" in value and "indices" in value else "type_proto"
    return None


def infer_attr_type(value: Any) -> str | None:
    """The attribute type a Python value exports as when no schema or hint says (None: unknown).

    An empty tuple gives ``ints``; a tuple mixing ints and floats gives ``floats``.

    >>> infer_attr_type(1.5), infer_attr_type(("a", "b")), infer_attr_type(())
    ('float', 'strings', 'ints')
    """
    if isinstance(value, tuple):
        kinds = {_element_type(v) for v in value}
        if not kinds:
            return "ints"
        if kinds == {"int", "float"}:
            return "floats"
        (kind,) = kinds if len(kinds) == 1 else (None,)
        if kind is not None:
            return kind + "s"
        return None
    return _element_type(value)


def _bytes(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    raise TypeError(f"expected a string, found {type(value).__name__}")


def _int(value: Any) -> int:
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value.item()
    if isinstance(value, (float, np.floating)) and not float(value).is_integer():
        raise TypeError(f"expected an int, found {value!r}")
    if isinstance(value, (str, bytes)) or value is None:
        raise TypeError(f"expected an int, found {type(value).__name__}")
    return int(value)


def _float_of(value: Any) -> float:
    if isinstance(value, (str, bytes)) or value is None:
        raise TypeError(f"expected a number, found {type(value).__name__}")
    return float(value)


def _seq(value: Any) -> tuple:
    if isinstance(value, np.ndarray):
        return tuple(value.ravel().tolist()) if value.ndim <= 1 else tuple(value)
    if isinstance(value, (tuple, list)):
        return tuple(value)
    raise TypeError(f"expected a list, found {type(value).__name__}")


def fill_attr(
    target: Any, name: str, value: Any, type_name: str, graph: GraphOut | None = None
) -> None:
    """Write ``value`` as attribute ``name`` of type ``type_name`` into an ``AttributeProto``.

    Raises TypeError (or FormatError) when the value does not fit the type.
    """
    number = _ATTR_NUMBERS.get(type_name)
    if number is None:
        raise TypeError(f"unknown ONNX attribute type {type_name!r}")
    target.name = name
    target.type = number
    if number == 2:
        target.i = _int(value)
    elif number == 1:
        target.f = _float_of(value)
    elif number == 3:
        target.s = _bytes(value)
    elif number == 7:
        target.ints.extend(_int(v) for v in _seq(value))
    elif number == 6:
        target.floats.extend(_float_of(v) for v in _seq(value))
    elif number == 8:
        target.strings.extend(_bytes(v) for v in _seq(value))
    elif number == 4:
        target.t.CopyFrom(array_to_tensor(np.asarray(value)))
    elif number == 9:
        target.tensors.extend(array_to_tensor(np.asarray(v)) for v in _seq(value))
    else:
        _fill_structured(target, name, value, number, graph)


def _fill_structured(target: Any, name: str, value: Any, number: int, graph: GraphOut | None) -> None:
    """:func:`fill_attr` for the attribute kinds that hold graphs, sparse tensors or types."""
    if number in (5, 10):
        if graph is None:
            raise TypeError("graph attributes need a graph writer")
        if number == 5:
            if not _is_container(value):
                raise TypeError(f"expected a Container, found {type(value).__name__}")
            target.g.CopyFrom(graph(value, name))
        else:
            for i, body in enumerate(_seq(value)):
                if not _is_container(body):
                    raise TypeError(f"expected Containers, found {type(body).__name__}")
                target.graphs.append(graph(body, f"{name}[{i}]"))
    elif number == 11:
        target.sparse_tensor.CopyFrom(value_to_sparse(value))
    elif number == 12:
        target.sparse_tensors.extend(value_to_sparse(v) for v in _seq(value))
    elif number == 13:
        target.tp.CopyFrom(value_to_type(value))
    else:
        target.type_protos.extend(value_to_type(v) for v in _seq(value))


def value_to_attr(
    name: str, value: Any, type_name: str | None, graph: GraphOut | None = None
) -> Any:
    """A new ``AttributeProto``; the type is inferred from the value when ``type_name`` is None."""
    onnx = require_onnx()
    attr = onnx.AttributeProto()
    chosen = type_name or infer_attr_type(value)
    if chosen is None:
        raise TypeError(f"cannot tell the ONNX attribute type of {value!r}")
    fill_attr(attr, name, value, chosen, graph)
    return attr


def read_attributes(node: Any, schema: Any, body: GraphIn | None, where: str, attrs: dict, hints: dict,
                    in_function: bool = False) -> bool:
    """Fill ``attrs`` with a ``NodeProto``'s attribute values and ``hints`` with the types its
    schema (or None) does not give; False, having stopped, at an attribute whose text is not
    UTF-8 (the caller names it). In a function body (``in_function``), a reference to a function
    attribute is kept as an :class:`~amanda.containers.refs.AttrRef` (the call's value is taken
    where it is needed). ``body`` converts graph attributes; ``where`` prefixes messages.

    >>> from onnx import AttributeProto, helper
    >>> node = helper.make_node("Concat", ["a"], ["b"], axis=1)
    >>> node.attribute.extend([helper.make_attribute("pads", [], attr_type=AttributeProto.INTS)])
    >>> attrs, hints = {}, {}
    >>> read_attributes(node, None, None, "", attrs, hints), attrs, hints
    (True, {'axis': 1, 'pads': ()}, {'pads': 'ints'})
    """
    for attr in node.attribute:
        if not attribute_text_ok(attr):
            return False
        if attr.ref_attr_name and in_function:
            attrs[attr.name] = AttrRef(attr.ref_attr_name, ATTR_TYPE_NAMES.get(attr.type, "undefined"))
            continue
        value, kind = attr_to_value(attr, body, where)
        attr_name = attr.name
        attrs[attr_name] = value
        if schema is None:
            if isinstance(value, tuple) and not value:
                hints[attr_name] = kind  # an empty list could be any list type
        else:
            known = schema.attrs.get(attr_name)
            if known is None or known.type != kind:
                hints[attr_name] = kind  # keep what the file says where the schema disagrees
    return True
