"""The type vocabulary: tensor types with symbolic dims, sequences and optionals.

A tensor type is a dtype plus a shape. A dimension (``Dim``) is an int, a named symbol
(``"batch"``) or None (unknown); a shape is a tuple of dims, or None when even the rank is
unknown. Port attributes ``dtype`` and ``shape`` are the serialized form (the ONNX importer and
exporter, YAML and JSON all use it); non-tensor types are written under ``type`` as a nested
mapping (``{sequence: {tensor: {dtype: float32, shape: [null, 3]}}}``).

>>> t = TensorType("float32", ("batch", 3))
>>> t, t.rank
(float32[batch,3], 2)
>>> from_attrs({"dtype": "float32", "shape": ["batch", 3]}) == t
True
>>> to_attrs(SequenceType(TensorType("int64", (None,))))
{'type': {'sequence': {'tensor': {'dtype': 'int64', 'shape': (None,)}}}}
>>> broadcast_shapes(("batch", 1, 4), (3, 1))
('batch', 3, 4)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from amanda.containers.arguments import brief, expect_mapping, expect_type, sequence_problem, shown
from amanda.errors import AmandaError, ArgumentError
from amanda.types.dtypes import ONNX_DTYPES, VALID_DTYPES, dtype_name, dtype_problem

__all__ = [
    "VALID_DTYPES",
    "ONNX_DTYPES",
    "Dim",
    "OptionalType",
    "SequenceType",
    "Shape",
    "TensorType",
    "Type",
    "TypeMismatch",
    "broadcast_shapes",
    "dtype_name",
    "dtype_problem",
    "fits",
    "from_attrs",
    "merge",
    "to_attrs",
    "unify_dims",
]

Dim = int | str | None
Shape = tuple | None  # tuple of Dim, or None for an unknown rank


class TypeMismatch(AmandaError):
    """Two types (or a type and a value) that cannot be the same; carries expected and found."""


_set = object.__setattr__


class _Frozen:
    __slots__ = ()

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def _key(self) -> tuple:
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self._key() == other._key()  # type: ignore[attr-defined]

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._key()))


class TensorType(_Frozen):
    """A tensor's dtype (a name, or None if unknown) and shape (dims, or None if rank unknown)."""

    __slots__ = ("dtype", "shape")
    dtype: str | None
    shape: Shape

    def __init__(self, dtype: Any = None, shape: Sequence[Dim] | None = None) -> None:
        if shape is not None:
            if type(shape) is not tuple:
                shape = tuple(_sequence(shape, "shape", "a sequence of dims (ints, symbols or None) or None"))
            for d in shape:
                if d is not None and type(d) is not int and type(d) is not str:
                    shape = tuple(_dim(x) for x in shape)
                    break
        if dtype is not None and not isinstance(dtype, (str, np.dtype, type)):
            raise ArgumentError.at("dtype", "a dtype (a name such as 'float32', a numpy dtype or type) or None",
                                   shown(dtype))
        _set(self, "dtype", dtype_name(dtype))
        _set(self, "shape", shape)

    @property
    def rank(self) -> int | None:
        """The number of dims, or None when unknown."""
        return None if self.shape is None else len(self.shape)

    @property
    def known(self) -> bool:
        """Whether dtype and every dim are concrete."""
        return self.dtype is not None and self.shape is not None and all(
            type(d) is int for d in self.shape
        )

    def _key(self) -> tuple:
        return (self.dtype, self.shape)

    def __repr__(self) -> str:
        # an unknown rank shows as ``*``, an unknown dim as ``?``
        dims = "*" if self.shape is None else ",".join("?" if d is None else str(d) for d in self.shape)
        return f"{self.dtype or '?'}[{dims}]"


class _Holder(_Frozen):
    """A type that holds one element type (``elem``; None: unknown)."""

    __slots__ = ("elem",)
    elem: Any
    _label = ""

    def __init__(self, elem: Any = None) -> None:
        if elem is not None and not isinstance(elem, (TensorType, _Holder)):
            raise ArgumentError.at("elem", "an element type (a TensorType, SequenceType, OptionalType) or None",
                                   shown(elem))
        object.__setattr__(self, "elem", elem)

    def _key(self) -> tuple:
        return (self.elem,)

    def __repr__(self) -> str:
        return f"{self._label}({self.elem!r})"


class SequenceType(_Holder):
    """An ONNX sequence whose elements all have type ``elem`` (None: unknown)."""

    __slots__ = ()
    _label = "seq"


class OptionalType(_Holder):
    """An ONNX optional holding a value of type ``elem`` or nothing."""

    __slots__ = ()
    _label = "optional"


Type = TensorType | SequenceType | OptionalType


def _sequence(value: Any, where: str, expected: str) -> Any:
    if isinstance(value, np.ndarray) and value.ndim == 1:
        return value.tolist()  # a shape computed by numpy
    problem = sequence_problem(value, where, expected)
    if problem is not None:
        raise ArgumentError.at(where, expected, problem.found)
    return value


