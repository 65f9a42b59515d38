"""Patterns: ops bound to variables plus the edges that must join them.

A pattern matches sibling leaf ops of one container. Each variable names an ``OpPattern`` (op
types, literal attribute values, and which namespace the op must be in); each ``EdgePattern``
(``"mm.product -> b.value"``) requires that data edge (or, with port ``-1``, that control edge).
A binding is injective. Matches come in document order of the ops bound to the variables, in the
pattern's variable order, so the driver's order is deterministic.

>>> p = Pattern({"mm": "MatMul", "b": "BiasAdd"}, ["mm.product -> b.value"])
>>> p.variables, p.edges[0]
(('mm', 'b'), EdgePattern('mm', 'product', 'b', 'value'))
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from amanda.errors import MappingError
from amanda.namespaces.attr_types import value_key
from amanda.namespaces.schema import FrozenMap

if TYPE_CHECKING:
    from amanda.rewrite.mapping.scope import Scope

__all__ = ["NAMESPACE_CHOICES", "EdgePattern", "OpPattern", "Pattern", "find_matches",
           "parse_endpoint"]

NAMESPACE_CHOICES = ("source", "target", "any")


@dataclass(frozen=True, slots=True)
class OpPattern:
    """What one captured op must be: one of ``types`` (None: any type), with each of ``attrs`` set
    to exactly that value, in the table's ``source`` namespace (or ``target``, or ``any``).

    >>> OpPattern(("Add", "AddV2")).types
    ('Add', 'AddV2')
    """

    types: tuple[str, ...] | None = None
    attrs: Mapping[str, Any] = field(default_factory=FrozenMap)
    namespace: str = "source"

    def __post_init__(self) -> None:
        if isinstance(self.types, str):
            object.__setattr__(self, "types", None if self.types == "*" else (self.types,))
        elif self.types is not None:
            object.__setattr__(self, "types", tuple(self.types))
            if not self.types or not all(isinstance(t, str) and t for t in self.types):
                raise MappingError.at("pattern", "op types as non-empty strings", repr(self.types))
        object.__setattr__(self, "attrs", FrozenMap(self.attrs))
        if self.namespace not in NAMESPACE_CHOICES:
            raise MappingError.at("pattern", f"namespace one of {NAMESPACE_CHOICES}",
                                  repr(self.namespace))

    @classmethod
    def of(cls, value: OpPattern | str | Sequence[str] | None) -> OpPattern:
        """Coerce a type name, a list of them, ``'*'``/None (any) or an ``OpPattern``."""
        if isinstance(value, OpPattern):
            return value
        if value is None or value == "*":
            return cls(None)
        return cls((value,) if isinstance(value, str) else tuple(value))

    def accepts(self, op: Any) -> bool:
        """Whether ``op`` has one of the types and every literal attribute value."""
        if self.types is not None and op.type not in self.types:
            return False
        for key, wanted in self.attrs.items():
            if key not in op.attrs or value_key(_plain(op.attrs[key])) != value_key(_plain(wanted)):
                return False
        return True


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def parse_endpoint(text: str, where: Any = "edge") -> tuple[str, str | int]:
    """``"var.port"`` -> ``(var, port)``; a leading ``$`` is dropped and ``-1`` is the control port.

    The variable ends at the first dot, so port names may hold dots.

    >>> parse_endpoint("$mm.product"), parse_endpoint("a.-1"), parse_endpoint("SELF.x.y")
    (('mm', 'product'), ('a', -1), ('SELF', 'x.y'))
    """
    if not isinstance(text, str) or "." not in text:
        raise MappingError.at(where, "an endpoint '$var.port'", repr(text))
    var, _, port = text.strip().partition(".")
    var = var.removeprefix("$")
    if not var.isidentifier() or not port:
        raise MappingError.at(where, "an endpoint '$var.port' (var an identifier)", repr(text))
    return var, (-1 if port.strip() == "-1" else port.strip())


@dataclass(frozen=True, slots=True)
class EdgePattern:
    """A required edge ``src.src_port -> dst.dst_port`` between two pattern variables."""

    src: str
    src_port: str | int
    dst: str
    dst_port: str | int

    @classmethod
    def parse(cls, text: str, where: Any = "edge") -> EdgePattern:
        """Parse ``"$a.out -> $b.in"``."""
        if not isinstance(text, str) or "->" not in text:
            raise MappingError.at(where, "an edge '$a.port -> $b.port'", repr(text))
        left, _, right = text.partition("->")
        return cls(*parse_endpoint(left, where), *parse_endpoint(right, where))

    @property
    def is_control(self) -> bool:
        """Whether this is a control edge (``-1`` ports)."""
        return self.src_port == -1 or self.dst_port == -1

    def __repr__(self) -> str:
        return f"EdgePattern({self.src!r}, {self.src_port!r}, {self.dst!r}, {self.dst_port!r})"


@dataclass(frozen=True, slots=True)
class Pattern:
    """Variables bound to ``OpPattern``s (in order), required edges, and an optional guard
    ``where(match) -> bool`` run once the ops and edges fit.

    >>> Pattern({"r": "Relu"}).ops[0][1].types
    ('Relu',)
    """

    ops: Any
    edges: Any = ()
    where: Callable[[Any], bool] | None = None

    def __post_init__(self) -> None:
        items = self.ops.items() if isinstance(self.ops, Mapping) else self.ops
        ops = tuple((str(var).lstrip("$"), OpPattern.of(p)) for var, p in items)
        if not ops:
            raise MappingError.at("pattern", "at least one op variable", "none")
        names = [var for var, _ in ops]
        for var in names:
            if not var.isidentifier() or var == "SELF":
                raise MappingError.at("pattern", "variables that are identifiers (not SELF)", repr(var))
        if len(set(names)) != len(names):
            raise MappingError.at("pattern", "distinct variables", repr(names))
        edges = tuple(e if isinstance(e, EdgePattern) else EdgePattern.parse(e) for e in self.edges)
        for edge in edges:
            for var in (edge.src, edge.dst):
                if var not in names:
                    raise MappingError.at("pattern", f"edges between the variables {names}",
                                          f"{edge} naming ${var}")
        object.__setattr__(self, "ops", ops)
        object.__setattr__(self, "edges", edges)

    @property
    def variables(self) -> tuple[str, ...]:
        """The variables, in order."""
        return tuple(var for var, _ in self.ops)


def _edge_holds(scope: Scope, edge: EdgePattern, bound: Mapping[str, str]) -> bool:
    src, dst = bound[edge.src], bound[edge.dst]
    return (src, edge.src_port) in scope.producers(dst, edge.dst_port)


def _candidates(scope: Scope, pattern: Pattern, var: str, op_pattern: OpPattern,
                bound: Mapping[str, str]) -> list[str]:
    # follow an edge from a bound variable when there is one: far fewer candidates
    for edge in pattern.edges:
        if edge.dst == var and edge.src in bound:
            return [name for name, port in scope.consumers(bound[edge.src], edge.src_port)
                    if port == edge.dst_port]
        if edge.src == var and edge.dst in bound:
            return [name for name, port in scope.producers(bound[edge.dst], edge.dst_port)
                    if port == edge.src_port and name is not None]
    return scope.names_of_types(op_pattern.types)


def find_matches(scope: Scope, pattern: Pattern, namespace_ok: Callable[[str, str], bool]
                 ) -> Iterator[dict[str, str]]:
    """Every binding of ``pattern``'s variables to leaf ops of ``scope`` (var -> op name).

    ``namespace_ok(name, choice)`` says whether the op ``name`` is in the namespace the pattern
    asks for (``source``, ``target`` or ``any``). The guard ``where`` is not run here.
    """
    ops = pattern.ops
    order = scope.position

    def extend(i: int, bound: dict[str, str]) -> Iterator[dict[str, str]]:
        if i == len(ops):
            yield dict(bound)
            return
        var, op_pattern = ops[i]
        taken = set(bound.values())
        names = _candidates(scope, pattern, var, op_pattern, bound)
        for name in sorted(set(names), key=order.__getitem__):
            if name in taken or not scope.is_leaf(name):
                continue
            if not op_pattern.accepts(scope.ops[name]) or not namespace_ok(name, op_pattern.namespace):
                continue
            bound[var] = name
            if all(_edge_holds(scope, e, bound) for e in pattern.edges
                   if e.src in bound and e.dst in bound and var in (e.src, e.dst)):
                yield from extend(i + 1, bound)
            del bound[var]

    yield from extend(0, {})
