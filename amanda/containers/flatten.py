"""The effective view: the dataflow graph among leaf ops.

``flatten(container)`` lifts the edges of every level to the top, drops each edge
that a tombstone of a level above its owner names, and forwards values through
the boundary ports of nested containers. It is computed once per container
object (containers are immutable) and cached.

>>> from amanda.containers.container import Container, op
>>> inner = Container("Block", "b", inputs=["x"], outputs=["y"],
...     children=[op("Relu", "r", ["x"], ["y"])], edges=[("b:x", "r:x"), ("r:y", "b:y")])
>>> top = Container(None, "g", inputs=["x"], outputs=["y"], children=[inner],
...     edges=[("g:x", "b:x"), ("b:y", "g:y")])
>>> sorted(f"{e.src} -> {e.dst}" for e in flatten(top).edges)
['SELF:x -> b/r:x', 'b/r:y -> SELF:y']
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from amanda.containers.edge import CONTROL, SELF, Edge, Endpoint, Port, forward_attrs
from amanda.containers.order import topological
from amanda.containers.records import Junction, LiftedKey, Path
from amanda.containers.values import EMPTY
from amanda.errors import CycleError

if TYPE_CHECKING:
    from amanda.containers.container import Container

__all__ = ["FlatGraph", "effective_edges", "flatten"]

_new = tuple.__new__


class FlatGraph:
    """The effective dataflow among leaf ops of one container.

    ``ops``: leaf path (tuple of names from the top) -> leaf op, in document order.
    ``edges``: data and control edges whose endpoints carry full leaf paths (or SELF
    for the top container's own ports). ``inputs``: top input name -> the leaf
    endpoints it reaches; ``outputs``: top output name -> the endpoint producing it.
    """

    __slots__ = ("_index", "_order", "container", "edges", "input_ports", "inputs", "ops", "output_ports", "outputs")

    def __init__(self, container: Container, ops: dict[Path, Container], edges: tuple[Edge, ...],
                 order: tuple[Path, ...]) -> None:
        self.container = container
        self.ops: Mapping[Path, Container] = MappingProxyType(ops)
        self.edges = edges
        self.input_ports: tuple[Port, ...] = container.inputs
        self.output_ports: tuple[Port, ...] = container.outputs
        reach: dict[str, list[Endpoint]] = {p.name: [] for p in container.inputs}
        produce: dict[str, Endpoint | None] = {p.name: None for p in container.outputs}
        for edge in edges:
            src, dst = edge[0], edge[1]
            if src[0] is SELF and src[1] in reach:
                reach[src[1]].append(dst)
            if dst[0] is SELF and dst[1] in produce and produce[dst[1]] is None:
                produce[dst[1]] = src
        self.inputs: Mapping[str, tuple[Endpoint, ...]] = MappingProxyType({k: tuple(v) for k, v in reach.items()})
        self.outputs: Mapping[str, Endpoint | None] = MappingProxyType(produce)
        self._order = order
        self._index: dict | None = None

    def topological_order(self) -> tuple[Path, ...]:
        """Leaf paths such that every edge goes from an earlier to a later op; among ops
        ready at once, the earliest in document order comes first."""
        return self._order

    def _indexes(self) -> dict:
        if self._index is None:
            producers: dict = {}
            consumers: dict = {}
            for edge in self.edges:
                producers.setdefault((edge[1][0], edge[1][1]), []).append(edge)
                consumers.setdefault((edge[0][0], edge[0][1]), []).append(edge)
            self._index = {"producers": producers, "consumers": consumers}
        return self._index

    def producers(self, path: Any, port: Any) -> tuple[Edge, ...]:
        """Edges that feed ``path:port`` (several only for distinct phases or control)."""
        return tuple(self._indexes()["producers"].get((path, port), ()))

    def consumers(self, path: Any, port: Any) -> tuple[Edge, ...]:
        """Edges that read from ``path:port``."""
        return tuple(self._indexes()["consumers"].get((path, port), ()))

    def in_edges(self, path: Path) -> Iterator[Edge]:
        """Every edge into the op at ``path``."""
        for (dst, _port), edges in self._indexes()["producers"].items():
            if dst == path:
                yield from edges

    def __repr__(self) -> str:
        return f"FlatGraph({len(self.ops)} ops, {len(self.edges)} edges)"


def flatten(container: Container) -> FlatGraph:
    """The effective dataflow view of ``container`` (cached per container object)."""
    if getattr(container, "_amanda_frozen", False) is not True:
        from amanda.containers.checks import expect_container

        expect_container(container, "container")
    return container._cached("flat", _build)


def _build(root: Container) -> FlatGraph:
    ops, edges = effective_edges(root)
    return FlatGraph(root, ops, edges, _topological(ops, edges))


def effective_edges(root: Container) -> tuple[dict[Path, Container], tuple[Edge, ...]]:
    """The leaf ops (by path, in document order) and edges of the effective view, before they
    are ordered: what :func:`flatten` builds, also for a graph with a cycle among its ops (a
    ``CycleError`` here means a cycle through container boundary ports alone)."""
    ops: dict[Path, Container] = {}
    nodes: dict[Path, Container] = {}
    lifted: list[tuple[LiftedKey, Endpoint | Junction, Endpoint | Junction, Any, int]] = []
    buried: dict[LiftedKey, int] = {}
    stack: list[tuple[Path, Container]] = [((), root)]
    while stack:
        path, node = stack.pop()
        if node.is_op:
            ops[path] = node
            continue
        nodes[path] = node
        depth = len(path)
        for edge in node.edges:
            lifted.append(_lift(node, path, depth, edge))
        for tomb in node.tombstones:
            key = (path + tomb[0][0], tomb[0][1], path + tomb[1][0], tomb[1][1])
            if buried.get(key, depth + 1) > depth:
                buried[key] = depth
        stack.extend((path + (child.name,), child) for child in reversed(node.children))

    into: dict[Junction, list[tuple[Endpoint | Junction, Any]]] = {}
    terminal: list[tuple[Endpoint | Junction, Endpoint, Any]] = []
    for key, src, dst, attrs, depth in lifted:
        if buried and buried.get(key, depth) < depth:
            continue
        if isinstance(dst, Junction):
            into.setdefault(dst, []).append((src, attrs))
        else:
            terminal.append((src, dst, attrs))

    resolver = _Resolver(into, nodes)
    seen: dict[tuple, Edge] = {}
    for src, dst, attrs in terminal:
        for source, merged in resolver.sources(src, attrs):
            _emit(seen, source, dst, merged)
    for junction in list(into):
        if junction.side == "in" and junction.port == CONTROL:
            # a control edge into a container orders every op inside it
            for leaf in resolver.leaves(junction.path):
                for source, merged in resolver.sources(junction, EMPTY):
                    _emit(seen, source, _new(Endpoint, (leaf, CONTROL)), merged)
    return ops, tuple(seen.values())


def _lift(node: Container, path: Path, depth: int, edge: Edge) -> tuple:
    src, dst = edge[0], edge[1]
    src_op, dst_op = src[0], dst[0]
    src_path = path if src_op is SELF else path + src_op
    dst_path = path if dst_op is SELF else path + dst_op
    key = (src_path, src[1], dst_path, dst[1])
    return key, _node(node, path, src_op, src[1], "src"), _node(node, path, dst_op, dst[1], "dst"), edge[2], depth


def _node(owner: Container, path: Path, op: Any, port: Any, side: str) -> Endpoint | Junction:
    """A terminal Endpoint (leaf port or top boundary) or a junction of a nested container."""
    if op is SELF:
        if not path:
            return _new(Endpoint, (SELF, port))
        if any(p[0] == port for p in owner.controls):
            return _new(Junction, (path, port, "ctl"))
        return _new(Junction, (path, port, "in" if side == "src" else "out"))
    target = owner
    for name in op:
        target = target.children[target._index[name]]
    full = path + op
    if target.is_op:
        return _new(Endpoint, (full, port))
    if side == "src" and any(p[0] == port for p in target.controls):
        return _new(Junction, (full, port, "ctl"))
    return _new(Junction, (full, port, "out" if side == "src" else "in"))


def _emit(seen: dict, src: Endpoint, dst: Endpoint, attrs: Any) -> None:
    key = (src, dst, attrs.get("phase") if attrs else None)
    if key not in seen:
        seen[key] = _new(Edge, (src, dst, attrs if attrs is not None else EMPTY))


class _Resolver:
    """Walks junctions back to the terminal endpoints that feed them (memoised, iterative)."""

    def __init__(self, into: dict[Junction, list[tuple[Endpoint | Junction, Any]]], nodes: dict[Path, Container]) -> None:
        self.into = into
        self.nodes = nodes
        self.memo: dict[Any, list[tuple[Endpoint, Any]]] = {}
        self._leaves: dict[Path, list[Path]] = {}

    def leaves(self, path: Path) -> list[Path]:
        """Paths of every leaf op inside the container at ``path``."""
        if path not in self._leaves:
            found = []
            stack = [(path, self.nodes[path])]
            while stack:
                here, node = stack.pop()
                if node.is_op:
                    found.append(here)
                else:
                    stack.extend((here + (c.name,), c) for c in reversed(node.children))
            self._leaves[path] = found
        return self._leaves[path]

    def _inbound(self, junction: Junction) -> list[tuple[Any, Any]]:
        inbound = self.into.get(junction, [])
        if junction.side == "out" and junction.port == CONTROL:
            # a container's control output fires once every op inside has run
            implicit = [(_new(Endpoint, (leaf, CONTROL)), EMPTY) for leaf in self.leaves(junction.path)]
            return inbound + implicit
        return inbound

    def sources(self, src: Any, attrs: Any) -> list[tuple[Endpoint, Any]]:
        if type(src) is Endpoint:
            return [(src, attrs)]
        resolved = self._resolve(src)
        out = []
        for terminal, inner in resolved:
            merged = forward_attrs(inner, attrs)
            if merged is not None:
                out.append((terminal, merged))
        return out

    def _resolve(self, start: Junction) -> list[tuple[Endpoint, Any]]:
        memo = self.memo
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
                for nxt in pending:
                    if state.get(nxt) == 1:
                        raise CycleError([j.path for j in stack[stack.index(nxt):]] or [nxt.path])
                stack.extend(pending)
                continue
            result = []
            for src, attrs in self._inbound(junction):
                if type(src) is Endpoint:
                    result.append((src, attrs))
                else:
                    for terminal, inner in memo[src]:
                        merged = forward_attrs(inner, attrs)
                        if merged is not None:
                            result.append((terminal, merged))
            memo[junction] = result
            stack.pop()
        return memo[start]


def _topological(ops: dict[Path, Container], edges: tuple[Edge, ...]) -> tuple[Path, ...]:
    pairs = ((e[0][0], e[1][0]) for e in edges if e[0][0] is not SELF and e[1][0] is not SELF)
    return tuple(topological(list(ops), pairs))
