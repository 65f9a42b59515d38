"""Index-driven reads and writes: Gather*, Scatter*, OneHot, NonZero.

Negative indices count from the end of their axis; an index out of range raises
an ``ExecutionError`` rather than wrapping silently.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from amanda.errors import ExecutionError
from amanda.exec.kernels.math_util import axis_of
from amanda.exec.kernels.registry import kernel

# reduction attribute -> numpy ufunc applied unbuffered (repeated indices accumulate)
_REDUCTIONS = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def normalize_indices(indices: np.ndarray, dim: Any, name: str = "indices") -> np.ndarray:
    """``indices`` as int64 in ``[0, dim)`` (negatives wrap once); raises when out of range.

    >>> normalize_indices(np.array([-1, 0]), 3).tolist()
    [2, 0]

    ``dim`` may be an array broadcasting against ``indices`` (one bound per column).
    """
    idx = np.asarray(indices).astype(np.int64, copy=False)
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
    idx = normalize_indices(indices, x.shape[axis])
    return (np.take(x, idx, axis=axis),)


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


@kernel("NonZero", since=9)
def non_zero(attrs: Mapping[str, Any], x: np.ndarray) -> tuple:
    """ONNX NonZero: int64 ``(rank, count)`` coordinates of the non-zero elements."""
    if x.ndim == 0:
        return (np.zeros((0, int(bool(x))), dtype=np.int64),)
    return (np.array(np.nonzero(x), dtype=np.int64).reshape(x.ndim, -1),)
