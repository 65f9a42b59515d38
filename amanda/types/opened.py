"""A partly flattened view of one container level, for levels that reach inside their children.

A level with tombstones, or with edges that name descendants by path (an ``amanda.edit``
wrapper), cannot be inferred child by child: its children's inputs depend on edges above them.
Only the containers those edges and tombstones reach into need opening, though. This view opens
them (and, in turn, whatever the opened containers reach into), lifts the edges of every opened
level with tombstones applied as ``flatten`` does, and keeps every other container whole: an
*opaque unit* inferred on its own, from its own cache. After an edit wrapper changes one path of
a large model, only that path is opened and every untouched subtree answers from its cache.
"""

from __future__ import annotations

from typing import Any

from amanda.containers.edge import CONTROL, SELF
from amanda.containers.order import topological

__all__ = ["OpenedView"]


class OpenedView:
    """Units (leaf ops and opaque containers) of ``root`` with ``open_all`` or only what is reached.

    ``units``: path -> (node, effective namespace), in document order. ``source(path, port)``:
    the terminal feeding a unit's input port: ``(path, port)`` of a unit's output, ``(SELF,
    port)`` for a top input, or None. ``junctions``: ``(path, port, side)`` of the boundary
    ports of opened containers below the root, with their terminal sources. ``outputs``: top
    output name -> terminal source.
    """

    def __init__(self, root: Any, namespace: str | None, open_all: bool = False) -> None:
        self.units: dict[tuple, tuple[Any, str | None]] = {}
        opened = _opened(root, open_all)
        into: dict[Any, Any] = {}  # junction or unit input -> its source, before resolution
        buried: dict[tuple, int] = {}
        lifted: list[tuple] = []
        stack: list[tuple[tuple, Any, str | None]] = [((), root, namespace)]
        while stack:
            path, node, ns = stack.pop()
            if path and (not node.children or path not in opened):
                self.units[path] = (node, ns)
                continue
            for tomb in node.tombstones:
                key = (path + tomb[0][0], tomb[0][1], path + tomb[1][0], tomb[1][1])
                if buried.get(key, len(path) + 1) > len(path):
                    buried[key] = len(path)
            lifted.extend((path, edge) for edge in node.edges)
            for child in reversed(node.children):
                stack.append((path + (child.name,), child, child.attrs.get("namespace", ns)))
        for path, edge in lifted:
            src, dst = edge[0], edge[1]
            if src[1] == CONTROL or dst[1] == CONTROL:
                continue  # control edges order execution; types do not flow along them
            s_path = path if src[0] is SELF else path + src[0]
            d_path = path if dst[0] is SELF else path + dst[0]
            depth = len(path)
            if buried and buried.get((s_path, src[1], d_path, dst[1]), depth) < depth:
                continue
            s = self._end(path, s_path, src[1], "src")
            d = self._end(path, d_path, dst[1], "dst")
            into.setdefault(d, s)
        self._into = into
        self._memo: dict[Any, Any] = {}
        self.junctions = {
            (j[1], j[2], j[3]): self._resolve(j) for j in into if j[0] == "J"
        }
        self.outputs = {j[1]: self._resolve(j) for j in into if j[0] == "OUT"}

    def _end(self, owner: tuple, path: tuple, port: Any, side: str) -> tuple:
        if path == owner:
            if not owner:
                return ("IN", port) if side == "src" else ("OUT", port)
            return ("J", owner, port, "in" if side == "src" else "out")
        if path in self.units:
            return ("U", path, port)
        return ("J", path, port, "out" if side == "src" else "in")

    def _resolve(self, start: Any) -> Any:
        """Follow junctions back to a unit output or a top input (None if nothing feeds it)."""
        seen = []
        node = start
        while True:
            if node in self._memo:
                found = self._memo[node]
                break
            if node[0] == "U":
                found = (node[1], node[2])
                break
            if node[0] == "IN":
                found = (SELF, node[1])
                break
            if node in seen:  # a cycle through boundary ports feeds nothing
                found = None
                break
            seen.append(node)
            nxt = self._into.get(node)
            if nxt is None:
                found = None
                break
            node = nxt
        for junction in seen:
            self._memo[junction] = found
        return found

    def source(self, path: tuple, port: Any) -> Any:
        """The terminal feeding input ``port`` of the unit at ``path``, or None."""
        src = self._into.get(("U", path, port))
        return None if src is None else self._resolve(src)

    def order(self) -> list[tuple]:
        """Units such that every unit comes after the units feeding it (document order else)."""
        pairs = []
        for key, src in self._into.items():
            if key[0] == "U":
                found = self._resolve(src)
                if found is not None and found[0] is not SELF and found[0] != key[1]:
                    pairs.append((found[0], key[1]))
        return topological(list(self.units), pairs, cycles="append")


def _opened(root: Any, open_all: bool) -> set[tuple]:
    """Paths of the containers whose edges must be lifted: those reached into, transitively."""
    opened: set[tuple] = {()}
    stack: list[tuple[tuple, Any]] = [((), root)]
    while stack:
        path, node = stack.pop()
        wanted: list[tuple] = []
        if open_all:
            wanted = [(c.name,) for c in node.children if c.children]
        for edge in node.edges:
            for end in (edge[0][0], edge[1][0]):
                if end is not SELF:
                    wanted.extend(end[:k] for k in range(1, len(end)))
        for tomb in node.tombstones:
            src, dst = tomb[0][0], tomb[1][0]
            for end in (src, dst):
                wanted.extend(end[:k] for k in range(1, len(end)))
            short, long = sorted((src, dst), key=len)
            if long[: len(short)] == short:
                wanted.append(short)  # the edge belongs to the shorter path's own level
        for rel in wanted:
            full = path + rel
            if full in opened:
                continue
            target = _descendant(root, full)
            if target is not None and target.children:
                opened.add(full)
                stack.append((full, target))
    return opened  # every prefix of a wanted path is wanted too, so ancestors are opened


def _descendant(root: Any, path: tuple) -> Any:
    node = root
    for name in path:
        if not node.children or not node.has_child(name):
            return None
        node = node.child(name)
    return node
