"""Container: the one immutable type for ops, subgraphs and graphs.

An op is a container without children; a graph is the top container. A container
owns its children (ordered, uniquely named) and the edges between them; its
tombstones delete edges of its descendants without touching them.

>>> f = Container("F", "f", inputs=["x", "y"], outputs=["m", "n"])
>>> g = Container("G", "g", inputs=["z"], outputs=["k"])
>>> h = Container("H", "h", inputs=["hx"], outputs=["hk"], children=[f, g],
...               edges=[("f:m", "g:z"), ("h:hx", "f:x"), ("g:k", "h:hk")])
>>> [op.name for op in h]
['f', 'g']
>>> h.child("g") is g
True
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from sys import intern
from typing import Any

from pyrsistent import PMap, PVector, pvector

from amanda.containers.arguments import INTERPRETED_ATTRS, brief, check_names, expect_type, shown
from amanda.containers.display import Displayed
from amanda.containers.edge import SELF, Port, coerce_ports
from amanda.containers.identity import structural_hash, structurally_equal
from amanda.containers.values import EMPTY, ArrayViews, ScalarMap, attrs_equal, freeze_attrs, holds_arrays
from amanda.errors import ArgumentError, InvariantError, PathError, Problem
from amanda.keywords import positional_refused

__all__ = ["Container", "new_uid", "op"]

_set = object.__setattr__
_INTERPRETED_KEYS = frozenset(INTERPRETED_ATTRS)  # attribute keys whose values a constructor checks
_EMPTY_VECTOR: PVector = pvector()
_UID_PREFIX = os.urandom(6).hex()
_uid_counter = itertools.count()
_TRUSTED_FIELDS = ("type", "name", "inputs", "outputs", "controls", "children", "edges", "tombstones",
                   "_attrs", "uid", "_index", "_hash", "_cache", "_arrays", "_scalars")
# the parameters after name, keyword-only (positional values: see amanda.keywords)
_KEYWORDS = ("inputs", "outputs", "children", "edges", "tombstones", "attrs", "uid", "controls")


def new_uid() -> str:
    """A fresh identifier, unique across processes (random prefix, counter suffix)."""
    return f"{_UID_PREFIX}-{next(_uid_counter):x}"


class Container(Displayed):
    """An immutable op, subgraph or graph.

    Fields: ``type``, ``name``, ``inputs``, ``outputs``, ``controls`` (named control
    ports), ``children``, ``edges``, ``tombstones``, ``attrs`` (own attributes) and
    ``uid``; every one after ``name`` is keyword-only. Invariants are checked here, once:
    an ``InvariantError`` lists every violation with its path. ``==`` and ``hash`` are
    structural and ignore ``uid``.
    """

    __slots__ = ("_arrays", "_attrs", "_cache", "_hash", "_index", "_scalars", "children", "controls", "edges",
                 "inputs", "name", "outputs", "tombstones", "type", "uid")
    _amanda_frozen = True
    type: str | None
    name: str | None
    inputs: tuple[Port, ...]
    outputs: tuple[Port, ...]
    controls: tuple[Port, ...]
    children: PVector
    edges: PVector
    tombstones: PVector
    _attrs: PMap  # as stored; `attrs` hands out views of its arrays
    _arrays: bool | None  # whether the attributes hold arrays, found on first read
    _scalars: bool  # whether the attributes are a ScalarMap (plain scalars only), kept here for bulk reads
    uid: str
    _index: dict[str, int]
    _hash: int | None
    _cache: dict[str, Any] | None

    def __init__(
        self,
        type: str | None = None,
        name: str | None = None,
        *positional: Any,
        inputs: Iterable[Any] = (),
        outputs: Iterable[Any] = (),
        children: Iterable[Container] = (),
        edges: Iterable[Any] = (),
        tombstones: Iterable[Any] = (),
        attrs: Mapping[str, Any] | None = None,
        uid: str | None = None,
        controls: Iterable[Any] = (),
    ) -> None:
        from amanda.containers.invariants import check_container

        if positional:  # the removed positional form (type, name, inputs, outputs, ...)
            raise positional_refused("Container", _KEYWORDS, positional)

        try:
            frozen_attrs = freeze_attrs(attrs)
        except TypeError as exc:
            where = (name,) if name.__class__ is str and name else None
            if not isinstance(attrs, Mapping):
                raise ArgumentError.at(where, "attrs as a mapping of attribute names to values", shown(attrs)) from None
            raise InvariantError([Problem(where, "frozen attribute values", str(exc))]) from None
        check_names(type, name, uid)
        # a model has few distinct types: one string object each (a loaded document makes a new
        # one per op) keeps comparisons of types, as a query's type index makes, in the cache
        _set(self, "type", intern(type) if type.__class__ is str else type)
        _set(self, "name", name)
        _set(self, "inputs", coerce_ports(inputs))
        _set(self, "outputs", coerce_ports(outputs))
        _set(self, "controls", coerce_ports(controls))
        _set(self, "_attrs", frozen_attrs)
        _set(self, "_arrays", None if frozen_attrs else False)
        _set(self, "_scalars", frozen_attrs.__class__ is ScalarMap)
        _set(self, "uid", uid if uid is not None else new_uid())
        _set(self, "_hash", None)
        _set(self, "_cache", None)
        # a dict answers "any interpreted key?" at C speed and is read fast; others are read stored
        if attrs.__class__ is dict:
            checked: Mapping[str, Any] | None = None if _INTERPRETED_KEYS.isdisjoint(attrs) else attrs
        else:
            checked = frozen_attrs
        check_container(self, children, edges, tombstones, checked)

    @classmethod
    def _trusted(cls, type: str | None, name: str | None, inputs: tuple[Port, ...], outputs: tuple[Port, ...],
                 controls: tuple[Port, ...], children: PVector, edges: PVector, tombstones: PVector, attrs: PMap,
                 uid: str, index: dict[str, int]) -> Container:
        """Assemble already-checked fields (slot by slot: fast); only for transforms that re-checked them."""
        self = object.__new__(cls)
        stored = attrs._stored if attrs.__class__ is ArrayViews else attrs  # a reader's view
        s = _SLOT_SETTERS
        s[0](self, type)
        s[1](self, name)
        s[2](self, inputs)
        s[3](self, outputs)
        s[4](self, controls)
        s[5](self, children)
        s[6](self, edges)
        s[7](self, tombstones)
        s[8](self, stored)
        s[9](self, uid)
        s[10](self, index)
        s[11](self, None)
        s[12](self, None)
        s[13](self, None)
        s[14](self, stored.__class__ is ScalarMap)
        return self

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError(f"Container is immutable: cannot set {key!r}; use with_attrs(), evolve() or replace()")

    def __delattr__(self, key: str) -> None:
        raise AttributeError(f"Container is immutable: cannot delete {key!r}")

    # -- reading ---------------------------------------------------------------------------

    @property
    def is_op(self) -> bool:
        """Whether this container is a leaf op: it has no children and no edges (a container whose
        only edges join its own ports, an input passed straight to an output, is a graph)."""
        return not self.children and not self.edges

    @property
    def attrs(self) -> PMap:
        """Own attributes; each array in them is read as a fresh read-only view (ArrayViews)."""
        arrays = self._arrays
        if arrays is None:
            arrays = holds_arrays(self._attrs)
            _set(self, "_arrays", arrays)
        return ArrayViews(self) if arrays else self._attrs  # type: ignore[return-value]

    @property
    def namespace(self) -> str | None:
        """The namespace this container declares (``attrs['namespace']``).

        A child's effective namespace also depends on its ancestors: see
        :func:`amanda.containers.traverse.walk`.
        """
        return self._attrs.get("namespace")

    @property
    def input_names(self) -> tuple[str, ...]:
        """Names of the input ports, in order."""
        return tuple(p.name for p in self.inputs)

    @property
    def output_names(self) -> tuple[str, ...]:
        """Names of the output ports, in order."""
        return tuple(p.name for p in self.outputs)

    @property
    def control_names(self) -> tuple[str, ...]:
        """Names of the named control ports (``train``, ``inference`` …), in order."""
        return tuple(p.name for p in self.controls)

    def has_child(self, name: str) -> bool:
        """Whether a child of this name exists."""
        return expect_type(name, str, "name", "a child name (a string)") in self._index

    def child(self, key: str | int) -> Container:
        """The child of this name or index."""
        if isinstance(key, int) and not isinstance(key, bool):
            if 0 <= key < len(self.children):
                return self.children[key]
            raise PathError.at(self._where(), f"a child index below {len(self.children)}", str(key))
        position = self._index.get(key) if isinstance(key, str) else None
        if position is None:
            raise PathError.at(
                self._where(), f"a child named one of {list(self._index)[:20]}", repr(key)
            )
        return self.children[position]

    def child_index(self, name: str) -> int:
        """Position of the child called ``name``."""
        position = self._index.get(expect_type(name, str, "name", "a child name (a string)"))
        if position is None:
            raise PathError.at(self._where(), "an existing child", brief(name))
        return position

    def descendant(self, path: str | Sequence[str | int]) -> Container:
        """The descendant at ``path`` (a tuple of names/indexes, or a ``/`` string resolved
        as docs/design.md says: a whole child name wins, otherwise level by level)."""
        from amanda.containers.invariants import resolve_path

        resolved = resolve_path(self, path)
        if resolved is None:
            raise PathError.at(self._where(), "an existing descendant path", brief(path))
        node = self
        for name in () if resolved is SELF else resolved:
            node = node.children[node._index[name]]
        return node

    def port(self, name: str | int, side: str = "output") -> Port:
        """The input or output port with this name or index."""
        if side not in ("input", "output"):
            raise ArgumentError.at("side", "'input' or 'output'", brief(side))
        ports = self.inputs if side == "input" else self.outputs
        if isinstance(name, int):
            if 0 <= name < len(ports):
                return ports[name]
        else:
            for port in ports:
                if port.name == name:
                    return port
        raise PathError.at(self._where(), f"an {side} port among {[p.name for p in ports]}", brief(name))

    def _where(self) -> tuple[str, ...] | None:
        return (self.name,) if self.name else None

    def __iter__(self) -> Iterator[Container]:
        """Every leaf op inside, in document order (the op itself if this is an op)."""
        from amanda.containers.traverse import iter_ops

        return iter_ops(self)

    def sorted(self, skip: Callable[[Container], bool] | None = None, *,
               skip_containers: Callable[[Container], bool] | None = None) -> Iterator[Container]:
        """Leaf ops in topological order from the inputs, ties in document order; containers
        that ``skip`` accepts are yielded whole instead of entered. ``skip_containers`` is the
        original name of ``skip``, kept as an alias (give one of them)."""
        from amanda.containers.traverse import sorted_ops

        if skip_containers is not None:
            if skip is not None:
                raise ArgumentError.at("skip_containers", "one of skip and skip_containers", "both")
            skip = skip_containers
        return sorted_ops(self, skip)

    def select(self, selector: str) -> Any:
        """Query this container with a selector (see ``docs/query.md``); a Selection (the
        ``select`` engine that :mod:`amanda.query` installs)."""
        from amanda.engines import engine

        return engine("select")(self, selector)

    def __call__(self, *previous: Any) -> Any:
        """``b(a)`` is ``chain(a, b)``: this container applied to the output of ``previous``;
        applied to symbolic values of the op builder, it returns values
        (:func:`amanda.build.model.apply`, the ``apply`` engine)."""
        from amanda.containers.compose import chain

        if previous and not isinstance(previous[0], Container) and hasattr(previous[0], "producer"):
            from amanda.engines import engine

            return engine("apply")(self, *previous)

        return chain(*previous, self)

    def __rshift__(self, following: Container) -> Container:
        """``a >> b`` is ``chain(a, b)``."""
        from amanda.containers.compose import chain

        return chain(self, following)

    # -- pure updates -----------------------------------------------------------------------

    def evolve(self, **changes: Any) -> Container:
        """A container with some fields replaced (re-checked); ``self`` if nothing changes."""
        if not changes:
            return self
        fields: dict[str, Any] = {
            "type": self.type,
            "name": self.name,
            "inputs": self.inputs,
            "outputs": self.outputs,
            "children": self.children,
            "edges": self.edges,
            "tombstones": self.tombstones,
            "attrs": self._attrs,
            "uid": self.uid,
            "controls": self.controls,
        }
        unknown = set(changes) - set(fields)
        if unknown:
            raise ArgumentError.at("evolve", f"fields among {sorted(fields)}", str(sorted(unknown)))
        if all(fields[k] is v for k, v in changes.items()):
            return self
        fields.update(changes)
        return Container(**fields)

    def with_attrs(self, **attrs: Any) -> Container:
        """This container with attributes added or replaced; ``self`` if none changes.

        >>> op("Relu", "r").with_attrs() is op("Relu", "r").with_attrs() or True
        True
        """
        current = self._attrs
        try:
            frozen = freeze_attrs(attrs)
        except TypeError as exc:
            raise InvariantError([Problem(self._where(), "storable attribute values", str(exc))]) from None
        if all(k in current and attrs_equal({k: current[k]}, {k: v}) for k, v in frozen.items()):
            return self
        return self._with_own_attrs(current.update(frozen))

    def without_attrs(self, *keys: str) -> Container:
        """This container without the given attributes; ``self`` if none is present."""
        present = [k for k in keys if expect_type(k, str, "key", "an attribute name (a string)") in self._attrs]
        if not present:
            return self
        new = self._attrs
        for key in present:
            new = new.remove(key)
        return self._with_own_attrs(new)

    def _with_own_attrs(self, attrs: PMap) -> Container:
        # only the attributes amanda interprets are checked; the structure is shared as is
        from amanda.containers.arguments import attr_problems
        from amanda.containers.frames import inherit_edge_caches

        problems = attr_problems(attrs, self._where() or ())
        if problems:
            raise InvariantError(problems, f"setting attributes of {self.name or self.type or 'container'}")

        updated = Container._trusted(
            self.type, self.name, self.inputs, self.outputs, self.controls, self.children,
            self.edges, self.tombstones, attrs, self.uid, self._index,
        )
        inherit_edge_caches(updated, self)
        return updated

    def with_name(self, name: str) -> Container:
        """This container renamed (its children and edges are shared)."""
        if name == self.name:
            return self
        return self.evolve(name=name)

    # -- identity ---------------------------------------------------------------------------

    def __hash__(self) -> int:
        cached = self._hash
        if cached is None:
            cached = structural_hash(self)
        return cached

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, Container):
            return NotImplemented
        return structurally_equal(self, other)

    def __ne__(self, other: object) -> bool:
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    def __repr__(self) -> str:
        parts = [f"type={self.type!r}", f"name={self.name!r}"]
        for label, names in (
            ("inputs", self.input_names), ("outputs", self.output_names), ("controls", self.control_names)
        ):
            if names:
                parts.append(f"{label}={list(names)}")
        for label, items in (("children", self.children), ("edges", self.edges), ("tombstones", self.tombstones)):
            if items:
                parts.append(f"{label}={len(items)}")
        if self._attrs:
            parts.append(f"attrs={dict(self.attrs)!r}")
        return f"Container({', '.join(parts)})"

    def __reduce__(self) -> Any:
        raise TypeError("containers are not pickled; use amanda.dumps() (YAML/JSON) instead")

    # -- caches keyed on this immutable object ----------------------------------------------

    def _cached(self, key: str, build: Callable[[Container], Any]) -> Any:
        cache = self._cache
        if cache is None:
            cache = {}
            _set(self, "_cache", cache)
        value = cache.get(key)
        if value is None:
            value = build(self)
            cache[key] = value
        return value


_SLOT_SETTERS = tuple(getattr(Container, field).__set__ for field in _TRUSTED_FIELDS)


def op(
    type: str,
    name: str | None = None,
    inputs: Iterable[Any] = (),
    outputs: Iterable[Any] = (),
    attrs: Mapping[str, Any] | None = None,
    uid: str | None = None,
    controls: Iterable[Any] = (),
) -> Container:
    """A leaf op.

    >>> relu = op("Relu", "r", inputs=["x"], outputs=["y"])
    >>> relu.is_op, relu.input_names
    (True, ('x',))
    """
    return Container(type, name, inputs=inputs, outputs=outputs, attrs=attrs, uid=uid, controls=controls)


EMPTY_ATTRS = EMPTY
