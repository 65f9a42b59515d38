"""Control flow (If, Loop, Scan, SequenceMap bodies are inferred too), sequences, optionals."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from amanda.types.node import Node
from amanda.types.rules import rule
from amanda.types.tensor_type import (
    OptionalType,
    SequenceType,
    TensorType,
    from_attrs,
    merge,
)

BOOL = TensorType("bool", ())


def _body(node: Node, label: str, inputs: list) -> list:
    graph = node.attrs.get(label)
    if graph is None or node.body is None:
        return [None] * node.n_out
    return list(node.body(label, graph, inputs))


@rule("If")
def if_(node: Node) -> list:
    """Both branches are inferred; each output fits both (dims that differ become unknown)."""
    if node.dtype(0) not in (None, "bool"):
        raise node.fail("a bool condition", str(node.dtype(0)))
    then = _body(node, "then_branch", [])
    other = _body(node, "else_branch", [])
    if len(then) != len(other):
        raise node.fail(f"branches with {len(then)} outputs each", f"{len(then)} and {len(other)}")
    return [merge(a, b) for a, b in zip(then, other)]


def _drop(t: Any, axis: int) -> Any:
    if not isinstance(t, TensorType) or t.shape is None:
        return TensorType(getattr(t, "dtype", None), None)
    return TensorType(t.dtype, t.shape[:axis] + t.shape[axis + 1:])


def insert(t: Any, axis: int, dim: Any) -> Any:
    if not isinstance(t, TensorType) or t.shape is None:
        return TensorType(getattr(t, "dtype", None), None)
    axis = axis % (len(t.shape) + 1)
    return TensorType(t.dtype, t.shape[:axis] + (dim,) + t.shape[axis:])


@rule("Loop")
def loop(node: Node) -> list:
    """Loop-carried values fit their initial and body types; scan outputs gain a first axis."""
    carried = [node.type(i) for i in range(2, len(node.types))]
    outs = _body(node, "body", [TensorType("int64", ()), BOOL, *carried])
    n = len(carried)
    finals = [merge(a, b) for a, b in zip(carried, outs[1:1 + n])]
    trips = node.dims(0) if not node.present(1) else None
    count = trips[0] if trips else None
    return finals + [insert(t, 0, count) for t in outs[1 + n:]]


@rule("Scan")
def scan(node: Node) -> list:
    """States fit their initial and body types; scan outputs are stacked body outputs."""
    m = int(node.attr("num_scan_inputs", 0))
    if node.opset < 9:
        return _scan8(node, m)
    states = node.types[: len(node.types) - m]
    scanned = list(range(len(node.types) - m, len(node.types)))
    axes = list(node.attr("scan_input_axes") or [0] * m)
    slices, length = [], None
    for i, a in zip(scanned, axes):
        t = node.tensor(i)
        if t is not None and t.shape is not None:
            a = node.axis(int(a), len(t.shape))
            length = node.same(length, t.shape[a], "the scan lengths")  # type: ignore[index]
            slices.append(_drop(t, a))  # type: ignore[arg-type]
        else:
            slices.append(TensorType(node.dtype(i), None))
    outs = _body(node, "body", [*states, *slices])
    n = len(states)
    finals = [merge(a, b) for a, b in zip(states, outs[:n])]
    out_axes = list(node.attr("scan_output_axes") or [0] * (len(outs) - n))
    return finals + [insert(t, int(a), length) for t, a in zip(outs[n:], out_axes)]


def _scan8(node: Node, m: int) -> list:
    """Scan of opset 8: a leading batch axis on every input and output, scanning along axis 1."""
    rest = list(range(1, len(node.types)))
    states, scanned = rest[: len(rest) - m], rest[len(rest) - m:]
    batch = length = None
    inner_states = []
    for i in states:
        t = node.tensor(i)
        if t is not None and t.shape:
            batch = node.same(batch, t.shape[0], "the batch dims")
        inner_states.append(_drop(t, 0))
    slices = []
    for i in scanned:
        t = node.tensor(i)
        if t is not None and t.shape is not None and len(t.shape) >= 2:
            batch = node.same(batch, t.shape[0], "the batch dims")
            length = node.same(length, t.shape[1], "the scan lengths")
        slices.append(_drop(_drop(t, 0), 0))
    outs = _body(node, "body", [*inner_states, *slices])
    n = len(states)
    finals = [insert(t, 0, batch) for t in outs[:n]]
    return finals + [insert(insert(t, 0, length), 0, batch) for t in outs[n:]]


@rule("SequenceMap")
def sequence_map(node: Node) -> list:
    """The body runs on elements; each output is a sequence of its body output."""
    elems = [t.elem if isinstance(t, SequenceType) else t for t in node.types]
    return [SequenceType(t) for t in _body(node, "body", elems)]


def optional(node: Node) -> list:
    """An optional of the input's type (or of the ``type`` attribute)."""
    if node.present(0):
        return [OptionalType(node.type(0))]
    given = node.attrs.get("type")
    return [OptionalType(from_attrs({"type": given}) if isinstance(given, Mapping) else None)]


