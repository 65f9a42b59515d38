"""Order-based ops: TopK, Unique, and the determinant Det."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from amanda.errors import ExecutionError
from amanda.exec.kernels.math_util import axis_of
from amanda.exec.kernels.registry import kernel


def top_k(x: np.ndarray, k: int, axis: int, largest: bool) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` largest (or smallest) entries along ``axis``; ties keep the lower index first.

    >>> values, indices = top_k(np.array([1, 3, 3]), 2, 0, largest=True)
    >>> values.tolist(), indices.tolist()
    ([3, 3], [1, 2])"""
    n = x.shape[axis]
    if not 0 <= k <= n:
        raise ExecutionError.at("K", f"a count in [0, {n}]", str(k))
    if largest:
        # a stable ascending sort of the reversed axis, read backwards, is descending
        # with equal values in ascending original index
        rev = np.flip(x, axis=axis)
        order = np.flip(np.argsort(rev, axis=axis, kind="stable"), axis=axis)
        order = (n - 1) - order
    else:
        order = np.argsort(x, axis=axis, kind="stable")
    indices = np.take(order, np.arange(k), axis=axis).astype(np.int64)
    return np.take_along_axis(x, indices, axis=axis), indices


@kernel("TopK", since=1)
def top_k_v1(attrs: Mapping[str, Any], x: np.ndarray) -> tuple:
    """ONNX TopK-1: ``k`` attribute, largest first."""
    axis = axis_of(attrs.get("axis", -1), x.ndim)
    return top_k(x, int(attrs["k"]), axis, True)


@kernel("TopK", since=10)
def top_k_op(attrs: Mapping[str, Any], x: np.ndarray, k: np.ndarray) -> tuple:
    """ONNX TopK-10+: ``K`` input; ``largest`` from 11 (the result is always sorted)."""
    axis = axis_of(attrs.get("axis", -1), x.ndim)
    count = int(np.asarray(k).reshape(-1)[0])
    return top_k(x, count, axis, bool(attrs.get("largest", 1)))


@kernel("Unique", since=11)
def unique(attrs: Mapping[str, Any], x: np.ndarray) -> tuple:
    """ONNX Unique: values, first indices, inverse indices, counts (sorted or by first use)."""
    axis = attrs.get("axis")
    if axis is not None:
        axis = axis_of(axis, x.ndim)
    data = x if axis is not None else x.reshape(-1)
    values, first, inverse, counts = np.unique(
        data, return_index=True, return_inverse=True, return_counts=True, axis=axis
    )
    inverse = inverse.reshape(-1)
    if not int(attrs.get("sorted", 1)):
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        values = np.take(values, order, axis=0 if axis is None else axis)
        first, counts, inverse = first[order], counts[order], rank[inverse]
    as_int = lambda a: np.asarray(a, dtype=np.int64)
    return values, as_int(first), as_int(inverse), as_int(counts)


@kernel("Det", since=11)
def det(attrs: Mapping[str, Any], x: np.ndarray) -> tuple:
    """ONNX Det: determinants of the trailing square matrices."""
    work = x if x.dtype in (np.float32, np.float64) else x.astype(np.float32)
    return (np.asarray(np.linalg.det(work)).astype(x.dtype),)
