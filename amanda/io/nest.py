"""Assembling containers from fields valid by construction, for the importers that nest a flat
graph (``amanda.io.nest_levels``) and build ops (``amanda.io.onnx.read_graph``).

:func:`built` is ``Container(...)`` for fields an importer made valid by construction, checking
only what came from outside; :func:`renamed` and :func:`named_in_place` give a leaf op its name
in the tree; :func:`value_name` names the value an op's output port carries (the name of every
port it crosses).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from itertools import repeat
from operator import attrgetter
from typing import Any

from pyrsistent import PMap, pvector

from amanda.containers.arguments import INTERPRETED_ATTRS, attr_problems, check_names, port_problems
from amanda.containers.container import Container, new_uid
from amanda.containers.deferred import deferred
from amanda.containers.edge import Edge, Port, interpreted_ports
from amanda.containers.values import ScalarMap, freeze_attrs
from amanda.errors import InvariantError, Problem
from amanda.io.onnx.pending import PendingOp

__all__ = ["built", "named_in_place", "renamed", "value_name"]

_NO_EDGES: Any = pvector()
_NO_CHILDREN: dict[str, int] = {}  # the index of every leaf built here; never written
_INTERPRETED = frozenset(INTERPRETED_ATTRS)


_SLOTS = tuple(s for s in Container.__slots__ if s not in ("name", "_hash", "_cache"))
_set = object.__setattr__
_slots_of = attrgetter(*_SLOTS)


def renamed(op: Container, name: str) -> Container:
    """``op`` (a leaf) under another name, sharing every other field; only the name is new, so
    only the name is checked (a leaf's name appears nowhere inside it).

    >>> import amanda
    >>> relu = amanda.op("Relu", "/a/Relu", ["X"], ["Y"])
    >>> again = renamed(relu, "Relu")
    >>> (again.name, again.uid == relu.uid, again.inputs is relu.inputs)
    ('Relu', True, True)
    """
    if name == op.name:
        return op
    check_names(None, name, None)
    copy = object.__new__(Container)
    deque(map(_set, repeat(copy), _SLOTS, _slots_of(op)), 0)  # the loop runs in C: one call per op
    _set(copy, "name", name)
    _set(copy, "_hash", None)
    _set(copy, "_cache", None)
    return copy


def value_name(ops: Mapping[str, Container], op: str | None, port: str) -> str:
    """The name of the value an op's output port (or the graph's input port) carries."""
    if op is None:
        return port
    held = ops[op]
    if type(held) is PendingOp:
        return held.value_of(port) or f"{op}:{port}"
    for found in held.outputs:
        if found[0] == port:
            return found[1].get("onnx_name") or f"{op}:{port}"
    return f"{op}:{port}"


def _path(where: Any) -> tuple[str, ...]:
    return where() if callable(where) else where


def built(type: str | None, name: str | None, inputs: tuple[Port, ...], outputs: tuple[Port, ...],
          children: Sequence[Container], edges: Sequence[Edge], attrs: Mapping[str, Any], uid: str | None,
          where: Any, make: Any = None) -> Container:
    """``Container(type, name, inputs=..., outputs=..., children=..., edges=..., attrs=..., uid=...)``
    for fields that are valid by construction (unique port names; each child's name unique and
    not the container's; every edge a normal :class:`Edge` between existing ports, one into
    each input; nothing to rename), without checking all that again. Only what came from
    outside is checked: names, uid, attributes (a dict, frozen here, or a map
    :func:`~amanda.containers.values.freeze_attrs` made) and port attributes amanda interprets, and, on
    a leaf op (no children, no edges), that its port names are unique (problems reported at
    ``where``, a path or a function giving it, called only then). With ``make`` (and no
    ``children`` or ``edges``), the container's level is made by ``make()`` when first opened
    (:func:`~amanda.containers.deferred.deferred`)."""
    check_names(type, name, uid)
    frozen = _frozen(attrs, where)
    problems = attr_problems(frozen, _path(where)) if not _INTERPRETED.isdisjoint(attrs) else []
    if interpreted_ports(inputs) or interpreted_ports(outputs):
        problems += port_problems(inputs, _path(where)) + port_problems(outputs, _path(where))
    leaf = not children and not edges and make is None
    if leaf and (len(inputs) > 1 or len(outputs) > 1):
        problems += _repeated_port_names(inputs, outputs, where)
    if problems:
        raise InvariantError(problems, f"building {type or 'container'} {name!r}")
    if make is not None:
        return deferred(type, name, inputs, outputs, frozen, uid or new_uid(), make)
    if leaf:
        return Container._trusted(type, name, inputs, outputs, (), _NO_EDGES, _NO_EDGES, _NO_EDGES, frozen,
                                  uid or new_uid(), _NO_CHILDREN)
    return Container._trusted(
        type, name, inputs, outputs, (), pvector(children), pvector(edges), _NO_EDGES, frozen,
        uid or new_uid(), {child.name or "": i for i, child in enumerate(children)})


def _frozen(attrs: Mapping[str, Any], where: Any) -> Any:
    """``attrs`` frozen; a map freeze_attrs made (an attribute set the reader shares between
    ops) is kept as it is."""
    if attrs.__class__ is ScalarMap or attrs.__class__ is PMap:
        return attrs
    try:
        return freeze_attrs(attrs)
    except TypeError as exc:
        raise InvariantError([Problem(_path(where) or None, "frozen attribute values", str(exc))]) from None


def _repeated_port_names(inputs: tuple[Port, ...], outputs: tuple[Port, ...], where: Any) -> list[Problem]:
    """A problem for each side of a leaf op that names a port twice."""
    return [Problem(_path(where), "unique port names", repr([p[0] for p in ports]))
            for ports in (inputs, outputs) if len({p[0] for p in ports}) < len(ports)]


def named_in_place(op: Container, name: str) -> Container:
    """``op``, which no one but the caller has seen yet, given its final name (checked): what
    :func:`renamed` gives, without the copy."""
    if type(op) is PendingOp:
        return op.build(name)
    if name != op.name:
        _set(op, "name", name)  # checked when the names were given (the nesting's)
    return op
