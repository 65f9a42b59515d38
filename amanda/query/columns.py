"""Columns of the node table: one view value for every position, built in bulk and cached.

A column holds, for each position, the value a filter sees for one view key
(``("type",)``, ``("path",)`` …), one effective attribute (``("attr", k)``) or one own
attribute (``("own", k)``), already converted by :func:`amanda.query.view.to_jmes`.
Columns are built in C-speed passes where possible; a query that touches few nodes
reads values one at a time instead (:class:`LazyColumn`).

>>> from amanda.containers import Container, op
>>> from amanda.query.indexes import table
>>> g = Container("G", "g", children=[op("Dot", "d", attrs={"i": 1})], attrs={"i": 0, "ns": "x"})
>>> t = table(g)
>>> t.column(("attr", "ns")), t.column(("own", "i")), t.value(("attr", "i"), 1)
(['x', 'x'], [0, 1], 1)
"""

from __future__ import annotations

from itertools import compress, count, repeat
from operator import attrgetter, is_not, methodcaller, not_
from typing import TYPE_CHECKING, Any

from amanda.query.view import to_jmes

if TYPE_CHECKING:
    from amanda.containers.container import Container

__all__ = ["Columns", "LazyColumn"]

MISSING = object()
_PLAIN = frozenset({str, int, float, bool, type(None)})
_name = attrgetter("name")
_children = attrgetter("children")
_attrs = attrgetter("attrs")


