"""Nesting a flat graph by scope chains: an importer that knows which scope produced each op
(from names or metadata) moves its ops into nested containers, one per scope, each level made
only when its container is first opened.

An op's *chain* names the groups that hold it, from the root's child down, each by its key (the
scope's qualified name: ``("features", "features.1", "features.1.block")``); ``()`` is the root.
A value used outside the group that produces it leaves through an output port of every group it
crosses, and enters each group on the way down through an input port; both ports are named by
the value (its ``onnx_name``, or the graph input's name), so the same value has the same port
name everywhere, and two blocks chain by name. The effective view (``flatten``) of the result
is the flat graph's. At load only the root's level is made: its ops, its groups as deferred
containers (``amanda.containers.deferred``) that carry their ports, and the edges between them.
Each group receives the edges that touch it (those it routes, in order) and makes its own level
the same way when opened, one level down. A level's work is proportional to the ops and edges
inside it, so the load's is proportional to the graph's size and the whole tree's, once every
level is opened, to that times its depth. A group is named after its scope relative to its
parent's, made unique with :func:`~amanda.io.onnx.scope.fresh_name` (a child named like its
parent is renamed too); edges come in the document order of their readers, whatever order the
file listed its nodes in. Tests compare the tree, field for field, with an eager reference
that builds every level at once (``tests/io/eager_nest.py``).

>>> import amanda
>>> a = amanda.op("Relu", "a", ["X"], ["Y"]); b = amanda.op("Neg", "b", ["X"], ["Y"])
>>> children, edges = nest_levels([a, b], [(("g", "x"), ("a", "X")), (("a", "Y"), ("b", "X")),
...     (("b", "Y"), ("g", "y"))], {"a": ("block",)}, {("block",): None}, {}, root="g")
>>> [c.name for c in children], children[0].input_names, children[0].output_names, len(edges)
(['block', 'b'], ('x',), ('a:Y',), 3)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from itertools import repeat
from operator import itemgetter
from typing import Any

from amanda.containers.container import Container
from amanda.containers.edge import SELF, Edge, Endpoint, Port
from amanda.containers.values import EMPTY
from amanda.io.nest import built, named_in_place, renamed, value_name
from amanda.io.onnx.scope import fresh_name
from amanda.io.scope_names import relative_name

__all__ = ["Chain", "common_chain", "nest_levels"]

Chain = tuple  # group keys from the root's child down; () is the root
Saved = Mapping  # chain -> (uid, type, attrs) amanda saved for a container
_edge = _endpoint = tuple.__new__  # built from names known to be well-formed (see amanda.io.nest)
_first, _second = itemgetter(0), itemgetter(1)


def common_chain(chains: Iterable[Chain], default: Chain) -> Chain:
    """The longest chain every one of ``chains`` starts with: the lowest group holding them
    all (``default`` if there are none).

    >>> common_chain([("a", "a.b"), ("a", "a.c"), ("a", "a.b", "x")], ()), common_chain([], ("z",))
    (('a',), ('z',))
    """
    found: Chain | None = None
    for chain in chains:
        if found is None:
            found = chain
        elif chain[: len(found)] != found:
            size = 0
            while size < len(found) and size < len(chain) and chain[size] == found[size]:
                size += 1
            found = found[:size]
    return default if found is None else found


class _Tree:
    """One graph's ops placed by chain, from which each level is made."""

    def __init__(self, ops: dict[str, Any], where: Mapping[str, Chain], leaf_names: Mapping[str, str],
                 classes: Mapping[Chain, Any], class_of: Any, saved: Saved, rename: Any, lazy: bool) -> None:
        self.ops, self.where, self.leaf_names, self.rename, self.lazy = ops, where, leaf_names, rename, lazy
        self.classes, self.class_of, self.saved = classes, class_of, saved
        self.items: dict[Chain, list[Any]] = {(): []}  # op names and sub-chains, in order of appearance
        self.weights: dict[Chain, list[str]] = {}
        self.ports: dict[str, Port] = {}
        self.names: dict[Any, str] = {}  # value -> its name (ports are named by it)

    def place(self, names: Iterable[str], weight: bool) -> None:
        """Put ops in their groups, registering each group (and its parents) where first needed."""
        where, items, weights = self.where.get, self.items, self.weights
        for name in names:
            chain = where(name, ())
            found = items.get(chain)
            if found is None:
                found = self.register(chain)
            if not weight:
                found.append(name)
            elif chain in weights:
                weights[chain].append(name)
            else:
                weights[chain] = [name]

    def register(self, chain: Chain) -> list[Any]:
        """The item list of a group seen for the first time, the group put in its parent's
        (and so on up)."""
        new = []
        while chain not in self.items:
            new.append(chain)
            chain = chain[:-1]
        for chain in reversed(new):
            self.items[chain] = []
            self.items[chain[:-1]].append(chain)
        return self.items[chain]

    def ranks(self) -> dict[str, int]:
        """Every op's position in the tree's document order (depth first, weights first)."""
        rank: dict[str, int] = {}
        stack: list[Any] = [()]
        while stack:
            item = stack.pop()
            if type(item) is tuple:
                for name in self.weights.get(item, ()):
                    rank[name] = len(rank)
                stack.extend(reversed(self.items[item]))
            else:
                rank[item] = len(rank)
        return rank

    def value(self, op: str | None, port: str) -> str:
        """The name of the value an op's output port (or the graph's input port) carries, which
        names every port it crosses."""
        key = (op, port)
        found = self.names.get(key)
        if found is None:
            found = self.names[key] = value_name(self.ops, op, port)
        return found

    def group(self, chain: Chain, name: str, path: tuple[str, ...], records: list, inputs: dict[Any, str],
              outputs: dict[Any, str]) -> Container:
        """The container of ``chain``'s group: its level made now, or when opened."""
        saved = self.saved.get(chain)
        if saved is not None:
            uid, kind, attrs = saved
        else:
            uid, cls = None, self.classes.get(chain)
            if self.class_of is not None:
                cls = self.class_of(cls)
            attrs = {"scope": chain[-1]}
            kind = cls.rsplit(".", 1)[-1] or None if cls else None
            if cls and "." in cls:
                attrs["scope_class"] = cls
        ports = self.ports
        ins = tuple(ports.get(p) or ports.setdefault(p, Port(p)) for p in inputs.values())
        outs = tuple(ports.get(p) or ports.setdefault(p, Port(p)) for p in outputs.values())
        here = (*path, name)

        def make() -> tuple[list[Container], list[Edge]]:
            return self.level(chain, name, here, records)

        if self.lazy:
            return built(kind, name, ins, outs, (), (), attrs, uid, here, make)
        children, edges = make()
        return built(kind, name, ins, outs, children, edges, attrs, uid, here)

    def level(self, chain: Chain, own: str, path: tuple[str, ...], records: list) -> tuple[list, list]:
        """The children and edges of ``chain``'s group (named ``own``), from the records of the
        flat edges that touch it, in the document order of their readers."""
        items, weights = self.items[chain], self.weights.get(chain, ())
        taken = {own} if own else set()
        names: dict[str, str] = {}  # ops by name
        groups: dict[str, str] = {}  # sub-groups by key (a key may also name an op: TensorFlow's dense/MatMul)
        parent = chain[-1] if chain else ""
        for item in items:
            if type(item) is tuple:
                groups[item[-1]] = found = fresh_name(relative_name(parent, item[-1]), taken)
                taken.add(found)
        leaf_names = self.leaf_names
        for item in [*weights, *items]:
            if type(item) is not tuple:
                wanted = leaf_names.get(item, item)
                if wanted in taken:
                    wanted = fresh_name(wanted, taken)
                taken.add(wanted)
                names[item] = wanted
        edges, inner = self.route(len(chain), names, groups, records)
        rename, ops = self.rename, self.ops
        children = [rename(ops[n], names[n]) for n in weights]
        for item in items:
            if type(item) is tuple:
                records_in, inputs, outputs = inner.get(item[-1]) or ([], {}, {})
                children.append(self.group(item, groups[item[-1]], path, records_in, inputs, outputs))
            else:
                children.append(rename(ops[item], names[item]))
        return children, edges

    def route(self, depth: int, names: Mapping[str, str], groups: Mapping[str, str],
              records: list) -> tuple[list, dict]:
        """This level's edges, and for each sub-group (by key) the records it receives and its
        ports. A record is ``(flat edge fields, source inside, target inside)``: a value from
        outside enters through the input port named by it, one leaving goes out through an
        output port."""
        edges: list[Edge] = []
        add = edges.append
        inner: dict[str, tuple[list, dict, dict]] = {}
        left: set[Any] = set()  # values this level sends out through its own output ports
        for record in records:
            fields, s_in, t_in = record
            src, sport, dst, dport, attrs, schain, dchain = fields
            a = schain[depth] if s_in and len(schain) > depth else None
            b = dchain[depth] if t_in and len(dchain) > depth else None
            if a == b and s_in and t_in:
                if a is None:  # both ends at this level
                    add(_edge(Edge, (_endpoint(Endpoint, (SELF, sport) if src is None else ((names[src],), sport)),
                                     _endpoint(Endpoint, (SELF, dport) if dst is None else ((names[dst],), dport)),
                                     attrs)))
                else:
                    got = inner.get(a) or inner.setdefault(a, ([], {}, {}))
                    got[0].append(record)
                continue
            self.cross(fields, s_in, t_in, a, b, names, groups, inner, left, add)
        return edges, inner

    def cross(self, fields: tuple, s_in: bool, t_in: bool, a: str | None, b: str | None, names: Mapping[str, str],
              groups: Mapping[str, str], inner: dict, left: set, add: Any) -> None:
        """Route one record whose ends are not both inside one sub-group (or both here): from
        its source (here, a sub-group's output port or this level's input port) to its target
        (here, a sub-group's input port or this level's output port)."""
        src, sport, dst, dport, attrs = fields[:5]
        key = (src, sport)
        if not s_in:
            here = _endpoint(Endpoint, (SELF, self.value(src, sport)))
        elif a is None:
            here = _endpoint(Endpoint, (SELF, sport) if src is None else ((names[src],), sport))
        else:
            got = inner.get(a) or inner.setdefault(a, ([], {}, {}))
            got[0].append((fields, True, False))
            port = got[2].get(key) or got[2].setdefault(key, self.value(src, sport))
            here = _endpoint(Endpoint, ((groups[a],), port))
        if not t_in:  # out through this level's own output port, once per value
            if key not in left:
                left.add(key)
                add(_edge(Edge, (here, _endpoint(Endpoint, (SELF, self.value(src, sport))), EMPTY)))
        elif b is None:
            add(_edge(Edge, (here, _endpoint(Endpoint, (SELF, dport) if dst is None else ((names[dst],), dport)),
                             attrs)))
        else:
            got = inner.get(b) or inner.setdefault(b, ([], {}, {}))
            got[0].append((fields, False, True))
            if key not in got[1]:
                port = got[1][key] = self.value(src, sport)
                add(_edge(Edge, (here, _endpoint(Endpoint, ((groups[b],), port)), EMPTY)))


