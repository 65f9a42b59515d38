"""Patterns written as builder code, onnxscript style: ``op.Mul(x, op.Sigmoid(x))``.

A pattern function takes an op builder and one :class:`Var` per parameter and returns the value
its root op produces. Calling it once, when the rule is defined, gives a tree of
:class:`PatternOp` nodes; a misspelt op type, too many inputs or an attribute the op does not have
raises there (a ``SchemaError`` or ``ArgumentError`` naming the rule, with the close matches).

Inputs of a pattern op are variables (the same variable twice must be the same value), nested
pattern ops, numbers (a scalar ``Constant`` within rounding of that number), lists of numbers
(a ``Constant`` holding exactly those), :data:`ANY` (any value) or ``Optional(var)`` (the port
may be unconnected). ``const(var, ndim=...)`` asks that a ``Constant`` op produce the value
(of that rank, or one of those ranks): the rule checks it before its guard, and the replacement
finds the array in the variable's ``Value``. Keyword arguments are attribute predicates: a value
the attribute must equal (lists and tuples alike), or a function of the attribute's value
(absent: None) that returns True, such as :func:`real` (``training_mode=real(0, default=0)``).
``_as="name"`` captures the op for the guard and the replacement.

>>> def swish(op, x):
...     return op.Mul(x, op.Sigmoid(x))
>>> root, variables, captures = compile_pattern(swish, "amanda/onnx/24", "swish")
>>> root.type, variables, [type(i).__name__ for i in root.inputs]
('Mul', ('x',), ['Var', 'PatternOp'])
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from amanda.errors import ArgumentError
from amanda.namespaces.attr_types import value_key
from amanda.namespaces.namespace import namespace as lookup_namespace
from amanda.namespaces.schema import suggest

__all__ = ["ANY", "Const", "Optional", "Output", "PatternOp", "Var", "compile_pattern", "const", "constants", "parameters",
           "real"]


@dataclass(frozen=True, slots=True)
class Var:
    """A pattern variable: binds the value feeding a port (the same variable, the same value)."""

    name: str


@dataclass(frozen=True, slots=True)
class Const(Var):
    """A variable whose value a ``Constant`` op must produce, of rank ``ndim`` (an int, a tuple
    of the ranks allowed, or None: any); made by :func:`const`."""

    ndim: int | tuple[int, ...] | None = None

    def holds(self, value: Any) -> bool:
        """Whether ``value`` (a constant's array, or None when no Constant produces it) qualifies."""
        if not isinstance(value, np.ndarray):
            return False
        return self.ndim is None or value.ndim == self.ndim or (isinstance(self.ndim, tuple) and value.ndim in self.ndim)


def const(var: Var, ndim: int | tuple[int, ...] | None = None) -> Const:
    """Pattern variable ``var``, bound only to the value of a ``Constant`` op (of rank ``ndim``).

    >>> const(Var("w"), ndim=(0, 1))
    Const(name='w', ndim=(0, 1))
    """
    if not isinstance(var, Var):
        raise ArgumentError.at("const", "a pattern variable", type(var).__name__)
    ranks = ndim if isinstance(ndim, tuple) else () if ndim is None else (ndim,)
    if not all(isinstance(r, int) and not isinstance(r, bool) and r >= 0 for r in ranks):
        raise ArgumentError.at(f"const({var.name}).ndim", "None, a rank or a tuple of ranks", repr(ndim))
    return Const(var.name, ndim)


def _real(value: Any) -> float | None:
    """``value`` as a float if it is a real number (a bool, int, float, numpy scalar or 0-d array)."""
    if isinstance(value, (bool, int, float, np.integer, np.floating)) or (
            isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "biuf"):
        return float(value)
    return None


@dataclass(frozen=True, slots=True)
class real:  # noqa: N801 - an attribute predicate, written like a function in patterns
    """Attribute predicate: the attribute is a real number (a bool, int, float, numpy scalar or
    0-d array), equal to ``value`` when one is given; an absent attribute is read as ``default``
    (None: an absent attribute fails).

    >>> real(0, default=0)(None), real(0, default=0)(1), real(default=1e-5)(np.float32(0.1)), real()("a")
    (True, False, True, False)
    """

    value: float | None = None
    default: float | None = None

    def __call__(self, found: Any) -> bool:
        return self._holds(self.default if found is None else found)

    def of(self, attrs: Any, key: str) -> bool:
        """Whether attribute ``key`` of ``attrs`` qualifies: absent, it is read as ``default``;
        present, its value is (so an attribute set to None does not qualify)."""
        return self._holds(attrs[key] if key in attrs else self.default)

    def _holds(self, value: Any) -> bool:
        number = _real(value)
        return number is not None and (self.value is None or number == self.value)


@dataclass(frozen=True, slots=True)
class Optional:
    """A variable whose port may also be unconnected (then it binds None)."""

    var: Var

    def __post_init__(self) -> None:
        if not isinstance(self.var, Var):
            raise ArgumentError.at("Optional", "a pattern variable", type(self.var).__name__)


def constants(root: PatternOp) -> dict[str, Const]:
    """The :class:`Const` requirements of the pattern under ``root``, by variable name (a
    variable made constant at one input is constant everywhere: it is one value)."""
    found: dict[str, Const] = {}
    for node in root.walk():
        for value in node.inputs:
            var = value.var if isinstance(value, Optional) else value
            if isinstance(var, Const):
                found.setdefault(var.name, var)
    return found


class _Any:
    __slots__ = ()

    def __repr__(self) -> str:
        return "ANY"


#: any value, connected or not
ANY = _Any()


@dataclass(frozen=True, slots=True)
class Output:
    """The value of output ``port`` of pattern op ``op`` (a bare pattern op stands for its
    first output): how a mapping pattern's edge ``"a.y -> b.x"`` is written."""

    op: PatternOp
    port: str


@dataclass(eq=False, slots=True)
class PatternOp:
    """One op of a pattern: its type, its inputs in port order, attribute predicates, and the
    name it is captured under (None: not captured).

    A mapping table's pattern (:mod:`amanda.rewrite.mapping.pattern`) compiles to the same
    ops with three more things: ``type`` may be a tuple of alternatives or None (any type),
    ``ports`` names the inputs it constrains by port (other inputs are free) instead of
    ``inputs``, and ``namespace`` is the choice (``source``, ``target``, ``any``) the view
    admits the op under."""

    type: str | tuple[str, ...] | None
    inputs: tuple[Any, ...]
    attrs: dict[str, Any] = field(default_factory=dict)
    capture: str | None = None
    ports: dict[str, Any] | None = None
    namespace: str | None = None

    def accepts(self, node: Any) -> bool:
        """Whether ``node`` has this type (one of them) and every attribute predicate holds."""
        wanted_type = self.type
        if isinstance(wanted_type, str) or wanted_type is None:
            if wanted_type is not None and node.type != wanted_type:
                return False
        elif node.type not in wanted_type:
            return False
        for key, wanted in self.attrs.items():
            found = node.attrs.get(key)
            if isinstance(wanted, real):
                if not wanted.of(node.attrs, key):
                    return False
            elif callable(wanted):
                if not wanted(found):
                    return False
            elif found is None or value_key(found) != value_key(wanted):
                return False
        return True

    def walk(self) -> list[PatternOp]:
        """This op and every pattern op below it, each once, root first."""
        seen: dict[int, PatternOp] = {}
        stack: list[PatternOp] = [self]
        while stack:
            node = stack.pop()
            if id(node) not in seen:
                seen[id(node)] = node
                stack.extend(i for i in reversed(node.inputs) if isinstance(i, PatternOp))
        return list(seen.values())


def parameters(fn: Callable, where: str) -> tuple[str, ...]:
    """The parameter names of a rule function after its first (the op builder)."""
    if not callable(fn):
        raise ArgumentError.at(where, "a function (op, *variables)", type(fn).__name__)
    try:
        names = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        raise ArgumentError.at(where, "a function whose signature can be read", repr(fn)) from None
    if not names:
        raise ArgumentError.at(where, "a first parameter for the op builder", "no parameters")
    return tuple(names[1:])


class _PatternBuilder:
    """``op`` of a pattern function: ``op.Relu(x)`` records a :class:`PatternOp`."""

    def __init__(self, namespace: str | None, rule: str) -> None:
        self._namespace = lookup_namespace(namespace) if namespace else None
        self._rule = rule

    def __getattr__(self, op_type: str) -> Callable[..., PatternOp]:
        if op_type.startswith("_"):
            raise AttributeError(op_type)
        schema = self._namespace.schema(op_type) if self._namespace is not None else None

        def build(*inputs: Any, _as: str | None = None, **attrs: Any) -> PatternOp:
            where = f"{self._rule}/{op_type}"
            if schema is not None:
                _check_schema(schema, inputs, attrs, where)
            for value in inputs:
                if not _input(value):
                    raise ArgumentError.at(where, "inputs that are variables, pattern ops, numbers (or lists of them), "
                                           "ANY or Optional", type(value).__name__)
            if _as is not None and (not isinstance(_as, str) or not _as.isidentifier()):
                raise ArgumentError.at(where, "_as: a capture name that is an identifier", repr(_as))
            return PatternOp(op_type, tuple(inputs), attrs, _as)

        return build


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _input(value: Any) -> bool:
    """Whether ``value`` can be a pattern op's input."""
    if isinstance(value, (list, tuple)):
        return bool(value) and all(_number(v) for v in value)
    return isinstance(value, (Var, Optional, PatternOp, _Any)) or _number(value)


def _check_schema(schema: Any, inputs: tuple, attrs: dict, where: str) -> None:
    variadic = any(p.variadic for p in schema.inputs)
    if not variadic and len(inputs) > len(schema.inputs):
        raise ArgumentError.at(where, f"at most {len(schema.inputs)} inputs ({', '.join(schema.input_names)})",
                               f"{len(inputs)} inputs")
    known = list(schema.attrs)
    for key in attrs:
        if key not in schema.attrs:
            raise ArgumentError.at(f"{where}.{key}", f"an attribute of {schema.type} ({', '.join(known) or 'none'})",
                                   repr(key), suggest(key, known))


def compile_pattern(fn: Callable, namespace: str | None, rule: str) -> tuple[PatternOp, tuple[str, ...], tuple[str, ...]]:
    """The root op, variables and capture names of pattern function ``fn``; wiring mistakes
    (a variable never used, a capture named twice or like a variable, a root that is not an
    op) raise here, naming the rule."""
    names = parameters(fn, f"{rule}.pattern")
    root = fn(_PatternBuilder(namespace, rule), *(Var(n) for n in names))
    if not isinstance(root, PatternOp):
        raise ArgumentError.at(f"{rule}.pattern", "a pattern function returning an op (op.Type(...))",
                               type(root).__name__)
    used: set[str] = set()
    captures: list[str] = []
    for node in root.walk():
        for value in node.inputs:
            var = value.var if isinstance(value, Optional) else value
            if isinstance(var, Var):
                used.add(var.name)
        if node.capture is not None:
            if node.capture in captures or node.capture in names:
                raise ArgumentError.at(f"{rule}.pattern", "capture names distinct from each other and the variables",
                                       repr(node.capture))
            captures.append(node.capture)
    unused = [n for n in names if n not in used]
    if unused:
        raise ArgumentError.at(f"{rule}.pattern", "every parameter used as an input of the pattern",
                               f"{unused} unused")
    return root, names, tuple(captures)
