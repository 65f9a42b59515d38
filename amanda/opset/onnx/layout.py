"""Layout ops: Transpose, Concat, Split, Tile, DepthToSpace, SpaceToDepth, each with its
kernel(s), type rule and gradient side by side.

Versions follow the ONNX attribute-to-input moves (Split 13, Tile 6).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from amanda.autodiff.node import Node as GradNode
from amanda.autodiff.node import rank, shape_of
from amanda.autodiff.rules_shape import disjoint_select_vjp, repeated_select_vjp, rest
from amanda.build import ops
from amanda.build.values import Value
from amanda.errors import ExecutionError
from amanda.exec.kernels.arity import output_count
from amanda.exec.kernels.math_util import axis_of, int_list
from amanda.exec.kernels.registry import kernel
from amanda.ops import define
from amanda.opset.onnx.shape import vector
from amanda.types.node import Node, from_dims
from amanda.types.rules.shape import split as split_type
from amanda.types.tensor_type import Dim, TensorType


@kernel("Transpose", since=1)
def transpose(attrs: Mapping[str, Any], x: np.ndarray) -> tuple:
    """ONNX Transpose (default: reverse the axes), as a view: BLAS reads a transposed
    operand through its strides, so a copy here would only move memory (the executor
    never writes into a value a view can see: see ``amanda.exec.inplace``)."""
    perm = attrs.get("perm")
    axes = None if perm is None else int_list(perm)
    return (np.transpose(x, axes),)


def transpose_type(node: Node) -> list:
    """Dims permuted by ``perm`` (reversed by default)."""
    shape = node.shape(0)
    if shape is None:
        return [TensorType(node.dtype(0), None)]
    perm = node.attr("perm") or list(range(len(shape)))[::-1]
    if sorted(int(p) % max(len(shape), 1) for p in perm) != list(range(len(shape))) or len(perm) != len(shape):
        raise node.fail(f"a permutation of {len(shape)} axes", str(list(perm)))
    return [TensorType(node.dtype(0), [shape[int(p)] for p in perm])]


def transpose_vjp(n: GradNode) -> list:
    """Transpose: the inverse permutation."""
    x = n.given(0)
    perm = n.attr("perm")
    perm = list(range(rank(x, n)))[::-1] if perm is None else [int(p) for p in perm]
    return [ops.Transpose(n.grad(), perm=[int(i) for i in np.argsort(perm)])]


define("Transpose", type_rule=transpose_type, vjp=transpose_vjp)


@kernel("Concat", since=1)
def concat(attrs: Mapping[str, Any], *inputs: np.ndarray) -> tuple:
    """ONNX Concat along ``axis`` (Concat-1 defaults it to 1)."""
    arrays = [np.asarray(a) for a in inputs if a is not None]
    axis = axis_of(attrs.get("axis", 1), arrays[0].ndim)
    return (np.concatenate(arrays, axis=axis),)


def concat_type(node: Node) -> list:
    """Inputs of one dtype and rank, equal except along ``axis``, where dims add up."""
    ports = [i for i in range(len(node.types)) if node.present(i)]
    dtypes = {node.dtype(i) for i in ports} - {None}
    if len(dtypes) > 1:
        raise node.fail("inputs of one dtype", ", ".join(sorted(map(str, dtypes))))
    dtype = dtypes.pop() if dtypes else None
    shapes = [node.shape(i) for i in ports]
    known = [s for s in shapes if s is not None]
    if not known:
        return [TensorType(dtype, None)]
    rank = len(known[0])
    if any(len(s) != rank for s in known):
        raise node.fail(f"inputs of rank {rank}", str([len(s) for s in known]))
    axis = node.axis(int(node.attr("axis", 0)), rank)
    out = _concat_shape(node, shapes, known, axis)
    parts = [node.dims(i) for i in ports]
    if rank == 1 and all(p is not None for p in parts):
        node.set_value(0, from_dims([d for p in parts for d in p]))  # type: ignore[union-attr]
    return [TensorType(dtype, out)]


def concat_vjp(n: GradNode) -> list:
    """Concat: each input's stretch of the gradient along the axis."""
    g = n.grad()
    r = rank(n.outputs[0], n)
    axis = int(n.attr("axis")) % r
    axes = np.array([axis], np.int64)
    start: Value | np.ndarray = np.array([0], np.int64)
    out: list = []
    for i in range(len(n.inputs)):
        x = n.given(i)
        end = ops.Add(start, shape_of(x, axis, axis + 1))
        out.append(ops.Slice(g, start, end, axes) if n.need(i) else None)
        start = end
    return out


