"""Type rules of Squeeze and Split, which other type rules use too."""

from __future__ import annotations

from typing import Any

from amanda.types.node import Node, Partial
from amanda.types.tensor_type import TensorType


def squeeze(node: Node) -> list:
    """Drops the listed axes (which must be 1), or every dim of size 1."""
    shape, axes = node.shape(0), node.axes("axes", 1)
    if shape is None or axes is None:
        return [TensorType(node.dtype(0), None)]
    if not axes:
        if any(type(d) is not int for d in shape):
            return [TensorType(node.dtype(0), None)]
        keep = [d for d in shape if d != 1]
    else:
        drop = {node.axis(a, len(shape)) for a in axes}
        for a in drop:
            if type(shape[a]) is int and shape[a] != 1:  # type: ignore[index]
                raise node.fail(f"dim {a} of size 1 to squeeze", str(shape[a]))  # type: ignore[index]
        keep = [d for i, d in enumerate(shape) if i not in drop]
    value = node.value(0)
    if isinstance(value, Partial) and not keep:
        node.set_value(0, Partial(value.dims, scalar=True))
    return [TensorType(node.dtype(0), keep)]


def split(node: Node) -> list:
    """Pieces along ``axis``: sizes from ``split``, else equal parts (the last one smaller)."""
    shape, n = node.shape(0), node.n_out
    if shape is None:
        return [TensorType(node.dtype(0), None)] * n
    axis = node.axis(int(node.attr("axis", 0)), len(shape))
    sizes: Any = node.axes("split", 1)
    total = shape[axis]  # type: ignore[index]
    if sizes is None:  # given by an input whose value is not known
        sizes = [None] * n
    elif not sizes:
        if type(total) is int:
            each = -(-total // n)
            sizes = [min(each, max(total - each * i, 0)) for i in range(n)]
        else:
            sizes = [None] * n
    elif type(total) is int and sum(sizes) != total:
        raise node.fail(f"split sizes adding up to {total}", str(list(sizes)))
    return [TensorType(node.dtype(0), [*shape[:axis], s, *shape[axis + 1:]]) for s in sizes]  # type: ignore[index]


