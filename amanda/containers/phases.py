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

from amanda.containers.checks import expect_container, expect_str
from amanda.containers.container import Container
from amanda.containers.frames import live_tombstones

__all__ = ["bind", "phases"]


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
