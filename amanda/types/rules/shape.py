"""Shape families: ops that compute, read or rearrange shapes, with value propagation."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from amanda.types.node import Node, Partial, from_dims
from amanda.types.rules import rule
from amanda.types.tensor_type import ONNX_DTYPES, Dim, TensorType, dtype_name

SMALL = 1024  # constants with at most this many entries are kept as values


def _prod(dims: Any) -> Dim:
    rest = [d for d in dims if d != 1]
    if len(rest) == 1:
        return rest[0]  # type: ignore[no-any-return]
    if any(type(d) is not int for d in rest):
        return None
    return math.prod(rest)


def _int64(shape: Any) -> TensorType:
    return TensorType("int64", shape)


@rule("Constant")
def constant(node: Node) -> list:
    """The type of the attribute value (``value``, ``value_float``, ``value_ints`` …)."""
    a = node.attrs
    value: Any = None
    if a.get("value") is not None:
        value = np.asarray(a["value"])
    elif a.get("sparse_value") is not None:
        sparse = a["sparse_value"]
        return [TensorType(dtype_name(np.asarray(sparse["values"]).dtype), tuple(sparse["dims"]))]
    for key, dtype in (("value_float", np.float32), ("value_floats", np.float32),
                       ("value_int", np.int64), ("value_ints", np.int64)):
        if a.get(key) is not None:
            value = np.asarray(a[key], dtype=dtype)
    for key in ("value_string", "value_strings"):
        if a.get(key) is not None:
            return [TensorType("string", () if key == "value_string" else (len(a[key]),))]
    if value is None:
        raise node.fail("one of the attributes value, value_float, value_ints …", "none")
    if value.size <= SMALL:
        node.set_value(0, value)
    return [TensorType(dtype_name(value.dtype), value.shape)]


@rule("Shape")
def shape_of(node: Node) -> list:
    """An int64 vector; its value is the input's dims (ints and symbols)."""
    shape = node.shape(0)
    if shape is None:
        return [_int64((None,))]
    start, end = int(node.attr("start", 0)), node.attr("end")
    dims = shape[start: None if end is None else int(end)]
    node.set_value(0, from_dims(dims))
    return [_int64((len(dims),))]


@rule("Size")
def size_of(node: Node) -> list:
    """An int64 scalar; its value is the element count when every dim is known."""
    shape = node.shape(0)
    if shape is not None:
        n = _prod(shape)
        node.set_value(0, None if n is None else np.array(n, np.int64))
    return [_int64(())]


def _vector(node: Node, i: int, what: str) -> None:
    """Input ``i`` (a shape or repeat counts) is 1-D, as ONNX requires."""
    rank = node.rank(i)
    if rank is not None and rank != 1:
        raise node.fail(f"{what} (input {i}) of rank 1", f"rank {rank}")


@rule("Reshape")
def reshape(node: Node) -> list:
    """Dims from the target shape: 0 copies the input dim, -1 is what is left."""
    dtype, shape = node.dtype(0), node.shape(0)
    if node.opset >= 5:
        _vector(node, 1, "the target shape")
    target = node.dims(1) if node.opset >= 5 else tuple(node.attr("shape", ()))
    if target is None:
        n = node.shape(1)
        return [TensorType(dtype, None if n is None or type(n[0]) is not int else (None,) * n[0])]
    allowzero = bool(node.attr("allowzero", 0))
    out: list[Dim] = []
    for i, d in enumerate(target):
        if d == 0 and not allowzero:
            out.append(shape[i] if shape is not None and i < len(shape) else None)
        else:
            out.append(d)
    if -1 in out:
        k = out.index(-1)
        out[k] = _remaining(shape, out[:k] + out[k + 1:])
    elif (shape is not None and all(type(d) is int for d in shape) and all(type(d) is int for d in out)
          and math.prod(shape) != math.prod(out)):  # type: ignore[arg-type]
        raise node.fail(f"a shape of {math.prod(shape)} elements", str(tuple(out)))  # type: ignore[arg-type]
    return [TensorType(dtype, out)]


