"""Rule tables as passes: the matches of :mod:`amanda.rewrite` rules in each level, replaced.

Each level (``Level``: plain child-to-child wiring) is matched with the rewrite engine's
matcher, earlier rules first, no op in two matches. The matched ops leave; the replacement's ops
come in (a replacement that is one of the pattern's values passes it on: the readers of the
old root read that value; otherwise the root one under the old root's name, at its place, marked ``amanda_fused_from``
with the names it replaces; one built ``_like`` a captured op is that op, evolved only where
its inputs changed) and arrays in the replacement become ``Constant`` ops marked
``amanda_fused_into``. Readers of the old root's value read the new root's; a replacement's
input that an earlier match of the level replaced reads that match's result.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from amanda.containers import SELF, Container, Edge, Endpoint, Port, op
from amanda.passes.level import Level, new_constant, on_levels
from amanda.passes.report import PassReport, PassResult
from amanda.rewrite.match import LevelView, Match, find_matches
from amanda.rewrite.rule import NewOp, Rule, Value, replacement_of

__all__ = ["apply_rules"]

Context = Callable[[Container, tuple], Any]
Changes = Callable[[Match], list[str]]


class _Rebuild:
    """The ops, edges and rewiring that the matches of one level add up to."""

    def __init__(self, level: Level) -> None:
        self.level = level
        self.taken: set[str] = set(level.ops)
        self.drop: set[str] = set()
        self.new: dict[str, list[Container]] = {}  # at the place of an old op's name
        self.rewire: dict[Endpoint, Endpoint] = {}
        self.edges: list[tuple[Endpoint, Endpoint]] = []  # sources outside the match: rewired later

    def fresh(self, stem: str) -> str:
        name = stem
        while name in self.taken:
            name += "_"
        self.taken.add(name)
        return name

    def replace(self, match: Match, new: NewOp | Value) -> None:
        names = [str(k) for k in match.keys][::-1]  # producers first
        self.drop.update(names)
        if isinstance(new, Value):  # the match passes a value through: its readers read that
            root = new.source
        else:
            root = self._build(new, str(match.root), {}, tuple(names), match)
        old = self.level.output(str(match.root))
        if root is not None and root != old:
            self.rewire[old] = root

    def _build(self, new: NewOp, name: str, built: dict[int, Endpoint], names: tuple, match: Match) -> Endpoint:
        if id(new) in built:
            return built[id(new)]
        like = new.like
        name = like.name if like is not None else name
        ins, outs = new.ports
        sources = []
        for port, value in zip(ins, new.inputs):
            sources.append((port, self._source(value, f"{name}_{port}", built, names, match, name)))
        node = self._node(new, name, names, [p for p, _ in sources])
        self.new.setdefault(name if name in self.level.ops else str(match.root), []).append(node)
        for port, source in sources:
            if source is not None:
                self.edges.append((source, Endpoint((name,), port)))
        built[id(new)] = Endpoint((name,), node.outputs[0].name if like is not None else outs[0])
        return built[id(new)]

    def _source(self, value: Any, stem: str, built: dict, names: tuple, match: Match, into: str) -> Any:
        if value is None or isinstance(value, Value):
            return None if value is None else value.source
        if isinstance(value, NewOp):
            return self._build(value, self.fresh(f"{match.root}_{value.type}"), built, names, match)
        name = self.fresh(stem)
        self.new.setdefault(str(match.root), []).append(
            new_constant(name, np.asarray(value), self.level.ops[match.root], amanda_fused_into=into))
        return Endpoint((name,), "output")

    def _node(self, new: NewOp, name: str, names: tuple, ports: list[str]) -> Container:
        like = new.like
        if like is None:
            ins, outs = new.ports
            return op(new.type, name, list(ins), list(outs), {**new.attrs, "amanda_fused_from": names})
        present = [p.name for p in like.inputs]
        extra = tuple(Port(p) for p in ports if p not in present)
        return like.evolve(inputs=like.inputs + extra) if extra else like

    def model(self) -> Container:
        level, rewire = self.level, self.rewire
        children: list[Container] = []
        for child in level.model.children:
            children += self.new.get(child.name, []) if child.name in self.drop else [child]
        edges = []
        for edge in level.model.edges:
            if edge.dst.op is not SELF and edge.dst.op[0] in self.drop:
                continue
            src = edge.src
            while src in rewire:  # through values passed on by several matches in a row
                src = rewire[src]
            edges.append(edge if src is edge.src else Edge(src, edge.dst, attrs=edge.attrs or None))
        inner = {e for new in self.new.values() for e in (Endpoint((n.name,), p.name) for n in new for p in n.outputs)}
        for src, dst in self.edges:
            while src not in inner and src in rewire:  # read what an earlier match replaced
                src = rewire[src]
            edges.append(Edge(src, dst))
        return level.model.evolve(children=tuple(children), edges=tuple(edges))


def _level(level: Level, rules: Sequence[Rule], context: Any, changes: Changes | None,
           kind: str) -> tuple[Container, dict]:
    rebuild = _Rebuild(level)
    view, taken = LevelView(level), set[Any]()
    replaced: list[str] = []
    for rule in rules:
        for match in find_matches(view, rule, context, taken):
            new = replacement_of(match)
            if new is None:
                continue
            rebuild.replace(match, new)
            replaced += changes(match) if changes else [str(k) for k in match.keys][::-1]
    if not rebuild.drop:
        return level.model, {}
    return rebuild.model(), {kind: replaced}


def apply_rules(name: str, model: Container, rules: Sequence[Rule], context: Context | None = None,
                changes: Changes | None = None, kind: str = "replaced") -> PassResult:
    """The pass ``name``: ``rules`` replaced in every level of ``model``, innermost first;
    ``context(level, path)`` is each level's match context, ``changes(match)`` the names the
    report lists under ``kind`` (default: every matched op, producers first, as replaced)."""
    def level_fn(m: Container, path: tuple, _: Any) -> tuple[Container, dict]:
        level = Level.of(m)
        if level is None:
            return m, {}
        return _level(level, rules, context(m, path) if context else None, changes, kind)

    out, found = on_levels(model, level_fn)
    return PassResult(out, PassReport.of(name, found))
