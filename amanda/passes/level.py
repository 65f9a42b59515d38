"""One container level as the passes see it: its ops by name, who feeds each input port, who
reads each output port, and a rebuild that keeps every surviving child object as it is.

Passes rewrite a level only when its edges join direct children (or the level's own ports):
a level with tombstones, edges reaching into descendants by path, or phase-tagged edges is
left alone, since rewiring it would have to reason about views the passes do not model.
Ops joined by control edges are pinned: no pass removes or replaces them. Constant folding
alone also takes a level whose children read values from inside a sibling container by path
(``deep_sources``: a gradient container reading its forward model's values); it only replaces
children by constants and leaves those edges as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from amanda.containers import SELF, Container, Edge, Endpoint, op

__all__ = ["Level", "constant_value", "level_namespaces", "new_constant", "on_levels", "own_namespace", "producer_name",
           "reached_paths"]

Source = Endpoint


@dataclass
class Level:
    """The children, producers and consumers of one container level (built once per pass)."""

    model: Container
    ops: dict[Any, Container] = field(default_factory=dict)
    source: dict[tuple[str, str], Endpoint] = field(default_factory=dict)
    readers: dict[Endpoint, list[Endpoint]] = field(default_factory=dict)
    pinned: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, model: Container, deep_sources: bool = False) -> Level | None:
        """The level of ``model``, or None when its edges are not plain child-to-child wiring
        (with ``deep_sources``, edges from inside a child by path into a child or the level's
        own outputs count as plain: their sources are values the level cannot rewrite)."""
        if model.tombstones:
            return None
        level = cls(model, {c.name: c for c in model.children})
        for edge in model.edges:
            src, dst = edge.src, edge.dst
            deep_ok = deep_sources and not edge.is_control and src.op is not SELF
            if edge.phase is not None or (dst.op is not SELF and len(dst.op) != 1) or (
                    src.op is not SELF and len(src.op) != 1 and not deep_ok):
                return None
            if edge.is_control:
                level.pinned.update(e.op[0] for e in (src, dst) if e.op is not SELF)
                continue
            if dst.op is not SELF:
                level.source[(dst.op[0], dst.port)] = src
            level.readers.setdefault(src, []).append(dst)
        return level

    def inputs(self, name: Any, at_least: int = 0) -> list[Endpoint | None]:
        """The source of each declared input port of op ``name`` (None when unconnected),
        padded with None to ``at_least`` entries."""
        found = [self.source.get((name, p.name)) for p in self.ops[name].inputs]
        return found + [None] * (at_least - len(found))

    def output(self, name: Any, index: int = 0) -> Endpoint:
        """The endpoint of op ``name``'s ``index``-th output port."""
        return Endpoint((name,), self.ops[name].outputs[index].name)

    def reads(self, endpoint: Endpoint) -> list[Endpoint]:
        """Every input port (or level output) reading ``endpoint``."""
        return self.readers.get(endpoint, [])

    def only_reader(self, endpoint: Endpoint) -> str | None:
        """The name of the one op reading ``endpoint``, when exactly one op (and nothing else) does."""
        found = self.reads(endpoint)
        if len(found) == 1 and found[0].op is not SELF:
            return str(found[0].op[0])
        return None

    def order(self) -> list[str]:
        """Child names in dataflow order (producers first; document order breaks ties)."""
        position = {name: i for i, name in enumerate(self.ops)}
        pending = {name: {s.op[0] for s in self.inputs(name) if s is not None and s.op is not SELF}
                   for name in self.ops}
        done: list[str] = []
        seen: set[str] = set()

        def visit(name: str) -> None:  # iterative DFS: deep chains must not recurse
            stack = [(name, iter(sorted(pending[name] - seen, key=position.__getitem__)))]
            seen.add(name)
            while stack:
                current, children = stack[-1]
                nxt = next((c for c in children if c not in seen), None)
                if nxt is None:
                    stack.pop()
                    done.append(current)
                    continue
                seen.add(nxt)
                stack.append((nxt, iter(sorted(pending[nxt] - seen, key=position.__getitem__))))

        for name in self.ops:
            if name not in seen:
                visit(name)
        return done

    def rebuild(self, drop: Iterable[str] = (), add: Iterable[Container] = (),
                replace: dict[str, Container] | None = None, rewire: dict[Endpoint, Endpoint] | None = None,
                extra: Iterable[Edge] = ()) -> Container:
        """The level with ops dropped, added and replaced, and readers of old sources rewired.

        Edges touching a dropped op are removed; ``extra`` edges are added. Untouched children
        are the same objects, so they keep their paths, uids and metadata."""
        dropped, replace, add = set(drop), replace or {}, list(add)
        rewire = {k: v for k, v in (rewire or {}).items() if k != v}
        # an op dropped and added again under its name loses its inputs but keeps its readers
        readd = {c.name for c in add}
        children = [replace.get(c.name, c) for c in self.model.children if c.name not in dropped]
        children += add
        edges = []
        for edge in self.model.edges:
            src = _rewired(edge.src, rewire)
            if edge.dst.op is not SELF and edge.dst.op[0] in dropped:
                continue
            if src.op is not SELF and src.op[0] in dropped and src.op[0] not in readd:
                continue
            edges.append(_from(edge, src))
        # a new op may read what another match replaced (two fusions in a row)
        edges += [_from(edge, _rewired(edge.src, rewire)) for edge in extra]
        return self.model.evolve(children=tuple(children), edges=tuple(edges))


