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

The reader hands over the scope metadata it took out of the nodes (:func:`take_scope`): the
tree holds it now, and the export writes it again from the tree.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from itertools import compress
from operator import itemgetter
from typing import Any

from amanda.containers.arguments import check_names
from amanda.containers.container import Container
from amanda.errors import ArgumentError, FormatError
from amanda.io.nest_levels import Chain, common_chain, nest_levels
from amanda.io.onnx.pending import PendingOp
from amanda.io.scope_names import parse_scope_list, qualify, relative_name, repeat_base

__all__ = ["CLASS_HIERARCHY", "CONTAINERS_KEY", "HIERARCHY_MODES", "NAME_SCOPES", "check_hierarchy",
           "nest_graph", "place_weights", "scope_class", "takes_scopes", "take_scope",
           "take_scope_only"]

NAME_SCOPES = "pkg.torch.onnx.name_scopes"
CLASS_HIERARCHY = "pkg.torch.onnx.class_hierarchy"
NAMESPACE = "namespace"  # torch's one-line form of both, dropped with them
CONTAINERS_KEY = "amanda.containers"  # graph metadata: uids, types and attrs of the containers
HIERARCHY_MODES = ("auto", True, False, "metadata", "names")

ScopeTexts = dict  # op name -> (name_scopes text, class_hierarchy text or None)


def check_hierarchy(hierarchy: Any) -> Any:
    """``hierarchy`` if it is one of :data:`HIERARCHY_MODES`, else ArgumentError.

    >>> check_hierarchy("names")
    'names'
    >>> check_hierarchy("name")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    amanda.errors.ArgumentError: at hierarchy: expected one of 'auto', ... found 'name' (did you mean 'names'?)
    """
    if any(hierarchy is mode or (type(hierarchy) is str and hierarchy == mode) for mode in HIERARCHY_MODES):
        return hierarchy
    from amanda.namespaces.schema import suggest

    hint = suggest(hierarchy, [m for m in HIERARCHY_MODES if isinstance(m, str)]) if isinstance(hierarchy, str) else ""
    raise ArgumentError.at("hierarchy", "one of " + ", ".join(map(repr, HIERARCHY_MODES)), repr(hierarchy), hint)


def takes_scopes(hierarchy: Any) -> bool:
    """Whether the reader takes torch's scope metadata out of the nodes for ``hierarchy``."""
    return hierarchy is True or hierarchy in ("auto", "metadata")


def take_scope(meta: dict[str, str], name: str, into: ScopeTexts) -> None:
    """Move torch's scope entries out of one node's plain metadata into ``into[name]``.

    >>> meta, found = {NAME_SCOPES: "['', 'a', 'r']", "k": "v"}, {}
    >>> take_scope(meta, "r", found); meta, found
    ({'k': 'v'}, {'r': ("['', 'a', 'r']", None)})
    """
    text = meta.pop(NAME_SCOPES, None)
    if text is not None:
        into[name] = (text, meta.pop(CLASS_HIERARCHY, None))
        meta.pop(NAMESPACE, None)


_first, _second = itemgetter(0), itemgetter(1)
_TORCH_KEYS = frozenset({NAME_SCOPES, CLASS_HIERARCHY, NAMESPACE})


def take_scope_only(pairs: Any, name: str, into: ScopeTexts) -> bool:
    """Where a node's metadata (``(key, value)`` pairs) holds torch's scope entries and nothing
    else (as every node of a dynamo export does), move them to ``into[name]`` as
    :func:`take_scope` would and return True; otherwise False, with nothing taken.

    >>> found = {}
    >>> take_scope_only([(NAME_SCOPES, "['', 'a', 'r']"), (NAMESPACE, "...")], "r", found), found
    (True, {'r': ("['', 'a', 'r']", None)})
    """
    found = dict(pairs)
    if NAME_SCOPES not in found or not _TORCH_KEYS.issuperset(found):
        return False
    into[name] = (found[NAME_SCOPES], found.get(CLASS_HIERARCHY))
    return True


