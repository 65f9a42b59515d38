"""ONNX models of opset 11 convert down to opsets 1 to 10 where those can express them (and
compute the same numbers), what they cannot express is refused with the op's path and the
reason, and every schema change from 1 to 11 is covered by a rule."""

from __future__ import annotations

import numpy as np
import pytest

from amanda.errors import MappingError
from amanda.rewrite.mapping import UnmatchedOpsError
from amanda.rewrite.mapping.convert import convert

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper

from amanda.io.onnx import from_onnx, to_onnx
from tests.namespaces.test_onnx_old_opsets import close, f32, model, node, onnxruntime

# --- down from 11 -----------------------------------------------------------------------------------

def model_11(resize=True):
    """An opset-11 model of the ops whose signature changed below 11, each in a form older
    opsets can express (constant inputs, asymmetric Resize, shapes known)."""
    x, x4 = f32(4, 6), f32(1, 3, 2, 3)
    nodes = [node("Gemm", ["x", "w", "b"], ["g"]), node("Relu", ["g"], ["r"]), node("Add", ["r", "b"], ["a"]),
             node("Clip", ["a", "lo", "hi"], ["c"]), node("Pad", ["c", "pads", "pv"], ["p"]),
             node("Slice", ["p", "st", "en", "ax"], ["s"]), node("TopK", ["s", "k"], ["tv", "ti"]),
             node("Reshape", ["tv", "shape"], ["rs"]), node("Cast", ["rs"], ["cs"], to=TensorProto.DOUBLE),
             node("Tile", ["x", "rep"], ["t"]), node("Concat", ["t", "x"], ["cat"], axis=1),
             node("Split", ["cat"], ["s0", "s1"], axis=1, split=[4, 14]), node("Softmax", ["s1"], ["sm"]),
             node("BatchNormalization", ["x4", "bs", "bo", "bm", "bv"], ["bn"])]
    inits = {"w": f32(6, 3), "b": f32(3), "lo": np.float32(-0.5), "hi": np.float32(30.0),
             "pads": np.array([1, 0, 0, 2], np.int64), "pv": np.float32(0.25), "st": np.array([1], np.int64),
             "en": np.array([4], np.int64), "ax": np.array([0], np.int64), "k": np.array([2], np.int64),
             "shape": np.array([-1], np.int64), "rep": np.array([1, 2], np.int64), "bs": f32(3), "bo": f32(3),
             "bm": f32(3), "bv": np.abs(f32(3)) + 1}
    outs = ["cs", "ti", "s0", "sm", "bn"]
    if resize:
        nodes.append(node("Resize", ["bn", "roi", "sc"], ["u"], coordinate_transformation_mode="asymmetric",
                          nearest_mode="floor"))
        inits.update(roi=np.zeros(0, np.float32), sc=np.array([1, 1, 2, 2], np.float32))
        outs.append("u")
    proto = model(11, nodes, {"x": x, "x4": x4}, outs, inits)
    # shape inference gives the shapes legacy broadcasting needs going down
    return onnx.shape_inference.infer_shapes(proto), {"x": x, "x4": x4}


@pytest.mark.parametrize("target", [10, 9, 8, 7])
def test_down_from_11_runs_in_onnxruntime(target):
    """The opset-11 model converted down to 10 … 7 computes the same numbers in onnxruntime."""
    proto, feeds = model_11()
    down = to_onnx(convert(from_onnx(proto), f"amanda/onnx/{target}"))
    assert {o.domain: o.version for o in down.opset_import}[""] == target
    close(onnxruntime(down, feeds), onnxruntime(proto, feeds))


