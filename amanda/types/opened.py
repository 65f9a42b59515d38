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

from typing import Any, NamedTuple

from amanda.containers.edge import CONTROL, SELF
from amanda.containers.order import ordered
from amanda.containers.records import Junction, Path, PortRef

__all__ = ["OpenedView", "TopPort", "UnitPort"]


class UnitPort(NamedTuple):
    """A port of a unit at ``path``: an output when it is a source, an input when fed."""

    path: Path
    port: PortRef


class TopPort(NamedTuple):
    """A port of the root: ``side`` ``"in"`` for an input (a source), ``"out"`` for an output."""

    port: PortRef
    side: str


End = Junction | UnitPort | TopPort


class OpenedView:
    """Units (leaf ops and opaque containers) of ``root``, opening only what its edges reach into.

    ``units``: path -> (node, effective namespace), in document order. ``source(path, port)``:
    the terminal feeding a unit's input port: ``(path, port)`` of a unit's output, ``(SELF,
    port)`` for a top input, or None. ``junctions``: each :class:`Junction` (a boundary port
    of an opened container below the root) with its terminal source. ``outputs``: top output
    name -> terminal source.
    """

    def __init__(self, root: Any, namespace: str | None) -> None:
        self.units: dict[Path, tuple[Any, str | None]] = {}
        opened = _opened(root)
        into: dict[End, End] = {}  # junction, unit input or top output -> its source, before resolution
        buried: dict[tuple, int] = {}
        lifted: list[tuple[Path, Any]] = []
        stack: list[tuple[Path, Any, str | None]] = [((), root, namespace)]
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
        self.maybe_looped = False  # control edges order the units, or boundary ports loop: order() cannot see them
        for path, edge in lifted:
            src, dst = edge[0], edge[1]
            if src[1] == CONTROL or dst[1] == CONTROL:
                self.maybe_looped = True
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
        self._memo: dict[End, Any] = {}
        self.junctions = {j: self._resolve(j) for j in into if type(j) is Junction}
        self.outputs = {j.port: self._resolve(j) for j in into if type(j) is TopPort}

    def _end(self, owner: Path, path: Path, port: PortRef, side: str) -> End:
        if path == owner:
            if not owner:
                return TopPort(port, "in" if side == "src" else "out")
            return Junction(owner, port, "in" if side == "src" else "out")
        if path in self.units:
            return UnitPort(path, port)
        return Junction(path, port, "out" if side == "src" else "in")

    def _resolve(self, start: End) -> Any:
        """Follow junctions back to a unit output or a top input (None if nothing feeds it)."""
        seen = []
        node: End = start
        while True:
            if node in self._memo:
                found = self._memo[node]
                break
            if type(node) is UnitPort:
                found = (node.path, node.port)
                break
            if type(node) is TopPort and node.side == "in":
                found = (SELF, node.port)
                break
            if node in seen:  # a cycle through boundary ports feeds nothing
                self.maybe_looped = True  # ... and is a cycle order() reports as a loop
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

    def source(self, path: Path, port: PortRef) -> Any:
        """The terminal feeding input ``port`` of the unit at ``path``, or None."""
        src = self._into.get(UnitPort(path, port))
        return None if src is None else self._resolve(src)

    def order(self) -> tuple[list[Path], bool]:
        """Units such that every unit comes after the units feeding it (document order else),
        and whether a unit feeds itself or units feed each other in a loop (a cycle of the
        effective view may then pass through them; with control edges, which this view does
        not follow, a loop is assumed possible)."""
        pairs = []
        looped = self.maybe_looped
        for key, src in self._into.items():
            if type(key) is UnitPort:
                found = self._resolve(src)
                if found is not None and found[0] is not SELF:
                    if found[0] == key.path:
                        looped = True
                    else:
                        pairs.append((found[0], key.path))
        return ordered(list(self.units), pairs, looped)


def _opened(root: Any) -> set[tuple]:
    """Paths of the containers whose edges must be lifted: those reached into, transitively."""
    opened: set[tuple] = {()}
    stack: list[tuple[tuple, Any]] = [((), root)]
    while stack:
        path, node = stack.pop()
        wanted: list[tuple] = []
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
