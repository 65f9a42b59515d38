"""Rules for the ONNX ops whose signature or meaning changed between two adjacent opsets.

``CHANGES[v]`` lists the rules for the step between opsets ``v - 1`` and ``v``, as
``(op types, rule up, rules down)``; each rule is ``(pattern, function)``. Every other op is
handled by the generic rule in ``onnx_opsets`` (a relabel when its schema is compatible).

- 12: Dropout's ``ratio`` attribute became an input (with ``training_mode``).
- 13: ``axes`` of ReduceSum, Squeeze, Unsqueeze and ``split`` of Split became inputs; Softmax,
  LogSoftmax and Hardmax stopped coercing the input to 2-D (``axis`` now names one axis, default
  -1, instead of where the 2-D split falls, default 1); Resize's ``roi`` and ``scales`` became
  optional and ``tf_half_pixel_for_nn`` was dropped.
- 15: Shape gained ``start`` and ``end``; before 15 the whole shape is taken and sliced.
- 18: ``axes`` of the other reductions became an input; Split gained ``num_outputs`` (needed
  when ``split`` is not given).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from amanda.rewrite.mapping.pattern import Pattern
from amanda.rewrite.mapping.rule import RELABEL, Match, NewOp, Replacement, Skip

__all__ = ["CHANGES", "changed_types"]

Rule = tuple[Pattern, Callable[[Match], Any]]
_REDUCE_18 = ("ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
              "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")


def _constant_value(op: Any) -> np.ndarray | None:
    for key in ("value", "value_ints", "value_int", "value_floats", "value_float"):
        if key in op.attrs:
            return np.asarray(op.attrs[key])
    return None


def _named(function: Callable[[Match], Any], name: str) -> Callable[[Match], Any]:
    function.__name__ = function.__qualname__ = name
    return function


# -- an attribute becomes an input, and back -------------------------------------------------------

def attr_to_input(types: Sequence[str], attr: str, port: str, dtype: str) -> list[Rule]:
    """Up: attribute ``attr`` becomes input ``port``, fed by a new Constant of ``dtype``."""

    def rule(m: Match) -> Any:
        op = m["op"]
        value = op.attrs.get(attr)
        if value is None:
            return RELABEL  # absent stays absent: the input is left unfed
        ops = {port: NewOp("Constant", attrs={"value": np.asarray(value, dtype=dtype)},
                           name=f"{op.name}/{port}"),
               "op": NewOp(inputs=[*op.input_names, port], drop_attrs=[attr])}
        return Replacement(ops, [f"{port}.output -> op.{port}"])

    return [(Pattern({"op": tuple(types)}), _named(rule, f"{attr}_to_input"))]


def input_to_attr(types: Sequence[str], port: str, attr: str, convert: Callable[[np.ndarray | None], Any],
                  noop_attr: bool = False) -> list[Rule]:
    """Down: input ``port`` (a Constant) becomes attribute ``attr``; an unfed port stays unset.

    With ``noop_attr`` the op has ``noop_with_empty_axes``: set with no axes, it is an Identity.
    """

    def finish(m: Match, value: Any) -> Any:
        op = m["op"]
        inputs = [p for p in op.input_names if p != port]
        if noop_attr and op.attrs.get("noop_with_empty_axes") and (value is None or len(value) == 0):
            return Replacement({"op": NewOp("Identity", inputs=["input"], outputs=["output"],
                                            keep_attrs=["metadata", "onnx_node"])},
                               ports={f"op.{port}": None})
        attrs = {attr: value} if value is not None else {}
        drop = ["noop_with_empty_axes"] if noop_attr else []
        return Replacement({"op": NewOp(inputs=inputs, attrs=attrs, drop_attrs=drop)},
                           ports={f"op.{port}": None})

    def constant(m: Match) -> Any:
        return finish(m, convert(_constant_value(m["const"])))

    def other(m: Match) -> Any:
        if m.producer("op", port) is not None:
            return Skip(f"its {port} input is computed at run time; opset "
                        f"{m.target.rsplit('/', 1)[1]} wants the attribute {attr}")
        return finish(m, None)

    return [(Pattern({"const": "Constant", "op": tuple(types)}, [f"const.output -> op.{port}"]),
             _named(constant, f"{port}_to_attr")),
            (Pattern({"op": tuple(types)}), _named(other, f"{port}_to_attr_unfed"))]


def _ints(value: np.ndarray | None) -> list[int] | None:
    return None if value is None else [int(v) for v in np.asarray(value).reshape(-1)]


# -- Softmax, LogSoftmax, Hardmax (13) --------------------------------------------------------------

def _softmax_up(m: Match) -> Any:
    """Opset < 13 coerces the input to 2-D at ``axis`` (default 1): Flatten, normalize the last
    axis, and Reshape back; ``axis`` -1 (or the last axis of a known rank) needs none of that."""
    op = m["op"]
    axis = int(op.attrs.get("axis", 1))
    rank = m.input_rank("op", "input")
    if axis == -1 or (rank is not None and axis in (rank - 1, -1)):
        return Replacement({"op": NewOp(attrs={"axis": -1})})
    ops = {"shape": NewOp("Shape"), "flat": NewOp("Flatten", attrs={"axis": axis}),
           "op": NewOp(attrs={"axis": -1}), "back": NewOp("Reshape")}
    edges = ["flat.output -> op.input", "op.output -> back.data", "shape.shape -> back.shape"]
    return Replacement(ops, edges, {"op.input": ["shape.data", "flat.input"], "op.output": "back.reshaped"})


def _softmax_down(m: Match) -> Any:
    """Opset 13's ``axis`` (default -1) normalizes one axis; before 13 that is the 2-D coercion
    at the last axis, so any other axis is moved last and back (which needs the rank)."""
    op = m["op"]
    axis = int(op.attrs.get("axis", -1))
    rank = m.input_rank("op", "input")
    if axis == -1 or (rank is not None and axis == rank - 1):
        return Replacement({"op": NewOp(attrs={"axis": -1})})
    if rank is None:
        return Skip(f"axis {axis} is not the last axis and the input's rank is unknown")
    axis %= rank
    perm = list(range(rank))
    perm[axis], perm[-1] = perm[-1], perm[axis]
    ops = {"into": NewOp("Transpose", attrs={"perm": perm}), "op": NewOp(attrs={"axis": -1}),
           "back": NewOp("Transpose", attrs={"perm": perm})}
    edges = ["into.transposed -> op.input", "op.output -> back.data"]
    return Replacement(ops, edges, {"op.input": "into.data", "op.output": "back.transposed"})


# -- Resize (13), Dropout (12), Split (18) ------------------------------------------------------------

def _resize_up(m: Match) -> Any:
    if m["op"].attrs.get("coordinate_transformation_mode") == "tf_half_pixel_for_nn":
        return Skip("coordinate_transformation_mode tf_half_pixel_for_nn was removed at opset 13")
    return RELABEL


def _resize_down(m: Match) -> Any:
    """Before 13, ``roi`` and ``scales`` must be given: an empty float tensor stands for none."""
    op = m["op"]
    ops: dict[str, NewOp] = {}
    edges = []
    inputs = list(op.input_names)
    for port in ("roi", "scales"):
        if m.producer("op", port) is None:
            ops[port] = NewOp("Constant", attrs={"value": np.zeros(0, dtype=np.float32)},
                              name=f"{op.name}/{port}")
            edges.append(f"{port}.output -> op.{port}")
            if port not in inputs:
                inputs.append(port)
    if not ops:
        return RELABEL
    ops["op"] = NewOp(inputs=inputs)
    return Replacement(ops, edges)


def _dropout_up(m: Match) -> Any:
    op = m["op"]
    if "ratio" not in op.attrs:
        return RELABEL
    ops = {"ratio": NewOp("Constant", attrs={"value": np.asarray(op.attrs["ratio"], dtype=np.float32)},
                          name=f"{op.name}/ratio"),
           "op": NewOp(inputs=[*op.input_names, "ratio"], drop_attrs=["ratio"])}
    return Replacement(ops, ["ratio.output -> op.ratio"])


def _dropout_down(m: Match) -> Any:
    op = m["op"]
    attrs: dict[str, Any] = {}
    if m.producer("op", "ratio") is not None:
        ratio = m.constant("op", "ratio")
        if ratio is None:
            return Skip("its ratio is computed at run time; opset 11 wants an attribute")
        attrs["ratio"] = float(np.asarray(ratio).reshape(-1)[0])
    if m.producer("op", "training_mode") is not None:
        mode = m.constant("op", "training_mode")
        if mode is None or bool(np.asarray(mode).reshape(-1)[0]):
            return Skip("training_mode may be true; opset 11's Dropout has no training mode")
    inputs = [p for p in op.input_names if p not in ("ratio", "training_mode")]
    return Replacement({"op": NewOp(inputs=inputs, attrs=attrs, drop_attrs=["seed"])},
                       ports={"op.ratio": None, "op.training_mode": None})


def _split_down_18(m: Match) -> Any:
    """``num_outputs`` goes: without ``split``, Split-17 splits evenly into its outputs (Split-18
    also allows a smaller last chunk, which 17 rejects at run time)."""
    if "num_outputs" in m["op"].attrs:
        return Replacement({"op": NewOp(drop_attrs=["num_outputs"])})
    return RELABEL


def _split_up_18(m: Match) -> Any:
    """Split-18 wants ``split`` or ``num_outputs``: without ``split``, the number of outputs."""
    if m.producer("op", "split") is not None:
        return RELABEL
    return Replacement({"op": NewOp(attrs={"num_outputs": len(m["op"].outputs)})})


def _shape_up_15(m: Match) -> Any:
    """Shape-14 takes the whole shape, as Shape-15 does without ``start`` and ``end``."""
    return RELABEL


def _shape_down_15(m: Match) -> Any:
    """Shape-15's ``start`` and ``end``: before 15, the whole shape and a Slice of it."""
    op = m["op"]
    start, end = op.attrs.get("start"), op.attrs.get("end")
    if start in (None, 0) and end is None:
        return Replacement({"op": NewOp(drop_attrs=["start"])})
    bound = np.iinfo(np.int64).max if end is None else int(end)
    ops = {"op": NewOp(drop_attrs=["start", "end"]),
           "starts": NewOp("Constant", attrs={"value": np.array([int(start or 0)], np.int64)}),
           "ends": NewOp("Constant", attrs={"value": np.array([bound], np.int64)}),
           "part": NewOp("Slice")}
    edges = ["op.shape -> part.data", "starts.output -> part.starts", "ends.output -> part.ends"]
    return Replacement(ops, edges, {"op.shape": "part.output"})


