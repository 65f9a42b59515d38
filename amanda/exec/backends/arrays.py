"""Array devices: the numpy executor's own kernels run on the arrays of another library that
implements NumPy's dispatch protocols (``__array_ufunc__``, ``__array_function__``), so that a
kernel's ``np.*`` calls run where its arrays live: CuPy's arrays on a CUDA GPU (``cupy``,
``cupy:<index>``; the ``gpu`` extra).

An op goes to an array device when its kernel is marked in the op registry as running
unchanged on such arrays (:data:`~amanda.ops.catalog.DEVICE_ARRAYS`, checked against ONNX's
node cases by the tests), or its value is a constant; everything else stays on numpy. Values
cross between an array device and numpy at the parts' boundaries (the profiler counts the
bytes); a part's constants are copied to the device once, with its plan.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from amanda.containers import Container
from amanda.errors import ArgumentError, ExecutionError
from amanda.ops.catalog import DEVICE_ARRAYS
from amanda.ops.registry import ONNX, entry, fact

__all__ = ["CUPY", "LIBRARIES", "ArrayLibrary", "check_array_device", "device_index", "is_array_device",
           "library_of", "movable", "nbytes", "on_device", "runs_on_arrays", "to_host"]


@dataclass(frozen=True)
class ArrayLibrary:
    """How amanda reaches one array library: ``load()`` imports it (ImportError where it is
    missing), ``count(module)`` is how many devices it sees, ``to_device(host, index)`` and
    ``to_host(value)`` copy a value across, ``is_device(value)`` says whether it is this
    library's array."""

    name: str
    load: Callable[[], Any]
    to_device: Callable[[np.ndarray, int], Any]
    to_host: Callable[[Any], np.ndarray]
    is_device: Callable[[Any], bool]
    count: Callable[[Any], int]


def _load_cupy() -> Any:
    import cupy

    return cupy


def _cupy_count(cupy: Any) -> int:
    try:
        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:  # no driver, or no GPU: CuPy raises its own CUDA errors
        return 0


def _cupy_to_device(value: np.ndarray, index: int) -> Any:
    cupy = _load_cupy()
    with cupy.cuda.Device(index):
        return cupy.asarray(value)


def _cupy_to_host(value: Any) -> np.ndarray:
    return value.get()


def _is_cupy(value: Any) -> bool:
    return type(value).__module__.startswith("cupy")


CUPY = ArrayLibrary(name="cupy", load=_load_cupy, to_device=_cupy_to_device, to_host=_cupy_to_host,
                    is_device=_is_cupy, count=_cupy_count)
LIBRARIES: dict[str, ArrayLibrary] = {"cupy": CUPY}  # device kind -> library


def is_array_device(device: Any) -> bool:
    """Whether ``device`` names an array device (``cupy``, ``cupy:0``)."""
    return isinstance(device, str) and device.split(":", 1)[0] in LIBRARIES


def device_index(device: str) -> int:
    """The device number of ``cupy:<index>`` (0 for ``cupy``); an ArgumentError otherwise."""
    kind, _, index = device.partition(":")
    if index == "":
        return 0
    if not index.isdigit():
        raise ArgumentError.at("device", f"{kind} or {kind}:<device number>", repr(device))
    return int(index)


def library_of(device: str) -> ArrayLibrary:
    """The array library behind ``device``."""
    return LIBRARIES[device.split(":", 1)[0]]


def check_array_device(device: str) -> ArrayLibrary:
    """The library of ``device`` after checking that it is installed and sees the device: an
    ExecutionError naming the ``gpu`` extra otherwise."""
    index = device_index(device)
    library = library_of(device)
    try:
        module = library.load()
    except ImportError:
        raise ExecutionError(f"device {device!r} needs {library.name}: pip install 'amanda[gpu]' on a machine "
                             "with a CUDA GPU, or place the ops on numpy (cpu:0)", path="device",
                             expected=f"{library.name} installed", found="not installed") from None
    count = library.count(module)
    if index >= count:
        raise ExecutionError(f"device {device!r}: {library.name} sees {count} GPU(s); the gpu extra "
                             "(amanda[gpu]) runs on a machine with a CUDA GPU, or place the ops on numpy (cpu:0)",
                             path="device", expected=f"GPU number {index}", found=f"{count} GPU(s)")
    return library


def runs_on_arrays(op: Container, namespace: Any) -> bool:
    """Whether ``op`` (of effective ``namespace``) runs on an array device: an op of ONNX's
    default domain whose kernel the registry marks :data:`DEVICE_ARRAYS`, or a constant."""
    if not isinstance(namespace, str) or namespace.rsplit("/", 1)[0] != ONNX or op.type is None:
        return False
    found = entry(ONNX, op.type)
    return found is not None and (found.constant or bool(fact(ONNX, op.type, DEVICE_ARRAYS, False)))


def to_host(value: Any) -> Any:
    """``value`` as a numpy array where it is an array device's (else unchanged)."""
    if type(value) is np.ndarray:
        return value
    for library in LIBRARIES.values():
        if library.is_device(value):
            return library.to_host(value)
    return value


def nbytes(value: Any) -> int:
    """The bytes of an array value, on any device (0 for other values)."""
    return int(getattr(value, "nbytes", 0)) if hasattr(value, "dtype") else 0


def movable(value: Any) -> bool:
    """Whether ``value`` is a host array of a dtype a device holds (bool, integers, floats,
    complex): strings, objects and narrow floats (bfloat16, float8) stay on the host."""
    return type(value) is np.ndarray and value.dtype.kind in "biufc"


def on_device(template: list, library: ArrayLibrary, index: int) -> None:
    """Copy a plan's constants (its environment template's :func:`movable` arrays) to the
    device, in place."""
    for i, value in enumerate(template):
        if movable(value):
            template[i] = library.to_device(value, index)
