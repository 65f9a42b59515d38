"""Shape manipulation: Reshape, Transpose, Concat, Split, Squeeze, Unsqueeze, Expand,
Tile, Flatten, Shape, Size, DepthToSpace, SpaceToDepth.

Versions follow the ONNX attribute-to-input moves (Reshape 5, Split 13,
Squeeze/Unsqueeze 13, Tile 6); ops whose later versions only widen types or add
attributes with defaults have one kernel from version 1.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from amanda.errors import ExecutionError
from amanda.exec.kernels.arity import output_count
from amanda.exec.kernels.math_util import axis_of, int_list
from amanda.exec.kernels.registry import kernel


def _reshape(x: np.ndarray, shape: Sequence[int], allowzero: bool) -> np.ndarray:
    target = list(shape)
    if not allowzero:
        # 0 copies the input's dimension at the same position
        target = [x.shape[i] if d == 0 else d for i, d in enumerate(target)]
    return x.reshape(target)


@kernel("Reshape", since=1)
def reshape_v1(attrs: Mapping[str, Any], x: np.ndarray) -> tuple:
    """ONNX Reshape-1: the target shape is the ``shape`` attribute."""
    return (_reshape(x, int_list(attrs.get("shape")), False),)


@kernel("Reshape", since=5)
def reshape(attrs: Mapping[str, Any], x: np.ndarray, shape: np.ndarray) -> tuple:
    """ONNX Reshape-5+: target shape input; 0 copies a dimension unless ``allowzero``."""
    return (_reshape(x, int_list(shape), bool(attrs.get("allowzero", 0))),)


@kernel("Transpose", since=1)
def transpose(attrs: Mapping[str, Any], x: np.ndarray) -> tuple:
    """ONNX Transpose (default: reverse the axes), as a view: BLAS reads a transposed
    operand through its strides, so a copy here would only move memory (the executor
    never writes into a value a view can see: see ``amanda.exec.inplace``)."""
    perm = attrs.get("perm")
    axes = None if perm is None else int_list(perm)
    return (np.transpose(x, axes),)


@kernel("Concat", since=1)
def concat(attrs: Mapping[str, Any], *inputs: np.ndarray) -> tuple:
    """ONNX Concat along ``axis`` (Concat-1 defaults it to 1)."""
    arrays = [np.asarray(a) for a in inputs if a is not None]
    axis = axis_of(attrs.get("axis", 1), arrays[0].ndim)
    return (np.concatenate(arrays, axis=axis),)


def _split(x: np.ndarray, axis: int, sizes: list[int], parts: int | None) -> tuple:
    dim = x.shape[axis]
    if not sizes:
        if not parts:
            raise ExecutionError.at(
                "Split",
                "a split input, a split or num_outputs attribute, or the node's output count",
                "none of them",
                "the runner passes num_outputs for kernels registered with output_count=True",
            )
        chunk = -(-dim // parts)  # opset 18: the last part may be smaller
        sizes = [min(chunk, max(0, dim - i * chunk)) for i in range(parts)]
    if sum(sizes) != dim:
        raise ExecutionError.at("split", f"sizes summing to {dim}", str(sizes))
    bounds = np.cumsum(sizes)[:-1]
    return tuple(np.split(x, bounds, axis=axis))


@kernel("Split", since=1, output_count=True)
def split_v1(attrs: Mapping[str, Any], x: np.ndarray, split: np.ndarray | None = None) -> tuple:
    """ONNX Split-1..12: sizes from the ``split`` attribute (or Split-1's input)."""
    sizes = int_list(attrs.get("split")) or int_list(split)
    axis = axis_of(attrs.get("axis", 0), x.ndim)
    return _split(x, axis, sizes, output_count(attrs))


@kernel("Split", since=13, output_count=True)
def split(attrs: Mapping[str, Any], x: np.ndarray, split: np.ndarray | None = None) -> tuple:
    """ONNX Split-13+: sizes from the ``split`` input, else ``num_outputs`` parts."""
    axis = axis_of(attrs.get("axis", 0), x.ndim)
    return _split(x, axis, int_list(split), output_count(attrs))


def _squeeze(x: np.ndarray, axes: list[int]) -> np.ndarray:
    if not axes:
        return x.reshape([d for d in x.shape if d != 1])
    norm = {axis_of(a, x.ndim, "axes") for a in axes}
    bad = [a for a in norm if x.shape[a] != 1]
    if bad:
        raise ExecutionError.at("axes", "axes of size 1", f"axes {bad} of shape {x.shape}")
    return x.reshape([d for i, d in enumerate(x.shape) if i not in norm])


@kernel("Squeeze", since=1)
def squeeze_v1(attrs: Mapping[str, Any], x: np.ndarray) -> tuple:
    """ONNX Squeeze-1/11: ``axes`` attribute (all size-1 axes when absent)."""
    return (_squeeze(x, int_list(attrs.get("axes"))),)


@kernel("Squeeze", since=13)
def squeeze(attrs: Mapping[str, Any], x: np.ndarray, axes: np.ndarray | None = None) -> tuple:
    """ONNX Squeeze-13+: ``axes`` input (all size-1 axes when absent)."""
    return (_squeeze(x, int_list(axes)),)


def _unsqueeze(x: np.ndarray, axes: list[int]) -> np.ndarray:
    rank = x.ndim + len(axes)
    norm = sorted(axis_of(a, rank, "axes") for a in axes)
    if len(set(norm)) != len(norm):
        raise ExecutionError.at("axes", "distinct axes", str(axes))
    shape = list(x.shape)
    for a in norm:
        shape.insert(a, 1)
    return x.reshape(shape)


@kernel("Unsqueeze", since=1)
def unsqueeze_v1(attrs: Mapping[str, Any], x: np.ndarray) -> tuple:
    """ONNX Unsqueeze-1/11: ``axes`` attribute."""
    return (_unsqueeze(x, int_list(attrs.get("axes"))),)


@kernel("Unsqueeze", since=13)
def unsqueeze(attrs: Mapping[str, Any], x: np.ndarray, axes: np.ndarray) -> tuple:
    """ONNX Unsqueeze-13+: ``axes`` input."""
    return (_unsqueeze(x, int_list(axes)),)


@kernel("Expand", since=8)
def expand(attrs: Mapping[str, Any], x: np.ndarray, shape: np.ndarray) -> tuple:
    """ONNX Expand: broadcast ``x`` with ``shape`` (numpy's bidirectional rule)."""
    target = np.broadcast_shapes(x.shape, tuple(int_list(shape)))
    return (np.array(np.broadcast_to(x, target)),)


@kernel("Tile", since=1)
def tile_v1(attrs: Mapping[str, Any], x: np.ndarray, tiles: np.ndarray, axis: np.ndarray) -> tuple:
    """ONNX Tile-1: ``tiles`` copies along one ``axis``."""
    reps = [1] * x.ndim
    reps[axis_of(np.asarray(axis).reshape(-1)[0], x.ndim)] = int(np.asarray(tiles).reshape(-1)[0])
    return (np.tile(x, reps),)


@kernel("Tile", since=6)
def tile(attrs: Mapping[str, Any], x: np.ndarray, repeats: np.ndarray) -> tuple:
    """ONNX Tile-6+: ``repeats[i]`` copies along each axis ``i``."""
    reps = int_list(repeats)
    if len(reps) != x.ndim:
        raise ExecutionError.at("repeats", f"{x.ndim} values", str(reps))
    return (np.tile(x, reps),)


@kernel("Flatten", since=1)
def flatten(attrs: Mapping[str, Any], x: np.ndarray) -> tuple:
    """ONNX Flatten: ``(prod(shape[:axis]), prod(shape[axis:]))``."""
    axis = int(attrs.get("axis", 1))
    if axis < 0:
        axis += x.ndim
    if not 0 <= axis <= x.ndim:
        raise ExecutionError.at("axis", f"an axis in [{-x.ndim}, {x.ndim}]", str(attrs.get("axis")))
    outer = int(np.prod(x.shape[:axis]))
    return (x.reshape(outer, int(np.prod(x.shape[axis:]))),)


@kernel("Shape", since=1)
def shape(attrs: Mapping[str, Any], x: np.ndarray) -> tuple:
    """ONNX Shape (``start``/``end`` from opset 15, clamped like slicing)."""
    rank = x.ndim
    start = int(attrs.get("start", 0))
    end = attrs.get("end")
    end = rank if end is None else int(end)
    start = min(max(start + rank if start < 0 else start, 0), rank)
    end = min(max(end + rank if end < 0 else end, 0), rank)
    return (np.array(x.shape[start:end], dtype=np.int64),)


@kernel("Size", since=1)
def size(attrs: Mapping[str, Any], x: np.ndarray) -> tuple:
    """ONNX Size: the element count as an int64 scalar."""
    return (np.array(x.size, dtype=np.int64),)


@kernel("DepthToSpace", since=1)
def depth_to_space(attrs: Mapping[str, Any], x: np.ndarray) -> tuple:
    """ONNX DepthToSpace (``mode`` DCR or CRD)."""
    b = int(attrs["blocksize"])
    n, c, h, w = x.shape
    if attrs.get("mode", "DCR") == "CRD":
        y = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    else:
        y = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    return (np.ascontiguousarray(y).reshape(n, c // (b * b), h * b, w * b),)


@kernel("SpaceToDepth", since=1)
def space_to_depth(attrs: Mapping[str, Any], x: np.ndarray) -> tuple:
    """ONNX SpaceToDepth: ``blocksize``-square blocks become channels (``mode`` from 28)."""
    b = int(attrs["blocksize"])
    n, c, h, w = x.shape
    blocks = x.reshape(n, c, h // b, b, w // b, b)
    if attrs.get("mode", "DCR") == "CRD":
        y = blocks.transpose(0, 1, 3, 5, 2, 4)
    else:
        y = blocks.transpose(0, 3, 5, 1, 2, 4)
    return (np.ascontiguousarray(y).reshape(n, c * b * b, h // b, w // b),)
