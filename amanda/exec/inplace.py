"""Reuse of dead buffers: elementwise ops that write their result into an input nobody
else will read.

The choice is made when a plan is built, from facts known then, so nothing on the hot
path counts references: an input slot is donated to the op reading it when

- the kernel that writes the slot returns freshly allocated memory (its registry entry
  is ``fresh``, declared in :mod:`amanda.ops.catalog`: checked for each op type by a test
  against the ONNX backend cases),
- that op is the slot's only reader and reads it once,
- the slot is not fetched (the caller would see it change) nor fed nor a folded constant.

At run time the in-place variant still falls back to the ordinary kernel when dtypes or
broadcast shapes do not allow writing into the donated array.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from amanda.exec.kernels import registry
from amanda.exec.kernels.registry import ONNX, InPlace, declare

if TYPE_CHECKING:
    from amanda.exec.plan import Step

__all__ = ["donate"]

Body = Callable[..., tuple]


_WORTH_IT = 4096  # elements below which reusing a buffer saves nothing measurable


def _fits(other: tuple, shape: tuple) -> bool:
    """Whether ``other`` broadcasts into ``shape`` (the common cases only: same shape, one
    element, or a trailing-axis vector such as a bias); anything else takes the fallback."""
    return other == shape or (len(other) <= 1 and (not other or other[0] in (1, shape[-1])))


def _floats(x: Any) -> bool:
    return isinstance(x, np.ndarray) and x.dtype.kind == "f" and x.flags.writeable and x.dtype.itemsize >= 4


def _unary(body: Callable[[np.ndarray], None]) -> Callable[[int], Body]:
    def make(position: int) -> Body:
        def run(fallback: Callable, attrs: Any, x: Any) -> tuple:
            if not isinstance(x, np.ndarray) or x.size < _WORTH_IT or not _floats(x):
                return fallback(attrs, x)
            body(x)
            return (x,)

        return run

    return make


def _sigmoid(x: np.ndarray) -> None:
    # the tanh form, as the kernel computes it: never overflows
    x *= 0.5
    np.tanh(x, out=x)
    x += 1.0
    x *= 0.5


def _binary(ufunc: np.ufunc) -> Callable[[int], Body]:
    def make(position: int) -> Body:
        def run(fallback: Callable, attrs: Any, a: Any, b: Any) -> tuple:
            donated, other = (a, b) if position == 0 else (b, a)
            if (
                not isinstance(other, np.ndarray)
                or donated.size < _WORTH_IT  # tiny arrays: a fresh one costs less than the checks
                or not _floats(donated)
                or other.dtype != donated.dtype
                or not _fits(other.shape, donated.shape)
                or "broadcast" in attrs  # opset < 7's legacy broadcasting
            ):
                return fallback(attrs, a, b)
            ufunc(a, b, out=donated)
            return (donated,)

        return run

    return make


# the in-place variants: the input positions that may be donated, and the variant's maker
declare("Relu", inplace=InPlace((0,), _unary(lambda x: np.maximum(x, 0, out=x))))
declare("Sigmoid", inplace=InPlace((0,), _unary(_sigmoid)))
declare("Tanh", inplace=InPlace((0,), _unary(lambda x: np.tanh(x, out=x))))
declare("Exp", inplace=InPlace((0,), _unary(lambda x: np.exp(x, out=x))))
declare("Neg", inplace=InPlace((0,), _unary(lambda x: np.negative(x, out=x))))
declare("Sqrt", inplace=InPlace((0,), _unary(lambda x: np.sqrt(x, out=x))))
declare("Add", inplace=InPlace((0, 1), _binary(np.add)))
declare("Mul", inplace=InPlace((0, 1), _binary(np.multiply)))
declare("Sub", inplace=InPlace((0,), _binary(np.subtract)))
declare("Div", inplace=InPlace((0,), _binary(np.divide)))


def _fresh(family: str | None, op_type: Any) -> bool:
    found = None if family is None else registry.entry(family, op_type)
    return found is not None and found.fresh


def donate(steps: list[Step], op_types: list[Any], families: list[str | None], writer: dict[int, int],
           uses: list[int], keep: frozenset[int]) -> list[Step]:
    """Steps where an elementwise op may overwrite a dead input get its in-place variant;
    ``families`` holds each step's kernel family (None for steps run inline, such as session
    kernels): the in-place variants are ONNX kernels, the writers may be of any family."""
    from functools import partial

    out = list(steps)
    for i, step in enumerate(steps):
        ins = step.ins
        found = registry.entry(ONNX, op_types[i]) if families[i] == ONNX else None
        if found is None or found.inplace is None:
            continue
        positions, make = found.inplace
        for position in positions:
            if position >= len(ins):
                continue
            slot = ins[position]
            source = writer.get(slot)
            if (
                source is not None
                and _fresh(families[source], op_types[source])
                and uses[slot] == 1
                and ins.count(slot) == 1
                and slot not in keep
            ):
                out[i] = step._replace(fn=partial(make(position), step.fn))
                break
    return out
