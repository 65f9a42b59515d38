"""Edges that reach into a nested container from a level above it.

An edge may name a descendant by path (``("block", "conv")``). When the driver maps the nested
container, such an edge is a boundary edge of any match that touches its inner end, so it must
be re-attached with the match's other boundary edges. Before a nested container is mapped, each
such edge is handed down in the nested container's coordinates, its outer end replaced by a
marker (an op path no container can have); after the rules ran, the edges that come back are
put in place of the original, markers replaced by the original ends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from amanda.containers.edge import SELF, Edge

if TYPE_CHECKING:
    from amanda.namespaces.mapping.scope import Scope

__all__ = ["OUTER", "hand_down", "is_outer", "take_back"]

OUTER = "\x00outer"  # never a child name: names are strings a user wrote


def _inside(end: Any, child: str) -> bool:
    op = end[0]
    return op is not SELF and len(op) >= 2 and op[0] == child


def is_outer(end: Any) -> bool:
    """Whether an edge end is a marker standing for an end outside this container."""
    op = end[0]
    return op is not SELF and len(op) == 2 and op[0] == OUTER


def hand_down(scope: Scope, child: str) -> tuple[dict[int, Edge], list[Edge]]:
    """The edges of ``scope`` with exactly one end inside ``child``: by position, and in the child's
    coordinates (the outer end a marker)."""
    originals: dict[int, Edge] = {}
    passed: list[Edge] = []
    for i, edge in enumerate(scope.edges):
        inner = [_inside(edge[0], child), _inside(edge[1], child)]
        if inner[0] == inner[1]:
            continue
        originals[i] = edge
        ends = [(tuple(end[0][1:]), end[1]) if deep else ((OUTER, f"{i}:{side}"), end[1])
                for side, (end, deep) in enumerate(zip(edge[:2], inner))]
        passed.append(Edge(ends[0], ends[1], edge[2]))
    return originals, passed


def take_back(scope: Scope, child: str, originals: dict[int, Edge], returned: list[Edge]) -> None:
    """Put the handed-down edges, as the child's rules left them, back into ``scope``."""
    if not originals:
        return
    by_index: dict[int, list[Edge]] = {}
    for edge in returned:
        ends, index = [], None
        for end in (edge[0], edge[1]):
            if is_outer(end):
                position, side = end[0][1].split(":")
                index = int(position) if index is None else index
                ends.append(originals[int(position)][int(side)])
            elif end[0] is SELF:
                ends.append(((child,), end[1]))
            else:
                ends.append(((child, *end[0]), end[1]))
        by_index.setdefault(index if index is not None else -1, []).append(Edge(ends[0], ends[1], edge[2]))
    edges: list[Edge] = []
    for i, edge in enumerate(scope.edges):
        edges.extend(by_index.get(i, []) if i in originals else [edge])
    seen: set = set()
    unique = []
    for edge in edges:
        if edge.key not in seen:
            seen.add(edge.key)
            unique.append(edge)
    scope.set_edges(unique)
