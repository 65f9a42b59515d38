"""Invariants checked when a container is built, and endpoint resolution.

Every violation is collected and raised once as an ``InvariantError`` naming the
offending path. Edges and tombstones are stored normalised: ``op`` is a tuple of
child names (or SELF) and ``port`` a port name or -1.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from pyrsistent import pvector

from amanda.containers import frames
from amanda.containers.arguments import (
    INTERPRETED_EDGE_ATTRS,
    attr_problems,
    port_problems,
    sequence_problem,
)
from amanda.containers.edge import CONTROL, SELF, Edge, Endpoint, interpreted_ports, plain_ports
from amanda.errors import InvariantError, Problem

if TYPE_CHECKING:
    from amanda.containers.container import Container

_new_tuple = tuple.__new__
_EMPTY: Any = pvector()
_NO_CHILDREN: dict[str, int] = {}  # shared by every leaf; never written
DATA, CONTROL_KIND = "data", "control"


# -- resolution -----------------------------------------------------------------------------


def resolve_path(container: Container, op: Any) -> tuple[str, ...] | Any | None:
    """Resolve an endpoint's ``op`` to a tuple of child names, SELF, or None if missing.

    A string is a child name, the container's own name (SELF), or a ``/`` path: a
    whole name that matches a child wins, otherwise it is split at ``/`` and resolved
    level by level. A tuple is an exact path; an int is a child index.
    """
    index = container._index
    kind = type(op)
    if kind is tuple and len(op) == 1 and op[0] in index:
        return op  # the common case: an exact one-level path
    if kind is str and op in index:
        return (op,)
    if op is SELF or op is None:
        return SELF
    if isinstance(op, str):
        if op in index:
            return (op,)
        if op == container.name:
            return SELF
        return _split_resolve(container, op.split("/")) if "/" in op else None
    if isinstance(op, int) and not isinstance(op, bool):
        children = container.children
        return (children[op].name,) if 0 <= op < len(children) else None
    if isinstance(op, (tuple, list)):
        return _sequence_resolve(container, op) if op else SELF
    return None


def _sequence_resolve(container: Container, op: tuple | list) -> tuple[str, ...] | None:
    """A path given as a sequence of child names and indexes, level by level."""
    node, names = container, []
    for part in op:
        if isinstance(part, int) and not isinstance(part, bool):
            if not 0 <= part < len(node.children):
                return None
            node = node.children[part]
        elif isinstance(part, str) and part in node._index:
            node = node.children[node._index[part]]
        else:
            return None
        names.append(node.name)
    return tuple(names)


def _split_resolve(node: Container, parts: list[str]) -> tuple[str, ...] | None:
    # longest prefix first, so a child whose own name contains '/' wins
    for cut in range(len(parts), 0, -1):
        head = "/".join(parts[:cut])
        position = node._index.get(head)
        if position is None:
            continue
        if cut == len(parts):
            return (head,)
        rest = _split_resolve(node.children[position], parts[cut:])
        if rest is not None:
            return (head, *rest)
    return None


def descend(container: Container, path: Any) -> Container:
    """The container at a resolved path (SELF is the container itself)."""
    if path is SELF:
        return container
    if len(path) == 1:
        return container.children[container._index[path[0]]]
    node = container
    for name in path:
        node = node.children[node._index[name]]
    return node


def resolve_port(target: Container, port: Any, side: str, is_self: bool) -> tuple[Any, str] | None:
    """Normalise a port for one end of an edge; None if it does not exist there.

    ``side`` is ``"src"`` or ``"dst"``. A source is an output of a descendant or an input
    of SELF; a destination the reverse. Named control ports are sources on a child and
    destinations on SELF.
    """
    if port == CONTROL:
        return CONTROL, CONTROL_KIND
    reads_inputs = is_self == (side == "src")
    ports = target.inputs if reads_inputs else target.outputs
    if isinstance(port, int) and not isinstance(port, bool):
        if 0 <= port < len(ports):
            return ports[port].name, DATA
        return None
    for candidate in ports:
        if candidate[0] == port:
            return port, DATA
    if (side == "dst") == is_self:
        for candidate in target.controls:
            if candidate[0] == port:
                return port, CONTROL_KIND
    return None


def describe_ports(target: Container, side: str, is_self: bool) -> str:
    """What a port at one end (``side`` ``"src"`` or ``"dst"``) of an edge on ``target`` may be."""
    reads_inputs = is_self == (side == "src")
    kind = "input" if reads_inputs else "output"
    names = [p.name for p in (target.inputs if reads_inputs else target.outputs)]
    owner = "the container itself" if is_self else repr(target.name)
    return f"an {kind} port of {owner} ({', '.join(names) or 'none'}) or -1"


# -- the checks -----------------------------------------------------------------------------


def check_container(
    self: Container, children: Iterable[Container], edges: Iterable[Any], tombstones: Iterable[Any],
    attrs: Any = None,
) -> None:
    """Set ``children``, ``edges`` and ``tombstones`` on a container under construction,
    normalised, or raise one InvariantError listing every violation. ``attrs`` is the
    attribute mapping to check for values amanda interprets (None: nothing to check)."""
    set_field = object.__setattr__
    try:
        leaf = not children and not edges and not tombstones
    except ValueError:  # an array has no truth value: the checks below refuse it by name
        leaf = False
    if leaf:
        _check_leaf(self, attrs)
        return
    here = (self.name,) if self.name else ()
    problems: list[Problem] = []
    _check_interpreted(self, here, problems, attrs)
    children, edges, tombstones = _sequences(here, problems, children, edges, tombstones)
    kids, index = _named_children(self, here, problems, children)
    if len(self.inputs) > 1 or len(self.outputs) > 1 or self.controls:
        _check_ports(self, here, problems)
    set_field(self, "children", pvector(kids) if kids else _EMPTY)
    set_field(self, "_index", index)
    if problems:
        raise InvariantError(problems, _context(self))
    normalised_edges = _normalise_edges(self, edges, here, problems)
    set_field(self, "edges", pvector(normalised_edges))
    normalised_tombstones = _normalise_tombstones(self, tombstones, here, problems)
    set_field(self, "tombstones", pvector(normalised_tombstones))
    _check_single_producer(self, normalised_edges, here, problems)
    if problems:
        raise InvariantError(problems, _context(self))


def _sequences(here: tuple, problems: list[Problem], *values: Any) -> list:
    """``children``, ``edges`` and ``tombstones`` where each is a sequence, else empty (with
    a problem for each that is something else)."""
    checked = []
    for field, value in zip(("children", "edges", "tombstones"), values):
        wrong = sequence_problem(value, (*here, field), f"a sequence of {field}") if value is not None else None
        if wrong is not None:
            problems.append(wrong)
        checked.append(() if value is None or wrong is not None else value)
    return checked


def _named_children(self: Container, here: tuple, problems: list[Problem],
                    children: Iterable[Any]) -> tuple[list, dict[str, int]]:
    """The children, each named (a fresh name for an unnamed one), and the index of their
    names; a problem for a non-container, a name used twice or the parent's own name."""
    from amanda.containers.container import Container

    kids = list(children)
    index: dict[str, int] = {}
    for position, kid in enumerate(kids):
        if not isinstance(kid, Container):
            problems.append(Problem((*here, f"[{position}]"), "a Container child", type(kid).__name__))
            continue
        if kid.name is None:
            kid = kid.with_name(_fresh_name(kid, position, index))
            kids[position] = kid
        name: str = kid.name  # type: ignore[assignment]  # named just above
        if name in index:
            problems.append(Problem((*here, kid.name), "unique child names", f"{kid.name!r} twice"))
        elif kid.name == self.name:
            problems.append(
                Problem((*here, kid.name), "no child named like its parent", f"child {kid.name!r}",
                        "the parent's name addresses its own ports in edges")
            )
        index[name] = position
    return kids, index


