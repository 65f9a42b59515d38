"""TensorFlow -> ONNX opset 17: rules for what Keras 3 graphs hold beyond the layers' ops.

Attention (``Einsum``), layer normalization (``SquaredDifference``), embeddings (``GatherV2``),
``Pack``, ``StridedSlice`` and ``Transpose`` whose constant operands arrive through ``Identity``/``ReadVariableOp``
(frozen graphs) rather than from a ``Const`` beside the op. Each constant is found with
:meth:`amanda.rewrite.mapping.rule.Match.constant_input`; an op whose operand is computed is
left unmatched with the reason.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from amanda.rewrite.mapping.pattern import Pattern
from amanda.rewrite.mapping.rule import Match, NewOp, Replacement, Rule, Skip

__all__ = ["einsum", "gather", "more_rules", "pack", "squared_difference", "strided_slice", "transpose"]

_OPEN = int(np.iinfo(np.int64).max)  # a Slice bound past the end of any axis


def _indexed(names: tuple[str, ...], prefix: str) -> list[str]:
    """The values of a variadic port in order (``values_0``, ``values_1`` …)."""
    return sorted((n for n in names if n.startswith(prefix + "_")), key=lambda n: int(n.rsplit("_", 1)[1]))


def einsum(m: Match) -> Replacement:
    """Einsum -> Einsum with the same equation (TensorFlow's and ONNX's subscripts agree)."""
    old = m["e"]
    values = _indexed(old.input_names, "inputs")
    inputs = [f"Inputs_{i}" for i in range(len(values))]
    ports = {f"e.{v}": f"e.{i}" for v, i in zip(values, inputs)}
    ports[f"e.{old.output_names[0]}"] = "e.Output"
    return Replacement({"e": NewOp("Einsum", inputs=inputs, outputs=["Output"],
                                   attrs={"equation": str(old.attrs["equation"])})}, (), ports)


def squared_difference(m: Match) -> Replacement:
    """SquaredDifference(x, y) -> Mul(d, d) of d = Sub(x, y)."""
    ops = {"diff": NewOp("Sub"), "o": NewOp("Mul")}
    return Replacement(ops, ["diff.C -> o.A", "diff.C -> o.B"],
                       {"o.x": "diff.A", "o.y": "diff.B", "o.z": "o.C"})


def gather(m: Match) -> Replacement | Skip:
    """GatherV2 with a constant axis and batch_dims 0 -> Gather."""
    axis = m.constant_input("g", "axis")
    if axis is None:
        return Skip("its axis is not a constant (ONNX's is an attribute)")
    if int(m["g"].attrs.get("batch_dims", 0)) != 0:
        return Skip("batch_dims other than 0")
    gathered = NewOp("Gather", inputs=["data", "indices"], outputs=["output"],
                     attrs={"axis": int(np.asarray(axis).reshape(-1)[0])})
    return Replacement({"g": gathered}, (), {"g.params": "g.data", "g.axis": None})


def pack(m: Match) -> Replacement:
    """Pack (stack along ``axis``) -> an Unsqueeze of each value, then Concat along it."""
    old = m["p"]
    axis = int(old.attrs.get("axis", 0))
    values = _indexed(old.input_names, "values")
    ops = {"axes": NewOp("Constant", attrs={"value": np.asarray([axis], np.int64)}),
           "p": NewOp("Concat", inputs=[f"inputs_{i}" for i in range(len(values))],
                      outputs=["concat_result"], attrs={"axis": axis})}
    edges, ports = [], {f"p.{old.output_names[0]}": "p.concat_result"}
    for i, value in enumerate(values):
        ops[f"u{i}"] = NewOp("Unsqueeze")
        edges += [f"axes.output -> u{i}.axes", f"u{i}.expanded -> p.inputs_{i}"]
        ports[f"p.{value}"] = f"u{i}.data"
    return Replacement(ops, edges, ports)


def _concat_values(op: Any, arrays: dict[str, Any]) -> Any:
    """ConcatV2 of constants, folded (Keras's Tensordot builds its permutation so)."""
    values = [arrays[n] for n in _indexed(tuple(arrays), "values")]
    return np.concatenate([np.atleast_1d(v) for v in values], axis=int(np.asarray(arrays["axis"])))


def _concat_onnx(op: Any, arrays: dict[str, Any]) -> Any:
    """The same ConcatV2 once the table's ``concat`` rule made it an ONNX Concat."""
    values = [arrays[n] for n in _indexed(tuple(arrays), "inputs")]
    return np.concatenate([np.atleast_1d(v) for v in values], axis=int(op.attrs["axis"]))


def transpose(m: Match) -> Replacement | Skip:
    """Transpose with a constant permutation (a Const, or a ConcatV2 of them) -> Transpose with
    it as the attribute."""
    perm = m.constant_input("t", "perm", fold={"ConcatV2": _concat_values, "Concat": _concat_onnx})
    if perm is None:
        return Skip("its perm is not a constant (ONNX's is an attribute)")
    perm_list = [int(v) for v in np.asarray(perm).reshape(-1)]
    return Replacement({"t": NewOp("Transpose", attrs={"perm": perm_list})}, (),
                       {"t.x": "t.data", "t.perm": None, "t.y": "t.transposed"})


def _slice_bounds(attrs: Any, begin: Any, end: Any, strides: Any) -> tuple[list[int], ...]:
    """ONNX Slice's starts, ends and steps of a StridedSlice, and the axes it shrinks: a masked
    bound is open (from the first element, or the last for a negative stride; to past the end);
    a shrunk axis takes the one element at its begin."""
    masks = [int(attrs.get(k, 0)) for k in ("begin_mask", "end_mask", "shrink_axis_mask")]
    starts, ends, steps, shrunk = [], [], [], []
    for i, (b, e, s) in enumerate(zip(begin, end, strides)):
        b, e, s = int(b), int(e), int(s)
        if masks[2] >> i & 1:
            starts.append(b)
            ends.append(_OPEN if b == -1 else b + 1)
            steps.append(1)
            shrunk.append(i)
            continue
        starts.append((_OPEN if s < 0 else 0) if masks[0] >> i & 1 else b)
        ends.append((-_OPEN if s < 0 else _OPEN) if masks[1] >> i & 1 else e)
        steps.append(s)
    return starts, ends, steps, shrunk


def strided_slice(m: Match) -> Replacement | Skip:
    """StridedSlice with constant begin/end/strides -> Slice (bounds in :func:`_slice_bounds`),
    then a Squeeze of the shrunk axes. An ellipsis or new axes are left unmatched."""
    old = m["s"]
    if int(old.attrs.get("ellipsis_mask", 0)) or int(old.attrs.get("new_axis_mask", 0)):
        return Skip("an ellipsis_mask or new_axis_mask")
    bounds = [m.constant_input("s", port) for port in ("begin", "end", "strides")]
    if any(b is None for b in bounds):
        return Skip("begin, end or strides is not a constant")
    starts, ends, steps, shrunk = _slice_bounds(old.attrs, *(np.asarray(b).reshape(-1) for b in bounds))
    ops = {name: NewOp("Constant", attrs={"value": np.asarray(v, np.int64)}) for name, v in
           (("starts", starts), ("ends", ends), ("axes", list(range(len(starts)))), ("steps", steps))}
    ops["s"] = NewOp("Slice")
    edges = [f"{name}.output -> s.{name}" for name in ("starts", "ends", "axes", "steps")]
    ports = {"s.input": "s.data", "s.begin": None, "s.end": None, "s.strides": None}
    if shrunk:
        ops["shrunk"] = NewOp("Constant", attrs={"value": np.asarray(shrunk, np.int64)})
        ops["squeeze"] = NewOp("Squeeze")
        edges += ["s.output -> squeeze.data", "shrunk.output -> squeeze.axes"]
        ports["s.output"] = "squeeze.squeezed"
    return Replacement(ops, edges, ports)


def more_rules() -> list[Rule]:
    """The rules of this module, in the order the table tries them."""
    return [
        Rule("einsum", Pattern({"e": "Einsum"}), einsum),
        Rule("squared_difference", Pattern({"o": "SquaredDifference"}), squared_difference),
        Rule("gather", Pattern({"g": "GatherV2"}), gather),
        Rule("pack", Pattern({"p": "Pack"}), pack),
        Rule("transpose_constant", Pattern({"t": "Transpose"}), transpose),
        Rule("strided_slice", Pattern({"s": "StridedSlice"}), strided_slice),
    ]
