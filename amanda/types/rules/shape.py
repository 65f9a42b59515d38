"""Shape families: ops that compute, read or rearrange shapes, with value propagation."""

from __future__ import annotations

from typing import Any

import numpy as np

from amanda.types.node import Node, Partial
from amanda.types.rules import rule
from amanda.types.tensor_type import ONNX_DTYPES, Dim, TensorType, dtype_name

SMALL = 1024  # constants with at most this many entries are kept as values


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
