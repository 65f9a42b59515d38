"""Rule tables as passes: the matches of :mod:`amanda.rewrite` rules in each level, replaced.

Each level (``Level``: plain child-to-child wiring) is matched with the rewrite engine's
matcher, earlier rules first, no op in two matches, and each match is spliced into the engine's
working copy of the level (:mod:`amanda.rewrite.replace`, which namespace conversion applies its
replacements with too). The matched ops leave; the replacement's ops come in at the old
root's place (a replacement that is one of the pattern's values passes it on: the readers of
the old root read that value; otherwise the root one under the old root's name, marked
``amanda_fused_from`` with the names it replaces; one built ``_like`` a captured op is that op, evolved only where
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
from amanda.rewrite.replace import WorkingLevel
from amanda.rewrite.rule import NewOp, Rule, Value, replacement_of

__all__ = ["apply_rules"]

Context = Callable[[Container, tuple], Any]
Changes = Callable[[Match], list[str]]


class _Splice:
    """The matches of one level, each spliced into the rewrite engine's working copy of it as
    it is found (:class:`amanda.rewrite.replace.WorkingLevel`, the one way replacements are
    applied, namespace conversion's too)."""

    def __init__(self, level: Level) -> None:
        self.level = level
        self.work = WorkingLevel(level.model)
        self.rewire: dict[Endpoint, Endpoint] = {}  # an old root's value -> what replaced it

    def fresh(self, stem: str) -> str:
        name = stem
        while name in self.work.taken:
            name += "_"
        self.work.taken.add(name)
        return name

    def resolved(self, source: Endpoint | None) -> Any:
        """Where ``source`` is now, through the values earlier matches replaced (None: nowhere)."""
        while source in self.rewire:
            source = self.rewire[source]
        return source

    def replace(self, match: Match, new: NewOp | Value) -> None:
        names = [str(k) for k in match.keys][::-1]  # producers first
        root = str(match.root)
        old = self.level.output(root)
        ops: list[Container] = []
        edges: list[Edge] = []
        if isinstance(new, Value):  # the match passes a value through: its readers read that
            out = self.resolved(new.source)
        else:
            out = self._build(new, root, {}, tuple(names), match, ops, edges)
        touching = self.work.touching(names)
        # the closed match's one value read outside: its readers read the replacement's
        edges += [Edge(out, e.dst, attrs=e.attrs or None) for e in touching if out is not None and e.src == old
                  and (e.dst.op is SELF or e.dst.op[0] not in names)]
        pos = self.work.pos  # a captured op built _like itself stays at its place, the others at the root's
        at = [pos[str(o.name)] if o.name in names else pos[root] for o in ops]
        self.work.splice(touching, names, ops, at, edges, in_place=True)  # readers' edges keep their place
        if out is not None and out != old:
            self.rewire[old] = out

    def _build(self, new: NewOp, name: str, built: dict[int, Endpoint], names: tuple, match: Match,
               ops: list[Container], edges: list[Edge]) -> Endpoint:
        if id(new) in built:
            return built[id(new)]
        like = new.like
        name = like.name if like is not None else name
        ins, outs = new.ports
        sources = []
        for port, value in zip(ins, new.inputs):
            sources.append((port, self._source(value, f"{name}_{port}", built, names, match, name, ops, edges)))
        node = self._node(new, name, names, [p for p, _ in sources])
        ops.append(node)
        edges += [Edge(source, Endpoint((name,), port)) for port, source in sources if source is not None]
        built[id(new)] = Endpoint((name,), node.outputs[0].name if like is not None else outs[0])
        return built[id(new)]

    def _source(self, value: Any, stem: str, built: dict, names: tuple, match: Match, into: str,
                ops: list[Container], edges: list[Edge]) -> Any:
        if value is None or isinstance(value, Value):
            return None if value is None else self.resolved(value.source)
        if isinstance(value, NewOp):
            return self._build(value, self.fresh(f"{match.root}_{value.type}"), built, names, match, ops, edges)
        name = self.fresh(stem)
        ops.append(new_constant(name, np.asarray(value), self.level.ops[match.root], amanda_fused_into=into))
        return Endpoint((name,), "output")

    @staticmethod
    def _node(new: NewOp, name: str, names: tuple, ports: list[str]) -> Container:
        like = new.like
        if like is None:
            ins, outs = new.ports
            return op(new.type, name, list(ins), list(outs), {**new.attrs, "amanda_fused_from": names})
        present = [p.name for p in like.inputs]
        extra = tuple(Port(p) for p in ports if p not in present)
        return like.evolve(inputs=like.inputs + extra) if extra else like


def _level(level: Level, rules: Sequence[Rule], context: Any, changes: Changes | None,
           kind: str) -> tuple[Container, dict]:
    splice: _Splice | None = None  # made at the first match
    view, taken = LevelView(level), set[Any]()
    replaced: list[str] = []
    for rule in rules:
        for match in find_matches(view, rule, context, taken):
            new = replacement_of(match)
            if new is None:
                continue
            splice = splice or _Splice(level)
            splice.replace(match, new)
            replaced += changes(match) if changes else [str(k) for k in match.keys][::-1]
    if splice is None:
        return level.model, {}
    return splice.work.build(), {kind: replaced}


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