@pytest.mark.parametrize("target", [6, 5, 2, 1])
def test_down_from_11_below_7(target):
    """Below 7 (no onnxruntime kernels): the model passes onnx's checker and shape inference,
    onnx.reference computes the original's numbers where it has the ops (6), and converting it
    back up to 11 computes them too."""
    from onnx.reference import ReferenceEvaluator

    proto, feeds = model_11(resize=target >= 6)
    want = onnxruntime(proto, feeds)
    down = convert(from_onnx(proto), f"amanda/onnx/{target}")
    exported = to_onnx(down)  # runs onnx's checker and strict shape inference
    assert {o.domain: o.version for o in exported.opset_import}[""] == target
    if target == 6:  # onnx.reference has no Upsample-1: check the rest
        trimmed = onnx.ModelProto()
        trimmed.CopyFrom(proto)
        trimmed.graph.node.pop()
        trimmed.graph.output.pop()
        without_upsample = to_onnx(convert(from_onnx(trimmed), "amanda/onnx/6"))
        close(ReferenceEvaluator(without_upsample).run(None, feeds), want[:-1])
    back = convert(from_onnx(exported), "amanda/onnx/11")
    close(onnxruntime(to_onnx(back), feeds), want)


def test_is_test_and_broadcast_come_back_going_down():
    """Dropout and BatchNormalization get is_test=1, Gemm broadcast=1, and an Upsample-7 its
    height and width scales going down to opset 1."""
    x = f32(1, 3, 2, 2)
    nodes = [node("BatchNormalization", ["x", "s", "b", "m", "v"], ["bn"]), node("Dropout", ["bn"], ["d"]),
             node("Upsample", ["d"], ["u"], scales=[1.0, 1.0, 2.0, 3.0], mode="linear"),
             node("Flatten", ["u"], ["f"]), node("Gemm", ["f", "w", "c"], ["y"])]
    inits = {"s": f32(3), "b": f32(3), "m": f32(3), "v": np.abs(f32(3)) + 1, "w": f32(72, 2), "c": f32(2)}
    proto = onnx.shape_inference.infer_shapes(model(7, nodes, {"x": x}, ["y"], inits))
    down = to_onnx(convert(from_onnx(proto), "amanda/onnx/1"))
    attrs = {n.op_type: {a.name: helper.get_attribute_value(a) for a in n.attribute} for n in down.graph.node}
    assert attrs["BatchNormalization"]["is_test"] == 1 and attrs["BatchNormalization"]["consumed_inputs"] == [0] * 5
    assert attrs["Dropout"]["is_test"] == 1 and attrs["Gemm"]["broadcast"] == 1
    assert attrs["Upsample"] == {"height_scale": 2.0, "width_scale": 3.0, "mode": b"bilinear"}
    close(onnxruntime(to_onnx(convert(from_onnx(down), "amanda/onnx/11")), {"x": x}), onnxruntime(proto, {"x": x}))


# --- refusals ---------------------------------------------------------------------------------------

REFUSED = [
    (lambda: model(8, [node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y", "mo", "vo"], spatial=0)],
                   {"x": f32(2, 3)}, ["y"], {k: f32(3) for k in "sbmv"}), 11, "BatchNormalization.*training mode"),
    (lambda: _unranked_add(), 11, "Add.*ranks"),
    (lambda: model(6, [node("Dropout", ["x"], ["y"], is_test=0)], {"x": f32(2, 3)}, ["y"]), 7,
     "Dropout.*is_test=0 .random dropping"),
    (lambda: model(6, [node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], is_test=0)], {"x": f32(2, 3)},
                   ["y"], {k: f32(3) for k in "sbmv"}), 7, "BatchNormalization.*batch's statistics"),
    (lambda: model(10, [node("Resize", ["x", "s"], ["y"], mode="nearest")], {"x": f32(1, 1, 4, 4)}, ["y"],
                   {"s": np.array([1, 1, 2, 0.5], np.float32)}), 11, "Resize.*all >= 1 or all <= 1"),
    (lambda: model(11, [node("Resize", ["x", "r", "s"], ["y"], mode="linear")], {"x": f32(1, 1, 4, 4)}, ["y"],
                   {"r": np.zeros(0, np.float32), "s": np.array([1, 1, 2, 2], np.float32)}), 10, "asymmetric"),
    (lambda: model(11, [node("Slice", ["x", "a", "b", "c", "d"], ["y"])], {"x": f32(6)}, ["y"],
                   {"a": np.array([0]), "b": np.array([6]), "c": np.array([0]), "d": np.array([2])}), 9,
     "Slice.*steps other than 1"),
    (lambda: model(11, [node("Slice", ["x", "a", "e"], ["y"])], {"x": f32(6), "e": np.array([4])}, ["y"],
                   {"a": np.array([0])}), 9, "'ends' input is computed at run time"),
    (lambda: model(11, [node("Tile", ["x", "r"], ["y"])], {"x": f32(2, 3)}, ["y"], {"r": np.array([2, 2])}), 5,
     "Tile.*more than one axis"),
    (lambda: model(11, [node("Add", ["x", "y"], ["z"])], {"x": f32(2, 1), "y": f32(1, 3)}, ["z"]), 6,
     "cannot express"),
    (lambda: model(11, [node("Max", ["x", "y"], ["z"])], {"x": f32(2, 3), "y": f32(3)}, ["z"]), 7, "must be equal"),
    (lambda: model(8, [node("Scan", ["", "x"], ["y"], num_scan_inputs=1, body=_scan_body())], {"x": f32(1, 3, 2)},
                   ["y"]), 9, "Scan.*batch axis"),
]