def _rewired(src: Endpoint, rewire: dict[Endpoint, Endpoint]) -> Endpoint:
    """Where a reader of ``src`` reads once every rewiring (which may chain) is followed."""
    while src in rewire:
        src = rewire[src]
    return src


def _from(edge: Edge, src: Endpoint) -> Edge:
    """``edge`` reading from ``src`` (the same object when its source is unchanged)."""
    return edge if src is edge.src else Edge(src, edge.dst, attrs=edge.attrs or None)


def producer_name(source: Endpoint | None) -> str | None:
    """The op name of a source endpoint (None for the level's own inputs and missing sources)."""
    return None if source is None or source.op is SELF else str(source.op[0])


def constant_value(node: Container | None) -> np.ndarray | None:
    """The value of a ``Constant`` op given as a ``value`` tensor, else None."""
    if node is None or node.type != "Constant" or not node.is_op:
        return None
    value = node.attrs.get("value")
    return value if isinstance(value, np.ndarray) else None


def own_namespace(node: Container) -> dict[str, Any]:
    """The ``namespace`` attribute ``node`` sets on itself, as attributes for an op that takes
    its place (empty when it inherits its level's): an op a pass puts in place of another must
    live in the same namespace, or it would have none where only the op had one.

    >>> own_namespace(op("Relu", "r", ["X"], ["Y"], {"namespace": "amanda/onnx/17"}))
    {'namespace': 'amanda/onnx/17'}
    """
    found = node.attrs.get("namespace")
    return {} if found is None else {"namespace": found}


def new_constant(name: str, value: np.ndarray, like: Container | None = None, **meta: Any) -> Container:
    """A new read-only ``Constant`` op holding ``value`` (``meta`` keys are bookkeeping), in the
    namespace the op ``like`` sets on itself (see :func:`own_namespace`)."""
    value = np.array(value)
    value.setflags(write=False)
    return op("Constant", name, [], ["output"], {"value": value, **(own_namespace(like) if like else {}), **meta})


LevelFn = Callable[[Container, tuple, Any], "tuple[Container, dict[str, list[str]]]"]


def _reached_from_above(model: Container) -> set[str]:
    """Children whose inside an edge or tombstone of ``model`` refers to by path."""
    if model.tombstones:
        return {c.name for c in model.children}
    return {e.op[0] for edge in model.edges for e in (edge.src, edge.dst) if e.op is not SELF and len(e.op) > 1}


def on_levels(model: Container, fn: LevelFn, context: Any = None, path: tuple = (),
              enter_reached: bool = False) -> tuple[Container, dict]:
    """``fn`` applied to every container level, innermost first; the changes, keyed by kind,
    as full paths. A level that an outer edge or tombstone refers into is left as it is, unless
    ``enter_reached`` (then ``fn`` must keep every child those edges name: see
    :func:`reached_paths`)."""
    changes: dict[str, list[str]] = {}
    replaced = {}
    frozen = set() if enter_reached and not model.tombstones else _reached_from_above(model)
    for child in model.children:
        if child.is_op or child.name in frozen:
            continue
        inner, found = on_levels(child, fn, context, path + (child.name,), enter_reached)
        for kind, paths in found.items():
            changes.setdefault(kind, []).extend(paths)
        if inner is not child:
            replaced[child.name] = inner
    if replaced:
        model = model.evolve(children=tuple(replaced.get(c.name, c) for c in model.children))
    out, found = fn(model, path, context)
    for kind, names in found.items():
        changes.setdefault(kind, []).extend("/".join(path + (n,)) for n in names)
    return out, changes


def reached_paths(model: Container, path: tuple = ()) -> set[tuple]:
    """The full path of every op or container that an edge names by a path of two or more
    steps (from a level above it), anywhere in ``model``.

    >>> inner = Container(None, "inner", outputs=["y"], children=[op("Relu", "r", ["X"], ["Y"])], edges=[("r:Y", "inner:y")])
    >>> outer = Container(None, "outer", outputs=["y"], children=[inner], edges=[("inner/r:Y", "outer:y")])
    >>> sorted(reached_paths(outer))
    [('inner', 'r')]
    """
    found = {path + tuple(e.op) for edge in model.edges for e in (edge.src, edge.dst) if e.op is not SELF and len(e.op) > 1}
    for child in model.children:
        if not child.is_op:
            found |= reached_paths(child, path + (child.name,))
    return found


def level_namespaces(model: Container, path: tuple = (), inherited: str | None = None) -> dict[tuple, str | None]:
    """The effective namespace of every container level, by path."""
    here = model.attrs.get("namespace", inherited)
    found = {path: here}
    for child in model.children:
        if not child.is_op:
            found.update(level_namespaces(child, path + (child.name,), here))
    return found
