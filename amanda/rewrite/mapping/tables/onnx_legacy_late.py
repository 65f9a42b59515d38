"""Rules for the ONNX ops whose signature changed between opsets 6 and 11; ``LATE[v]`` has the
shape of ``onnx_changes.CHANGES[v]``.

- 7: ``broadcast``/``axis`` of binary ops -> numpy broadcasting; ``is_test`` of Dropout and
  BatchNormalization, ``output_sequence`` of RNN/GRU/LSTM and Gemm's ``broadcast`` dropped;
  Upsample ``height_scale``/``width_scale`` -> ``scales``.
- 8: Max, Min, Sum and Mean broadcast (before: equal shapes only; going down checks them).
- 9: BatchNormalization's ``spatial`` dropped (0, inference only, is written out with
  elementwise ops); Upsample's ``scales`` attribute
  became an input; Scan lost its batch axis (refused both ways).
- 10: Slice's ``starts``/``ends``/``axes`` and TopK's ``k`` became inputs; Upsample was replaced
  by Resize (same inputs and meaning).
- 11: Clip's ``min``/``max`` and Pad's ``pads``/``value`` became inputs; Resize gained ``roi``
  and the coordinate and rounding modes (Resize-10 is ``asymmetric``, nearest rounding down when
  enlarging and up when shrinking, as onnxruntime computes it); Scatter became ScatterElements;
  Gemm's ``C`` became optional.

>>> from amanda.rewrite.mapping.tables.onnx_opsets import adapter
>>> adapter(10, 11).rule_names[:3]
['clip_min_max_to_inputs', 'pad_pads_to_inputs', 'resize_roi_and_modes']
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from amanda.rewrite.mapping.rule import RELABEL, Match, NewOp, Replacement, Skip
from amanda.rewrite.mapping.tables.onnx_changes import Rule, _one
from amanda.rewrite.mapping.tables.onnx_legacy import (
    LEGACY,
    LEGACY_ATTR,
    attrs_to_inputs,
    constant,
    drop_rule,
    dtype_of,
    floats,
    inputs_to_attrs,
    ints,
    scalar,
    shape_of,
    with_constants,
)

__all__ = ["ALL_LEGACY", "NEGATIVE_AXES_11", "nonnegative_axes"]

_VARIADIC_8 = ("Max", "Min", "Sum", "Mean")


# -- 7 ----------------------------------------------------------------------------------------------

BINARY = ("Add", "Sub", "Mul", "Div", "Pow", "And", "Or", "Xor", "Equal", "Greater", "Less")


def _rank_of(m: Match, port: str) -> int | None:
    rank = m.input_rank("op", port)
    if rank is None and (value := m.constant("op", port)) is not None:
        rank = np.asarray(value).ndim
    return rank


def _broadcast_up(m: Match) -> Any:
    """Legacy broadcasting aligns B with A's trailing axes (numpy's rule), or from ``axis``: then
    B gets trailing axes of size 1 (Unsqueeze) so that numpy aligns it the same way."""
    op = m["op"]
    drop = [a for a in ("broadcast", "axis", LEGACY_ATTR) if a in op.attrs]
    axis = op.attrs.get("axis")
    if not op.attrs.get("broadcast") or axis is None:
        return Replacement({"op": NewOp(drop_attrs=drop)}) if drop else RELABEL
    rank_a, rank_b = _rank_of(m, op.input_names[0]), _rank_of(m, op.input_names[1])
    if rank_a is None or rank_b is None:
        return Skip(f"broadcast from axis {axis} needs the ranks of both inputs, and one is unknown")
    if not -rank_a <= int(axis) < rank_a:
        return Skip(f"axis {axis} is outside A's rank {rank_a}")
    trailing = rank_a - int(axis) % rank_a - rank_b
    if trailing < 0:
        return Skip(f"B of rank {rank_b} does not fit A of rank {rank_a} from axis {axis}")
    if trailing == 0:
        return Replacement({"op": NewOp(drop_attrs=drop)})
    ops = {"unsqueeze": NewOp("Unsqueeze", attrs={"axes": list(range(rank_b, rank_b + trailing))},
                              name=f"{op.name}/{op.input_names[1]}"),
           "op": NewOp(drop_attrs=drop)}
    b = op.input_names[1]
    return Replacement(ops, [f"unsqueeze.expanded -> op.{b}"], {f"op.{b}": "unsqueeze.data"})


def _broadcast_down(m: Match) -> Any:
    """Before 7 the shapes must be equal, or B's a suffix of A's (``broadcast=1``)."""
    op = m["op"]
    a, b = (shape_of(m, "op", p) for p in op.input_names[:2])
    if a is None or b is None:
        return Skip("legacy broadcasting needs both input shapes, and one is unknown")
    if a == b:
        return RELABEL
    if len(b) <= len(a) and (a[len(a) - len(b):] == b or int(np.prod(b)) == 1):
        return Replacement({"op": NewOp(attrs={"broadcast": 1})})
    return Skip(f"shapes {list(a)} and {list(b)} broadcast in a way opsets before 7 cannot express")


def _is_test_up(m: Match) -> Any:
    """``is_test`` goes; an explicit 0 (training) survives only where the outputs say so from 7
    on: a BatchNormalization declaring its statistics outputs (as onnx's converter does)."""
    op = m["op"]
    if "is_test" in op.attrs and not int(op.attrs["is_test"]) and (op.type == "Dropout" or len(op.outputs) == 1):
        mode = "random dropping" if op.type == "Dropout" else "normalizing by the batch's statistics"
        return Skip(f"is_test=0 ({mode}, training mode) has no {op.type}-7 form")
    drop = [a for a in ("is_test", LEGACY_ATTR) if a in op.attrs]
    return Replacement({"op": NewOp(drop_attrs=drop)}) if drop else RELABEL


def _batchnorm_test(m: Match) -> Mapping[str, Any]:
    return {"is_test": 1} if len(m["op"].outputs) == 1 else {}


def _upsample_up(m: Match) -> Any:
    op = m["op"]
    mode = op.attrs.get("mode", "nearest")
    scales = [1.0, 1.0, float(op.attrs["height_scale"]), float(op.attrs["width_scale"])]
    return Replacement({"op": NewOp(attrs={"scales": scales, "mode": "linear" if mode == "bilinear" else mode},
                                    drop_attrs=["height_scale", "width_scale"])})


def _upsample_down(m: Match) -> Any:
    op = m["op"]
    scales = [float(s) for s in op.attrs.get("scales", ())]
    if len(scales) != 4 or scales[:2] != [1.0, 1.0]:
        return Skip(f"scales {scales} do not scale only the last two axes of a 4-D input, as Upsample-1 does")
    mode = op.attrs.get("mode", "nearest")
    return Replacement({"op": NewOp(attrs={"height_scale": scales[2], "width_scale": scales[3],
                                           "mode": "bilinear" if mode == "linear" else mode},
                                    drop_attrs=["scales"])})


RNNS = ("RNN", "GRU", "LSTM")


def _output_sequence(m: Match) -> Mapping[str, Any]:
    """Before 7 an RNN gives its ``Y`` output only with ``output_sequence=1``."""
    op = m["op"]
    return {"output_sequence": 1} if "Y" in op.output_names and m.consumers("op", "Y") else {}


def _same_shapes(m: Match) -> Any:
    found = [shape_of(m, "op", p) for p in m["op"].input_names]
    if any(s is None for s in found):
        return Skip("before opset 8 every input must have the same shape, and a shape is unknown")
    shapes = [s for s in found if s is not None]
    if len(set(shapes)) > 1:
        return Skip(f"shapes {[list(s) for s in shapes]} differ; before opset 8 they must be equal")
    return RELABEL


def _relabel(m: Match) -> Any:
    return RELABEL


# -- 9 ----------------------------------------------------------------------------------------------

def _spatial(m: Match) -> Any:
    """``spatial=0`` keeps statistics per element (shape C x D1 x …): written out as
    ``(X - mean) / sqrt(var + epsilon) * scale + B``, which numpy broadcasting aligns the same way."""
    op = m["op"]
    if int(op.attrs.get("spatial", 1)) != 0:
        return Replacement({"op": NewOp(drop_attrs=["spatial"])}) if "spatial" in op.attrs else RELABEL
    if len(op.outputs) != 1:
        return Skip("spatial=0 in training mode (more than one output) has no BatchNormalization-9 form")
    dtype = dtype_of(m, "op", "X")
    if dtype is None:
        return Skip("spatial=0 is written out with an epsilon constant of X's dtype, which is unknown")
    x, scale, b, mean, var = op.input_names
    ops = {"eps": constant(op.attrs.get("epsilon", 1e-5), f"{op.name}/epsilon", dtype),
           "centred": NewOp("Sub", name=f"{op.name}/centred"), "shifted": NewOp("Add", name=f"{op.name}/var_eps"),
           "std": NewOp("Sqrt", name=f"{op.name}/std"), "normal": NewOp("Div", name=f"{op.name}/normal"),
           "scaled": NewOp("Mul", name=f"{op.name}/scaled"), "out": NewOp("Add", name=op.name)}
    edges = ["eps.output -> shifted.B", "shifted.C -> std.X", "centred.C -> normal.A", "std.Y -> normal.B",
             "normal.C -> scaled.A", "scaled.C -> out.A"]
    ports = {f"op.{x}": "centred.A", f"op.{mean}": "centred.B", f"op.{var}": "shifted.A",
             f"op.{scale}": "scaled.B", f"op.{b}": "out.B", f"op.{op.output_names[0]}": "out.C"}
    return Replacement(ops, edges, ports)


def _scan_refused(m: Match) -> Any:
    return Skip("Scan-8's batch axis and sequence_lens have no Scan-9 form (nor the other way)")


# -- 10 ---------------------------------------------------------------------------------------------

def _retype(new_type: str):  # type: ignore[no-untyped-def]
    def rule(m: Match) -> Any:
        return Replacement({"op": NewOp(type=new_type, keep_attrs=True)})

    rule.__name__ = rule.__qualname__ = f"to_{new_type.lower()}"
    return rule


def _steps_are_one(value: np.ndarray) -> None:
    if np.any(value.reshape(-1) != 1):
        raise ValueError("steps other than 1 have no Slice-1 form")
    return None


# -- 11: Resize -------------------------------------------------------------------------------------

def _nearest_mode(m: Match, scales_port: str) -> str | None:
    """Resize-10 (and Upsample) round the nearest source pixel down when enlarging and up when
    shrinking; which one an op does needs its scales."""
    scales = m.constant("op", scales_port)
    if scales is None:
        return None
    scales = np.asarray(scales).reshape(-1)
    if np.all(scales >= 1):
        return "floor"
    if np.all(scales <= 1):
        return "ceil"
    return None


def _resize_11(m: Match, x: str, scales: str, out: str) -> Any:
    op = m["op"]
    mode = str(op.attrs.get("mode", "nearest"))
    attrs: dict[str, Any] = {"mode": mode, "coordinate_transformation_mode": "asymmetric"}
    if mode == "nearest":
        rounding = _nearest_mode(m, scales)
        if rounding is None:
            return Skip("nearest mode needs constant scales, all >= 1 or all <= 1, to know its "
                        "rounding at opset 11")
        attrs["nearest_mode"] = rounding
    ops = {"roi": constant(np.zeros(0, np.float32), f"{op.name}/roi"),
           "op": NewOp(type="Resize", inputs=["X", "roi", "scales"], outputs=["Y"], attrs=attrs,
                       keep_attrs=True)}
    return Replacement(ops, ["roi.output -> op.roi"], {f"op.{x}": "op.X", f"op.{scales}": "op.scales",
                                                       f"op.{out}": "op.Y"})


def _resize_up(m: Match) -> Any:
    return _resize_11(m, "X", "scales", "Y")


def _upsample_up_11(m: Match) -> Any:
    """An Upsample in an opset-10 model (deprecated there, ports by position) -> Resize-11."""
    op = m["op"]
    if len(op.inputs) != 2 or len(op.outputs) != 1:
        return Skip("Upsample-9 takes X and scales and gives one output")
    return _resize_11(m, op.input_names[0], op.input_names[1], op.output_names[0])


def _resize_down(m: Match) -> Any:
    op = m["op"]
    mode = str(op.attrs.get("mode", "nearest"))
    if mode not in ("nearest", "linear"):
        return Skip(f"mode {mode!r} does not exist before opset 11")
    if op.attrs.get("coordinate_transformation_mode", "half_pixel") != "asymmetric":
        return Skip("Resize-10 maps coordinates as 'asymmetric' only")
    if m.producer("op", "sizes") is not None or m.producer("op", "scales") is None:
        return Skip("Resize-10 takes scales, not sizes")
    if int(op.attrs.get("exclude_outside", 0)):
        return Skip("exclude_outside does not exist before opset 11")
    if mode == "nearest" and op.attrs.get("nearest_mode", "round_prefer_floor") != _nearest_mode(m, "scales"):
        return Skip("Resize-10's nearest rounding (down when enlarging, up when shrinking) differs "
                    f"from nearest_mode {op.attrs.get('nearest_mode', 'round_prefer_floor')!r}")
    drop = ["coordinate_transformation_mode", "cubic_coeff_a", "exclude_outside", "extrapolation_value",
            "nearest_mode"]
    return Replacement({"op": NewOp(inputs=["X", "scales"], drop_attrs=drop)},
                       ports={"op.roi": None, "op.sizes": None})


def _gemm_c(m: Match) -> Any:
    """Before 11 Gemm needs C: an unfed C is a zero of A's dtype."""
    if m.producer("op", "C") is not None:
        return RELABEL
    dtype = dtype_of(m, "op", "A")
    if dtype is None:
        return Skip("C is unfed and A's dtype is unknown; Gemm before 11 needs C")
    op = m["op"]
    ops = {"c": constant(np.zeros((), dtype), f"{op.name}/C"),
           "op": NewOp(inputs=["A", "B", "C"])}
    return Replacement(ops, ["c.output -> op.C"])


def _same(value: Any) -> Any:
    return value


LATE: dict[int, list[tuple[tuple[str, ...], list[Rule], list[Rule]]]] = {
    7: [(BINARY, _one(BINARY, _broadcast_up, "numpy_broadcast"), _one(BINARY, _broadcast_down, "legacy_broadcast")),
        (("Gemm",), drop_rule(("Gemm",), ("broadcast",), "broadcast"),
         drop_rule(("Gemm",), (), "broadcast", lambda m: {"broadcast": 1})),
        (("Dropout",), _one(("Dropout",), _is_test_up, "is_test"),
         drop_rule(("Dropout",), (), "is_test", lambda m: {"is_test": 1})),
        (("BatchNormalization",), _one(("BatchNormalization",), _is_test_up, "is_test"),
         drop_rule(("BatchNormalization",), (), "is_test", _batchnorm_test)),
        (RNNS, drop_rule(RNNS, ("output_sequence",), "output_sequence"),
         drop_rule(RNNS, (), "output_sequence", _output_sequence)),
        (("Upsample",), _one(("Upsample",), _upsample_up, "scales"), _one(("Upsample",), _upsample_down, "scales"))],
    8: [(_VARIADIC_8, _one(_VARIADIC_8, _relabel, "broadcast"), _one(_VARIADIC_8, _same_shapes, "same_shapes"))],
    9: [(("BatchNormalization",), _one(("BatchNormalization",), _spatial, "spatial"),
         _one(("BatchNormalization",), _relabel, "spatial")),
        (("Upsample",), attrs_to_inputs(("Upsample",), [("scales", "scales", "float32", list)], ("X", "scales"),
                                        "scales_to_input"),
         inputs_to_attrs(("Upsample",), [("scales", "scales", floats)], "scales_to_attr")),
        (("Scan",), _one(("Scan",), _scan_refused, "batch_axis"), _one(("Scan",), _scan_refused, "batch_axis"))],
    10: [(("Slice",), attrs_to_inputs(("Slice",), [(a, a, "int64", list) for a in ("starts", "ends", "axes")],
                                      ("data", "starts", "ends", "axes", "steps"), "attrs_to_inputs"),
          inputs_to_attrs(("Slice",), [*((p, p, ints) for p in ("starts", "ends", "axes")),
                                       ("steps", "steps", _steps_are_one)], "inputs_to_attrs")),
         (("TopK",), attrs_to_inputs(("TopK",), [("k", "K", "int64", lambda k: [k])], ("X", "K"), "k_to_input"),
          inputs_to_attrs(("TopK",), [("K", "k", lambda v: int(scalar(v)))], "k_to_attr")),
         (("Upsample", "Resize"), _one(("Upsample",), _retype("Resize"), "to_resize"),
          _one(("Resize",), _retype("Upsample"), "to_upsample"))],
    11: [(("Clip",), attrs_to_inputs(("Clip",), [("min", "min", None, _same), ("max", "max", None, _same)],
                                     ("input", "min", "max"), "min_max_to_inputs"),
          inputs_to_attrs(("Clip",), [("min", "min", scalar), ("max", "max", scalar)], "min_max_to_attrs")),
         (("Pad",), attrs_to_inputs(("Pad",), [("pads", "pads", "int64", list), ("value", "constant_value", None, _same)],
                                    ("data", "pads", "constant_value"), "pads_to_inputs"),
          inputs_to_attrs(("Pad",), [("pads", "pads", ints), ("constant_value", "value", scalar)], "pads_to_attrs")),
         (("Resize", "Upsample"), [*_one(("Resize",), _resize_up, "roi_and_modes"),
                                   *_one(("Upsample",), _upsample_up_11, "upsample_to_resize")],
          with_constants(("Resize",), ["roi"], _resize_down, "asymmetric_only")),
         (("Scatter", "ScatterElements"), _one(("Scatter",), _retype("ScatterElements"), "to_scatter_elements"),
          _one(("ScatterElements",), _retype("Scatter"), "to_scatter")),
         (("Gemm",), _one(("Gemm",), _relabel, "c_optional"), _one(("Gemm",), _gemm_c, "c_required"))],
}


#: ops that take negative axes from 11 on: attribute, and how many axes the output adds to the
#: input's rank (what a negative axis counts from)
NEGATIVE_AXES_11: Mapping[str, tuple[str, int | None]] = {
    **{t: ("axis", 0) for t in ("ArgMax", "ArgMin", "Compress", "Concat", "Flatten", "Gather", "Hardmax",
                                "LogSoftmax", "Softmax", "Split")},
    **{t: ("axes", 0) for t in ("ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax",
                                "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSum", "ReduceSumSquare",
                                "Squeeze")},
    "OneHot": ("axis", 1), "Unsqueeze": ("axes", None),  # None: one per axis
}


def nonnegative_axes(m: Match) -> dict[str, Any] | Skip:
    """Going below 11: the op's negative axes counted from the front (which needs the rank)."""
    op = m["op"]
    attr, extra = NEGATIVE_AXES_11.get(str(op.type), ("", 0))
    value = op.attrs.get(attr)
    axes = [int(a) for a in (value if isinstance(value, (list, tuple)) else [value])] if value is not None else []
    if not any(a < 0 for a in axes):
        return {}
    first = op.input_names[0]
    rank = m.input_rank("op", first)
    if rank is None and (const := m.constant("op", first)) is not None:
        rank = np.asarray(const).ndim
    if rank is None:
        return Skip(f"{attr} {axes} counts from the back, which opsets before 11 do not, and the rank is unknown")
    rank += len(axes) if extra is None else extra
    fixed = [a + rank if a < 0 else a for a in axes]
    if any(a < 0 for a in fixed):
        return Skip(f"{attr} {axes} is outside the rank {rank}")
    return {attr: fixed if isinstance(value, (list, tuple)) else fixed[0]}


def _merged() -> dict[int, list[tuple[tuple[str, ...], list[Rule], list[Rule]]]]:
    merged: dict[int, list[Any]] = {}
    for table in (LEGACY, LATE):
        for version, entries in table.items():
            merged.setdefault(version, []).extend(entries)
    return merged


#: every rule for the steps from opset 1 to 11
ALL_LEGACY: Mapping[int, list[tuple[tuple[str, ...], list[Rule], list[Rule]]]] = _merged()