def _one(pattern_types: Sequence[str], function: Callable[[Match], Any], name: str) -> list[Rule]:
    return [(Pattern({"op": tuple(pattern_types)}), _named(function, name))]


SOFTMAX = ("Softmax", "LogSoftmax", "Hardmax")

#: opset v -> [(op types, up rules (v-1 -> v), down rules (v -> v-1))]
CHANGES: dict[int, list[tuple[tuple[str, ...], list[Rule], list[Rule]]]] = {
    12: [(("Dropout",), _one(("Dropout",), _dropout_up, "dropout_ratio_to_input"),
          _one(("Dropout",), _dropout_down, "dropout_ratio_to_attr"))],
    13: [
        (("ReduceSum",), attr_to_input(("ReduceSum",), "axes", "axes", "int64"),
         input_to_attr(("ReduceSum",), "axes", "axes", _ints, noop_attr=True)),
        (("Squeeze",), attr_to_input(("Squeeze",), "axes", "axes", "int64"),
         input_to_attr(("Squeeze",), "axes", "axes", _ints)),
        (("Unsqueeze",), attr_to_input(("Unsqueeze",), "axes", "axes", "int64"),
         input_to_attr(("Unsqueeze",), "axes", "axes", _ints)),
        (("Split",), attr_to_input(("Split",), "split", "split", "int64"),
         input_to_attr(("Split",), "split", "split", _ints)),
        (SOFTMAX, _one(SOFTMAX, _softmax_up, "softmax_axis_up"),
         _one(SOFTMAX, _softmax_down, "softmax_axis_down")),
        (("Resize",), _one(("Resize",), _resize_up, "resize_up"),
         _one(("Resize",), _resize_down, "resize_roi_scales")),
    ],
    15: [(("Shape",), _one(("Shape",), _shape_up_15, "shape_up"),
          _one(("Shape",), _shape_down_15, "shape_start_end_to_slice"))],
    18: [
        (_REDUCE_18, attr_to_input(_REDUCE_18, "axes", "axes", "int64"),
         input_to_attr(_REDUCE_18, "axes", "axes", _ints, noop_attr=True)),
        (("Split",), _one(("Split",), _split_up_18, "split_num_outputs"),
         _one(("Split",), _split_down_18, "split_num_outputs")),
    ],
}

#: (op type, opset that added the value) -> {attribute: values an older opset does not know}
VALUES_ADDED: dict[tuple[str, int], dict[str, frozenset[str]]] = {
    ("Pad", 19): {"mode": frozenset({"wrap"})},
    ("Resize", 19): {"coordinate_transformation_mode": frozenset({"half_pixel_symmetric"})},
}


def changed_types(version: int) -> frozenset[str]:
    """Op types that specific rules handle in the step to or from opset ``version``."""
    return frozenset(t for types, _, _ in CHANGES.get(version, ()) for t in types)
