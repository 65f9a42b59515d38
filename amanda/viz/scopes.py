"""Name scopes: the module path an exporter writes into a flat graph's op names, used to draw a
level of thousands of sibling ops as a few groups.

Two spellings are read. A name with ``/`` is a scope path, TorchScript's and TensorFlow's
(``/blocks/blocks.3/attn/qkv/MatMul``, ``dense/kernel``): every part but the last is a scope.
Otherwise a dotted name is a parameter's qualified name as torch writes it
(``blocks.3.attn.qkv.weight``): every part but the last is a module, and a numeric part is an
element of the module before it, named as TorchScript names it (``blocks``, then ``blocks.3``).
Other names have no scope. Among siblings, a parameter goes to the scope path whose qualified
name is its module's: TorchScript writes a ``ModuleList``'s elements without the list
(``/transformer/h.0/attn``, qualified ``transformer.h.0.attn``) and a ``Sequential``'s with it
(``/features/features.10``, qualified ``features.10``), which a dotted name cannot tell apart
on its own.

>>> scope_of("/blocks/blocks.3/attn/qkv/MatMul"), scope_of("blocks.3.attn.qkv.weight")
(('blocks', 'blocks.3', 'attn', 'qkv'), ('blocks', 'blocks.3', 'attn', 'qkv'))
>>> scope_of("dense/kernel"), scope_of("Identity_7"), scope_of("features.0.0.weight")
(('dense',), (), ('features', 'features.0', 'features.0.0'))
>>> qualified(("features", "features.10", "block", "block.0")), qualified(("transformer", "h.0"))
('features.10.block.0', 'transformer.h.0')
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from amanda.containers.container import Container

__all__ = ["Scope", "ScopeKey", "group_by_scope", "qualified", "scope_of"]


def scope_of(name: Any) -> tuple[str, ...]:
    """The scopes a name lies in, outermost first (``()`` for none)."""
    if not isinstance(name, str):
        return ()
    if "/" in name:
        return tuple(part for part in name.split("/")[:-1] if part)
    return _dotted(name.split(".")[:-1], "")


def _dotted(parts: list[str], last: str) -> tuple[str, ...]:
    """Scopes of module-name parts; ``last`` is the scope they continue ('' for none)."""
    scopes: list[str] = []
    for part in parts:
        if not part:
            return ()  # not a qualified name (``a..b``, ``.x``)
        before = scopes[-1] if scopes else last
        scopes.append(f"{before}.{part}" if part.isdigit() and before else part)
    return tuple(scopes)


def qualified(scopes: tuple[str, ...]) -> str:
    """The module's qualified name (as torch's ``named_modules()``) of a TorchScript scope path:
    a part that extends the part before it (``features``, ``features.10``) replaces it."""
    name, prev = "", ""
    for part in scopes:
        if prev and part.startswith(prev + "."):
            name = name[: len(name) - len(prev)] + part
        else:
            name = f"{name}.{part}" if name else part
        prev = part
    return name


def _resolver(names: list[Any]) -> Any:
    """``scope_of`` for these siblings: a dotted name takes the scope path of its module."""
    known: dict[str, tuple[str, ...]] = {}
    for name in names:
        if isinstance(name, str) and "/" in name:
            scopes = scope_of(name)
            for k in range(len(scopes), 0, -1):
                key = qualified(scopes[:k])
                if key in known:
                    break  # and so are its prefixes (the first spelling of a module wins)
                known[key] = scopes[:k]

    def resolve(name: Any) -> tuple[str, ...]:
        if not known or not isinstance(name, str) or "/" in name:
            return scope_of(name)
        parts = name.split(".")[:-1]
        if not all(parts):
            return ()
        for k in range(len(parts), 0, -1):
            hit = known.get(".".join(parts[:k]))
            if hit is not None:
                return hit + _dotted(parts[k:], hit[-1])
        return scope_of(name)

    return resolve


class ScopeKey(NamedTuple):
    """A scope's segment in a drawing's paths; never equal to a child's name (a string)."""

    name: str


class Scope:
    """Sibling ops (and containers) that share a scope: drawn as one cluster, or one box."""

    __slots__ = ("children", "name")
    type = "scope"
    tombstones: tuple = ()

    def __init__(self, name: str, children: Sequence[Container | Scope]) -> None:
        self.name = name
        self.children = tuple(children)

    def __iter__(self) -> Iterator[Container]:
        """Every leaf op inside, as iterating a container yields them."""
        for child in self.children:
            yield from child

    def __repr__(self) -> str:
        return f"Scope({self.name!r}, {len(self.children)} children)"


def group_by_scope(children: Sequence[Container]) -> list[Container | Scope] | None:
    """``children`` with those that share a scope gathered into nested :class:`Scope` groups, in
    the order their first member appears; None when no two children share a scope. A group of
    one child is the child itself, and a group holding only one group merges with it
    (``model/dense``)."""
    tree: dict[str, Any] = {}  # scope -> (subtree, children list): insertion order is first appearance
    top: list[Any] = []
    resolve = _resolver([child.name for child in children])
    for child in children:
        scopes = resolve(child.name)
        items, level = top, tree
        for scope in scopes:
            if scope not in level:
                entry: list[Any] = []
                level[scope] = ({}, entry)
                items.append((scope, level[scope]))
            level, items = level[scope][0], level[scope][1]
        items.append(child)
    grouped = [_build(item) for item in top]
    if not any(isinstance(g, Scope) for g in grouped):
        return None
    return grouped


def _build(item: Any) -> Any:
    """A Scope from ``(name, (subtree, items))``, or a child as it is (iteratively: scopes nest
    as deep as names do)."""
    if not isinstance(item, tuple):
        return item
    done: dict[int, Any] = {}
    stack = [(item, False)]
    while stack:
        (name, (_, items)), expanded = stack.pop()
        if not expanded:
            stack.append(((name, (None, items)), True))
            stack.extend((i, False) for i in items if isinstance(i, tuple))
            continue
        kids = [done.pop(id(i[1][1])) if isinstance(i, tuple) else i for i in items]
        if len(kids) == 1:
            only = kids[0]
            done[id(items)] = Scope(f"{name}/{only.name}", only.children) if isinstance(only, Scope) else only
        else:
            done[id(items)] = Scope(name, kids)
    return done[id(item[1][1])]
