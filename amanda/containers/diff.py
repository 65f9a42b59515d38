"""Structural diff of two containers: what was added, removed or changed, by path.

Subtrees the two models share (the same object, as every edit leaves untouched parts) or that
are structurally equal are skipped whole, so diffing an edit of a large model costs in
proportion to what the edit touched.

>>> import amanda
>>> a = amanda.chain(amanda.op("Relu", "r", ["x"], ["y"]), inputs=["x"], outputs=["y"], name="m")
>>> b = amanda.with_attrs(a, "r", debug=True)
>>> print(diff(a, b))
~ r: attribute debug: (absent) -> True
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

from amanda.containers.records import Path
from amanda.containers.values import attrs_equal
from amanda.errors import ArgumentError, format_path

if TYPE_CHECKING:
    from amanda.containers.container import Container

__all__ = ["Change", "Diff", "diff"]


class Change(NamedTuple):
    """One difference: ``kind`` is ``added``, ``removed`` or ``changed``; ``what`` says which
    part (``node``, ``attribute``, ``type``, ``inputs``, ``outputs``, ``controls``, ``edge``,
    ``tombstone``); ``detail`` describes it."""

    kind: str
    path: Path
    what: str
    detail: str

    def __str__(self) -> str:
        mark = {"added": "+", "removed": "-", "changed": "~"}[self.kind]
        return f"{mark} {format_path(self.path)}: {self.detail}"


class Diff(tuple):
    """The changes from one container to another (a tuple of Change), parents before children."""

    __slots__ = ()

    def __str__(self) -> str:
        return "\n".join(str(c) for c in self) if self else "(no differences)"

    def of_kind(self, kind: str) -> tuple[Change, ...]:
        """The changes of one kind (``added``, ``removed`` or ``changed``)."""
        return tuple(c for c in self if c.kind == kind)


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _edge_text(edge: Any) -> str:
    def end(e: Any) -> str:
        from amanda.containers.edge import SELF

        op = "SELF" if e[0] is SELF else "/".join(str(p) for p in e[0])
        return f"{op}:{e[1]}"

    return f"{end(edge[0])} -> {end(edge[1])}"


def _node_changes(path: Path, a: Container, b: Container) -> Iterator[Change]:
    if a.type != b.type:
        yield Change("changed", path, "type", f"type {a.type} -> {b.type}")
    for field in ("inputs", "outputs", "controls"):
        old, new = getattr(a, field), getattr(b, field)
        if old != new:
            yield Change("changed", path, field,
                         f"{field} ({', '.join(p.name for p in old)}) -> ({', '.join(p.name for p in new)})")
    if not attrs_equal(a.attrs, b.attrs):
        for key in sorted(set(a.attrs) | set(b.attrs)):
            old, new = a.attrs.get(key, _ABSENT), b.attrs.get(key, _ABSENT)
            if old is _ABSENT or new is _ABSENT or not attrs_equal({key: old}, {key: new}):
                shown = [("(absent)" if v is _ABSENT else _show(v)) for v in (old, new)]
                yield Change("changed", path, "attribute", f"attribute {key}: {shown[0]} -> {shown[1]}")
    for field, label in (("edges", "edge"), ("tombstones", "tombstone")):
        old_set, new_set = list(getattr(a, field)), list(getattr(b, field))
        for edge in old_set:
            if edge not in new_set:
                yield Change("removed", path, label, f"{label} {_edge_text(edge)}")
        for edge in new_set:
            if edge not in old_set:
                yield Change("added", path, label, f"{label} {_edge_text(edge)}")


_ABSENT = object()


def diff(a: Container, b: Container) -> Diff:
    """The structural changes that turn ``a`` into ``b``, by path (children matched by name).

    Shared or equal subtrees are skipped; ``uid``s are ignored, as ``==`` ignores them.
    """
    from amanda.containers.container import Container

    for label, value in (("a", a), ("b", b)):
        if not isinstance(value, Container):
            raise ArgumentError.at(label, "a Container", type(value).__name__)
    changes: list[Change] = []
    stack: list[tuple[Path, Container, Container]] = [((), a, b)]
    while stack:
        path, x, y = stack.pop()
        if x is y or x == y:
            continue
        changes.extend(_node_changes(path, x, y))
        names_x = [c.name for c in x.children]
        names_y = {c.name for c in y.children}
        pending = []
        for child in x.children:
            if child.name not in names_y:
                changes.append(Change("removed", path + (child.name,), "node", f"removed {child.type}"))
            else:
                pending.append((path + (child.name,), child, y.child(child.name)))
        for child in y.children:
            if child.name not in names_x:
                changes.append(Change("added", path + (child.name,), "node", f"added {child.type}"))
        stack.extend(reversed(pending))
    return Diff(changes)
