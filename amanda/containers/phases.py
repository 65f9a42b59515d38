"""Late binding of phases (docs/challenges.md, C2/C4): one container describes several computations
(a batchnorm's training and inference); ``bind`` picks one, as a pure transform.

An edge tagged ``attrs: {phase: p}`` exists only in phase ``p``; untagged edges exist
in every phase. ``bind(model, p)`` drops the edges of other phases (and tombstones that
named them) at every level, sharing every subtree that has none.

>>> from amanda.containers.container import Container, op
>>> from amanda.containers.edge import Edge
>>> bn = Container("BN", "bn", inputs=["x"], outputs=["y"],
...     children=[op("BatchStats", "batch", ["x"], ["y"]), op("RunningStats", "running", ["x"], ["y"])],
...     edges=[("bn:x", "batch:x"), ("bn:x", "running:x"),
...      Edge("batch:y", "bn:y", attrs={"phase": "train"}), Edge("running:y", "bn:y", attrs={"phase": "inference"})])
>>> [str(e.src) for e in bind(bn, "inference").edges if e.dst.port == "y"]
['running:y']
"""

from __future__ import annotations

from typing import Any

from amanda.containers.arguments import expect_container, expect_str
from amanda.containers.container import Container
from amanda.containers.edge import CONTROL, SELF
from amanda.containers.frames import live_tombstones
from amanda.errors import AmandaError, ArgumentError, suggest

__all__ = ["bind", "check_phase", "computations", "phases"]


def phases(model: Container) -> frozenset:
    """Every phase named by an edge anywhere in ``model``."""
    expect_container(model, "model")
    found: set = set()
    stack = [model]
    while stack:
        node = stack.pop()
        found.update(e.phase for e in node.edges if e.phase is not None)
        stack.extend(node.children)
    return frozenset(found)


def computations(model: Container) -> frozenset:
    """Every name ``model`` knows as a phase or a computation (cached per model): the phases
    its edges are tagged with, and each named control port, at any level, that some op is
    linked to (directly, or through the named control ports of the containers inside). A port
    nothing is linked to any more (the ``train`` port of a frozen model) names no computation.

    >>> from amanda.containers.container import Container, op
    >>> g = Container("G", "g", children=[op("Update", "u")], edges=[("u:-1", "g:train")],
    ...               controls=["train", "unused"])
    >>> sorted(computations(g))
    ['train']
    """
    expect_container(model, "model")
    return model._cached("containers.phases.computations", _computations)  # type: ignore[no-any-return]


def _computations(model: Container) -> frozenset:
    order: list[Container] = []
    stack = [model]
    while stack:  # pre-order without recursion; reversed, every node comes after its descendants
        node = stack.pop()
        order.append(node)
        stack.extend(node.children)
    found: set = set()
    linked: dict[int, set] = {}  # id(container) -> its named control ports some op is linked to
    for node in reversed(order):
        if id(node) in linked:
            continue
        found.update(e.phase for e in node.edges if e.phase is not None)
        ports = set()
        for edge in node.edges if node.controls else ():
            src, dst = edge.src, edge.dst
            if dst.op is SELF and dst.port in node.control_names and src.op is not SELF:
                source = node.descendant(src.op)
                if src.port == CONTROL or src.port in linked.get(id(source), ()):
                    ports.add(dst.port)
        linked[id(node)] = ports
        found.update(ports)
    return frozenset(found)


def check_phase(model: Container, phase: Any, error: type[AmandaError] = ArgumentError,
                argument: str = "phase") -> None:
    """Raise ``error`` unless ``phase`` is None or a phase or computation ``model`` knows
    (:func:`computations`); the message lists them, with a did-you-mean, and says when the
    model has no ``train`` phase (a frozen model keeps only the phase it was bound to).

    >>> from amanda.containers.container import Container, op
    >>> g = Container("G", "g", children=[op("Update", "u")], edges=[("u:-1", "g:train")], controls=["train"])
    >>> check_phase(g, "trian")
    Traceback (most recent call last):
    ...
    amanda.errors.ArgumentError: at phase: expected a phase or computation of `g` ('train'), found 'trian' (did you mean 'train'?)
    """
    if phase is None:
        return
    known = computations(model)
    if isinstance(phase, str) and phase in known:
        return
    name = model.name or "<root>"
    if known:
        expected = f"a phase or computation of `{name}` ({', '.join(map(repr, sorted(known)))})"
        hint = suggest(phase, sorted(known)) if isinstance(phase, str) else ""
    else:
        expected = f"no phase: `{name}` has no phases or computations (no phase-tagged edge, no named control port)"
        hint = "leave phase out (None)"
    if phase == "train":  # the usual cause: a frozen model, or one without updates, run as if training
        hint = (f"`{name}` has no train phase; a frozen model (layers.freeze, optim.freeze) keeps only the phase "
                f"it was bound to" + ("" if known else "; leave phase out (None)"))
    raise error.at(argument, expected, repr(phase), hint)


def bind(model: Container, phase: Any) -> Container:
    """``model`` with only the computation of ``phase`` (a phase name); ``model`` itself if
    nothing changes."""
    expect_container(model, "model")
    expect_str(phase, "phase", "a phase name (a non-empty string)")
    memo: dict[int, Container] = {}
    order: list[Container] = []
    stack = [model]
    while stack:  # post-order without recursion: deep models must not hit the limit
        node = stack.pop()
        order.append(node)
        stack.extend(node.children)
    for node in reversed(order):
        if id(node) in memo:
            continue
        children = [memo[id(c)] for c in node.children]
        edges = [e for e in node.edges if e.phase is None or e.phase == phase]
        same_children = all(a is b for a, b in zip(children, node.children))
        if same_children and len(edges) == len(node.edges):
            memo[id(node)] = node
            continue
        memo[id(node)] = Container(
            node.type, node.name, inputs=node.inputs, outputs=node.outputs, children=children, edges=edges,
            tombstones=live_tombstones(node, children, node.tombstones), attrs=node.attrs, uid=node.uid,
            controls=node.controls,
        )
    return memo[id(model)]
