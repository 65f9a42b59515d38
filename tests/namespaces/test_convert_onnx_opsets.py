"""ONNX opset adapters: each rule maps between adjacent opsets (both ways, and across many steps)
and the converted model computes what the original computes (both run in onnxruntime)."""

from __future__ import annotations

import numpy as np
import pytest

from amanda.errors import MappingError
from amanda.namespaces.model_fit import validate
from amanda.rewrite.mapping import UnmatchedOpsError
from amanda.rewrite.mapping.convert import conversion_path, convert
from amanda.rewrite.mapping.tables.onnx_opsets import adapter, newest, opset_pairs

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper

from amanda.io.onnx import from_onnx, to_onnx

RUNNABLE = 26  # the newest opset onnxruntime 1.31 loads
RNG = np.random.default_rng(3)


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def model(opset, nodes, inputs, outputs, inits=None, ranked=True):
    """An ONNX model: ``inputs`` name -> array (fed at run time), ``outputs`` names, ``inits``
    name -> array initializers."""
    def info(name, array):
        shape = list(array.shape) if ranked else None
        return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(array.dtype), shape)

    graph = helper.make_graph(nodes, "g", [info(n, a) for n, a in inputs.items()],
                              [helper.make_empty_tensor_value_info(n) for n in outputs],
                              [numpy_helper.from_array(np.asarray(a), n) for n, a in (inits or {}).items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


def run(proto, feeds):
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds)))


def check(proto, feeds, target, expect_types=None):
    """Convert ``proto`` to opset ``target``; both run and agree; returns the converted proto."""
    source = from_onnx(proto)
    converted = convert(source, f"amanda/onnx/{target}")
    assert converted.namespace == f"amanda/onnx/{target}"
    assert [str(p) for p in validate(converted)] == []
    ranked = all(p.attrs.get("shape") is not None for p in (*converted.inputs, *converted.outputs))
    out = to_onnx(converted, check=ranked)  # the checker refuses graph ports of unknown rank
    assert {o.domain: o.version for o in out.opset_import}[""] == target
    if expect_types is not None:
        assert sorted(n.op_type for n in out.graph.node) == sorted(expect_types)
    want, got = run(proto, feeds), run(out, feeds)
    assert set(got) == set(want)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6)
    return out


node = helper.make_node


# --- the specific rules, both ways --------------------------------------------------------------

def test_dropout_ratio_attribute_and_input():
    """Dropout's ratio moves between attribute (11) and input (12) and back."""
    x = f32(2, 3)
    up = check(model(11, [node("Dropout", ["x"], ["y"], ratio=0.3)], {"x": x}, ["y"]), {"x": x}, 12,
               ["Constant", "Dropout"])
    assert len(up.graph.node[-1].input) == 2
    down = model(12, [node("Dropout", ["x", "r"], ["y"])], {"x": x}, ["y"], {"r": np.float32(0.2)})
    out = check(down, {"x": x}, 11)
    assert helper.get_attribute_value(out.graph.node[0].attribute[0]) == pytest.approx(0.2)


@pytest.mark.parametrize("keep", [0, 1])
def test_reduce_sum_axes_attribute_and_input(keep):
    """ReduceSum's axes move between attribute (12) and input (13), keepdims kept."""
    x = f32(2, 3, 4)
    check(model(12, [node("ReduceSum", ["x"], ["y"], axes=[1, -1], keepdims=keep)], {"x": x}, ["y"]), {"x": x}, 13)
    check(model(13, [node("ReduceSum", ["x", "a"], ["y"], keepdims=keep)], {"x": x}, ["y"],
                {"a": np.array([0, 2], np.int64)}), {"x": x}, 12, ["ReduceSum"])
    check(model(12, [node("ReduceSum", ["x"], ["y"], keepdims=keep)], {"x": x}, ["y"]), {"x": x}, 13)


def test_reduce_sum_noop_with_empty_axes_becomes_identity():
    """ReduceSum-13 with noop_with_empty_axes and no axes is an Identity at 12."""
    x = f32(2, 3)
    check(model(13, [node("ReduceSum", ["x"], ["y"], noop_with_empty_axes=1)], {"x": x}, ["y"]), {"x": x}, 12,
          ["Identity"])


@pytest.mark.parametrize("op_type,shape,axes", [("Squeeze", (1, 3, 1, 2), [0, 2]), ("Squeeze", (1, 3, 1), None),
                                                ("Unsqueeze", (3, 2), [0, -1])])
def test_squeeze_unsqueeze_axes(op_type, shape, axes):
    """Squeeze/Unsqueeze axes move between attribute (12) and input (13), both ways."""
    x = f32(*shape)
    kwargs = {"axes": axes} if axes is not None else {}
    check(model(12, [node(op_type, ["x"], ["y"], **kwargs)], {"x": x}, ["y"]), {"x": x}, 13)
    inputs = ["x", "a"] if axes is not None else ["x"]
    inits = {"a": np.array(axes, np.int64)} if axes is not None else {}
    check(model(13, [node(op_type, inputs, ["y"])], {"x": x}, ["y"], inits), {"x": x}, 12, [op_type])


