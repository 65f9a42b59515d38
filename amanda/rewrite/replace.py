"""Applying replacements: one container level as a working copy that matches are spliced into.

Every rewrite that replaces matched ops goes through here: the optimiser's rule tables
(``amanda.passes.rules``, a builder replacement per match) and namespace conversion (a mapping
table's replacement with its port maps: ``amanda.rewrite.mapping.rewrite``). What each owns is
how it turns a match into new ops and edges; what they share is this:

- a :class:`WorkingLevel` holds one level's children, edges and input ports in plain dicts and
  lists, with the indexes a match needs kept up to date as replacements change them (producers
  and consumers of each port, edges by child, leaf ops by type), children ordered by position
  keys (tuples);
- :meth:`WorkingLevel.splice` applies one replacement: the edges it re-attaches go, the removed
  ops go, each new op takes a position just after the place it is given (that of the op it
  replaces), and the new edges come in;
- :meth:`WorkingLevel.build` makes the new container once, reusing every child that did not
  change, and returns the original container itself when nothing changed at all.

>>> from amanda import Container, op
>>> g = Container(None, "g", inputs=["x"], outputs=["y"], children=[op("Relu", "r", ["X"], ["Y"])],
...               edges=[("g:x", "r:X"), ("r:Y", "g:y")])
>>> work = WorkingLevel(g)
>>> work.splice(work.touching(["r"]), {"r"}, [op("Sigmoid", "s", ["X"], ["Y"])], [work.pos["r"]],
...             [Edge((SELF, "x"), (("s",), "X")), Edge((("s",), "Y"), (SELF, "y"))])
>>> out = work.build()
>>> [c.type for c in out.children], list(out.edges)
(['Sigmoid'], [Edge('SELF:x', 's:X'), Edge('s:Y', 'SELF:y')])
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from amanda.containers.container import Container
from amanda.containers.edge import SELF, Edge, Port

__all__ = ["WorkingLevel", "end_name"]


def end_name(end: Any) -> Any:
    """The child an edge end touches directly: its name, None for SELF, a tuple for a deeper
    descendant (never a leaf of this level)."""
    op = end[0]
    if op is SELF:
        return None
    return op[0] if len(op) == 1 else tuple(op)


class WorkingLevel:
    """The working copy of one container level (see the module docstring).

    Edges are kept by key in insertion order, with the producers and consumers of every port and
    the edges touching every child indexed as they change, so one replacement costs in
    proportion to the edges it touches, not to the size of the level.
    """

    def __init__(self, container: Container) -> None:
        self.container = container
        self.ops: dict[str, Container] = {child.name: child for child in container.children}
        self.pos: dict[str, tuple[int, ...]] = {child.name: (i,) for i, child in enumerate(container.children)}
        self.inputs: list[Port] = list(container.inputs)
        self.taken: set[str] = {*self.ops, container.name or ""}
        self.changed = False
        self._names: list[str] | None = [child.name for child in container.children]
        self._edges: dict[tuple, Edge] = {}
        self._order: dict[tuple, tuple[int, ...]] = {}  # edge key -> its place in the level's edge order
        self._counter = 0
        self._moved = False  # an edge took an old one's place: the edge order is no longer insertion order
        self._producers: dict[tuple, list[tuple[Any, Any]]] = {}
        self._consumers: dict[tuple, list[tuple[Any, Any]]] = {}
        self._touching: dict[Any, set[tuple]] = {}
        self._deep: dict[str, set[tuple]] = {}  # child -> edges with an end strictly inside it
        self._by_type: dict[str | None, set[str]] = {}
        self.type_changes = 0  # counts the times a type gained its first leaf or lost its last
        for name, op in self.ops.items():
            if not op.children:
                self._by_type.setdefault(op.type, set()).add(name)
        for edge in container.edges:
            self.add_edge(edge, mark=False)

    # -- reading ------------------------------------------------------------------------------

    @property
    def names(self) -> list[str]:
        """Children's names in document order."""
        if self._names is None:
            self._names = sorted(self.ops, key=self.pos.__getitem__)
        return self._names

    @property
    def position(self) -> Mapping[str, tuple[int, ...]]:
        """Sort key of each child's document position."""
        return self.pos

    @property
    def edges(self) -> list[Edge]:
        """The edges of this level, in order."""
        if self._moved:
            return [self._edges[k] for k in sorted(self._edges, key=self._order.__getitem__)]
        return list(self._edges.values())

    def producers(self, name: Any, port: Any) -> list[tuple[Any, Any]]:
        """``(op name or None for SELF, port)`` of each edge into input ``port`` of ``name``."""
        return self._producers.get((name, port), [])

    def consumers(self, name: Any, port: Any) -> list[tuple[Any, Any]]:
        """``(op name or None, port)`` of each edge out of output ``port`` of ``name``."""
        return self._consumers.get((name, port), [])

    def touching(self, names: Iterable[str]) -> list[Edge]:
        """Edges with an end at one of the children ``names``, in order."""
        keys: set[tuple] = set()
        for name in names:
            keys |= self._touching.get(name, set())
        return [self._edges[k] for k in sorted(keys, key=self._order.__getitem__)]

    def names_of_types(self, types: Iterable[str] | None) -> list[str]:
        """Leaf children of these types (any type for None)."""
        if types is None:
            return [n for n in self.ops if not self.ops[n].children]
        return [n for t in types for n in self._by_type.get(t, ())]

    def types(self) -> Iterable[str | None]:
        """The types of the leaf children."""
        return self._by_type.keys()

    def reaching_into(self, child: str) -> list[Edge]:
        """The edges of this level with an end strictly inside the child ``child`` (a path), in order."""
        return [self._edges[k] for k in sorted(self._deep.get(child, ()), key=self._order.__getitem__)]

    def is_leaf(self, name: Any) -> bool:
        """Whether ``name`` is a leaf op child of this level."""
        op = self.ops.get(name) if isinstance(name, str) else None
        return op is not None and not op.children

    # -- changing -----------------------------------------------------------------------------

    def add_edge(self, edge: Edge, mark: bool = True, place: tuple[int, ...] | None = None) -> None:
        """Add an edge (a second edge with the same ends is dropped), last or at ``place`` in the
        edge order; ``mark``: count it as a change."""
        key = edge.key
        if key in self._edges:
            return
        self._edges[key] = edge
        self._order[key] = (self._counter,) if place is None else place
        self._moved = self._moved or place is not None
        self._counter += 1
        src, dst = end_name(edge[0]), end_name(edge[1])
        self._producers.setdefault((dst, edge[1][1]), []).append((src, edge[0][1]))
        self._consumers.setdefault((src, edge[0][1]), []).append((dst, edge[1][1]))
        for end in {src, dst}:
            self._touching.setdefault(end, set()).add(key)
            if isinstance(end, tuple):
                self._deep.setdefault(end[0], set()).add(key)
        self.changed = self.changed or mark

    def remove_edge(self, edge: Edge, mark: bool = True) -> None:
        """Remove an edge of this level; ``mark``: count it as a change."""
        key = edge.key
        if self._edges.pop(key, None) is None:
            return
        del self._order[key]
        src, dst = end_name(edge[0]), end_name(edge[1])
        self._producers[(dst, edge[1][1])].remove((src, edge[0][1]))
        self._consumers[(src, edge[0][1])].remove((dst, edge[1][1]))
        for end in {src, dst}:
            self._touching[end].discard(key)
            if isinstance(end, tuple):
                self._deep[end[0]].discard(key)
        self.changed = self.changed or mark

    def set_edges(self, edges: Iterable[Edge]) -> None:
        """Replace every edge (keeping ``changed`` as it is when the edges are the same)."""
        edges = list(edges)
        if [e.key for e in edges] == list(self._edges) and edges == list(self._edges.values()):
            return
        for edge in list(self._edges.values()):
            self.remove_edge(edge)
        for edge in edges:
            self.add_edge(edge)

    def put_op(self, op: Container, position: tuple[int, ...]) -> None:
        """Add (or replace) the child ``op`` at ``position``."""
        name = str(op.name)
        old = self.ops.get(name)
        if old is not None and not old.children:
            self._untyped(old.type, name)
        self.ops[name] = op
        self.pos[name] = position
        if not op.children:
            if op.type not in self._by_type:
                self.type_changes += 1
            self._by_type.setdefault(op.type, set()).add(name)
        self._names = None
        self.changed = True

    def _untyped(self, type_: str | None, name: str) -> None:
        """``name`` is no longer a leaf of type ``type_`` (a type with no leaf left is no key)."""
        names = self._by_type.get(type_)
        if names is not None:
            names.discard(name)
            if not names:
                del self._by_type[type_]
                self.type_changes += 1

    def drop_op(self, name: str) -> None:
        """Remove the child ``name`` (its edges are the caller's business)."""
        op = self.ops.pop(name)
        if not op.children:
            self._untyped(op.type, name)
        del self.pos[name]
        self._names = None
        self.changed = True

    def fresh_name(self, wanted: str, free: Iterable[str] = ()) -> str:
        """``wanted``, or ``wanted_1`` … when a child already has that name (``free``: names being
        released by the current match)."""
        free = set(free)
        candidate, n = wanted, 0
        while candidate in self.taken and candidate not in free:
            n += 1
            candidate = f"{wanted}_{n}"
        self.taken.add(candidate)
        return candidate

    def add_input(self, port: Port) -> str:
        """Add an input port to this container (a fresh name if taken); its final name."""
        names = {p.name for p in self.inputs}
        name, n = port.name, 0
        while name in names:
            n += 1
            name = f"{port.name}_{n}"
        self.inputs.append(Port(name, attrs=port.attrs))
        self.changed = True
        return name

    def splice(self, touching: Iterable[Edge], removed: Iterable[str], new: Sequence[Container],
               at: Sequence[tuple[int, ...]], edges: Iterable[Edge], in_place: bool = False) -> None:
        """Apply one replacement: remove the edges ``touching`` it and the ops ``removed``, put each
        of the ``new`` ops just after the position in ``at`` given for it (the place of the op it
        replaces; ops given one place keep their order), and add ``edges`` (last; with
        ``in_place``, an edge into the input a removed edge fed takes that edge's place)."""
        positions = [(*place, j) for j, place in enumerate(at)]
        places: dict[Any, tuple[int, ...]] = {}
        for edge in touching:
            if in_place:
                places.setdefault(edge.dst, self._order[edge.key])
            self.remove_edge(edge)
        for name in removed:
            self.drop_op(name)
        for op, position in zip(new, positions, strict=True):
            self.put_op(op, position)
        for j, edge in enumerate(edges):
            place = places.pop(edge.dst, None)
            self.add_edge(edge, place=None if place is None else (*place, j))

    # -- the result ---------------------------------------------------------------------------

    def build(self) -> Container:
        """The container of this level; the original if unchanged."""
        children = [self.ops[name] for name in self.names]
        container = self.container
        if not self.changed and all(a is b for a, b in zip(children, container.children)):
            return container
        return container.evolve(inputs=tuple(self.inputs), children=tuple(children), edges=tuple(self.edges))
