"""The one graph view: where each value comes from, across container boundaries.

``View(root, opened=...)`` walks ``root``, opening the containers ``opened`` accepts (every
one by default) and keeping each other container whole as a *unit*, as a leaf op is one. It
lifts the edges of every opened level to the top, drops each edge that a tombstone of a level
above its owner names, and forwards values through the boundary ports of opened containers
(*junctions*), so that every edge of :attr:`View.edges` joins unit ports (or the root's own
ports). A control edge into an opened container orders every unit inside it; a container's
control output fires once every unit inside has run.

It answers, for the effective view (:func:`amanda.containers.flatten`, all opened), for type
inference (only what a level's edges reach into opened), for ``sorted(skip=...)`` (the skipped
containers whole) and for the executor alike:

- where a value comes from: :meth:`View.sources` of a unit input, a junction or a root output;
- the control sources of a unit: :meth:`View.control_sources`;
- the units and their namespaces: :attr:`View.units`, :attr:`View.namespaces`;
- their order: :meth:`View.order` (a cycle is a ``CycleError``) or :meth:`View.ordered`.

>>> from amanda.containers.container import Container, op
>>> inner = Container("Block", "b", inputs=["x"], outputs=["y"],
...     children=[op("Relu", "r", ["x"], ["y"])], edges=[("b:x", "r:x"), ("r:y", "b:y")])
>>> top = Container(None, "g", inputs=["x"], outputs=["y"], children=[inner, op("Neg", "n", ["x"], ["y"])],
...     edges=[("g:x", "b:x"), ("b:y", "n:x"), ("n:y", "g:y")])
>>> View(top).order(), View(top, opened=lambda path, node: False).order()
((('b', 'r'), ('n',)), (('b',), ('n',)))
>>> View(top).sources(Junction(("b",), "y", "out"))
[Endpoint('b/r', 'y')]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from amanda.containers.edge import CONTROL, SELF, Edge, Endpoint, forward_attrs
from amanda.containers.order import ordered, topological
from amanda.containers.records import Junction, LiftedKey, Path
from amanda.containers.values import EMPTY
from amanda.errors import CycleError

if TYPE_CHECKING:
    from amanda.containers.container import Container

__all__ = ["View", "live"]

_new = tuple.__new__
_UNTRACKED: Any = object()  # no namespace given: units' namespaces are not looked up
Opened = Callable[[Path, "Container"], bool]


def live(attrs: Any, phase: Any) -> bool:
    """Whether an edge with attributes ``attrs`` exists in ``phase`` (untagged edges exist in
    every phase, and every edge when ``phase`` is None)."""
    tagged = attrs.get("phase") if attrs else None
    return tagged is None or phase is None or tagged == phase


class View:
    """Units of ``root`` and the effective edges between their ports (see the module doc).

    ``opened(path, container)`` says whether a container below the root is opened (the root
    always is; leaf ops never are); None opens every container. ``namespace`` is the root's
    effective namespace, which :attr:`namespaces` passes down to each unit (left empty when
    no namespace is given). ``strict=False`` lets a cycle
    through boundary ports feed nothing (and sets :attr:`looped`) instead of raising
    ``CycleError``.
    """

    __slots__ = ("_consumers", "_into", "_leaves", "_memo", "_nodes", "_order", "_producers", "edges", "has_controls",
                 "looped", "namespaces", "root", "strict", "units")

    def __init__(self, root: Container, opened: Opened | None = None, *, namespace: Any = _UNTRACKED,
                 strict: bool = True) -> None:
        self.root = root
        self.strict = strict
        self.looped = False  # a cycle through boundary ports was met (strict=False)
        self.has_controls = False  # some lifted edge joins control ports
        self.units: dict[Path, Container] = {}
        self.namespaces: dict[Path, str | None] = {}
        self._nodes: dict[Path, Container] = {}
        self._leaves: dict[Path, list[Path]] = {}
        self._memo: dict[Any, list[tuple[Endpoint, Any]]] = {}
        self._order: tuple[Path, ...] | None = None
        self._producers: dict | None = None
        self._consumers: dict | None = None
        lifted, buried = self._walk(root, opened, namespace)
        self._into: dict[Junction, list[tuple[Any, Any]]] = {}
        self.edges = self._emit(self._lift(lifted, buried))

    # -- building ---------------------------------------------------------------------------

    def _walk(self, root: Container, opened: Opened | None, namespace: str | None) -> tuple[list, dict]:
        """Record units and opened containers; the lifted edges and the tombstones' depths."""
        lifted: list[tuple[LiftedKey, Path, Edge, int]] = []
        buried: dict[LiftedKey, int] = {}
        stack: list[tuple[Path, Container, str | None]] = [((), root, namespace)]
        units, namespaces, nodes = self.units, self.namespaces, self._nodes
        track = namespace is not _UNTRACKED
        while stack:
            path, node, ns = stack.pop()
            if node.is_op or (path and opened is not None and not opened(path, node)):
                units[path] = node
                if track:
                    namespaces[path] = ns
                continue
            nodes[path] = node
            depth = len(path)
            for edge in node.edges:
                src, dst = edge[0], edge[1]
                key = (path if src[0] is SELF else path + src[0], src[1], path if dst[0] is SELF else path + dst[0], dst[1])
                lifted.append((key, path, edge, depth))
            for tomb in node.tombstones:
                key = (path + tomb[0][0], tomb[0][1], path + tomb[1][0], tomb[1][1])
                if buried.get(key, depth + 1) > depth:
                    buried[key] = depth
            if track:
                stack.extend((path + (child.name,), child, child.attrs.get("namespace", ns))
                             for child in reversed(node.children))
            else:
                stack.extend((path + (child.name,), child, None) for child in reversed(node.children))
        return lifted, buried

    def _lift(self, lifted: list, buried: dict) -> list[tuple[Any, Endpoint, Any]]:
        """Each lifted edge's ends as terminal Endpoints (a unit's port or the root's) or
        junctions of opened containers; the edges into junctions are kept in ``_into``, the
        others (into terminals) returned."""
        units, nodes, into = self.units, self._nodes, self._into
        terminal: list[tuple[Any, Endpoint, Any]] = []

        def end(owner: Path, op: Any, port: Any, side: str) -> Any:
            if op is SELF:
                if not owner:
                    return _new(Endpoint, (SELF, port))
                if any(p[0] == port for p in nodes[owner].controls):
                    return _new(Junction, (owner, port, "ctl"))
                return _new(Junction, (owner, port, "in" if side == "src" else "out"))
            full = owner + op
            if full in units:
                return _new(Endpoint, (full, port))
            if full not in nodes:  # inside a unit (an edge naming a descendant by path)
                return _new(Endpoint, (self._unit_of(full), port))
            if side == "src" and any(p[0] == port for p in nodes[full].controls):
                return _new(Junction, (full, port, "ctl"))
            return _new(Junction, (full, port, "out" if side == "src" else "in"))

        for key, owner, edge, depth in lifted:
            if buried and buried.get(key, depth) < depth:
                continue
            s, d = edge[0], edge[1]
            if s[1] == CONTROL or d[1] == CONTROL:
                self.has_controls = True
            src, dst = end(owner, s[0], s[1], "src"), end(owner, d[0], d[1], "dst")
            if type(dst) is Junction:
                into.setdefault(dst, []).append((src, edge[2]))
            else:
                terminal.append((src, dst, edge[2]))
        return terminal

    def _unit_of(self, path: Path) -> Path:
        """The unit that holds the node at ``path``."""
        return next(path[:k] for k in range(len(path) - 1, 0, -1) if path[:k] in self.units)

    def _emit(self, terminal: list[tuple[Any, Endpoint, Any]]) -> tuple[Edge, ...]:
        """The effective edges: each terminal edge from every unit port that feeds it, and a
        control edge into an opened container as one into every unit inside."""
        seen: dict[tuple, Edge] = {}
        for src, dst, attrs in terminal:
            for source, merged in self._forwarded(src, attrs):
                _add(seen, source, dst, merged)
        for junction in list(self._into):
            if junction.side == "in" and junction.port == CONTROL:
                for leaf in self.inside(junction.path):
                    for source, merged in self._forwarded(junction, EMPTY):
                        _add(seen, source, _new(Endpoint, (leaf, CONTROL)), merged)
        return tuple(seen.values())

    def _forwarded(self, src: Any, attrs: Any) -> list[tuple[Endpoint, Any]]:
        if type(src) is Endpoint:
            return [(src, attrs)]
        out = []
        for terminal, inner in self._resolve(src):
            merged = forward_attrs(inner, attrs)
            if merged is not None:
                out.append((terminal, merged))
        return out

    def _inbound(self, junction: Junction) -> list[tuple[Any, Any]]:
        inbound = self._into.get(junction, [])
        if junction.side == "out" and junction.port == CONTROL:
            # a container's control output fires once every unit inside has run
            return inbound + [(_new(Endpoint, (leaf, CONTROL)), EMPTY) for leaf in self.inside(junction.path)]
        return inbound

    def _resolve(self, start: Junction) -> list[tuple[Endpoint, Any]]:
        """The unit ports (and root inputs) that feed ``start``, with the attributes of the
        way there (memoised, iterative)."""
        memo = self._memo
        if start in memo:
            return memo[start]
        state: dict[Junction, int] = {}
        stack = [start]
        while stack:
            junction = stack[-1]
            if junction in memo:
                stack.pop()
                continue
            pending = [s for s, _ in self._inbound(junction) if type(s) is not Endpoint and s not in memo]
            if pending and state.get(junction) != 1:
                state[junction] = 1
                stack.extend(self._unlooped(stack, pending, state))
                continue
            result = []
            for src, attrs in self._inbound(junction):
                if type(src) is Endpoint:
                    result.append((src, attrs))
                    continue
                for terminal, inner in memo.get(src, ()):  # absent: on a cycle (strict=False)
                    merged = forward_attrs(inner, attrs)
                    if merged is not None:
                        result.append((terminal, merged))
            memo[junction] = result
            stack.pop()
        return memo[start]

    def _unlooped(self, stack: list[Junction], pending: list[Junction], state: dict) -> list[Junction]:
        """``pending`` less the junctions that close a cycle through boundary ports: a
        CycleError, or (``strict=False``) left out, feeding nothing."""
        looped = [nxt for nxt in pending if state.get(nxt) == 1]
        if not looped:
            return pending
        if self.strict:
            nxt = looped[0]
            raise CycleError([j.path for j in stack[stack.index(nxt):]] or [nxt.path])
        self.looped = True
        return [nxt for nxt in pending if state.get(nxt) != 1]

    # -- queries ----------------------------------------------------------------------------

    @property
    def junctions(self) -> list[Junction]:
        """The boundary ports of opened containers that edges flow into, as Junction records."""
        return list(self._into)

    def inside(self, path: Path) -> list[Path]:
        """Paths of every unit inside the opened container at ``path``, in document order."""
        if path not in self._leaves:
            found = []
            stack = [path]
            while stack:
                here = stack.pop()
                if here in self.units:
                    found.append(here)
                else:
                    stack.extend(here + (c.name,) for c in reversed(self._nodes[here].children))
            self._leaves[path] = found
        return self._leaves[path]

    def sources(self, end: Any, phase: Any = None) -> list[Endpoint]:
        """Where the value at ``end`` comes from: a unit's output or a root input for each edge
        that exists in ``phase`` (one, unless producers differ by phase). ``end`` is a unit's
        input ``Endpoint(path, port)``, a root output ``Endpoint(SELF, name)`` or a
        :class:`Junction` (``side`` ``"out"`` for an opened container's output, ``"in"`` for
        the value entering its input)."""
        return [src for src, _ in self.feeding(end, phase)]

    def feeding(self, end: Any, phase: Any = None) -> list[tuple[Endpoint, Any]]:
        """:meth:`sources` with the attributes of the way from each (its ``phase`` tag)."""
        if type(end) is Junction:
            return [(src, attrs) for src, attrs in self._resolve(end) if live(attrs, phase)]
        return [(e[0], e[2]) for e in self.producers(end[0], end[1]) if live(e[2], phase)]

    def control_sources(self, path: Path, phase: Any = None) -> list[Path]:
        """Units with a control edge (that exists in ``phase``) into the unit at ``path``."""
        return [e[0][0] for e in self.producers(path, CONTROL) if e[0][0] is not SELF and live(e[2], phase)]

    def _indexes(self) -> tuple[dict, dict]:
        if self._producers is None or self._consumers is None:
            producers: dict = {}
            consumers: dict = {}
            for edge in self.edges:
                producers.setdefault((edge[1][0], edge[1][1]), []).append(edge)
                consumers.setdefault((edge[0][0], edge[0][1]), []).append(edge)
            self._producers, self._consumers = producers, consumers
        return self._producers, self._consumers

    def producers(self, path: Any, port: Any) -> tuple[Edge, ...]:
        """Effective edges that feed ``path:port`` (several only for distinct phases or control)."""
        return tuple(self._indexes()[0].get((path, port), ()))

    def consumers(self, path: Any, port: Any) -> tuple[Edge, ...]:
        """Effective edges that read from ``path:port``."""
        return tuple(self._indexes()[1].get((path, port), ()))

    def _pairs(self, data_only: bool = False) -> Iterable[tuple[Path, Path]]:
        for e in self.edges:
            src, dst = e[0], e[1]
            if src[0] is not SELF and dst[0] is not SELF and not (data_only and CONTROL in (src[1], dst[1])):
                yield src[0], dst[0]

    def order(self) -> tuple[Path, ...]:
        """Units such that every edge goes from an earlier to a later one; among units ready at
        once, the earliest in document order first. A cycle is a ``CycleError``."""
        if self._order is None:
            self._order = tuple(topological(list(self.units), self._pairs()))
        return self._order

    def ordered(self, data_only: bool = False) -> tuple[list[Path], bool]:
        """Units in :meth:`order` with the units a cycle holds up last, and whether they may
        loop: a cycle among them or through boundary ports, or (``data_only``: control edges
        not followed) any control edge."""
        pairs = list(self._pairs(data_only))
        looped = self.looped or (data_only and self.has_controls) or any(a == b for a, b in pairs)
        return ordered(list(self.units), [(a, b) for a, b in pairs if a != b], looped)


def _add(seen: dict, src: Endpoint, dst: Endpoint, attrs: Any) -> None:
    key = (src, dst, attrs.get("phase") if attrs else None)
    if key not in seen:
        seen[key] = _new(Edge, (src, dst, attrs if attrs is not None else EMPTY))
