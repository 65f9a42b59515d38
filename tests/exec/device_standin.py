"""A stand-in for a GPU array library on a machine without one, for tests of the ``cupy``
device's plumbing (amanda/exec/backends/arrays.py).

:class:`DeviceArray` is a numpy ndarray subclass that overrides NumPy's dispatch protocols
(``__array_ufunc__``, ``__array_function__``) as CuPy does: a ``np.*`` call on it gives a
DeviceArray, and it refuses what CuPy refuses: a host array (an ndarray, even 0-d) mixed into a
call with device arrays, a host ``out=`` buffer, raw memory access (``ctypes``: BLAS through a
pointer), and the flags CuPy lacks (``writeable``). A kernel that converts to host memory
(``np.asarray``, scipy, ``np.empty`` filled by assignment) gives host arrays, which the next
call refuses or the output check catches; :data:`CALLS` counts the array calls and element
reads, so a Python-level loop over elements shows. It is chosen over dask.array (which
implements the same protocols) because it is eager and refuses host operands and ``ctypes``, as
CuPy does, where dask.array silently wraps host arrays and has no ``out=``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

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
        return value.view(np.ndarray)
    if isinstance(value, (list, tuple)):
        return type(value)(_unwrap(v) for v in value)
    return value


def _wrap(value: Any) -> Any:
    if type(value) is np.ndarray:
        return value.view(DeviceArray)
    if isinstance(value, np.generic):  # CuPy gives 0-d arrays where numpy gives scalars
        return np.asarray(value).view(DeviceArray)
    if isinstance(value, tuple):
        return tuple(_wrap(v) for v in value)
    if isinstance(value, list):
        return [_wrap(v) for v in value]
    return value


CALLS = [0]  # dispatched calls and element reads on device arrays: a Python-level loop shows here


class DeviceArray(np.ndarray):
    """An array "on the device" (module docstring)."""

    def __getitem__(self, key: Any) -> Any:
        CALLS[0] += 1
        return super().__getitem__(key)

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        CALLS[0] += 1
        out = kwargs.get("out")
        _refuse_host(inputs)
        if out is not None:
            if any(not isinstance(o, DeviceArray) for o in out):
                raise HostArrayError("a host out= buffer for device arrays")
            kwargs["out"] = tuple(o.view(np.ndarray) for o in out)
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
    def ctypes(self) -> Any:  # type: ignore[override]
        raise HostArrayError("raw memory of a device array")

    @property
    def flags(self) -> Any:  # type: ignore[override]
        """Only the flags CuPy's arrays have (no ``writeable``, ``aligned`` ...)."""
        flags = self.view(np.ndarray).flags
        return _Flags(flags.c_contiguous, flags.f_contiguous, flags.owndata)


class _Flags:
    """CuPy's ``ndarray.flags``: contiguity and ownership only."""

    def __init__(self, c_contiguous: bool, f_contiguous: bool, owndata: bool) -> None:
        self.c_contiguous, self.f_contiguous, self.owndata = c_contiguous, f_contiguous, owndata


def to_device(value: np.ndarray, index: int) -> DeviceArray:
    """A copy of host ``value`` on the stand-in device."""
    return np.array(value, copy=True).view(DeviceArray)


def to_host(value: Any) -> np.ndarray:
    """A host copy of a stand-in device array."""
    return np.array(value.view(np.ndarray), copy=True)


STANDIN = ArrayLibrary(name="stand-in", load=lambda: np, to_device=to_device, to_host=to_host,
                       is_device=lambda v: isinstance(v, DeviceArray), count=lambda module: 1)
