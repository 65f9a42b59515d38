"""The module tree of an exported model, rebuilt on ONNX import (``docs/onnx.md``, "Module
hierarchy").

Exporters record which module produced each node: torch's torch.export-based exporter in node
metadata (``pkg.torch.onnx.name_scopes``, the qualified names from the root down, and
``pkg.torch.onnx.class_hierarchy``, their classes), TorchScript's exporter and TensorFlow in
scope-path node names (``/transformer/h.0/attn/Gemm``, ``dense/MatMul``). Each scope becomes a
container named by its name relative to its caller, typed by its class's short name where the
export records it, with ``scope`` (the qualified name) and ``scope_class`` (the full class path)
in its attributes. Ops sit in the container of the innermost scope that produced them, weights
in their owner's (see :func:`place_weights`), ops without a scope with their neighbours.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from amanda.containers.container import Container
from amanda.errors import ArgumentError, FormatError
from amanda.io.nest import Group, lowest_common, nest
from amanda.io.scope_names import parse_scope_list, qualify, relative_name, repeat_base, split_node_name

__all__ = ["CLASS_HIERARCHY", "CONTAINERS_KEY", "HIERARCHY_MODES", "NAME_SCOPES", "check_hierarchy",
           "nest_graph"]

NAME_SCOPES = "pkg.torch.onnx.name_scopes"
CLASS_HIERARCHY = "pkg.torch.onnx.class_hierarchy"
CONTAINERS_KEY = "amanda.containers"  # graph metadata: uids, types and attrs of the containers
HIERARCHY_MODES = ("auto", True, False, "metadata", "names")

Chain = list  # [(qualified name, class path or None), ...] from the root's child down


def check_hierarchy(hierarchy: Any) -> Any:
    """``hierarchy`` if it is one of :data:`HIERARCHY_MODES`, else ArgumentError.

    >>> check_hierarchy("names")
    'names'
    >>> check_hierarchy("name")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    amanda.errors.ArgumentError: at hierarchy: expected one of 'auto', True, ... (did you mean 'names'?), found 'name'
    """
    if any(hierarchy is mode or (type(hierarchy) is str and hierarchy == mode) for mode in HIERARCHY_MODES):
        return hierarchy
    from amanda.namespaces.schema import suggest

    hint = suggest(hierarchy, [m for m in HIERARCHY_MODES if isinstance(m, str)]) if isinstance(hierarchy, str) else ""
    raise ArgumentError.at("hierarchy", "one of " + ", ".join(map(repr, HIERARCHY_MODES)) + hint, repr(hierarchy))


def _metadata(op: Container) -> Any:
    return op._attrs.get("metadata")


def _scan(ops: list[Container]) -> tuple[bool, bool]:
    """Whether any op carries torch's scope metadata, and whether any is scope-path named."""
    meta = names = False
    for op in ops:
        found = _metadata(op)
        if found is not None and NAME_SCOPES in found:
            meta = True
            break
        names = names or "/" in op.name
    return meta, names


def _from_metadata(op: Container) -> tuple[Chain, str | None, str] | None:
    """The scope chain torch's metadata gives an op, the root's class and the op's own last
    entry, or None."""
    found = _metadata(op)
    text = found.get(NAME_SCOPES) if found is not None else None
    names = parse_scope_list(text) if text is not None else None
    if not names or len(names) < 2 or names[0] != "":
        return None  # torch writes [node name] alone where it knew no module
    text = found.get(CLASS_HIERARCHY)
    classes = parse_scope_list(text) if text is not None else None
    if classes is None or len(classes) != len(names):
        classes = [None] * len(names)
    return list(zip(names[1:-1], classes[1:-1])), classes[0] or None, names[-1]


class _Names:
    """Scope chains from scope-path node names (TorchScript's ``/a/b.0/Op``, TensorFlow's
    ``a/b/op``), with TorchScript's repeated calls (``act_1``) merged into their module."""

    def __init__(self, ops: list[Container], weights: set[str]) -> None:
        self.split: dict[str, tuple[tuple[str, ...], str, bool]] = {}
        paths: set[tuple[str, ...]] = set()
        for op in ops:
            found = split_node_name(op.name)
            if found is not None:
                self.split[op.name] = (*found, op.name.startswith("/"))
                for i in range(1, len(found[0]) + 1):
                    paths.add(found[0][:i])
        self.paths, self.weights = paths, weights

    def chain(self, op: Container) -> tuple[Chain, str] | None:
        found = self.split.get(op.name)
        if found is None:
            return None
        components, leaf, torch_style = found
        chain: Chain = []
        parent, raw = "", ()
        for component in components:
            if torch_style:
                base = repeat_base(component)
                if base is not None and (*raw, base) in self.paths and not self._genuine(parent, component):
                    component = base
                raw = (*raw, component)
                parent = qualify(parent, component)
            else:
                parent = f"{parent}/{component}" if parent else component
            chain.append((parent, None))
        return chain, leaf

    def _genuine(self, parent: str, component: str) -> bool:
        """Whether a weight names ``component`` as a module (``conv_1.weight``): then it is one,
        not a second call of ``conv``."""
        prefix = qualify(parent, component) + "."
        return any(w.startswith(prefix) for w in self.weights)


