"""Writing inferred types into an exported ONNX graph as ``value_info``.

The exporter names a leaf's output value after the port's ``onnx_name`` (or ``path:port``);
every node output of the graph whose name is such a value, and which has no value_info yet,
gets one from the inferred type when its dtype is known. Names the exporter had to make unique
match no port and are left without (never with a wrong type). Each added entry carries the
metadata ``amanda_inferred: true``, so that importing the file again does not turn inferred
types into declared port attributes (import, export, import gives the same container).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from amanda.errors import AmandaError
from amanda.types.tensor_type import ONNX_DTYPES, OptionalType, SequenceType, TensorType
from amanda.types.typemap import infer_types

__all__ = ["INFERRED", "add_value_info", "is_inferred"]

INFERRED = "amanda_inferred"
_NUMBERS = {name: number for number, name in ONNX_DTYPES.items()}


def add_value_info(graph: Any, container: Any) -> int:
    """Add value_info to ``graph`` (the export of ``container``); returns how many were added."""

    try:
        types = infer_types(container)
    except AmandaError:
        return 0
    candidates: dict[str, Any] = {}
    seen: Counter = Counter()
    for path, port, side, t in types.entries():
        if side != "out" or not path or (path, port) in seen:
            continue
        op = _leaf(container, path)
        if op is None:
            continue
        attrs = op.port(port).attrs
        name = attrs.get("onnx_name") or f"{'/'.join(map(str, path))}:{port}"
        seen[name] += 1
        candidates[name] = t
    added = 0
    for sub in _graphs(graph):  # the main graph and every If/Loop/Scan body inside it
        added += _add(sub, candidates, seen)
    return added


def _graphs(graph: Any) -> list[Any]:
    found, stack = [], [graph]
    while stack:
        g = stack.pop()
        found.append(g)
        for node in g.node:
            for attr in node.attribute:
                stack.extend([attr.g] if attr.HasField("g") else list(attr.graphs))
    return found


def _add(graph: Any, candidates: dict[str, Any], seen: Counter) -> int:
    from onnx import helper

    typed = {vi.name for vi in (*graph.value_info, *graph.input, *graph.output)}
    typed |= {t.name for t in graph.initializer}
    added = 0
    for node in graph.node:
        for name in node.output:
            t = candidates.get(name)
            if not name or name in typed or seen[name] != 1:
                continue
            proto = _type_proto(t)
            if proto is None:
                continue
            graph.value_info.append(helper.make_value_info(name, proto))
            graph.value_info[-1].metadata_props.add(key=INFERRED, value="true")
            typed.add(name)
            added += 1
    return added


def _type_proto(t: Any) -> Any:
    """The TypeProto of a tensor, sequence or optional type whose dtypes are known, else None."""
    from onnx import helper

    if type(t) is TensorType:
        number = _NUMBERS.get(t.dtype)  # type: ignore[arg-type]
        return None if number is None else helper.make_tensor_type_proto(number, t.shape)
    if type(t) is SequenceType:
        inner = _type_proto(t.elem)
        return None if inner is None else helper.make_sequence_type_proto(inner)
    if type(t) is OptionalType:
        inner = _type_proto(t.elem)
        return None if inner is None else helper.make_optional_type_proto(inner)
    return None


def is_inferred(value_info: Any) -> bool:
    """Whether a ValueInfoProto was written by :func:`add_value_info` (not declared by a user)."""
    return any(p.key == INFERRED for p in value_info.metadata_props)


def _leaf(container: Any, path: tuple) -> Any:
    """The leaf op at ``path``, which may pass through a body held in an attribute."""
    node = container
    for name in path:
        if node.children and node.has_child(name):
            node = node.child(name)
        elif getattr(node.attrs.get(name), "_amanda_frozen", False):
            node = node.attrs[name]  # into an If/Loop/Scan body
        else:
            return None
    return None if node.children else node
