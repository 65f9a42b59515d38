"""Index-driven reads and writes: Gather*, Scatter*, OneHot, NonZero.

Negative indices count from the end of their axis; an index out of range raises
an ``ExecutionError`` rather than wrapping silently.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from amanda.autodiff.node import Node as GradNode
from amanda.autodiff.node import const, shape_of, zeros_like
from amanda.autodiff.rules_shape import select_vjp
from amanda.build import ops
from amanda.errors import ExecutionError
from amanda.exec.kernels.math_util import as_array, axis_of
from amanda.exec.kernels.registry import kernel
from amanda.ops import define
from amanda.types.node import Node, Partial
from amanda.types.rules.indexing import gather as gather_type
from amanda.types.rules.indexing import scatter as scatter_type
from amanda.types.tensor_type import Dim, TensorType

I64 = np.int64  # the dtype of index tensors the gradients build

# reduction attribute -> numpy ufunc applied unbuffered (repeated indices accumulate)
_REDUCTIONS = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def normalize_indices(indices: np.ndarray, dim: Any, name: str = "indices") -> np.ndarray:
    """``indices`` as int64 in ``[0, dim)`` (negatives wrap once); raises when out of range.

    >>> normalize_indices(np.array([-1, 0]), 3).tolist()
    [2, 0]

    ``dim`` may be an array broadcasting against ``indices`` (one bound per column).
    """
    idx = as_array(indices).astype(np.int64, copy=False)
    if idx.ndim == 0 and isinstance(dim, (int, np.integer)) and -dim <= int(idx) < dim:
        # one index (a loop's Gather): no reductions
        return idx if int(idx) >= 0 else np.array(int(idx) + int(dim), np.int64)
    if isinstance(dim, (int, np.integer)) and idx.size:  # one bound: two reductions, no temporaries
        low, high = int(idx.min()), int(idx.max())
        if low >= 0 and high < dim:
            return idx
        if low >= -dim and high < dim:
            return np.where(idx < 0, idx + dim, idx)
        idx = np.where(idx < 0, idx + dim, idx)
    else:
        idx = np.where(idx < 0, idx + dim, idx)
    if idx.size and (np.any(idx < 0) or np.any(idx >= dim)):
        raise ExecutionError.at(
            name, f"indices in [-{dim}, {dim})", f"values in [{idx.min()}, {idx.max()}]"
        )
    return idx


@kernel("Gather", since=1)
def gather(attrs: Mapping[str, Any], x: np.ndarray, indices: np.ndarray) -> tuple:
    """ONNX Gather: ``take`` along ``axis``."""
    axis = axis_of(attrs.get("axis", 0), x.ndim)
    if type(indices) is np.ndarray and indices.dtype.kind == "i" and type(x) is np.ndarray:
        try:  # numpy's own bounds check is ONNX's: negatives wrap once, others raise
            return (np.take(x, indices, axis=axis),)
        except IndexError:
            pass  # normalize_indices says which indices are out of range
    idx = normalize_indices(indices, x.shape[axis])
    return (np.take(x, idx, axis=axis),)


define("Gather", type_rule=gather_type, vjp=select_vjp)


def _element_coords(indices: np.ndarray, axis: int) -> tuple:
    """Coordinates addressed by an element-wise index tensor along ``axis``."""
    grid: list[Any] = list(np.indices(indices.shape, sparse=True))
    grid[axis] = indices
    return tuple(grid)


@kernel("GatherElements", since=11)
def gather_elements(attrs: Mapping[str, Any], x: np.ndarray, indices: np.ndarray) -> tuple:
    """ONNX GatherElements: ``take_along_axis``."""
    axis = axis_of(attrs.get("axis", 0), x.ndim)
    idx = normalize_indices(indices, x.shape[axis])
    return (x[_element_coords(idx, axis)],)


def gather_elements_type(node: Node) -> list:
    """The indices' shape with the data's dtype; both of one rank."""
    data, idx = node.shape(0), node.shape(1)
    if data is not None and idx is not None and len(data) != len(idx):
        raise node.fail(f"indices of rank {len(data)}", f"rank {len(idx)}")
    return [TensorType(node.dtype(0), idx)]


define("GatherElements", type_rule=gather_elements_type, vjp=select_vjp)


def _nd_coords(x_shape: tuple, indices: np.ndarray, batch_dims: int) -> tuple:
    """Index tuple for GatherND/ScatterND: batch coordinates then the index tuples."""
    k = indices.shape[-1]
    bounds = np.asarray(x_shape[batch_dims : batch_dims + k], dtype=np.int64)
    idx = normalize_indices(indices, bounds)
    lead = indices.shape[:-1]
    batch = []
    for b in range(batch_dims):
        shape = [1] * len(lead)
        shape[b] = lead[b]
        batch.append(np.arange(lead[b]).reshape(shape))
    return tuple(batch) + tuple(idx[..., i] for i in range(k))


@kernel("GatherND", since=11)
def gather_nd(attrs: Mapping[str, Any], x: np.ndarray, indices: np.ndarray) -> tuple:
    """ONNX GatherND (``batch_dims`` from opset 12)."""
    batch_dims = int(attrs.get("batch_dims", 0))
    return (np.ascontiguousarray(x[_nd_coords(x.shape, indices, batch_dims)]),)


def gather_nd_type(node: Node) -> list:
    """``indices.shape[:-1] + data.shape[batch_dims + indices.shape[-1]:]``."""
    data, idx = node.shape(0), node.shape(1)
    b = int(node.attr("batch_dims", 0))
    if data is None or idx is None or not idx or type(idx[-1]) is not int:
        return [TensorType(node.dtype(0), None)]
    if b + idx[-1] > len(data):
        raise node.fail(f"index tuples of at most {len(data) - b} entries", str(idx[-1]))
    return [TensorType(node.dtype(0), (*idx[:-1], *data[b + idx[-1]:]))]


define("GatherND", type_rule=gather_nd_type, vjp=select_vjp)


def _scatter_elements(
    x: np.ndarray, indices: np.ndarray, updates: np.ndarray, axis: Any, reduction: str
) -> np.ndarray:
    axis = axis_of(axis, x.ndim)
    coords = _element_coords(normalize_indices(indices, x.shape[axis]), axis)
    return _scattered(x, coords, updates, reduction)


def _scattered(x: np.ndarray, coords: Any, updates: np.ndarray, reduction: str) -> np.ndarray:
    """A copy of ``x`` with ``updates`` written (or reduced) at ``coords``."""
    out = x.copy()
    if reduction == "none":
        out[coords] = updates
    elif reduction in _REDUCTIONS:
        _REDUCTIONS[reduction].at(out, coords, updates)
    else:
        raise ExecutionError.at("reduction", "none, add, mul, max or min", reduction)
    return out


@kernel("Scatter", since=9)
def scatter(
    attrs: Mapping[str, Any], x: np.ndarray, indices: np.ndarray, updates: np.ndarray
) -> tuple:
    """ONNX Scatter (deprecated alias of ScatterElements without reduction)."""
    return (_scatter_elements(x, indices, updates, attrs.get("axis", 0), "none"),)


@kernel("ScatterElements", since=11)
def scatter_elements(
    attrs: Mapping[str, Any], x: np.ndarray, indices: np.ndarray, updates: np.ndarray
) -> tuple:
    """ONNX ScatterElements (``reduction`` add/mul from 16, max/min from 18)."""
    reduction = attrs.get("reduction", "none")
    return (_scatter_elements(x, indices, updates, attrs.get("axis", 0), reduction),)


@kernel("ScatterND", since=11)
def scatter_nd(
    attrs: Mapping[str, Any], x: np.ndarray, indices: np.ndarray, updates: np.ndarray
) -> tuple:
    """ONNX ScatterND (``reduction`` add/mul from 16, max/min from 18)."""
    reduction = attrs.get("reduction", "none")
    return (_scattered(x, _nd_coords(x.shape, indices, 0), updates, reduction),)


@kernel("OneHot", since=9)
def one_hot(
    attrs: Mapping[str, Any], indices: np.ndarray, depth: np.ndarray, values: np.ndarray
) -> tuple:
    """ONNX OneHot: ``values[1]`` where the index matches, ``values[0]`` elsewhere."""
    d = int(np.asarray(depth).reshape(-1)[0])
    rank = indices.ndim + 1
    axis = axis_of(attrs.get("axis", -1), rank)
    idx = np.asarray(indices).astype(np.int64)
    idx = np.where(idx < 0, idx + d, idx)  # out-of-range indices give an all-off row
    hot = idx[..., None] == np.arange(d)
    hot = np.moveaxis(hot, -1, axis)
    off, on = np.asarray(values).reshape(-1)[:2]
    return (np.where(hot, on, off).astype(values.dtype),)


def one_hot_type(node: Node) -> list:
    """The indices' shape with ``depth`` inserted at ``axis``; the dtype of ``values``."""
    shape = node.shape(0)
    depth = node.value(1)
    d: Dim = None
    if depth is not None and not isinstance(depth, Partial) and getattr(depth, "size", 0) == 1:
        d = int(depth.reshape(-1)[0])
    if shape is None:
        return [TensorType(node.dtype(2), None)]
    axis = node.axis(int(node.attr("axis", -1)), len(shape) + 1)
    out = list(shape)
    out.insert(axis, d)  # type: ignore[arg-type]
    return [TensorType(node.dtype(2), out)]


