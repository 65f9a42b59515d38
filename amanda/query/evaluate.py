"""Running a selector: steps over the node table, from a set of context positions.

Positions are kept sorted, which is document order, and unique. A ``..`` step turns
its context into a few ranges of positions (a node's descendants are contiguous);
indexes answer name and filter steps within those ranges by bisection, so a query
whose filter an index answers costs in proportion to its answer.

>>> from amanda.containers import Container, op
>>> g = Container("G", "g", children=[Container("B", "b", children=[op("Dot", "d")]), op("Dot", "e")])
>>> from amanda.query.indexes import table
>>> sel = Selector("$..[?type == 'Dot']")
>>> list(sel.run(table(g), [0]).positions)
[2, 3]
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain
from typing import TYPE_CHECKING, Any

from amanda.containers.arguments import brief
from amanda.errors import QueryError
from amanda.query.indexes import IndexEntry, frozen, table
from amanda.query.parse import Step, parse_selector
from amanda.query.predicate import ENGINES, Predicate

if TYPE_CHECKING:
    from amanda.containers.container import Container
    from amanda.query.indexes import NodeTable

__all__ = ["Hits", "Selector"]


class Hits:
    """The positions a query found: a plain sorted list, or slices of one index entry
    (whose paths and nodes are materialised once and then sliced)."""

    __slots__ = ("_positions", "entry", "slices")

    def __init__(
        self,
        positions: Sequence[int] | None = None,
        entry: IndexEntry | None = None,
        slices: list[tuple[int, int]] | None = None,
    ) -> None:
        self._positions = positions
        self.entry = entry
        self.slices = slices

    @property
    def positions(self) -> Sequence[int]:
        if self._positions is None:
            assert self.entry is not None and self.slices is not None
            everything = self.entry.positions
            if len(self.slices) == 1:
                a, b = self.slices[0]
                self._positions = everything if (a, b) == (0, len(everything)) else everything[a:b]
            else:
                self._positions = list(chain.from_iterable(everything[a:b] for a, b in self.slices))
        return self._positions

    def __len__(self) -> int:
        if self._positions is None and self.slices is not None:
            return sum(b - a for a, b in self.slices)
        return len(self.positions)

    def materialise(self, t: NodeTable) -> tuple[tuple, tuple]:
        """``(paths, nodes)`` of the hits, in order."""
        if self.entry is not None and self.slices is not None:
            paths, nodes = self.entry.materialise(t)
            if len(self.slices) == 1:
                a, b = self.slices[0]
                if (a, b) == (0, len(paths)):
                    return paths, nodes
                return paths[a:b], nodes[a:b]
            return (
                tuple(chain.from_iterable(paths[a:b] for a, b in self.slices)),
                tuple(chain.from_iterable(nodes[a:b] for a, b in self.slices)),
            )
        positions = self.positions
        return t.paths_of(positions), frozen(map(t.nodes.__getitem__, positions))


class Selector:
    """A parsed selector, ready to run on any container.

    ``engine="jmespath"`` evaluates every filter with the jmespath library on each
    node's view and uses no index: slower, and there to check the compiled engine.
    """

    __slots__ = ("engine", "predicates", "relative", "steps", "text")

    def __init__(self, text: str, relative: bool = False, engine: str = "compiled") -> None:
        if not isinstance(engine, str) or engine not in ENGINES:
            raise QueryError(f"engine is one of {ENGINES}, found {brief(engine)}", expected=f"one of {ENGINES}",
                             found=brief(engine))
        self.text = text
        self.relative = relative
        self.engine = engine
        self.steps: tuple[Step, ...] = parse_selector(text, relative)
        self.predicates = {
            k: Predicate(text, step, engine) for k, step in enumerate(self.steps) if step.test == "filter"
        }

    def __repr__(self) -> str:
        return f"Selector({self.text!r})"

    def select(self, container: Container) -> Any:
        """The Selection this selector finds in ``container``."""
        from amanda.query.selection import Selection

        if not hasattr(container, "_cached"):
            raise QueryError(f"select() queries a Container, found {type(container).__name__}",
                             expected="a Container", found=type(container).__name__)
        t = table(container)
        return Selection(t, self.run(t, [0]))

    def run(self, t: NodeTable, contexts: Sequence[int]) -> Hits:
        """Apply every step, starting from ``contexts`` (sorted positions)."""
        for predicate in self.predicates.values():
            predicate.check_names(t)
        hits = Hits(list(contexts))
        for k, step in enumerate(self.steps):
            current = hits.positions
            if not current:
                return Hits([])
            if step.axis == "child":
                hits = Hits(self._child(t, k, step, current))
            else:
                hits = self._descendant(t, k, step, current)
        return hits

    def _child(self, t: NodeTable, k: int, step: Step, contexts: Sequence[int]) -> list[int]:
        test = step.test
        if test == "name":
            found = [q for q in (t.child_named(p, step.arg) for p in contexts) if q is not None]
            return sorted(found) if len(found) > 1 else found
        if test == "any":
            found = list(chain.from_iterable(t.children(p) for p in contexts))
        elif test == "index":
            found = []
            for p in contexts:
                kids = t.real_children(p)
                if -len(kids) <= step.arg < len(kids):
                    found.append(kids[step.arg])
        elif test == "slice":
            # a negative step picks the same children; a Selection is still in document order
            found = sorted(chain.from_iterable(t.real_children(p)[slice(*step.arg)] for p in contexts))
            return found
        else:
            candidates = list(chain.from_iterable(t.children(p) for p in contexts))
            if len(contexts) > 1:
                candidates.sort()
            return self.predicates[k].run(t, candidates, len(candidates))
        if len(contexts) > 1:
            found.sort()
        return found

    def _descendant(self, t: NodeTable, k: int, step: Step, contexts: Sequence[int]) -> Hits:
        ranges = _ranges(t, contexts)
        test = step.test
        if test == "any":
            if len(ranges) == 1:
                return Hits(range(*ranges[0]))
            return Hits(list(chain.from_iterable(range(lo, hi) for lo, hi in ranges)))
        if test == "name":
            return _slices(t.index("segment", step.arg), ranges)
        if test in ("index", "slice"):
            pick = slice(*step.arg) if test == "slice" else None
            found: list[int] = []
            for p in sorted(set(contexts).union(chain.from_iterable(range(lo, hi) for lo, hi in ranges))):
                kids = t.real_children(p)
                if pick is not None:
                    found.extend(kids[pick])
                elif -len(kids) <= step.arg < len(kids):
                    found.append(kids[step.arg])
            return Hits(sorted(found))
        predicate = self.predicates[k]
        span = sum(hi - lo for lo, hi in ranges)
        # an index not built yet is worth building only for a query over much of the table
        best = predicate.prefilters[0] if predicate.prefilters else None
        if best is not None and (t.has_index(*best) or span * 8 >= len(t.nodes)):
            narrowed = _slices(t.index(*best), ranges)
            if predicate.exact:
                return narrowed
            candidates: Sequence[int] = narrowed.positions
        elif len(ranges) == 1:
            candidates = range(*ranges[0])
        else:
            candidates = list(chain.from_iterable(range(lo, hi) for lo, hi in ranges))
        return Hits(predicate.run(t, candidates, len(candidates)))


def _ranges(t: NodeTable, contexts: Sequence[int]) -> list[tuple[int, int]]:
    """The strict descendants of sorted ``contexts`` as disjoint ``[lo, hi)`` ranges."""
    end = t.end_of
    ranges: list[tuple[int, int]] = []
    reach = -1
    for p in contexts:
        if p < reach:
            continue  # inside the previous context's subtree, already covered
        reach = end(p)
        if p + 1 < reach:
            ranges.append((p + 1, reach))
    return ranges


def _slices(entry: IndexEntry, ranges: list[tuple[int, int]]) -> Hits:
    slices = [entry.within(lo, hi) for lo, hi in ranges]
    return Hits(entry=entry, slices=[(a, b) for a, b in slices if a < b] or [(0, 0)])
