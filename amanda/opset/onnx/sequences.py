"""Sequence and optional values of the ONNX default domain, as the executor represents them.

A sequence is a Python ``list`` of arrays and an empty optional is ``None`` (a present
optional is its value). Every kernel returns a new list, so a sequence a run handed out
is never changed afterwards. These live beside the control-flow kernels because loop
and branch bodies are where sequences and optionals mostly flow.

>>> import numpy as np
>>> sequence_insert({}, [np.zeros(1)], np.ones(1), np.array(0))[0][0]
array([1.])
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from amanda.errors import ExecutionError
from amanda.exec.kernels.registry import kernel
from amanda.ops import define
from amanda.types.node import Node
from amanda.types.rules.control import BOOL, insert
from amanda.types.rules.control import optional as optional_type
from amanda.types.tensor_type import ONNX_DTYPES, OptionalType, SequenceType, TensorType, Type, merge

#: why sequence and optional ops have no gradient rule
NOT_A_TENSOR = "sequence or optional values (gradients are tensors: unpack them before the loss's path)"

__all__ = [
    "NOT_A_TENSOR",
    "concat_from_sequence", "optional", "optional_get_element", "optional_has_element",
    "sequence_at", "sequence_construct", "sequence_empty", "sequence_erase", "sequence_insert",
    "sequence_length", "split_to_sequence",
]

Attrs = Mapping[str, Any]


def _position(seq: list, position: Any, default: int, inserting: bool = False) -> int:
    n = len(seq)
    p = default if position is None else int(np.asarray(position).reshape(-1)[0])
    high = n if inserting else n - 1
    if not -n <= p <= high:
        raise ExecutionError(f"sequence position {p} is out of range for a sequence of {n}")
    return p + n if p < 0 else p


@kernel("SequenceEmpty", since=11)
def sequence_empty(attrs: Attrs) -> tuple:
    """An empty sequence (its element ``dtype`` attribute does not change an empty list)."""
    return ([],)


def sequence_empty_type(node: Node) -> list:
    """A sequence of tensors of ``dtype`` (float32 by default)."""
    return [SequenceType(TensorType(ONNX_DTYPES.get(int(node.attr("dtype", 1))), None))]


define("SequenceEmpty",
       type_rule=sequence_empty_type,
       no_gradient=NOT_A_TENSOR)


@kernel("SequenceConstruct", since=11)
def sequence_construct(attrs: Attrs, *tensors: np.ndarray) -> tuple:
    """A sequence of the inputs, in order."""
    return (list(tensors),)


def _elem_merge(node: Node, types: list) -> Type | None:
    known = [t for t in types if t is not None]
    dtypes = {t.dtype for t in known if isinstance(t, TensorType)} - {None}
    if len(dtypes) > 1:
        raise node.fail("sequence elements of one dtype", ", ".join(sorted(map(str, dtypes))))
    if not known:
        return None
    out = known[0]
    for t in known[1:]:
        out = merge(out, t)  # type: ignore[assignment]
    return out


def sequence_construct_type(node: Node) -> list:
    """A sequence of the inputs' common type."""
    return [SequenceType(_elem_merge(node, list(node.types)))]


define("SequenceConstruct",
       type_rule=sequence_construct_type,
       no_gradient=NOT_A_TENSOR)


@kernel("SequenceInsert", since=11)
def sequence_insert(attrs: Attrs, seq: list, tensor: np.ndarray, position: Any = None) -> tuple:
    """A copy of ``seq`` with ``tensor`` inserted at ``position`` (default: the end)."""
    out = list(seq)
    out.insert(_position(out, position, len(out), inserting=True), tensor)
    return (out,)


def sequence_insert_type(node: Node) -> list:
    """The sequence, its element type widened to fit the inserted tensor."""
    seq = node.type(0)
    elem = seq.elem if isinstance(seq, SequenceType) else None
    return [SequenceType(_elem_merge(node, [elem, node.type(1)]) if elem is not None else node.type(1))]


define("SequenceInsert",
       type_rule=sequence_insert_type,
       no_gradient=NOT_A_TENSOR)


@kernel("SequenceAt", since=11)
def sequence_at(attrs: Attrs, seq: list, position: Any) -> tuple:
    """The element at ``position`` (negative counts from the end)."""
    return (seq[_position(seq, position, 0)],)


def sequence_at_type(node: Node) -> list:
    """The sequence's element type."""
    seq = node.type(0)
    return [seq.elem if isinstance(seq, SequenceType) else None]


define("SequenceAt",
       type_rule=sequence_at_type,
       no_gradient=NOT_A_TENSOR)


@kernel("SequenceErase", since=11)
def sequence_erase(attrs: Attrs, seq: list, position: Any = None) -> tuple:
    """A copy of ``seq`` without the element at ``position`` (default: the last)."""
    out = list(seq)
    del out[_position(out, position, -1)]
    return (out,)


def sequence_erase_type(node: Node) -> list:
    """The sequence's type."""
    return [node.type(0)]


