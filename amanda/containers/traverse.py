"""Traversal: leaf ops in document order, every node with its effective attributes,
and leaf ops in topological order with opaque containers."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from amanda.containers.edge import SELF
from amanda.errors import CycleError

if TYPE_CHECKING:
    from amanda.containers.container import Container

__all__ = ["effective_attrs", "iter_ops", "sorted_ops", "walk"]


def iter_ops(container: Container) -> Iterator[Container]:
    """Every leaf op inside ``container`` in document order (itself if it is an op)."""
    stack = [container]
    while stack:
        node = stack.pop()
        if not node.children:
            yield node
        else:
            stack.extend(reversed(node.children))


def walk(container: Container) -> Iterator[tuple[tuple[str, ...], Container, Mapping[str, Any]]]:
    """``(path, node, effective_attrs)`` for the container and every descendant, pre-order.

    Effective attributes are the ancestors' attributes overlaid by the node's own,
    the nearest winning (docs/challenges.md, C6).

    >>> from amanda.containers.container import Container, op
    >>> g = Container("G", "g", children=[op("Dot", "d")], attrs={"debug": True})
    >>> [(p, dict(a)) for p, _, a in walk(g)]
    [((), {'debug': True}), (('d',), {'debug': True})]
    """
    root_attrs = MappingProxyType(dict(container.attrs))
    stack: list[tuple[tuple[str, ...], Container, Mapping[str, Any]]] = [((), container, root_attrs)]
    while stack:
        path, node, attrs = stack.pop()
        yield path, node, attrs
        for child in reversed(node.children):
            own = child.attrs
            inherited = MappingProxyType({**attrs, **own}) if own else attrs
            stack.append((path + (child.name,), child, inherited))


def effective_attrs(container: Container, path: Any = ()) -> Mapping[str, Any]:
    """Effective attributes of the descendant at ``path`` (ancestors' overlaid by its own)."""
    from amanda.containers.validate import resolve_path
    from amanda.errors import PathError

    resolved = resolve_path(container, path)
    if resolved is None:
        raise PathError.at(container.name, "an existing descendant path", repr(path))
    merged = dict(container.attrs)
    node = container
    for name in () if resolved is SELF else resolved:
        node = node.child(name)
        merged.update(node.attrs)
    return MappingProxyType(merged)


def sorted_ops(
    container: Container, skip: Callable[[Container], bool] | None = None
) -> Iterator[Container]:
    """Leaf ops in topological order; a container that ``skip`` accepts is yielded whole.

    Ties are broken by document order, so the result is deterministic.
    """
    from amanda.containers.flatten import flatten

    flat = flatten(container)
    if skip is None:
        ops = flat.ops
        for path in flat.topological_order():
            yield ops[path]
        return
    unit_of: dict[tuple, tuple] = {}
    units: dict[tuple, Container] = {}
    for path, node, _ in walk(container):
        if not path:
            continue
        owner = unit_of.get(path[:-1])
        if owner is not None:
            unit_of[path] = owner
        elif node.children and skip(node) or not node.children:
            unit_of[path] = path
            units[path] = node
    successors: dict[tuple, set] = {u: set() for u in units}
    indegree = dict.fromkeys(units, 0)
    for edge in flat.edges:
        a, b = edge[0][0], edge[1][0]
        if a is SELF or b is SELF:
            continue
        ua, ub = unit_of[a], unit_of[b]
        if ua != ub and ub not in successors[ua]:
            successors[ua].add(ub)
            indegree[ub] += 1
    rank = {u: i for i, u in enumerate(units)}
    ready = sorted((u for u, d in indegree.items() if d == 0), key=rank.__getitem__)
    done = 0
    import heapq

    heap = [(rank[u], u) for u in ready]
    heapq.heapify(heap)
    while heap:
        _, unit = heapq.heappop(heap)
        done += 1
        yield units[unit]
        for nxt in sorted(successors[unit], key=rank.__getitem__):
            indegree[nxt] -= 1
            if indegree[nxt] == 0:
                heapq.heappush(heap, (rank[nxt], nxt))
    if done != len(units):
        stuck = [u for u, d in indegree.items() if d > 0]
        raise CycleError(stuck)
