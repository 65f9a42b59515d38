"""Nesting a flat graph by scope chains, one level at a time: what :func:`amanda.io.nest.nest`
builds, with each container's level made only when it is first opened.

An op's *chain* names the groups that hold it, from the root's child down, each by its key (the
scope's qualified name: ``("features", "features.1", "features.1.block")``); ``()`` is the root.
At load only the root's level is made: its ops, its groups as deferred containers
(``amanda.containers.deferred``) that carry their ports, and the edges between them. Each group
receives the edges that touch it (those it routes, in order) and makes its own level the same
way when opened, one level down. A level's work is proportional to the ops and edges inside
it, so the load's is proportional to the graph's size and the whole tree's, once every level is
opened, to that times its depth; the tree is :func:`amanda.io.nest.nest`'s, field for field:
the same names (a group named after its scope relative to its parent's, made unique with
:func:`~amanda.io.onnx.scope.fresh_name`), ports named by the values that cross (their
``onnx_name``), and edges in the document order of their readers.

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
                 classes: Mapping[Chain, str | None], saved: Saved, rename: Any, lazy: bool) -> None:
        self.ops, self.where, self.leaf_names, self.rename, self.lazy = ops, where, leaf_names, rename, lazy
        self.classes, self.saved = classes, saved
        self.items: dict[Chain, list[Any]] = {(): []}  # op names and sub-chains, in order of appearance
        self.weights: dict[Chain, list[str]] = {}
        self.ports: dict[str, Port] = {}
        self.names: dict[Any, str] = {}  # value -> its name (ports are named by it)

    def place(self, name: str, weight: bool) -> None:
        """Put one op in its group, registering the group (and its parents) where first needed."""
        chain = self.where.get(name, ())
        items = self.items.get(chain)
        if items is None:
            new = []
            while chain not in self.items:
                new.append(chain)
                chain = chain[:-1]
            for chain in reversed(new):
                self.items[chain] = []
                self.items[chain[:-1]].append(chain)
            items = self.items[chain]
        if weight:
            self.weights.setdefault(chain, []).append(name)
        else:
            items.append(name)

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
        names: dict[Any, str] = {}
        parent = chain[-1] if chain else ""
        for item in items:
            if type(item) is tuple:
                names[item] = found = fresh_name(relative_name(parent, item[-1]), taken)
                taken.add(found)
        leaf_names = self.leaf_names
        for item in [*weights, *items]:
            if type(item) is not tuple:
                wanted = leaf_names.get(item, item)
                if wanted in taken:
                    wanted = fresh_name(wanted, taken)
                taken.add(wanted)
                names[item] = wanted
        edges, inner = self.route(len(chain), names, records)
        rename, ops = self.rename, self.ops
        children = [rename(ops[n], names[n]) for n in weights]
        for item in items:
            if type(item) is tuple:
                records_in, inputs, outputs = inner.get(item) or ([], {}, {})
                children.append(self.group(item, names[item], path, records_in, inputs, outputs))
            else:
                children.append(rename(ops[item], names[item]))
        return children, edges

    def route(self, depth: int, names: Mapping[Any, str], records: list) -> tuple[list, dict]:
        """This level's edges, and for each sub-group the records it receives and its ports.
        A record is ``(flat edge fields, source inside, target inside)``: a value from outside
        enters through the input port named by it, one leaving goes out through an output port."""
        edges: list[Edge] = []
        inner: dict[Chain, tuple[list, dict, dict]] = {}
        left: set[Any] = set()  # values this level sends out through its own output ports
        for record in records:
            fields, s_in, t_in = record
            src, sport, dst, dport, attrs, schain, dchain = fields
            a = schain[: depth + 1] if s_in and len(schain) > depth else None
            b = dchain[: depth + 1] if t_in and len(dchain) > depth else None
            if s_in and t_in and a == b:
                if a is None:  # both ends at this level
                    edges.append(_edge(Edge, (_endpoint(Endpoint, (SELF, sport) if src is None else ((names[src],), sport)),
                                              _endpoint(Endpoint, (SELF, dport) if dst is None else ((names[dst],), dport)),
                                              attrs)))
                else:
                    _into(inner, a)[0].append(record)
                continue
            if not s_in:
                here = _endpoint(Endpoint, (SELF, self.value(src, sport)))
            elif a is None:
                here = _endpoint(Endpoint, (SELF, sport) if src is None else ((names[src],), sport))
            else:
                got = _into(inner, a)
                got[0].append((fields, True, False))
                port = got[2].get((src, sport)) or got[2].setdefault((src, sport), self.value(src, sport))
                here = _endpoint(Endpoint, ((names[a],), port))
            if not t_in:  # out through this level's own output port, once per value
                if (src, sport) not in left:
                    left.add((src, sport))
                    edges.append(_edge(Edge, (here, _endpoint(Endpoint, (SELF, self.value(src, sport))), EMPTY)))
                continue
            if b is None:
                edges.append(_edge(Edge, (here, _endpoint(Endpoint, (SELF, dport) if dst is None else ((names[dst],), dport)),
                                          attrs)))
                continue
            got = _into(inner, b)
            got[0].append((fields, False, True))
            if (src, sport) not in got[1]:
                port = got[1][(src, sport)] = self.value(src, sport)
                edges.append(_edge(Edge, (here, _endpoint(Endpoint, ((names[b],), port)), EMPTY)))
        return edges, inner


def _into(inner: dict, chain: Chain) -> tuple[list, dict, dict]:
    found = inner.get(chain)
    if found is None:
        found = inner[chain] = ([], {}, {})
    return found


def nest_levels(children: list[Any], edges: Iterable[Any], where: Mapping[str, Chain],
                classes: Mapping[Chain, str | None], saved: Saved, *, root: str = "",
                weights: Iterable[str] = (), leaf_names: Mapping[str, str] | None = None,
                fresh: bool = False, lazy: bool = True) -> tuple[list[Container], list[Edge]]:
    """The root's children and edges once the ops of a flat graph are moved into the groups
    their chains name (``where``: op name -> chain; an op it leaves out stays in the root).

    ``classes`` gives each group's class path (or None), from which its type (the short name)
    and attributes (``scope``: its key, ``scope_class``: the path) come, unless ``saved`` holds
    its ``(uid, type, attrs)``. ``edges`` are the flat graph's, between its ops (one-element
    paths) and its own ports (``SELF`` or the graph's name ``root``). ``weights`` lists the ops
    that go first in their group; ``leaf_names`` the names ops take inside it (made unique
    there; the caller has checked them). ``fresh``: the children were just built by the caller
    and no one else holds them, so they take their names in place (see
    :func:`amanda.io.nest.nest`). ``lazy``: each group's level is made when first opened.
    """
    ops = {op.name or "": op for op in children}
    tree = _Tree(ops, where, leaf_names or {}, classes, saved, named_in_place if fresh else renamed, lazy)
    first = set(weights)
    # groups appear where their first op does (weights go first in their group, so they are
    # placed after the ops, which say where each group is used first)
    for name in ops:
        if name not in first:
            tree.place(name, False)
    for name in ops:
        if name in first:
            tree.place(name, True)
    rank = tree.ranks()
    by_path: dict[Any, int] = dict(rank)
    by_path.update({(name,): i for name, i in rank.items()})
    edges = list(edges)
    keys = list(map(by_path.get, map(_first, map(_second, edges)), repeat(len(rank))))
    records = []
    for edge in map(edges.__getitem__, sorted(range(len(edges)), key=keys.__getitem__)):
        src, dst = edge[0], edge[1]
        s = src[0][0] if type(src[0]) is tuple else None if src[0] is SELF or src[0] == root else src[0]
        d = dst[0][0] if type(dst[0]) is tuple else None if dst[0] is SELF or dst[0] == root else dst[0]
        records.append(((s, src[1], d, dst[1], edge[2] if len(edge) > 2 else EMPTY,
                         () if s is None else where.get(s, ()), () if d is None else where.get(d, ())), True, True))
    return tree.level((), root, (), records)
