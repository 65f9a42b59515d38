"""Patterns: ops bound to variables plus the edges that must join them.

A pattern matches leaf ops of one container, and, through container ports, the ops of other
levels whose values reach them (read by the match, converted by their own level's rules). Each variable names an ``OpPattern`` (op
types, literal attribute values, and which namespace the op must be in); each ``EdgePattern``
(``"mm.product -> b.value"``) requires that data edge (or, with port ``-1``, that control edge).
A binding is injective. Matches come in document order of the ops bound to the variables, in the
pattern's variable order, so the driver's order is deterministic.

A pattern is matched by the rewrite engine's matcher (:mod:`amanda.rewrite.match`): when it is
made it compiles to pattern ops, each data edge an input by port name, and :class:`ScopeView`
shows the matcher the level being converted.

>>> p = Pattern({"mm": "MatMul", "b": "BiasAdd"}, ["mm.product -> b.value"])
>>> p.variables, p.edges[0]
(('mm', 'b'), EdgePattern('mm', 'product', 'b', 'value'))
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from amanda.containers.edge import SELF, Endpoint
from amanda.errors import MappingError
from amanda.namespaces.attr_types import value_key
from amanda.namespaces.schema import FrozenMap
from amanda.rewrite.mapping.values import Far, far_producer
from amanda.rewrite.match import _View, bindings
from amanda.rewrite.pattern import Output, PatternOp

if TYPE_CHECKING:
    from amanda.rewrite.mapping.scope import Scope

__all__ = ["NAMESPACE_CHOICES", "EdgePattern", "OpPattern", "Pattern", "ScopeView", "compile_pattern",
           "find_matches", "parse_endpoint"]

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
    compiled: Any = field(init=False, repr=False, compare=False)

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
        object.__setattr__(self, "compiled", compile_pattern(self))

    @property
    def variables(self) -> tuple[str, ...]:
        """The variables, in order."""
        return tuple(var for var, _ in self.ops)


def _edge_holds(scope: Scope, edge: EdgePattern, bound: Mapping[str, Any]) -> bool:
    """Whether a checked edge (control, or a second one into a port) joins the two bound ops of
    this level (an op of another level is joined by data edges only)."""
    src, dst = bound[edge.src], bound[edge.dst]
    return (src, edge.src_port) in scope.producers(dst, edge.dst_port)


@dataclass(frozen=True, slots=True)
class _Equals:
    """The attribute test of an ``OpPattern``'s literal value (a class, so patterns pickle)."""

    key: Any

    def __call__(self, found: Any) -> bool:
        return found is not None and value_key(_plain(found)) == self.key


def compile_pattern(pattern: Pattern) -> tuple[list[PatternOp], tuple[EdgePattern, ...]]:
    """``pattern`` as the rewrite engine's pattern ops: one per variable, captured under the
    variable's name (its types, attribute tests and namespace choice), each data edge an input
    by port name; the roots to anchor (the variables no edge leaves first, then any not reached
    from them) and the edges checked after binding (control edges, a second edge into a port)."""
    ports: dict[str, dict[str, Any]] = {var: {} for var in pattern.variables}
    nodes = {var: PatternOp(op.types, (), {k: _Equals(value_key(_plain(v))) for k, v in op.attrs.items()},
                            capture=var, ports=ports[var], namespace=op.namespace) for var, op in pattern.ops}
    checked: list[EdgePattern] = []
    feeds: set[str] = set()
    for edge in pattern.edges:
        if edge.is_control or edge.dst_port in ports[edge.dst]:
            checked.append(edge)
            continue
        ports[edge.dst][str(edge.dst_port)] = Output(nodes[edge.src], str(edge.src_port))
        feeds.add(edge.src)
    roots: list[PatternOp] = []
    reached: set[int] = set()
    for var in [v for v in pattern.variables if v not in feeds] + list(pattern.variables):
        if id(nodes[var]) not in reached:
            roots.append(nodes[var])
            reached |= {id(n) for n in _reach(nodes[var])}
    return roots, tuple(checked)


