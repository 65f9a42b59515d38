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
from amanda.types.tensor_type import ONNX_DTYPES, TensorType
from amanda.types.typemap import infer_types

__all__ = ["INFERRED", "add_value_info", "is_inferred"]

INFERRED = "amanda_inferred"
_NUMBERS = {name: number for number, name in ONNX_DTYPES.items()}


def add_value_info(graph: Any, container: Any) -> int:
    """Add value_info to ``graph`` (the export of ``container``); returns how many were added."""
    from onnx import helper

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
    typed = {vi.name for vi in (*graph.value_info, *graph.input, *graph.output)}
    typed |= {t.name for t in graph.initializer}
    added = 0
    for node in graph.node:
        for name in node.output:
            t = candidates.get(name)
            if not name or name in typed or seen[name] != 1 or type(t) is not TensorType:
                continue
            number = _NUMBERS.get(t.dtype)  # type: ignore[arg-type]
            if number is None:
                continue
            graph.value_info.append(helper.make_tensor_value_info(name, number, t.shape))
            graph.value_info[-1].metadata_props.add(key=INFERRED, value="true")
            typed.add(name)
            added += 1
    return added


def is_inferred(value_info: Any) -> bool:
    """Whether a ValueInfoProto was written by :func:`add_value_info` (not declared by a user)."""
    return any(p.key == INFERRED for p in value_info.metadata_props)


def _leaf(container: Any, path: tuple) -> Any:
    node = container
    for name in path:
        if not node.children or not node.has_child(name):
            return None  # a body's port (reached through an attribute): not in the top graph
        node = node.child(name)
    return None if node.children else node
