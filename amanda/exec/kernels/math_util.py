"""Helpers shared by the math kernels: attribute decoding, axes, accumulation dtypes.

Attributes reach kernels as python values; strings may be ``str`` or ``bytes``
depending on who decoded the model, so every string attribute goes through
:func:`attr_str`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from amanda.errors import ExecutionError

__all__ = [
    "as_array", "attr_ints", "attr_str", "axes_from", "axis_of", "erf", "erf32", "gelu32", "int_list",
    "legacy_broadcast", "normalize_axes", "wide",
]


def attr_str(attrs: Mapping[str, Any], name: str, default: str) -> str:
    """A string attribute, decoded if it came as bytes.

    >>> attr_str({"mode": b"LEFT"}, "mode", "RIGHT")
    'LEFT'
    """
    value = attrs.get(name, default)
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def attr_ints(attrs: Mapping[str, Any], name: str) -> list[int] | None:
    """A list-of-ints attribute, or None when absent."""
    value = attrs.get(name)
    if value is None:
        return None
    return [int(v) for v in np.asarray(value).reshape(-1)]


def as_array(value: Any, dtype: Any = None) -> np.ndarray:
    """``value`` as an ndarray (numpy ufuncs return scalars for 0-d inputs); an array of
    another library that implements NumPy's ``__array_function__`` (CuPy's on a GPU) stays
    that library's array (NEP 35's ``like=``), so kernels that call this run on it unchanged.

    >>> as_array(np.float32(1)).shape
    ()
    """
    kind = type(value)
    if kind is np.ndarray:
        return value if dtype is None or value.dtype.type is dtype else np.asarray(value, dtype=dtype)
    # a numpy scalar (a ufunc's result on 0-d arrays) first: asking its type for the
    # protocol costs an AttributeError inside hasattr
    if isinstance(value, np.generic) or not hasattr(kind, "__array_function__"):
        return np.asarray(value, dtype=dtype)
    return np.asarray(value, dtype=dtype, like=value)


def host(value: Any) -> np.ndarray:
    """``value`` as a host numpy array, for the inputs a kernel reads as Python numbers (axes, a
    shape, pads, starts): a device array (CuPy's) is copied explicitly with its ``get()``,
    since CuPy refuses ``np.asarray`` of its arrays.

    >>> host([1, 2]).tolist()
    [1, 2]
    """
    if type(value) is not np.ndarray and hasattr(type(value), "__array_function__") and hasattr(value, "get"):
        return np.asarray(value.get())
    return np.asarray(value)


def legacy_broadcast(attrs: Mapping[str, Any], a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``b`` aligned for opset-1..6 broadcasting, where ``axis`` says where ``b`` starts in ``a``.

    >>> legacy_broadcast({"broadcast": 1, "axis": 1}, np.zeros((2, 3, 4)), np.zeros(3)).shape
    (3, 1)
    """
    if not attrs or not int(attrs.get("broadcast", 0)) or attrs.get("axis") is None:
        return b
    axis = int(attrs["axis"]) % max(a.ndim, 1)
    return b.reshape(b.shape + (1,) * (a.ndim - axis - b.ndim))


def normalize_axes(axes: Sequence[int], ndim: int) -> tuple[int, ...]:
    """Axes made non-negative and sorted.

    >>> normalize_axes([-1, 0], 3)
    (0, 2)
    """
    return tuple(sorted(int(a) + ndim if int(a) < 0 else int(a) for a in axes))


def axes_from(
    attrs: Mapping[str, Any], axes_input: np.ndarray | None, from_input: bool
) -> list[int] | None:
    """The reduction axes, from the ``axes`` input (newer opsets) or attribute; None if absent."""
    if from_input:
        return None if axes_input is None else [int(a) for a in host(axes_input).reshape(-1)]
    return attr_ints(attrs, "axes")


def wide(dtype: np.dtype) -> np.dtype:
    """The dtype to compute in: narrow floats (float16, bfloat16, float8 ...) widen to float32.

    >>> wide(np.dtype(np.float16))
    dtype('float32')
    """
    dtype = np.dtype(dtype)
    if dtype.kind == "f" and dtype.itemsize >= 4:
        return dtype
    if dtype.kind in "biuc" or dtype == object:  # noqa: E721  # a numpy dtype comparison
        return dtype
    return np.dtype(np.float32)


# erf for float32 as x * P(x^2) / Q(x^2) on x clamped to [-4, 4] (erf(4) is 1 in float32):
# the rational form Eigen and XLA use. Its largest error against float64 erf is 4.5e-7 (near
# |x| = 3.2, a few float32 ulps), and it is ~4.5x faster than scipy's float32 erf.
_ERF_P = tuple(np.float32(c) for c in (
    -2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06, -5.69250639462346e-05,
    -7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02))
_ERF_Q = tuple(np.float32(c) for c in (
    -1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03, -7.37332916720468e-03,
    -1.42647390514189e-02))


# GELU's 0.5 * x * (1 + erf(x / sqrt 2)) = x * (0.5 + c * P(c^2) / Q(c^2)) with c = x clamped to
# 4 sqrt 2: the 1/sqrt 2 and the 0.5 folded into the coefficients (three passes fewer)
_GELU_P = tuple(np.float32(float(c) * 0.5 ** (len(_ERF_P) - 1 - i) * 0.5 / 2 ** 0.5) for i, c in enumerate(_ERF_P))
_GELU_Q = tuple(np.float32(float(c) * 0.5 ** (len(_ERF_Q) - 1 - i)) for i, c in enumerate(_ERF_Q))
_GELU_CLAMP = np.float32(4 * 2 ** 0.5)


def _horner(x2: np.ndarray, coefficients: tuple) -> np.ndarray:
    out = np.multiply(x2, coefficients[0])
    out += coefficients[1]
    for c in coefficients[2:]:
        out *= x2
        out += c
    return out


def erf32(x: np.ndarray) -> np.ndarray:
    """The error function of a float32 array by a rational approximation, in float32.

    >>> round(float(erf32(np.float32([0.5]))[0]), 6)
    0.5205
    """
    x = np.clip(x, np.float32(-4.0), np.float32(4.0))  # a new float32 buffer; nan stays nan (CuPy's clip has no dtype=)
    x2 = np.multiply(x, x)
    p = _horner(x2, _ERF_P)
    p *= x
    p /= _horner(x2, _ERF_Q)
    return p


def gelu32(x: np.ndarray) -> np.ndarray:
    """Exact (erf) GELU of a float32 array, ``0.5 * x * (1 + erf(x / sqrt 2))``, in float32
    with :func:`erf32`'s approximation.

    >>> [round(float(v), 4) for v in gelu32(np.float32([-1, 0, 2]))]
    [-0.1587, 0.0, 1.9545]
    """
    c = np.clip(x, -_GELU_CLAMP, _GELU_CLAMP)
    c2 = np.multiply(c, c)
    p = _horner(c2, _GELU_P)
    p *= c
    p /= _horner(c2, _GELU_Q)
    p += np.float32(0.5)
    p *= x
    return p


def erf(x: np.ndarray) -> np.ndarray:
    """Elementwise error function, in ``x.dtype`` for floats: float32 stays float32
    (:func:`erf32`); float64 and the rest use scipy's.

    >>> round(float(erf(np.array(0.5))), 6)
    0.5205
    """
    x = np.asarray(x)
    if x.dtype == np.float32:
        return erf32(x)
    from scipy import special  # imported on first use: scipy.special takes ~0.25 s to load

    if x.dtype == np.float64:
        return special.erf(x)
    out = special.erf(x.astype(wide(x.dtype) if x.dtype.kind == "f" else np.float64))
    return out.astype(x.dtype) if x.dtype.kind == "f" else out


# numpy reduces each short row with a separate inner-loop call; summing through einsum is
# 2-3x faster and, for rows up to this long, as accurate as float32 needs
EINSUM_ROW = 4096


def row_sums(rows: np.ndarray) -> np.ndarray:
    """The sum of each row of a 2-D array (einsum for short rows, pairwise np.sum for long).

    >>> row_sums(np.ones((2, 3), np.float32)).tolist()
    [3.0, 3.0]
    """
    return np.einsum("ij->i", rows) if rows.shape[1] <= EINSUM_ROW else np.sum(rows, axis=1)


def axis_of(axis: Any, rank: int, name: str = "axis") -> int:
    """``axis`` normalised into ``[0, rank)``; raises when out of range.

    >>> axis_of(-1, 3)
    2"""
    a = int(axis)
    if not -rank <= a < rank:
        raise ExecutionError.at(name, f"an axis in [{-rank}, {rank})", str(a))
    return a + rank if a < 0 else a


def int_list(value: Any) -> list[int]:
    """An attribute or 1-D input as a list of python ints (``[]`` for None).

    >>> int_list((1, 0, 2)), int_list(np.array([[-1]], np.int64)), int_list(np.float32(2))
    ([1, 0, 2], [-1], [2])
    """
    if value is None:
        return []
    kind = type(value)
    if kind is np.ndarray and value.dtype.kind in "iu":  # an axes input: no per-element int()
        return value.reshape(-1).tolist()  # type: ignore[no-any-return]
    if (kind is tuple or kind is list) and all(type(v) is int for v in value):  # an attribute
        return list(value)
    return [int(v) for v in host(value).reshape(-1)]
