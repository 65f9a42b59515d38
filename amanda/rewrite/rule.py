"""A rewrite rule: a pattern function, a replacement function over the same variables, a guard.

``Rule("swish", lambda op, x: op.Mul(x, op.Sigmoid(x)), lambda op, x: op.Swish(x))`` compiles
the pattern when it is made (see :mod:`amanda.rewrite.pattern`) and checks that the
replacement's parameters are variables or captures of the pattern. The replacement runs per
match: it receives the op builder, each variable as a :class:`Value` (its source and, when a
``Constant`` produces it, its array), each capture as the op captured, and a parameter named
``match`` the :class:`~amanda.rewrite.match.Match` itself (its ``context`` comes from the driver).
It may also return one of its values: the match then passes that value on (``Identity(x)`` -> x). It returns
``op.Type(inputs..., attrs...)``: inputs are values, other ``op`` calls, arrays or numbers (new
``Constant`` ops) or None; ``_like=captured_op`` keeps that op (its name, uid and attributes)
with new inputs, and ``_ports=(inputs, outputs)`` names the ports of an op type the rule's
namespace does not define.

>>> rule = Rule("swish", lambda op, x: op.Mul(x, op.Sigmoid(x)), lambda op, x: op.Swish(x))
>>> rule.variables, rule.root.type
(('x',), 'Mul')
>>> Rule("bad", lambda op, x: op.Relu(x), lambda op, y: op.Relu(y))  # doctest: +ELLIPSIS
Traceback (most recent call last):
amanda.errors.ArgumentError: at bad.replacement: expected parameters among ... (x, match), found 'y'
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

import numpy as np

from amanda.containers.edge import Endpoint
from amanda.errors import ArgumentError
from amanda.namespaces.namespace import namespace as lookup_namespace
from amanda.namespaces.schema import suggest
from amanda.rewrite.match import Match
from amanda.rewrite.pattern import Const, PatternOp, compile_pattern, constants, parameters

__all__ = ["NewOp", "Requirements", "Rule", "Value", "replacement_of"]

#: the namespace patterns and replacements are checked against by default (the newest ONNX opset)
CHECKED_NAMESPACE = "amanda/onnx/24"


@dataclass(frozen=True, slots=True)
class Value:
    """A variable's binding: the endpoint feeding it (None: an Optional port left unconnected)
    and, when a ``Constant`` op produces it, its array."""

    name: str
    source: Endpoint | None
    value: np.ndarray | None


@dataclass(eq=False, slots=True)
class NewOp:
    """One op of a replacement: type, inputs (Values, NewOps, arrays or None), attributes, the
    captured op it keeps (``like``) and its port names."""

    type: str
    inputs: tuple[Any, ...]
    attrs: dict[str, Any] = field(default_factory=dict)
    like: Any = None
    ports: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())


class _ReplacementBuilder:
    def __init__(self, namespace: str | None, rule: str) -> None:
        self._namespace = lookup_namespace(namespace) if namespace else None
        self._rule = rule

    def __getattr__(self, op_type: str) -> Callable[..., NewOp]:
        if op_type.startswith("_"):
            raise AttributeError(op_type)

        def build(*inputs: Any, _like: Any = None, _ports: Any = None, **attrs: Any) -> NewOp:
            where = f"{self._rule}.replacement/{op_type}"
            if _ports is None:
                _ports = self._ports(op_type, _like, len(inputs), where)
            ins, outs = (tuple(str(p) for p in names) for names in _ports)
            if len(inputs) > len(ins) or not outs:
                raise ArgumentError.at(where, f"at most {len(ins)} inputs ({', '.join(ins)}) and an output",
                                       f"{len(inputs)} inputs")
            return NewOp(op_type, tuple(inputs), attrs, _like, (ins, outs))

        return build


    def _ports(self, op_type: str, like: Any, count: int, where: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The schema's port names, or those of the op kept (``like``), completed from the schema."""
        schema = self._namespace.schema(op_type) if self._namespace is not None else None
        if like is not None and like.type == op_type:
            ins = tuple(p.name for p in like.inputs)
            if count > len(ins) and schema is not None:
                ins += tuple(schema.input_names[len(ins):count])
            return ins, tuple(p.name for p in like.outputs)
        if schema is None:
            raise ArgumentError.at(where, "_ports=(inputs, outputs) for a rule without a namespace", "none")
        return tuple(schema.input_names), tuple(schema.output_names)


