"""ONNX models of opsets 1 to 10 convert to 11 and on to the newest opset, and compute what the
original computes: onnxruntime runs the original where it has kernels for its opset (7 on), a
numpy oracle written here stands in below that; amanda's Session runs the converted model."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import amanda
from amanda.namespaces.model_fit import validate
from amanda.rewrite.mapping import UnmatchedOpsError
from amanda.rewrite.mapping.convert import convert

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import helper, numpy_helper

from amanda.io.onnx import from_onnx, to_onnx

RUNNABLE = 26  # the newest opset onnxruntime loads
RNG = np.random.default_rng(11)
node = helper.make_node


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def model(opset, nodes, inputs, outputs, inits=None):
    """An ONNX model of ``opset``: ``inputs`` name -> array fed at run time, ``inits`` initializers."""
    def info(name, array):
        return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(array.dtype), list(array.shape))

    graph = helper.make_graph(nodes, "g", [info(n, a) for n, a in inputs.items()],
                              [helper.make_empty_tensor_value_info(n) for n in outputs],
                              [numpy_helper.from_array(np.asarray(a), n) for n, a in (inits or {}).items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=4)


def onnxruntime(proto, feeds):
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run([o.name for o in proto.graph.output], feeds)


def session(container, names, feeds):
    with amanda.Session(container, threads=1) as s:
        return s.run(list(names), feeds)


def close(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert np.asarray(g).shape == np.asarray(w).shape
        np.testing.assert_allclose(np.asarray(g, dtype=np.float64), np.asarray(w, dtype=np.float64),
                                   rtol=1e-5, atol=1e-5)


def up(proto, feeds, want=None, targets=(11, RUNNABLE)):
    """Convert ``proto`` to each target; the result validates and computes ``want`` (default:
    onnxruntime's outputs for ``proto``) in amanda's Session and, exported, in onnxruntime."""
    want = onnxruntime(proto, feeds) if want is None else want
    names = [o.name for o in proto.graph.output]
    source = from_onnx(proto)
    results = []
    for target in targets:
        converted = convert(source, f"amanda/onnx/{target}")
        assert converted.namespace == f"amanda/onnx/{target}"
        assert [str(p) for p in validate(converted)] == []
        close(session(converted, names, feeds), want)
        exported = to_onnx(converted)
        assert {o.domain: o.version for o in exported.opset_import}[""] == target
        close(onnxruntime(exported, feeds), want)
        results.append(converted)
    return results


# --- opsets 1 to 6: numpy oracles -------------------------------------------------------------------

BINARY = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide, "Pow": np.power,
          "Greater": np.greater, "Less": np.less}


@pytest.mark.parametrize("op_type", sorted(BINARY))
@pytest.mark.parametrize("opset", [1, 6])
@pytest.mark.parametrize("b_shape,axis", [((3, 4), 1), ((2, 3), 0), ((5,), None), ((4, 5), None), ((3, 4, 5), -3)])
def test_legacy_broadcast_becomes_numpy_broadcast(op_type, opset, b_shape, axis):
    """Binary ops with broadcast=1 (and axis) compute at 11 what legacy broadcasting means."""
    a, b = np.abs(f32(2, 3, 4, 5)) + 0.5, np.abs(f32(*b_shape)) + 0.5
    kwargs = {"broadcast": 1} if axis is None else {"broadcast": 1, "axis": axis}
    start = (axis % 4) if axis is not None else 4 - len(b_shape)
    aligned = b.reshape(b.shape + (1,) * (4 - start - len(b_shape)))
    proto = model(opset, [node(op_type, ["a", "b"], ["y"], **kwargs)], {"a": a}, ["y"], {"b": b})
    up(proto, {"a": a}, [BINARY[op_type](a, aligned)])


def test_logical_ops_broadcast_from_axis():
    """And/Or/Xor/Equal with an axis broadcast B along A's middle axes."""
    a, b = RNG.random((2, 3, 4)) > 0.5, RNG.random((3,)) > 0.5
    nodes = [node("And", ["a", "b"], ["x"], broadcast=1, axis=1), node("Or", ["a", "b"], ["o"], broadcast=1, axis=1),
             node("Xor", ["a", "b"], ["z"], broadcast=1, axis=1)]
    ai, bi = RNG.integers(0, 3, (2, 3, 4)).astype(np.int32), RNG.integers(0, 3, (3,)).astype(np.int32)
    nodes.append(node("Equal", ["ai", "bi"], ["e"], broadcast=1, axis=1))
    proto = model(1, nodes, {"a": a, "ai": ai}, ["x", "o", "z", "e"], {"b": b, "bi": bi})
    bb, bbi = b[:, None], bi[:, None]
    up(proto, {"a": a, "ai": ai}, [a & bb, a | bb, a ^ bb, ai == bbi])


def mlp(opset):
    """An MLP as opset-1 exporters wrote it: Gemm with broadcast, consumed_inputs everywhere."""
    x = f32(4, 6)
    w1, b1, w2, b2 = f32(6, 8), f32(8), f32(8, 3), f32(3)
    one, two = ({"consumed_inputs": [0]}, {"consumed_inputs": [0, 0]}) if opset < 6 else ({}, {})
    nodes = [node("Gemm", ["x", "w1", "b1"], ["h"], broadcast=1),
             node("Relu", ["h"], ["r"], **one),
             node("Gemm", ["r", "w2", "b2"], ["g"], broadcast=1, alpha=0.5),
             node("Sigmoid", ["g"], ["s"], **one),
             node("Add", ["s", "b2"], ["y"], broadcast=1, **two),
             node("Softmax", ["y"], ["out"])]
    r = np.maximum(x @ w1 + b1, 0)
    s = 1 / (1 + np.exp(-(0.5 * (r @ w2) + b2)))
    y = s + b2
    e = np.exp(y - y.max(axis=1, keepdims=True))
    return model(opset, nodes, {"x": x}, ["out"], {"w1": w1, "b1": b1, "w2": w2, "b2": b2}), {"x": x}, [e / e.sum(1, keepdims=True)]


@pytest.mark.parametrize("opset", [1, 3, 5, 6])
def test_mlp_of_opsets_1_to_6(opset):
    """An MLP with Gemm broadcast and consumed_inputs converts to 11 and to the newest opset."""
    proto, feeds, want = mlp(opset)
    up(proto, feeds, want)


def test_reshape_cast_tile_concat_split_of_opset_1():
    """Reshape's shape attribute, Cast to a type name, Tile-1, Concat's default axis and Split-1's
    split input all mean at 11 what they meant at 1."""
    x = f32(2, 3, 4)
    nodes = [node("Reshape", ["x"], ["r"], shape=[0, 4, -1]),
             node("Cast", ["r"], ["c"], to="DOUBLE"),
             node("Tile", ["x", "tiles", "axis"], ["t"]),
             node("Concat", ["x", "x"], ["cat"]),
             node("Split", ["x", "sp"], ["s0", "s1"], axis=2)]
    inits = {"tiles": np.array(3, np.int64), "axis": np.array(1, np.int64), "sp": np.array([1, 3], np.int64)}
    proto = model(1, nodes, {"x": x}, ["c", "t", "cat", "s0", "s1"], inits)
    want = [x.reshape(2, 4, 3).astype(np.float64), np.tile(x, (1, 3, 1)), np.concatenate([x, x], 1),
            x[:, :, :1], x[:, :, 1:]]
    up(proto, {"x": x}, want)


def test_pad_and_lp_pools_of_opset_1():
    """Pad-1's paddings and the float p of LpPool/GlobalLpPool convert."""
    x = f32(1, 2, 4, 4)
    nodes = [node("Pad", ["x"], ["p"], paddings=[0, 0, 1, 2, 0, 0, 1, 0], value=1.5),
             node("GlobalLpPool", ["x"], ["g"], p=3.0),
             node("LpPool", ["x"], ["l"], kernel_shape=[2, 2], strides=[2, 2], p=2.0)]
    proto = model(1, nodes, {"x": x}, ["p", "g", "l"])
    pooled = np.sqrt((x.reshape(1, 2, 2, 2, 2, 2) ** 2).sum(axis=(3, 5)))
    want = [np.pad(x, [(0, 0), (0, 0), (1, 1), (2, 0)], constant_values=1.5),
            (np.abs(x) ** 3).sum(axis=(2, 3), keepdims=True) ** (1 / 3), pooled]
    up(proto, {"x": x}, want, targets=(11, 21))  # onnxruntime has no GlobalLpPool-22


def test_lp_pool_with_fractional_p_is_refused():
    """LpPool-1 with p=1.5 has no opset-2 form; the error names the op and says why."""
    proto = model(1, [node("GlobalLpPool", ["x"], ["g"], p=1.5)], {"x": f32(1, 2, 3, 3)}, ["g"])
    with pytest.raises(UnmatchedOpsError, match=r"(?s)GlobalLpPool.*whole number"):
        convert(from_onnx(proto), "amanda/onnx/11")


def test_batchnorm_dropout_upsample_of_opset_1():
    """BatchNormalization-1 (is_test, consumed_inputs), Dropout-1 (is_test) and Upsample-1
    (height/width scales) convert; Upsample-1 nearest is a repeat of rows and columns."""
    x = f32(1, 3, 2, 3)
    s, b, m, v = f32(3), f32(3), f32(3), np.abs(f32(3)) + 0.5
    nodes = [node("BatchNormalization", ["x", "s", "b", "m", "v"], ["bn"], is_test=1, epsilon=1e-3,
                  consumed_inputs=[0, 0, 0, 1, 1]),
             node("Dropout", ["bn"], ["d"], is_test=1, ratio=0.3),
             node("Upsample", ["d"], ["u"], height_scale=2.0, width_scale=3.0, mode="nearest")]
    proto = model(1, nodes, {"x": x}, ["u"], {"s": s, "b": b, "m": m, "v": v})
    c = (slice(None), None, None)
    bn = (x - m[c]) / np.sqrt(v[c] + 1e-3) * s[c] + b[c]
    up(proto, {"x": x}, [bn.repeat(2, axis=2).repeat(3, axis=3)])


def test_gru_default_direction_misspelled_at_opset_1():
    """GRU-1's default direction ('foward') becomes 'forward'; the result matches GRU-7's."""
    x, w, r = f32(4, 2, 3), f32(1, 15, 3), f32(1, 15, 5)
    gru1 = model(1, [node("GRU", ["x", "w", "r"], ["y", "h"], hidden_size=5, output_sequence=1)], {"x": x}, ["y", "h"],
                 {"w": w, "r": r})
    gru7 = model(7, [node("GRU", ["x", "w", "r"], ["y", "h"], hidden_size=5)], {"x": x}, ["y", "h"], {"w": w, "r": r})
    converted = convert(from_onnx(gru1), "amanda/onnx/11")
    (gru,) = [op for op in converted if op.type == "GRU"]
    assert "output_sequence" not in gru.attrs and gru.attrs.get("direction") in (None, "forward")
    close(onnxruntime(to_onnx(converted), {"x": x}), onnxruntime(gru7, {"x": x}))


# --- opsets 7 to 10: onnxruntime runs the original --------------------------------------------------

def cnn(opset):
    """A small CNN of opset ``opset`` (7 to 10): Conv, BatchNormalization, Relu, MaxPool,
    Upsample/Resize, Slice, Reshape, Gemm, TopK, Softmax."""
    x = f32(2, 3, 8, 8)
    scales = np.array([1, 1, 2, 2], np.float32)
    if opset < 9:
        upsample = [node("Upsample", ["p"], ["u"], scales=[1.0, 1.0, 2.0, 2.0], mode="nearest")]
    elif opset == 9:
        upsample = [node("Upsample", ["p", "scales"], ["u"], mode="nearest")]
    else:
        upsample = [node("Resize", ["p", "scales"], ["u"], mode="nearest")]
    slices = ([node("Slice", ["u", "st", "en", "ax"], ["sl"])] if opset >= 10
              else [node("Slice", ["u"], ["sl"], starts=[1, 1], ends=[7, 7], axes=[2, 3])])
    topk = ([node("TopK", ["g", "k"], ["tv", "ti"])] if opset >= 10 else [node("TopK", ["g"], ["tv", "ti"], k=2)])
    bn_attrs = {"spatial": 1} if opset < 9 else {}
    nodes = [node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             node("BatchNormalization", ["c", "s", "o", "m", "v"], ["bn"], epsilon=1e-3, **bn_attrs),
             node("Relu", ["bn"], ["r"]),
             node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             *upsample, *slices,
             node("Reshape", ["sl", "shape"], ["flat"]),
             node("Gemm", ["flat", "gw", "gb"], ["g"], transB=1),
             *topk,
             node("Softmax", ["g"], ["out"])]
    inits = {"w": f32(4, 3, 3, 3), "b": f32(4), "s": f32(4), "o": f32(4), "m": f32(4), "v": np.abs(f32(4)) + 1,
             "scales": scales, "st": np.array([1, 1], np.int64), "en": np.array([7, 7], np.int64),
             "ax": np.array([2, 3], np.int64), "shape": np.array([2, -1], np.int64), "gw": f32(5, 144), "gb": f32(5),
             "k": np.array([2], np.int64)}
    used = {i for n in nodes for i in n.input}
    return model(opset, nodes, {"x": x}, ["out", "tv", "ti"], {k: v for k, v in inits.items() if k in used}), {"x": x}


@pytest.mark.parametrize("opset", [7, 8, 9, 10])
def test_cnn_of_opsets_7_to_10(opset):
    """A CNN of each opset from 7 to 10 computes at 11 and at the newest opset what onnxruntime
    computes for the original."""
    proto, feeds = cnn(opset)
    up(proto, feeds)


@pytest.mark.parametrize("opset", [1, 5, 6, 8, 9])
def test_onnx_version_converter_models(opset):
    """Models that onnx's own version converter writes at old opsets (from an opset-11 model)
    convert back up and compute what onnxruntime computes for the opset-11 model."""
    from onnx import version_converter

    x, x4 = f32(4, 6), f32(1, 3, 2, 2)
    nodes = [node("Add", ["x", "b"], ["a"]), node("Mul", ["a", "b"], ["mu"]), node("Relu", ["mu"], ["r"]),
             node("Reshape", ["r", "shape"], ["rs"]), node("Softmax", ["rs"], ["sm"]),
             node("Concat", ["sm", "sm"], ["cat"], axis=1),
             node("BatchNormalization", ["x4", "s", "o", "m", "v"], ["bn"]), node("Dropout", ["bn"], ["d"])]
    inits = {"b": f32(6), "shape": np.array([2, -1], np.int64), "s": f32(3), "o": f32(3), "m": f32(3),
             "v": np.abs(f32(3)) + 1}
    proto = model(11, nodes, {"x": x, "x4": x4}, ["cat", "d"], inits)
    feeds = {"x": x, "x4": x4}
    # the converter wants every initializer declared as a graph input too (IR 3)
    declared = helper.make_model(proto.graph, opset_imports=proto.opset_import, ir_version=3)
    declared.graph.input.extend(helper.make_tensor_value_info(i.name, i.data_type, list(i.dims))
                                for i in declared.graph.initializer)
    old = version_converter.convert_version(declared, opset)
    assert {o.domain: o.version for o in old.opset_import}[""] == opset
    up(old, feeds, onnxruntime(proto, feeds))


ENLARGE = [("nearest", [1, 1, 2, 3]), ("linear", [1, 1, 2, 1.5])]
SHRINK = [("nearest", [1, 1, 0.5, 0.6]), ("linear", [1, 1, 0.5, 0.5])]


@pytest.mark.parametrize("opset,mode,scales", [(7, *c) for c in ENLARGE] + [(10, *c) for c in ENLARGE + SHRINK])
def test_upsample_and_resize_10_become_resize_11(opset, mode, scales):
    """Upsample-7 (which only enlarges) and Resize-10 (asymmetric; nearest rounds down enlarging,
    up shrinking) give onnxruntime's numbers as Resize-11."""
    x = f32(1, 2, 5, 6)
    if opset == 7:
        proto = model(7, [node("Upsample", ["x"], ["y"], scales=[float(s) for s in scales], mode=mode)], {"x": x}, ["y"])
    else:
        proto = model(10, [node("Resize", ["x", "s"], ["y"], mode=mode)], {"x": x}, ["y"],
                      {"s": np.array(scales, np.float32)})
    (converted, _) = up(proto, {"x": x})
    (resize,) = [op for op in converted if op.type == "Resize"]
    assert resize.attrs["coordinate_transformation_mode"] == "asymmetric"


def test_clip_pad_slice_topk_attributes_become_inputs():
    """Clip's min/max (only max set), Pad's pads/value, Slice's and TopK's attributes become
    inputs and compute what onnxruntime computes for models of opsets 7 and 9."""
    x = f32(2, 3, 4)
    nodes = [node("Clip", ["x"], ["c"], max=0.5), node("Clip", ["x"], ["c2"], min=-0.2, max=0.3),
             node("Pad", ["c"], ["p"], pads=[0, 1, 0, 0, 2, 1], value=-1.0),
             node("Pad", ["x"], ["pr"], pads=[0, 0, 1, 0, 0, 2], mode="reflect"),
             node("Slice", ["p"], ["s"], starts=[1, -3], ends=[5, 100], axes=[1, 2]),
             node("TopK", ["s"], ["v", "i"], k=2, axis=1)]
    for opset in (7, 9):
        proto = model(opset, nodes, {"x": x}, ["c2", "pr", "v", "i"])
        up(proto, {"x": x})


def test_scatter_becomes_scatter_elements():
    """Scatter-9 is ScatterElements-11."""
    data, idx, upd = f32(3, 4), np.array([[1, 0, 2, 0]], np.int64), f32(1, 4)
    proto = model(10, [node("Scatter", ["d", "i", "u"], ["y"], axis=0)], {"d": data, "i": idx, "u": upd}, ["y"])
    (converted, _) = up(proto, {"d": data, "i": idx, "u": upd})
    assert [op.type for op in converted] == ["ScatterElements"]


def test_upsample_in_an_opset_10_model():
    """An Upsample left in an opset-10 model (deprecated there) becomes Resize-11."""
    x = f32(1, 1, 2, 3)
    proto = model(10, [node("Upsample", ["x", "s"], ["y"], mode="nearest")], {"x": x}, ["y"],
                  {"s": np.array([1, 1, 2, 2], np.float32)})
    up(proto, {"x": x}, [x.repeat(2, axis=2).repeat(2, axis=3)])


def test_batchnorm_spatial_0_is_written_out():
    """BatchNormalization-7 with spatial=0 (statistics per element) computes at 11 what
    onnxruntime computes, as elementwise ops."""
    x = f32(2, 3, 4)
    shape = (3, 4)
    inits = {"s": f32(*shape), "b": f32(*shape), "m": f32(*shape), "v": np.abs(f32(*shape)) + 0.5}
    proto = model(8, [node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], spatial=0, epsilon=1e-2)],
                  {"x": x}, ["y"], inits)
    want = (x - inits["m"]) / np.sqrt(inits["v"] + 1e-2) * inits["s"] + inits["b"]
    (converted, _) = up(proto, {"x": x}, [want])
    assert "BatchNormalization" not in [op.type for op in converted]