def test_split_attribute_input_and_num_outputs():
    """Split's split moves attribute (12) <-> input (13); num_outputs (18) is dropped going to 17."""
    x = f32(2, 6)
    check(model(12, [node("Split", ["x"], ["a", "b"], axis=1, split=[2, 4])], {"x": x}, ["a", "b"]), {"x": x}, 13)
    check(model(13, [node("Split", ["x", "s"], ["a", "b"], axis=1)], {"x": x}, ["a", "b"], {"s": np.array([5, 1], np.int64)}),
          {"x": x}, 12, ["Split"])
    check(model(13, [node("Split", ["x"], ["a", "b", "c"], axis=1)], {"x": x}, ["a", "b", "c"]), {"x": x}, 12)
    check(model(18, [node("Split", ["x"], ["a", "b"], axis=1, num_outputs=2)], {"x": x}, ["a", "b"]), {"x": x}, 17)


@pytest.mark.parametrize("op_type", ["Softmax", "LogSoftmax", "Hardmax"])
@pytest.mark.parametrize("axis", [None, 0, 1, -1, 2])
def test_softmax_family_axis_semantics_up(op_type, axis):
    """Before 13 the input is coerced to 2-D at axis (default 1); at 13 the same numbers come out."""
    x = f32(2, 3, 4)
    kwargs = {} if axis is None else {"axis": axis}
    check(model(12, [node(op_type, ["x"], ["y"], **kwargs)], {"x": x}, ["y"], ranked=False), {"x": x}, 13)


@pytest.mark.parametrize("op_type", ["Softmax", "LogSoftmax", "Hardmax"])
@pytest.mark.parametrize("axis", [None, 0, 1, -1, -2])
def test_softmax_family_axis_semantics_down(op_type, axis):
    """At 13 axis (default -1) names one axis; at 12 the same numbers come out (rank known)."""
    x = f32(2, 3, 4)
    kwargs = {} if axis is None else {"axis": axis}
    check(model(13, [node(op_type, ["x"], ["y"], **kwargs)], {"x": x}, ["y"]), {"x": x}, 12)


def test_softmax_down_needs_the_rank_for_an_inner_axis():
    """Softmax-13 over a middle axis of unknown rank cannot go to 12; the error says why."""
    x = f32(2, 3, 4)
    proto = model(13, [node("Softmax", ["x"], ["y"], axis=1)], {"x": x}, ["y"], ranked=False)
    with pytest.raises(UnmatchedOpsError, match="rank is unknown"):
        convert(from_onnx(proto), "amanda/onnx/12")


def test_resize_roi_and_scales():
    """Resize with sizes only at 13 gets empty roi/scales at 12; Resize-11 relabels up."""
    x = f32(1, 1, 2, 3)
    sizes = np.array([1, 1, 4, 5], np.int64)
    check(model(13, [node("Resize", ["x", "", "", "s"], ["y"], mode="nearest")], {"x": x}, ["y"], {"s": sizes}),
          {"x": x}, 12)
    scales = np.array([1, 1, 2, 2], np.float32)
    check(model(11, [node("Resize", ["x", "roi", "sc"], ["y"], mode="linear")], {"x": x}, ["y"],
                {"roi": np.zeros(0, np.float32), "sc": scales}), {"x": x}, 13)


REDUCE_18 = ["ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum",
             "ReduceLogSumExp", "ReduceSumSquare"]


@pytest.mark.parametrize("op_type", REDUCE_18)
def test_reductions_axes_at_18(op_type):
    """The other reductions' axes move between attribute (17) and input (18), both ways."""
    x = np.abs(f32(2, 3, 4)) + 0.5
    check(model(17, [node(op_type, ["x"], ["y"], axes=[1], keepdims=0)], {"x": x}, ["y"]), {"x": x}, 18)
    check(model(18, [node(op_type, ["x", "a"], ["y"], keepdims=1)], {"x": x}, ["y"], {"a": np.array([0, 2], np.int64)}),
          {"x": x}, 17, [op_type])


# --- the generic rule ----------------------------------------------------------------------------

