"""Pure updates with structural sharing: ``replace`` and ``with_attrs`` at paths or selections.

Replacing a descendant rebuilds only the containers on its path; every other subtree
is shared. Each rebuilt container re-checks exactly the invariants the change can
break (its edges and tombstones that reach into the replaced child), so an update
deep inside a model of N ops costs O(depth · log N).

>>> from amanda.containers.container import Container, op
>>> g = Container(children=[op("Relu", "r", ["x"], ["y"]), op("Exp", "e", ["x"], ["y"])],
...               edges=[("r:y", "e:x")])
>>> g2 = replace(g, "r", lambda old: old.with_attrs(debug=True))
>>> g2.child("r").attrs["debug"], g2.child("e") is g.child("e"), "debug" in g.child("r").attrs
(True, True, False)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from amanda.containers.checks import expect_container, shown
from amanda.containers.container import Container
from amanda.containers.edge import SELF, Edge
from amanda.containers.validate import (
    _find_buried,
    _lift,
    _normalise_edge,
    live_producers,
    phases_clash,
    resolve_path,
    tombstone_keys,
)
from amanda.errors import ArgumentError, InvariantError, PathError, Problem

__all__ = ["replace", "target_paths", "with_attrs", "with_child"]

# caches that depend only on a container's edges and tombstones, so a rebuilt
# container with the same edge vectors may share them
EDGE_CACHES = ("edge_keys", "tomb_keys", "dst_index", "touching")


def target_paths(container: Container, target: Any) -> list[tuple[str, ...]]:
    """Paths named by ``target``: a Selection (anything with ``.paths``), a path, or a list of paths."""
    expect_container(container, "container")
    if not isinstance(target, (str, int, tuple, list)) and not hasattr(target, "paths") or isinstance(target, bool):
        raise ArgumentError.at("target", "a path, a list of paths or a Selection", shown(target))
    if hasattr(target, "paths"):
        return [tuple(p) for p in target.paths]
    if isinstance(target, list):
        return [p for item in target for p in target_paths(container, item)]
    if isinstance(target, tuple) and all(isinstance(p, str) for p in target):
        node = container
        for part in target:
            node = _step(node, part)
        return [target]
    resolved = resolve_path(container, target)
    if resolved is None:
        raise PathError.at(container.name, "an existing descendant path", repr(target))
    return [() if resolved is SELF else resolved]


def _held(part: str) -> tuple[str, int | None]:
    """``("body", None)`` for ``"body"``, ``("branches", 1)`` for ``"branches[1]"``."""
    if part.endswith("]") and "[" in part:
        name, _, number = part[:-1].rpartition("[")
        if number.isdigit():
            return name, int(number)
    return part, None


def _step(node: Container, part: str) -> Container:
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


def replace(container: Container, target: Any, new: Container | Callable[[Container], Container]) -> Container:
    """A container where each target is replaced by ``new`` (or by ``new(old)``).

    Targets are handled deepest and last first, so replacing both a container and one
    of its descendants sees the replaced descendant. An update that changes nothing
    returns ``container`` itself.
    """
    if not isinstance(new, Container) and not callable(new):
        raise ArgumentError.at("new", "a Container or a function old -> Container", shown(new))
    result = container
    for path in sorted(set(target_paths(container, target)), key=_reverse_document_key):
        old = _descendant(result, path)
        replacement = new if isinstance(new, Container) else new(old)
        if not isinstance(replacement, Container):
            raise InvariantError([Problem(path, "a Container to put in place", type(replacement).__name__)])
        result = _replace_one(result, path, replacement)
    return result


def _reverse_document_key(path: tuple[str, ...]) -> Any:
    # descendants before their ancestors: only that order matters between targets
    return (-len(path), path)


def with_attrs(container: Container, target: Any, **attrs: Any) -> Container:
    """Attributes set on every target (a path, a list of paths, or a Selection)."""
    return replace(container, target, lambda node: node.with_attrs(**attrs))


def _descendant(root: Container, path: tuple[str, ...]) -> Container:
    node = root
    for part in path:
        node = _step(node, part)
    return node


def _replace_one(root: Container, path: tuple[str, ...], new: Container) -> Container:
    if not path:
        return new
    trail = [root]
    for part in path[:-1]:
        trail.append(_step(trail[-1], part))
    current = new
    for depth in range(len(path) - 1, -1, -1):
        current = with_child(trail[depth], path[depth], current)
    return current


def with_child(parent: Container, name: str, new: Container) -> Container:
    """``parent`` with its child (or subgraph attribute) ``name`` replaced by ``new``."""
    position = parent._index.get(name)
    if position is None:  # a subgraph held in an attribute
        attr, number = _held(name)
        if number is None:
            return parent.with_attrs(**{attr: new})
        held = list(parent.attrs[attr])
        held[number] = new
        return parent.with_attrs(**{attr: tuple(held)})
    old = parent.children[position]
    if new is old:
        return parent
    if new.name != name:
        return _renamed_child(parent, position, new)
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
    buried = tombstone_keys(container) if container.tombstones else frozenset()
    for number in edge_numbers:
        edge = container.edges[number]
        where = (*here, f"edges[{number}]")
        again = _normalise_edge(container, edge, where, problems)
        if again is None:
            continue
        dst = edge[1]
        if dst[1] == -1 or dst[0] is SELF or len(dst[0]) < 2 or dst[0][0] != name:
            continue
        child = container.children[container._index[name]]
        if child.is_op:
            continue
        for inner in live_producers(child, dst[0][1:], dst[1]):
            lifted = _lift(inner, (name,))
            if lifted.key not in buried and phases_clash(lifted.phase, edge.phase):
                problems.append(Problem((*here, str(dst)), "at most one live data edge into an input port",
                                        f"{lifted[0]} and {edge[0]} both feed it", "tombstone the inner edge first"))
    for number in tomb_numbers:
        tomb = container.tombstones[number]
        if _find_buried(container, tomb) is None:
            problems.append(Problem((*here, f"tombstones[{number}]"), "an edge of a descendant to delete",
                                    f"no edge {tomb[0]} -> {tomb[1]} below"))
    if problems:
        raise InvariantError(problems, f"replacing {name!r} in {container.name or container.type or 'container'}")


def _renamed_child(parent: Container, position: int, new: Container) -> Container:
    """A child that changed its name: references to the old name are rewritten at this level."""
    old_name = parent.children[position].name
    rename = {old_name: new.name}

    def moved(edge: Edge) -> Edge:
        ends = []
        for end in (edge[0], edge[1]):
            op = end[0]
            if op is not SELF and op[0] in rename:
                op = (rename[op[0]], *op[1:])
            ends.append((op, end[1]))
        return Edge(ends[0], ends[1], edge[2])

    children = list(parent.children)
    children[position] = new
    return Container(
        parent.type, parent.name, parent.inputs, parent.outputs, children,
        [moved(e) for e in parent.edges], [moved(t) for t in parent.tombstones],
        parent.attrs, parent.uid, parent.controls,
    )