def _is_type(t: Any) -> bool:
    return t is None or isinstance(t, (TensorType, _Holder))


def _expect_type(t: Any, where: str) -> None:
    if not _is_type(t):
        raise ArgumentError.at(where, "a type (a TensorType, SequenceType, OptionalType) or None", shown(t))


def _dim(d: Any) -> Dim:
    if d is None or type(d) is int or type(d) is str:
        return d  # type: ignore[no-any-return]
    if isinstance(d, (int, np.integer)) and not isinstance(d, bool):
        return int(d)
    if isinstance(d, str):
        return str(d)
    raise TypeMismatch(f"a dimension is an int, a symbol or None, found {brief(d)}",
                       expected="int, str or None", found=brief(d))


# -- serialized form -----------------------------------------------------------------------


def from_attrs(attrs: Mapping[str, Any]) -> Type | None:
    """The type port attributes describe (``dtype``/``shape``, or ``type``), or None."""
    expect_mapping(attrs, "attrs", "a mapping of port attributes")
    nested = attrs.get("type")
    if nested is not None:
        return _from_value(nested)
    dtype, shape = attrs.get("dtype"), attrs.get("shape")
    if dtype is None and shape is None:
        return None
    return _tensor(dtype, shape)


def _tensor(dtype: Any, shape: Any) -> TensorType:
    if shape is not None and not isinstance(shape, (list, tuple)):
        raise TypeMismatch(f"a shape is a list of dims, found {shape!r}",
                           expected="a list of ints, symbols or nulls", found=repr(shape)[:80])
    if dtype is not None:
        problem = dtype_problem(dtype)
        if problem is not None:
            expected, found, hint = problem
            raise TypeMismatch(f"expected {expected}, found {found}" + (f" ({hint})" if hint else ""),
                               expected=expected, found=f"{found} ({hint})" if hint else found)
    for d in shape or ():
        if type(d) is int and d < 0:
            raise TypeMismatch(f"a dimension is a size >= 0, a symbol or None, found {d}",
                               expected="dims >= 0, symbols or nulls", found=repr(list(shape or ()))[:80])
    return TensorType(dtype, shape)


def _from_value(value: Any) -> Type | None:
    if not isinstance(value, Mapping):
        raise TypeMismatch(f"a port type is a mapping such as {{tensor: {{dtype: float32}}}}, found {value!r}",
                           expected="a type mapping", found=repr(value)[:80])
    if "tensor" in value:
        t = value["tensor"] or {}
        if not isinstance(t, Mapping):
            raise TypeMismatch(f"a tensor type is a mapping {{dtype, shape}}, found {t!r}",
                               expected="{dtype, shape}", found=repr(t)[:80])
        return _tensor(t.get("dtype"), t.get("shape"))
    if "sequence" in value:
        return SequenceType(_from_value(value["sequence"]))
    if "optional" in value:
        return OptionalType(_from_value(value["optional"]))
    return None  # map and sparse types: amanda infers nothing about them


def _to_value(t: Type | None) -> dict[str, Any]:
    if isinstance(t, SequenceType):
        return {"sequence": _to_value(t.elem)}
    if isinstance(t, OptionalType):
        return {"optional": _to_value(t.elem)}
    inner: dict[str, Any] = {}
    if t is not None and t.dtype is not None:
        inner["dtype"] = t.dtype
    if t is not None and t.shape is not None:
        inner["shape"] = t.shape
    return {"tensor": inner}


def to_attrs(t: Type | None) -> dict[str, Any]:
    """Port attributes for a type: ``{dtype, shape}`` for a tensor, ``{type}`` otherwise."""
    if t is None:
        return {}
    _expect_type(t, "t")
    if isinstance(t, TensorType):
        return _to_value(t)["tensor"]  # type: ignore[no-any-return]
    return {"type": _to_value(t)}


# -- values --------------------------------------------------------------------------------


def fits(t: Type | None, value: Any, bindings: dict[str, int] | None = None) -> bool:
    """Whether a runtime value has type ``t``; symbols bind in ``bindings`` (kept consistent).

    >>> fits(TensorType("float32", ("n", 2)), np.zeros((5, 2), np.float32))
    True
    >>> b = {}
    >>> fits(TensorType("float32", ("n", "n")), np.zeros((5, 4), np.float32), b)
    False
    """
    if t is None:
        return True
    _expect_type(t, "t")
    bindings = {} if bindings is None else expect_type(bindings, dict, "bindings", "a dict of dim bindings or None")
    if isinstance(t, SequenceType):
        # each element may bind the element type's symbols differently (ragged sequences)
        return isinstance(value, (list, tuple)) and all(fits(t.elem, v, dict(bindings)) for v in value)
    if isinstance(t, OptionalType):
        return value is None or fits(t.elem, value, bindings)
    if not isinstance(value, (np.ndarray, np.generic)):
        return False
    if t.dtype is not None and dtype_name(value.dtype) != t.dtype:
        return False
    if t.shape is None:
        return True
    if len(t.shape) != value.ndim:
        return False
    for dim, size in zip(t.shape, value.shape):
        if type(dim) is int and dim != size:
            return False
        if type(dim) is str and bindings.setdefault(dim, size) != size:
            return False
    return True


