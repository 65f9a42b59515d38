"""A stand-in for a GPU array library on a machine without one, for tests of the ``cupy``
device's plumbing (amanda/exec/backends/arrays.py).

:class:`DeviceArray` wraps a numpy array and behaves as CuPy's arrays do where amanda's
kernels could tell: it is not an ``np.ndarray``; NumPy's dispatch protocols
(``__array_ufunc__``, ``__array_function__``) send a ``np.*`` call on it to numpy and give a
DeviceArray back; and it refuses what CuPy refuses (as seen on a GPU): implicit conversion to
a host array (``np.asarray``, ``np.array``: CuPy asks for ``.get()``), a host array (an
ndarray, even 0-d) mixed into a call with device arrays, a host ``out=`` buffer, raw memory
access (``ctypes``: BLAS through a pointer), and the flags CuPy lacks (``writeable``). Like
CuPy it gives 0-d arrays where numpy gives scalars, and ``int()``, ``float()``, ``bool()``,
``len()``, ``.item()`` and ``.tolist()`` read its values. :data:`CALLS` counts the array calls
and element reads, so a Python-level loop shows. It is chosen over dask.array (which
implements the same protocols) because it is eager and refuses host operands and ``ctypes``,
as CuPy does, where dask.array silently wraps host arrays and has no ``out=``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin

from amanda.exec.backends.arrays import ArrayLibrary


class HostArrayError(TypeError):
    """A host array met a device array in one call (CuPy raises a TypeError there too)."""


def _is_host(value: Any) -> bool:
    return type(value) is np.ndarray  # CuPy takes numpy scalars (np.generic), not arrays


def _refuse_host(values: Any) -> None:
    for v in values:
        if isinstance(v, (list, tuple)):
            _refuse_host(v)
        elif _is_host(v):
            raise HostArrayError(f"a host array of shape {v.shape} mixed with device arrays")


def _unwrap(value: Any) -> Any:
    if isinstance(value, DeviceArray):
        return value._a
    if isinstance(value, (list, tuple)):
        return type(value)(_unwrap(v) for v in value)
    return value


def _wrap(value: Any) -> Any:
    if type(value) is np.ndarray:
        return DeviceArray(value)
    if isinstance(value, np.generic):  # CuPy gives 0-d arrays where numpy gives scalars
        return DeviceArray(np.asarray(value))
    if isinstance(value, tuple):
        return tuple(_wrap(v) for v in value)
    if isinstance(value, list):
        return [_wrap(v) for v in value]
    return value


CALLS = [0]  # dispatched calls and element reads on device arrays: a Python-level loop shows here


class DeviceArray(NDArrayOperatorsMixin):
    """An array "on the device" (module docstring)."""

    __slots__ = ("_a",)
    __array_priority__ = 100

    def __init__(self, host: np.ndarray) -> None:
        self._a = host

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise HostArrayError("implicit conversion of a device array to a host array (use .get())")

    def get(self) -> np.ndarray:
        """A host copy, as CuPy's ``ndarray.get()``."""
        return np.array(self._a, copy=True)

    def __getitem__(self, key: Any) -> Any:
        CALLS[0] += 1
        return _wrap(self._a[_unwrap(key)])

    def __setitem__(self, key: Any, value: Any) -> None:
        CALLS[0] += 1
        self._a[_unwrap(key)] = _unwrap(value)

    def __getattr__(self, name: str) -> Any:  # shape, dtype, reshape, astype, sum ... as numpy's
        if name in ("ctypes", "data"):
            raise HostArrayError("raw memory of a device array")
        if name.startswith("__"):  # numpy's probes (__array_interface__ ...): absent, as on CuPy's arrays
            raise AttributeError(name)
        attr = getattr(self._a, name)
        if not callable(attr):
            return _wrap(attr) if isinstance(attr, np.ndarray) else attr

        def method(*args: Any, **kwargs: Any) -> Any:
            CALLS[0] += 1
            _refuse_host(args)
            return _wrap(attr(*_unwrap(args), **{k: _unwrap(v) for k, v in kwargs.items()}))
        return method

    def tolist(self) -> Any:
        return self._a.tolist()

    def item(self, *args: Any) -> Any:
        return self._a.item(*args)

    def __len__(self) -> int:
        return len(self._a)

    def __iter__(self) -> Any:
        return (self[i] for i in range(len(self._a)))

    def __int__(self) -> int:
        return int(self._a)

    def __float__(self) -> float:
        return float(self._a)

    def __complex__(self) -> complex:
        return complex(self._a)

    def __bool__(self) -> bool:
        return bool(self._a)

    def __index__(self) -> int:
        return self._a.__index__()

    def __repr__(self) -> str:
        return f"DeviceArray({self._a!r})"

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        CALLS[0] += 1
        out = kwargs.get("out")
        _refuse_host(inputs)
        if out is not None:
            if any(not isinstance(o, DeviceArray) for o in out):
                raise HostArrayError("a host out= buffer for device arrays")
            kwargs["out"] = tuple(o._a for o in out)
        result = getattr(ufunc, method)(*_unwrap(inputs), **kwargs)
        if out is not None:
            return out[0] if len(out) == 1 else out
        return _wrap(result)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        CALLS[0] += 1
        _refuse_host(args)
        _refuse_host(kwargs.values())
        out = kwargs.get("out")
        if out is not None and not isinstance(out, DeviceArray):
            raise HostArrayError("a host out= buffer for device arrays")
        kwargs = {k: _unwrap(v) for k, v in kwargs.items() if k != "like"}
        result = func(*_unwrap(args), **kwargs)
        return out if out is not None else _wrap(result)

    @property
    def flags(self) -> Any:
        """Only the flags CuPy's arrays have (no ``writeable``, ``aligned`` ...)."""
        flags = self._a.flags
        return _Flags(flags.c_contiguous, flags.f_contiguous, flags.owndata)


class _Flags:
    """CuPy's ``ndarray.flags``: contiguity and ownership only."""

    def __init__(self, c_contiguous: bool, f_contiguous: bool, owndata: bool) -> None:
        self.c_contiguous, self.f_contiguous, self.owndata = c_contiguous, f_contiguous, owndata


def to_device(value: np.ndarray, index: int) -> DeviceArray:
    """A copy of host ``value`` on the stand-in device."""
    return DeviceArray(np.array(value, copy=True))


def to_host(value: Any) -> np.ndarray:
    """A host copy of a stand-in device array."""
    return value.get()


STANDIN = ArrayLibrary(name="stand-in", load=lambda: np, to_device=to_device, to_host=to_host,
                       is_device=lambda v: isinstance(v, DeviceArray), count=lambda module: 1)