def _scan_body():
    """A Scan body that passes each slice through."""
    return helper.make_graph([node("Identity", ["xi"], ["yi"])], "body",
                             [helper.make_tensor_value_info("xi", TensorProto.FLOAT, [2])],
                             [helper.make_tensor_value_info("yi", TensorProto.FLOAT, [2])])


def _unranked_add():
    """An Add-1 broadcasting from an axis whose inputs have no declared shape."""
    graph = helper.make_graph([node("Add", ["x", "b"], ["y"], broadcast=1, axis=1)], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("b", TensorProto.FLOAT, None)],
                              [helper.make_empty_tensor_value_info("y")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 1)], ir_version=4)


@pytest.mark.parametrize("proto,target,reason", REFUSED)
def test_what_has_no_equivalent_is_refused_with_the_reason(proto, target, reason):
    """An op with no equivalent in the target opset is a MappingError naming its path and why."""
    with pytest.raises(UnmatchedOpsError, match=f"(?s){reason}"):
        convert(from_onnx(proto()), f"amanda/onnx/{target}")


def test_lp_pool_p_round_trips_as_float():
    """LpPool's integer p of opset 11 is a float at opset 1 and an int again back at 11."""
    lp_pool = node("LpPool", ["x"], ["y"], kernel_shape=[2], p=3)
    proto = onnx.shape_inference.infer_shapes(model(11, [lp_pool], {"x": f32(1, 1, 4)}, ["y"]))
    down = to_onnx(convert(from_onnx(proto), "amanda/onnx/1"))
    assert {a.name: helper.get_attribute_value(a) for a in down.graph.node[0].attribute}["p"] == 3.0
    back = convert(from_onnx(down), "amanda/onnx/11")
    assert [op.attrs["p"] for op in back] == [3]


# --- the survey -------------------------------------------------------------------------------------

