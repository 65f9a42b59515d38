"""The effective view: the dataflow graph among leaf ops.

``flatten(container)`` is the :class:`~amanda.containers.view.View` with every container
opened, as a :class:`FlatGraph`: edges of every level lifted to the top, those a tombstone of
a level above their owner names dropped, values forwarded through the boundary ports of
nested containers. It is computed once per container object (containers are immutable) and
cached.

>>> from amanda.containers.container import Container, op
>>> inner = Container("Block", "b", inputs=["x"], outputs=["y"],
...     children=[op("Relu", "r", ["x"], ["y"])], edges=[("b:x", "r:x"), ("r:y", "b:y")])
>>> top = Container(None, "g", inputs=["x"], outputs=["y"], children=[inner],
...     edges=[("g:x", "b:x"), ("b:y", "g:y")])
>>> sorted(f"{e.src} -> {e.dst}" for e in flatten(top).edges)
['SELF:x -> b/r:x', 'b/r:y -> SELF:y']
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from amanda.containers.edge import SELF, Edge, Endpoint, Port
from amanda.containers.records import Path
from amanda.containers.view import View

if TYPE_CHECKING:
    from amanda.containers.container import Container

__all__ = ["FlatGraph", "effective_edges", "flatten"]


class FlatGraph:
    """The effective dataflow among leaf ops of one container.

    ``ops``: leaf path (tuple of names from the top) -> leaf op, in document order.
    ``edges``: data and control edges whose endpoints carry full leaf paths (or SELF
    for the top container's own ports). ``inputs``: top input name -> the leaf
    endpoints it reaches; ``outputs``: top output name -> the endpoint producing it.
    ``view``: the :class:`~amanda.containers.view.View` it shows, for where values come from.
    """

    __slots__ = ("container", "edges", "input_ports", "inputs", "ops", "output_ports", "outputs", "view")

    def __init__(self, container: Container, view: View) -> None:
        self.container = container
        self.view = view
        self.ops: Mapping[Path, Container] = MappingProxyType(view.units)
        self.edges = edges = view.edges
        self.input_ports: tuple[Port, ...] = container.inputs
        self.output_ports: tuple[Port, ...] = container.outputs
        reach: dict[str, list[Endpoint]] = {p.name: [] for p in container.inputs}
        produce: dict[str, Endpoint | None] = {p.name: None for p in container.outputs}
        for edge in edges:
            src, dst = edge[0], edge[1]
            if src[0] is SELF and src[1] in reach:
                reach[src[1]].append(dst)
            if dst[0] is SELF and dst[1] in produce and produce[dst[1]] is None:
                produce[dst[1]] = src
        self.inputs: Mapping[str, tuple[Endpoint, ...]] = MappingProxyType({k: tuple(v) for k, v in reach.items()})
        self.outputs: Mapping[str, Endpoint | None] = MappingProxyType(produce)

    def topological_order(self) -> tuple[Path, ...]:
        """Leaf paths such that every edge goes from an earlier to a later op; among ops
        ready at once, the earliest in document order comes first."""
        return self.view.order()

    def producers(self, path: Any, port: Any) -> tuple[Edge, ...]:
        """Edges that feed ``path:port`` (several only for distinct phases or control)."""
        return self.view.producers(path, port)

    def consumers(self, path: Any, port: Any) -> tuple[Edge, ...]:
        """Edges that read from ``path:port``."""
        return self.view.consumers(path, port)

    def in_edges(self, path: Path) -> Iterator[Edge]:
        """Every edge into the op at ``path``."""
        for (dst, _port), edges in self.view._indexes()[0].items():
            if dst == path:
                yield from edges

    def __repr__(self) -> str:
        return f"FlatGraph({len(self.ops)} ops, {len(self.edges)} edges)"


def flatten(container: Container) -> FlatGraph:
    """The effective dataflow view of ``container`` (cached per container object)."""
    if getattr(container, "_amanda_frozen", False) is not True:
        from amanda.containers.arguments import expect_container

        expect_container(container, "container")
    return container._cached("flat", _build)


def _build(root: Container) -> FlatGraph:
    flat = FlatGraph(root, View(root))
    flat.topological_order()  # a cycle among the ops is a CycleError here, as the view is made
    return flat


def effective_edges(root: Container) -> tuple[dict[Path, Container], tuple[Edge, ...]]:
    """The leaf ops (by path, in document order) and edges of the effective view, before they
    are ordered: what :func:`flatten` builds, also for a graph with a cycle among its ops (a
    ``CycleError`` here means a cycle through container boundary ports alone)."""
    view = View(root)
    return view.units, view.edges
