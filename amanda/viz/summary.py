"""``amanda.summary(model)``: a table of the model's layers with their output types and
parameter counts, like Keras's ``Model.summary()``.

Parameters are the elements of the arrays a node holds in its attributes (weights and
constants, ``Constant`` initializers included), counted over its whole subtree.

>>> import amanda, numpy as np
>>> w = amanda.op("Constant", "w", [], ["output"], {"value": np.zeros((3, 4), np.float32)})
>>> print(summary(amanda.Container("Net", "net", children=[w])))  # doctest: +NORMALIZE_WHITESPACE
path   type       output   params
w      Constant   output       12
total parameters: 12
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from amanda.containers.records import Path
from amanda.errors import ArgumentError
from amanda.viz.dot import type_label

if TYPE_CHECKING:
    from amanda.containers.container import Container

__all__ = ["Summary", "SummaryRow", "summary"]


class SummaryRow(NamedTuple):
    """One row: the node's path, type, output types and parameter count."""

    path: Path
    type: str
    outputs: str
    params: int


class Summary(NamedTuple):
    """The rows and the model's total parameter count; ``str()`` is the printed table."""

    rows: tuple[SummaryRow, ...]
    total: int

    def __str__(self) -> str:
        header = ("path", "type", "output", "params")
        cells = [header] + [("/".join(r.path), r.type, r.outputs, f"{r.params:,}") for r in self.rows]
        widths = [max(len(c[i]) for c in cells) for i in range(4)]
        lines = []
        for cell in cells:
            left = "   ".join(cell[i].ljust(widths[i]) for i in range(3))
            lines.append(f"{left}   {cell[3].rjust(widths[3])}")
        lines.append(f"total parameters: {self.total:,}")
        return "\n".join(lines)


def _array_elements(value: Any) -> int:
    if isinstance(value, np.ndarray):
        return int(value.size)
    if isinstance(value, (tuple, list)):
        return sum(_array_elements(v) for v in value)
    if hasattr(value, "values") and callable(value.values) and not isinstance(value, (str, bytes)):
        return sum(_array_elements(v) for v in value.values())
    return 0


def _params(node: Container) -> int:
    total = 0
    stack = [node]
    while stack:
        current = stack.pop()
        total += sum(_array_elements(v) for v in current.attrs.values())
        stack.extend(current.children)
    return total


def summary(model: Container, depth: int = 1) -> Summary:
    """One row per node down to ``depth`` levels below the root (1: its children), in
    document order, with output types (``dtype[shape]`` where the ports declare them) and the
    parameters each subtree holds; ``total`` counts the whole model."""
    from amanda.containers.container import Container

    if not isinstance(model, Container):
        raise ArgumentError.at("model", "a Container", type(model).__name__)
    if not isinstance(depth, int) or isinstance(depth, bool) or depth < 1:
        raise ArgumentError.at("depth", "a positive integer", repr(depth))
    rows: list[SummaryRow] = []
    stack: list[tuple[Path, Container]] = [((c.name,), c) for c in reversed(model.children)]
    while stack:
        path, node = stack.pop()
        outputs = ", ".join(type_label(p.attrs) or p.name for p in node.outputs)
        rows.append(SummaryRow(path, str(node.type), outputs, _params(node)))
        if len(path) < depth:
            stack.extend((path + (c.name,), c) for c in reversed(node.children))
    return Summary(tuple(rows), _params(model))
