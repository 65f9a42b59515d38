"""What a vector-Jacobian rule sees: one forward op (``Node``) and the builder helpers rules
share (constants of the forward dtype, shapes at run time, undoing broadcasting).

A rule is ``rule(node) -> [gradient or None per input port]``. ``node.inputs`` and
``node.outputs`` are the forward op's values (builder ``Value``s standing for endpoints of the
forward model), ``node.grads`` the gradients of its outputs (None where nothing downstream
needs one) and ``node.needs[i]`` says whether input ``i`` needs a gradient at all.

>>> import numpy as np
>>> from amanda.build import Input
>>> g, b = Input("g", "float32", ("n", 3)), Input("b", "float32", (3,))
>>> unbroadcast(g, b).type
float32[3]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from amanda.build import ops
from amanda.build.values import Value
from amanda.errors import SchemaError, format_path
from amanda.namespaces.name import NamespaceName

__all__ = ["Node", "axes_of", "const", "rank", "shape_of", "size_of", "unbroadcast", "zeros_like"]


class Node:
    """One forward op as a rule sees it (see the module doc)."""

    __slots__ = ("grads", "inputs", "namespace", "needs", "op", "outputs", "path")

    def __init__(self, path: tuple, op: Any, inputs: list, outputs: list, grads: list, needs: list,
                 namespace: str = "amanda/onnx/17") -> None:
        self.path = path
        self.op = op
        self.inputs: list[Any] = inputs  # Values, None where an optional input is absent
        self.outputs: list[Value] = outputs
        self.grads: list[Value | None] = grads
        self.needs: list[bool] = needs
        self.namespace = namespace  # the forward op's effective namespace

    @property
    def opset(self) -> int | None:
        """The version of the forward op's namespace (``amanda/onnx/13`` -> 13), if it has one."""
        return NamespaceName.parse(self.namespace).opset

    def attr(self, name: str, default: Any = None) -> Any:
        """The forward op's attribute ``name`` (``default`` when absent)."""
        value = self.op.attrs.get(name)
        return default if value is None else value

    def own_attrs(self, *dropped: str) -> dict[str, Any]:
        """The forward op's own attributes, to build the same op again: without the namespace,
        metadata and the importer's bookkeeping (``BOOKKEEPING_ATTRS``), nor ``dropped``."""
        from amanda.io.onnx.write_graph import BOOKKEEPING_ATTRS

        return {k: v for k, v in self.op.attrs.items() if k not in BOOKKEEPING_ATTRS and k not in dropped}

    def need(self, i: int) -> bool:
        """Whether input ``i`` is given and needs a gradient."""
        return i < len(self.needs) and self.needs[i] and self.inputs[i] is not None

    def grad(self, i: int = 0) -> Value:
        """The gradient of output ``i``, zeros when nothing downstream gave one."""
        g = self.grads[i] if i < len(self.grads) else None
        return zeros_like(self.outputs[i]) if g is None else g

    def fail(self, expected: str, found: str) -> SchemaError:
        """The error for a forward op this rule cannot differentiate."""
        where = format_path(self.path)
        return SchemaError(f"cannot differentiate `{where}` ({self.op.type}): expected {expected}, found {found}",
                           path=where, expected=expected, found=found)

    def given(self, *indices: int) -> Any:
        """The Values of inputs ``indices`` (one Value for one index), which the rule needs:
        an error naming the op when one is not connected.

        >>> from amanda import op
        >>> Node(("m",), op("Neg", "m"), [None], [], [], []).given(0)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        amanda.errors.SchemaError: cannot differentiate `m` (Neg): expected input 0 connected, found nothing
        """
        values = tuple(self.inputs[i] if i < len(self.inputs) else None for i in indices)
        for i, value in zip(indices, values):
            if value is None:
                raise self.fail(f"input {i} connected", "nothing")
        return values[0] if len(values) == 1 else values

    def known(self, i: int, what: str) -> np.ndarray:
        """The constant value of input ``i`` (axes, shapes, ratios): an error when computed."""
        value = self.inputs[i] if i < len(self.inputs) else None
        if value is None or value.constant is None:
            raise self.fail(f"a constant {what}", "a value computed at run time" if value is not None else "none")
        return np.asarray(value.constant)


def const(value: Any, like: Value) -> np.ndarray:
    """``value`` as an array of ``like``'s dtype (so float64 graphs stay float64)."""
    return np.asarray(value, dtype=np.dtype(getattr(like.type, "dtype", None) or "float32"))  # untyped: float32


def rank(value: Value, node: Node | None = None) -> int:
    """The static rank of ``value``; an error naming the op when it is unknown."""
    r = getattr(value.type, "rank", None)
    if r is None:
        if node is not None:
            raise node.fail("inputs of known rank", f"{value.type!r}")
        raise SchemaError(f"a value of known rank is needed, found {value.type!r}", path=value.name,
                          expected="a known rank", found=repr(value.type))
    return int(r)


def shape_of(value: Value, start: int | None = None, end: int | None = None) -> Value:
    """``Shape(value)`` (a constant when the dims are known)."""
    if start is None and end is None:
        return ops.Shape(value)
    return ops.Shape(value, start=start, end=end)


def size_of(value: Value) -> Value:
    """The element count of ``value`` as an int64 scalar (a constant when the dims are known)."""
    dims = value.type.shape
    if dims is not None and all(type(d) is int for d in dims):
        return ops.Constant(value=np.array(int(np.prod(dims)), np.int64))
    return ops.ReduceProd(shape_of(value), keepdims=0)


def zeros_like(value: Value) -> Value:
    """Zeros of ``value``'s shape and dtype."""
    return ops.ConstantOfShape(shape_of(value), value=const([0], value))


def axes_of(axes: Any, r: int) -> list[int]:
    """Axes made non-negative for rank ``r``, sorted."""
    return sorted(int(a) % r if r else 0 for a in np.asarray(axes).reshape(-1))


def _dims_equal(a: Sequence[Any], b: Sequence[Any]) -> bool:
    return len(a) == len(b) and all(x == y and x is not None for x, y in zip(a, b))


def unbroadcast(g: Value, x: Value) -> Value:
    """``g`` summed over the axes the forward op broadcast ``x`` along, shaped like ``x``."""
    gs, xs = g.type.shape, x.type.shape
    if gs is not None and xs is not None and _dims_equal(gs, xs):
        return g
    if gs is None or xs is None:
        raise SchemaError(f"undoing broadcasting needs known ranks, found {g.type!r} and {x.type!r}",
                          path=x.name, expected="known ranks", found=f"{g.type!r}, {x.type!r}")
    lead = len(gs) - len(xs)
    axes = list(range(lead)) + [lead + i for i, d in enumerate(xs) if d == 1 and gs[lead + i] != 1]
    if axes:
        g = ops.ReduceSum(g, np.array(axes, np.int64), keepdims=1)
    if lead or (g.type.shape is not None and not _dims_equal(g.type.shape, xs)):
        g = ops.Reshape(g, shape_of(x))
    return g
