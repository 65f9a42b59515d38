"""Ops that build tensors from attributes or shapes: Constant, ConstantOfShape, Range, EyeLike."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from amanda.autodiff.node import Node as GradNode
from amanda.autodiff.node import size_of
from amanda.build import ops
from amanda.errors import ExecutionError
from amanda.exec.kernels.math_util import int_list
from amanda.exec.kernels.onnx_dtypes import onnx_dtype
from amanda.exec.kernels.registry import kernel
from amanda.ops import define
from amanda.types.node import Node
from amanda.types.tensor_type import ONNX_DTYPES, Dim, TensorType, dtype_name

I64 = np.int64  # the dtype of index tensors the gradients build

_LOW_PRECISION = frozenset({"float16", "bfloat16"})
# Range's stash_type (a TensorProto code) -> the dtype low-precision ranges are computed in
_STASH = {1: np.float32, 11: np.float64}


def _dense(sparse: Any) -> np.ndarray:
    """A sparse tensor as a dense array: amanda's ``{values, indices, dims}`` mapping (what
    the ONNX importer stores) or a raw ``SparseTensorProto``."""
    if isinstance(sparse, np.ndarray):
        return sparse
    if isinstance(sparse, Mapping):
        values = np.asarray(sparse["values"])
        indices = np.asarray(sparse["indices"]).astype(np.int64)
        shape = tuple(int(d) for d in sparse["dims"])
    else:
        from onnx import numpy_helper  # only raw protos need onnx at run time

        values = numpy_helper.to_array(sparse.values)
        indices = numpy_helper.to_array(sparse.indices).astype(np.int64)
        shape = tuple(int(d) for d in sparse.dims)
    dense = np.zeros(int(np.prod(shape)), dtype=values.dtype)
    if indices.ndim == 2:  # [NNZ, rank] coordinates
        indices = np.ravel_multi_index(tuple(indices.T), shape)
    dense[indices.reshape(-1)] = values.reshape(-1)
    return dense.reshape(shape)


@kernel("Constant", since=1)
def constant(attrs: Mapping[str, Any]) -> tuple:
    """ONNX Constant from whichever ``value*`` attribute is set."""
    value = attrs.get("value")
    if isinstance(value, np.ndarray) and not value.flags.writeable:
        return (value,)  # a stored weight is read where it lies (a lazy one: through its file's map), never copied
    if value is not None:
        return (np.array(value),)
    if attrs.get("sparse_value") is not None:
        return (_dense(attrs["sparse_value"]),)
    if attrs.get("value_float") is not None:
        return (np.array(attrs["value_float"], dtype=np.float32),)
    if attrs.get("value_floats") is not None:
        return (np.array(list(attrs["value_floats"]), dtype=np.float32),)
    if attrs.get("value_int") is not None:
        return (np.array(attrs["value_int"], dtype=np.int64),)
    if attrs.get("value_ints") is not None:
        return (np.array(list(attrs["value_ints"]), dtype=np.int64),)
    if attrs.get("value_string") is not None:
        return (np.array(attrs["value_string"], dtype=object),)
    if attrs.get("value_strings") is not None:
        return (np.array(list(attrs["value_strings"]), dtype=object),)
    raise ExecutionError.at("Constant", "one value* attribute", "none")


def constant_type(node: Node) -> list:
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


define("Constant", type_rule=constant_type, no_gradient="no inputs")


@kernel("ConstantOfShape", since=9)
def constant_of_shape(attrs: Mapping[str, Any], shape: np.ndarray) -> tuple:
    """ONNX ConstantOfShape: fill ``shape`` with the one-element ``value`` (default float32 0)."""
    value = attrs.get("value")
    fill = np.zeros(1, dtype=np.float32) if value is None else np.asarray(value).reshape(-1)
    return (np.full(int_list(shape), fill[0], dtype=fill.dtype),)


def constant_of_shape_type(node: Node) -> list:
    """The shape the input's value gives, the dtype of ``value`` (float32 by default)."""
    value = node.attr("value")
    dtype = dtype_name(np.asarray(value).dtype) if value is not None else "float32"
    dims = node.dims(0)
    if dims is None:
        n = node.shape(0)
        return [TensorType(dtype, None if n is None or type(n[0]) is not int else (None,) * n[0])]
    return [TensorType(dtype, dims)]


define("ConstantOfShape",
       type_rule=constant_of_shape_type,
       no_gradient="its values do not depend on its input's values")


@kernel("Range", since=11)
def range_(
    attrs: Mapping[str, Any], start: np.ndarray, limit: np.ndarray, delta: np.ndarray
) -> tuple:
    """ONNX Range: ``start + i * delta`` while below ``limit`` (above, for negative delta)."""
    dtype = np.asarray(start).dtype
    if dtype.name in _LOW_PRECISION:
        # half-precision accumulation drifts; compute in the stash type, then round once
        stash = np.dtype(_STASH.get(int(attrs.get("stash_type", 1)), np.float32))
        values = np.arange(
            np.asarray(start).astype(stash).item(),
            float(np.asarray(limit).astype(np.float64)),
            float(np.asarray(delta).astype(np.float64)),
            dtype=stash,
        )
        return (values.astype(dtype),)
    values = np.arange(np.asarray(start).item(), np.asarray(limit).item(), np.asarray(delta).item())
    return (values.astype(dtype),)


def range__type(node: Node) -> list:
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


def range_vjp(n: GradNode) -> list:
    """Range: start gets ``sum(g)``, delta ``sum(g * i)`` (module doc)."""
    start, _, delta = n.given(0, 1, 2)
    g = n.grad()
    steps = ops.Cast(ops.Range(np.array(0, I64), size_of(n.outputs[0]), np.array(1, I64)), to=np.dtype(g.type.dtype))
    return [ops.ReduceSum(g, keepdims=0) if n.need(0) else None, None,
            ops.ReduceSum(ops.Mul(g, steps), keepdims=0) if n.need(2) else None]


define("Range", type_rule=range__type, vjp=range_vjp)


@kernel("EyeLike", since=9)
def eye_like(attrs: Mapping[str, Any], x: np.ndarray) -> tuple:
    """ONNX EyeLike: ones on diagonal ``k`` of a 2-D tensor shaped like ``x``."""
    if x.ndim != 2:
        raise ExecutionError.at("input", "a 2-D tensor", f"shape {x.shape}")
    code = attrs.get("dtype")
    dtype = x.dtype if code is None else onnx_dtype(int(code))
    return (np.eye(x.shape[0], x.shape[1], k=int(attrs.get("k", 0)), dtype=dtype),)


def eye_like_type(node: Node) -> list:
    """The input's shape; the dtype of ``dtype`` or of the input."""
    to = node.attr("dtype")
    return [TensorType(ONNX_DTYPES.get(int(to)) if to is not None else node.dtype(0), node.shape(0))]


define("EyeLike", type_rule=eye_like_type, no_gradient="its values do not depend on its input's values")


# ---- type rules and gradients shared by several ops of this family ----


SMALL = 1024  # constants with at most this many entries are kept as values