def _remaining(shape: Any, others: list) -> Dim:
    """The dim a -1 stands for: the input's dims divided by the others, symbols cancelling."""
    if shape is None or any(d is None for d in shape) or any(d is None for d in others):
        return None
    top = [d for d in shape]
    rest = []
    for d in others:
        if type(d) is str and d in top:
            top.remove(d)
        else:
            rest.append(d)
    if any(type(d) is not int for d in top + rest):
        return None
    denom = math.prod(rest)
    return math.prod(top) // denom if denom else None


@rule("Flatten")
def flatten(node: Node) -> list:
    """A matrix: dims before ``axis`` times each other, then the rest."""
    shape = node.shape(0)
    if shape is None:
        return [TensorType(node.dtype(0), (None, None))]
    axis = int(node.attr("axis", 1))
    if not -len(shape) <= axis <= len(shape):
        raise node.fail(f"axis in [{-len(shape)}, {len(shape)}]", str(axis))
    axis = axis + len(shape) if axis < 0 else axis
    return [TensorType(node.dtype(0), (_prod(shape[:axis]), _prod(shape[axis:])))]


@rule("Squeeze")
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


@rule("Unsqueeze")
def unsqueeze(node: Node) -> list:
    """Inserts dims of size 1 at the listed axes of the output."""
    shape, axes = node.shape(0), node.axes("axes", 1)
    if shape is None or axes is None:
        return [TensorType(node.dtype(0), None)]
    rank = len(shape) + len(axes)
    at = sorted(node.axis(a, rank) for a in axes)  # type: ignore[type-var]
    if len(set(at)) != len(at):
        raise node.fail("distinct axes", str(axes))
    dims = iter(shape)
    out = [1 if i in at else next(dims) for i in range(rank)]
    value = node.value(0)
    if isinstance(value, Partial) and value.scalar:
        node.set_value(0, Partial(value.dims))
    return [TensorType(node.dtype(0), out)]


@rule("Transpose")
def transpose(node: Node) -> list:
    """Dims permuted by ``perm`` (reversed by default)."""
    shape = node.shape(0)
    if shape is None:
        return [TensorType(node.dtype(0), None)]
    perm = node.attr("perm") or list(range(len(shape)))[::-1]
    if sorted(int(p) % max(len(shape), 1) for p in perm) != list(range(len(shape))) or len(perm) != len(shape):
        raise node.fail(f"a permutation of {len(shape)} axes", str(list(perm)))
    return [TensorType(node.dtype(0), [shape[int(p)] for p in perm])]


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


@rule("Concat")
def concat(node: Node) -> list:
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


@rule("Split")
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


def _slice_len(d: Dim, start: int, end: int, step: int) -> Dim:
    if type(d) is int:
        return len(range(*slice(start, end, step).indices(d)))
    if start == 0 and step == 1 and end >= 2**31 - 1:
        return d
    return None


@rule("Slice")
def slice_(node: Node) -> list:
    """Per-axis Python slicing with ``starts``, ``ends``, ``axes`` and ``steps``."""
    shape = node.shape(0)
    if node.opset < 10:
        starts, ends, axes, steps = node.attr("starts"), node.attr("ends"), node.attr("axes"), None
    else:
        starts, ends = node.ints(1), node.ints(2)
        axes = node.ints(3) if node.present(3) else None
        steps = node.ints(4) if node.present(4) else None
        if (node.present(3) and axes is None) or (node.present(4) and steps is None):
            starts = None
    if shape is None or starts is None or ends is None:
        return [TensorType(node.dtype(0), None if shape is None else (None,) * len(shape))]
    axes = list(axes) if axes else list(range(len(starts)))
    steps = list(steps) if steps else [1] * len(starts)
    out = list(shape)
    for s, e, a, st in zip(starts, ends, axes, steps):
        if st == 0:
            raise node.fail("non-zero steps", "0")
        a = node.axis(int(a), len(shape))
        out[a] = _slice_len(shape[a], int(s), int(e), int(st))  # type: ignore[index]
    dims = node.dims(0)
    if isinstance(node.value(0), Partial) and len(axes) == 1 and dims is not None:
        node.set_value(0, from_dims(dims[slice(int(starts[0]), int(ends[0]), int(steps[0]))]))
    return [TensorType(node.dtype(0), out)]