def onehot_vjp(n: GradNode) -> list:
    """OneHot: ``values`` gets ``[sum of g where off, sum of g where on]`` (module doc)."""
    indices, depth, values = n.given(0, 1, 2)
    if not n.need(2):
        return [None, None, None]
    g = n.grad()
    hot = ops.OneHot(indices, depth, const([0, 1], g), axis=int(n.attr("axis", -1)))
    on = ops.ReduceSum(ops.Mul(g, hot), keepdims=0)
    off = ops.Sub(ops.ReduceSum(g, keepdims=0), on)
    pair = ops.Concat(ops.Reshape(off, np.array([1], I64)), ops.Reshape(on, np.array([1], I64)), axis=0)
    return [None, None, ops.Reshape(pair, shape_of(values))]


define("OneHot", type_rule=one_hot_type, vjp=onehot_vjp)


@kernel("NonZero", since=9)
def non_zero(attrs: Mapping[str, Any], x: np.ndarray) -> tuple:
    """ONNX NonZero: int64 ``(rank, count)`` coordinates of the non-zero elements."""
    if x.ndim == 0:
        return (np.zeros((0, int(bool(x))), dtype=np.int64),)
    return (np.array(np.nonzero(x), dtype=np.int64).reshape(x.ndim, -1),)


def nonzero(node: Node) -> list:
    """int64 ``[rank, number of non-zero entries]``."""
    return [TensorType("int64", (node.rank(0), None))]


