"""The module tree written back on ONNX export, in the exporters' own form.

Each node of an op inside a container is named by its scope path as TorchScript's exporter
names nodes (``/transformer/h.0/attn/c_attn/Gemm``) and carries the metadata torch's
torch.export-based exporter writes: ``pkg.torch.onnx.name_scopes`` (the qualified names from the
root down, then the op's own name) and ``pkg.torch.onnx.class_hierarchy`` (their classes, then
the op's). Initializers carry the same metadata, so a weight comes back to the container it was
in. What the torch forms cannot hold (container uids, types without a class path, other
attributes) goes in the graph metadata entry ``amanda.containers``. Importing the result with
``hierarchy="auto"`` gives the same tree (``docs/onnx.md``, "Module hierarchy").
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from amanda.containers.container import Container
from amanda.io.onnx.calls import FUNCTION_ATTR
from amanda.io.onnx.hierarchy import CLASS_HIERARCHY, NAME_SCOPES
from amanda.io.scope_names import parse_scope_list, relative_name, scope_list_text, unqualified

__all__ = ["LeafScope", "ScopeTable", "is_hierarchical", "scope_table"]

NAMESPACE_KEY = "namespace"  # the one-line form torch's exporter also writes


class LeafScope(NamedTuple):
    """What the export writes for one leaf: its node name (None: the usual one) and the
    metadata entries that say where it sits."""

    name: str | None
    metadata: dict[str, str]


class ScopeTable(NamedTuple):
    """Leaf path -> LeafScope, and the ``amanda.containers`` graph metadata value."""

    leaves: dict[tuple, LeafScope]
    containers: str


def _is_call(node: Container) -> bool:
    return FUNCTION_ATTR in node._attrs


def is_hierarchical(root: Container) -> bool:
    """Whether ``root`` holds a container that is not a call of an ONNX function (a module).

    >>> import amanda
    >>> relu = amanda.op("Relu", "r", ["X"], ["Y"])
    >>> is_hierarchical(amanda.Container(None, "g", children=[relu]))
    False
    >>> is_hierarchical(amanda.Container(None, "g", children=[amanda.Container("Block", "b", children=[relu])]))
    True
    """
    return any(child.children and not _is_call(child) for child in root.children)


class _Level(NamedTuple):
    qualified: str
    cls: str
    component: str  # this level's part of a scope-path node name


def _fits(parent: str, scope: Any, name: str) -> bool:
    """Whether ``scope`` is the qualified name of a container called ``name`` in the scope
    ``parent`` (its exporter name, or that name renamed with ``_``)."""
    if not isinstance(scope, str) or not scope:
        return False
    return name.rstrip("_") == relative_name(parent, scope).rstrip("_")


def _level(parent: _Level | None, node: Container) -> _Level:
    own = node._attrs
    stored = own.get("scope")
    name = node.name or ""
    outer = parent.qualified if parent is not None else ""
    if isinstance(stored, str) and _fits(outer, stored, name):
        scope = stored
    else:  # a container made or moved by an edit: named by its path
        separator = "/" if "/" in outer else "."
        scope = f"{outer}{separator}{name}" if outer else name
    cls = own.get("scope_class")
    if not isinstance(cls, str):
        cls = node.type or ""
    component = node.name or "" if "/" in scope else unqualified(scope)
    return _Level(scope, cls, component)


def _own_last(op: Container) -> tuple[str, str]:
    """The last entries of the op's lists: the names torch gave it (its fx node and aten
    target) where its metadata keeps them, else its name and type."""
    meta = op._attrs.get("metadata")
    name, cls = op.name or "", op.type or ""
    if meta is not None:
        names = parse_scope_list(meta.get(NAME_SCOPES) or "")
        classes = parse_scope_list(meta.get(CLASS_HIERARCHY) or "")
        if names:
            name = names[-1]
        if classes:
            cls = classes[-1]
    return name, cls


def _leaf(op: Container, levels: list[_Level], root_class: str, weight: bool) -> LeafScope:
    last, last_class = (op.name or "", op.type or "") if weight else _own_last(op)
    names = ["", *(level.qualified for level in levels), last]
    classes = [root_class, *(level.cls for level in levels), last_class]
    metadata = {NAME_SCOPES: scope_list_text(names), CLASS_HIERARCHY: scope_list_text(classes)}
    meta = op._attrs.get("metadata")
    if meta is not None and NAMESPACE_KEY in meta:
        metadata[NAMESPACE_KEY] = "/".join(f"{n}: {c}" for n, c in zip(names, classes))
    node_name = "/" + "/".join([*(level.component for level in levels), op.name or ""]) if levels else None
    return LeafScope(node_name, metadata)


def scope_table(root: Container) -> ScopeTable | None:
    """What the export of ``root`` writes about its tree, or None for a model without module
    containers (its export is unchanged)."""
    if not is_hierarchical(root):
        return None
    from amanda.io.document import encode_value

    root_class = root._attrs.get("scope_class")
    if not isinstance(root_class, str):
        root_class = root.type or ""
    leaves: dict[tuple, LeafScope] = {}
    saved: list[list[Any]] = []
    stack: list[tuple[tuple, Container, list[_Level]]] = [((), root, [])]
    while stack:
        path, node, levels = stack.pop()
        for child in reversed(node.children):
            here = (*path, child.name)
            if child.children and not _is_call(child):
                inner = [*levels, _level(levels[-1] if levels else None, child)]
                attrs = {k: v for k, v in child._attrs.items()}
                saved.append([[level.qualified for level in inner], child.uid, child.type,
                              encode_value(attrs)])
                stack.append((here, child, inner))
            else:
                weight = child.type == "Constant" and child._attrs.get("initializer") is True
                leaves[here] = _leaf(child, levels, root_class, weight)
    return ScopeTable(leaves, json.dumps(saved))


def scoped_metadata(own: Any, scope: LeafScope | None) -> Any:
    """The op's metadata with the scope entries of ``scope`` written over it."""
    if scope is None:
        return own
    return {**(dict(own) if own else {}), **scope.metadata}