def _check_leaf(self: Container, attrs: Any) -> None:
    # a leaf op: only its ports and interpreted attributes can be wrong
    set_field = object.__setattr__
    set_field(self, "children", _EMPTY)
    set_field(self, "_index", _NO_CHILDREN)
    set_field(self, "edges", _EMPTY)
    set_field(self, "tombstones", _EMPTY)
    found: list[Problem] = []
    if len(self.inputs) > 1 or len(self.outputs) > 1 or self.controls:
        _check_ports(self, (self.name,) if self.name else (), found)
    if attrs or not plain_ports(self.inputs) or not plain_ports(self.outputs) or self.controls:
        _check_interpreted(self, (self.name,) if self.name else (), found, attrs)
    if found:
        raise InvariantError(found, _context(self))


def _context(self: Container) -> str:
    return f"building {self.type or 'container'} {self.name!r}" if self.name else f"building {self.type or 'container'}"


def _fresh_name(kid: Container, position: int, taken: dict[str, int]) -> str:
    base = kid.type or "op"
    name = f"{base}_{position}"
    while name in taken:
        name = f"{name}_"
    return name




def _check_interpreted(self: Container, here: tuple, problems: list[Problem], attrs: Any) -> None:
    # values amanda reads itself are checked where they enter, not where they are used: ``attrs``
    # is the mapping to check (the caller's dict when it holds a checked key, the stored
    # attributes when the constructor could not tell cheaply, or None)
    if attrs:
        problems += attr_problems(attrs, here)
    inputs, outputs, controls = self.inputs, self.outputs, self.controls
    if interpreted_ports(inputs) or interpreted_ports(outputs) or (controls and interpreted_ports(controls)):
        for ports in (inputs, outputs, controls):
            problems += port_problems(ports, here)


