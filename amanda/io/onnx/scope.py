"""Value scopes of ONNX graphs on import: the names a graph sees, the outer values its bodies
capture, and fresh names for ops.

>>> outer = Scope(None)
>>> outer.values["x"] = Endpoint(SELF, "x")
>>> inner = Scope(outer)
>>> inner.get("x"), inner.captured
(Endpoint(SELF, 'x'), ['x'])
>>> fresh_name("Add_0", {"Add_0"})
'Add_0_'
"""

from __future__ import annotations

from typing import Any

from amanda.containers.edge import SELF, Edge, Endpoint, Port
from amanda.errors import FormatError

__all__ = ["Scope", "capture_ports", "fresh_name"]


class Scope:
    """Value names visible in one graph; names read from enclosing graphs are *captured*."""

    __slots__ = ("captured", "parent", "values")

    def __init__(self, parent: Scope | None) -> None:
        self.values: dict[str, Endpoint] = {}
        self.parent = parent
        self.captured: list[str] = []

    def has(self, name: str) -> bool:
        scope: Scope | None = self
        while scope is not None:
            if name in scope.values:
                return True
            scope = scope.parent
        return False

    def get(self, name: str) -> Endpoint | None:
        found = self.values.get(name)
        if found is None and self.parent is not None and self.parent.has(name):
            found = Endpoint(SELF, name)
            self.values[name] = found
            self.captured.append(name)
        return found


def fresh_name(base: str, taken: set[str]) -> str:
    """``base``, with ``_`` appended until it is not in ``taken``."""
    name = base
    while name in taken:
        name = f"{name}_"
    return name


def capture_ports(captured: list[str], in_names: tuple[str, ...], key: tuple, scope: Scope, edges: list) -> list[Port]:
    """Input ports (and edges) for the outer values the op's bodies read."""
    ports = []
    taken = set(in_names)
    # by name: the order the file lists the bodies in (then_branch first or second) must not
    # change the op, or a model would not load, dump and load equal
    for value in sorted(dict.fromkeys(captured)):
        port = (
            fresh_name(value, taken) if value not in taken else fresh_name(f"{value}_captured", taken)
        )
        taken.add(port)
        attrs: dict[str, Any] = {"captured": True}
        if port != value:
            attrs["onnx_name"] = value
        ports.append(Port(port, attrs=attrs))
        src = scope.get(value)
        if src is None:  # the body found it in an enclosing scope, so this cannot happen
            raise FormatError(f"captured value {value!r} vanished", path=key)
        edges.append(Edge(src, Endpoint(key, port)))
    return ports