def _group(root: Group, chain: Chain) -> Group:
    group = root
    for qualified, cls in chain:
        found = group.groups.get(qualified)
        if found is None:
            attrs: dict[str, Any] = {"scope": qualified}
            short = None
            if cls:
                short = cls.rsplit(".", 1)[-1] or None
                if "." in cls:
                    attrs["scope_class"] = cls
            parent_scope = group.attrs.get("scope", "")
            found = group.child(qualified, type=short, attrs=attrs)
            found.name = relative_name(parent_scope, qualified)
        group = found
    return group


_SCOPE_KEYS = (NAME_SCOPES, CLASS_HIERARCHY, "namespace")


def _without_scope(op: Container) -> Container:
    """``op`` without the scope entries of its metadata: the tree holds them now, and the
    export writes them again from the tree (so a model loads, dumps and loads equal)."""
    attrs = op._attrs
    meta = attrs["metadata"]
    kept = {k: v for k, v in meta.items() if k not in _SCOPE_KEYS}
    attrs = attrs.set("metadata", kept) if kept else attrs.remove("metadata")
    return Container._trusted(op.type, op.name, op.inputs, op.outputs, op.controls, op.children,
                              op.edges, op.tombstones, attrs, op.uid, op._index)


def _weight_names(children: list[Container]) -> list[str]:
    return [op.name for op in children if op.type == "Constant" and op._attrs.get("initializer") is True]


def place_weights(weights: list[str], users: Mapping[str, list[Group]], root: Group,
                  by_scope: Mapping[str, Group], separator: str) -> dict[str, Group]:
    """Where each weight goes: the container of the module its name says owns it
    (``transformer.h.0.ln_1.weight`` -> ``transformer.h.0.ln_1``) when every op that reads it
    lies inside that container; otherwise (a tied, shared or folded weight, or a name that names
    no module: ``val_3``, ``onnx::MatMul_5``) the lowest container that holds all its readers;
    a weight no op reads stays with its owner, or in the root."""
    placed: dict[str, Group] = {}
    for name in weights:
        owner = by_scope.get(name.rsplit(separator, 1)[0]) if separator in name else None
        readers = users.get(name) or []
        if owner is not None and lowest_common([owner, *readers], root) is owner:
            placed[name] = owner
        else:
            placed[name] = lowest_common(readers, owner or root)
    return placed


def _apply_saved(root: Group, info: dict, prefix: str) -> None:
    """Types, attributes and uids amanda saved for its containers (graph metadata
    ``amanda.containers``), over what the scopes say."""
    text = (info.get("metadata_props") or {}).pop(CONTAINERS_KEY, None)
    if not info.get("metadata_props"):
        info.pop("metadata_props", None)
    if text is None:
        return
    from amanda.io.document import decode_value

    try:
        entries = json.loads(text)
        for keys, uid, kind, attrs in entries:
            group: Group | None = root
            for key in keys:
                group = group.groups.get(key) if group is not None else None
            if group is not None:
                group.uid, group.type = uid, kind
                group.attrs = dict(decode_value(attrs, (CONTAINERS_KEY,)))
    except (ValueError, TypeError) as exc:
        raise FormatError(f"{prefix}graph metadata {CONTAINERS_KEY!r} is not what amanda writes: {exc}",
                          path=CONTAINERS_KEY, expected="JSON written by amanda", found=text[:60]) from None


def _neighbours(edges: list, wanted: set[str]) -> dict[str, list[str]]:
    """The ops each op of ``wanted`` reads from or feeds (by flat edges between ops)."""
    found: dict[str, list[str]] = {}
    for edge in edges:
        src, dst = edge[0][0], edge[1][0]
        if type(src) is tuple and type(dst) is tuple:
            if src[0] in wanted:
                found.setdefault(src[0], []).append(dst[0])
            if dst[0] in wanted:
                found.setdefault(dst[0], []).append(src[0])
    return found


