"""Vector-Jacobian rules shared by ops that move or select elements: selections (Gather, Slice
…) scatter the gradient back to where their elements came from; ``no_gradient_vjp`` passes
nothing back."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import numpy as np

from amanda.autodiff.node import Node, shape_of, size_of, zeros_like
from amanda.build import ops
from amanda.build.values import Value
from amanda.ops.registry import ONNX, entries

__all__ = ["disjoint_select_vjp", "flat_positions", "repeated_select_vjp", "NO_GRADIENT", "no_gradient_vjp", "scatter_back",
           "select_vjp"]


def rest(n: Node, first: Value | None) -> list:
    return [first] + [None] * (len(n.inputs) - 1)


#: the first opset whose ScatterElements adds the updates of repeated positions
SCATTER_ADD_SINCE = 16


def scatter_back(g: Value, x: Value, positions: Value, n: Node | None = None, unique: bool = False) -> Value:
    """``g`` added into zeros shaped like ``x`` at the flat ``positions`` (shaped like ``g``).

    Before opset 16 (the forward op ``n``'s), ScatterElements cannot add: positions known to be
    ``unique`` are written as they are, and repeated ones are an error naming the op."""
    flat = np.array([-1], np.int64)
    zeros = ops.Reshape(zeros_like(x), flat)
    reduction = {"reduction": "add"}
    if n is not None and n.opset is not None and n.opset < SCATTER_ADD_SINCE:
        if not unique:
            raise n.fail(f"opset {SCATTER_ADD_SINCE} or later (ScatterElements adding at repeated positions), or "
                         "positions that cannot repeat", f"opset {n.opset}")
        reduction = {}
    summed = ops.ScatterElements(zeros, ops.Reshape(positions, flat), ops.Reshape(g, flat), axis=0, **reduction)
    return ops.Reshape(summed, shape_of(x))


def flat_positions(x: Value) -> Value:
    """Each element's flat position, shaped like ``x``."""
    count = size_of(x)
    return ops.Reshape(ops.Range(np.array(0, np.int64), count, np.array(1, np.int64)), shape_of(x))


def select_vjp(n: Node) -> list:
    """Ops that pick elements by an index input (Gather, GatherElements, GatherND): the forward
    op replayed on positions, the gradient scattered back there (summed where an element was
    picked twice, written once where constant indices are distinct)."""
    return _select(n, _distinct_indices(n))


def repeated_select_vjp(n: Node) -> list:
    """Tile (and Pad's edge/reflect/wrap modes): an element may be copied many times, and the op's
    second input holds counts or pads, not indices; as :func:`select_vjp`, summed."""
    return _select(n, False)


def disjoint_select_vjp(n: Node) -> list:
    """Ops that pick no element twice (Slice, Compress, DepthToSpace, SpaceToDepth,
    ReverseSequence): as :func:`select_vjp`, each element's gradient written once."""
    return _select(n, True)


def _select(n: Node, unique: bool) -> list:
    x = n.given(0)
    attrs = n.own_attrs()
    from amanda.build.builder import Ops

    builder = getattr(Ops(n.namespace), n.op.type)  # the op's own version (SpaceToDepth's mode is 28's)
    picked = builder(flat_positions(x), *n.inputs[1:], **attrs)
    return rest(n, scatter_back(n.grad(), x, picked, n, unique=unique))


def _distinct_indices(n: Node) -> bool:
    """Whether the op's index input (a Gather's) is constant and picks no element twice."""
    index = n.inputs[1] if len(n.inputs) > 1 else None
    known = None if index is None or index.constant is None else np.asarray(index.constant).reshape(-1)
    return known is not None and bool((known >= 0).all()) and np.unique(known).size == known.size


class _NoGradient(Mapping[str, str]):
    """op type -> why no input gets a gradient through it: a live listing of the registry's
    ``no_gradient`` reasons (declared beside each op's kernel, or in :mod:`amanda.ops.gradients`)."""

    def _table(self) -> dict[str, str]:
        return {e.op_type: e.no_gradient for e in entries(ONNX) if e.no_gradient is not None}

    def __getitem__(self, op_type: str) -> str:
        return self._table()[op_type]

    def __iter__(self) -> Iterator[str]:
        return iter(self._table())

    def __len__(self) -> int:
        return len(self._table())


NO_GRADIENT: Mapping[str, str] = _NoGradient()


def no_gradient_vjp(n: Node) -> list:
    """The ops of ``NO_GRADIENT``: no input gets a gradient through them."""
    return [None] * len(n.inputs)
