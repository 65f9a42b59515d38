"""Rules: a pattern and a pure function from its match to a replacement.

``Rule(name, pattern, function)``: the function receives a :class:`Match` and returns a
:class:`Replacement`, ``None`` (no change: the match is left alone) or :class:`Skip` (the same,
with a reason that an unmatched-op error repeats). A replacement names, per variable, a
:class:`NewOp`: a variable of the pattern that it names is *updated* (same op, same uid), one it
does not name is *removed*, and a new variable is *created*. ``edges`` are the replacement's own
edges (``"g.Y -> t.data"``); ``ports`` says where a matched op's port goes for the edges that
cross the match's boundary (``{"mm.a": "g.A"}``); ``inputs`` adds input ports to the container
the match is in (``"SELF.x"`` in edges and ports). docs/mapping.md gives the full semantics.

>>> from amanda.rewrite.mapping.pattern import Pattern
>>> def relu(m):
...     return Replacement({"r": NewOp("Relu", inputs=["X"], outputs=["Y"])})
>>> Rule("relu", Pattern({"r": "Relu"}), relu).name
'relu'
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from amanda.containers.edge import Port
from amanda.errors import MappingError
from amanda.namespaces.schema import FrozenMap
from amanda.rewrite.mapping.pattern import Pattern
from amanda.rewrite.mapping.values import Far, producer

if TYPE_CHECKING:
    from amanda.containers.container import Container
    from amanda.rewrite.mapping.scope import Scope

__all__ = ["RELABEL", "Match", "NewOp", "Replacement", "Rule", "Skip"]

CONSTANT_TYPES = frozenset({"Const", "Constant"})
_CONSTANT_ATTRS = ("value", "value_float", "value_floats", "value_int", "value_ints")


@dataclass(frozen=True, slots=True)
class NewOp:
    """One op of a replacement.

    For an updated op, ``None`` fields keep what the matched op had: ``type``, ``inputs`` and
    ``outputs`` (port names or ``Port``s). Attributes: ``attrs`` are set (a None value unsets),
    over the old attributes when ``keep_attrs`` is true (the default unless ``type`` is given;
    a list keeps only those), minus ``drop_attrs``. A created op needs ``type``; its ports
    default to its schema's fixed ports in the target namespace. ``name`` defaults to the
    matched op's name (updated) or ``<first matched op>/<variable>`` (created).
    """

    type: str | None = None
    inputs: Sequence[Any] | None = None
    outputs: Sequence[Any] | None = None
    attrs: Mapping[str, Any] | None = None
    keep_attrs: bool | Sequence[str] | None = None
    drop_attrs: Sequence[str] = ()
    name: str | None = None


@dataclass(frozen=True, slots=True)
class Replacement:
    """What replaces a match: ops by variable, new edges, the boundary port map, new inputs.

    ``ports`` maps ``"var.port"`` of a matched op to where its boundary edges go: for an input,
    a ``"var.port"`` (or a list of them) of the replacement's ops; for an output, the one
    ``"var.port"`` that now produces the value, ``"SELF.x"`` (an input of the container), or an
    input ``"var.port"`` of a matched op (its producer then feeds the consumers). ``None`` drops
    the boundary edges of that port.
    """

    ops: Mapping[str, NewOp] = field(default_factory=dict)
    edges: Sequence[Any] = ()
    ports: Mapping[str, Any] = field(default_factory=dict)
    inputs: Sequence[Any] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "ops", dict(self.ops))
        for var, spec in self.ops.items():
            if not isinstance(spec, NewOp):
                raise MappingError.at(var, "a NewOp per replacement variable", type(spec).__name__)
        object.__setattr__(self, "inputs", tuple(_port(p) for p in self.inputs))


def _port(value: Any) -> Port:
    """A port from a name, a Port or ``{name, attrs}``; attributes set to None are left out."""
    if isinstance(value, Port):
        return value
    if isinstance(value, Mapping):
        attrs = {k: v for k, v in (value.get("attrs") or {}).items() if v is not None}
        return Port(str(value["name"]), attrs=attrs)
    return Port(str(value))


class _Relabel:
    """The replacement that keeps the op exactly as it is, now counted in the target namespace."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "RELABEL"


RELABEL = _Relabel()


@dataclass(frozen=True, slots=True)
class Skip:
    """A rule's 'no' with a reason (repeated in the unmatched-op error)."""

    reason: str


@dataclass(frozen=True)
class Rule:
    """A named rule: ``pattern``, ``function(match) -> Replacement | None | Skip``, the rules it
    runs after, tags, and a doc string."""

    name: str
    pattern: Pattern
    function: Callable[[Match], Any]
    apply_after: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    doc: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise MappingError.at("rule", "a non-empty rule name", repr(self.name))
        if not isinstance(self.pattern, Pattern):
            raise MappingError.at(self.name, "a Pattern", type(self.pattern).__name__)
        if not callable(self.function):
            raise MappingError.at(self.name, "a callable rule function", repr(self.function))
        object.__setattr__(self, "apply_after", tuple(self.apply_after))
        object.__setattr__(self, "tags", tuple(self.tags))

    @classmethod
    def of(cls, item: Any) -> Rule:
        """A Rule, or one from a ``(pattern, function)`` pair named after the function."""
        if isinstance(item, Rule):
            return item
        if isinstance(item, tuple) and len(item) == 2:
            pattern, function = item
            name = getattr(function, "__name__", None) or repr(function)
            return cls(name, pattern if isinstance(pattern, Pattern) else Pattern(pattern), function)
        raise MappingError.at("table", "a Rule or a (pattern, function) pair", repr(item))