#: (opset, op type) whose schema changed at that opset and that the generic rule relabels, with
#: why that is right (written from onnx's schema history and op docs, not from amanda's tables)
GENERIC = {
    **{(6, t): "consumed_inputs dropped" for t in (
        "Abs", "Add", "Ceil", "Clip", "Div", "Dropout", "Elu", "Exp", "Floor", "HardSigmoid",
        "InstanceNormalization", "LeakyRelu", "Log", "Max", "Mean", "Min", "Mul", "Neg", "PRelu",
        "Reciprocal", "Relu", "Selu", "Sigmoid", "Sqrt", "Sub", "Sum", "Tanh")},
    (6, "Gemm"): "doc only", (7, "AveragePool"): "count_include_pad added, default as before",
    (7, "PRelu"): "slope broadcasts (a superset)",
    (8, "MaxPool"): "storage_order and Indices added", (10, "AveragePool"): "ceil_mode added",
    (10, "MaxPool"): "ceil_mode and dilations added", (10, "Dropout"): "mask type",
    (11, "DepthToSpace"): "mode added, DCR as before", (11, "TopK"): "largest and sorted added, as before",
    (11, "Constant"): "sparse_value added",
    **{(9, t): "types added" for t in ("Cast", "Constant", "Flatten", "Gemm", "Greater", "Less", "MatMul", "PRelu")},
    (11, "Equal"): "types added",
    **{(11, t): "negative axes or indices allowed" for t in (
        "ArgMax", "ArgMin", "AveragePool", "Compress", "Concat", "Conv", "ConvTranspose", "Flatten", "Gather",
        "Hardmax", "If", "LogSoftmax", "Loop", "LpPool", "MaxPool", "MaxUnpool", "NonMaxSuppression", "OneHot",
        "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean", "ReduceMin",
        "ReduceProd", "ReduceSum", "ReduceSumSquare", "Scan", "Slice", "Softmax", "Split", "Squeeze", "Unsqueeze")},
}
#: (opset, op type) a specific rule handles
SPECIFIC = {
    (2, "GlobalLpPool"), (2, "LpPool"), (2, "Pad"), (2, "Split"), (3, "GRU"), (4, "Concat"), (5, "Reshape"),
    (6, "BatchNormalization"), (6, "Cast"), (6, "Tile"), (7, "BatchNormalization"), (7, "Dropout"), (7, "Gemm"),
    (7, "Upsample"), (7, "RNN"), (7, "GRU"), (7, "LSTM"), (8, "Max"), (8, "Min"), (8, "Sum"), (8, "Mean"), (9, "BatchNormalization"), (9, "Upsample"),
    (9, "Scan"), (10, "Slice"), (10, "TopK"), (10, "Upsample"), (11, "Clip"), (11, "Pad"), (11, "Resize"),
    (11, "Scatter"), (11, "Gemm"),
    *((7, t) for t in ("Add", "Sub", "Mul", "Div", "Pow", "And", "Or", "Xor", "Equal", "Greater", "Less")),
}


def test_every_schema_change_from_1_to_11_is_covered():
    """Every op whose schema changed between opsets 1 and 11 (onnx's schema history) has a
    specific rule for that step or is one the generic rule relabels for a stated reason."""
    from amanda.rewrite.mapping.tables.onnx_opsets import changed_types

    history: dict[str, set[int]] = {}
    for schema in onnx.defs.get_all_schemas_with_history():
        if schema.domain == "":
            history.setdefault(schema.name, set()).add(schema.since_version)
    changed = {(v, t) for t, versions in history.items() for v in versions if 2 <= v <= 11 and min(versions) < v}
    assert changed == set(GENERIC) | SPECIFIC
    for version, op_type in SPECIFIC:
        assert op_type in changed_types(version), (version, op_type)
    for version, op_type in GENERIC:
        assert op_type not in changed_types(version) or op_type in ("Gemm", "Dropout"), (version, op_type)


def test_constants_shared_between_ops_going_down():
    """Slices and Clips sharing their constant inputs all become attribute forms and compute the
    same numbers; a Constant only one op read goes with it."""
    x = f32(6, 5)
    nodes = [node("Slice", ["x", "st", "en"], ["a"]), node("Slice", ["x", "st", "en2"], ["b"]),
             node("Clip", ["x", "lo", "hi"], ["c"]), node("Clip", ["x", "lo"], ["d"])]
    inits = {"st": np.array([1]), "en": np.array([4]), "en2": np.array([5]), "lo": np.float32(0), "hi": np.float32(1)}
    proto = onnx.shape_inference.infer_shapes(model(11, nodes, {"x": x}, ["a", "b", "c", "d"], inits))
    down = convert(from_onnx(proto), "amanda/onnx/9")
    assert {op.name for op in down if op.type == "Constant"}.isdisjoint({"en", "hi"})
    assert all(not op.inputs or op.input_names == ("data",) or op.input_names == ("input",) for op in down)
    close(onnxruntime(to_onnx(down), {"x": x}), onnxruntime(proto, {"x": x}))


