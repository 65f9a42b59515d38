"""Op fusion (docs/challenges.md, C5): ``fuse`` moves sibling ops into a new container that keeps
them; ``unfuse`` puts them back. Both keep the effective dataflow (leaf paths gain or
lose the fused container's name).

Data edges that cross the group's boundary go through its ports, named
``"<op>.<port>"``; control edges keep reaching the kept ops directly, so the order they
impose stays exactly the same. A fused kernel registered for the container's type runs
it as one op; otherwise the kept ops run.

>>> from amanda.containers.container import op
>>> from amanda.containers.compose import chain
>>> from amanda.containers.flatten import flatten
>>> m = chain(op("MatMul", "mm", ["x"], ["y"]), op("Add", "bias", ["x"], ["y"]), op("Relu", "relu", ["x"], ["y"]))
>>> fused = fuse(m, ["mm", "bias"], "FusedDense")
>>> [c.name for c in fused.children], fused.child("FusedDense_0").input_names
(['FusedDense_0', 'relu'], ('mm.x',))
>>> len(flatten(unfuse(fused, "FusedDense_0")).edges) == len(flatten(m).edges)
True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from amanda.containers.checks import expect_container, expect_str
from amanda.containers.container import Container
from amanda.containers.edge import CONTROL, SELF, Edge, forward_attrs
from amanda.containers.frames import find_buried
from amanda.containers.update import target_paths, with_child
from amanda.errors import ArgumentError, InvariantError, Problem

__all__ = ["fuse", "unfuse"]


def fuse(model: Container, paths: Any, type: str, name: str | None = None, attrs: Any = None) -> Container:
    """Move the sibling ops at ``paths`` (paths or a Selection) into a new child of type ``type``."""
    expect_container(model, "model")
    expect_str(type, "type", "an op type for the fused container (a non-empty string)")
    expect_str(name, "name", "a name for the fused container", optional=True)
    targets = target_paths(model, paths)
    if not targets or any(not p for p in targets):
        raise InvariantError([Problem(None, "one or more sibling paths below the model", repr(paths))])
    parent_path = targets[0][:-1]
    if any(p[:-1] != parent_path for p in targets):
        raise InvariantError([Problem(parent_path, "paths that share one parent", str(sorted({p[:-1] for p in targets})))])
    parent = model.descendant(parent_path) if parent_path else model
    group = {p[-1] for p in targets}
    kids = list(parent.children)
    name = name or _fresh(parent, type)
    dead = buried_above(model, parent_path)
    inner_edges, outer_edges = [], []
    inputs: dict[str, str] = {}
    outputs: dict[tuple, str] = {}
    for edge in parent.edges:
        src_in = edge.src.op is not SELF and edge.src.op[0] in group
        dst_in = edge.dst.op is not SELF and edge.dst.op[0] in group
        if src_in and dst_in:
            inner_edges.append(edge)
        elif (edge.is_control or edge.key in dead) and (src_in or dst_in):
            # control, and edges an ancestor deleted, keep naming the kept ops directly
            outer_edges.append(Edge(_into(edge.src, group, name), _into(edge.dst, group, name), edge.attrs))
        elif dst_in:
            port = _port_name(edge.dst)
            inputs[port] = port
            inner_edges.append(Edge((SELF, port), edge.dst, edge.attrs))
            outer_edges.append(Edge(edge.src, ((name,), port)))
        elif src_in:
            key = (edge.src.op, edge.src.port)
            if key not in outputs:
                outputs[key] = _port_name(edge.src)
                inner_edges.append(Edge(edge.src, (SELF, outputs[key])))
            outer_edges.append(Edge(((name,), outputs[key]), edge.dst, edge.attrs))
        else:
            outer_edges.append(edge)
    members = [k for k in kids if k.name in group]
    fused = Container(type, name, list(inputs), list(outputs.values()), members, inner_edges, attrs=attrs)
    first = min(i for i, k in enumerate(kids) if k.name in group)
    new_kids = [fused if i == first else k for i, k in enumerate(kids) if k.name not in group or i == first]
    tombstones = [Edge(_into(t.src, group, name), _into(t.dst, group, name)) for t in parent.tombstones]
    new_parent = Container(
        parent.type, parent.name, parent.inputs, parent.outputs, new_kids, outer_edges, tombstones,
        parent.attrs, parent.uid, parent.controls,
    )

    def moved(path: tuple, rel: tuple) -> tuple:
        n = len(rel)
        if len(path) > n and path[:n] == rel and path[n] in group:
            return (*rel, name, *path[n:])
        return path

    return _rebuild_up(model, parent_path, new_parent, moved)


def _fresh(parent: Container, type: str) -> str:
    number = 0
    while parent.has_child(f"{type}_{number}"):
        number += 1
    return f"{type}_{number}"


def _port_name(end: Any) -> str:
    return f"{'/'.join(end.op)}.{end.port}"


def _into(end: Any, group: set, name: str) -> tuple:
    op = end.op
    if op is not SELF and op[0] in group:
        return ((name, *op), end.port)
    return (op, end.port)


def unfuse(model: Container, path: Any) -> Container:
    """Inline the container at ``path`` into its parent: the inverse of :func:`fuse`."""
    expect_container(model, "model")
    found = target_paths(model, path)
    if len(found) != 1:
        raise ArgumentError.at("path", "the path of exactly one container", f"{len(found)} paths")
    (target,) = found
    if not target:
        raise InvariantError([Problem(None, "the path of a container below the model", "the model itself")])
    parent_path, name = target[:-1], target[-1]
    parent = model.descendant(parent_path) if parent_path else model
    fused = parent.child(name)
    if fused.is_op or fused.controls:
        what = "an op" if fused.is_op else "named control ports"
        raise InvariantError([Problem(target, "a container without named control ports to inline", what)])
    clash = [k.name for k in fused.children if parent.has_child(k.name) and k.name != name]
    if clash:
        raise InvariantError([Problem(target, "inner names free in the parent", f"{clash} taken")])
    feeders: dict[Any, list[Edge]] = {}
    readers: dict[Any, list[Edge]] = {}
    outer: list[Edge] = []
    for edge in parent.edges:
        if edge.dst.op == (name,):
            feeders.setdefault(edge.dst.port, []).append(edge)
        elif edge.src.op == (name,):
            readers.setdefault(edge.src.port, []).append(edge)
        else:
            outer.append(Edge(_out_of(edge.src, name), _out_of(edge.dst, name), edge.attrs))
    members = [k.name for k in fused.children]
    dead_outer = buried_above(model, parent_path)
    dead_inner = {
        _strip(key, name) for key in dead_outer | {t.key for t in parent.tombstones} if _under(key, name)
    }
    feeders = {port: [e for e in edges if e.key not in dead_outer] for port, edges in feeders.items()}
    readers = {port: [e for e in edges if e.key not in dead_outer] for port, edges in readers.items()}
    for port, edges in feeders.items():
        if port == CONTROL:  # a control edge into the container orders every op inside it
            outer += [Edge(e.src, ((m,), CONTROL), e.attrs) for e in edges for m in members]
    for port, edges in readers.items():
        if port == CONTROL:
            outer += [Edge(((m,), CONTROL), e.dst, e.attrs) for e in edges for m in members]
    deleted_here = {_strip(t.key, name) for t in parent.tombstones if _under(t.key, name)}
    for edge in fused.edges:
        if edge.key in deleted_here:
            continue  # the parent's tombstone deletes it: after inlining, delete it outright
        if (edge.src.op is SELF or edge.dst.op is SELF) and edge.key in dead_inner:
            continue  # a hop an ancestor deleted: the merged edge would be dead too
        sources = [(edge.src, edge.attrs)] if edge.src.op is not SELF else [
            (f.src, forward_attrs(f.attrs, edge.attrs)) for f in feeders.get(edge.src.port, [])
        ]
        targets = [(edge.dst, None)] if edge.dst.op is not SELF else [
            (r.dst, r.attrs) for r in readers.get(edge.dst.port, [])
        ]
        for src, attrs in sources:
            for dst, outer_attrs in targets:
                merged = forward_attrs(attrs, outer_attrs) if outer_attrs is not None else attrs
                if merged is not None:
                    outer.append(Edge(src, dst, merged))
    inherited = fused.attrs
    kids = []
    for kid in parent.children:
        if kid.name != name:
            kids.append(kid)
            continue
        for member in fused.children:
            extra = {k: v for k, v in inherited.items() if k not in member.attrs}
            kids.append(member.with_attrs(**extra) if extra else member)
    tombstones = [Edge(_out_of(t.src, name), _out_of(t.dst, name)) for t in parent.tombstones] + list(fused.tombstones)
    probe = Container(parent.type, parent.name, parent.inputs, parent.outputs, kids, (), (), None, parent.uid, parent.controls)
    # hops through the inlined container are gone; tombstones that named them name nothing now
    tombstones = [t for t in tombstones if find_buried(probe, t) is not None]
    new_parent = Container(
        parent.type, parent.name, parent.inputs, parent.outputs, kids, _dedupe(outer), tombstones,
        parent.attrs, parent.uid, parent.controls,
    )

    def moved(path: tuple, rel: tuple) -> tuple:
        n = len(rel)
        if len(path) > n + 1 and path[:n] == rel and path[n] == name:
            return (*rel, *path[n + 1:])
        return path

    return _rebuild_up(model, parent_path, new_parent, moved)


def buried_above(model: Container, parent_path: tuple) -> set:
    """Keys of edges (in the coordinates of the container at ``parent_path``) that a
    tombstone of one of its ancestors deletes."""
    found: set = set()
    node = model
    for depth in range(len(parent_path)):
        rel = parent_path[depth:]
        for tomb in node.tombstones:
            src, dst = tomb.src.op, tomb.dst.op
            if src[: len(rel)] == rel and dst[: len(rel)] == rel:
                found.add(((src[len(rel):] or SELF, tomb.src.port), (dst[len(rel):] or SELF, tomb.dst.port)))
        node = node.child(parent_path[depth])
    return {(_ep(a), _ep(b)) for a, b in found}


def _ep(end: tuple) -> Any:
    from amanda.containers.edge import Endpoint

    return Endpoint(end[0], end[1])


def _under(key: tuple, name: str) -> bool:
    return all(end.op is not SELF and end.op[0] == name for end in key)


def _strip(key: tuple, name: str) -> tuple:
    return tuple(_ep((end.op[1:] or SELF, end.port)) for end in key)


def _out_of(end: Any, name: str) -> tuple:
    op = end.op
    if op is not SELF and op[0] == name and len(op) > 1:
        return (op[1:], end.port)
    return (op, end.port)


def _dedupe(edges: list[Edge]) -> list[Edge]:
    seen, out = set(), []
    for edge in edges:
        if edge not in seen:
            seen.add(edge)
            out.append(edge)
    return out


def _rebuild_up(
    model: Container, parent_path: tuple, new_parent: Container, moved: Callable[[tuple, tuple], tuple]
) -> Container:
    """Put ``new_parent`` back at ``parent_path``, rewriting ancestors' deep references with ``moved``."""
    trail = [model]
    for part in parent_path[:-1]:
        trail.append(trail[-1].child(part))
    current = new_parent
    for level in range(len(parent_path) - 1, -1, -1):
        ancestor = trail[level]
        rel = parent_path[level:]

        def fix(end: Any, rel: tuple = rel) -> tuple:
            return (end.op if end.op is SELF else moved(end.op, rel), end.port)

        edges = [Edge(fix(e.src), fix(e.dst), e.attrs) for e in ancestor.edges]
        tombs = [Edge(fix(t.src), fix(t.dst)) for t in ancestor.tombstones]
        children = ancestor.children.set(ancestor.child_index(parent_path[level]), current)
        if ancestor.tombstones:
            probe = Container(ancestor.type, ancestor.name, ancestor.inputs, ancestor.outputs, children,
                              (), (), None, ancestor.uid, ancestor.controls)
            tombs = [t for t in tombs if find_buried(probe, t) is not None]
        if edges == list(ancestor.edges) and tombs == list(ancestor.tombstones):
            current = with_child(ancestor, parent_path[level], current)
            continue
        current = Container(
            ancestor.type, ancestor.name, ancestor.inputs, ancestor.outputs, children, edges, tombs,
            ancestor.attrs, ancestor.uid, ancestor.controls,
        )
    return current
