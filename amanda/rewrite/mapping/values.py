"""Following a value across container boundaries while a level is converted.

The driver converts one level at a time, but an importer that keeps name scopes puts a ``Const``
in one container and the op reading it in another. :func:`producer` answers where the value
feeding an input comes from, up through the level's input ports into the enclosing levels (the
driver's scopes, or plain containers) and down through the output ports of nested containers,
so that ``Match.constant_input`` reads a constant wherever the importer put it, and
:func:`far_producer` lets a pattern bind an op of another level (a :class:`Far` key).

>>> from amanda import Container, op
>>> inner = Container(None, "scope", outputs=["c"], children=[op("Const", "k", [], ["output"])],
...                   edges=[("k:output", "scope:c")])
>>> g = Container(None, "g", children=[inner, op("Mean", "m", ["input", "axes"], ["output"])],
...               edges=[("scope:c", "m:axes")])
>>> level, name, port = producer(Level(g, None), "m", "axes")
>>> name, port, level.container.name
('k', 'output', 'scope')
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from amanda.containers.container import Container
from amanda.containers.edge import SELF
from amanda.rewrite.mapping.scope import end_name

__all__ = ["Far", "Level", "far_producer", "producer"]


class Level:
    """A plain container met while following a value (the level being converted is a ``Scope``,
    which answers the same: ``container``, ``ops``, ``producers`` and ``parent``)."""

    def __init__(self, container: Container, parent: Any, path: tuple[str, ...] | None = None) -> None:
        self.container = container
        self.parent = parent
        self.path = path if path is not None else (*parent.path, container.name) if parent is not None else ()
        self.ops = {child.name: child for child in container.children}
        self._into: dict[tuple[Any, Any], list[tuple[Any, Any]]] | None = None
        self._nested: dict[str | None, Level] = {}

    def producers(self, name: str | None, port: Any) -> list[tuple[Any, Any]]:
        """``(op name, None for SELF or a path, port)`` of each edge into input ``port`` of child
        ``name`` (None: into the container's own output ``port``)."""
        if self._into is None:  # indexed once: a level is asked again for every value through it
            self._into = {}
            for e in self.container.edges:
                if e.dst.op is SELF or len(e.dst.op) == 1:
                    self._into.setdefault((end_name(e.dst), e.dst.port), []).append((end_name(e.src), e.src.port))
        return self._into.get((name, port), [])

    def nested(self, child: Container) -> Level:
        """The level of the nested container ``child`` of this one (made once)."""
        found = self._nested.get(child.name)
        if found is None or found.container is not child:
            found = self._nested[child.name] = Level(child, self)
        return found


def producer(level: Any, name: str | None, port: Any, depth: int = 32) -> tuple[Any, str, Any] | None:
    """``(level, op name, output port)`` of the leaf op whose value feeds input ``port`` of child
    ``name`` of ``level`` (None: the level's own output ``port``), followed through container
    ports; None when nothing or several edges feed it, or after ``depth`` boundaries."""
    fed = level.producers(name, port)
    if len(fed) != 1 or depth <= 0:
        return None
    src, out = fed[0]
    if src is None:  # the level's own input: fed from the enclosing level
        parent = level.parent
        return None if parent is None else producer(parent, level.container.name, out, depth - 1)
    path = src if isinstance(src, tuple) else (src,)
    for step in path[:-1]:
        child = level.ops.get(step)
        if child is None or not child.children:
            return None
        level = level.nested(child) if isinstance(level, Level) else Level(child, level)
    child = level.ops.get(path[-1])
    if child is None:
        return None
    if not child.children:
        return level, path[-1], out
    return producer(level.nested(child) if isinstance(level, Level) else Level(child, level), None, out, depth - 1)


@dataclass(frozen=True, slots=True)
class Far:
    """A pattern's binding to a leaf op of another level than the one being converted: its
    ``path`` from the root, the ``op`` as the source model has it, and its ``namespace``.
    Such an op is read by the match, never changed by its replacement (its own level's rules
    convert it, computing the same value)."""

    path: tuple[str, ...]
    op: Container = field(compare=False)
    namespace: str | None = field(compare=False, default=None)


def _original(scope: Any) -> Level:
    """The source model's container at ``scope``'s level, with its enclosing ones (made once per scope)."""
    if scope.source_level is None:
        parent = None if scope.parent is None else _original(scope.parent)
        scope.source_level = Level(scope.container, parent, tuple(scope.path))
    return scope.source_level  # type: ignore[no-any-return]


def far_producer(scope: Any, name: str, port: Any) -> tuple[Far, str] | None:
    """``(op, output port)`` of the leaf op of another level whose value feeds input ``port`` of child ``name`` of the
    level being converted (``scope``), when a nested container's output or the level's own input
    feeds it; followed through container ports in the source model, so the op is found as
    imported. None for a sibling leaf op, an unfed or doubly fed port, or a port a rule added."""
    fed = scope.producers(name, port)
    if len(fed) != 1 or not isinstance(fed[0][0], (str, type(None))):
        return None
    src, out = fed[0]
    here = _original(scope)
    if src is None:
        found = None if here.parent is None else producer(here.parent, scope.container.name, out)
    else:
        child = here.ops.get(src)
        if child is None or not child.children or scope.ops.get(src) is None or not scope.ops[src].children:
            return None
        found = producer(here.nested(child), None, out)
    if found is None:
        return None
    level, leaf, out = found
    op = level.ops[leaf]
    return Far((*level.path, leaf), op, op.attrs.get("namespace", scope.old_namespace)), out