class _Placer:
    """Where each op of one graph goes (its chain of group keys), and the name it takes there."""

    def __init__(self, texts: ScopeTexts) -> None:
        self.texts = texts
        self.where: dict[str, Chain] = {}
        self.groups: dict[Chain, Any] = {}  # every group's chain -> its class (scope_class), in order made
        self.leaf_names: dict[str, str] = {}
        self.unscoped: list[str] = []
        self.root_class: str | None = None
        self.chains: dict[Any, Chain] = {}  # cache: a scope's key -> its chain

    def by_metadata(self, name: str, weight: bool) -> bool:
        """Place one op by torch's metadata; False if it has none that names a module."""
        found = self.texts.get(name)
        if found is None:
            return False
        text, classes_text = found
        cut = text.rfind("', '")  # the op's own entry comes last: the rest is shared
        chain = self.chains.get(text[:cut]) if cut > 0 else None
        tail = text[cut + 4 : -2]
        if chain is not None and "'" not in tail and "\\" not in tail and text.endswith("']"):
            last = tail  # a chain seen before: only the op's own entry is new
            size = len(chain) + 2
        else:
            names = parse_scope_list(text)
            if not names or len(names) < 2 or names[0] != "":
                return False  # torch writes [node name] alone where it knew no module
            size = len(names)
            chain = tuple(names[1:-1])
            if cut > 0:
                self.chains[text[:cut]] = chain
            if chain and chain not in self.groups:  # its classes are read when its parent's level is made
                self._record(chain, classes_text, size)
            last = names[-1]
        if self.root_class is None and classes_text:  # the first op whose classes are one per scope
            classes = parse_scope_list(classes_text)
            if classes is not None and len(classes) == size:
                self.root_class = classes[0] or None
        self.where[name] = chain
        # amanda writes the leaf's own name last; torch writes its fx node's ("linear" for
        # node "node_linear"), which names the op only when the node name ends with it
        self.leaf_names[name] = last if weight or name.endswith("/" + last) else name
        return True

    def _record(self, chain: Chain, classes_text: str | None, size: int) -> None:
        """Record a new chain's groups not recorded yet (parents first), each with where its
        class is (see :func:`scope_class`)."""
        groups, first = self.groups, len(chain)
        while first > 1 and chain[: first - 1] not in groups:
            first -= 1
        for new in range(first, len(chain) + 1):
            groups[chain[:new]] = (classes_text, new, size) if classes_text else None


def scope_class(entry: Any) -> str | None:
    """The class path of a group as :class:`_Placer` records it: ``(class_hierarchy text,
    index, entries)`` for torch's metadata, read now ("" where the list is not one class per
    scope), or None.

    >>> scope_class(("['m.Net', 'm.Block', 'aten.relu']", 1, 3)), scope_class(("[1]", 1, 3))
    ('m.Block', '')
    """
    if entry is None:
        return None
    text, index, size = entry
    classes = parse_scope_list(text)
    return classes[index] if classes is not None and len(classes) == size else ""


