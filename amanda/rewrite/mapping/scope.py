"""One container level while a table is applied: a private working copy, rebuilt once at the end.

The driver maps each container level separately (patterns join sibling ops). A ``Scope`` holds
that level's children, edges and input ports in plain dicts and lists that only the driver sees,
with indexes kept up to date as rules change them (producers and consumers of each port, edges
by child, ops by type), and tracks the namespace each op will be in. ``build`` makes the new
container once, reusing every child that did not change, and returns the original container
itself when nothing changed at all.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from amanda.containers.container import Container
from amanda.containers.edge import SELF, Edge, Port
from amanda.errors import InvariantError, MappingError

if TYPE_CHECKING:
    from amanda.rewrite.mapping.driver import Context

__all__ = ["Scope", "end_name"]


def end_name(end: Any) -> Any:
    """The child an edge end touches directly: its name, None for SELF, a tuple for a deeper
    descendant (never a leaf of this level)."""
    op = end[0]
    if op is SELF:
        return None
    return op[0] if len(op) == 1 else tuple(op)


def plain(value: Any) -> Any:
    """An attribute value as expressions see it: maps as dicts, sequences as lists, arrays kept."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Container):
        return {"name": value.name, "type": value.type}
    return value


class Scope:
    """The working state of one container level (see the module docstring).

    Edges are kept by key in insertion order, with the producers and consumers of every port and
    the edges touching every child indexed as they change, so one match costs in proportion to
    the edges it touches, not to the size of the level. Children are ordered by position keys
    (tuples): a replacement's ops take keys just after the first matched op's.
    """

    def __init__(self, container: Container, path: tuple[str, ...], inherited: str | None,
                 ctx: Context, parent: Scope | None = None) -> None:
        self.container = container
        self.path = path
        self.ctx = ctx
        self.parent = parent  # the enclosing level's scope (values followed up through input ports)
        self.ops: dict[str, Container] = {child.name: child for child in container.children}
        self.pos: dict[str, tuple[int, ...]] = {child.name: (i,) for i, child in enumerate(container.children)}
        self.inputs: list[Port] = list(container.inputs)
        self.added_inputs: list[Port] = []
        self.old_namespace = container.attrs.get("namespace", inherited)
        self.ns: dict[str, str | None] = {
            name: op.attrs.get("namespace", self.old_namespace) for name, op in self.ops.items()
        }
        self.taken: set[str] = {*self.ops, container.name or ""}
        self.changed = False
        self._names: list[str] | None = [child.name for child in container.children]
        self._edges: dict[tuple, Edge] = {}
        self._order: dict[tuple, int] = {}
        self._counter = 0
        self._producers: dict[tuple, list[tuple[Any, Any]]] = {}
        self._consumers: dict[tuple, list[tuple[Any, Any]]] = {}
        self._touching: dict[Any, set[tuple]] = {}
        self._by_type: dict[str | None, set[str]] = {}
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

    def is_leaf(self, name: Any) -> bool:
        """Whether ``name`` is a leaf op child of this level."""
        op = self.ops.get(name) if isinstance(name, str) else None
        return op is not None and not op.children

    def namespace_of(self, name: str) -> str | None:
        """The namespace the child ``name`` is in now (targets count once a rule mapped it)."""
        return self.ns.get(name)

    def op_view(self, name: Any, path: tuple[str, ...] | None = None) -> dict[str, Any]:
        """The plain-data view of one op for expressions: the child ``name``, or an op of another
        level (given as the op, with its ``path``; its consumers are not counted)."""
        op = self.ops[name] if isinstance(name, str) else name
        local = isinstance(name, str)
        return {
            "name": op.name,
            "type": op.type,
            "path": [*self.path, name] if path is None else list(path),
            "namespace": self.ns.get(name) if local else op.attrs.get("namespace", self.old_namespace),
            "attrs": plain(op.attrs),
            "inputs": list(op.input_names),
            "outputs": list(op.output_names),
            "input_attrs": {p.name: plain(p.attrs) for p in op.inputs},
            "output_attrs": {p.name: plain(p.attrs) for p in op.outputs},
            "consumers": {p.name: len(self.consumers(name, p.name)) if local else 0 for p in op.outputs},
        }

    # -- changing -----------------------------------------------------------------------------

    def add_edge(self, edge: Edge, mark: bool = True) -> None:
        """Add an edge (a second edge with the same ends is dropped); ``mark``: count it as a change."""
        key = edge.key
        if key in self._edges:
            return
        self._edges[key] = edge
        self._order[key] = self._counter
        self._counter += 1
        src, dst = end_name(edge[0]), end_name(edge[1])
        self._producers.setdefault((dst, edge[1][1]), []).append((src, edge[0][1]))
        self._consumers.setdefault((src, edge[0][1]), []).append((dst, edge[1][1]))
        for end in {src, dst}:
            self._touching.setdefault(end, set()).add(key)
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

    def put_op(self, op: Container, position: tuple[int, ...], namespace: str | None) -> None:
        """Add (or replace) the child ``op`` at ``position`` in namespace ``namespace``."""
        name = str(op.name)
        old = self.ops.get(name)
        if old is not None and not old.children:
            self._by_type.get(old.type, set()).discard(name)
        self.ops[name] = op
        self.pos[name] = position
        self.ns[name] = namespace
        if not op.children:
            self._by_type.setdefault(op.type, set()).add(name)
        self._names = None
        self.changed = True

    def drop_op(self, name: str) -> None:
        """Remove the child ``name`` (its edges are the caller's business)."""
        op = self.ops.pop(name)
        if not op.children:
            self._by_type.get(op.type, set()).discard(name)
        del self.pos[name]
        self.ns.pop(name, None)
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

    def replace_child(self, name: str, new: Container) -> None:
        """Put a mapped nested container in place of its original."""
        if self.ops[name] is not new:
            self.ops[name] = new
            self.changed = True

    def add_input(self, port: Port) -> str:
        """Add an input port to this container (a fresh name if taken); its final name."""
        names = {p.name for p in self.inputs}
        name, n = port.name, 0
        while name in names:
            n += 1
            name = f"{port.name}_{n}"
        port = Port(name, attrs=port.attrs)
        self.inputs.append(port)
        self.added_inputs.append(port)
        self.changed = True
        return name

    def hoist(self, child: str, port: Port) -> None:
        """Feed the new input ``port`` of the nested container ``child`` from a new input here."""
        name = self.add_input(port)
        self.add_edge(Edge((SELF, name), ((child,), port.name)))
        inner = self.ctx.endpoint((*self.path, child), port.name, container=True)
        self.ctx.rename_value(inner, self.ctx.endpoint(self.path, name, container=True))

    # -- the result ---------------------------------------------------------------------------

    def build(self, namespace: str | None, root: bool) -> Container:
        """The container of this level, in namespace ``namespace``; the original if unchanged."""
        children = []
        for name in self.names:
            op = self.ops[name]
            if not op.children:
                op = _with_namespace(op, self.ns.get(name), namespace)
            children.append(op)
        container = self.container
        attrs = container.attrs
        own = attrs.get("namespace")
        if (root or own is not None) and own != namespace and namespace is not None:
            attrs = attrs.set("namespace", namespace)
        if not self.changed and attrs is container.attrs and all(
                a is b for a, b in zip(children, container.children)):
            return container
        try:
            return Container(container.type, container.name, inputs=self.inputs, outputs=container.outputs,
                             children=children, edges=self.edges, tombstones=container.tombstones, attrs=attrs, uid=container.uid,
                             controls=container.controls)
        except InvariantError as exc:
            where = "/".join(self.path) or container.name or "<root>"
            raise MappingError(
                f"mapping left {where} inconsistent: {exc}; if tombstones of an enclosing "
                "container name edges a rule rewrote, consolidate the model first",
                path=self.path) from exc


def _with_namespace(op: Container, wanted: str | None, inherited: str | None) -> Container:
    """``op`` with its own ``namespace`` attribute set only where it differs from the inherited one."""
    own = op.attrs.get("namespace")
    if own == wanted or wanted is None:
        return op
    if wanted == inherited:
        return op.without_attrs("namespace")
    return op.with_attrs(namespace=wanted)
