"""Where the boundary ports of nested containers get their values, on the effective view.

A nested container's input or output port carries the value of the leaf port (or top input)
that reaches it through the live edges of every level, tombstones applied, exactly as
``flatten`` resolves them; these helpers give that terminal source for every such port.
"""

from __future__ import annotations

from typing import Any

from amanda.containers.edge import CONTROL
from amanda.containers.flatten import _lift, _Resolver
from amanda.containers.values import EMPTY

__all__ = ["boundary_sources", "leaf_namespaces"]


def leaf_namespaces(root: Any, namespace: str | None) -> dict[tuple, str | None]:
    """Every leaf's effective namespace, by path relative to ``root``."""
    found: dict[tuple, str | None] = {}
    stack: list[tuple[tuple, Any, Any]] = [((), root, root.attrs.get("namespace", namespace))]
    while stack:
        path, node, ns = stack.pop()
        if not node.children:
            found[path] = node.attrs.get("namespace", ns) if path else ns
            continue
        for child in node.children:
            stack.append((path + (child.name,), child, child.attrs.get("namespace", ns)))
    return found


def boundary_sources(root: Any) -> dict[tuple, Any]:
    """``(path, port, 'in' | 'out')`` of every nested container port -> the Endpoint feeding it."""
    nodes: dict[tuple, Any] = {}
    lifted: list[tuple] = []
    buried: dict[tuple, int] = {}
    stack: list[tuple[tuple, Any]] = [((), root)]
    while stack:
        path, node = stack.pop()
        if not node.children:
            continue
        nodes[path] = node
        depth = len(path)
        for edge in node.edges:
            lifted.append(_lift(node, path, depth, edge))
        for tomb in node.tombstones:
            key = (path + tomb[0][0], tomb[0][1], path + tomb[1][0], tomb[1][1])
            if buried.get(key, depth + 1) > depth:
                buried[key] = depth
        stack.extend((path + (child.name,), child) for child in node.children)
    into: dict[Any, list] = {}
    for key, src, dst, attrs, depth in lifted:
        if buried and buried.get(key, depth) < depth:
            continue
        if type(dst) is tuple and dst[3] in ("in", "out"):
            into.setdefault(dst, []).append((src, attrs))
    resolver = _Resolver(into, nodes)
    found: dict[tuple, Any] = {}
    for junction in into:
        if junction[2] == CONTROL or not junction[1]:
            continue
        sources = resolver.sources(junction, EMPTY)
        for terminal, _ in sources:
            if terminal[1] != CONTROL:
                found[(junction[1], junction[2], junction[3])] = terminal
                break
    return found
