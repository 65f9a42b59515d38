"""What a type rule sees of one op: attributes, input types and known input values.

Known values propagate shape arithmetic (``Shape -> Gather -> Concat -> Reshape``). A value is
either a concrete numpy array (small constants) or a :class:`Partial`: a vector of int64 whose
entries are ints, symbols or None (``Shape`` of a ``[batch, 3]`` tensor is ``Partial(('batch', 3))``).

>>> Partial(("batch", 3))
Partial(['batch', 3])
>>> as_dims(np.array([2, 3]))
(2, 3)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from amanda.types.tensor_type import Dim, Shape, TensorType, Type, TypeMismatch, broadcast_shapes

__all__ = ["Node", "Partial", "as_dims", "from_dims"]


class Partial:
    """An int64 vector (or scalar, ``scalar=True``) known entry by entry: int, symbol or None."""

    __slots__ = ("dims", "scalar")

    def __init__(self, dims: Sequence[Dim], scalar: bool = False) -> None:
        self.dims = tuple(dims)
        self.scalar = scalar

    def key(self) -> tuple:
        return ("partial", self.dims, self.scalar)

    def __repr__(self) -> str:
        return f"Partial({list(self.dims)}{', scalar' if self.scalar else ''})"


def as_dims(value: Any) -> tuple[Dim, ...] | None:
    """A known integer vector (or scalar) as a tuple of dims; None if not one."""
    if isinstance(value, Partial):
        return value.dims
    if isinstance(value, np.ndarray) and value.ndim <= 1 and value.dtype.kind in "iu":
        return tuple(int(v) for v in value.reshape(-1))
    return None


def from_dims(dims: Sequence[Dim], scalar: bool = False, dtype: Any = np.int64) -> Any:
    """An array when every entry is an int, else a Partial (or None when nothing is known)."""
    if all(type(d) is int for d in dims):
        arr = np.array(dims[0] if scalar else list(dims), dtype=dtype)
        return arr
    if all(d is None for d in dims):
        return None
    return Partial(dims, scalar)


class Node:
    """One op as a rule sees it. ``types``/``values``: one entry per (non-captured) input port."""

    __slots__ = ("attrs", "bindings", "body", "n_out", "op", "opset", "out_values", "types", "values")

    def __init__(
        self,
        op: Any,
        attrs: Mapping[str, Any],
        types: list[Type | None],
        values: list[Any],
        opset: int | None,
        body: Callable[..., Any] | None = None,
    ) -> None:
        self.op = op
        self.attrs = attrs
        self.types = types
        self.values = values
        self.opset = opset if opset is not None else 1 << 30
        self.n_out = len(op.outputs)
        self.out_values: dict[int, Any] = {}
        self.bindings: list[tuple[str, int]] = []
        self.body = body  # infers a subgraph: body(label, graph, input types) -> output types

    # -- inputs ----------------------------------------------------------------------------

    def attr(self, name: str, default: Any = None) -> Any:
        value = self.attrs.get(name)
        return default if value is None else value

    def type(self, i: int) -> Type | None:
        return self.types[i] if i < len(self.types) else None

    def present(self, i: int) -> bool:
        """Whether input ``i`` is connected (an omitted optional input is not)."""
        return i < len(self.types) and self.types[i] is not _ABSENT

    def tensor(self, i: int) -> TensorType | None:
        t = self.types[i] if i < len(self.types) else None
        return t if type(t) is TensorType else None

    def shape(self, i: int) -> Shape:
        t = self.tensor(i)
        return None if t is None else t.shape

    def dtype(self, i: int) -> str | None:
        t = self.tensor(i)
        return None if t is None else t.dtype

    def rank(self, i: int) -> int | None:
        s = self.shape(i)
        return None if s is None else len(s)

    def value(self, i: int) -> Any:
        return self.values[i] if i < len(self.values) else None

    def dims(self, i: int) -> tuple[Dim, ...] | None:
        """Input ``i``'s known value as dims (ints, symbols, None), or None."""
        return as_dims(self.value(i))

    def ints(self, i: int) -> list[int] | None:
        """Input ``i``'s value as concrete ints, or None unless every entry is known."""
        dims = self.dims(i)
        if dims is None or not all(type(d) is int for d in dims):
            return None
        return list(dims)  # type: ignore[arg-type]

    def axes(self, name: str, port: int) -> list[int] | None:
        """Axes given by attribute ``name`` (older opsets) or by input ``port`` (newer)."""
        if name in self.attrs:
            return [int(a) for a in self.attrs[name]]
        if self.present(port):
            return self.ints(port)
        return []

    # -- outputs and checks ----------------------------------------------------------------

    def set_value(self, j: int, value: Any) -> None:
        if value is not None:
            self.out_values[j] = value

    def fail(self, expected: str, found: str) -> TypeMismatch:
        return TypeMismatch(f"expected {expected}, found {found}", expected=expected, found=found)

    def same(self, a: Dim, b: Dim, what: str = "dims") -> Dim:
        """Two dims that must be equal: the more precise one; binds a symbol met by an int."""
        if a == b or b is None:
            return a
        if a is None:
            return b
        ta, tb = type(a), type(b)
        if ta is int and tb is int:
            raise self.fail(f"{what} equal to {a}", str(b))
        if ta is str and tb is int:
            self.bindings.append((a, b))  # type: ignore[arg-type]
            return b
        if tb is str and ta is int:
            self.bindings.append((b, a))  # type: ignore[arg-type]
            return a
        return a

    def broadcast(self, *shapes: Shape) -> Shape:
        """numpy broadcasting; a symbol met by an int n stays free (it may be 1 or n)."""
        try:
            return broadcast_shapes(*shapes)
        except TypeMismatch as exc:
            raise self.fail(
                "shapes that broadcast", " and ".join(_show(s) for s in shapes)
            ) from exc

    def axis(self, axis: int, rank: int | None, what: str = "axis") -> Any:
        """``axis`` normalised against ``rank``; a problem if it is out of range."""
        if rank is None:
            return None if axis < 0 else axis
        if not -rank <= axis < max(rank, 1):
            raise self.fail(f"{what} in [{-rank}, {rank - 1}]", str(axis))
        return axis % rank if rank else 0


def _show(shape: Shape) -> str:
    return repr(TensorType(None, shape))[1:]


class _Absent:
    """The type of an omitted optional input."""

    __repr__ = lambda self: "absent"


_ABSENT: Any = _Absent()
ABSENT = _ABSENT
