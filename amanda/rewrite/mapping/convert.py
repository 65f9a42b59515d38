"""``convert(container, target)``: find a path of registered tables and apply them in turn.

Tables are registered with their source and target namespaces (a source may be a family:
``amanda/tensorflow`` serves every TensorFlow version). The path is a shortest one (fewest
tables) from the container's namespace to ``target``, ties going to the table registered first,
so it is deterministic. Shipped tables (TensorFlow -> ONNX 17, ONNX opset N <-> N+1 for N from
11) are registered on first use and built only when a path uses them.

``convert(..., with_names=True)`` also returns the :class:`NameMap` of the whole path, which says
where each source value lives in the result (``names.resolve("dense/Relu:activations")``); this
is what a Session running a TensorFlow graph uses to translate its feeds and fetches.
``outputs=`` exposes source values as output ports of the result (ONNX needs graph outputs; a
TensorFlow graph names none).

>>> from amanda import Container, op
>>> tf_graph = Container(None, "g", attrs={"namespace": "amanda/tensorflow/1.13.1"}, children=[
...     op("Placeholder", "x", [], ["output"], {"dtype": "float32", "shape": [1, 4]}),
...     op("Relu", "relu", ["features"], ["activations"], {"T": "float32"})],
...     edges=[("x:output", "relu:features")])
>>> onnx_graph, names = convert(tf_graph, "amanda/onnx/17", with_names=True,
...                             outputs={"y": "relu:activations"})
>>> onnx_graph.namespace, [p.name for p in onnx_graph.inputs], str(names.resolve("relu:activations"))
('amanda/onnx/17', ['x'], 'relu:Y')
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from amanda.containers.arguments import brief, expect_flag, expect_type, shown
from amanda.containers.container import Container
from amanda.containers.edge import SELF, Edge, Endpoint, Port
from amanda.errors import AmandaError, MappingError, SchemaError
from amanda.progress import progress
from amanda.rewrite.mapping.driver import in_namespace
from amanda.rewrite.mapping.names import NameMap
from amanda.rewrite.mapping.table import MappingTable, check_unmatched

__all__ = ["TableEntry", "conversion_path", "convert", "expose", "register_table", "registered_tables"]


@dataclass(slots=True)
class TableEntry:
    """A registered table: its namespaces and how to build it (built once, on first use)."""

    source: str
    target: str
    factory: Callable[[], MappingTable]
    name: str = ""
    _table: MappingTable | None = field(default=None, repr=False)

    def table(self) -> MappingTable:
        """The table (built on first call)."""
        if self._table is None:
            table = self.factory()
            if (table.source, table.target) != (self.source, self.target):
                raise MappingError.at(self.name or table.name, f"a table {self.source} -> {self.target}",
                                      f"{table.source} -> {table.target}")
            self._table = table
        return self._table


_lock = threading.RLock()
_entries: list[TableEntry] = []
_shipped = False


def register_table(table: MappingTable | None = None, *, source: str | None = None,
                   target: str | None = None, factory: Callable[[], MappingTable] | None = None,
                   name: str = "") -> TableEntry:
    """Register a table (or a factory building one, with its ``source`` and ``target``) for
    :func:`convert`; tables registered later lose ties to earlier ones.

    >>> from amanda.rewrite.mapping import MappingTable
    >>> entry = register_table(MappingTable("doctest/a", "doctest/b"))
    >>> [e.name for e in conversion_path("doctest/a", "doctest/b")]
    ['doctest/a -> doctest/b']
    """
    expect_type(name, str, "name", "a table name (a string)")
    if table is not None:
        if not isinstance(table, MappingTable):
            raise MappingError.at("register_table", "a MappingTable", type(table).__name__)
        entry = TableEntry(table.source, table.target, lambda: table, name or table.name, table)
    elif callable(factory) and isinstance(source, str) and source and isinstance(target, str) and target:
        entry = TableEntry(source, target, factory, name or f"{source} -> {target}")
    else:
        raise MappingError.at("register_table", "a table, or a factory with source and target", "neither")
    with _lock:
        _entries.append(entry)
    return entry


def registered_tables() -> tuple[TableEntry, ...]:
    """Every registered table entry (the shipped ones included), in registration order."""
    _load_shipped()
    with _lock:
        return tuple(_entries)


def _load_shipped() -> None:
    global _shipped
    with _lock:
        if _shipped:
            return
        _shipped = True
        from amanda.rewrite.mapping.tables import register_shipped

        register_shipped(register_table)


def conversion_path(source: str, target: str) -> list[TableEntry]:
    """The shortest list of tables leading from namespace ``source`` to ``target``.

    Raises ``MappingError`` naming the namespaces reachable from ``source`` when none leads there.
    """
    entries = registered_tables()
    if source == target:
        return []
    previous: dict[str, tuple[str, TableEntry] | None] = {source: None}
    queue = deque([source])
    while queue:
        here = queue.popleft()
        for entry in entries:
            if not in_namespace(here, entry.source) or entry.target in previous:
                continue
            previous[entry.target] = (here, entry)
            if entry.target == target:
                path = []
                node = target
                while previous[node] is not None:
                    node, step = previous[node]  # type: ignore[misc]
                    path.append(step)
                return path[::-1]
            queue.append(entry.target)
    reachable = sorted(n for n in previous if n != source)
    listed = ", ".join(reachable[:12]) + (" …" if len(reachable) > 12 else "") or "none"
    raise MappingError.at(source, f"a chain of mapping tables to {target}",
                          f"none (reachable: {listed})", "register a table with register_table")


def _target_name(target: str) -> str:
    from amanda.namespaces.namespace import namespace

    try:
        return namespace(target).name  # 'amanda/onnx' means the newest opset
    except SchemaError:
        return target  # a user namespace needs no schema


def convert(container: Container, target: str, *, source: str | None = None,
            on_unmatched: str = "error", with_names: bool = False,
            outputs: Mapping[str, Any] | Sequence[Any] | None = None,
            ) -> Container | tuple[Container, NameMap]:
    """``container`` moved to namespace ``target`` through the registered tables.

    ``source`` overrides the container's own namespace. ``on_unmatched`` is passed to every
    table. ``outputs`` (source endpoints, or output name -> source endpoint) become output ports
    of the result: a TensorFlow graph declares none, and an ONNX model needs them (without
    them, ONNX export takes every value no op reads). With ``with_names`` the result is
    ``(container, NameMap)``. The input is never modified; converting to its own namespace
    (with no ``outputs``) returns it unchanged.
    """
    if not isinstance(container, Container):
        raise MappingError.at("convert", "a Container to convert", type(container).__name__)
    for label, value in (("target", target), ("source", source)):
        if not isinstance(value, str) and not (label == "source" and value is None):
            raise MappingError.at(label, "a namespace name such as 'amanda/onnx/17'", brief(value))
    check_unmatched(on_unmatched)
    expect_flag(with_names, "with_names")
    if outputs is not None:
        _output_pairs(outputs)  # before converting: a wrong type is found at once
    start = source or container.namespace
    if start is None:
        raise MappingError.at(container.name or "<root>", "a container with a namespace attribute",
                              "none", "pass source='amanda/tensorflow/1.13.1' (for example)")
    goal = _target_name(target)
    names = NameMap({}, container)
    result = container
    steps = conversion_path(start, goal)
    with progress(len(steps), f"converting to {goal}") as bar:
        for entry in steps:
            applied = entry.table().apply(result, on_unmatched=on_unmatched, with_names=True)
            result, step = cast("tuple[Container, NameMap]", applied)
            names = names.then(step)
            bar.update()
    if outputs:
        result = expose(result, names, outputs)
    return (result, names) if with_names else result


def _output_pairs(outputs: Any) -> list[tuple[Any, Any]]:
    """``(port name, source endpoint)`` pairs from a list of endpoints or a mapping."""
    if isinstance(outputs, Mapping):
        return list(outputs.items())
    if isinstance(outputs, (list, tuple)):
        return [(o if isinstance(o, str) else str(_endpoint(o)), o) for o in outputs]
    raise MappingError.at("outputs", "a list of endpoints 'op:port' or a mapping name -> endpoint", shown(outputs))


def expose(container: Container, names: NameMap, outputs: Mapping[str, Any] | Sequence[Any]) -> Container:
    """``container`` with new output ports fed by the mapped values of source endpoints.

    ``outputs`` is a list of source endpoints (``"op/path:port"`` or ``(op, port)``; each output
    named like its endpoint string) or a mapping output name -> source endpoint. Raises
    ``MappingError`` naming an endpoint that is malformed or names no op output.

    >>> from amanda import Container, op
    >>> g = Container(None, "g", children=[op("Relu", "r", ["X"], ["Y"])])
    >>> expose(g, NameMap({}, g), {"y": "r:Y"}).output_names
    ('y',)
    """
    pairs = _output_pairs(outputs)
    ports = list(container.outputs)
    edges = list(container.edges)
    taken = {p.name for p in ports}
    for port_name, endpoint in pairs:
        if not isinstance(port_name, str) or not port_name:
            raise MappingError.at("outputs", "output names that are non-empty strings", brief(port_name))
        if port_name in taken:
            raise MappingError.at(port_name, "a new output port name", "one the container has")
        found = names.resolve(_endpoint(endpoint))
        _check_source(container, found, endpoint)
        src = (SELF, found.port) if found.op is SELF else (found.op, found.port)
        ports.append(Port(port_name))
        edges.append(Edge(src, (SELF, port_name)))
        taken.add(port_name)
    return container.evolve(outputs=ports, edges=edges)


def _endpoint(value: Any) -> Endpoint:
    try:
        return Endpoint.of(value)
    except (TypeError, ValueError) as exc:
        raise MappingError.at("outputs", "an endpoint 'op/path:port' or (op, port)",
                              f"{brief(value)} ({exc})") from None


def _check_source(container: Container, found: Endpoint, asked: Any) -> None:
    """Raise unless ``found`` is an input port of ``container`` or an output port of an op in it."""
    if found.op is SELF:
        ok = found.port in container.input_names
    else:
        try:
            ok = found.port in container.descendant(found.op).output_names
        except AmandaError:
            ok = False
    if not ok:
        raise MappingError.at(str(asked), "an op output (or input port) of the graph",
                              f"no such value (looked for {found})")
