"""Mapping tables: ordered rules from a source namespace to a target namespace.

A table is data plus pure functions; ``table.apply(container)`` is a pure transform. Tables of
the same source and target compose with ``+`` (the left table's rules first). Namespaces need no
registered schema: a table may map between user-defined vocabularies.

>>> import amanda
>>> from amanda.rewrite.mapping import MappingTable, NewOp, Pattern, Replacement
>>> def relu(m):
...     return Replacement({"r": NewOp("Rectifier")})
>>> table = MappingTable("demo/a", "demo/b", [(Pattern({"r": "Relu"}), relu)])
>>> g = amanda.Container(None, "g", attrs={"namespace": "demo/a"},
...                      children=[amanda.op("Relu", "r", ["x"], ["y"])])
>>> out = table.apply(g)
>>> out.child("r").type, out.namespace, g.child("r").type
('Rectifier', 'demo/b', 'Relu')
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from amanda.containers.arguments import brief, expect_flag, expect_str, expect_type, sequence_problem, shown
from amanda.containers.order import topological
from amanda.errors import CycleError, MappingError
from amanda.namespaces.schema import suggest
from amanda.rewrite.mapping.rule import Rule

if TYPE_CHECKING:
    from amanda.containers.container import Container
    from amanda.rewrite.mapping.names import NameMap

__all__ = ["MappingTable"]


def _check_namespace(name: Any, what: str) -> str:
    if not isinstance(name, str) or not name or name.strip("/") != name:
        raise MappingError.at(what, "a namespace name like 'amanda/onnx/17'", brief(name))
    return name


ON_UNMATCHED = ("error", "pass")


def check_unmatched(value: Any) -> str:
    """``value`` if it says what to do with ops no rule matches, else MappingError."""
    if value.__class__ is str and value in ON_UNMATCHED:
        return value  # type: ignore[no-any-return]
    raise MappingError.at("on_unmatched", f"one of {ON_UNMATCHED}", shown(value), suggest(value, ON_UNMATCHED))


def _named_rules(items: Iterable[Any]) -> tuple[Rule, ...]:
    """Rules from Rules and ``(pattern, function)`` pairs; a pair whose function name is taken
    (two lambdas) is numbered, while two Rules of one name stay an error."""
    rules: list[Rule] = []
    taken: set[str] = set()
    for item in items:
        rule = Rule.of(item)
        if not isinstance(item, Rule) and rule.name in taken:
            n = 2
            while f"{rule.name}_{n}" in taken:
                n += 1
            rule = Rule(f"{rule.name}_{n}", rule.pattern, rule.function)
        taken.add(rule.name)
        rules.append(rule)
    return tuple(rules)


class MappingTable:
    """Rules mapping ``source`` to ``target``; ``apply`` runs them (see ``driver``).

    ``rules`` are ``Rule``s or ``(pattern, function)`` pairs. Rule names are unique; each
    ``apply_after`` names rules of the table and they form no cycle (checked here).
    ``on_unmatched`` (``"error"`` or ``"pass"``), ``fixed_point`` and ``max_iterations`` are the
    defaults ``apply`` uses.
    """

    __slots__ = ("_order", "doc", "fixed_point", "max_iterations", "name", "on_unmatched",
                 "rules", "source", "target")

    def __init__(self, source: str, target: str, rules: Iterable[Any] = (), *, name: str | None = None,
                 on_unmatched: str = "error", fixed_point: bool = False, max_iterations: int = 100,
                 doc: str = "") -> None:
        self.source = _check_namespace(source, "source")
        self.target = _check_namespace(target, "target")
        if sequence_problem(rules, "rules", "") is not None:
            raise MappingError.at("rules", "a list of Rules or (pattern, function) pairs", shown(rules))
        self.rules: tuple[Rule, ...] = _named_rules(rules)
        self.name = expect_str(name, "name", "a table name", optional=True) or f"{source} -> {target}"
        self.on_unmatched = check_unmatched(on_unmatched)
        self.fixed_point = expect_flag(fixed_point, "fixed_point")
        if type(max_iterations) is not int or max_iterations < 1:
            raise MappingError.at(self.name, "max_iterations >= 1", brief(max_iterations))
        self.max_iterations = max_iterations
        self.doc = expect_type(doc, str, "doc", "a string")
        self._order = self._sort()

    def __repr__(self) -> str:
        return f"MappingTable({self.name!r}, {len(self.rules)} rules)"

    def __len__(self) -> int:
        return len(self.rules)

    def __add__(self, other: MappingTable) -> MappingTable:
        """The rules of both tables, this one's first; sources and targets must agree."""
        if not isinstance(other, MappingTable):
            return NotImplemented
        if (other.source, other.target) != (self.source, self.target):
            raise MappingError.at(f"{self.name} + {other.name}", f"tables {self.source} -> {self.target}",
                                  f"{other.source} -> {other.target}",
                                  "tables compose with + only between the same namespaces")
        return MappingTable(self.source, self.target, self.rules + other.rules, name=self.name,
                            on_unmatched=self.on_unmatched, fixed_point=self.fixed_point,
                            max_iterations=self.max_iterations, doc=self.doc)

    def rule(self, name: str) -> Rule:
        """The rule called ``name``."""
        for rule in self.rules:
            if rule.name == name:
                return rule
        raise MappingError.at((self.name, name), f"a rule of {self.name}",
                              repr(name), f"rules: {', '.join(r.name for r in self.rules)}")

    def select(self, tags: Iterable[str] | None = None, skip: Iterable[str] = ()) -> MappingTable:
        """The table restricted to rules with one of ``tags`` (all when None) and none of ``skip``.

        An ``apply_after`` naming a rule left out is dropped.
        """
        wanted = None if tags is None else set(tags)
        unwanted = set(skip)
        kept = [r for r in self.rules if (wanted is None or wanted & set(r.tags))
                and not unwanted & set(r.tags)]
        names = {r.name for r in kept}
        kept = [Rule(r.name, r.pattern, r.function, tuple(a for a in r.apply_after if a in names),
                     r.tags, r.doc) for r in kept]
        return MappingTable(self.source, self.target, kept, name=self.name,
                            on_unmatched=self.on_unmatched, fixed_point=self.fixed_point,
                            max_iterations=self.max_iterations, doc=self.doc)

    def ordered_rules(self) -> tuple[Rule, ...]:
        """The rules in the order the driver runs them."""
        return self._order

    def _sort(self) -> tuple[Rule, ...]:
        position: dict[str, int] = {}
        for i, rule in enumerate(self.rules):
            if rule.name in position:
                raise MappingError.at((self.name, rule.name), "unique rule names", "a second rule of that name")
            position[rule.name] = i
        after: dict[str, set[str]] = {r.name: set() for r in self.rules}
        for rule in self.rules:
            for name in rule.apply_after:
                if name not in position:
                    raise MappingError.at((self.name, rule.name, "apply_after"), "names of rules in the table",
                                          repr(name))
                after[rule.name].add(name)
        try:
            names = topological(list(position), ((dep, name) for name, deps in after.items() for dep in deps))
        except CycleError as exc:
            raise MappingError.at((self.name, "apply_after"), "an acyclic apply_after order",
                                  f"the cycle {' -> '.join(map(str, (*exc.cycle, exc.cycle[0])))}") from None
        return tuple(self.rules[position[name]] for name in names)

    def apply(self, container: Container, *, on_unmatched: str | None = None,
              fixed_point: bool | None = None, with_names: bool = False,
              ) -> Container | tuple[Container, NameMap]:
        """Map ``container``; with ``with_names`` also return the :class:`NameMap`.

        ``on_unmatched``: ``"error"`` raises ``UnmatchedOpsError`` listing every op of the source
        namespace no rule mapped; ``"pass"`` keeps them. The input is never modified.
        """
        from amanda.rewrite.mapping.driver import run_table

        if on_unmatched is not None:
            check_unmatched(on_unmatched)
        expect_flag(fixed_point, "fixed_point", optional=True)
        expect_flag(with_names, "with_names")
        result, names = run_table(self, container, on_unmatched or self.on_unmatched,
                                  self.fixed_point if fixed_point is None else fixed_point)
        return (result, names) if with_names else result

    @property
    def rule_names(self) -> Sequence[str]:
        """Rule names in table order."""
        return [r.name for r in self.rules]
