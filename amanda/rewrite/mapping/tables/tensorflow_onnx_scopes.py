"""TensorFlow -> ONNX on scoped graphs: the name scopes are kept, unless control flow is lowered.

A TensorFlow graph imported with its name scopes as nested containers (the default) puts an
op and the ``Const`` that gives its axes, permutation or filter in different containers
(``dense/Mean`` reads ``dense/Mean/reduction_indices``, one level down). The rules' patterns
follow values through container ports (a pattern op binds the op of another level whose value
reaches the level being converted), so the scoped graph converts as it is, its scopes kept as
containers.

A graph with lowered control flow (``Enter``/``Switch`` frames, which may span scopes) is the
exception: it is mapped as its flat form, in which the frames are raised to functional ops
(:func:`raise_control_flow`): every leaf op (call containers' function bodies included) named by
its path joined with ``/`` (``dense/MatMul_/ReadVariableOp``), the edges lifted to the top, as
:class:`amanda.containers.view.View` computes them. The name map reads the scoped graph's
endpoints (``dense/MatMul_:product``) either way.
"""

from __future__ import annotations

from typing import Any, cast

from amanda.containers.arguments import check_names, expect_container
from amanda.containers.container import Container
from amanda.containers.edge import SELF, Edge, Endpoint
from amanda.containers.view import View
from amanda.rewrite.mapping.names import NameMap
from amanda.rewrite.mapping.table import MappingTable

__all__ = ["ScopeFlatteningTable", "flat_scopes", "opening_scopes"]


def flat_scopes(container: Container) -> tuple[Container, dict[Endpoint, Endpoint | None]]:
    """``container`` with every nested container opened, and where each leaf output went.

    Leaf ops are renamed by their path joined with ``/``; a container without nested ones is
    returned as it is (with an empty map).

    >>> from amanda import op
    >>> inner = Container(None, "block", inputs=["x"], outputs=["y"],
    ...     children=[op("Relu", "r", ["x"], ["y"])], edges=[("block:x", "r:x"), ("r:y", "block:y")])
    >>> g = Container(None, "g", inputs=["x"], outputs=["y"], children=[inner],
    ...     edges=[("g:x", "block:x"), ("block:y", "g:y")])
    >>> flat, names = flat_scopes(g)
    >>> [c.name for c in flat.children], str(names[Endpoint(("block", "r"), "y")])
    (['block/r'], 'block/r:y')
    """
    expect_container(container, "container")
    if not any(child.children for child in container.children):
        return container, {}
    view = View(container)  # not flatten(): a lowered loop's NextIteration -> Merge edge closes a cycle
    flat_name = {path: "/".join(path) for path in view.units}
    children = [_renamed(op, flat_name[path]) for path, op in view.units.items()]

    def end(point: Any) -> Endpoint:
        return Endpoint(SELF, point[1]) if point[0] is SELF else Endpoint((flat_name[point[0]],), point[1])

    edges = [Edge(end(edge[0]), end(edge[1]), attrs=edge[2]) for edge in view.edges]
    names: dict[Endpoint, Endpoint | None] = {
        Endpoint(path, port): Endpoint((flat_name[path],), port)
        for path, op in view.units.items() for port in op.output_names}
    return container.evolve(children=children, edges=edges, tombstones=()), names  # the view applied them


def _renamed(op: Container, name: str) -> Container:
    """A leaf op under another name, every other field shared: a leaf's name appears nowhere
    inside it, so only the name is checked (re-checking the whole op cost 60% of the opening)."""
    if name == op.name or op.children:
        return op if name == op.name else op.evolve(name=name)
    check_names(None, name, None)
    return Container._trusted(op.type, name, op.inputs, op.outputs, op.controls, op.children, op.edges,
                              op.tombstones, op._attrs, op.uid, op._index)


class ScopeFlatteningTable(MappingTable):
    """A table that maps a container as it is, scopes kept, or, when it holds lowered control
    flow, its flat form (:func:`flat_scopes`) with the frames raised; the name map is then the
    composition, keyed by the scoped container's endpoints."""

    __slots__ = ()

    def apply(self, container: Container, *, on_unmatched: str | None = None,
              fixed_point: bool | None = None, with_names: bool = False,
              ) -> Container | tuple[Container, NameMap]:
        """Map ``container`` as :meth:`MappingTable.apply` does, after opening its scopes and
        raising its control flow when it holds lowered control flow."""
        from amanda.rewrite.mapping.tables.tensorflow_onnx_lowered import lowered, raise_control_flow

        if not isinstance(container, Container) or not lowered(container):
            return super().apply(container, on_unmatched=on_unmatched, fixed_point=fixed_point,
                                 with_names=with_names)
        flat, opened = flat_scopes(container)
        flat, raised = raise_control_flow(flat)
        applied = super().apply(flat, on_unmatched=on_unmatched, fixed_point=fixed_point, with_names=True)
        result, names = cast("tuple[Container, NameMap]", applied)
        if raised:
            names = NameMap(raised, flat).then(names)
        if opened:
            names = NameMap(opened, container).then(names)
        return (result, names) if with_names else result


def opening_scopes(table: MappingTable) -> ScopeFlatteningTable:
    """``table``'s rules and settings in a :class:`ScopeFlatteningTable`.

    >>> opening_scopes(MappingTable("doctest/a", "doctest/b")).name
    'doctest/a -> doctest/b'
    """
    return ScopeFlatteningTable(table.source, table.target, table.rules, name=table.name,
                                on_unmatched=table.on_unmatched, fixed_point=table.fixed_point,
                                max_iterations=table.max_iterations, doc=table.doc)


def shipped_table() -> ScopeFlatteningTable:
    """The shipped TensorFlow -> ONNX table (:func:`tensorflow_onnx.tensorflow_to_onnx`), raising
    lowered control flow (on the flat form) before its rules run."""
    from amanda.rewrite.mapping.tables.tensorflow_onnx import tensorflow_to_onnx

    return opening_scopes(tensorflow_to_onnx())
