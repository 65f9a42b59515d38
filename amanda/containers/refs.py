"""Attribute references: an op of a function body whose attribute is "the calling container's
attribute X" (ONNX's ``ref_attr_name``), so every call of a function shares one body object.

A reference is an :class:`AttrRef` attribute value. It is resolved where values are needed
(the executor's plan, type inference, ``validate``) by :func:`resolve_references`, which gives
the view of a model in which every call holds its own resolved copy of its body: a call is a
container with children and an ``onnx_function`` attr, and its body's references take the
call's attribute of that name, else the default its ``onnx_function`` records, else the
attribute is absent. A call inside a body may itself pass references on (its attribute is a
reference to the outer call's), and references inside If/Loop/Scan bodies held in attributes
resolve against the call around them.

>>> from amanda.containers.container import Container, op
>>> body = [op("LeakyRelu", "act", ["X"], ["Y"], {"alpha": AttrRef("slope", "float")})]
>>> call = Container("Act", "a", inputs=["X"], outputs=["Y"], children=body,
...                  edges=[("a:X", "act:X"), ("act:Y", "a:Y")], attrs={"onnx_function": {"domain": "local"}, "slope": 0.3})
>>> resolve_references(call).child("act").attrs["alpha"]
0.3
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from amanda.containers.container import Container
from amanda.errors import ArgumentError, InvariantError, Problem

__all__ = ["AttrRef", "CALL_ATTR", "has_references", "resolve_references"]

CALL_ATTR = "onnx_function"  # marks a call: its attributes bind its body's references
_HOLDS = "holds_references"  # cache key: whether a container's subtree holds an AttrRef


@dataclass(frozen=True)
class AttrRef:
    """The value of the calling container's attribute ``name``; ``type`` is its ONNX
    attribute type name (``float``, ``ints`` …), kept so that export can write it back.

    >>> AttrRef("alpha", "float") == AttrRef("alpha", "float")
    True
    """

    name: str
    type: str = ""
    _amanda_frozen: ClassVar[bool] = True  # immutable: containers store it as it is

    def __post_init__(self) -> None:
        if type(self.name) is not str or not self.name or type(self.type) is not str:
            raise ArgumentError.at("AttrRef", "a name (a non-empty string) and a type name (a string)",
                                   f"name={self.name!r}, type={self.type!r}")


def has_references(node: Container) -> bool:
    """Whether ``node``, its children or the bodies held in their attributes hold an
    :class:`AttrRef`.

    >>> from amanda.containers.container import op
    >>> has_references(op("Relu", "r")), has_references(op("Elu", "e", attrs={"alpha": AttrRef("a")}))
    (False, True)
    """
    return _Resolver().holds(node)


def resolve_references(root: Container) -> Container:
    """``root`` with every call's body references replaced by the call's values (``root``
    itself when it holds none); cached on ``root``. A reference no call encloses is an
    InvariantError naming its path."""
    found = root._cached("resolved_references", _resolve)
    return found[0] if found else root


def _resolve(root: Container) -> tuple[Container, ...]:
    resolver = _Resolver()
    try:
        result = resolver.node(root, None, ())
    except RecursionError:  # only paths to references are followed: that deep, calls nest in calls
        raise InvariantError([Problem((), "function calls with references nested at most a few hundred deep",
                                      "deeper nesting")]) from None
    if resolver.problems:
        raise InvariantError(resolver.problems)
    return () if result is root else (result,)  # no cache entry pointing back at root itself


def _bodies(value: Any) -> bool:
    return isinstance(value, Container) or (
        isinstance(value, tuple) and bool(value) and all(isinstance(v, Container) for v in value))


class _Resolver:
    def __init__(self) -> None:
        self.seen: dict[int, tuple[Container, bool]] = {}  # id -> (node, holds): bodies are shared
        self.problems: list[Problem] = []

    def holds(self, node: Container) -> bool:
        seen = self.seen
        stack = [(node, False)]
        while stack:  # post-order without recursion: containers may nest thousands deep
            item, expanded = stack.pop()
            if id(item) in seen:
                continue
            known = item._cache.get(_HOLDS) if item._cache else None
            if known is not None:  # a container already scanned: immutable, so its answer holds
                seen[id(item)] = (item, known)
                continue
            parts = _parts(item)
            if not expanded:
                stack.append((item, True))
                stack.extend((p, False) for p in parts if id(p) not in seen)
                continue
            result = any(isinstance(v, AttrRef) for v in item._attrs.values()) or any(seen[id(p)][1] for p in parts)
            seen[id(item)] = (item, result)
            if parts:
                # kept on the container (not on each leaf): after an edit only the containers
                # on the edited path are new, so the scan costs the path, not the model
                item._cached(_HOLDS, _holds if result else _holds_not)
        return seen[id(node)][1]

    def node(self, node: Container, binding: Mapping | None, path: tuple) -> Container:
        if not self.holds(node):
            return node
        attrs = dict(node._attrs)
        for key, value in node._attrs.items():
            if isinstance(value, AttrRef):
                if binding is None:
                    self.problems.append(Problem(path, f"attribute {key!r} inside a function call's body",
                                                 f"a reference to {value.name!r} outside any call"))
                elif value.name in binding:
                    attrs[key] = binding[value.name]
                else:
                    del attrs[key]  # the call gives no value and there is no default
            elif _bodies(value):
                new = tuple(self.node(b, binding, (*path, key)) for b in _tuple(value))
                attrs[key] = new[0] if isinstance(value, Container) else new
        kids: Any = node.children
        if kids:
            inner = binding
            info = attrs.get(CALL_ATTR)
            if isinstance(info, Mapping):  # a call binds its body's references to its own values
                defaults = info.get("defaults")
                inner = {**(defaults if isinstance(defaults, Mapping) else {}), **attrs}
            kids = tuple(self.node(c, inner, (*path, c.name)) for c in kids)
        return node.evolve(children=kids, attrs=attrs)


def _holds(_: Container) -> bool:
    return True


def _holds_not(_: Container) -> bool:
    return False


def _parts(node: Container) -> list[Container]:
    """The children of ``node`` and the bodies its attributes hold."""
    parts = list(node.children)
    for value in node._attrs.values():
        if _bodies(value):
            parts.extend(_tuple(value))
    return parts


def _tuple(value: Any) -> tuple:
    return (value,) if isinstance(value, Container) else value