def nest_levels(children: list[Any], edges: Iterable[Any], where: Mapping[str, Chain],
                classes: Mapping[Chain, Any], saved: Saved, *, root: str = "",
                weights: Iterable[str] = (), leaf_names: Mapping[str, str] | None = None,
                fresh: bool = False, lazy: bool = True, class_of: Any = None) -> tuple[list[Container], list[Edge]]:
    """The root's children and edges once the ops of a flat graph are moved into the groups
    their chains name (``where``: op name -> chain; an op it leaves out stays in the root).

    ``classes`` gives each group's class path (or None), from which its type (the short name)
    and attributes (``scope``: its key, ``scope_class``: the path) come, unless ``saved`` holds
    its ``(uid, type, attrs)``; with ``class_of``, a class is ``class_of(classes[chain])``, read
    when the group's parent level is made. ``edges`` are the flat graph's, between its ops (one-element
    paths) and its own ports (``SELF`` or the graph's name ``root``). ``weights`` lists the ops
    that go first in their group; ``leaf_names`` the names ops take inside it (made unique
    there; the caller has checked them). ``fresh``: the children were just built by the caller
    and no one else holds them, so they take their names in place
    (:func:`amanda.io.nest.named_in_place`); they may also be
    :class:`~amanda.io.onnx.pending.PendingOp` values, built under their names.
    ``lazy``: each group's level is made when first opened.
    """
    ops = {op.name or "": op for op in children}
    tree = _Tree(ops, where, leaf_names or {}, classes, class_of, saved, named_in_place if fresh else renamed, lazy)
    first = set(weights)
    # groups appear where their first op does (weights go first in their group, so they are
    # placed after the ops, which say where each group is used first)
    tree.place([name for name in ops if name not in first], False)
    tree.place([name for name in ops if name in first], True)
    rank = tree.ranks()
    # each edge's fields: its ends' op names (None for the graph's own ports), ports,
    # attributes and the chains of its ends, routed in the tree's document order of their
    # readers, so that the edges of every container come out the same whatever order the file
    # listed its nodes in
    edges = list(edges)
    if set(map(len, edges)) != {3}:
        edges = [(e[0], e[1], e[2] if len(e) > 2 else EMPTY) for e in edges]
    op_of: dict[Any, str | None] = {(name,): name for name in ops}
    op_of.update({SELF: None, root: None})  # an op named by a bare string names itself
    op, chain_of, rank_of, last = op_of.get, where.get, rank.get, len(rank)
    fields = sorted([(rank_of(d, last), (s, sport, d, dport, attrs, chain_of(s, ()), chain_of(d, ())))
                     for (source, sport), (target, dport), attrs in edges
                     for s in (op(source, source),) for d in (op(target, target),)], key=_first)
    return tree.level((), root, (), list(zip(map(_second, fields), repeat(True), repeat(True))))