def _check_ports(self: Container, here: tuple, problems: list[Problem]) -> None:
    for label, ports in (("input", self.inputs), ("output", self.outputs), ("control", self.controls)):
        seen: set[str] = set()
        for port in ports:
            if port.name in seen:
                problems.append(Problem((*here, port.name), f"unique {label} port names", f"{port.name!r} twice"))
            seen.add(port.name)
    data = {p.name for p in self.inputs} | {p.name for p in self.outputs}
    for port in self.controls:
        if port.name in data:
            problems.append(Problem((*here, port.name), "a control port name distinct from data ports", repr(port.name)))


def _normalise_edges(self: Container, edges: Iterable[Any], here: tuple, problems: list[Problem]) -> list[Edge]:
    out: list[Edge] = []
    for number, raw in enumerate(edges):
        where = (*here, f"edges[{number}]")
        try:
            edge = raw if type(raw) is Edge else Edge.of(raw)
        except (TypeError, ValueError) as exc:
            problems.append(Problem(where, "an edge (src, dst)", str(exc)))
            continue
        if edge[2]:
            found = attr_problems(edge[2], where, INTERPRETED_EDGE_ATTRS, "edge attribute")
            if found:
                problems += found
                continue
        normal = normalise_edge(self, edge, where, problems)
        if normal is not None:
            out.append(normal)
    return out


def normalise_edge(self: Container, edge: Edge, where: tuple, problems: list[Problem]) -> Edge | None:
    """``edge`` with both ends resolved in ``self`` (op paths as tuples or SELF, ports as names or
    -1), or None after appending to ``problems`` (at ``where``) why it cannot be."""
    src, dst = edge[0], edge[1]
    src_path = resolve_path(self, src[0])
    dst_path = resolve_path(self, dst[0])
    if src_path is None or dst_path is None:
        for label, end, path in (("source", src, src_path), ("destination", dst, dst_path)):
            if path is None:
                problems.append(Problem(where, f"a {label} op that exists (child name, index or path)", repr(end[0])))
        return None
    src_self, dst_self = src_path is SELF, dst_path is SELF
    src_target = descend(self, src_path)
    dst_target = descend(self, dst_path)
    src_port = resolve_port(src_target, src[1], "src", src_self)
    dst_port = resolve_port(dst_target, dst[1], "dst", dst_self)
    if src_port is None or dst_port is None:
        if src_port is None:
            problems.append(Problem(where, describe_ports(src_target, "src", src_self), repr(src[1])))
        if dst_port is None:
            problems.append(Problem(where, describe_ports(dst_target, "dst", dst_self), repr(dst[1])))
        return None
    if src_port[1] != dst_port[1]:
        problems.append(Problem(where, "both ends data ports or both control ports", f"{src} -> {dst}"))
        return None
    if src_path is src[0] and src_port[0] is src[1] and dst_path is dst[0] and dst_port[0] is dst[1]:
        return edge
    return _new_tuple(
        Edge,
        (_new_tuple(Endpoint, (src_path, src_port[0])), _new_tuple(Endpoint, (dst_path, dst_port[0])), edge[2]),
    )


