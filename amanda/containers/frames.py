"""Frames: moving edges between nesting levels, and rebuilding the containers along one path.

An edge is stored in the frame of the container that owns it: each end names an op by its
path below that container, or SELF for the container's own ports. Every structural edit
(fuse, unfuse, consolidate, replace, the mapping engine's nested rewriting) moves edges
between such frames with the few moves below:

- :func:`lift` and :func:`lower` carry an edge between a child's frame and its parent's;
- :func:`split` routes an edge that crosses a container's boundary through one of its
  ports (:func:`route` does it on a container), and :func:`splice` joins the halves again;
- :func:`at` rebuilds the containers along one path around a changed descendant, re-pointing
  the references ancestors hold into it (the role ``tree_at`` plays in Equinox, except that
  every rebuilt container is checked again).

>>> from amanda.containers.container import Container, op
>>> lift(Edge("a:y", "b:x"), ("block",))
Edge('block/a:y', 'block/b:x')
>>> lower(Edge("block/a:y", "block:y"), ("block",))
Edge('a:y', 'SELF:y')
>>> block = Container("Block", "block", children=[op("Relu", "r", ["x"], ["y"])])
>>> top = Container("Graph", "g", inputs=["x"], children=[block], edges=[("g:x", "block/r:x")])
>>> routed = route(top, top.edges[0], "x")
>>> [str(e) for e in (routed.edges[0].dst, routed.child("block").edges[0].src)]
['block:x', 'SELF:x']
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from amanda.containers import invariants
from amanda.containers.container import Container
from amanda.containers.edge import CONTROL, SELF, Edge, Endpoint, Port, forward_attrs
from amanda.containers.values import EMPTY as _EMPTY
from amanda.errors import InvariantError, PathError, Problem

__all__ = ["at", "buried_above", "find_buried", "lift", "lift_end", "live_tombstones", "lower", "lower_end",
           "recheck_child", "route", "splice", "split", "step", "with_child"]

_new = tuple.__new__
Moved = Callable[[tuple], Any]  # a path below a container -> where it is after an edit (or SELF)
# caches that depend only on a container's edges and tombstones, so a rebuilt
# container with the same edge vectors may share them
EDGE_CACHES = ("edge_keys", "tomb_keys", "dst_index", "touching")


# -- one level up or down --------------------------------------------------------------------


def _path(op: Any) -> Any:
    """A stored op path (a tuple, or SELF) from one as written (``"block/conv"``)."""
    return tuple(op.split("/")) if type(op) is str else op


def lift_end(end: Any, prefix: tuple) -> Endpoint:
    """An endpoint of the container at ``prefix`` read from the container above: SELF
    becomes ``prefix``, a path gains it."""
    op = _path(end[0])
    return _new(Endpoint, (prefix if op is SELF else prefix + op, end[1]))


def lower_end(end: Any, prefix: tuple) -> Endpoint | None:
    """The inverse of :func:`lift_end`: the endpoint in the frame of the container at ``prefix``
    (SELF for its own ports), or None when it lies outside that container."""
    op = _path(end[0])
    if op is SELF or op[: len(prefix)] != prefix:
        return None
    return _new(Endpoint, (op[len(prefix):] or SELF, end[1]))


def lift(edge: Sequence[Any], prefix: tuple) -> Edge:
    """An edge (or ``(src, dst)`` key) of the container at ``prefix``, in the frame above it."""
    attrs = edge[2] if len(edge) > 2 else None
    return _new(Edge, (lift_end(edge[0], prefix), lift_end(edge[1], prefix), attrs if attrs is not None else _EMPTY))


def lower(edge: Sequence[Any], prefix: tuple) -> Edge | None:
    """The edge in the frame of the container at ``prefix``; None unless both ends lie in it.

    >>> lift(Edge((SELF, "x"), "r:x"), ("b", "c"))
    Edge('b/c:x', 'b/c/r:x')
    >>> lower(_, ("b", "c"))
    Edge('SELF:x', 'r:x')
    """
    src, dst = lower_end(edge[0], prefix), lower_end(edge[1], prefix)
    if src is None or dst is None:
        return None
    attrs = edge[2] if len(edge) > 2 else None
    return _new(Edge, (src, dst, attrs if attrs is not None else _EMPTY))


# -- through a boundary ----------------------------------------------------------------------


def split(edge: Edge, child: str, port: str) -> tuple[Edge, Edge]:
    """Route ``edge`` (in a parent's frame, exactly one end strictly inside ``child``) through
    the child's boundary port ``port``: ``(outer, inner)``, the outer edge in the parent's frame
    and the inner one in the child's. The attributes stay on the half that reaches the consumer.

    >>> split(Edge("a:y", "b/r:x", attrs={"phase": "train"}), "b", "x")
    (Edge('a:y', 'b:x'), Edge('SELF:x', 'r:x', attrs={'phase': 'train'}))
    """
    prefix = (child,)
    inner_src, inner_dst = lower_end(edge[0], prefix), lower_end(edge[1], prefix)
    if inner_src is None and inner_dst is not None and inner_dst[0] is not SELF:
        return Edge(edge[0], (prefix, port)), Edge((SELF, port), inner_dst, attrs=edge[2])
    if inner_dst is not None or inner_src is None or inner_src[0] is SELF:
        raise InvariantError([Problem((child,), "an edge with one end inside the child", f"{edge[0]} -> {edge[1]}")])
    return Edge((prefix, port), edge[1], attrs=edge[2]), Edge(inner_src, (SELF, port))


def splice(inner: Edge, child: str, feeders: Mapping[Any, Sequence[Edge]], readers: Mapping[Any, Sequence[Edge]]) -> list[Edge]:
    """The inverse of :func:`split`: an edge of ``child`` (in its frame) joined with the parent's
    edges into its input ports (``feeders``, by port) and out of its output ports (``readers``),
    as edges of the parent that carry the same values past the child's boundary. Hops of
    different phases carry nothing and are left out.

    >>> outer, inner = split(Edge("a:y", "b/r:x"), "b", "x")
    >>> splice(inner, "b", {"x": [outer]}, {})
    [Edge('a:y', 'b/r:x')]
    """
    prefix = (child,)
    sources = [(lift_end(inner[0], prefix), inner[2])] if inner[0][0] is not SELF else [
        (f[0], forward_attrs(f[2], inner[2])) for f in feeders.get(inner[0][1], ())
    ]
    targets = [(lift_end(inner[1], prefix), None)] if inner[1][0] is not SELF else [
        (r[1], r[2]) for r in readers.get(inner[1][1], ())
    ]
    out = []
    for src, attrs in sources:
        for dst, outer_attrs in targets:
            merged = forward_attrs(attrs, outer_attrs) if outer_attrs is not None else attrs
            if merged is not None:
                out.append(Edge(src, dst, attrs=merged))
    return out


def route(container: Container, edge: Any, port: str | None = None) -> Container:
    """``container`` with its data ``edge``, which reaches strictly inside one child, routed through a
    new boundary port of that child (named ``port``, by default after the inner end). The
    effective view (:func:`amanda.containers.flatten.flatten`) is unchanged."""
    problems: list[Problem] = []
    edge = invariants.normalise_edge(container, Edge.of(edge), ("route",), problems)
    if edge is None or edge.key not in invariants.own_edge_keys(container) or edge.is_control:
        found = "a control edge" if edge is not None and edge.is_control else str(edge)
        raise InvariantError(problems or [Problem(container._where(), "a data edge of the container", found)])
    inward = edge[1][0] is not SELF and len(edge[1][0]) > 1
    end = edge[1] if inward else edge[0]
    name = end[0][0]
    child = container.child(name)
    taken = {p.name for p in (*child.inputs, *child.outputs, *child.controls)}
    port = port or "/".join(end[0][1:]) + f".{end[1]}"
    while port in taken:
        port += "_"
    outer, inner = split(edge, name, port)
    ports = {"inputs": (*child.inputs, Port(port))} if inward else {"outputs": (*child.outputs, Port(port))}
    new_child = child.evolve(edges=(*child.edges, inner), **ports)
    edges = [outer if e.key == edge.key else e for e in container.edges]
    return container.evolve(children=container.children.set(container.child_index(name), new_child), edges=edges)


# -- tombstones across levels ----------------------------------------------------------------


def find_buried(container: Container, edge: Any) -> Edge | None:
    """The normalised form of a tombstone of ``container``: the edge it names, owned strictly
    below ``container``, in ``container``'s frame; None if no such edge exists."""
    src_path = invariants.resolve_path(container, edge[0][0])
    dst_path = invariants.resolve_path(container, edge[1][0])
    if src_path is None or dst_path is None or src_path is SELF or dst_path is SELF:
        return None
    common = 0
    while common < min(len(src_path), len(dst_path)) and src_path[common] == dst_path[common]:
        common += 1
    for depth in range(common, 0, -1):  # deepest owner first
        owner = invariants.descend(container, src_path[:depth])
        if owner.is_op:
            continue
        ends = []
        for side, end, path in (("src", edge[0], src_path), ("dst", edge[1], dst_path)):
            rel = SELF if len(path) == depth else path[depth:]
            resolved = invariants.resolve_port(invariants.descend(owner, rel), end[1], side, rel is SELF)
            if resolved is None:
                break
            ends.append(_new(Endpoint, (rel, resolved[0])))
        if len(ends) == 2 and (ends[0], ends[1]) in invariants.own_edge_keys(owner):
            return Edge((src_path, ends[0][1]), (dst_path, ends[1][1]))
    return None


def buried_above(root: Container, path: tuple) -> set:
    """Keys of edges, in the frame of the container at ``path``, that a tombstone of one of
    its ancestors deletes."""
    found = set()
    node = root
    for depth in range(len(path)):
        for tomb in node.tombstones:
            lowered = lower(tomb, path[depth:])
            if lowered is not None:
                found.add(lowered.key)
        node = node.child(path[depth])
    return found


def live_tombstones(container: Container, children: Any, tombstones: Iterable[Edge]) -> list[Edge]:
    """The ``tombstones`` that still name an edge below ``children`` (the new children of
    ``container``): a rebuild that deleted or merged an edge drops the tombstones naming it."""
    probe = Container(container.type, container.name, inputs=container.inputs, outputs=container.outputs, children=children,
                      edges=(), tombstones=(), attrs=None, uid=container.uid, controls=container.controls)
    return [t for t in tombstones if find_buried(probe, t) is not None]


# -- rebuilding along a path -----------------------------------------------------------------


def _held(part: str) -> tuple[str, int | None]:
    """``("body", None)`` for ``"body"``, ``("branches", 1)`` for ``"branches[1]"``."""
    if part.endswith("]") and "[" in part:
        name, _, number = part[:-1].rpartition("[")
        if number.isdigit():
            return name, int(number)
    return part, None


def step(node: Container, part: str) -> Container:
    """The child called ``part``, or a subgraph held in the attribute ``part`` (ONNX bodies;
    ``name[i]`` for the i-th of a tuple of subgraphs)."""
    position = node._index.get(part)
    if position is not None:
        return node.children[position]
    name, number = _held(part)
    value = node.attrs.get(name)
    if number is not None and isinstance(value, tuple) and number < len(value):
        value = value[number]
    if isinstance(value, Container):
        return value
    raise PathError.at(node.name, f"a child or subgraph attribute of {node.name!r}", repr(part))


def at(root: Container, path: tuple, fn: Callable[[Container], Container], *, moved: Moved | None = None,
       prune: bool = False) -> Container:
    """``root`` with the descendant at ``path`` replaced by ``fn(descendant)``; only the
    containers on the path are rebuilt, every other subtree is shared.

    ``moved`` says where a path below the descendant went (fuse and unfuse move ops a level
    down or up): every ancestor's edges and tombstones that reach into it are re-pointed, as
    they are when ``fn`` renames the descendant.
    ``prune`` (implied by ``moved``) drops ancestors' tombstones whose edge no longer exists.

    >>> from amanda.containers.compose import chain
    >>> from amanda.containers.container import op
    >>> m = chain(op("Relu", "r", ["x"], ["y"]), op("Exp", "e", ["x"], ["y"]), name="m")
    >>> top = chain(m, op("Log", "l", ["x"], ["y"]))
    >>> new = at(top, ("m", "r"), lambda r: r.with_attrs(tag=1))
    >>> new.descendant("m/r").attrs["tag"], new.child("l") is top.child("l")
    (1, True)
    """
    trail = [root]
    for part in path:
        trail.append(step(trail[-1], part))
    current = fn(trail[-1])
    renamed = path[:-1] + (current.name,) if path and current.name is not None else path
    for depth in range(len(path) - 1, -1, -1):
        shift = _shifted(moved, path[depth + 1:], renamed[depth + 1:])
        current = with_child(trail[depth], path[depth], current, shift, prune)
    return current


def _shifted(moved: Moved | None, old: tuple, new: tuple) -> Moved | None:
    """How paths below an ancestor's child move when the descendant at ``old`` below that child
    is now at ``new`` and the paths below it move as ``moved`` says."""
    if not old or (moved is None and old == new):
        return moved
    n = len(old)

    def shift(p: tuple) -> Any:
        if p[:n] != old:
            return p
        return (*new, *(moved(p[n:]) if moved is not None and len(p) > n else p[n:]))

    return shift


def with_child(parent: Container, name: str, new: Container, moved: Moved | None = None,
               prune: bool = False) -> Container:
    """``parent`` with its child (or subgraph attribute) ``name`` replaced by ``new``; edges and
    tombstones naming the child follow a rename and, through ``moved``, paths below it that
    moved. Only what the change can break is checked again."""
    position = parent._index.get(name)
    if position is None:  # a subgraph held in an attribute
        attr, number = _held(name)
        if number is None:
            return parent.with_attrs(**{attr: new})
        held = list(parent.attrs[attr])
        held[number] = new
        return parent.with_attrs(**{attr: tuple(held)})
    if new is parent.children[position] and moved is None:
        return parent
    if new.name == name and moved is None and not prune:
        return _with_same_links(parent, position, name, new)
    prefix, target = (name,), (new.name,)

    def fix(end: Any) -> Any:
        inner = lower_end(end, prefix)
        if inner is None:
            return end
        if moved is not None and inner[0] is not SELF:
            return lift_end((moved(inner[0]), inner[1]), target)
        return lift_end(inner, target)

    children = parent.children.set(position, new)
    edges = [Edge(fix(e[0]), fix(e[1]), attrs=e[2]) for e in parent.edges]
    tombs = [Edge(fix(t[0]), fix(t[1])) for t in parent.tombstones]
    if tombs and (prune or moved is not None):
        tombs = live_tombstones(parent, children, tombs)
    if new.name == name and edges == list(parent.edges) and tombs == list(parent.tombstones):
        return _with_same_links(parent, position, name, new)
    return Container(parent.type, parent.name, inputs=parent.inputs, outputs=parent.outputs, children=children, edges=edges,
                     tombstones=tombs,
                     attrs=parent.attrs, uid=parent.uid, controls=parent.controls)


def _with_same_links(parent: Container, position: int, name: str, new: Container) -> Container:
    candidate = Container._trusted(
        parent.type, parent.name, parent.inputs, parent.outputs, parent.controls,
        parent.children.set(position, new), parent.edges, parent.tombstones,
        parent.attrs, parent.uid, parent._index,
    )
    inherit_edge_caches(candidate, parent)
    recheck_child(candidate, name)
    return candidate


def inherit_edge_caches(target: Container, source: Container) -> None:
    """Share the edge-derived caches of ``source`` (same edge vectors) with ``target``."""
    cache = source._cache
    if cache and target.edges is source.edges and target.tombstones is source.tombstones:
        shared = {k: cache[k] for k in EDGE_CACHES if k in cache}
        if shared:
            object.__setattr__(target, "_cache", shared)


def _touching(container: Container) -> dict:
    def build(c: Container) -> dict:
        table: dict[str, tuple[list[int], list[int]]] = {}
        for number, edge in enumerate(c.edges):
            for end in {edge[0][0][0] if edge[0][0] is not SELF else None, edge[1][0][0] if edge[1][0] is not SELF else None}:
                if end is not None:
                    table.setdefault(end, ([], []))[0].append(number)
        for number, tomb in enumerate(c.tombstones):
            for end in {tomb[0][0][0], tomb[1][0][0]}:
                table.setdefault(end, ([], []))[1].append(number)
        return table

    return container._cached("touching", build)


def recheck_child(container: Container, name: str) -> None:
    """Re-check the invariants that involve the child ``name`` after it changed."""
    edge_numbers, tomb_numbers = _touching(container).get(name, ((), ()))
    here = (container.name,) if container.name else ()
    problems: list[Problem] = []
    buried = invariants.tombstone_keys(container) if container.tombstones else frozenset()
    for number in edge_numbers:
        edge = container.edges[number]
        again = invariants.normalise_edge(container, edge, (*here, f"edges[{number}]"), problems)
        dst = edge[1]
        if again is None or dst[1] == CONTROL or dst[0] is SELF or len(dst[0]) < 2 or dst[0][0] != name:
            continue
        child = container.children[container._index[name]]
        for inner in () if child.is_op else invariants.live_producers(child, dst[0][1:], dst[1]):
            lifted = lift(inner, (name,))
            if lifted.key not in buried and invariants.phases_clash(lifted.phase, edge.phase):
                problems.append(Problem((*here, str(dst)), "at most one live data edge into an input port",
                                        f"{lifted[0]} and {edge[0]} both feed it", "tombstone the inner edge first"))
    for number in tomb_numbers:
        tomb = container.tombstones[number]
        if find_buried(container, tomb) is None:
            problems.append(Problem((*here, f"tombstones[{number}]"), "an edge of a descendant to delete",
                                    f"no edge {tomb[0]} -> {tomb[1]} below"))
    if problems:
        raise InvariantError(problems, f"replacing {name!r} in {container.name or container.type or 'container'}")
