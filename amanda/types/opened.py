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

from amanda.containers.edge import CONTROL, SELF, Endpoint
from amanda.containers.records import Path, PortRef
from amanda.containers.view import View

__all__ = ["OpenedView", "TopPort", "UnitPort"]


class UnitPort(NamedTuple):
    """A port of a unit at ``path``: an output when it is a source, an input when fed."""

    path: Path
    port: PortRef


class TopPort(NamedTuple):
    """A port of the root: ``side`` ``"in"`` for an input (a source), ``"out"`` for an output."""

    port: PortRef
    side: str


class OpenedView:
    """Units (leaf ops and opaque containers) of ``root``, opening only what its edges reach
    into: the :class:`~amanda.containers.view.View` of type inference, which follows data
    edges only and lets a cycle through boundary ports feed nothing.

    ``units``: path -> (node, effective namespace), in document order. ``source(path, port)``:
    the terminal feeding a unit's input port: ``(path, port)`` of a unit's output, ``(SELF,
    port)`` for a top input, or None. ``junctions``: each :class:`Junction` (a data port of an
    opened container below the root) with its terminal source. ``outputs``: top output name ->
    terminal source.
    """

    def __init__(self, root: Any, namespace: str | None) -> None:
        opened = _opened(root)
        self.view = view = View(root, opened=lambda path, node: path in opened, namespace=namespace, strict=False)
        self.units: dict[Path, tuple[Any, str | None]] = {p: (n, view.namespaces[p]) for p, n in view.units.items()}
        self.junctions = {j: _first(view.sources(j)) for j in view.junctions
                          if j.port != CONTROL and j.side != "ctl"}
        self.outputs = {name: _first(view.sources(Endpoint(SELF, name))) for name in root.output_names}

    def source(self, path: Path, port: PortRef) -> Any:
        """The terminal feeding input ``port`` of the unit at ``path``, or None."""
        return _first(self.view.sources(Endpoint(path, port)))

    def order(self) -> tuple[list[Path], bool]:
        """Units such that every unit comes after the units feeding it (document order else),
        and whether a unit feeds itself or units feed each other in a loop (a cycle of the
        effective view may then pass through them; with control edges, which this view does
        not follow, a loop is assumed possible)."""
        return self.view.ordered(data_only=True)


def _first(sources: list[Endpoint]) -> Any:
    return sources[0] if sources else None


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
