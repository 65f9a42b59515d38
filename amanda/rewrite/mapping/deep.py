"""Edges that reach into a nested container from a level above it.

An edge may name a descendant by path (``("block", "conv")``). When the driver maps the nested
container, such an edge is a boundary edge of any match that touches its inner end, so it must
be re-attached with the match's other boundary edges. Before a nested container is mapped, each
such edge is handed down in the nested container's coordinates, its outer end replaced by a
marker (an op path no container can have); after the rules ran, the edges that come back are
put in place of the original, markers replaced by the original ends. An edge of the level
above with both ends inside the nested container (an importer's control edge between two ops
of one scope) is handed down for good: it is that container's edge.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from amanda.containers.edge import SELF, Edge
from amanda.containers.frames import lift_end, lower_end

if TYPE_CHECKING:
    from amanda.rewrite.mapping.scope import Scope

__all__ = ["OUTER", "hand_down", "is_outer", "take_back"]

OUTER = "\x00outer"  # never a child name: names are strings a user wrote


def is_outer(end: Any) -> bool:
    """Whether an edge end is a marker standing for an end outside this container."""
    op = end[0]
    return op is not SELF and len(op) == 2 and op[0] == OUTER


def hand_down(scope: Scope, child: str) -> tuple[dict[int, Edge], list[Edge]]:
    """The edges of ``scope`` with an end inside ``child``: by number, and in the child's frame
    (an outer end a marker; an edge with both ends inside is the child's from then on)."""
    originals: dict[int, Edge] = {}
    passed: list[Edge] = []
    for i, edge in enumerate(scope.reaching_into(child)):
        lowered = [lower_end(edge[0], (child,)), lower_end(edge[1], (child,))]
        inner = [end is not None and end[0] is not SELF for end in lowered]  # strictly inside
        if not any(inner):
            continue
        originals[i] = edge
        if all(inner):
            passed.append(Edge(cast(Any, lowered[0]), cast(Any, lowered[1]), attrs=edge[2]))
            continue
        ends: list[Any] = [end if deep else ((OUTER, f"{i}:{side}"), edge[side][1])
                           for side, (end, deep) in enumerate(zip(lowered, inner))]
        passed.append(Edge(ends[0], ends[1], attrs=edge[2]))
    return originals, passed


def take_back(scope: Scope, child: str, originals: dict[int, Edge], returned: list[Edge]) -> None:
    """Put the handed-down edges, as the child's rules left them, back into ``scope`` (in place of
    the originals; ``scope`` unchanged when they came back as they went)."""
    if not originals:
        return
    moved = [e for e in originals.values() if _inside(e[0], child) and _inside(e[1], child)]
    for edge in moved:  # the child's own edges now
        scope.remove_edge(edge)
    lifted = [edge for _, edge in sorted((_lifted_back(child, originals, e) for e in returned), key=lambda p: p[0])]
    rest = [e for e in originals.values() if not (_inside(e[0], child) and _inside(e[1], child))]
    if lifted == rest:
        return
    for edge in rest:
        scope.remove_edge(edge)
    for edge in lifted:
        scope.add_edge(edge)  # a second edge of one key is dropped: the first wins


def _inside(end: Any, child: str) -> bool:
    """Whether an edge end lies strictly inside the child ``child`` (a path through it)."""
    return end[0] is not SELF and len(end[0]) > 1 and end[0][0] == child


def _lifted_back(child: str, originals: dict[int, Edge], edge: Edge) -> tuple[int, Edge]:
    """A returned edge in the scope's frame, and the position of the original it replaces
    (-1 when neither end is a marker)."""
    ends, index = [], -1
    for end in (edge[0], edge[1]):
        if is_outer(end):
            position, side = map(int, end[0][1].split(":"))
            index = position if index == -1 else index
            ends.append(originals[position][side])
        else:
            ends.append(lift_end(end, (child,)))
    return index, Edge(ends[0], ends[1], attrs=edge[2])