# -- dims ----------------------------------------------------------------------------------


_DIM_TYPES = frozenset({int, str, type(None)})


def unify_dims(a: Dim, b: Dim) -> Dim:
    """The more precise of two dims that must be equal; TypeMismatch if they cannot be.

    >>> unify_dims(3, None), unify_dims("n", 3), unify_dims("n", "m")
    (3, 3, 'n')
    """
    if a.__class__ not in _DIM_TYPES or b.__class__ not in _DIM_TYPES:
        wrong, where = (a, "a") if a.__class__ not in _DIM_TYPES else (b, "b")
        raise ArgumentError.at(where, "a dim (an int, a symbol or None)", shown(wrong))
    if a == b or b is None:
        return a
    if a is None:
        return b
    if type(a) is int and type(b) is int:
        raise TypeMismatch(f"dims {a} and {b} differ", expected=str(a), found=str(b))
    return a if type(a) is int else b if type(b) is int else a


def _broadcast_dim(a: Dim, b: Dim) -> Dim:
    if a == b:
        return a
    if a == 1:
        return b
    if b == 1:
        return a
    if type(a) is int and type(b) is int:
        raise TypeMismatch(f"dims {a} and {b} do not broadcast", expected=f"{a} or 1", found=str(b))
    if a is None or b is None:
        return None
    # one symbol and one int other than 1 (or two symbols): they must be equal
    return a if type(a) is int else b if type(b) is int else None


def broadcast_shapes(*shapes: Shape) -> Shape:
    """The numpy broadcast of shapes with symbols; None if a rank is unknown."""
    if any(s is None for s in shapes):
        return None
    for shape in shapes:
        if shape.__class__ is not tuple and shape.__class__ is not list:
            raise ArgumentError.at("shapes", "shapes (tuples of dims) or None", shown(shape))
    rank = max((len(s) for s in shapes), default=0)  # type: ignore[arg-type]
    out: list[Dim] = [1] * rank
    for shape in shapes:
        offset = rank - len(shape)  # type: ignore[arg-type]
        for i, d in enumerate(shape):  # type: ignore[arg-type]
            if d.__class__ not in _DIM_TYPES:
                raise ArgumentError.at("shapes", "dims that are ints, symbols or None", shown(d))
            out[offset + i] = _broadcast_dim(out[offset + i], d)  # type: ignore[arg-type]  # checked above
    return tuple(out)


def merge(a: Type | None, b: Type | None) -> Type | None:
    """The most precise type both ``a`` and ``b`` fit (If branches, loop iterations).

    >>> merge(TensorType("float32", (2, 3)), TensorType("float32", (2, 4)))
    float32[2,?]
    """
    if a is None or b is None:
        return None
    if type(a) is not type(b):
        _expect_type(a, "a")
        _expect_type(b, "b")
        return None
    _expect_type(a, "a")
    if isinstance(a, (SequenceType, OptionalType)):
        return type(a)(merge(a.elem, b.elem))  # type: ignore[union-attr]
    dtype = a.dtype if a.dtype == b.dtype else None  # type: ignore[union-attr]
    sa, sb = a.shape, b.shape  # type: ignore[union-attr]
    if sa is None or sb is None or len(sa) != len(sb):
        return TensorType(dtype, None)
    return TensorType(dtype, tuple(x if x == y else None for x, y in zip(sa, sb)))


def refine(a: Type | None, b: Type | None) -> Type | None:
    """``a`` made more precise by ``b`` (both describe one value); TypeMismatch if they conflict."""
    if a is None:
        return b
    if b is None:
        return a
    if type(a) is not type(b):
        raise TypeMismatch(f"{a!r} is not {b!r}", expected=repr(a), found=repr(b))
    if isinstance(a, (SequenceType, OptionalType)):
        return type(a)(refine(a.elem, b.elem))  # type: ignore[union-attr]
    da, db = a.dtype, b.dtype  # type: ignore[union-attr]
    if da is not None and db is not None and da != db:
        raise TypeMismatch(f"dtype {da} is not {db}", expected=da, found=db)
    sa, sb = a.shape, b.shape  # type: ignore[union-attr]
    shape: Any
    if sa is not None and sb is not None:
        if len(sa) != len(sb):
            raise TypeMismatch(f"rank {len(sa)} is not {len(sb)}", expected=repr(a), found=repr(b))
        shape = tuple(unify_dims(x, y) for x, y in zip(sa, sb))
    else:
        shape = sa if sa is not None else sb
    return TensorType(da or db, shape)
