"""TensorFlow -> ONNX opset 17: the rules that compute layouts and fold constants.

TensorFlow convolutions, pooling and batch normalization default to NHWC; ONNX's are NCHW. Each
is mapped to the ONNX op between two Transposes (``[0, 3, 1, 2]`` in, ``[0, 2, 3, 1]`` out; the
filter goes from HWIO to OIHW), with TensorFlow's ``strides``/``dilations``/``ksize`` read at the
spatial positions of its ``data_format``. ``padding`` SAME is ONNX ``auto_pad: SAME_UPPER``
(TensorFlow puts the odd pixel at the end), VALID is zero pads, EXPLICIT gives ``pads``.
Reductions whose axes ONNX 17 wants as an attribute need a Const ``reduction_indices``.

The table is ``python_rules() + load_mapping(tensorflow_onnx.yaml)``: see :func:`tensorflow_to_onnx`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from amanda.rewrite.mapping.pattern import Pattern
from amanda.rewrite.mapping.rule import Match, NewOp, Replacement, Rule, Skip
from amanda.rewrite.mapping.table import MappingTable

__all__ = ["SOURCE", "TARGET", "python_rules", "tensorflow_to_onnx"]

SOURCE = "amanda/tensorflow"
TARGET = "amanda/onnx/17"
YAML_RULES = Path(__file__).with_name("tensorflow_onnx.yaml")
TO_NCHW = [0, 3, 1, 2]
TO_NHWC = [0, 2, 3, 1]
HWIO_TO_OIHW = [3, 2, 0, 1]
_REDUCE = {"Mean": "ReduceMean", "Max": "ReduceMax", "Min": "ReduceMin", "Prod": "ReduceProd"}


def _constant(value: Any, dtype: str) -> NewOp:
    return NewOp("Constant", attrs={"value": np.asarray(value, dtype=dtype)})


def _transpose(perm: list[int]) -> NewOp:
    return NewOp("Transpose", attrs={"perm": perm})


def _spatial(values: Any, layout: str) -> list[int]:
    """The H and W entries of a 4-vector in ``layout`` (NHWC or NCHW)."""
    values = list(values)
    return values[1:3] if layout == "NHWC" else values[2:4]


def _padding(attrs: Any, layout: str) -> dict[str, Any] | Skip:
    padding = attrs.get("padding")
    if padding == "SAME":
        return {"auto_pad": "SAME_UPPER"}
    if padding == "VALID":
        return {"pads": [0, 0, 0, 0]}
    if padding == "EXPLICIT":
        pairs = np.asarray(attrs.get("explicit_paddings", ()), dtype=np.int64).reshape(-1, 2)
        h, w = (pairs[1], pairs[2]) if layout == "NHWC" else (pairs[2], pairs[3])
        return {"pads": [int(h[0]), int(w[0]), int(h[1]), int(w[1])]}
    return Skip(f"padding {padding!r}")


def _layout(attrs: Any) -> str | Skip:
    layout = attrs.get("data_format", "NHWC")
    return layout if layout in ("NHWC", "NCHW") else Skip(f"data_format {layout!r}")


def _geometry(attrs: Any) -> tuple[str, dict[str, Any]] | Skip:
    """The data layout and ONNX padding attributes of a TF spatial op, or why it can't map."""
    layout = _layout(attrs)
    if isinstance(layout, Skip):
        return layout
    pads = _padding(attrs, layout)
    if isinstance(pads, Skip):
        return pads
    return layout, pads


