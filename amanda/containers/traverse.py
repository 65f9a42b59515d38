"""Traversal: leaf ops in document order, every node with its effective attributes,
and leaf ops in topological order with opaque containers."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from amanda.containers.arguments import brief, expect_container
from amanda.containers.edge import SELF
from amanda.containers.records import Path
from amanda.errors import ArgumentError

if TYPE_CHECKING:
    from amanda.containers.container import Container

__all__ = ["effective_attrs", "iter_ops", "sorted_ops", "walk"]


def iter_ops(container: Container) -> Iterator[Container]:
    """Every leaf op inside ``container`` in document order (itself if it is an op)."""
    expect_container(container, "container")
    return _leaves(container)


def _leaves(container: Container) -> Iterator[Container]:
    stack = [container]
    while stack:
        node = stack.pop()
        if node.is_op:
            yield node
        else:
            stack.extend(reversed(node.children))


def walk(container: Container) -> Iterator[tuple[Path, Container, Mapping[str, Any]]]:
    """``(path, node, effective_attrs)`` for the container and every descendant, pre-order.

    Effective attributes are the ancestors' attributes overlaid by the node's own,
    the nearest winning (docs/challenges.md, C6).

    >>> from amanda.containers.container import Container, op
    >>> g = Container("G", "g", children=[op("Dot", "d")], attrs={"debug": True})
    >>> [(p, dict(a)) for p, _, a in walk(g)]
    [((), {'debug': True}), (('d',), {'debug': True})]
    """
    expect_container(container, "container")
    return _walk(container)


def _walk(container: Container) -> Iterator[tuple[Path, Container, Mapping[str, Any]]]:
    root_attrs = MappingProxyType(dict(container.attrs))
    stack: list[tuple[Path, Container, Mapping[str, Any]]] = [((), container, root_attrs)]
    while stack:
        path, node, attrs = stack.pop()
        yield path, node, attrs
        for child in reversed(node.children):
            own = child.attrs
            inherited = MappingProxyType({**attrs, **own}) if own else attrs
            stack.append((path + (child.name,), child, inherited))


def effective_attrs(container: Container, path: Any = ()) -> Mapping[str, Any]:
    """Effective attributes of the descendant at ``path`` (ancestors' overlaid by its own)."""
    from amanda.containers.invariants import resolve_path
    from amanda.errors import PathError

    expect_container(container, "container")
    resolved = resolve_path(container, path)
    if resolved is None:
        raise PathError.at(container.name, "an existing descendant path", brief(path))
    merged = dict(container.attrs)
    node = container
    for name in () if resolved is SELF else resolved:
        node = node.child(name)
        merged.update(node.attrs)
    return MappingProxyType(merged)


def sorted_ops(
    container: Container,
    skip: Callable[[Container], bool] | None = None,
) -> Iterator[Container]:
    """Leaf ops in topological order; a container that ``skip`` accepts is yielded whole.

    Ties are broken by document order (the one sort of :mod:`amanda.containers.order`), so
    ``sorted()`` and ``sorted(skip=...)`` with a ``skip`` that accepts nothing agree.
    """
    from amanda.containers.arguments import shown
    from amanda.containers.flatten import flatten
    from amanda.containers.view import View

    expect_container(container, "container")
    if skip is not None and not callable(skip):
        raise ArgumentError.at("skip", "a function Container -> bool, or None", shown(skip))

    if skip is None:
        flat = flatten(container)
        ops = flat.ops
        return iter([ops[path] for path in flat.topological_order()])
    view = View(container, opened=lambda path, node: not skip(node))
    units = view.units
    return iter([units[u] for u in view.order()])
