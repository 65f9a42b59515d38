"""Containers whose level is made when first opened: an importer's module containers.

An import that rebuilds a model's module tree knows every module container's type, name,
ports, attributes and uid as soon as its ops are placed, but most programs open few of the
levels it builds. :func:`deferred` makes such a container with everything but its children and
edges; the first read of ``children``, ``edges`` or the child index (``child``, iterating,
``select``, ``validate``, ``==``, ``hash``, a Session ...) calls the ``make`` it was given,
stores what it returns, and turns the object into a plain :class:`Container` (its class is
swapped), so every later read is a plain slot read and nothing can tell it from a container
built at once: equality, hashing, uids and invariants are those of the eager container, since
``make`` builds exactly its children and edges (fields valid by construction, as
``amanda.io.nest.built`` assembles them). Containers are immutable, so when the level is made
does not change what it holds. Opening is serialised by a lock, so two threads opening one
level see the same children.

>>> import amanda
>>> from amanda.containers.values import EMPTY
>>> relu = amanda.op("Relu", "r", inputs=["x"], outputs=["y"])
>>> eager = amanda.Container("Block", "b", inputs=["x"], outputs=["y"], children=[relu],
...                          edges=[("b:x", "r:x"), ("r:y", "b:y")])
>>> def make():
...     return [relu], eager.edges
>>> block = deferred("Block", "b", (Port("x"),), (Port("y"),), EMPTY, "u1", make)
>>> is_deferred(block), block.child("r") is relu, is_deferred(block), type(block).__name__, block == eager
(True, True, False, 'Container', True)
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from pyrsistent import PMap, pvector

from amanda.containers.container import Container
from amanda.containers.edge import Port

__all__ = ["deferred", "is_deferred", "open_level"]

_SLOTS: Any = vars(Container)  # the slots themselves, under the properties below
_CHILDREN, _EDGES, _INDEX = _SLOTS["children"], _SLOTS["edges"], _SLOTS["_index"]
_NO_VECTOR: Any = pvector()
_LOCK = threading.RLock()
_set = object.__setattr__

Make = Callable[[], tuple[Sequence[Container], Sequence[Any]]]


def deferred(type: str | None, name: str | None, inputs: tuple[Port, ...], outputs: tuple[Port, ...],
             attrs: PMap, uid: str, make: Make) -> Container:
    """A container of these fields whose children and edges ``make()`` returns when first read
    (children as containers, edges as :class:`Edge` values as a container holds them: its own
    ports as ``SELF``). The fields must be valid by construction, as for
    ``Container._trusted``: nothing is checked."""
    made = Container._trusted.__func__(  # type: ignore[attr-defined]
        _Deferred, type, name, inputs, outputs, (), _NO_VECTOR, _NO_VECTOR, _NO_VECTOR, attrs, uid, {})
    _CHILDREN.__set__(made, make)  # held until opened; the property reads never return it
    return made


def is_deferred(container: Container) -> bool:
    """Whether ``container``'s own level has not been made yet (its children's may not be
    either: each level is made when it is opened)."""
    return type(container) is _Deferred


def open_level(container: Container) -> Container:
    """Make ``container``'s level now if it is deferred; ``container`` (a plain Container)."""
    if type(container) is _Deferred:
        _open(container)
    return container


def _open(container: Container) -> None:
    with _LOCK:
        if type(container) is not _Deferred:
            return  # another thread opened it while this one waited
        make = _CHILDREN.__get__(container)
        children, edges = make()
        children = pvector(children)
        _CHILDREN.__set__(container, children)
        _EDGES.__set__(container, pvector(edges))
        _INDEX.__set__(container, {child.name or "": i for i, child in enumerate(children)})
        _set(container, "__class__", Container)


class _Deferred(Container):
    """A Container whose level is not made yet (see the module docstring); never seen as
    anything but a Container once opened."""

    __slots__ = ()

    @property
    def children(self) -> Any:  # type: ignore[override]
        _open(self)
        return _CHILDREN.__get__(self)

    @property
    def edges(self) -> Any:  # type: ignore[override]
        _open(self)
        return _EDGES.__get__(self)

    @property
    def _index(self) -> Any:  # type: ignore[override]
        _open(self)
        return _INDEX.__get__(self)