def mixed(opset):
    """A model of ops whose signatures did not change (or changed compatibly) from 11 on."""
    x = f32(1, 2, 5, 5)
    nodes = [
        node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        node("BatchNormalization", ["c", "s", "o", "m", "v"], ["bn"], epsilon=1e-3),
        node("Relu", ["bn"], ["r"]),
        node("Clip", ["r", "lo", "hi"], ["cl"]),
        node("MaxPool", ["cl"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        node("Pad", ["p", "pads"], ["pd"], mode="constant"),
        node("Slice", ["pd", "st", "en"], ["sl"]),
        node("Shape", ["sl"], ["sh"]),
        node("Reshape", ["sl", "rs"], ["flat"]),
        node("Gemm", ["flat", "gw"], ["g"], transB=1),
        node("Softmax", ["g"], ["out"], axis=-1),
        node("Cast", ["sh"], ["shape_f"], to=TensorProto.FLOAT),
    ]
    inits = {"w": f32(3, 2, 3, 3), "b": f32(3), "s": f32(3), "o": f32(3), "m": f32(3), "v": np.abs(f32(3)) + 1,
             "lo": np.float32(0), "hi": np.float32(2), "pads": np.array([0, 0, 1, 0, 0, 0, 0, 1], np.int64),
             "st": np.array([0, 1], np.int64), "en": np.array([1, 3], np.int64), "rs": np.array([1, -1], np.int64),
             "gw": f32(4, 18)}
    return model(opset, nodes, {"x": x}, ["out", "shape_f"], inits), {"x": x}


@pytest.mark.parametrize("target", [12, 13, 14, 16, 18, 19, 21, RUNNABLE])
def test_mixed_model_from_11_up(target):
    """A model of common ops at opset 11 converts to newer opsets and computes the same numbers."""
    proto, feeds = mixed(11)
    check(proto, feeds, target)


@pytest.mark.parametrize("source", [13, 18, RUNNABLE])
def test_mixed_model_down_to_11(source):
    """The same model written at a newer opset converts down to 11 and computes the same numbers."""
    proto, feeds = mixed(source)
    check(proto, feeds, 11)


def test_round_trip_11_to_newest_runnable_and_back():
    """11 -> 26 -> 11 through every adapter leaves the numbers unchanged."""
    proto, feeds = mixed(11)
    source = from_onnx(proto)
    there = convert(source, f"amanda/onnx/{RUNNABLE}")
    back = convert(there, "amanda/onnx/11")
    want = run(proto, feeds)
    for converted in (there, back):
        got = run(to_onnx(converted), feeds)
        for name in want:
            np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6)


def test_newest_opsets_validate():
    """Conversion reaches the newest opsets onnxruntime cannot load yet; the result validates."""
    proto, _ = mixed(11)
    top = convert(from_onnx(proto), "amanda/onnx")
    assert top.namespace == f"amanda/onnx/{newest()}"
    assert validate(top) == []


def test_generic_rule_makes_changed_defaults_explicit_and_drops_defaults():
    """A default that changed is written out; an attribute the older opset lacks goes when at its default."""
    x = f32(2, 3)
    out = check(model(13, [node("Reshape", ["x", "s"], ["y"])], {"x": x}, ["y"], {"s": np.array([3, 2], np.int64)}), {"x": x}, 14)
    back = check(model(14, [node("Reshape", ["x", "s"], ["y"], allowzero=0)], {"x": x}, ["y"],
                       {"s": np.array([3, 2], np.int64)}), {"x": x}, 13)
    assert not back.graph.node[0].attribute and out.graph.node[0].op_type == "Reshape"


@pytest.mark.parametrize("proto,target,reason", [
    (lambda: model(14, [node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], training_mode=1)],
                   {"x": f32(2, 3)}, ["y"], {k: f32(3) for k in "sbmv"}), 13, "training_mode"),
    (lambda: model(19, [node("Pad", ["x", "p"], ["y"], mode="wrap")], {"x": f32(2, 3)}, ["y"],
                   {"p": np.array([0, 1, 0, 1], np.int64)}), 18, "wrap"),
    (lambda: model(18, [node("Pad", ["x", "p", "", "a"], ["y"])], {"x": f32(2, 3)}, ["y"],
                   {"p": np.array([1, 1], np.int64), "a": np.array([1], np.int64)}), 17, "axes"),
    (lambda: model(11, [node("Resize", ["x", "roi", "sc"], ["y"], coordinate_transformation_mode="tf_half_pixel_for_nn")],
                   {"x": f32(1, 1, 2, 2)}, ["y"], {"roi": np.zeros(0, np.float32), "sc": np.ones(4, np.float32)}),
     13, "tf_half_pixel_for_nn"),
    (lambda: model(12, [node("Dropout", ["x", "", "t"], ["y"])], {"x": f32(2, 3), "t": np.array(False)}, ["y"]),
     11, "training_mode"),
    (lambda: model(13, [node("ReduceSum", ["x", "a"], ["y"])], {"x": f32(2, 3), "a": np.array([1], np.int64)}, ["y"]),
     12, "computed at run time"),
])
def test_incompatible_ops_are_reported_not_guessed(proto, target, reason):
    """An op that has no equivalent in the target opset is an unmatched op, with the reason."""
    with pytest.raises(UnmatchedOpsError, match=reason):
        convert(from_onnx(proto()), f"amanda/onnx/{target}")


def test_adapters_cover_every_adjacent_pair_and_paths_are_shortest():
    """Adapters join every opset pair from 1 to the newest; a path uses one adapter per step."""
    assert opset_pairs()[0] == (1, 2) and opset_pairs()[-1] == (newest() - 1, newest())
    assert [e.name for e in conversion_path("amanda/onnx/11", "amanda/onnx/14")] == \
        ["onnx 11 -> 12", "onnx 12 -> 13", "onnx 13 -> 14"]
    assert adapter(13, 12).target == "amanda/onnx/12"
    with pytest.raises(ValueError):
        adapter(11, 13)
    with pytest.raises(MappingError, match="chain of mapping tables"):
        conversion_path("amanda/onnx/9", "amanda/onnx-ml/3")
