"""Taking a block out of a model: ``extract(model, path)`` is the container at ``path``, made to
stand alone by moving inside it the constants the model feeds it from outside.

A block of an imported model reads, besides its data, constants that live above it: weights it
shares with another block, or the shape constants an exporter shares between blocks (torch's
dynamo exporter keeps one ``val_49`` for every block). Those enter through input ports; the
extracted block holds a copy of each such constant instead (the same op object, under the
port's name where it is free), so only its data inputs remain.

>>> import numpy as np, amanda
>>> w = amanda.op("Constant", "w", outputs=["output"], attrs={"value": np.ones(2, np.float32), "initializer": True})
>>> block = amanda.Container("Block", "block", inputs=["x", "k"], outputs=["y"],
...     children=[amanda.op("Mul", "mul", ["A", "B"], ["C"])],
...     edges=[("block:x", "mul:A"), ("block:k", "mul:B"), ("mul:C", "block:y")])
>>> model = amanda.Container(None, "m", inputs=["x"], outputs=["y"], children=[w, block],
...     edges=[("m:x", "block:x"), ("w:output", "block:k"), ("block:y", "m:y")])
>>> alone = extract(model, "block")
>>> alone.input_names, [c.name for c in alone.children]
(('x',), ['k', 'mul'])
"""

from __future__ import annotations

from typing import Any

from amanda.containers.arguments import expect_container
from amanda.containers.container import Container
from amanda.containers.edge import SELF, Edge, Endpoint
from amanda.containers.flatten import flatten
from amanda.containers.invariants import resolve_path
from amanda.errors import ArgumentError

__all__ = ["extract"]


def _is_constant(op: Container) -> bool:
    """An op computing a value from nothing: a Constant (initializers included) without inputs."""
    return op.type == "Constant" and not op.inputs and not op.children


def _constant_ports(model: Container, path: tuple[str, ...], block: Container) -> dict[str, tuple]:
    """Input port of ``block`` -> the path (in ``model``) of the constant that alone feeds it."""
    size = len(path)
    flat = flatten(model)
    entering: dict[tuple, Any] = {}  # (leaf path inside the block, port) -> its source in model
    for edge in flat.edges:
        dst, src = edge.dst, edge.src
        if dst.op is not SELF and dst.op[:size] == path and (src.op is SELF or src.op[:size] != path):
            entering[(dst.op[size:], dst.port)] = src
    sources: dict[str, set] = {}
    for edge in flatten(block).edges:
        if edge.src.op is SELF and edge.dst.op is not SELF:
            source = entering.get((edge.dst.op, edge.dst.port))
            key = None if source is None or source.op is SELF or not _is_constant(flat.ops[source.op]) else source.op
            sources.setdefault(edge.src.port, set()).add(key)
    return {port: next(iter(found)) for port, found in sources.items() if len(found) == 1 and None not in found}


def extract(model: Container, path: Any) -> Container:
    """The container at ``path`` (a tuple of names, or a ``/`` string) in ``model``, standing
    alone: each input port fed only by a constant of ``model`` (an op of type ``Constant``
    without inputs, initializers included) is replaced by that constant, placed inside; the
    other ports stay. The block declares the namespace it inherited. ``model`` is unchanged; the
    constants keep their uids, so weights still pair up by uid."""
    expect_container(model, "model")
    block = model.descendant(path)
    if block.is_op:
        raise ArgumentError.at(path, "a path to a container with children", f"op {block.name!r} ({block.type})")
    full = resolve_path(model, path)
    if full is SELF or full is None:
        raise ArgumentError.at(path, "a path to a container below the model", repr(path))
    block = _with_namespace(model, full, block)
    constants = _constant_ports(model, full, block)
    if not constants:
        return block
    flat_ops = flatten(model).ops
    taken = {c.name for c in block.children} | {block.name}
    moved: dict[str, str] = {}
    added = []
    for port, source in constants.items():
        name = port
        while name in taken:
            name += "_"
        taken.add(name)
        op = flat_ops[source]
        added.append(op.with_name(name))
        moved[port] = name
    edges = []
    for edge in block.edges:
        src = edge.src
        if src.op is SELF and src.port in moved:
            src = Endpoint((moved[src.port],), _output_of(added, moved[src.port]))
        edges.append(Edge(src, edge.dst, attrs=edge.attrs))
    return block.evolve(inputs=[p for p in block.inputs if p.name not in moved],
                        children=[*added, *block.children], edges=edges)


def _with_namespace(model: Container, path: tuple, block: Container) -> Container:
    """``block`` declaring the namespace it inherits in ``model`` (out of it, nothing would)."""
    if block.namespace is not None:
        return block
    node, found = model, model.namespace
    for name in path[:-1]:
        node = node.child(name)
        found = node.namespace or found
    return block.with_attrs(namespace=found) if found else block


def _output_of(added: list[Container], name: str) -> str:
    op = next(c for c in added if c.name == name)
    return op.outputs[0].name
