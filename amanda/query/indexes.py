"""The node table of one container and the indexes built on it, lazily.

The table lists every node below a root in document order (pre-order: a parent
before its children, children in order, then the graphs held in the node's
graph-valued attributes). A node's descendants are the positions
``position + 1 .. end_of(position) - 1``, so "everything under these nodes" is a few
ranges and an index (a sorted list of positions) answers it by bisection.

The table and every column and index on it are cached on the root container object
(``container._cached``): containers are immutable, so none of them can go stale, and
a repeated query pays only for its answer.

>>> from amanda.containers import Container, op
>>> g = Container("G", "g", children=[op("Dot", "d"), op("Relu", "r")])
>>> t = table(g)
>>> t.paths, t.index("type", "Relu").positions
(((), ('d',), ('r',)), [2])
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from itertools import chain, compress, count, repeat
from operator import attrgetter, eq, is_, is_not, itemgetter, methodcaller
from typing import TYPE_CHECKING, Any

from amanda.containers.records import Path
from amanda.query.columns import Columns

if TYPE_CHECKING:
    from amanda.containers.container import Container

__all__ = ["IndexEntry", "NodeTable", "frozen", "graph_items", "table"]

_PLAIN = frozenset({str, int, float, bool, type(None)})
_scalars = attrgetter("_scalars")
_name = attrgetter("name")
_type = attrgetter("type")
_children = attrgetter("children")
# the stored attributes: reading only their values' types needs no read-only array views, and
# the public ``attrs`` first looks through every value for arrays (most of a cold query's time)
_stored = attrgetter("_attrs")
_second = itemgetter(1)
_buckets = attrgetter("_buckets")


def frozen(items: Iterable[Any]) -> tuple:
    """``tuple(items)`` by way of a list. A tuple grown from an iterator is re-tracked by the
    garbage collector at each resize, so every young collection walks it again.

    >>> frozen(map(str, range(3)))
    ('0', '1', '2')
    """
    return tuple(list(items))  # noqa: C414 - the list is the point


def table(root: Container) -> NodeTable:
    """The node table of ``root`` (built once per container object)."""
    return root._cached("query.table", NodeTable)


def graph_items(node: Container) -> list[tuple[str, Container]]:
    """``(segment, graph)`` for each graph-valued attribute, attribute names sorted.

    A tuple of graphs gives one segment per graph, ``name[i]``.

    >>> from amanda.containers import Container, op
    >>> body = Container("Graph", "body")
    >>> [s for s, _ in graph_items(op("Loop", "l", attrs={"bodies": (body, body), "n": 3}))]
    ['bodies[0]', 'bodies[1]']
    """
    attrs = node.attrs
    if not attrs or not _may_hold_graphs([node]):
        return []
    items = []
    for key in sorted(attrs):
        value = attrs[key]
        if _is_graph(value):
            items.append((key, value))
        elif type(value) is tuple and value and all(_is_graph(v) for v in value):
            items.extend((f"{key}[{k}]", v) for k, v in enumerate(value))
    return items


def _is_graph(value: Any) -> bool:
    return getattr(value, "_amanda_frozen", False) is True and hasattr(value, "children")


def _values(maps: Iterable[Any]) -> list:
    """Every value of these attribute maps, read in C where pyrsistent's layout allows."""
    try:
        return list(map(_second, chain.from_iterable(filter(None, chain.from_iterable(map(_buckets, maps))))))
    except AttributeError:  # another pyrsistent layout: the public, slower way
        return list(chain.from_iterable(map(methodcaller("values"), maps)))


def _may_hold_graphs(nodes: Sequence[Container]) -> bool:
    """Whether any of these nodes holds a graph (or a tuple of graphs) in an attribute. Maps of
    plain scalars (a ScalarMap, which each container notes) are never read."""
    if all(map(_scalars, nodes)):  # read off the containers: their maps stay unread
        return False
    values = _values(map(_stored, nodes))
    kinds = set(map(type, values))
    if kinds <= _PLAIN:
        return False
    if any(getattr(k, "_amanda_frozen", False) for k in kinds):
        return True
    if tuple in kinds:
        tuples = compress(values, map(is_, map(type, values), repeat(tuple)))
        inner = set(map(type, chain.from_iterable(tuples)))
        return any(getattr(k, "_amanda_frozen", False) for k in inner)
    return False


