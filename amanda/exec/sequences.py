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

__all__ = [
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


@kernel("SequenceConstruct", since=11)
def sequence_construct(attrs: Attrs, *tensors: np.ndarray) -> tuple:
    """A sequence of the inputs, in order."""
    return (list(tensors),)


@kernel("SequenceInsert", since=11)
def sequence_insert(attrs: Attrs, seq: list, tensor: np.ndarray, position: Any = None) -> tuple:
    """A copy of ``seq`` with ``tensor`` inserted at ``position`` (default: the end)."""
    out = list(seq)
    out.insert(_position(out, position, len(out), inserting=True), tensor)
    return (out,)


@kernel("SequenceAt", since=11)
def sequence_at(attrs: Attrs, seq: list, position: Any) -> tuple:
    """The element at ``position`` (negative counts from the end)."""
    return (seq[_position(seq, position, 0)],)


@kernel("SequenceErase", since=11)
def sequence_erase(attrs: Attrs, seq: list, position: Any = None) -> tuple:
    """A copy of ``seq`` without the element at ``position`` (default: the last)."""
    out = list(seq)
    del out[_position(out, position, -1)]
    return (out,)


@kernel("SequenceLength", since=11)
def sequence_length(attrs: Attrs, seq: list) -> tuple:
    """The number of elements, as an int64 scalar."""
    return (np.array(len(seq), dtype=np.int64),)


@kernel("ConcatFromSequence", since=11)
def concat_from_sequence(attrs: Attrs, seq: list) -> tuple:
    """Concatenate the elements along ``axis``, or stack them along a new one (``new_axis=1``)."""
    axis = int(attrs["axis"])
    if int(attrs.get("new_axis", 0)):
        return (np.stack(seq, axis=axis),)
    return (np.concatenate(seq, axis=axis),)


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


@kernel("Optional", since=15)
def optional(attrs: Attrs, x: Any = None) -> tuple:
    """An optional holding ``x``, or an empty one (None) when there is no input."""
    return (x,)


@kernel("OptionalHasElement", since=15)
def optional_has_element(attrs: Attrs, x: Any = None) -> tuple:
    """Whether the optional holds a value (an omitted input is an empty optional)."""
    return (np.array(x is not None),)


@kernel("OptionalGetElement", since=15)
def optional_get_element(attrs: Attrs, x: Any) -> tuple:
    """The optional's value; an error for an empty optional."""
    if x is None:
        raise ExecutionError("OptionalGetElement of an empty optional")
    return (x,)