def _around(m: Match, var: str, onnx_op: NewOp, data_in: str, data_out: str, layout: str,
            extra_ops: dict[str, NewOp] | None = None, extra_edges: list[str] | None = None,
            ports: dict[str, Any] | None = None) -> Replacement:
    """``onnx_op`` (updating ``var``) between NHWC<->NCHW Transposes when ``layout`` is NHWC."""
    old = m[var]
    ops: dict[str, NewOp] = {}
    edges = list(extra_edges or [])
    ports = dict(ports or {})
    x_port, y_port = old.input_names[0], old.output_names[0]
    if layout == "NHWC":
        ops["to_nchw"] = _transpose(TO_NCHW)
        edges.append(f"to_nchw.transposed -> {var}.{data_in}")
        ports[f"{var}.{x_port}"] = "to_nchw.data"
    else:
        ports[f"{var}.{x_port}"] = f"{var}.{data_in}"
    ops.update(extra_ops or {})
    ops[var] = onnx_op
    if layout == "NHWC":
        ops["to_nhwc"] = _transpose(TO_NHWC)
        edges.append(f"{var}.{data_out} -> to_nhwc.data")
        ports.setdefault(f"{var}.{y_port}", "to_nhwc.transposed")
    else:
        ports.setdefault(f"{var}.{y_port}", f"{var}.{data_out}")
    return Replacement(ops, edges, ports)


def conv2d(m: Match) -> Replacement | Skip:
    """Conv2D (NHWC or NCHW, HWIO filter) -> Conv between layout Transposes."""
    attrs = m["conv"].attrs
    geometry = _geometry(attrs)
    if isinstance(geometry, Skip):
        return geometry
    layout, pads = geometry
    conv = NewOp("Conv", inputs=["X", "W"], outputs=["Y"], attrs={
        "strides": _spatial(attrs["strides"], layout),
        "dilations": _spatial(attrs.get("dilations", (1, 1, 1, 1)), layout), **pads})
    return _around(m, "conv", conv, "X", "Y", layout,
                   extra_ops={"filter_oihw": _transpose(HWIO_TO_OIHW)},
                   extra_edges=["filter_oihw.transposed -> conv.W"],
                   ports={"conv.filter": "filter_oihw.data"})


def depthwise_conv2d(m: Match) -> Replacement | Skip:
    """DepthwiseConv2dNative with a constant filter [H, W, C, M] (a Const, or one read through
    Identity/ReadVariableOp) -> Conv with ``group`` C and the filter folded to [C * M, 1, H, W]
    (TensorFlow's output channel c * M + m is ONNX's)."""
    attrs = m["conv"].attrs
    geometry = _geometry(attrs)
    if isinstance(geometry, Skip):
        return geometry
    layout, pads = geometry
    weights = m.constant_input("conv", "filter")
    if weights is None:
        return Skip("its filter is not a constant (ONNX's group must be known)")
    weights = np.asarray(weights)
    if weights.ndim != 4:
        return Skip(f"a filter of rank {weights.ndim} (TensorFlow's is [H, W, C, M])")
    h, w, c, k = weights.shape
    folded = weights.reshape(h, w, 1, c * k).transpose(HWIO_TO_OIHW)
    conv = NewOp("Conv", inputs=["X", "W"], outputs=["Y"], attrs={
        "group": int(c), "strides": _spatial(attrs["strides"], layout),
        "dilations": _spatial(attrs.get("dilations", (1, 1, 1, 1)), layout), **pads})
    return _around(m, "conv", conv, "X", "Y", layout,
                   extra_ops={"filter": _constant(folded, str(weights.dtype))},
                   extra_edges=["filter.output -> conv.W"], ports={"conv.filter": None})


def pool(m: Match) -> Replacement | Skip:
    """MaxPool / AvgPool -> MaxPool / AveragePool (TensorFlow's SAME average ignores padding,
    as ONNX's count_include_pad=0 does)."""
    old = m["pool"]
    attrs = old.attrs
    geometry = _geometry(attrs)
    if isinstance(geometry, Skip):
        return geometry
    layout, pads = geometry
    onnx_type = "MaxPool" if old.type == "MaxPool" else "AveragePool"
    onnx_attrs = {"kernel_shape": _spatial(attrs["ksize"], layout),
                  "strides": _spatial(attrs["strides"], layout), **pads}
    return _around(m, "pool", NewOp(onnx_type, inputs=["X"], outputs=["Y"], attrs=onnx_attrs),
                   "X", "Y", layout)