class Match:
    """One binding of a rule's pattern: the captured ops and what surrounds them.

    ``m["mm"]`` is the op captured as ``mm``; ``m.view()`` is the plain-data form expressions see.
    """

    __slots__ = ("_scope", "_view", "names", "rule", "source", "target")

    def __init__(self, scope: Scope, names: Mapping[str, str], rule: Rule, source: str,
                 target: str) -> None:
        self._scope = scope
        self.names = FrozenMap(names)  # var -> op name in the container (a Far key: another level's)
        self.rule = rule
        self.source = source
        self.target = target
        self._view: dict[str, Any] | None = None

    def __getitem__(self, var: str) -> Container:
        key = self.names[var]
        return key.op if isinstance(key, Far) else self._scope.ops[key]

    def __contains__(self, var: object) -> bool:
        return var in self.names

    def path(self, var: str) -> tuple[str, ...]:
        """Path of the captured op from the root of the container being mapped."""
        key = self.names[var]
        return key.path if isinstance(key, Far) else (*self._scope.path, key)

    def constant_input(self, var: str, port: str, through: tuple[str, ...] = ("Identity", "ReadVariableOp"),
                       fold: Mapping[str, Callable[[Container, dict[str, Any]], Any]] | None = None) -> Any:
        """The array a captured op's input ``port`` always receives, else None: the ``value`` of
        the ``Const``/``Constant`` feeding it directly or through one-input ``through`` ops of
        its level (a frozen graph's ``ReadVariableOp``), or what ``fold[op type](op, arrays by
        input port)`` computes from an op all of whose inputs are such constants."""
        return self._constant(self._scope, self.names[var], port, through, fold or {}, 32)

    def _constant(self, level: Any, name: str, port: str, through: tuple[str, ...],
                  fold: Mapping[str, Callable[[Container, dict[str, Any]], Any]], depth: int) -> Any:
        found = producer(level, name, port) if depth > 0 else None
        if found is None:
            return None
        level, name, _ = found
        op, op_type = level.ops[name], level.ops[name].type or ""
        if op_type in ("Const", "Constant"):
            return op.attrs.get("value")
        if op_type in through and len(op.input_names) == 1:
            return self._constant(level, name, op.input_names[0], through, fold, depth - 1)
        if op_type in fold:
            arrays = {p: self._constant(level, name, p, through, fold, depth - 1) for p in op.input_names}
            if all(a is not None for a in arrays.values()):
                return fold[op_type](op, arrays)
        return None

    def namespace(self, var: str) -> str | None:
        """Effective namespace of the captured op."""
        key = self.names[var]
        return key.namespace if isinstance(key, Far) else self._scope.namespace_of(key)

    def producer(self, var: str, port: str) -> tuple[Container | None, str] | None:
        """``(op, output port)`` feeding input ``port`` of ``var`` (op None for the container's
        own input port), or None when the port is not fed."""
        fed = self._scope.producers(self.names[var], port)
        if not fed:
            return None
        name, out = fed[0]
        return (None if name is None else self._scope.ops[name], out)

    def constant(self, var: str, port: str) -> np.ndarray | None:
        """The value feeding input ``port`` of ``var`` when a ``Const``/``Constant`` op produces it."""
        fed = self.producer(var, port)
        if fed is None or fed[0] is None or fed[0].type not in CONSTANT_TYPES:
            return None
        attrs = fed[0].attrs
        for key in _CONSTANT_ATTRS:
            if key in attrs:
                return np.asarray(attrs[key])
        return None

    def input_attrs(self, var: str, port: str) -> Mapping[str, Any]:
        """Attributes (``dtype``, ``shape`` …) of the value feeding input ``port`` of ``var``: the
        producer's output port attributes, or the container's input port attributes."""
        fed = self._scope.producers(self.names[var], port)
        if not fed:
            return FrozenMap()
        name, out = fed[0]
        ports = self._scope.inputs if name is None else list(self._scope.ops[name].outputs)
        for candidate in ports:
            if candidate.name == out:
                return candidate.attrs
        return FrozenMap()

    def input_rank(self, var: str, port: str) -> int | None:
        """The rank of the value feeding ``port`` of ``var`` when its shape is known, else None."""
        shape = self.input_attrs(var, port).get("shape")
        return len(shape) if isinstance(shape, (tuple, list)) else None

    def feed(self, name: str, port: str) -> tuple[Container | None, str, Mapping[str, Any]] | None:
        """What feeds input ``port`` of any op ``name`` of the match's level (to look further
        upstream than the captured ops): ``(op or None for the container's input, output port,
        that port's attributes)``, or None when unfed."""
        fed = self._scope.producers(name, port)
        if not fed:
            return None
        source, out = fed[0]
        ports = self._scope.inputs if source is None else list(self._scope.ops[source].outputs)
        attrs: Mapping[str, Any] = next((p.attrs for p in ports if p.name == out), FrozenMap())
        return (None if source is None else self._scope.ops[source], out, attrs)

    def consumers(self, var: str, port: str) -> int:
        """How many inputs read output ``port`` of ``var``."""
        return len(self._scope.consumers(self.names[var], port))

    def consumers_of(self, name: str, port: str) -> int:
        """How many inputs read output ``port`` of any op ``name`` of the match's level."""
        return len(self._scope.consumers(name, port))

    def view(self) -> dict[str, Any]:
        """The captures as plain data for expressions: ``{"$m": {...}, "$source", "$target"}``."""
        if self._view is None:
            view: dict[str, Any] = {"$source": self.source, "$target": self.target}
            for var, name in self.names.items():
                view["$" + var] = self._scope.op_view(name.op if isinstance(name, Far) else name, self.path(var))
            self._view = view
        return self._view

    def __repr__(self) -> str:
        bound = ", ".join(f"{v}={n!r}" for v, n in self.names.items())
        return f"Match({self.rule.name}: {bound})"