class _Names:
    """Scope chains from scope-path node names (TorchScript's ``/a/b.0/Op``, TensorFlow's
    ``a/b/op``), with TorchScript's repeated calls (``act_1``) merged into their module. Each
    scope path is worked out once, on its parent's, and its group recorded in ``groups``."""

    def __init__(self, names: list[str], weights: set[str], groups: dict[Chain, Any]) -> None:
        self.names, self.weights, self.groups = names, weights, groups
        # TorchScript starts every scope-path name with "/"
        self.torch_style = any(name[:1] == "/" and name[-1:] != "/" for name in names)
        self.scopes: dict[str, tuple[Chain, str] | None] = {"": ((), "")}  # scope path -> chain, merged path
        self.paths: set[str] | None = None  # every scope path the names hold, made when first asked

    def chain(self, name: str) -> tuple[Chain, str] | None:
        """The chain of the group of a scope-path node name and its leaf; None for a name
        without a scope (``Constant_29``) or not a scope path (``a//b``)."""
        prefix, slash, leaf = name.rpartition("/")
        if not slash or not leaf:
            return None
        found = self.scopes.get(prefix, _UNSEEN)
        if found is _UNSEEN:
            found = self._scope(prefix)
        return None if found is None else (found[0], leaf)

    def _scope(self, prefix: str) -> tuple[Chain, str] | None:
        """The chain of a scope path (``/a/b``, ``a/b``) and its components with repeated calls
        merged (as a path: ``/a/b``), built on its parent's; None if it is not a scope path."""
        outer, _, component = prefix.rpartition("/")
        parent = self.scopes.get(outer, _UNSEEN) if component else None
        if parent is _UNSEEN:
            parent = self._scope(outer)
        if parent is None:
            self.scopes[prefix] = None
            return None
        chain, raw = parent
        above = chain[-1] if chain else ""
        if prefix[:1] == "/":  # TorchScript's: a component continues or extends its parent's qualified name
            base = repeat_base(component) if "_" in component else None
            if base is not None and self._has(f"{raw}/{base}") and not self._genuine(above, component):
                component = base
            qualified = qualify(above, component)
        else:
            qualified = f"{above}/{component}" if above else component
        chain = (*chain, qualified)
        self.groups.setdefault(chain, None)
        found = self.scopes[prefix] = (chain, f"{raw}/{component}")
        return found

    def _has(self, path: str) -> bool:
        """Whether some node name has the scope path ``path`` (or one below it)."""
        if self.paths is None:
            self.paths = paths = set()
            for name in self.names:
                prefix = name.rpartition("/")[0]
                while prefix and prefix not in paths:
                    paths.add(prefix)
                    prefix = prefix.rpartition("/")[0]
        return path in self.paths

    def _genuine(self, parent: str, component: str) -> bool:
        """Whether a weight names ``component`` as a module (``conv_1.weight``): then it is one,
        not a second call of ``conv``."""
        prefix = qualify(parent, component) + "."
        return any(w.startswith(prefix) for w in self.weights)


_UNSEEN: Any = object()


def place_weights(weights: list[str], users: Mapping[str, list[Chain]], by_scope: Mapping[str, Chain],
                  separator: str) -> dict[str, Chain]:
    """Where each weight goes (its group's chain): the container of the module its name says
    owns it (``transformer.h.0.ln_1.weight`` -> ``transformer.h.0.ln_1``) when every op that
    reads it lies inside that container; otherwise (a tied, shared or folded weight, or a name
    that names no module: ``val_3``, ``onnx::MatMul_5``) the lowest container that holds all its
    readers; a weight no op reads stays with its owner, or in the root.

    >>> a, b = ("a",), ("b",)
    >>> place_weights(["a.w", "a.t", "v"], {"a.w": [a], "a.t": [a, b], "v": [b]}, {"a": a}, ".")
    {'a.w': ('a',), 'a.t': (), 'v': ('b',)}
    """
    placed: dict[str, Chain] = {}
    for name in weights:
        owner = by_scope.get(name.rsplit(separator, 1)[0]) if separator in name else None
        readers = users.get(name) or []
        if owner is not None and all(r[: len(owner)] == owner for r in readers):
            placed[name] = owner
        else:
            placed[name] = common_chain(readers, owner or ())
    return placed


def _saved(info: dict, prefix: str) -> dict[Chain, tuple]:
    """Types, attributes and uids amanda saved for its containers (graph metadata
    ``amanda.containers``), by chain: they override what the scopes say."""
    props = info.get("metadata_props") or {}
    text = props.pop(CONTAINERS_KEY, None)
    if not props:
        info.pop("metadata_props", None)
    if text is None:
        return {}
    from amanda.io.document import decode_value

    saved: dict[Chain, tuple] = {}
    try:
        for keys, uid, kind, attrs in json.loads(text):
            saved[tuple(keys)] = (uid, kind, dict(decode_value(attrs, (CONTAINERS_KEY,))))
    except (ValueError, TypeError) as exc:
        raise FormatError(f"{prefix}graph metadata {CONTAINERS_KEY!r} is not what amanda writes: {exc}",
                          path=CONTAINERS_KEY, expected="JSON written by amanda", found=text[:60]) from None
    return saved