def batch_norm(m: Match) -> Replacement | Skip:
    """FusedBatchNorm(V2, V3) for inference -> BatchNormalization; batch_mean and
    batch_variance are then the given mean and variance."""
    attrs = m["bn"].attrs
    if attrs.get("is_training", True):
        return Skip("is_training is true (TensorFlow's default); only inference maps")
    layout = attrs.get("data_format", "NHWC")
    perms = {"NHWC": (TO_NCHW, TO_NHWC), "NDHWC": ([0, 4, 1, 2, 3], [0, 2, 3, 4, 1])}
    bn = NewOp("BatchNormalization", inputs=["X", "scale", "B", "input_mean", "input_var"],
               outputs=["Y"], attrs={"epsilon": float(attrs.get("epsilon", 0.0001))})
    ports: dict[str, Any] = {"bn.scale": "bn.scale", "bn.offset": "bn.B", "bn.mean": "bn.input_mean",
                             "bn.variance": "bn.input_var", "bn.batch_mean": "bn.mean",
                             "bn.batch_variance": "bn.variance"}
    for port in m["bn"].output_names:
        if port.startswith("reserve_space"):
            ports[f"bn.{port}"] = None
    if layout in ("NCHW", "NCDHW"):
        return _around(m, "bn", bn, "X", "Y", "NCHW", ports=ports)
    if layout not in perms:
        return Skip(f"data_format {layout!r}")
    into, back = perms[layout]
    replacement = _around(m, "bn", bn, "X", "Y", "NHWC", ports=ports)
    ops = dict(replacement.ops)
    ops["to_nchw"], ops["to_nhwc"] = _transpose(into), _transpose(back)
    return Replacement(ops, replacement.edges, replacement.ports)


def bias_add_nchw(m: Match) -> Replacement:
    """BiasAdd NCHW: the bias is reshaped to [C, 1, …, 1] (rank of the value less one), computed
    with Shape ops so any rank works."""
    ops = {
        "value_shape": NewOp("Shape"),
        "rank": NewOp("Shape"),
        "two": _constant([2], "int64"),
        "ones_count": NewOp("Sub"),
        "ones": NewOp("ConstantOfShape", attrs={"value": np.ones(1, dtype=np.int64)}),
        "bias_shape": NewOp("Shape"),
        "target": NewOp("Concat", inputs=["inputs_0", "inputs_1"], attrs={"axis": 0}),
        "bias": NewOp("Reshape"),
        "b": NewOp("Add"),
    }
    edges = ["value_shape.shape -> rank.data", "rank.shape -> ones_count.A",
             "two.output -> ones_count.B", "ones_count.C -> ones.input",
             "bias_shape.shape -> target.inputs_0", "ones.output -> target.inputs_1",
             "target.concat_result -> bias.shape", "bias.reshaped -> b.B"]
    ports = {"b.value": ["value_shape.data", "b.A"], "b.bias": ["bias_shape.data", "bias.data"],
             "b.output": "b.C"}
    return Replacement(ops, edges, ports)


def concat(m: Match) -> Replacement:
    """ConcatV2 with a Const axis -> Concat."""
    old = m["c"]
    values = sorted((p for p in old.input_names if p != "axis"),
                    key=lambda p: int(p.rsplit("_", 1)[1]) if p.rsplit("_", 1)[-1].isdigit() else 0)
    inputs = [f"inputs_{i}" for i in range(len(values))]
    axis = int(np.asarray(m["axis"].attrs["value"]).reshape(-1)[0])
    ports = {f"c.{old}": f"c.{new}" for old, new in zip(values, inputs)}
    return Replacement({"c": NewOp("Concat", inputs=inputs, outputs=["concat_result"],
                                   attrs={"axis": axis})}, (), ports)


def reduce_const(m: Match) -> Replacement:
    """Mean / Max / Min / Prod with Const axes -> Reduce* (axes attribute at opset 17).
    No axes at all reduces nothing in TensorFlow: an Identity."""
    old = m["r"]
    axes = np.asarray(m["axes"].attrs["value"]).reshape(-1).astype(int).tolist()
    if not axes:
        return Replacement({"r": NewOp("Identity")})
    keep = int(bool(old.attrs.get("keep_dims", False)))
    return Replacement({"r": NewOp(_REDUCE[str(old.type)], attrs={"axes": axes, "keepdims": keep})})