define("Concat", type_rule=concat_type, vjp=concat_vjp)


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


def split_vjp(n: GradNode) -> list:
    """Split: the outputs' gradients (zeros where none) joined along the axis."""
    parts = [n.grad(i) for i in range(len(n.outputs))]
    return rest(n, ops.Concat(*parts, axis=int(n.attr("axis", 0))))


define("Split", type_rule=split_type, vjp=split_vjp)


@kernel("Split", since=13, output_count=True)
def split(attrs: Mapping[str, Any], x: np.ndarray, split: np.ndarray | None = None) -> tuple:
    """ONNX Split-13+: sizes from the ``split`` input, else ``num_outputs`` parts."""
    axis = axis_of(attrs.get("axis", 0), x.ndim)
    return _split(x, axis, int_list(split), output_count(attrs))


@kernel("Tile", since=1)
def tile_v1(attrs: Mapping[str, Any], x: np.ndarray, tiles: np.ndarray, axis: np.ndarray) -> tuple:
    """ONNX Tile-1: ``tiles`` copies along one ``axis``."""
    reps = [1] * x.ndim
    reps[axis_of(np.asarray(axis).reshape(-1)[0], x.ndim)] = int(np.asarray(tiles).reshape(-1)[0])
    return (np.tile(x, reps),)


def tile_type(node: Node) -> list:
    """Each dim times its repeat count."""
    vector(node, 1, "the repeat counts")
    shape, reps = node.shape(0), node.dims(1)
    if shape is None or reps is None:
        return [TensorType(node.dtype(0), None if shape is None else (None,) * len(shape))]
    if len(reps) != len(shape):
        raise node.fail(f"{len(shape)} repeats", str(len(reps)))
    return [TensorType(node.dtype(0), [d * r if type(d) is int and type(r) is int else (d if r == 1 else None)
                                       for d, r in zip(shape, reps)])]


define("Tile", type_rule=tile_type, vjp=repeated_select_vjp)


@kernel("Tile", since=6)
def tile(attrs: Mapping[str, Any], x: np.ndarray, repeats: np.ndarray) -> tuple:
    """ONNX Tile-6+: ``repeats[i]`` copies along each axis ``i``."""
    reps = int_list(repeats)
    if len(reps) != x.ndim:
        raise ExecutionError.at("repeats", f"{x.ndim} values", str(reps))
    return (np.tile(x, reps),)


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


def depth_to_space_type(node: Node) -> list:
    """``[N, C / b², H·b, W·b]``."""
    return _block(node, True)


define("DepthToSpace", type_rule=depth_to_space_type, vjp=disjoint_select_vjp)


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


def space_to_depth_type(node: Node) -> list:
    """``[N, C·b², H / b, W / b]``."""
    return _block(node, False)


define("SpaceToDepth", type_rule=space_to_depth_type, vjp=disjoint_select_vjp)


def _concat_shape(node: Node, shapes: list, known: list, axis: int) -> list[Dim]:
    """The joined shape: dims off ``axis`` agree, dims along it add up (unknown if any is)."""
    out: list[Dim] = list(known[0])
    for s in known[1:]:
        for i in range(len(out)):
            if i != axis:
                out[i] = node.same(out[i], s[i], f"dim {i}")
    total = [s[axis] if s is not None else None for s in shapes]
    out[axis] = sum(total) if all(type(d) is int for d in total) else None  # type: ignore[arg-type]
    return out


def _block(node: Node, grow: bool) -> list:
    shape = node.shape(0)
    b = int(node.attr("blocksize", 1))
    if shape is None:
        return [TensorType(node.dtype(0), None)]
    if len(shape) != 4:
        raise node.fail("a rank-4 input", f"rank {len(shape)}")
    n, c, h, w = shape

    def div(d: Dim, k: int) -> Dim:
        if type(d) is int and d % k:
            raise node.fail(f"a dim divisible by {k}", str(d))
        return d // k if type(d) is int else None

    def mul(d: Dim, k: int) -> Dim:
        return d * k if type(d) is int else None

    if grow:
        return [TensorType(node.dtype(0), (n, div(c, b * b), mul(h, b), mul(w, b)))]
    return [TensorType(node.dtype(0), (n, mul(c, b * b), div(h, b), div(w, b)))]
