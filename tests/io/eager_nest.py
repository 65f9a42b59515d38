"""The eager nesting, the reference the lazy one (``amanda.io.nest_levels``) is tested against:
every scope made as a :class:`Group` first, then every value that crosses a group routed
through ports named by it and every level named and built at once (the way amanda.load nested
before it made levels lazily).

>>> import amanda
>>> a = amanda.op("Relu", "a", ["X"], ["Y"]); b = amanda.op("Neg", "b", ["X"], ["Y"])
>>> root = Group(None, "g"); block = root.child("block")
>>> children, edges = nest([a, b], [(("g", "x"), ("a", "X")), (("a", "Y"), ("b", "X")),
...     (("b", "Y"), ("g", "y"))], {"a": block}, root, graph="g")
>>> [c.name for c in children], children[0].input_names, children[0].output_names
(['block', 'b'], ('x',), ('a:Y',))
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from itertools import repeat
from operator import itemgetter
from typing import Any

from amanda.containers.arguments import check_names
from amanda.containers.container import Container
from amanda.containers.edge import SELF, Edge, Endpoint, Port
from amanda.containers.values import EMPTY
from amanda.io.nest import built, named_in_place, renamed, value_name
from amanda.io.onnx.scope import fresh_name

_edge = _endpoint = tuple.__new__
_first, _second = itemgetter(0), itemgetter(1)


class Group:
    """A container to build: its name, type, attributes and uid, its parent, and what it
    holds (ops by name and sub-groups, in the order they appear)."""

    __slots__ = ("attrs", "depth", "edges", "groups", "inputs", "items", "key", "name",
                 "outputs", "parent", "type", "uid", "weights")

    def __init__(self, parent: Group | None, name: str, *, key: str | None = None,
                 type: str | None = None, attrs: Mapping[str, Any] | None = None) -> None:
        self.parent, self.name, self.key = parent, name, key if key is not None else name
        self.type, self.attrs, self.uid = type, dict(attrs or {}), None
        self.depth: int = 0 if parent is None else parent.depth + 1
        self.groups: dict[str, Group] = {}  # by key (the scope's own name)
        self.items: list[Any] = []  # op names and groups, in order of appearance
        self.weights: list[str] = []  # weights (initializers) come first, as in a flat import
        self.inputs: dict[Any, str] = {}  # value -> port name
        self.outputs: dict[Any, str] = {}
        self.edges: list[Edge] = []

    def child(self, key: str, **fields: Any) -> Group:
        """The sub-group of this key, made (with ``fields``) the first time."""
        found = self.groups.get(key)
        if found is None:
            found = self.groups[key] = Group(self, key, key=key, **fields)
        return found

    def path(self) -> tuple[str, ...]:
        """Names from the root's child down to this group."""
        names: list[str] = []
        group: Group | None = self
        while group is not None and group.parent is not None:
            names.append(group.name)
            group = group.parent
        return tuple(reversed(names))


def lowest_common(groups: Iterable[Group], default: Group) -> Group:
    """The deepest group that holds every one of ``groups`` (``default`` if there are none)."""
    found: Group | None = None
    for group in groups:
        found = group if found is None else _meet(found, group)
    return found if found is not None else default


def _meet(a: Group, b: Group) -> Group:
    """The deepest group that holds both ``a`` and ``b``."""
    while a.depth > b.depth:
        a = a.parent  # type: ignore[assignment]
    while b.depth > a.depth:
        b = b.parent  # type: ignore[assignment]
    while a is not b:
        a, b = a.parent, b.parent  # type: ignore[assignment]
    return a


def _register(group: Group, registered: set[int]) -> None:
    """Put ``group`` (and its parents) in their parents' items, once, where first needed."""
    while group.parent is not None and id(group) not in registered:
        registered.add(id(group))
        group.parent.items.append(group)
        group = group.parent


def _names(group: Group, leaf_names: Mapping[str, str], final: dict[str, str], order: dict[str, int]) -> None:
    """Unique child names in every group: sub-groups keep theirs where they can (they name
    modules), ops take the rest; a name equal to the group's own is renamed too. ``order``
    numbers the ops in document order (depth first, weights first in each group)."""
    taken = {group.name} if group.name else set()
    for item in group.items:
        if type(item) is Group:
            item.name = fresh_name(item.name, taken)
            taken.add(item.name)
    for name in group.weights:
        order[name] = len(order)
    for item in [*group.weights, *group.items]:
        if type(item) is Group:
            _names(item, leaf_names, final, order)
            continue
        wanted = leaf_names.get(item, item)
        if wanted in taken:
            wanted = fresh_name(wanted, taken)
        if wanted != item:
            check_names(None, wanted, None)  # here, not when a deferred level is opened
        taken.add(wanted)
        final[item] = wanted
        if item not in order:
            order[item] = len(order)


