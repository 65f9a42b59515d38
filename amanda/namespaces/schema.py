"""Op schemas: the frozen description of one op type of a namespace.

``PortSchema`` describes one input or output, ``AttrSchema`` one attribute, and ``OpSchema``
the whole op: ordered ports, attributes, type constraints and the version that introduced it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, TypeVar

import numpy as np

from amanda.containers.arguments import brief, sequence_problem, shown
from amanda.errors import Problem, SchemaError, suggest
from amanda.keywords import keyword_only_after
from amanda.namespaces.attr_types import ATTR_TYPES, attr_value_problem, coerce_default, value_key

__all__ = ["AttrSchema", "FrozenMap", "OpSchema", "PortSchema", "freeze", "members", "suggest"]

K = TypeVar("K")
V = TypeVar("V")


class FrozenMap(Mapping[K, V]):
    """A read-only, ordered, hashable mapping.

    >>> m = FrozenMap({"a": 1})
    >>> m["a"], dict(m), m == {"a": 1}
    (1, {'a': 1}, True)
    """

    __slots__ = ("_data",)

    def __init__(self, items: Mapping[K, V] | Iterable[tuple[K, V]] = ()) -> None:
        self._data: dict[K, V] = dict(items)

    def __getitem__(self, key: K) -> V:
        return self._data[key]

    def __iter__(self) -> Iterator[K]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Mapping):
            return NotImplemented
        return len(self) == len(other) and all(
            k in other and value_key(v) == value_key(other[k]) for k, v in self._data.items()
        )

    def __hash__(self) -> int:
        return hash(value_key(self._data))

    def __repr__(self) -> str:
        return f"FrozenMap({self._data!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenMap, (tuple(self._data.items()),))


def freeze(value: Any) -> Any:
    """Plain data made immutable: lists become tuples, dicts FrozenMaps, arrays read-only.

    >>> freeze({"ops": [{"name": "h"}]})
    FrozenMap({'ops': (FrozenMap({'name': 'h'}),)})
    """
    if isinstance(value, Mapping):
        return FrozenMap((k, freeze(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    if isinstance(value, np.ndarray):
        if value.flags.writeable:
            value = value.copy()
            value.setflags(write=False)
        return value
    if isinstance(value, np.generic):
        return value.item()
    return value


def _fail(problems: list[Problem], context: str) -> None:
    if not problems:
        return
    if len(problems) == 1:
        p = problems[0]
        raise SchemaError(f"{context}: {p}", path=p.path, expected=p.expected, found=p.found)
    lines = "\n".join(f"  - {p}" for p in problems)
    first = problems[0]
    raise SchemaError(f"{context}: {len(problems)} problems:\n{lines}",
                      path=first.path, expected=first.expected, found=first.found)


def _check_name(name: Any, what: str) -> None:
    if not isinstance(name, str) or not name:
        raise SchemaError.at(what, "a non-empty string", brief(name))


def members(value: Any, where: Any, kind: type | tuple[type, ...], expected: str) -> list[Any]:
    """The values of a mapping or the items of a sequence, each a ``kind``; SchemaError naming
    ``where`` and ``expected`` for anything else (a string, a number, an item of another kind)."""
    if isinstance(value, Mapping):
        items = list(value.values())
    elif sequence_problem(value, where, expected) is None:
        items = list(value)
    else:
        raise SchemaError.at(where, expected, shown(value))
    for item in items:
        if not isinstance(item, kind):
            raise SchemaError.at(where, expected, f"an item {shown(item)}")
    return items


def _constraints(value: Any, where: Any) -> FrozenMap:
    expected = "a mapping of type parameter names to lists of dtype names"
    if not isinstance(value, Mapping):
        raise SchemaError.at(where, expected, shown(value))
    for key, types in value.items():
        if not isinstance(key, str) or sequence_problem(types, where, expected) is not None \
                or not all(isinstance(t, str) for t in types):
            raise SchemaError.at(where, expected, f"{key!r}: {shown(types)}")
    return FrozenMap((k, tuple(v)) for k, v in value.items())


@keyword_only_after(1)
@dataclass(frozen=True, slots=True)
class PortSchema:
    """One input or output of an op type.

    ``variadic`` ports take ``min_arity`` or more values (only the last port may be variadic);
    ``homogeneous`` says whether those values share one type; ``type_constraint`` names a type
    parameter of the op (ONNX ``T``) or a dtype attribute (TensorFlow ``type_attr``).

    >>> PortSchema("inputs", variadic=True).variadic
    True
    """

    name: str
    _: KW_ONLY
    optional: bool = False
    variadic: bool = False
    type_constraint: str | None = None
    allowed_types: tuple[str, ...] = ()
    homogeneous: bool = True
    min_arity: int = 1

    def __post_init__(self) -> None:
        _check_name(self.name, "port name")
        object.__setattr__(self, "allowed_types", tuple(
            members(self.allowed_types, self.name, str, "allowed_types as a list of dtype names")))
        if not all(isinstance(t, str) for t in self.allowed_types):
            raise SchemaError.at(self.name, "allowed_types as strings", brief(self.allowed_types))
        if not isinstance(self.min_arity, int) or isinstance(self.min_arity, bool) \
                or self.min_arity < 0:
            raise SchemaError.at(self.name, "min_arity >= 0", brief(self.min_arity))
        for flag in ("optional", "variadic", "homogeneous"):
            if not isinstance(getattr(self, flag), bool):
                raise SchemaError.at(self.name, f"{flag} as a bool", brief(getattr(self, flag)))


@dataclass(frozen=True, slots=True, eq=False)
class AttrSchema:
    """One attribute: its name, type (see ``attr_types.ATTR_TYPES``), whether it is required,
    and its default. Defaults are stored in canonical form (tuples, read-only arrays).

    >>> AttrSchema("axes", "ints", default=[0, 1]).default
    (0, 1)
    """

    name: str
    type: str
    required: bool = False
    default: Any = None

    def __post_init__(self) -> None:
        _check_name(self.name, "attribute name")
        if not isinstance(self.type, str) or self.type not in ATTR_TYPES:
            raise SchemaError.at(self.name, "an attribute type", brief(self.type),
                                 suggest(self.type, sorted(ATTR_TYPES)))
        if not isinstance(self.required, bool):
            raise SchemaError.at(self.name, "required as a bool", brief(self.required))
        if self.default is None:
            return
        if self.required:
            raise SchemaError.at(self.name, "no default on a required attribute",
                                 f"default {brief(self.default)}")
        try:
            default = freeze(coerce_default(self.type, self.default))
        except (TypeError, ValueError, KeyError, RecursionError) as exc:
            raise SchemaError.at(self.name, f"a default of type {self.type}",
                                 f"{brief(self.default)} ({exc})") from None
        problem = attr_value_problem(self.type, default)
        if problem is not None:
            raise SchemaError.at(self.name, f"a default that is {problem}", brief(self.default))
        object.__setattr__(self, "default", default)

    def _key(self) -> tuple[Any, ...]:
        return (self.name, self.type, self.required, value_key(self.default))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AttrSchema):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())


def _ports(ports: Iterable[PortSchema | str], where: Any) -> tuple[PortSchema, ...]:
    items = members(ports, where, (PortSchema, str), "a list of port names or PortSchemas")
    return tuple(p if isinstance(p, PortSchema) else PortSchema(p) for p in items)


@keyword_only_after(1)
@dataclass(frozen=True, slots=True)
class OpSchema:
    """The schema of one op type: ports, attributes, type constraints, version.

    ``attrs`` and ``type_constraints`` may be given as mappings or (for attrs) as an iterable
    of ``AttrSchema``; ports may be given as plain names.

    >>> s = OpSchema("MatMul", inputs=["a", "b"], outputs=["product"],
    ...              attrs=[AttrSchema("transpose_a", "bool", default=False)])
    >>> s.input_names, s.attr("transpose_a").default
    (('a', 'b'), False)
    """

    type: str
    _: KW_ONLY
    domain: str = ""
    since_version: int = 1
    inputs: tuple[PortSchema, ...] = ()
    outputs: tuple[PortSchema, ...] = ()
    attrs: Mapping[str, AttrSchema] = field(default_factory=FrozenMap)
    type_constraints: Mapping[str, tuple[str, ...]] = field(default_factory=FrozenMap)
    doc: str = ""
    deprecated: bool = False
    subgraph: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        _check_name(self.type, "op type")
        context = f"op schema {self.type!r}"
        problems: list[Problem] = []
        attrs = members(self.attrs, (self.type, "attrs"), AttrSchema, "a list or mapping of AttrSchemas")
        attr_map = FrozenMap((a.name, a) for a in attrs)
        if isinstance(self.attrs, Mapping):
            for key, value in self.attrs.items():
                if key != value.name:
                    problems.append(Problem((self.type, "attrs", key),
                                            "the key to equal the attribute's name",
                                            repr(value.name)))
        constraints = _constraints(self.type_constraints, (self.type, "type_constraints"))
        object.__setattr__(self, "attrs", attr_map)
        object.__setattr__(self, "type_constraints", constraints)
        for side in ("inputs", "outputs"):
            ports = tuple(self._fill_types(p, constraints) for p in _ports(getattr(self, side), (self.type, side)))
            object.__setattr__(self, side, ports)
            problems += self._port_problems(side, ports, constraints, attr_map)
        if not isinstance(self.since_version, int) or isinstance(self.since_version, bool):
            problems.append(Problem((self.type, "since_version"), "an int",
                                    brief(self.since_version)))
        if not isinstance(self.domain, str) or not isinstance(self.doc, str):
            problems.append(Problem((self.type,), "domain and doc as strings",
                                    f"{brief(self.domain)}, {brief(self.doc)}"))
        if self.subgraph is not None:
            try:
                if not isinstance(self.subgraph, Mapping):
                    raise TypeError
                object.__setattr__(self, "subgraph", freeze(self.subgraph))
            except (TypeError, RecursionError):
                problems.append(Problem((self.type, "subgraph"), "a mapping of plain data, a few hundred levels deep "
                                        "at most", brief(self.subgraph)))
        _fail(problems, context)

    @staticmethod
    def _fill_types(port: PortSchema, constraints: Mapping[str, tuple[str, ...]]) -> PortSchema:
        # A port bound to a type parameter allows exactly that parameter's types.
        if port.type_constraint is not None and port.type_constraint in constraints \
                and not port.allowed_types:
            return dataclasses.replace(port, allowed_types=constraints[port.type_constraint])
        return port

    def _port_problems(self, side: str, ports: tuple[PortSchema, ...],
                       constraints: Mapping[str, Any], attrs: Mapping[str, Any]) -> list[Problem]:
        problems = []
        seen: set[str] = set()
        for i, port in enumerate(ports):
            where = (self.type, side, port.name)
            if port.name in seen:
                problems.append(Problem(where, "unique port names", "a duplicate"))
            seen.add(port.name)
            if port.variadic and i != len(ports) - 1:
                problems.append(Problem(where, "only the last port to be variadic",
                                        f"variadic port {i} of {len(ports)}"))
            tc = port.type_constraint
            if tc is not None and tc not in constraints and tc not in attrs:
                problems.append(Problem(where, "a type constraint or dtype attribute name",
                                        repr(tc), suggest(tc, [*constraints, *attrs])))
        return problems

    @property
    def input_names(self) -> tuple[str, ...]:
        """Names of the input ports, in order."""
        return tuple(p.name for p in self.inputs)

    @property
    def output_names(self) -> tuple[str, ...]:
        """Names of the output ports, in order."""
        return tuple(p.name for p in self.outputs)

    @property
    def required_attrs(self) -> tuple[str, ...]:
        """Names of the attributes an op must set."""
        return tuple(a.name for a in self.attrs.values() if a.required)

    def attr(self, name: str) -> AttrSchema:
        """The schema of attribute ``name``; ``SchemaError`` (with suggestions) if unknown.

        >>> OpSchema("Relu").attr("alpha")
        Traceback (most recent call last):
        ...
        amanda.errors.SchemaError: at Relu/alpha: expected an attribute of Relu (none), found 'alpha'
        """
        try:
            return self.attrs[name]
        except KeyError:
            known = ", ".join(self.attrs) or "none"
            raise SchemaError.at((self.type, name), f"an attribute of {self.type} ({known})",
                                 repr(name), suggest(name, self.attrs)) from None

    def port(self, name: str, side: str = "inputs") -> PortSchema:
        """The schema of input (or, with ``side='outputs'``, output) port ``name``.

        >>> OpSchema("Add", inputs=["A", "B"]).port("B").optional
        False
        """
        ports = self.inputs if side == "inputs" else self.outputs
        for port in ports:
            if port.name == name:
                return port
        names = [p.name for p in ports]
        raise SchemaError.at((self.type, name), f"one of the {side} of {self.type} {names}",
                             repr(name), suggest(name, names))
