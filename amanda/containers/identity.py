"""Structural identity of containers: a hash and an equality that ignore ``uid``.

Both walk the tree without recursion, so a container nested thousands of levels deep
compares and hashes like any other. Hashes are cached on the (immutable) containers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from amanda.containers.values import attrs_equal, attrs_hash

if TYPE_CHECKING:
    from amanda.containers.container import Container

__all__ = ["same_content", "structural_hash", "structurally_equal"]

_set = object.__setattr__


def _own_hash(node: Container, child_hashes: tuple[int, ...]) -> int:
    return hash(
        (
            node.type,
            node.name,
            node.inputs,
            node.outputs,
            node.controls,
            child_hashes,
            tuple(node.edges),
            tuple(node.tombstones),
            attrs_hash(node._attrs),
        )
    )


def structural_hash(root: Container) -> int:
    # iterative post-order: deep nesting must not hit the recursion limit
    stack: list[tuple[Container, bool]] = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if node._hash is not None:
            continue
        if expanded or not node.children:
            value = _own_hash(node, tuple(c._hash for c in node.children))
            _set(node, "_hash", value)
            continue
        stack.append((node, True))
        stack.extend((c, False) for c in node.children if c._hash is None)
    return root._hash  # type: ignore[return-value]


def structurally_equal(a: Container, b: Container) -> bool:
    if hash(a) != hash(b):  # cheap, and cached for next time
        return False
    pairs = [(a, b)]
    while pairs:
        x, y = pairs.pop()
        if x is y:
            continue
        if x.name != y.name or not _own_fields_equal(x, y):
            return False
        pairs.extend(zip(x.children, y.children))
    return True


def _own_fields_equal(x: Container, y: Container) -> bool:
    """Every own field but the name equal (children compared by count only)."""
    return not (
        x.type != y.type
        or x.inputs != y.inputs
        or x.outputs != y.outputs
        or x.controls != y.controls
        or len(x.children) != len(y.children)
        or list(x.edges) != list(y.edges)
        or list(x.tombstones) != list(y.tombstones)
        or not attrs_equal(x._attrs, y._attrs)
    )


def same_content(a: Container, b: Container) -> bool:
    """Whether ``a`` and ``b`` are structurally equal apart from their own names: one container
    placed twice (a layer applied twice is renamed ``dense_1``), or a weight tied under another
    name. Like structural equality, it ignores uids."""
    if a is b:
        return True
    if a.name == b.name:
        return structurally_equal(a, b)
    return _own_fields_equal(a, b) and all(structurally_equal(x, y) for x, y in zip(a.children, b.children))