def _route(edge: Any, place: Mapping[str, Group], root: Group, final: Mapping[str, str],
           ops: Mapping[str, Container], graph: str) -> None:
    """Add the edges (and ports) that carry one flat edge's value through the tree."""
    src, dst = edge[0], edge[1]
    src_op = src[0][0] if type(src[0]) is tuple else None if src[0] is SELF or src[0] == graph else src[0]
    dst_op = dst[0][0] if type(dst[0]) is tuple else None if dst[0] is SELF or dst[0] == graph else dst[0]
    source = root if src_op is None else place.get(src_op, root)
    target = root if dst_op is None else place.get(dst_op, root)
    here = _endpoint(Endpoint, (SELF if src_op is None else (final[src_op],), src[1]))
    end = _endpoint(Endpoint, (SELF if dst_op is None else (final[dst_op],), dst[1]))
    attrs = edge[2] if len(edge) > 2 else EMPTY  # (a pmap's truth is a Python-level len)
    if source is target:  # the common case: both ends in one container
        source.edges.append(_edge(Edge, (here, end, attrs)))
        return
    value = (src_op, src[1])
    name = ""  # the value's name, looked up when a first port needs it
    meet = _meet(source, target)
    group = source
    while group is not meet:  # up: out through an output port of each group left
        port = group.outputs.get(value)
        if port is None:
            name = name or value_name(ops, src_op, src[1])
            port = group.outputs[value] = name
            group.edges.append(_edge(Edge, (here, _endpoint(Endpoint, (SELF, port)), EMPTY)))
        here = _endpoint(Endpoint, ((group.name,), port))
        group = group.parent  # type: ignore[assignment]
    down: list[Group] = []
    group = target
    while group is not meet:
        down.append(group)
        group = group.parent  # type: ignore[assignment]
    for inner in reversed(down):  # down: in through an input port of each group entered
        port = inner.inputs.get(value)
        if port is None:
            name = name or value_name(ops, src_op, src[1])
            port = inner.inputs[value] = name
            group.edges.append(_edge(Edge, (here, _endpoint(Endpoint, ((inner.name,), port)), EMPTY)))
        group = inner
        here = _endpoint(Endpoint, (SELF, port))
    group.edges.append(_edge(Edge, (here, end, attrs)))


def assemble(group: Group, children: list[Container], ports: dict[str, Port], make: Any = None) -> Container:
    """The container of ``group``, assembled from fields that are valid by construction (see
    :func:`built`): its ports carry no attributes and are shared through ``ports``. With
    ``make`` (and no ``children``), its level is made by ``make()`` when first opened."""

    def port(name: str) -> Port:
        found = ports.get(name)
        if found is None:
            found = ports[name] = Port(name)
        return found

    return built(group.type, group.name, tuple(map(port, group.inputs.values())),
                 tuple(map(port, group.outputs.values())), children, () if make else group.edges, group.attrs,
                 group.uid, group.path, make)


def _build(group: Group, ops: Mapping[str, Any], final: Mapping[str, str],
           ports: dict[str, Port], rename: Any, lazy: bool = False) -> list[Container]:
    """The children of ``group``; with ``lazy``, its sub-groups' levels are made when opened."""
    children = [rename(ops[n], final[n]) for n in group.weights]
    for item in group.items:
        if type(item) is Group:
            if lazy:
                children.append(assemble(item, [], ports, _level(item, ops, final, ports, rename)))
            else:
                children.append(assemble(item, _build(item, ops, final, ports, rename), ports))
        else:
            children.append(rename(ops[item], final[item]))
    return children


def _level(group: Group, ops: Mapping[str, Any], final: Mapping[str, str], ports: dict[str, Port],
           rename: Any) -> Any:
    """What makes ``group``'s level when its container is opened: its children and edges."""

    def make() -> tuple[list[Container], list[Edge]]:
        return _build(group, ops, final, ports, rename, True), group.edges

    return make


def nest(children: list[Any], edges: Iterable[Any], place: Mapping[str, Group],
         root: Group, *, graph: str | None = None, weights: Iterable[str] = (),
         leaf_names: Mapping[str, str] | None = None, fresh: bool = False,
         lazy: bool = False) -> tuple[list[Container], list[Edge]]:
    """The root's children and edges once the ops of a flat graph are moved into the groups
    ``place`` names (op name -> group; an op it leaves out stays in the root).

    ``edges`` are the flat graph's, between its ops (one-element paths) and its own ports
    (``SELF``, or the graph's name ``graph``). ``weights`` lists the ops that go first in their
    group; ``leaf_names`` the names ops take inside their group (made unique there).
    ``fresh``: the children were just built by the caller and no one else holds them (an
    importer's), so they take their new names in place instead of being copied under them;
    they may also be :class:`~amanda.io.onnx.pending.PendingOp` values, built under their names.
    ``lazy`` (with ``fresh``): each group's level is made when its container is first opened
    (``amanda.containers.deferred``); the root's level is made now.
    """
    ops = {op.name or "": op for op in children}
    first = set(weights)
    registered: set[int] = set()
    # groups appear where their first op does (weights go first in their group, so they are
    # placed after the ops, which say where each group is used first)
    for name in [*(n for n in ops if n not in first), *(n for n in ops if n in first)]:
        group = place.get(name, root)
        _register(group, registered)
        (group.weights if name in first else group.items).append(name)
    final: dict[str, str] = {}
    order: dict[str, int] = {}
    _names(root, leaf_names or {}, final, order)
    # routed in the tree's document order of their readers, so that the edges of every
    # container come out the same whatever order the file listed its nodes in
    # (the sort keys looked up without a Python step per edge: a reader's path is (name,) or name)
    edges = list(edges)
    by_path: dict[Any, int] = dict(order)
    by_path.update({(name,): i for name, i in order.items()})
    keys = list(map(by_path.get, map(_first, map(_second, edges)), repeat(len(order))))
    graph = graph or ""
    for edge in map(edges.__getitem__, sorted(range(len(edges)), key=keys.__getitem__)):
        src, dst = edge[0], edge[1]
        if type(src[0]) is tuple and type(dst[0]) is tuple:  # the common case, inline: op to op in one container
            group = place.get(src[0][0], root)
            if group is place.get(dst[0][0], root):
                group.edges.append(_edge(Edge, (_endpoint(Endpoint, ((final[src[0][0]],), src[1])),
                                                 _endpoint(Endpoint, ((final[dst[0][0]],), dst[1])),
                                                 edge[2] if len(edge) > 2 else EMPTY)))
                continue
        _route(edge, place, root, final, ops, graph)
    return _build(root, ops, final, {}, named_in_place if fresh else renamed, lazy and fresh), root.edges