def _reach(node: PatternOp) -> list[PatternOp]:
    seen: dict[int, PatternOp] = {}
    stack = [node]
    while stack:
        op = stack.pop()
        if id(op) not in seen:
            seen[id(op)] = op
            stack.extend(value.op for value in (op.ports or {}).values())
    return list(seen.values())


class ScopeView(_View):
    """One container level being converted, as the rewrite engine's matcher sees it: its leaf
    children by name, in document order; an op is admitted when it is in the namespace its
    pattern op asks for (``namespace_ok(key, choice)``). Values are followed through container
    ports as the engine's ``TreeView`` follows them: a pattern op whose value comes in through
    the level's input or a nested container's output binds the leaf op of the other level that
    computes it (a :class:`Far` key), as the source model has it."""

    def __init__(self, scope: Scope, namespace_ok: Callable[[Any, str], bool]) -> None:
        self.scope = scope
        self.ops: dict[Any, Any] = scope.ops  # the level's own dict, copied once an op of another level is bound
        self.pinned: frozenset = frozenset()
        self._namespace_ok = namespace_ok

    def anchors(self, op_type: Any) -> list:
        """The leaf children of these types (any for None), in document order."""
        types = (op_type,) if isinstance(op_type, str) else op_type
        return sorted(set(self.scope.names_of_types(types)), key=self.scope.position.__getitem__)

    def admits(self, key: Any, node: Any, choice: str | None) -> bool:
        """Whether ``key`` is a leaf op (of this level, or another) in the namespace ``choice`` asks for."""
        leaf = not node.children if isinstance(key, Far) else self.scope.is_leaf(key)
        return leaf and self._namespace_ok(key, choice or "source")

    def source(self, key: Any, port: str) -> Endpoint | None:
        """The producer feeding input ``port`` of child ``key``: a sibling by name, an op of another
        level as a :class:`Far` key, else SELF (the level's input) or the nested container's port."""
        if isinstance(key, Far):
            return None  # an op of another level: matched as a leaf of the pattern only
        fed = self.scope.producers(key, port)
        if not fed:
            return None
        src, out = fed[0]
        if src is None or (isinstance(src, str) and not self.scope.is_leaf(src)):
            far = far_producer(self.scope, key, port)
            if far is not None:
                if far[0] not in self.ops:
                    self.ops = {**self.ops, far[0]: far[0].op}  # never the scope's own dict
                return Endpoint(cast(Any, far[0]), far[1])  # a Far key stands for the op
        return Endpoint(SELF if src is None else src, out)

    def order(self) -> list:
        """Children's names in document order."""
        return self.scope.names

    @staticmethod
    def key(endpoint: Endpoint) -> Any:
        """The op an endpoint belongs to (None for the level's own ports and deeper ops)."""
        return endpoint.op if isinstance(endpoint.op, (str, Far)) else None


def find_matches(scope: Scope, pattern: Pattern, namespace_ok: Callable[[Any, str], bool]
                 ) -> list[dict[str, Any]]:
    """Every binding of ``pattern``'s variables to leaf ops of ``scope`` (var -> op name, or a
    :class:`Far` key for an op of another level whose value reaches the level), found
    by the rewrite engine's matcher (:func:`amanda.rewrite.match.bindings`) and ordered by the
    ops' document positions in the pattern's variable order.

    ``namespace_ok(name, choice)`` says whether the op ``name`` is in the namespace the pattern
    asks for (``source``, ``target`` or ``any``). The guard ``where`` is not run here.
    """
    roots, checked = pattern.compiled
    view = ScopeView(scope, namespace_ok)
    if len(pattern.ops) == 1 and not checked:  # one op: the anchors, in document order already
        var = pattern.variables[0]
        return [{var: key} for ops in bindings(view, roots) for _, key in ops.values()]
    found = []
    for ops in bindings(view, roots):
        bound = {str(node.capture): key for node, key in ops.values()}
        if all(_edge_holds(scope, edge, bound) for edge in checked):
            found.append({var: bound[var] for var in pattern.variables})
    position = scope.position
    found.sort(key=lambda b: [() if isinstance(b[var], Far) else position[b[var]] for var in pattern.variables])
    return found