@st.composite
def legacy_broadcasts(draw):
    """A shape for A, a contiguous run of its dims for B, the axis B starts at (None: B is a
    suffix, as legacy broadcasting without axis means), an op and an opset below 7."""
    shape = draw(st.lists(st.integers(1, 4), min_size=1, max_size=4))
    start = draw(st.integers(0, len(shape) - 1))
    stop = draw(st.integers(start + 1, len(shape)))
    axis = None if stop == len(shape) and draw(st.booleans()) else start
    if axis is not None and draw(st.booleans()):
        axis -= len(shape)  # a negative axis counts from the end
    return shape, shape[start:stop], axis, draw(st.sampled_from(sorted(BINARY))), draw(st.integers(1, 6))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(legacy_broadcasts())
def test_legacy_broadcast_property(case):
    """For any A shape and any contiguous run of its dims as B, with or without axis, a binary
    op of opsets 1 to 6 computes at 11 what legacy broadcasting means (numpy written here)."""
    a_shape, b_shape, axis, op_type, opset = case
    a, b = np.abs(f32(*a_shape)) + 0.5, np.abs(f32(*b_shape)) + 0.5
    start = len(a_shape) - len(b_shape) if axis is None else axis % len(a_shape)
    aligned = b.reshape(tuple(b_shape) + (1,) * (len(a_shape) - start - len(b_shape)))
    kwargs = {"broadcast": 1} if axis is None else {"broadcast": 1, "axis": axis}
    proto = model(opset, [node(op_type, ["a", "b"], ["y"], **kwargs)], {"a": a}, ["y"], {"b": b})
    converted = convert(from_onnx(proto), "amanda/onnx/11")
    close(session(converted, ["y"], {"a": a}), [BINARY[op_type](a, aligned)])