class Columns:
    """The column half of :class:`amanda.query.indexes.NodeTable` (a mixin: it reads the
    table's ``nodes``, ``parent``, ``end``, ``_segment`` and ``_columns``)."""

    nodes: list[Container]
    parent: Any
    end: dict[int, int]
    _segment: dict[int, str]
    _columns: dict[Any, Any]

    if TYPE_CHECKING:  # provided by NodeTable

        def path(self, p: int) -> tuple: ...

        def segment(self, p: int) -> str | None: ...

        @property
        def paths(self) -> tuple[tuple, ...]: ...

    def column(self, spec: tuple) -> Any:
        """A list holding ``spec``'s value for every position (see :func:`value`)."""
        found = self._columns.get(spec)
        if found is None:
            found = self._columns[spec] = self._build_column(spec)
        return found

    def has_column(self, spec: tuple) -> bool:
        """Whether the dense column for ``spec`` is already built."""
        return spec in self._columns

    def _build_column(self, spec: tuple) -> Any:
        kind = spec[0]
        nodes = self.nodes
        if kind == "name":
            return list(map(_name, nodes))
        if kind == "segment":
            column = list(map(_name, nodes))
            column[0] = None
            for q, segment in self._segment.items():
                column[q] = segment
            return column
        if kind == "is_op":
            return list(map(not_, map(_children, nodes)))
        if kind == "depth":
            return list(map(len, self.paths))
        if kind == "uid":
            return list(map(attrgetter("uid"), nodes))
        if kind == "path":
            return list(map(list, self.paths))
        if kind in ("inputs", "outputs", "controls"):
            return [[port[0] for port in ports] for ports in map(attrgetter(kind), nodes)]
        if kind == "own":
            own = list(map(methodcaller("get", spec[1]), map(_attrs, nodes)))
            return own if set(map(type, own)) <= _PLAIN else list(map(to_jmes, own))
        if kind == "attr":
            return self._effective_column(spec[1])
        if kind == "own_attrs":
            return [self.value(spec, p) for p in range(len(nodes))]
        if kind == "attrs":
            own = self.column(("own_attrs",))
            out: list[dict] = [own[0]]
            parent = self.parent
            for p in range(1, len(nodes)):
                mine = own[p]
                inherited = out[parent[p]]
                out.append({**inherited, **mine} if mine else inherited)
            return out
        raise KeyError(spec)

    def _effective_column(self, key: str) -> list:
        values = list(map(methodcaller("get", key, MISSING), map(_attrs, self.nodes)))
        end, parent = self.end, self.parent  # only nodes in `end` have descendants
        # an owner with descendants passes its value down; within its range each node
        # without the key takes its parent's value, so the nearest owner wins
        owners = [p for p in compress(count(), map(is_not, values, repeat(MISSING))) if p in end]
        covered = 0
        for p in owners:
            if end[p] > covered:
                for q in range(max(p + 1, covered), end[p]):
                    if values[q] is MISSING:
                        values[q] = values[parent[q]]
                covered = end[p]
        values = [None if v is MISSING else v for v in values]
        return values if set(map(type, values)) <= _PLAIN else list(map(to_jmes, values))

    def value(self, spec: tuple, p: int) -> Any:
        """The view value ``spec`` of the node at ``p``, computed for that node alone.

        ``spec`` is ``(key,)`` for a view key (``name``, ``type``, ``path`` …),
        ``("attr", k)`` for an effective attribute, ``("own", k)`` for an own attribute.
        """
        built = self._columns.get(spec)
        if built is not None:
            return built[p]
        kind = spec[0]
        node = self.nodes[p]
        if kind in ("attr", "attrs"):
            return self._inherited(spec, p)
        if kind == "own":
            return to_jmes(node.attrs.get(spec[1]))
        if kind == "own_attrs":
            return {k: to_jmes(v) for k, v in node.attrs.items()}
        if kind in ("inputs", "outputs", "controls"):
            return [port[0] for port in getattr(node, kind)]
        of_node = _NODE_VALUES.get(kind)
        if of_node is None:
            raise KeyError(spec)
        return of_node(self, node, p)

    def _inherited(self, spec: tuple, p: int) -> Any:
        """An effective attribute (``("attr", k)``: the nearest node up from ``p`` that has
        it) or all of them merged, nearest last (``("attrs",)``)."""
        if spec[0] == "attr":
            key = spec[1]
            while p >= 0:
                found = self.nodes[p].attrs.get(key, MISSING)
                if found is not MISSING:
                    return to_jmes(found)
                p = self.parent[p]
            return None
        chain_ = []
        while p >= 0:
            chain_.append(self.nodes[p].attrs)
            p = self.parent[p]
        merged: dict = {}
        for attrs in reversed(chain_):
            merged.update(attrs)
        return {k: to_jmes(v) for k, v in merged.items()}

    def getter(self, spec: tuple, expected: int) -> Any:
        """Something indexable by position for ``spec``: the dense column when it exists or
        when ``expected`` lookups would cover much of the table, else a memoising lazy one."""
        if spec in self._columns or expected * 8 >= len(self.nodes):
            return self.column(spec)
        return LazyColumn(self, spec)

    def view(self, p: int) -> dict:
        """The full view of the node at ``p`` (see :data:`amanda.query.view.VIEW_KEYS`)."""
        value = self.value
        return {
            "name": value(("name",), p),
            "type": value(("type",), p),
            "path": value(("path",), p),
            "depth": value(("depth",), p),
            "attrs": value(("attrs",), p),
            "own_attrs": value(("own_attrs",), p),
            "inputs": value(("inputs",), p),
            "outputs": value(("outputs",), p),
            "controls": value(("controls",), p),
            "is_op": value(("is_op",), p),
            "namespace": value(("attr", "namespace"), p),
            "uid": value(("uid",), p),
        }


class LazyColumn:
    """A column computed position by position, for queries that touch few nodes."""

    __slots__ = ("memo", "spec", "table")

    def __init__(self, t: Columns, spec: tuple) -> None:
        self.table = t
        self.spec = spec
        self.memo: dict[int, Any] = {}

    def __getitem__(self, p: int) -> Any:
        memo = self.memo
        if p in memo:
            return memo[p]
        value = memo[p] = self.table.value(self.spec, p)
        return value


# view keys computed from the node alone (or its position): key -> (columns, node, position) -> value
_NODE_VALUES: dict[str, Any] = {
    "name": lambda t, node, p: node.name,
    "type": lambda t, node, p: node.type,
    "segment": lambda t, node, p: t.segment(p),
    "is_op": lambda t, node, p: node.is_op,
    "depth": lambda t, node, p: len(t.path(p)),
    "uid": lambda t, node, p: node.uid,
    "path": lambda t, node, p: list(t.path(p)),
}
