"""The functions mapping expressions may call besides JMESPath's own: arrays, arithmetic,
lists and dtypes. Each is pure, and each bounds what it builds (``MAX_ELEMENTS`` per call, and
every element charged to the evaluation's budget, :mod:`amanda.rewrite.mapping.budget`).

>>> import jmespath
>>> jmespath.search("add(`1`, mul(`2`, `3`))", {}, options=OPTIONS)
7
"""

from __future__ import annotations

from typing import Any

import jmespath  # type: ignore[import-untyped]
import jmespath.functions  # type: ignore[import-untyped]
import numpy as np

from amanda.rewrite.mapping import budget

__all__ = ["FUNCTIONS", "MAX_ELEMENTS", "OPTIONS", "onnx_dtype", "truthy"]

MAX_ELEMENTS = 1_000_000  # elements one call may build (range, tensor, concat …)

_ONNX_TYPES = {"float32": 1, "uint8": 2, "int8": 3, "uint16": 4, "int16": 5, "int32": 6,
               "int64": 7, "string": 8, "bool": 9, "float16": 10, "float64": 11, "uint32": 12,
               "uint64": 13, "complex64": 14, "complex128": 15, "bfloat16": 16}


def onnx_dtype(name: Any) -> int:
    """The ONNX ``TensorProto`` data type number of a dtype name (``float32`` -> 1).

    >>> onnx_dtype("float32"), onnx_dtype("int64"), onnx_dtype("half")
    (1, 7, 10)
    """
    text = str(name)
    if text in _ONNX_TYPES:
        return _ONNX_TYPES[text]
    try:
        return _ONNX_TYPES[np.dtype(text).name]
    except (TypeError, KeyError):
        raise ValueError(f"no ONNX data type for dtype {text!r}") from None


def _number(value: Any) -> Any:
    if isinstance(value, np.ndarray) and value.size == 1:
        value = value.reshape(()).item()
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"expected a number, found {value!r}")
    return value


def _bounded(count: int) -> None:
    """Refuse to build more than ``MAX_ELEMENTS`` values in one call; charge the rest."""
    if count > MAX_ELEMENTS:
        raise ValueError(f"at most {MAX_ELEMENTS} elements, asked for {count}")
    budget.spend(max(count, 0))


_ANY: dict[str, list[str]] = {"types": []}


class _Functions(jmespath.functions.Functions):
    """Pure helpers for mapping expressions (arrays, arithmetic, lists, dtypes)."""

    @jmespath.functions.signature(_ANY)
    def _func_to_list(self, value: Any) -> Any:
        if isinstance(value, (np.ndarray, np.generic)):
            _bounded(int(np.size(value)))
            return value.tolist()
        return value

    @jmespath.functions.signature(_ANY)
    def _func_scalar(self, value: Any) -> Any:
        if isinstance(value, list) and len(value) == 1:
            value = value[0]
        return _number(value) if not isinstance(value, (str, bool)) else value

    @jmespath.functions.signature(_ANY)
    def _func_shape_of(self, value: Any) -> list[int]:
        return list(np.shape(value))

    @jmespath.functions.signature(_ANY)
    def _func_dtype_of(self, value: Any) -> str:
        return np.asarray(value).dtype.name

    @jmespath.functions.signature(_ANY, {"types": ["string"]})
    def _func_tensor(self, values: Any, dtype: str) -> np.ndarray:
        if isinstance(values, np.ndarray):  # weights pass through without a copy when they can
            array = values.astype(np.dtype(dtype), copy=False)
            if array is not values:
                budget.spend(array.size)  # a converted copy is built; a passed-through one is not
        else:
            array = np.asarray(values)
            _bounded(array.size)
            array = array.astype(np.dtype(dtype))
        if array.flags.writeable:
            array = array.copy() if array.base is not None else array
            array.setflags(write=False)
        return array

    @jmespath.functions.signature(_ANY)
    def _func_dims(self, shape: Any) -> Any:
        """A shape with unknown dimensions (-1, null) as null; null (unknown rank) stays null."""
        if shape is None:
            return None
        return [None if d is None or (not isinstance(d, str) and _number(d) < 0) else d
                for d in shape]

    @jmespath.functions.signature({"types": ["string"]})
    def _func_onnx_dtype(self, name: str) -> int:
        return onnx_dtype(name)

    @jmespath.functions.signature(_ANY, _ANY)
    def _func_range(self, start: Any, stop: Any) -> list[int]:
        start, stop = int(_number(start)), int(_number(stop))
        _bounded(stop - start)
        return list(range(start, stop))

    @jmespath.functions.signature({"types": ["string"]}, {"types": ["string"]}, {"types": ["string"]})
    def _func_replace(self, text: str, old: str, new: str) -> str:
        _bounded(len(text) * max(1, len(new)))
        return text.replace(old, new)

    @jmespath.functions.signature(_ANY, _ANY)
    def _func_add(self, a: Any, b: Any) -> Any:
        return _number(a) + _number(b)

    @jmespath.functions.signature(_ANY, _ANY)
    def _func_sub(self, a: Any, b: Any) -> Any:
        return _number(a) - _number(b)

    @jmespath.functions.signature(_ANY, _ANY)
    def _func_mul(self, a: Any, b: Any) -> Any:
        return _number(a) * _number(b)

    @jmespath.functions.signature(_ANY)
    def _func_neg(self, a: Any) -> Any:
        return -_number(a)

    @jmespath.functions.signature(_ANY, _ANY, _ANY)
    def _func_if(self, condition: Any, then: Any, otherwise: Any) -> Any:
        return then if _truthy(condition) else otherwise

    @jmespath.functions.signature({"types": ["array"]}, {"types": ["array"]})
    def _func_concat(self, a: list, b: list) -> list:
        _bounded(len(a) + len(b))
        return list(a) + list(b)

    @jmespath.functions.signature({"types": ["array"]}, {"types": ["array-number"]})
    def _func_pick(self, items: list, indexes: list) -> list:
        return [items[int(i)] for i in indexes]


def _truthy(value: Any) -> bool:
    """JMESPath truthiness: false, null, '', [] and {} are false; everything else is true."""
    if isinstance(value, np.ndarray):
        return value.size > 0
    return not (value is None or value is False or value == "" or value == [] or value == {})


FUNCTIONS = _Functions()
OPTIONS = jmespath.Options(custom_functions=FUNCTIONS)
truthy = _truthy
