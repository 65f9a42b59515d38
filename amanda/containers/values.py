"""Frozen attribute values: freezing, equality and hashing with arrays compared by value.

Attributes are pyrsistent maps whose values are frozen: lists become tuples, dicts
become pmaps, numpy arrays become read-only arrays owned by amanda.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from pyrsistent import PMap, pmap

EMPTY: PMap = pmap()

_SCALARS = (str, int, float, bool, bytes, type(None))


def freeze_array(array: np.ndarray) -> np.ndarray:
    """A read-only array with the same dtype, shape and values.

    An array that is already read-only and owns its data is shared, not copied;
    anything else is copied so that no outside reference can write into it.
    """
    if array.dtype.hasobject:
        raise TypeError("arrays of Python objects cannot be stored in attributes")
    if not array.flags.writeable and array.base is None:
        return array
    frozen = np.array(array, copy=True)
    frozen.setflags(write=False)
    return frozen


_SCALAR_TYPES = frozenset(_SCALARS)


def freeze(value: Any) -> Any:
    """Freeze one attribute value (recursively); raise TypeError for what cannot be frozen."""
    if type(value) in _SCALAR_TYPES or isinstance(value, _SCALARS):
        return value
    if isinstance(value, np.ndarray):
        return freeze_array(value)
    if isinstance(value, np.generic):
        # a 0-d array keeps the scalar's dtype through YAML and JSON
        return freeze_array(np.asarray(value))
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    if isinstance(value, PMap):
        if all(isinstance(v, _SCALARS) for v in value.values()):
            return value
        return pmap({k: freeze(v) for k, v in value.items()})
    if isinstance(value, Mapping):
        return pmap({_key(k): freeze(v) for k, v in value.items()})
    if isinstance(value, np.dtype):
        return value
    # containers (for subgraph-valued attributes such as ONNX bodies) are immutable already
    if getattr(value, "_amanda_frozen", False):
        return value
    raise TypeError(f"cannot store a {type(value).__name__} as an attribute value")


def _key(key: Any) -> Any:
    if not isinstance(key, str):
        raise TypeError(f"attribute keys must be strings, found {type(key).__name__}")
    return key


def freeze_attrs(attrs: Mapping[str, Any] | None) -> PMap:
    """Freeze a whole attribute mapping; empty mappings share one object."""
    if not attrs:
        return EMPTY
    if type(attrs) is dict:
        scalars = _SCALAR_TYPES
        for key, value in attrs.items():
            if type(value) not in scalars or type(key) is not str:
                break
        else:
            return pmap(attrs)
    elif isinstance(attrs, PMap) and all(type(v) in _SCALAR_TYPES for v in attrs.values()):
        return attrs
    if not isinstance(attrs, Mapping):
        raise TypeError(f"attrs must be a mapping, found {type(attrs).__name__}")
    return pmap({_key(k): freeze(v) for k, v in attrs.items()})


def values_equal(a: Any, b: Any) -> bool:
    """Structural equality where arrays compare by dtype, shape and values (NaN equals NaN)."""
    if a is b:
        return True
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)):
            return False
        return (
            a.dtype == b.dtype
            and a.shape == b.shape
            and (a.tobytes() == b.tobytes() or bool(np.array_equal(a, b, equal_nan=_nan_ok(a))))
        )
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(values_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return attrs_equal(a, b)
    if type(a) is not type(b) and (isinstance(a, bool) or isinstance(b, bool)):
        return False  # True == 1 in Python, but not as an attribute
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - exotic values that cannot compare are unequal
        return False


def _nan_ok(a: np.ndarray) -> bool:
    return a.dtype.kind in "fc"


def attrs_equal(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Equality of two attribute mappings, arrays by value."""
    if a is b:
        return True
    if len(a) != len(b):
        return False
    for key, value in a.items():
        if key not in b or not values_equal(value, b[key]):
            return False
    return True


def value_hash(value: Any) -> int:
    """A hash consistent with :func:`values_equal`."""
    if isinstance(value, np.ndarray):
        # dtype and shape only: equal arrays may differ in bytes (NaN payloads, -0.0)
        return hash((value.dtype.str, value.shape))
    if isinstance(value, tuple):
        return hash(tuple(value_hash(v) for v in value))
    if isinstance(value, Mapping):
        return attrs_hash(value)
    if isinstance(value, bool):
        return hash(("bool", value))
    try:
        return hash(value)
    except TypeError:
        return hash(type(value).__name__)


def attrs_hash(attrs: Mapping[str, Any]) -> int:
    """Order-independent hash of an attribute mapping."""
    if not attrs:
        return 0
    return hash(frozenset((k, value_hash(v)) for k, v in attrs.items()))


def thaw(value: Any) -> Any:
    """Plain Python structures from frozen ones (tuples -> lists, pmaps -> dicts); arrays stay."""
    if isinstance(value, tuple):
        return [thaw(v) for v in value]
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    return value