define("NonZero", type_rule=nonzero, no_gradient="integer output (positions)")


# ---- type rules and gradients shared by several ops of this family ----


def scatter_vjp(n: GradNode) -> list:
    """ScatterElements, ScatterND (reduction none or add): the updates get the gradient at the
    positions they were written to; the data gets the gradient, zeroed where it was overwritten
    (kept where the updates were added)."""
    data, indices, updates = n.given(0, 1, 2)
    reduction = n.attr("reduction", "none")
    if reduction not in ("none", "add"):
        raise n.fail("reduction none or add", f"reduction {reduction!r}")
    g = n.grad()
    nd = n.op.type == "ScatterND"
    attrs: dict[str, Any] = {} if nd else {"axis": int(n.attr("axis", 0))}
    gather = ops.GatherND if nd else ops.GatherElements
    scatter = ops.ScatterND if nd else ops.ScatterElements
    gd = g if reduction == "add" else scatter(g, indices, zeros_like(updates), **attrs)
    return [gd if n.need(0) else None, None, gather(g, indices, **attrs) if n.need(2) else None]


# each op's type rule and gradient, beside the kernels registered above
define("Scatter", type_rule=scatter_type, vjp=scatter_vjp)
define("ScatterElements", type_rule=scatter_type, vjp=scatter_vjp)
define("ScatterND", type_rule=scatter_type, vjp=scatter_vjp)
