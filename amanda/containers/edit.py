"""Non-destructive edits: a wrapper holds the model untouched, deletes inner edges with
tombstones, and adds ops and edges; ``consolidate`` folds a stack of wrappers into one tree.

>>> from amanda.containers.container import op
>>> from amanda.containers.compose import chain
>>> body = chain(*(op("Dense", f"L{i}", ["x"], ["y"]) for i in (1, 2, 3)), name="body")
>>> skip = (edit(body).remove_edge("body/L2:y", "body/L3:x")
...         .add(op("Add", "add", ["a", "b"], ["y"]))
...         .connect("body/L1:y", "add:a").connect("body/L2:y", "add:b")
...         .connect("add:y", "body/L3:x").build(name="resnet"))
>>> skip.child("body") is body
True
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from amanda.containers.arguments import shown
from amanda.containers.compose import wrapped_namespace
from amanda.containers.container import Container
from amanda.containers.edge import CONTROL, SELF, Edge
from amanda.containers.frames import find_buried, lift
from amanda.containers.invariants import (
    descend,
    describe_ports,
    live_producers,
    normalise_edge,
    resolve_path,
    resolve_port,
)
from amanda.errors import ArgumentError, InvariantError, Problem, suggest

__all__ = ["EDIT_TYPE", "Edit", "edit"]

EDIT_TYPE = "Edit"


class Edit:
    """Builder of one edit wrapper; every step is checked when it is made.

    Endpoints are relative to the wrapper, in which the model is the child named by its
    own name (an unnamed model is named ``model``, or ``model_1`` … if a child of it is).
    """

    def __init__(self, model: Container) -> None:
        if not isinstance(model, Container):
            raise InvariantError([Problem(None, "a Container to edit", type(model).__name__)])
        self.model = model if model.name else model.with_name(_free_name(model))
        self._added: list[Container] = []
        self._edges: list[Edge] = [
            Edge((SELF, p.name), ((self.model.name,), p.name)) for p in self.model.inputs
        ] + [Edge(((self.model.name,), p.name), (SELF, p.name)) for p in self.model.outputs]
        self._edges += [Edge(((self.model.name,), p.name), (SELF, p.name)) for p in self.model.controls]
        self._tombstones: list[Edge] = []
        self._probe = self._make_probe()

    def _make_probe(self) -> Container:
        # the wrapper under construction, for resolving endpoints as build() will
        return Container(
            EDIT_TYPE, None, inputs=self.model.inputs, outputs=self.model.outputs, children=[self.model, *self._added],
            controls=self.model.controls,
        )

    def add(self, op: Container) -> Edit:
        """Add a new op (or container) beside the model."""
        if not isinstance(op, Container):
            raise InvariantError([Problem(None, "a Container to add", type(op).__name__)])
        names = {n for n in (self.model.name, *(c.name for c in self._added)) if n is not None}
        if op.name is None or op.name in names:
            raise InvariantError([Problem((op.name,), f"a new child name not among {sorted(names)}", repr(op.name))])
        self._added.append(op)
        self._probe = self._make_probe()
        return self

    def _normal(self, src: Any, dst: Any, attrs: Any = None) -> Edge:
        problems: list[Problem] = []
        wanted = Edge(src, dst, attrs=attrs)
        edge = normalise_edge(self._probe, wanted, ("edit",), problems)
        if edge is None:
            raise InvariantError(self._missing(wanted) or problems, "editing")
        return edge

    def _missing(self, wanted: Edge, buried: bool = False) -> list[Problem]:
        """Why an end of ``wanted`` names no op or port in the wrapper, with the fix: the missing
        name, a close one, or the endpoint prefixed with the model's name (``body/L2:y``). An
        edge to remove (``buried``) lies inside a container, where that container's own inputs
        are sources: there any port of the op will do."""
        problems = []
        for end, side in ((wanted.src, "src"), (wanted.dst, "dst")):
            label = "source" if side == "src" else "destination"
            where = ("edit", str(end))
            path = resolve_path(self._probe, end.op)
            if path is None:
                problems.append(_missing_op(self._probe, str(self.model.name), end, label, where))
                continue
            target = descend(self._probe, path)
            if buried and any(resolve_port(target, end.port, s, i) for s in ("src", "dst") for i in (True, False)):
                continue
            if resolve_port(target, end.port, side, path is SELF) is None:
                problems.append(_missing_port(target, end.port, side, path is SELF, label, where))
        return problems

    def remove_edge(self, src: Any, dst: Any) -> Edit:
        """Delete the edge ``src -> dst``: one added by this edit, or one inside the model (a tombstone)."""
        wanted = Edge(src, dst)
        for position, edge in enumerate(self._edges):
            if self._same(edge, wanted):
                del self._edges[position]
                return self
        missing = self._missing(wanted, buried=True)
        if missing:
            raise InvariantError(missing, "editing")
        buried = find_buried(self._probe, wanted)
        if buried is None or any(t.key == buried.key for t in self._tombstones):
            where = ("edit", f"{wanted.src} -> {wanted.dst}")
            if buried is not None:
                raise InvariantError([Problem(where, "an existing edge to remove", "the edge is already removed")])
            raise InvariantError([Problem(where, "an existing edge to remove", "no such edge below the wrapper",
                                          self._fed_by(wanted))])
        self._tombstones.append(buried)
        return self

    def _fed_by(self, wanted: Edge) -> str:
        """What does feed the destination of an edge that does not exist, as a hint."""
        path = resolve_path(self._probe, wanted.dst.op)
        if path is None or path is SELF:
            return ""
        resolved = resolve_port(descend(self._probe, path), wanted.dst.port, "dst", False)
        if resolved is None or resolved[0] == CONTROL:
            return ""
        port = resolved[0]
        feeding = [e for e in self._edges if e.dst.op == path and e.dst.port == port]
        child = self._probe.child(path[0])
        if len(path) >= 2 and not child.is_op:
            feeding += [lift(e, (path[0],)) for e in live_producers(child, path[1:], port)]
        if not feeding:
            return f"nothing feeds {_shown(path, port)}"
        return f"{_shown(path, port)} is fed by {', '.join(_shown(e.src.op, e.src.port) for e in feeding)}"

    def _same(self, edge: Edge, wanted: Edge) -> bool:
        try:
            return self._normal(wanted.src, wanted.dst).key == edge.key
        except InvariantError:
            return False

    def connect(self, src: Any, dst: Any, attrs: Any = None) -> Edit:
        """Add the edge ``src -> dst``; its input must not be fed already (remove that edge first)."""
        edge = self._normal(src, dst, attrs)
        if edge.dst.port != CONTROL and not any(p.name == edge.dst.port for p in self._probe.controls):
            rivals = [e for e in self._edges if e.dst == edge.dst and not e.is_control]
            dst_path = edge.dst.op
            if dst_path is not SELF and len(dst_path) >= 2:
                buried = {t.key for t in self._tombstones}
                child = self._probe.child(dst_path[0])
                if not child.is_op:
                    rivals += [
                        lifted for inner in live_producers(child, dst_path[1:], edge.dst.port)
                        if (lifted := lift(inner, (dst_path[0],))).key not in buried
                    ]
            rivals = [r for r in rivals if r.phase is None or edge.phase is None or r.phase == edge.phase]
            if rivals:
                raise InvariantError([Problem(("edit", str(edge.dst)), "an input port that no live edge feeds",
                                              f"it is fed by {rivals[0].src}", "remove_edge() that edge first")])
        self._edges.append(edge)
        return self

    def build(self, name: str | None = None, attrs: Any = None) -> Container:
        """The wrapper: the model (the same object) plus new ops, edges and tombstones.

        The wrapper declares the model's namespace unless ``attrs`` names one, so added ops
        without a namespace of their own run in the model's.
        """
        if attrs is not None and not isinstance(attrs, Mapping):
            raise ArgumentError.at("attrs", "a mapping of attributes or None", shown(attrs))
        return Container(
            EDIT_TYPE, name, inputs=self.model.inputs, outputs=self.model.outputs, children=[self.model, *self._added],
            edges=self._edges, tombstones=self._tombstones, attrs={**wrapped_namespace([self.model]), **(attrs or {})}, uid=None,
            controls=self.model.controls,
        )


def _shown(path: Any, port: Any) -> str:
    return f"{'/'.join(path) if isinstance(path, tuple) else path}:{port}"


def _missing_op(probe: Container, model_name: str, end: Any, label: str, where: tuple) -> Problem:
    """The first name along ``end``'s op path that no child has, with the fix."""
    op = end.op
    segments = list(op) if isinstance(op, tuple) else str(op).split("/")
    expected = f"a {label} op that exists (a path from the wrapper, whose child {model_name!r} is the model)"
    prefixed = (model_name, *segments)
    if segments[0] != model_name and resolve_path(probe, prefixed) is not None:
        fix = f"endpoints are relative to the wrapper: write {_shown(prefixed, end.port)}"
        return Problem(where, expected, f"no op {'/'.join(segments)!r} beside the model", fix)
    node, parent = probe, "the wrapper"
    for i, name in enumerate(segments):
        if node.has_child(name):
            node, parent = node.child(name), "/".join(segments[: i + 1])
            continue
        names = [c.name for c in node.children]
        hint = suggest(name, names) or f"{parent} has {', '.join(names[:12]) or 'no children'}"
        return Problem(where, expected, f"no op {name!r} in {parent}", hint)
    return Problem(where, expected, repr(op))


def _missing_port(target: Container, port: Any, side: str, is_self: bool, label: str, where: tuple) -> Problem:
    reads_inputs = is_self == (side == "src")
    kind, other = ("input", "output") if reads_inputs else ("output", "input")
    names = [p.name for p in (target.inputs if reads_inputs else (*target.outputs, *target.controls))]
    wrong_side = [p.name for p in (target.outputs if reads_inputs else target.inputs)]
    hint = (f"{port!r} is an {other} port of {target.name!r}, and the {label} of this edge is an {kind} port"
            if port in wrong_side else suggest(str(port), names))
    return Problem(where, describe_ports(target, side, is_self), f"port {port!r}", hint)


def _free_name(model: Container) -> str:
    # "model", unless a child of the model has that name (it would address the model's ports)
    name, number = "model", 0
    while model.has_child(name):
        number += 1
        name = f"model_{number}"
    return name


def edit(model: Container) -> Edit:
    """Start a non-destructive edit of ``model``; see :class:`Edit`."""
    return Edit(model)