def test_old_opset_models_import_into_their_opset_and_validate():
    """A model of opset N imports into amanda/onnx/N and validates as it is, Cast-1's type name
    included (type inference reads it)."""
    from amanda.types import infer_types

    x = f32(2, 3)
    proto = model(1, [node("Cast", ["x"], ["c"], to="DOUBLE"), node("Relu", ["c"], ["r"], consumed_inputs=[0])],
                  {"x": x}, ["r"])
    container = from_onnx(proto)
    assert container.namespace == "amanda/onnx/1"
    assert validate(container) == []
    assert infer_types(container)[(), "r"].dtype == "float64"


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("opset", [7, 8, 9, 10])
def test_torch_exports_of_old_opsets(opset):
    """A CNN exported by torch at opsets 7 to 10 (Conv, BatchNorm, Relu, MaxPool, Upsample or
    Resize from 9, Clip, Pad, Slice, Gemm, Softmax) converts to 11 and to the newest opset and
    computes what onnxruntime computes for the export, and what torch computes."""
    torch = pytest.importorskip("torch")
    import io

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.bn = torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.BatchNorm2d(4)
            self.fc = torch.nn.Linear(4 * 8 * 8 if opset >= 9 else 4 * 4 * 4, 5)

        def forward(self, x):
            y = torch.nn.functional.max_pool2d(torch.relu(self.bn(self.conv(x))), 2)
            if opset >= 9:  # torch writes interpolate as Upsample (9) or Resize (10)
                y = torch.nn.functional.interpolate(y, scale_factor=2.0, mode="nearest")
            y = torch.nn.functional.pad(torch.clamp(y, -1, 1), (1, 1, 0, 0))[:, :, :, 1:-1]
            return torch.softmax(self.fc(y.flatten(1)), -1)

    torch.manual_seed(0)
    net = Net().eval()
    x = torch.randn(2, 3, 8, 8)
    buffer = io.BytesIO()
    torch.onnx.export(net, (x,), buffer, opset_version=opset, dynamo=False, input_names=["x"], output_names=["y"])
    proto = onnx.load_from_string(buffer.getvalue())
    assert {o.domain: o.version for o in proto.opset_import}[""] == opset
    feeds = {"x": x.numpy()}
    with torch.no_grad():
        expected = net(x).numpy()
    close(onnxruntime(proto, feeds), [expected])
    up(proto, feeds)