def _normalise_tombstones(self: Container, tombstones: Iterable[Any], here: tuple, problems: list[Problem]) -> list[Edge]:
    out: list[Edge] = []
    for number, raw in enumerate(tombstones):
        where = (*here, f"tombstones[{number}]")
        try:
            edge = Edge.of(raw)
        except (TypeError, ValueError) as exc:
            problems.append(Problem(where, "a tombstone edge (src, dst)", str(exc)))
            continue
        found = frames.find_buried(self, edge)
        if found is None:
            problems.append(Problem(where, "an edge of a descendant to delete", f"no edge {edge[0]} -> {edge[1]} below"))
        else:
            out.append(found)
    return out


# -- one live producer per input port --------------------------------------------------------


def own_edge_keys(container: Container) -> frozenset:
    """``(src, dst)`` of the container's own edges (cached)."""
    return container._cached("edge_keys", lambda c: frozenset(e.key for e in c.edges))


def tombstone_keys(container: Container) -> frozenset:
    """``(src, dst)`` of the container's tombstones (cached)."""
    return container._cached("tomb_keys", lambda c: frozenset(e.key for e in c.tombstones))


def _dst_index(container: Container) -> dict:
    def build(c: Container) -> dict:
        table: dict = {}
        for edge in c.edges:
            if edge[1][1] != CONTROL:
                table.setdefault((edge[1][0], edge[1][1]), []).append(edge)
        return table

    return container._cached("dst_index", build)


def live_producers(container: Container, path: tuple, port: str) -> list[Edge]:
    """Live data edges inside ``container`` that feed ``path:port`` (in its coordinates)."""
    found = list(_dst_index(container).get((path, port), ()))
    if len(path) >= 2:
        child = container.children[container._index[path[0]]]
        if not child.is_op:
            buried = tombstone_keys(container)
            prefix = (path[0],)
            for edge in live_producers(child, path[1:], port):
                lifted = frames.lift(edge, prefix)
                if lifted.key not in buried:
                    found.append(lifted)
    return found


def phases_clash(a: Any, b: Any) -> bool:
    """Two producers of one input clash unless they belong to different phases."""
    return a is None or b is None or a == b


def _check_single_producer(self: Container, edges: list[Edge], here: tuple, problems: list[Problem]) -> None:
    seen: dict[tuple, list[Edge]] = {}
    buried = tombstone_keys(self) if self.tombstones else frozenset()
    for edge in edges:
        dst = edge[1]
        if dst[1] == CONTROL or _is_named_control(self, dst):
            continue
        key = (dst[0], dst[1])
        rivals = seen.setdefault(key, [])
        phase = edge[2].get("phase") if edge[2] else None
        for rival in rivals:
            if phases_clash(rival.phase, phase):
                problems.append(_second_producer(here, dst, rival, edge))
                break  # one problem per extra producer, not one per pair
        rivals.append(edge)
        path = dst[0]
        if path is not SELF and len(path) >= 2:
            child = self.children[self._index[path[0]]]
            if child.is_op:
                continue
            for inner in live_producers(child, path[1:], dst[1]):
                lifted = frames.lift(inner, (path[0],))
                if lifted.key not in buried and phases_clash(lifted.phase, phase):
                    problems.append(_second_producer(here, dst, lifted, edge, "tombstone the inner edge first"))


def _is_named_control(self: Container, dst: Endpoint) -> bool:
    return dst[0] is SELF and any(p.name == dst[1] for p in self.controls)


def _second_producer(here: tuple, dst: Endpoint, first: Edge, second: Edge, hint: str = "") -> Problem:
    return Problem(
        (*here, str(dst)),
        "at most one live data edge into an input port",
        f"{first[0]} and {second[0]} both feed it",
        hint,
    )
