"""Type rules shared by many op families: the first input's type, along an axis, a boolean of
the first input's shape, broadcasting (with value propagation)."""

from __future__ import annotations

import operator
from typing import Any

from amanda.types.node import Node, Partial, as_dims, from_dims
from amanda.types.tensor_type import TensorType


def same_as_first(node: Node) -> list:
    """The output has the type of the first input (unary elementwise ops, normalisations)."""
    t = node.type(0)
    if node.op.type == "Identity":
        node.set_value(0, node.value(0))
    elif node.op.type == "Neg":
        node.set_value(0, _partial_map(node.value(0), lambda d: -d))
    return [t] * node.n_out


def along_axis(node: Node) -> list:
    """The input's type; ``axis`` must name one of its dims."""
    default = -1 if node.opset >= 13 or node.op.type == "LpNormalization" else 1
    node.axis(int(node.attr("axis", default)), node.rank(0))
    return [node.type(0)]


def bool_like_first(node: Node) -> list:
    """A bool tensor of the first input's shape."""
    return [TensorType("bool", node.shape(0))]


def dtype_of_all(node: Node, ports: range | list) -> str | None:
    found = None
    for i in ports:
        d = node.dtype(i)
        if d is None:
            continue
        if found is None:
            found = d
        elif d != found:
            raise node.fail(f"input {i} of dtype {found} (as input {ports[0]})", d)
    return found


def _shapes(node: Node, ports: Any) -> list:
    return [node.shape(i) for i in ports]


def legacy(node: Node) -> bool:
    return node.opset < 7 and bool(node.attr("broadcast", 0))


_ARITH = {"Add": operator.add, "Sub": operator.sub, "Mul": operator.mul}


def broadcasting(node: Node) -> list:
    """Inputs of one dtype broadcast together (numpy rules; symbols must agree)."""
    ports = range(len(node.types))
    dtype = dtype_of_all(node, ports)
    if legacy(node):
        return [TensorType(dtype, node.shape(0))]
    shape = node.broadcast(*_shapes(node, ports))
    fn = _ARITH.get(node.op.type)
    if fn is not None and len(node.types) == 2:
        node.set_value(0, _partial_arith(node.value(0), node.value(1), fn))
    return [TensorType(dtype, shape)]


# -- partial values ------------------------------------------------------------------------


def _partial_map(value: Any, fn: Any) -> Any:
    if not isinstance(value, Partial):
        return None
    return from_dims([fn(d) if type(d) is int else None for d in value.dims], value.scalar)


def _partial_arith(a: Any, b: Any, fn: Any) -> Any:
    da, db = as_dims(a), as_dims(b)
    if da is None or db is None or not (isinstance(a, Partial) or isinstance(b, Partial)):
        return None
    scalar = _is_scalar(a) and _is_scalar(b)
    if len(da) == 1:
        da = da * len(db)
    if len(db) == 1:
        db = db * len(da)
    if len(da) != len(db):
        return None
    out = []
    for x, y in zip(da, db):
        if type(x) is int and type(y) is int:
            out.append(fn(x, y))
        elif fn is operator.mul and (x == 1 or y == 1):
            out.append(y if x == 1 else x)
        elif fn is not operator.mul and y == 0:
            out.append(x)
        else:
            out.append(None)
    return from_dims(out, scalar)


def _is_scalar(v: Any) -> bool:
    return v.scalar if isinstance(v, Partial) else getattr(v, "ndim", 1) == 0
