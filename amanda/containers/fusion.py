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

from amanda.containers.arguments import expect_container, expect_str
from amanda.containers.container import Container
from amanda.containers.edge import CONTROL, SELF, Edge
from amanda.containers.frames import at, buried_above, lift_end, live_tombstones, lower, lower_end, splice, split
from amanda.containers.update import expect_child_path, target_paths
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
    for target in targets:
        expect_child_path(model, target)
    parent = model.descendant(parent_path) if parent_path else model
    group = {p[-1] for p in targets}
    name = name or _fresh(parent, type)
    new_parent = _grouped(parent, group, (type, name, attrs), buried_above(model, parent_path))
    return at(model, parent_path, lambda _: new_parent, moved=lambda rel: (name, *rel) if rel[0] in group else rel)


def _grouped(parent: Container, group: set, shell: tuple, dead: set) -> Container:
    """``parent`` with the children in ``group`` moved into a new child (``shell``: its type, name
    and attributes). Data edges crossing the group's boundary are split at its ports (one
    output port per source); control edges, and edges an ancestor deleted, keep naming the
    kept ops directly, so the order they impose stays exactly the same."""
    name = shell[1]

    def inside(end: Any) -> bool:
        return end[0] is not SELF and end[0][0] in group

    def regrouped(end: Any) -> Any:
        return lift_end(end, (name,)) if inside(end) else end

    inner, outer, inputs, outputs = _split_edges(parent.edges, inside, regrouped, name, dead)
    members = [k for k in parent.children if k.name in group]
    # a tombstone deletes an edge stored below one child, so it names the group on both ends or on
    # neither: the group's go inside with it, where they keep the fused container valid on its own
    buried = [t for t in parent.tombstones if inside(t[0])]
    fused = Container(shell[0], name, inputs=list(inputs), outputs=list(outputs), children=members, edges=inner,
                      tombstones=buried, attrs=shell[2])
    first = min(parent.child_index(k.name) for k in members)
    kids = [fused if i == first else k for i, k in enumerate(parent.children) if k.name not in group or i == first]
    tombstones = [t for t in parent.tombstones if not inside(t[0])]
    return Container(parent.type, parent.name, inputs=parent.inputs, outputs=parent.outputs, children=kids, edges=outer,
                     tombstones=tombstones,
                     attrs=parent.attrs, uid=parent.uid, controls=parent.controls)


def _split_edges(edges: Any, inside: Callable[[Any], bool], regrouped: Callable[[Any], Any], name: str,
                 dead: set) -> tuple[list[Edge], list[Edge], dict[str, None], dict[str, None]]:
    """``(inner edges, outer edges, input ports, output ports)`` of a new group ``name``: the
    edges of its parent sorted by whether they stay inside it, and those crossing it (data
    edges an ancestor did not delete) split at its ports."""
    inner: list[Edge] = []
    outer: list[Edge] = []
    inputs: dict[str, None] = {}
    outputs: dict[str, None] = {}
    for edge in edges:
        src_in, dst_in = inside(edge[0]), inside(edge[1])
        if src_in and dst_in:
            inner.append(edge)
        elif not (src_in or dst_in) or edge.is_control or edge.key in dead:
            outer.append(Edge(regrouped(edge[0]), regrouped(edge[1]), attrs=edge[2]))
        else:
            end = edge[1] if dst_in else edge[0]
            port = f"{'/'.join(end[0])}.{end[1]}"
            half_out, half_in = split(Edge(regrouped(edge[0]), regrouped(edge[1]), attrs=edge[2]), name, port)
            if dst_in or port not in outputs:
                inner.append(half_in)
            (inputs if dst_in else outputs)[port] = None
            outer.append(half_out)
    return inner, outer, inputs, outputs