def _mode(hierarchy: Any, texts: ScopeTexts, names: list[str], prefix: str) -> str | None:
    meta = bool(texts)
    scoped = (hierarchy == "names" or not meta) and any("/" in name for name in names)
    if hierarchy == "metadata" and not meta:
        raise FormatError(f"{prefix}hierarchy='metadata' but no node carries {NAME_SCOPES!r}",
                          path="graph", expected=f"nodes with {NAME_SCOPES} metadata", found="none")
    if hierarchy == "names" and not scoped:
        raise FormatError(f"{prefix}hierarchy='names' but no node has a scope-path name (a/b/op)",
                          path="graph", expected="scope-path node names", found="none")
    if hierarchy in ("metadata", "names"):
        return hierarchy
    return "metadata" if meta else "names" if scoped else None


def nest_graph(fields: dict[str, Any], hierarchy: Any = "auto", prefix: str = "",
               texts: ScopeTexts | None = None) -> dict[str, Any]:
    """The main graph's container fields (as the ONNX reader makes them) with its ops moved
    into the containers of the scopes that produced them; unchanged for ``hierarchy=False`` or
    a graph without scope information. ``texts`` holds the scope metadata the reader took out
    of the nodes (:func:`take_scope`). The ops are the reader's own, seen by no one yet: they
    take their names in the tree in place, and those it left to build
    (:class:`~amanda.io.onnx.pending.PendingOp`) are built under them when their module's level
    is first opened (``amanda.containers.deferred``)."""
    check_hierarchy(hierarchy)
    if hierarchy is False:
        return fields
    texts = texts or {}
    children: list[Container] = fields["children"]
    all_names = [op.name or "" for op in children]
    weights = [n for n, op in zip(all_names, children) if op.type == "Constant" and op._attrs.get("initializer") is True]
    weight_set = set(weights)
    ops = [n for n in all_names if n not in weight_set]
    mode = _mode(hierarchy, texts, ops, prefix)
    if mode is None:  # flat after all: the ops the reader left to build are built now
        return dict(fields, children=[op.build(op.name) if type(op) is PendingOp else op for op in children])
    placer = _Placer(texts)
    if mode == "metadata":
        separator = _by_metadata(placer, ops, weights)
    else:
        separator = _by_names(placer, all_names, ops, weights, weight_set)
    _place_unscoped(placer, fields["edges"])
    _place_weights(placer, weights, fields["edges"], separator)
    saved = _saved(fields["info"], prefix)
    _check_leaf_names(placer.leaf_names)
    kids, edges = nest_levels(children, fields["edges"], placer.where, placer.groups, saved, root=fields["name"] or "",
                              weights=weights, leaf_names=placer.leaf_names, fresh=True,
                              class_of=scope_class)
    out = dict(fields, children=kids, edges=edges)
    cls = placer.root_class
    if cls:
        out["type"] = cls.rsplit(".", 1)[-1] or None
        if "." in cls:
            out["extra"] = {"scope_class": cls, **fields["extra"]}
    return out


def _by_metadata(placer: _Placer, ops: list[str], weights: list[str]) -> str:
    """Place the ops by torch's scope metadata; the separator of qualified names."""
    for name in ops:
        if not placer.by_metadata(name, False):
            placer.unscoped.append(name)
    for name in weights:
        if name in placer.texts:
            placer.by_metadata(name, True)
    return "."


def _check_leaf_names(leaf_names: Mapping[str, str]) -> None:
    """The names ops take in the tree, checked at load (not when a deferred level is opened):
    in one pass unless one is empty or not ASCII."""
    wanted = leaf_names.values()
    if not (all(wanted) and all(map(str.isascii, wanted))):
        for name, leaf in leaf_names.items():
            if leaf != name:
                check_names(None, leaf, None)