define("SequenceErase",
       type_rule=sequence_erase_type,
       no_gradient=NOT_A_TENSOR)


@kernel("SequenceLength", since=11)
def sequence_length(attrs: Attrs, seq: list) -> tuple:
    """The number of elements, as an int64 scalar."""
    return (np.array(len(seq), dtype=np.int64),)


def sequence_length_type(node: Node) -> list:
    """An int64 scalar."""
    return [TensorType("int64", ())]


define("SequenceLength",
       type_rule=sequence_length_type,
       no_gradient=NOT_A_TENSOR)


@kernel("ConcatFromSequence", since=11)
def concat_from_sequence(attrs: Attrs, seq: list) -> tuple:
    """Concatenate the elements along ``axis``, or stack them along a new one (``new_axis=1``)."""
    axis = int(attrs["axis"])
    if int(attrs.get("new_axis", 0)):
        return (np.stack(seq, axis=axis),)
    return (np.concatenate(seq, axis=axis),)


def concat_from_sequence_type(node: Node) -> list:
    """The element type with the ``axis`` dim unknown (a new axis when ``new_axis``)."""
    seq = node.type(0)
    elem = seq.elem if isinstance(seq, SequenceType) else None
    if not isinstance(elem, TensorType) or elem.shape is None:
        return [TensorType(getattr(elem, "dtype", None), None)]
    axis = int(node.attr("axis", 0))
    if node.attr("new_axis", 0):
        return [insert(elem, axis, None)]
    a = node.axis(axis, len(elem.shape))
    return [TensorType(elem.dtype, [None if i == a else d for i, d in enumerate(elem.shape)])]


define("ConcatFromSequence",
       type_rule=concat_from_sequence_type,
       no_gradient=NOT_A_TENSOR)


@kernel("SplitToSequence", since=11)
def split_to_sequence(attrs: Attrs, x: np.ndarray, split: np.ndarray | None = None) -> tuple:
    """Split ``x`` along ``axis``: in parts of the sizes ``split`` gives, into equal parts of
    size ``split`` (a scalar), or into single slices (squeezed unless ``keepdims=1``)."""
    axis = int(attrs.get("axis", 0)) % x.ndim
    if split is None:
        parts = np.split(x, x.shape[axis], axis=axis)
        if not int(attrs.get("keepdims", 1)):
            parts = [np.squeeze(p, axis=axis) for p in parts]
        return (parts,)
    sizes = np.asarray(split).astype(np.int64)
    if sizes.ndim == 0:
        step = int(sizes)
        bounds = list(range(step, x.shape[axis], step))
    else:
        bounds = list(np.cumsum(sizes)[:-1])
    return (np.split(x, bounds, axis=axis),)


def split_to_sequence_type(node: Node) -> list:
    """Pieces along ``axis``: of the scalar ``split`` size, or 1 (dropped unless keepdims)."""
    shape = node.shape(0)
    if shape is None:
        return [SequenceType(TensorType(node.dtype(0), None))]
    axis = node.axis(int(node.attr("axis", 0)), len(shape))
    if not node.present(1):
        if node.attr("keepdims", 1):
            return [SequenceType(TensorType(node.dtype(0), [1 if i == axis else d for i, d in enumerate(shape)]))]
        return [SequenceType(TensorType(node.dtype(0), [d for i, d in enumerate(shape) if i != axis]))]
    return [SequenceType(TensorType(node.dtype(0), [None if i == axis else d for i, d in enumerate(shape)]))]


define("SplitToSequence",
       type_rule=split_to_sequence_type,
       no_gradient=NOT_A_TENSOR)


@kernel("Optional", since=15)
def optional(attrs: Attrs, x: Any = None) -> tuple:
    """An optional holding ``x``, or an empty one (None) when there is no input."""
    return (x,)


define("Optional",
       type_rule=optional_type,
       no_gradient=NOT_A_TENSOR)


@kernel("OptionalHasElement", since=15)
def optional_has_element(attrs: Attrs, x: Any = None) -> tuple:
    """Whether the optional holds a value (an omitted input is an empty optional)."""
    return (np.array(x is not None),)


def optional_has_element_type(node: Node) -> list:
    """A bool scalar."""
    return [BOOL]


define("OptionalHasElement",
       type_rule=optional_has_element_type,
       no_gradient=NOT_A_TENSOR)


@kernel("OptionalGetElement", since=15)
def optional_get_element(attrs: Attrs, x: Any) -> tuple:
    """The optional's value; an error for an empty optional."""
    if x is None:
        raise ExecutionError("OptionalGetElement of an empty optional")
    return (x,)


def optional_get_element_type(node: Node) -> list:
    """The optional's element type (a tensor or sequence passes through)."""
    t = node.type(0)
    return [t.elem if isinstance(t, OptionalType) else t]


define("OptionalGetElement",
       type_rule=optional_get_element_type,
       no_gradient=NOT_A_TENSOR)