def _mode(hierarchy: Any, ops: list[Container], prefix: str) -> str | None:
    meta, names = _scan(ops)
    if hierarchy == "metadata" and not meta:
        raise FormatError(f"{prefix}hierarchy='metadata' but no node carries {NAME_SCOPES!r}",
                          path="graph", expected=f"nodes with {NAME_SCOPES} metadata", found="none")
    if hierarchy == "names" and not names:
        raise FormatError(f"{prefix}hierarchy='names' but no node has a scope-path name (a/b/op)",
                          path="graph", expected="scope-path node names", found="none")
    if hierarchy in ("metadata", "names"):
        return hierarchy
    return "metadata" if meta else "names" if names else None


def nest_graph(fields: dict[str, Any], hierarchy: Any = "auto", prefix: str = "") -> dict[str, Any]:
    """The main graph's container fields (as the ONNX reader makes them) with its ops moved
    into the containers of the scopes that produced them; unchanged for ``hierarchy=False`` or
    a graph without scope information."""
    check_hierarchy(hierarchy)
    if hierarchy is False:
        return fields
    children: list[Container] = fields["children"]
    weights = _weight_names(children)
    weight_set = set(weights)
    ops = [op for op in children if op.name not in weight_set]
    mode = _mode(hierarchy, ops, prefix)
    if mode is None:
        return fields
    root = Group(None, fields["name"] or "")
    names = _Names(children, weight_set) if mode == "names" else None
    torch_style = mode == "metadata" or any(style for _, _, style in (names.split.values() if names else ()))
    separator = "." if torch_style else "/"
    place: dict[str, Group] = {}
    leaf_names: dict[str, str] = {}
    unscoped: list[str] = []
    stripped: dict[str, Container] = {}
    root_class = None
    for op in [*ops, *(op for op in children if op.name in weight_set)]:
        weight = op.name in weight_set
        if names is not None:
            found = names.chain(op)
            if found is None:
                # TorchScript names every op of a module "/..."; one without is exporter-made.
                # In a TensorFlow-style graph, a name without "/" is an op of the root.
                if not weight and torch_style:
                    unscoped.append(op.name)
                elif not weight:
                    place[op.name] = root
                continue
            chain, leaf_names[op.name] = found
        else:
            meta = _from_metadata(op)
            if meta is None:
                if not weight:
                    unscoped.append(op.name)
                continue
            chain, cls, last = meta
            root_class = root_class or cls
            # amanda writes the leaf's own name last; torch writes its fx node's ("linear" for
            # node "node_linear"), which names the op only when the node name ends with it
            leaf_names[op.name] = last if weight or op.name.endswith("/" + last) else op.name
            stripped[op.name] = _without_scope(op)
        place[op.name] = _group(root, chain)
    _place_unscoped(unscoped, fields["edges"], place, root)
    _place_weights(weights, fields["edges"], place, leaf_names, root, separator)
    _apply_saved(root, fields["info"], prefix)
    children = [stripped.get(op.name, op) for op in children]
    kids, edges = nest(children, fields["edges"], place, root, graph=fields["name"],
                       weights=weights, leaf_names=leaf_names)
    out = dict(fields, children=kids, edges=edges)
    if root_class:
        out["type"] = root_class.rsplit(".", 1)[-1] or None
        if "." in root_class:
            out["extra"] = {"scope_class": root_class, **fields["extra"]}
    return out


def _place_unscoped(unscoped: list[str], edges: list, place: dict[str, Group], root: Group) -> None:
    """An op without a scope (exporter-made: ``Constant_29``, a Split the optimizer added)
    goes to the lowest container holding the ops it reads from and feeds."""
    if not unscoped:
        return
    neighbours = _neighbours(edges, set(unscoped))
    for name in unscoped:
        near = [place[n] for n in neighbours.get(name, ()) if n in place]
        place[name] = lowest_common(near, root)


def _place_weights(weights: list[str], edges: list, place: dict[str, Group],
                   leaf_names: dict[str, str], root: Group, separator: str) -> None:
    todo = [w for w in weights if w not in place]
    if not todo:
        return
    wanted = set(todo)
    users: dict[str, list[Group]] = {}
    for edge in edges:
        src, dst = edge[0][0], edge[1][0]
        if type(src) is tuple and src[0] in wanted:
            users.setdefault(src[0], []).append(place.get(dst[0], root) if type(dst) is tuple else root)
    by_scope: dict[str, Group] = {}
    stack = [root]
    while stack:
        group = stack.pop()
        for child in group.groups.values():
            by_scope.setdefault(child.key, child)
            stack.append(child)
    for name, group in place_weights(todo, users, root, by_scope, separator).items():
        place[name] = group
        scope = group.attrs.get("scope")
        leaf_names[name] = relative_name(scope, name, separator) if scope else name