def reduce_dynamic(m: Match) -> Skip:
    """A reduction whose axes are computed: ONNX 17's attribute cannot hold them."""
    return Skip("reduction_indices is not a Const (ONNX 17 wants it as an attribute)")


def reduce_sum(m: Match) -> Replacement:
    """Sum -> ReduceSum with int64 axes (reshaped to 1-D); empty axes reduce nothing, as in
    TensorFlow (noop_with_empty_axes)."""
    keep = int(bool(m["r"].attrs.get("keep_dims", False)))
    ops = {"flat_shape": _constant([-1], "int64"), "flat": NewOp("Reshape"),
           "cast": NewOp("Cast", attrs={"to": 7}),
           "r": NewOp("ReduceSum", attrs={"keepdims": keep, "noop_with_empty_axes": 1})}
    edges = ["flat_shape.output -> flat.shape", "flat.reshaped -> cast.input", "cast.output -> r.axes"]
    return Replacement(ops, edges, {"r.input": "r.data", "r.reduction_indices": "flat.data"})


def pad_const(m: Match) -> Replacement | Skip:
    """Pad / PadV2 / MirrorPad (REFLECT) with Const paddings -> Pad with int64 pads
    (TensorFlow's [[before, after], …] is ONNX's [befores…, afters…])."""
    old = m["p"]
    mode = "constant"
    if old.type == "MirrorPad":
        if old.attrs.get("mode") != "REFLECT":
            return Skip(f"MirrorPad mode {old.attrs.get('mode')!r} (ONNX reflects only)")
        mode = "reflect"
    pads = np.asarray(m["paddings"].attrs["value"]).astype(np.int64).T.reshape(-1)
    ops = {"pads": _constant(pads, "int64"),
           "p": NewOp("Pad", inputs=["data", "pads", "constant_value"], attrs={"mode": mode})}
    ports = {"p.input": "p.data"}
    if old.type == "PadV2":
        ports["p.constant_values"] = "p.constant_value"
    return Replacement(ops, ["pads.output -> p.pads"], ports)


def python_rules() -> MappingTable:
    """The Python half of the TensorFlow -> ONNX table (runs before the YAML half)."""
    rules = [
        Rule("conv2d", Pattern({"conv": "Conv2D"}), conv2d),
        Rule("depthwise_conv2d", Pattern({"conv": "DepthwiseConv2dNative"}), depthwise_conv2d),
        Rule("pool", Pattern({"pool": ("MaxPool", "AvgPool")}), pool),
        Rule("batch_norm", Pattern({"bn": ("FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3")}),
             batch_norm),
        Rule("bias_add_nchw", Pattern({"b": "BiasAdd"},
                                      where=lambda m: m["b"].attrs.get("data_format") == "NCHW"),
             bias_add_nchw),
        Rule("concat", Pattern({"axis": "Const", "c": "ConcatV2"}, ["axis.output -> c.axis"]), concat),
        Rule("reduce", Pattern({"axes": "Const", "r": tuple(_REDUCE)},
                               ["axes.output -> r.reduction_indices"]), reduce_const),
        Rule("reduce_dynamic", Pattern({"r": tuple(_REDUCE)}), reduce_dynamic),
        Rule("reduce_sum", Pattern({"r": "Sum"}), reduce_sum),
        Rule("pad", Pattern({"paddings": "Const", "p": ("Pad", "PadV2", "MirrorPad")},
                            ["paddings.output -> p.paddings"]), pad_const),
    ]
    from amanda.rewrite.mapping.tables.tensorflow_onnx_control import control_rules
    from amanda.rewrite.mapping.tables.tensorflow_onnx_more import more_rules

    return MappingTable(SOURCE, TARGET, rules + more_rules() + control_rules(), name="tensorflow_to_onnx")


def tensorflow_to_onnx() -> MappingTable:
    """The shipped TensorFlow -> ONNX 17 table: the Python rules, then the YAML ones."""
    from amanda.rewrite.mapping.yaml_rules import load_mapping

    return python_rules() + load_mapping(YAML_RULES)