def _fresh(parent: Container, type: str) -> str:
    number = 0
    while parent.has_child(f"{type}_{number}"):
        number += 1
    return f"{type}_{number}"


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
    new_parent = _inlined(parent, name, buried_above(model, parent_path))
    return at(model, parent_path, lambda _: new_parent,
              moved=lambda rel: rel[1:] if rel[0] == name and len(rel) > 1 else rel)


def _inlined(parent: Container, name: str, dead_outer: set) -> Container:
    """``parent`` with its child ``name`` replaced by that child's children: the hops through
    its ports are spliced into direct edges; ``dead_outer``: keys an ancestor deletes."""
    fused = parent.child(name)
    prefix = (name,)
    outer, feeders, readers = _hops(parent, prefix, dead_outer)
    members = [(k.name,) for k in fused.children]
    # a control edge into the container orders every op inside it
    outer += [Edge(e[0], (m, CONTROL), attrs=e[2]) for e in feeders.get(CONTROL, ()) for m in members]
    outer += [Edge((m, CONTROL), e[1], attrs=e[2]) for e in readers.get(CONTROL, ()) for m in members]
    deleted_here = {k for t in parent.tombstones if (k := _lowered_key(t, prefix)) is not None}
    dead_inner = deleted_here | {k for key in dead_outer if (k := _lowered_key(key, prefix)) is not None}
    for edge in fused.edges:
        if edge.key in deleted_here:
            continue  # the parent's tombstone deletes it: after inlining, delete it outright
        if (edge[0][0] is SELF or edge[1][0] is SELF) and edge.key in dead_inner:
            continue  # a hop an ancestor deleted: the merged edge would be dead too
        outer += splice(edge, name, feeders, readers)
    kids = []
    for kid in parent.children:
        kids += [kid] if kid.name != name else [_inheriting(member, fused.attrs) for member in fused.children]
    out_of = _out_of(prefix)
    edges = list(dict.fromkeys(Edge(out_of(e[0]), out_of(e[1]), attrs=e[2]) for e in outer))
    tombstones = [*(Edge(out_of(t[0]), out_of(t[1])) for t in parent.tombstones), *fused.tombstones]
    # hops through the inlined container are gone; tombstones that named them name nothing now
    return Container(parent.type, parent.name, inputs=parent.inputs, outputs=parent.outputs, children=kids, edges=edges,
                     tombstones=live_tombstones(parent, kids, tombstones), attrs=parent.attrs, uid=parent.uid,
                     controls=parent.controls)


def _hops(parent: Container, prefix: tuple, dead_outer: set) -> tuple[list[Edge], dict, dict]:
    """The parent's edges that do not touch the child at ``prefix``, and the live ones into
    (``feeders``) and out of (``readers``) its ports, by port."""
    outer: list[Edge] = []
    feeders: dict[Any, list[Edge]] = {}
    readers: dict[Any, list[Edge]] = {}
    for edge in parent.edges:
        into, out_of_it = edge[1][0] == prefix, edge[0][0] == prefix
        if not (into or out_of_it):
            outer.append(edge)
        elif edge.key not in dead_outer:  # an edge an ancestor deleted carries nothing through
            hops = feeders if into else readers
            hops.setdefault(edge[1][1] if into else edge[0][1], []).append(edge)
    return outer, feeders, readers


def _lowered_key(edge: Any, prefix: tuple) -> Any:
    """The key of ``edge`` in the frame of the child at ``prefix`` (None unless both ends are in it)."""
    lowered = lower(edge, prefix)
    return None if lowered is None else lowered.key


def _out_of(prefix: tuple) -> Any:
    """Ends strictly inside the child at ``prefix`` as they read once its children are the parent's."""
    def out(end: Any) -> Any:
        inner = lower_end(end, prefix)
        return end if inner is None or inner[0] is SELF else inner

    return out


def _inheriting(member: Container, inherited: Any) -> Container:
    """A member of an inlined container, keeping the attributes it inherited from it."""
    extra = {k: v for k, v in inherited.items() if k not in member.attrs}
    return member.with_attrs(**extra) if extra else member