@rule("Expand")
def expand(node: Node) -> list:
    """The input broadcast with the target shape."""
    _vector(node, 1, "the target shape")
    target = node.dims(1)
    shape = node.shape(0)
    if target is None:
        n = node.shape(1)
        if n is None or type(n[0]) is not int or shape is None:
            return [TensorType(node.dtype(0), None)]
        rank = max(n[0], len(shape))
        # a target dim is 1 or the input's dim, so input dims other than 1 survive
        out = [None] * (rank - len(shape)) + [d if d != 1 else None for d in shape]
        return [TensorType(node.dtype(0), out)]
    return [TensorType(node.dtype(0), node.broadcast(shape, tuple(target)))]


@rule("Tile")
def tile(node: Node) -> list:
    """Each dim times its repeat count."""
    _vector(node, 1, "the repeat counts")
    shape, reps = node.shape(0), node.dims(1)
    if shape is None or reps is None:
        return [TensorType(node.dtype(0), None if shape is None else (None,) * len(shape))]
    if len(reps) != len(shape):
        raise node.fail(f"{len(shape)} repeats", str(len(reps)))
    return [TensorType(node.dtype(0), [d * r if type(d) is int and type(r) is int else (d if r == 1 else None)
                                       for d, r in zip(shape, reps)])]


@rule("Pad")
def pad(node: Node) -> list:
    """Each padded dim grows by its begin and end pads."""
    shape = node.shape(0)
    pads = node.attr("pads") if node.opset < 11 else node.ints(1)
    if shape is None or pads is None:
        return [TensorType(node.dtype(0), None if shape is None else (None,) * len(shape))]
    axes = node.ints(3) if node.present(3) else list(range(len(shape)))
    if axes is None:
        return [TensorType(node.dtype(0), (None,) * len(shape))]
    if len(pads) != 2 * len(axes):
        raise node.fail(f"{2 * len(axes)} pads", str(len(pads)))
    out = list(shape)
    for k, given in enumerate(axes):
        a = node.axis(given, len(shape))
        d = shape[a]
        grow = int(pads[k]) + int(pads[k + len(axes)])
        out[a] = d + grow if type(d) is int else (d if grow == 0 else None)  # type: ignore[index]
    return [TensorType(node.dtype(0), out)]


@rule("ConstantOfShape")
def constant_of_shape(node: Node) -> list:
    """The shape the input's value gives, the dtype of ``value`` (float32 by default)."""
    value = node.attr("value")
    dtype = dtype_name(np.asarray(value).dtype) if value is not None else "float32"
    dims = node.dims(0)
    if dims is None:
        n = node.shape(0)
        return [TensorType(dtype, None if n is None or type(n[0]) is not int else (None,) * n[0])]
    return [TensorType(dtype, dims)]


@rule("Range")
def range_(node: Node) -> list:
    """A vector of ceil((limit - start) / delta) entries of the start's dtype."""
    start, limit, delta = (node.dims(i) for i in range(3))
    n: Dim = None
    if start and limit and delta:
        s, lim, d = start[0], limit[0], delta[0]
        if type(s) is int and type(lim) is int and type(d) is int and d:
            n = max(-(-(lim - s) // d), 0)
        elif s == 0 and d == 1:
            n = lim
    for i in range(3):
        r = node.rank(i)
        if r not in (None, 0):
            raise node.fail(f"a scalar input {i}", f"rank {r}")
    dtypes = {node.dtype(i) for i in range(3)} - {None}
    if len(dtypes) > 1:
        raise node.fail("start, limit and delta of one dtype", ", ".join(sorted(map(str, dtypes))))
    return [TensorType(node.dtype(0), (n,))]


@rule("EyeLike")
def eye_like(node: Node) -> list:
    """The input's shape; the dtype of ``dtype`` or of the input."""
    to = node.attr("dtype")
    return [TensorType(ONNX_DTYPES.get(int(to)) if to is not None else node.dtype(0), node.shape(0))]