def _by_names(placer: _Placer, all_names: list[str], ops: list[str], weights: list[str],
              weight_set: set[str]) -> str:
    """Place the ops by their scope-path names; the separator of qualified names."""
    names = _Names(all_names, weight_set, placer.groups)
    where, leaf_names = placer.where, placer.leaf_names
    for name in [*ops, *weights]:
        found = names.chain(name)
        if found is not None:
            where[name], leaf_names[name] = found
        elif name in weight_set:
            continue
        elif names.torch_style:  # TorchScript names every op of a module "/..."; this one
            placer.unscoped.append(name)  # is exporter-made (Constant_29, Identity_3)
        else:  # in a TensorFlow-style graph, a name without "/" is an op of the root
            where[name] = ()
    return "." if names.torch_style else "/"


def _edges_from(edges: list, ops: set[str]) -> Iterator[Any]:
    """The edges out of one of ``ops`` (the graph's: an op's path is ``(name,)``), picked out
    without a Python step per edge."""
    paths = {(name,) for name in ops}
    return compress(edges, map(paths.__contains__, map(_first, map(_first, edges))))


def _edges_into(edges: list, ops: set[str]) -> Iterator[Any]:
    """The edges into one of ``ops`` (see :func:`_edges_from`)."""
    paths = {(name,) for name in ops}
    return compress(edges, map(paths.__contains__, map(_first, map(_second, edges))))


def _place_unscoped(placer: _Placer, edges: list) -> None:
    """An op without a scope (exporter-made: ``Constant_29``, a Split the optimizer added)
    goes to the lowest container holding the ops it reads from and feeds."""
    if not placer.unscoped:
        return
    wanted = set(placer.unscoped)
    neighbours: dict[str, list[str]] = {}
    for edge in _edges_from(edges, wanted):
        dst = edge[1][0]
        if type(dst) is tuple:
            neighbours.setdefault(edge[0][0][0], []).append(dst[0])
    for edge in _edges_into(edges, wanted):
        src = edge[0][0]
        if type(src) is tuple:
            neighbours.setdefault(edge[1][0][0], []).append(src[0])
    where = placer.where
    for name in placer.unscoped:
        where[name] = common_chain([where[n] for n in neighbours.get(name, ()) if n in where], ())


def _place_weights(placer: _Placer, weights: list[str], edges: list, separator: str) -> None:
    where = placer.where
    todo = [w for w in weights if w not in where]
    if not todo:
        return
    users: dict[str, list[Chain]] = {}
    for edge in _edges_from(edges, set(todo)):
        dst = edge[1][0]
        chain = where.get(dst[0], ()) if type(dst) is tuple else ()
        found = users.get(edge[0][0][0])
        if found is None:
            users[edge[0][0][0]] = [chain]
        else:
            found.append(chain)
    by_scope = {chain[-1]: chain for chain in placer.groups}
    if len(by_scope) < len(placer.groups):  # a scope reached from two places: the first one found
        by_scope = _first_found(placer.groups)
    for name, chain in place_weights(todo, users, by_scope, separator).items():
        where[name] = chain
        placer.leaf_names[name] = relative_name(chain[-1], name, separator) if chain else name


def _first_found(groups: Mapping[Chain, Any]) -> dict[str, Chain]:
    """Each scope's group, by its key; for a key held by two groups, the first one a depth-first
    walk from the root meets (each group's sub-groups in the order they were made)."""
    below: dict[Chain, list[Chain]] = {}
    for chain in groups:
        below.setdefault(chain[:-1], []).append(chain)
    by_scope: dict[str, Chain] = {}
    stack: list[Chain] = [()]
    while stack:
        for child in below.get(stack.pop(), ()):
            by_scope.setdefault(child[-1], child)
            stack.append(child)
    return by_scope