def test_rnn_output_sequence_comes_back_when_y_is_read():
    """A GRU-7 whose Y is read gets output_sequence=1 at opset 6 (before 7 Y is given only then)."""
    x, w, r = f32(4, 2, 3), f32(1, 15, 3), f32(1, 15, 5)
    proto = model(7, [node("GRU", ["x", "w", "r"], ["y", "h"], hidden_size=5)], {"x": x}, ["y", "h"], {"w": w, "r": r})
    down = convert(from_onnx(proto), "amanda/onnx/6")
    (gru,) = [op for op in down if op.type == "GRU"]
    assert gru.attrs["output_sequence"] == 1
    back = convert(down, "amanda/onnx/11")
    close(onnxruntime(to_onnx(back), {"x": x}), onnxruntime(proto, {"x": x}))


def test_negative_axes_count_from_the_front_below_11():
    """Negative axes (allowed from 11) become the same axes counted from the front at 10, with
    the same numbers; without a known rank the op is refused."""
    x = f32(2, 3, 4)
    nodes = [node("Concat", ["x", "x"], ["c"], axis=-1), node("Flatten", ["x"], ["f"], axis=-1),
             node("ReduceSum", ["x"], ["r"], axes=[-1, 0]), node("Unsqueeze", ["x"], ["u"], axes=[-1]),
             node("Softmax", ["x"], ["s"], axis=-1), node("Gather", ["x", "i"], ["g"], axis=-2),
             node("Split", ["x"], ["s0", "s1"], axis=-1), node("ArgMax", ["x"], ["a"], axis=-1)]
    proto = onnx.shape_inference.infer_shapes(
        model(11, nodes, {"x": x}, ["c", "f", "r", "u", "s", "g", "s0", "s1", "a"], {"i": np.array([2, 0])}))
    down = to_onnx(convert(from_onnx(proto), "amanda/onnx/10"))
    for n in down.graph.node:
        for a in n.attribute:
            if a.name in ("axis", "axes"):
                assert np.all(np.asarray(helper.get_attribute_value(a)) >= 0), (n.op_type, a)
    attrs = {n.op_type: {a.name: helper.get_attribute_value(a) for a in n.attribute} for n in down.graph.node}
    assert attrs["Unsqueeze"]["axes"] == [3] and attrs["Flatten"]["axis"] == 2 and attrs["ReduceSum"]["axes"] == [2, 0]
    close(onnxruntime(down, {"x": x}), onnxruntime(proto, {"x": x}))
    unranked = model(11, [node("Concat", ["x", "x"], ["c"], axis=-1)], {"x": x}, ["c"])
    unranked.graph.input[0].type.tensor_type.ClearField("shape")
    with pytest.raises(UnmatchedOpsError, match="(?s)Concat.*rank is unknown"):
        convert(from_onnx(unranked), "amanda/onnx/10")


@pytest.mark.parametrize("opset,op", [
    (1, node("Upsample", ["x"], ["y"], height_scale=2.0)),            # width_scale missing
    (1, node("Cast", ["x"], ["y"], to="NOT_A_TYPE")),
    (1, node("Tile", ["x", "x", "x"], ["y"])),                         # tiles and axis computed
    (1, node("Split", ["x", "x"], ["y", "z"])),                        # split computed
    (6, node("Add", ["x", "x"], ["y"], broadcast=1, axis=6)),          # axis past A's rank
    (1, node("GlobalLpPool", ["x"], ["y"], p=2.5)),
])
def test_malformed_old_ops_raise_mapping_errors(opset, op):
    """A malformed or inexpressible old op is a MappingError naming it, never a crash."""
    proto = model(opset, [op], {"x": f32(2, 3)}, list(op.output))
    with pytest.raises(MappingError, match=str(op.op_type)):
        convert(from_onnx(proto), "amanda/onnx/11")