@dataclass(frozen=True, eq=False)
class Rule:
    """A named rewrite: ``pattern(op, *vars)``, ``replacement(op, *names)`` (None: the match is
    only grouped, as a container of the rule's name), ``guard(match) -> bool``, the namespace
    op types are checked in (None: unchecked), whether commutative ops match either way, and
    whether the pattern's op types and attributes are checked against the namespace now
    (``check=False``: for rules made while amanda is imported, which must build no namespace;
    :meth:`checked` runs the check later, as the tests of amanda's own rules do).

    A pattern's ``const(...)`` requirements (:func:`~amanda.rewrite.pattern.const`) are part of
    the guard: ``rule.guard`` checks them first, then calls the guard given (``rule.given``).

    >>> from amanda.rewrite.pattern import const
    >>> rule = Rule("scaled", lambda op, x, s: op.Mul(x, const(s, ndim=0)))
    >>> rule.guard, rule.constants
    (Requirements(const=('s',), then=None), {'s': Const(name='s', ndim=0)})
    """

    name: str
    pattern: Callable[..., Any]
    replacement: Callable[..., Any] | None = None
    _: KW_ONLY
    guard: Callable[[Match], bool] | None = None
    namespace: str | None = CHECKED_NAMESPACE
    commute: bool = True
    check: bool = True
    root: PatternOp = field(init=False, repr=False)
    variables: tuple[str, ...] = field(init=False, repr=False)
    captures: tuple[str, ...] = field(init=False, repr=False)
    constants: dict[str, Const] = field(init=False, repr=False)
    given: Callable[[Match], bool] | None = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ArgumentError.at("Rule", "a rule name that is an identifier", repr(self.name))
        if self.namespace is not None and not isinstance(self.namespace, str):
            raise ArgumentError.at(f"{self.name}.namespace", "a namespace name or None", type(self.namespace).__name__)
        for flag in ("commute", "check"):
            if not isinstance(getattr(self, flag), bool):
                raise ArgumentError.at(f"{self.name}.{flag}", "True or False", type(getattr(self, flag)).__name__)
        if self.guard is not None and not callable(self.guard):
            raise ArgumentError.at(f"{self.name}.guard", "a function of the match", type(self.guard).__name__)
        root, variables, captures = compile_pattern(self.pattern, self.namespace if self.check else None, self.name)
        object.__setattr__(self, "root", root)
        object.__setattr__(self, "variables", variables)
        object.__setattr__(self, "captures", captures)
        object.__setattr__(self, "constants", constants(root))
        # a guard already wrapped (dataclasses.replace of a rule) is unwrapped, so it runs once
        object.__setattr__(self, "given", self.guard.then if isinstance(self.guard, Requirements) else self.guard)
        if self.constants:
            object.__setattr__(self, "guard", Requirements(tuple(self.constants.values()), self.given))
        if self.replacement is not None:
            known = [*variables, *captures, "match"]
            for name in parameters(self.replacement, f"{self.name}.replacement"):
                if name not in known:
                    raise ArgumentError.at(f"{self.name}.replacement",
                                           f"parameters among the pattern's variables and captures ({', '.join(known)})",
                                           repr(name), suggest(name, known))


    def checked(self) -> Rule:
        """This rule, its pattern checked against its namespace (a ``SchemaError`` or
        ``ArgumentError`` for an op type or attribute the namespace does not have)."""
        if self.namespace is not None:
            compile_pattern(self.pattern, self.namespace, self.name)
        return self


@dataclass(frozen=True, slots=True)
class Requirements:
    """A rule's guard when its pattern has ``const`` variables: each is produced by a
    ``Constant`` of an allowed rank (an Optional one may also be unconnected), then the
    guard given (``then``) holds."""

    const: tuple[Const, ...]
    then: Callable[[Match], bool] | None = None

    def __call__(self, match: Match) -> bool:
        for var in self.const:
            if match.values.get(var.name) is not None and not var.holds(match.constant(var.name)):
                return False
        return self.then is None or self.then(match)

    def __repr__(self) -> str:
        return f"Requirements(const={tuple(v.name for v in self.const)!r}, then={self.then!r})"


def _checked(rules: Any) -> list[Rule]:
    items = [rules] if isinstance(rules, Rule) else rules
    if not isinstance(items, Sequence) or isinstance(items, str) or not all(isinstance(r, Rule) for r in items):
        raise ArgumentError.at("rules", "a Rule or a list of Rules", type(rules).__name__)
    return list(items)


def replacement_of(match: Match) -> NewOp | Value | None:
    """The replacement ``match``'s rule builds for it: new ops, or one of the pattern's values
    to pass on (None when the rule has no replacement)."""
    rule = match.rule
    if rule.replacement is None:
        return None
    args: list[Any] = []
    for name in parameters(rule.replacement, f"{rule.name}.replacement"):
        if name == "match":
            args.append(match)
        elif name in rule.captures:
            args.append(match.op(name))
        else:
            args.append(Value(name, match.values.get(name), match.constant(name)))
    found = rule.replacement(_ReplacementBuilder(rule.namespace, rule.name), *args)
    if not isinstance(found, (NewOp, Value)):
        raise ArgumentError.at(f"{rule.name}.replacement", "a replacement returning an op (op.Type(...)) or a value",
                               type(found).__name__)
    return found
