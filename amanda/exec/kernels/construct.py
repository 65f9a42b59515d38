"""Ops that build tensors from attributes or shapes: Constant, ConstantOfShape, Range, EyeLike."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from amanda.errors import ExecutionError
from amanda.exec.kernels.cast import onnx_dtype
from amanda.exec.kernels.math_util import int_list
from amanda.exec.kernels.registry import kernel

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


@kernel("ConstantOfShape", since=9)
def constant_of_shape(attrs: Mapping[str, Any], shape: np.ndarray) -> tuple:
    """ONNX ConstantOfShape: fill ``shape`` with the one-element ``value`` (default float32 0)."""
    value = attrs.get("value")
    fill = np.zeros(1, dtype=np.float32) if value is None else np.asarray(value).reshape(-1)
    return (np.full(int_list(shape), fill[0], dtype=fill.dtype),)


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


@kernel("EyeLike", since=9)
def eye_like(attrs: Mapping[str, Any], x: np.ndarray) -> tuple:
    """ONNX EyeLike: ones on diagonal ``k`` of a 2-D tensor shaped like ``x``."""
    if x.ndim != 2:
        raise ExecutionError.at("input", "a 2-D tensor", f"shape {x.shape}")
    code = attrs.get("dtype")
    dtype = x.dtype if code is None else onnx_dtype(int(code))
    return (np.eye(x.shape[0], x.shape[1], k=int(attrs.get("k", 0)), dtype=dtype),)
