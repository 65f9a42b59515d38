"""Symbolic values: what the typed op builder passes between op calls, with their types.

A ``Value`` is one output of an op built so far (or a model input, made by ``Input``); it
knows its type at once, because every op call infers its outputs' types when it is made.

>>> x = Input("image", "float32", ("batch", 784))
>>> x.type, x.name
(float32[batch,784], 'image')
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from amanda.containers.arguments import brief
from amanda.errors import ArgumentError
from amanda.types.tensor_type import TensorType, dtype_name, dtype_problem

if TYPE_CHECKING:
    from amanda.containers.container import Container

__all__ = ["Call", "Input", "Value"]


class Call:
    """One op built by the builder and the values wired into its input ports."""

    __slots__ = ("inputs", "op")

    def __init__(self, op: Container, inputs: tuple[tuple[str, Value], ...]) -> None:
        self.op = op
        self.inputs = inputs


class Value:
    """An op's output (``producer``, a Call, and ``port``) or a model input (``producer``
    None), its inferred type, and its value when it is a known constant."""

    __slots__ = ("constant", "name", "port", "producer", "type")

    def __init__(self, producer: Call | None, port: str, type_: Any, name: str,
                 constant: Any = None) -> None:
        self.producer = producer
        self.port = port
        self.type = type_
        self.name = name
        self.constant = constant

    def __repr__(self) -> str:
        where = f"{self.producer.op.name}:{self.port}" if self.producer is not None else "input"
        return f"Value({self.name!r}, {self.type!r}, from {where})"


def Input(name: str, dtype: Any, shape: Sequence[Any] | None = None) -> Value:  # noqa: N802 - Keras's spelling
    """A model input of the given dtype and shape (ints, symbolic names such as ``"batch"``, or
    None for unknown dims; a shape of None leaves the rank unknown).

    The dtype is a name such as ``'float32'`` (or a numpy dtype); the ambiguous ``'float'``
    and ``'int'`` are refused with the list of names, since numpy would read them as 64 bits.

    >>> Input("x", "float32", ("batch", 4)).type
    float32[batch,4]
    """
    if not isinstance(name, str) or not name:
        raise ArgumentError.at("name", "an input name (a non-empty string)", brief(name))
    problem = dtype_problem(dtype)
    if problem is not None:  # 'float' and 'int' are refused: numpy would read 64 bits
        raise ArgumentError.at((name, "dtype"), *problem)
    dtype_text = dtype_name(dtype)
    if shape is not None and (isinstance(shape, (str, bytes)) or not isinstance(shape, Sequence) or not all(
            d is None or isinstance(d, str) or (isinstance(d, int) and not isinstance(d, bool) and d >= 0)
            for d in shape)):
        raise ArgumentError.at(name, "a shape: a sequence of sizes, symbol names or None", brief(shape))
    return Value(None, name, TensorType(dtype_text, None if shape is None else tuple(shape)), name)