class IndexEntry:
    """Sorted positions, with their paths and nodes materialised once on demand."""

    __slots__ = ("_nodes", "_paths", "positions")

    def __init__(self, positions: Sequence[int]) -> None:
        self.positions = positions
        self._paths: tuple | None = None
        self._nodes: tuple | None = None

    def materialise(self, t: NodeTable) -> tuple[tuple, tuple]:
        """``(paths, nodes)`` at the positions, as tuples (built on the first call)."""
        if self._paths is None:
            self._nodes = frozen(map(t.nodes.__getitem__, self.positions))
            self._paths = t.paths_of(self.positions)
        return self._paths, self._nodes  # type: ignore[return-value]

    def within(self, lo: int, hi: int) -> tuple[int, int]:
        """The slice ``[a, b)`` of ``positions`` that falls in ``[lo, hi)``."""
        return bisect_left(self.positions, lo), bisect_left(self.positions, hi)


class NodeTable(Columns):
    """Every node under a root, in document order, with lazily built columns and indexes.

    ``nodes[p]``, ``parent[p]`` (-1 for the root), ``end_of(p)`` (one past the last
    descendant), ``kids[p]`` (positions of the children, then of held graphs) and
    ``bodies[p]`` (segment -> position of each held graph); ``path(p)`` and, built on
    first use, ``paths``. Positions are plain ints; ``parent`` is an untracked array,
    so the garbage collector need not walk it.
    """

    def __init__(self, root: Container) -> None:
        self.root = root
        self._columns: dict[Any, Any] = {}
        self._indexes: dict[Any, IndexEntry] = {}
        self._build()

    def __len__(self) -> int:
        return len(self.nodes)

    # -- building -----------------------------------------------------------------------------

    def _build(self) -> None:
        # one pass, block by block: a block's containers are read while they are in the cache
        # (their types, for the type column; their attribute maps, for graphs they may hold)
        self.nodes: list[Container] = [self.root]
        self._types = self._columns[("type",)] = [self.root.type]
        self.parent = array("q", [-1])
        self.end: dict[int, int] = {}  # for nodes with children; a leaf ends at p + 1
        self.kids: dict[int, Sequence[int]] = {}
        self.bodies: dict[int, dict[str, int]] = {}
        self._inner: dict[int, tuple] = {0: ()}  # paths of the nodes that have children
        self._segment: dict[int, str] = {}  # path segments of held graphs (not their names)
        self._paths: tuple[tuple, ...] | None = None
        nodes, parent, end, kids, inner = self.nodes, self.parent, self.end, self.kids, self._inner
        types = self._types
        stack: list[tuple[int, Any]] = []
        first = self._expand(0, self.root, graph_items(self.root))
        if first is not None:
            stack.append((0, first))
        while stack:
            p, items = stack[-1]
            for segment, child, held, is_body in items:
                q = len(nodes)
                nodes.append(child)
                types.append(child.type)
                parent.append(p)
                kids[p].append(q)  # type: ignore[attr-defined]
                if is_body:
                    self.bodies.setdefault(p, {})[segment] = q
                    self._segment[q] = segment
                if child.children or held:
                    inner[q] = inner[p] + (segment,)
                deeper = self._expand(q, child, held)
                if deeper is not None:
                    stack.append((q, deeper))
                    break
                if q in kids:
                    end[q] = len(nodes)
            else:
                stack.pop()
                end[p] = len(nodes)
        end[0] = len(nodes)

    def _expand(self, p: int, node: Container, held: list) -> Any:
        """Append ``node``'s children in bulk when they are plain leaves; otherwise return
        the items still to visit one by one (None when nothing is left)."""
        children = node.children
        bodies = [(segment, graph, graph_items(graph), True) for segment, graph in held]
        if children:
            block_graphs = _may_hold_graphs(children)
            if not block_graphs and not any(map(len, map(_children, children))):
                # the common block of plain ops, appended in C
                start, k = len(self.nodes), len(children)
                self.nodes.extend(children)
                self._types.extend(map(_type, children))
                self.parent.extend(repeat(p, k))
                if not bodies:
                    self.kids[p] = range(start, start + k)
                    return None
                self.kids[p] = list(range(start, start + k))
                return iter(bodies)
            self.kids[p] = []
            items = [(c.name, c, graph_items(c) if block_graphs else (), False) for c in children]
            return iter(items + bodies)
        if not bodies:
            return None
        self.kids[p] = []
        return iter(bodies)

    # -- structure ----------------------------------------------------------------------------

    def end_of(self, p: int) -> int:
        """One past the position of ``p``'s last descendant."""
        return self.end.get(p, p + 1)

    def segment(self, p: int) -> str | None:
        """The last path segment of ``p``: its name, or the attribute holding the graph."""
        if p == 0:
            return None
        return self._segment.get(p) or self.nodes[p].name

    def path(self, p: int) -> tuple:
        """The path of the node at ``p``: segments from the root."""
        if self._paths is not None:
            return self._paths[p]
        found = self._inner.get(p)
        if found is not None:
            return found
        return self._inner[self.parent[p]] + (self.segment(p),)

    @property
    def paths(self) -> tuple[tuple, ...]:
        """Every node's path, by position (built on first use)."""
        if self._paths is None:
            self._paths = self.paths_of(range(len(self.nodes)))
        return self._paths  # type: ignore[return-value]

    def paths_of(self, positions: Sequence[int]) -> Any:
        """The paths at ``positions``, as a tuple."""
        if self._paths is not None:
            return frozen(map(self._paths.__getitem__, positions))
        inner, parent, nodes = self._inner, self.parent, self.nodes
        if inner.keys().isdisjoint(positions) and self._segment.keys().isdisjoint(positions):
            # leaves named by their own names: parent path + name, in C
            heads = list(map(inner.__getitem__, map(parent.__getitem__, positions)))
            names = map(_name, map(nodes.__getitem__, positions))
            depths = set(map(len, heads))
            if len(depths) == 1:  # one depth: zip builds each path whole, no concatenation
                return frozen(zip(*(map(itemgetter(k), heads) for k in range(depths.pop())), names))
            return frozen(map(tuple.__add__, heads, zip(names)))
        return frozen(map(self.path, positions))

    def children(self, p: int) -> Sequence[int]:
        """Positions of the children of ``p`` (its own children, then its held graphs)."""
        return self.kids.get(p, ())

    def real_children(self, p: int) -> Sequence[int]:
        """Positions of ``p``'s own children (not the graphs held in its attributes)."""
        kids = self.kids.get(p, ())
        return kids[: len(self.nodes[p].children)]

    def child_named(self, p: int, name: str) -> int | None:
        """Position of the child (or held graph) of ``p`` with this path segment."""
        ordinal = self.nodes[p]._index.get(name)  # type: ignore[attr-defined]
        if ordinal is not None:
            return self.kids[p][ordinal]
        held = self.bodies.get(p)
        return held.get(name) if held else None

    def position_of(self, path: Path) -> int | None:
        """The position of the node at ``path`` (a dict built on first use)."""
        lookup = self._columns.get("position")
        if lookup is None:
            lookup = self._columns["position"] = dict(zip(self.paths, range(len(self.nodes))))
        return lookup.get(path)

    def scope_of(self, p: int) -> int:
        """Position of the graph ``p`` belongs to: the root, or the held graph around it."""
        while p > 0 and p not in self._segment:
            p = self.parent[p]
        return max(p, 0)

    # -- indexes ------------------------------------------------------------------------------

    def index(self, kind: str, key: Any = None) -> IndexEntry:
        """Sorted positions where: ``("type", t)`` the type is t; ``("segment", s)`` the last
        path segment is s; ``("is_op",)`` the node is an op; ``("attr", k)`` / ``("own", k)``
        the effective / own attribute k is set (not null); ``("computation", c)`` the node is
        in computation c."""
        spec = (kind, key)
        found = self._indexes.get(spec)
        if found is None:
            found = self._indexes[spec] = IndexEntry(self._build_index(kind, key))
        return found

    def has_index(self, kind: str, key: Any = None) -> bool:
        """Whether the index ``(kind, key)`` is already built."""
        return (kind, key) in self._indexes

    def _build_index(self, kind: str, key: Any) -> list[int]:
        if kind in ("type", "segment", "name"):  # the type column is built with the table
            return list(compress(count(), map(eq, self.column((kind,)), repeat(key))))
        if kind == "is_op":
            return list(compress(count(), self.column(("is_op",))))
        if kind in ("attr", "own"):
            return list(compress(count(), map(is_not, self.column((kind, key)), repeat(None))))
        if kind == "computation":
            from amanda.query.analysis import computation

            return sorted(computation(self, key))
        raise KeyError(kind)

    def computation(self, name: str) -> frozenset:
        """Positions of the nodes in computation ``name`` (cached per name)."""
        spec = ("computation-set", name)
        found = self._columns.get(spec)
        if found is None:
            from amanda.query.analysis import computation

            found = self._columns[spec] = computation(self, name)
        return found
