"""Graph questions the filter functions ask: computations, producers and consumers.

Both work on the effective view (``flatten``) of the graph a node belongs to: the
queried root, or for a node inside a graph-valued attribute, that held graph.

>>> from amanda.containers import Container, op
>>> a = op("Const", "a", outputs=["y"])
>>> b = op("Relu", "b", inputs=["x"], outputs=["y"])
>>> g = Container("G", "g", outputs=["out"], children=[a, b, op("Print", "p"), op("Log", "q")],
...               edges=[("a:y", "b:x"), ("b:y", "g:out"), ("p:-1", "g:debug")], controls=["debug"])
>>> from amanda.query.indexes import table
>>> t = table(g)
>>> sorted(t.paths[p] for p in computation(t, "debug"))
[(), ('a',), ('b',), ('p',)]
>>> neighbour_types(t, 2, "producers")
['Const']
"""

from __future__ import annotations

from itertools import compress, count
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from amanda.containers.edge import CONTROL, SELF
from amanda.containers.flatten import flatten
from amanda.containers.phases import check_phase
from amanda.containers.records import Path
from amanda.errors import QueryError

if TYPE_CHECKING:
    from amanda.containers.container import Container
    from amanda.query.indexes import NodeTable

__all__ = ["computation", "neighbour_types"]


def computation(t: NodeTable, name: str) -> frozenset:
    """Positions of the nodes that run when computation ``name`` is fetched.

    The targets are the producers of the root's data outputs and the sources of the
    control edges into every named control port called ``name``; a node is in the computation
    if it is an ancestor-or-self of a target in the effective view (data and control
    edges, ignoring edges whose ``phase`` is another computation), if it contains such
    an op, or if it lies in a graph held by such an op.
    """
    check_phase(t.root, name, QueryError, "in_computation")
    preds, targets = _phase_dataflow(t, name)
    seen: set = set()
    for p in compress(count(), map(attrgetter("controls"), t.nodes)):
        if any(port[0] == name for port in t.nodes[p].controls) and t.scope_of(p) == 0:
            targets |= _control_sources(t, p, name, name, seen)
    reached = set(targets)
    frontier = list(targets)
    while frontier:
        here = frontier.pop()
        for src in preds.get(here, ()):
            if src not in reached:
                reached.add(src)
                frontier.append(src)
    return frozenset(_enclosing(t, reached))


def _phase_dataflow(t: NodeTable, name: str) -> tuple[dict[tuple, list[tuple]], set[tuple]]:
    """The flattened edges of computation ``name``: each leaf's predecessors, and the leaves
    that feed the root's data outputs."""
    outputs = set(t.root.output_names)
    preds: dict[tuple, list[tuple]] = {}
    targets: set[tuple] = set()
    for edge in flatten(t.root).edges:
        phase = edge[2].get("phase") if edge[2] else None
        if phase is not None and phase != name:
            continue
        src, dst = edge[0][0], edge[1][0]
        if src is SELF:
            continue
        if dst is not SELF:
            preds.setdefault(dst, []).append(src)
        elif edge[1][1] in outputs:  # the root's named control ports are handled by the caller
            targets.add(src)
    return preds, targets


def _enclosing(t: NodeTable, reached: set[tuple]) -> set[int]:
    """Positions of the ``reached`` leaves, the nodes that contain them and every node of the
    graphs those hold as bodies."""
    members: set[int] = set()
    parent = t.parent
    for path in reached:
        at = t.position_of(path)
        while at is not None and at >= 0 and at not in members:
            members.add(at)
            at = parent[at]
    for p in [q for q in members if q in t.bodies]:
        for body in t.bodies[p].values():
            members.update(range(body, t.end_of(body)))
    return members


def _control_sources(t: NodeTable, p: int, port: str, phase_name: str, seen: set) -> set[tuple]:
    """Leaf paths whose completion the named control port ``port`` of node ``p`` waits for,
    in computation ``phase_name``."""
    if (p, port) in seen:
        return set()
    seen.add((p, port))
    node, where = t.nodes[p], t.path(p)
    buried = _tombstones_above(t, p)
    found: set[tuple] = set()
    for edge in node.edges:
        src, dst = edge[0], edge[1]
        if dst[0] is not SELF or dst[1] != port or src[0] is SELF:
            continue
        phase = edge[2].get("phase") if edge[2] else None
        if phase is not None and phase != phase_name:
            continue
        full = where + src[0]
        if (full, src[1], where, port) in buried:
            continue
        q = t.position_of(full)
        if q is None:
            continue
        source = t.nodes[q]
        if src[1] == CONTROL:
            found.update(_leaves(source, full))
        else:  # another named control port, by validation
            found |= _control_sources(t, q, src[1], phase_name, seen)
    return found


def _tombstones_above(t: NodeTable, p: int) -> set[tuple]:
    keys: set[tuple] = set()
    q = t.parent[p]
    while q >= 0:
        base = t.path(q)
        for tomb in t.nodes[q].tombstones:
            keys.add((base + tomb[0][0], tomb[0][1], base + tomb[1][0], tomb[1][1]))
        q = t.parent[q]
    return keys


def _leaves(node: Container, path: Path) -> list[Path]:
    out = []
    stack = [(path, node)]
    while stack:
        here, current = stack.pop()
        if not current.children:
            out.append(here)
        else:
            stack.extend((here + (c.name,), c) for c in reversed(current.children))
    return out


def _adjacency(scope: Container) -> tuple[dict, dict]:
    def build(container: Container) -> tuple[dict, dict]:
        producers: dict[tuple, set] = {}
        consumers: dict[tuple, set] = {}
        for edge in flatten(container).edges:
            src, dst = edge[0], edge[1]
            if src[1] == CONTROL or dst[1] == CONTROL or src[0] is SELF or dst[0] is SELF:
                continue
            producers.setdefault(dst[0], set()).add(src[0])
            consumers.setdefault(src[0], set()).add(dst[0])
        return producers, consumers

    return scope._cached("query.adjacency", build)


def neighbour_types(t: NodeTable, p: int, direction: str) -> list[Any]:
    """Sorted distinct types of the ops feeding (``"producers"``) or fed by
    (``"consumers"``) the node at ``p`` through data edges; for a container, the ops
    outside it joined to ops inside it."""
    scope_at = t.scope_of(p)
    scope = t.nodes[scope_at]
    base = len(t.path(scope_at))
    here = t.path(p)[base:]
    members = set(_leaves(t.nodes[p], here))
    producers, consumers = _adjacency(scope)
    table = producers if direction == "producers" else consumers
    ops = flatten(scope).ops
    kinds = set()
    for leaf in members:
        for other in table.get(leaf, ()):
            if other not in members and ops[other].type is not None:
                kinds.add(ops[other].type)
    return sorted(kinds)
