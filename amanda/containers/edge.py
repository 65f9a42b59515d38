"""The small frozen vocabulary of connections: Port, Endpoint, Edge and SELF.

>>> Edge("f:m", "g:z")
Edge('f:m', 'g:z')
>>> Endpoint.parse("dense/MatMul:0")
Endpoint('dense/MatMul', 0)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from operator import itemgetter
from typing import Any, Union

from pyrsistent import PMap

from amanda.containers.arguments import (
    INTERPRETED_EDGE_ATTRS,
    INTERPRETED_PORT_ATTRS,
    attr_problems,
    sequence_problem,
    shown,
)
from amanda.containers.records import EdgeKey
from amanda.containers.values import EMPTY, attrs_equal, attrs_hash, freeze_attrs, views_of
from amanda.errors import ArgumentError
from amanda.keywords import positional_refused

__all__ = ["CONTROL", "SELF", "Edge", "Endpoint", "EndpointLike", "PathLike", "Port", "coerce_ports", "interpreted_ports",
           "plain_ports"]

CONTROL = -1  # the implicit control port of every container, on both sides
_UNBOUND, _CAPTURED = INTERPRETED_PORT_ATTRS


class _Self:
    """The container's own boundary, as an endpoint's ``op``."""

    __slots__ = ()
    _instance: _Self | None = None

    def __new__(cls) -> _Self:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "SELF"

    def __reduce__(self) -> str:
        return "SELF"

    def __hash__(self) -> int:
        return 0x5E1F


SELF = _Self()

PathLike = Union[str, int, tuple, _Self]  # noqa: UP007  # a runtime alias, kept for 3.10


class Port(tuple):
    """A named port with attributes (shape, dtype, ``control: true`` …).

    >>> Port("x", attrs={"shape": [1, 784]}).attrs["shape"]
    (1, 784)
    """

    __slots__ = ()

    def __new__(cls, name: str, *positional: Any, attrs: Mapping[str, Any] | None = None) -> Port:
        if positional:  # the removed Port(name, attrs)
            raise positional_refused("Port", ("attrs",), positional)
        if type(name) is not str or not name:
            raise ArgumentError.at("port", "a port name (a non-empty string)", shown(name))
        if attrs is not None and attrs.__class__ is not dict and not isinstance(attrs, Mapping):
            raise ArgumentError.at(name, "port attributes as a mapping", shown(attrs))
        try:
            frozen = freeze_attrs(attrs) if attrs else EMPTY
        except TypeError as exc:
            raise ArgumentError.at(name, "storable port attribute values", str(exc)) from None
        if attrs and cls is Port and (_UNBOUND in attrs or _CAPTURED in attrs):
            cls = _InterpretedPort  # lets a container find the ports to check without reading attrs
        return tuple.__new__(cls, (name, frozen))

    name: str = property(itemgetter(0))  # type: ignore[assignment]
    attrs: PMap = property(lambda self: views_of(self[1]))  # type: ignore[assignment]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, tuple) or len(other) != 2:
            return NotImplemented
        return self[0] == other[0] and attrs_equal(self[1], other[1])

    def __ne__(self, other: object) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self) -> int:
        return hash((self[0], attrs_hash(self[1])))

    def __reduce__(self) -> tuple:
        # a tuple subclass pickles as its items by default, which __new__ would read as a name
        return (_unpickled_port, (self[0], self[1]))

    def with_attrs(self, **attrs: Any) -> Port:
        """This port with attributes added or replaced."""
        return Port(self.name, attrs={**self.attrs, **attrs})

    def __repr__(self) -> str:
        if self[1]:
            return f"Port({self[0]!r}, attrs={dict(self[1])!r})"
        return f"Port({self[0]!r})"


class _InterpretedPort(Port):
    """A Port whose attributes hold a flag amanda reads (``unbound``, ``captured``), for the
    container to check; equal to and used like any Port."""

    __slots__ = ()


def interpreted_ports(ports: tuple[Port, ...]) -> bool:
    """Whether any of ``ports`` has an attribute amanda reads (so its values need checking).

    >>> interpreted_ports((Port("x"), Port("y", attrs={"captured": True})))
    True
    """
    return _InterpretedPort in map(type, ports)


def _unpickled_port(name: str, attrs: Any) -> Port:
    return Port(name, attrs=attrs)


def plain_ports(ports: tuple[Port, ...]) -> bool:
    """Whether no port of ``ports`` has an attribute amanda reads (the fast negation of
    :func:`interpreted_ports`: one C-level pass).

    >>> plain_ports((Port("x"), Port("y", attrs={"dtype": "float32"})))
    True
    """
    return _InterpretedPort not in map(type, ports)


def _port(value: Any) -> Port:
    if isinstance(value, Port):
        return value
    if isinstance(value, str):
        return Port(value)
    if isinstance(value, Mapping):
        return Port(value.get("name"), attrs=value.get("attrs"))  # type: ignore[arg-type]  # Port checks it
    if isinstance(value, tuple) and len(value) == 2:
        return Port(value[0], attrs=value[1])
    raise ArgumentError.at("port", "a port name, a Port or {name, attrs}", shown(value))


def coerce_ports(values: Iterable[Any]) -> tuple[Port, ...]:
    """Ports from names, Ports, ``{name, attrs}`` mappings or ``(name, attrs)`` pairs (None: none)."""
    if values is None:
        return ()
    if type(values) is tuple and all(type(v) is Port for v in values):
        return values  # type: ignore[return-value]
    if type(values) is list and all(type(v) is Port for v in values):
        return tuple(values)
    if values.__class__ is not list and values.__class__ is not tuple and sequence_problem(values, "ports", ""):
        raise ArgumentError.at("ports", "a sequence of ports", shown(values))
    return tuple(_port(v) for v in values)


def _parse_port(text: str) -> str | int:
    stripped = text.strip()
    if stripped.lstrip("-").isdigit():
        return int(stripped)
    return stripped


class Endpoint(tuple):
    """One end of an edge: ``op`` (a child name or index, a path, or SELF) and ``port``.

    ``port`` is a name, an index, or -1 for the control port.
    """

    __slots__ = ()

    def __new__(cls, op: PathLike, port: str | int) -> Endpoint:
        if isinstance(op, list):
            op = tuple(op)
        if not isinstance(port, (str, int)) or isinstance(port, bool):
            raise ArgumentError.at("endpoint", "a port name or index", shown(port))
        return tuple.__new__(cls, (op, port))

    # as written: a name, index, path or SELF; stored in a container: a tuple path or SELF
    op: Any = property(itemgetter(0))  # type: ignore[assignment]
    port: Any = property(itemgetter(1))  # type: ignore[assignment]  # a name, index or -1

    @property
    def is_control(self) -> bool:
        """Whether this endpoint is the implicit control port ``-1``."""
        return self[1] == CONTROL

    @classmethod
    def parse(cls, text: str) -> Endpoint:
        """Parse ``"op/path:port"``; a port of digits is an index, ``-1`` is control."""
        if not isinstance(text, str) or ":" not in text:
            raise ArgumentError.at("endpoint", "an endpoint string like 'op:port'", shown(text))
        op, _, port = text.rpartition(":")
        return cls(op, _parse_port(port))

    @classmethod
    def of(cls, value: EndpointLike) -> Endpoint:
        """Coerce an Endpoint, an ``(op, port)`` pair or an ``"op:port"`` string."""
        if isinstance(value, Endpoint):
            return value
        if isinstance(value, str):
            return cls.parse(value)
        if isinstance(value, (tuple, list)) and len(value) == 2:
            return cls(value[0], value[1])
        raise ArgumentError.at("endpoint", "an endpoint 'op:port' or (op, port)", shown(value))

    def __repr__(self) -> str:
        op = self[0]
        if isinstance(op, tuple):
            text = "/".join(str(p) for p in op)
            return f"Endpoint({op!r}, {self[1]!r})" if any("/" in str(p) for p in op) else (
                f"Endpoint({text!r}, {self[1]!r})"
            )
        return f"Endpoint({op!r}, {self[1]!r})"

    def __str__(self) -> str:
        op = self[0]
        if op is SELF:
            name = "SELF"
        elif isinstance(op, tuple):
            name = "/".join(str(p) for p in op)
        else:
            name = str(op)
        return f"{name}:{self[1]}"


EndpointLike = Union[Endpoint, str, tuple]  # noqa: UP007  # a runtime alias, kept for 3.10


class Edge(tuple):
    """A channel from an output port (``src``) to an input port (``dst``), with attributes.

    A control edge joins two control ports and only orders execution.
    """

    __slots__ = ()

    def __new__(
        cls, src: EndpointLike, dst: EndpointLike, *positional: Any, attrs: Mapping[str, Any] | None = None
    ) -> Edge:
        if positional:  # the removed Edge(src, dst, attrs)
            raise positional_refused("Edge", ("attrs",), positional)
        if attrs is not None and attrs.__class__ is not dict and not isinstance(attrs, Mapping):
            raise ArgumentError.at("edge", "edge attributes as a mapping", shown(attrs))
        try:
            frozen = freeze_attrs(attrs)
        except TypeError as exc:
            raise ArgumentError.at("edge", "storable edge attribute values", str(exc)) from None
        if frozen and "phase" in frozen:
            problems = attr_problems(frozen, "edge", INTERPRETED_EDGE_ATTRS, "edge attribute")
            if problems:
                raise ArgumentError.at("edge", problems[0].expected, problems[0].found)
        return tuple.__new__(cls, (Endpoint.of(src), Endpoint.of(dst), frozen))

    @classmethod
    def of(cls, value: Any) -> Edge:
        """Coerce an Edge or a ``(src, dst[, attrs])`` tuple."""
        if isinstance(value, Edge):
            return value
        if isinstance(value, (tuple, list)):
            if len(value) == 2:
                return cls(value[0], value[1])
            if len(value) == 3:
                return cls(value[0], value[1], attrs=value[2])
        raise ArgumentError.at("edge", "an Edge or (src, dst[, attrs])", shown(value))

    src: Endpoint = property(itemgetter(0))  # type: ignore[assignment]
    dst: Endpoint = property(itemgetter(1))  # type: ignore[assignment]
    attrs: PMap = property(lambda self: views_of(self[2]))  # type: ignore[assignment]

    @property
    def key(self) -> EdgeKey:
        """``(src, dst)``: what identifies the edge for tombstones."""
        return (self[0], self[1])

    @property
    def is_control(self) -> bool:
        """Whether this is a control edge: an end at a ``-1`` port.

        Containers reject edges mixing a data port with a control port, so one ``-1``
        end suffices; the other may be a named control port (``train``). An edge
        between two named control ports is known as control only by its container.
        """
        return self[0][1] == CONTROL or self[1][1] == CONTROL

    @property
    def phase(self) -> Any:
        """The phase this edge belongs to (``attrs['phase']``), or None for every phase."""
        attrs = self[2]
        # most edges carry no attributes: an empty map's length is cheap, a lookup in it is not
        return attrs.get("phase") if len(attrs) else None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, tuple) or len(other) != 3:
            return NotImplemented
        return self[0] == other[0] and self[1] == other[1] and attrs_equal(self[2], other[2])

    def __ne__(self, other: object) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self) -> int:
        return hash((self[0], self[1], attrs_hash(self[2])))

    def __repr__(self) -> str:
        if self[2] is EMPTY or not self[2]:
            return f"Edge({str(self[0])!r}, {str(self[1])!r})"
        return f"Edge({str(self[0])!r}, {str(self[1])!r}, attrs={dict(self[2])!r})"


def forward_attrs(upstream: Any, downstream: Any) -> Any:
    """Attributes of a value forwarded over two hops, the consumer's side winning;
    None when the hops belong to different phases (no such value exists)."""
    if not upstream:
        return downstream
    if not downstream:
        return upstream
    a, b = upstream.get("phase"), downstream.get("phase")
    if a is not None and b is not None and a != b:
        return None
    return upstream.update(downstream)
