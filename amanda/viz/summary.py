"""``amanda.summary(model)``: a table of the model's layers with their output types and
parameter counts, like Keras's ``Model.summary()``.

Output types are inferred (``amanda.infer_types``) from the model's declared input types, or
from ``inputs`` for a model whose inputs declare no shape; a port inference knows nothing
about shows its declared type, else its name. Parameters are the elements of the arrays
the nodes of a subtree hold in their attributes (``Constant`` initializers, variables' initial
values), except scalars and int64 arrays, which are hyper-parameters and shapes (a dropout
ratio, a reshape target) rather than weights.

>>> import amanda, numpy as np
>>> w = amanda.op("Constant", "w", [], ["output"], {"value": np.zeros((3, 4), np.float32)})
>>> net = amanda.Container("Net", "net", children=[w], attrs={"namespace": "amanda/onnx/17"})
>>> print(summary(net))
path   type       output         params
w      Constant   float32[3,4]       12
total parameters: 12
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from amanda.containers.arguments import brief
from amanda.containers.records import Path
from amanda.errors import ArgumentError
from amanda.types import TypeMap, infer_types
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
        # scalars and int64 vectors are hyper-parameters and shapes (a dropout ratio, a reshape
        # target), not weights: Keras and torch count neither
        return int(value.size) if value.ndim and value.dtype != np.int64 else 0
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


def _outputs(types: TypeMap, path: tuple[str, ...], node: Container) -> str:
    labels = []
    for port in node.outputs:
        inferred = types.output(path, port.name)
        labels.append(str(inferred) if inferred is not None else type_label(port.attrs) or port.name)
    return ", ".join(labels)


def summary(model: Container, depth: int = 1, inputs: Mapping[str, Any] | None = None) -> Summary:
    """One row per node down to ``depth`` levels below the root (1: its children), in
    document order, with its inferred output types (``float32[batch,32,28,28]``) and the
    parameters its subtree holds; ``total`` counts the whole model. ``inputs`` gives input
    types as ``infer_types`` takes them (``{"x": ("float32", ("batch", 784))}``), for a model
    whose input ports declare no shape, such as a bare chain of layers.

    >>> from amanda import layers
    >>> mlp = layers.Dense(784, 64, activation="relu") >> layers.Dense(64, 10)
    >>> print(summary(mlp, inputs={"x": ("float32", ("batch", 784))}))
    path      type    output              params
    dense     Dense   float32[batch,64]   50,240
    dense_1   Dense   float32[batch,10]      650
    total parameters: 50,890
    """
    from amanda.containers.container import Container

    if not isinstance(model, Container):
        raise ArgumentError.at("model", "a Container", type(model).__name__)
    if not isinstance(depth, int) or isinstance(depth, bool) or depth < 1:
        raise ArgumentError.at("depth", "a positive integer", brief(depth))
    types = infer_types(model, inputs)
    rows: list[SummaryRow] = []
    stack: list[tuple[Path, Container]] = [((c.name,), c) for c in reversed(model.children)]
    while stack:
        path, node = stack.pop()
        rows.append(SummaryRow(path, str(node.type), _outputs(types, path, node), _params(node)))
        if len(path) < depth:
            stack.extend((path + (c.name,), c) for c in reversed(node.children))
    return Summary(tuple(rows), _params(model))
