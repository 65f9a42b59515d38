"""Feed checking: every fed value against the dtype and shape its port declares.

A port declares a tensor type with the attributes ``dtype`` (a name such as ``"float32"``)
and ``shape`` (a tuple whose entries are ints, symbol strings or None for unknown; no
``shape`` attribute means unknown rank), as the ONNX importer writes them. A fed value
must be a numpy array of exactly that dtype (nothing is cast) and of that rank and those
sizes; a symbol takes the size of its first dimension fed in a run and every other
dimension of that symbol in the run must agree.

>>> import numpy as np
>>> from amanda.containers import Port
>>> types = {"x": declared_type(Port("x", attrs={"dtype": "float32", "shape": ("N", 2)}), "input `x`")}
>>> check_feeds(types, {"x": np.zeros((3, 2), np.float32)})
>>> check_feeds(types, {"x": np.zeros((3, 2), np.int64)})
Traceback (most recent call last):
...
amanda.errors.ExecutionError: feed `x` does not match input `x`: expected float32[N,2], found int64[3,2] ...
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from amanda.containers import SELF
from amanda.errors import ExecutionError, format_path

if TYPE_CHECKING:
    from amanda.containers import Container, Port

__all__ = ["PortType", "check_feeds", "declared_type", "feed_types"]

_STRING_KINDS = frozenset("USO")


class PortType(NamedTuple):
    """What a fed port declares: where it is (for messages), its dtype and its shape.

    ``dtype`` is a numpy dtype, or the declared name when numpy does not know it (then the
    value's dtype name must equal it), or None; ``shape`` is None for unknown rank.
    """

    where: str
    dtype: Any
    shape: tuple | None

    def shown(self) -> str:
        """The declared type as messages show it: ``float32[N,2]``, ``float32[?]``, ``float32``."""
        name = "any" if self.dtype is None else str(self.dtype)
        if self.shape is None:
            return name
        return f"{name}[{','.join('?' if d is None else str(d) for d in self.shape)}]"


def _dtype(declared: Any, where: str) -> Any:
    if declared is None:
        return None
    if declared == "string":
        return "string"
    try:
        return np.dtype(declared)
    except TypeError:
        if isinstance(declared, str):
            return declared  # a type numpy lacks (bfloat16 without ml_dtypes): compared by name
        raise ExecutionError.at(where, "a dtype name such as 'float32' in the port's `dtype`", repr(declared)) from None


def _shape(declared: Any, where: str) -> tuple | None:
    if declared is None:
        return None
    if isinstance(declared, (str, bytes)) or not hasattr(declared, "__iter__"):
        raise ExecutionError.at(where, "a shape tuple of ints, symbol strings or None", repr(declared))
    dims: list[Any] = []
    for d in declared:
        if d is None or isinstance(d, str):
            dims.append(d)
        elif isinstance(d, (int, np.integer)) and not isinstance(d, bool):
            dims.append(int(d) if d >= 0 else None)  # a negative size means unknown (TensorFlow's -1)
        else:
            raise ExecutionError.at(where, "a shape tuple of ints, symbol strings or None", repr(declared))
    return tuple(dims)


def declared_type(port: Port, where: str) -> PortType | None:
    """The type ``port`` declares, or None when it declares neither dtype nor shape."""
    attrs = port.attrs
    if attrs.get("dtype") is None and attrs.get("shape") is None:
        return None
    return PortType(where, _dtype(attrs.get("dtype"), where), _shape(attrs.get("shape"), where))


def _port(model: Container, name: Any) -> tuple[Port | None, str]:
    """The port a feed name refers to, and how messages call it."""
    from amanda.exec.resolve import _endpoint, is_top_name

    if is_top_name(model, name):
        path, node, port_name = SELF, model, name
    else:
        path, node, port_name = _endpoint(model, name)
    owner = (model.name or "<root>") if path is SELF else format_path(path)
    for kind, ports in (("input", node.inputs), ("output", node.outputs)):
        for port in ports:
            if port.name == port_name:
                return port, f"{kind} `{port_name}` of `{owner}`"
    return None, f"`{owner}:{port_name}`"


def feed_types(model: Container, names: Any) -> dict[Any, PortType]:
    """Declared types of the fed ports of ``model``, keyed by feed name (untyped ports left out)."""
    types: dict[Any, PortType] = {}
    for name in names:
        port, where = _port(model, name)
        found = None if port is None else declared_type(port, where)
        if found is not None:
            types[name] = found
    return types


def _describe(value: Any) -> str:
    from amanda.exec.dispatch import describe

    return describe(value)


def _mismatch(name: Any, declared: PortType, value: Any, hint: str = "") -> ExecutionError:
    label = name if isinstance(name, str) else str(name)
    expected, found = declared.shown(), _describe(value)
    message = f"feed `{label}` does not match {declared.where}: expected {expected}, found {found}"
    return ExecutionError(message + (f" ({hint})" if hint else ""), path=label, expected=expected, found=found)


def _dtype_ok(expected: Any, dtype: np.dtype) -> bool:
    if expected is None or expected == dtype:
        return True
    if expected == "string":
        return dtype.kind in _STRING_KINDS
    return isinstance(expected, str) and dtype.name == expected


def check_feeds(types: Mapping[Any, PortType], feeds: Mapping[Any, Any]) -> None:
    """Raise an ExecutionError for the first fed value (in feed order) whose port declares another type."""
    symbols: dict[str, tuple[int, Any]] = {}
    for name, value in feeds.items():
        declared = types.get(name)
        if declared is None:
            continue
        if type(value) is not np.ndarray:
            hint = "" if declared.dtype is None or isinstance(declared.dtype, str) else \
                f"feed a numpy array: np.asarray(value, dtype=np.{declared.dtype})"
            raise _mismatch(name, declared, value, hint)
        if not _dtype_ok(declared.dtype, value.dtype):
            hint = "" if not isinstance(declared.dtype, np.dtype) else \
                f"nothing is cast: pass np.asarray(value, dtype=np.{declared.dtype})"
            raise _mismatch(name, declared, value, hint)
        shape = declared.shape
        if shape is None:
            continue
        if len(shape) != value.ndim:
            raise _mismatch(name, declared, value, f"rank {len(shape)} expected")
        for axis, (want, size) in enumerate(zip(shape, value.shape)):
            if want is None or want == size:
                continue
            if isinstance(want, str):
                bound = symbols.setdefault(want, (size, name))
                if bound[0] == size:
                    continue
                first = bound[1] if isinstance(bound[1], str) else str(bound[1])
                raise _mismatch(name, declared, value, f"`{want}` is {bound[0]} in feed `{first}`, {size} here")
            raise _mismatch(name, declared, value, f"axis {axis} must be {want}")
