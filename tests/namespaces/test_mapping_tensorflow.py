"""Every TensorFlow -> ONNX rule maps and computes the same numbers.

Each case is a small TensorFlow graph (amanda containers in ``amanda/tensorflow/2.21.0``, checked
against the vocabulary), converted to ONNX 17, exported and run in onnxruntime. The TensorFlow
side is computed by an independent numpy oracle written here; where TensorFlow is installed, a
separate test also runs the same graph in TensorFlow itself (imported as a GraphDef).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

import amanda
from amanda import Container, op
from amanda.errors import FormatError
from amanda.namespaces.model_fit import validate
from amanda.rewrite.mapping import UnmatchedOpsError
from amanda.rewrite.mapping.convert import convert
from amanda.rewrite.mapping.tables.tensorflow_onnx import tensorflow_to_onnx

ort = pytest.importorskip("onnxruntime")
TF = "amanda/tensorflow/2.21.0"
RNG = np.random.default_rng(7)


# --- building TensorFlow graphs ------------------------------------------------------------------

def f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def tf_op(type_: str, name: str, inputs: list[str], outputs: list[str], **attrs: Any) -> Container:
    return op(type_, name, inputs, outputs, attrs)


def placeholder(name: str, value: np.ndarray) -> Container:
    return tf_op("Placeholder", name, [], ["output"], dtype=value.dtype.name, shape=list(value.shape))


def const(name: str, value: Any, dtype: str | None = None) -> Container:
    array = np.asarray(value, dtype=dtype)
    return tf_op("Const", name, [], ["output"], value=array, dtype=array.dtype.name)


@dataclass
class Case:
    """A TensorFlow graph, its feeds, the value to fetch and the numpy oracle of that value."""

    id: str
    ops: list[Container]
    edges: list[tuple[str, str]]
    feeds: dict[str, np.ndarray]
    fetch: str
    oracle: Callable[[dict[str, np.ndarray]], np.ndarray]
    real_tf: bool = True  # whether TensorFlow on CPU runs it (NCHW convolutions it does not)
    rtol: float = 1e-5
    extra: dict = field(default_factory=dict)

    def graph(self) -> Container:
        phs = [placeholder(n, v) for n, v in self.feeds.items() if not n.startswith("var:")]
        variables = [tf_op("VariableV2", n[4:], [], ["ref"], dtype=v.dtype.name, shape=list(v.shape),
                           container="", shared_name="") for n, v in self.feeds.items() if n.startswith("var:")]
        edges = [(f"{src[4:]}:ref" if src.startswith("var:") else src, dst) for src, dst in self.edges]
        return Container(None, "graph", children=[*phs, *variables, *self.ops], edges=edges,
                         attrs={"namespace": TF})

    def onnx_feeds(self) -> dict[str, np.ndarray]:
        return {n.removeprefix("var:"): v for n, v in self.feeds.items()}


def ports(type_: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The op's ports as the TensorFlow vocabulary names them."""
    from amanda.namespaces import namespace

    schema = namespace(TF).schema(type_)
    return schema.input_names, schema.output_names


def unary(type_: str, fn: Callable, x: np.ndarray | None = None, **attrs: Any) -> Case:
    x = f32(2, 3) if x is None else x
    (ins,), (outs,) = ports(type_)
    return Case(type_.lower(), [tf_op(type_, "op", [ins], [outs], T="float32", **attrs)],
                [("x:output", f"op:{ins}")], {"x": x}, f"op:{outs}", lambda f: fn(f["x"]))


def binary(type_: str, fn: Callable, x: np.ndarray | None = None, y: np.ndarray | None = None) -> Case:
    x = f32(2, 3) if x is None else x
    y = f32(3) if y is None else y
    (a, b), (z,) = ports(type_)
    return Case(type_.lower(), [tf_op(type_, "op", [a, b], [z], T=x.dtype.name)],
                [("a:output", f"op:{a}"), ("b:output", f"op:{b}")], {"a": x, "b": y}, f"op:{z}",
                lambda f: fn(f["a"], f["b"]))


# --- numpy oracles of TensorFlow semantics --------------------------------------------------------

def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def same_pads(size: int, k: int, s: int, d: int) -> tuple[int, int]:
    eff = (k - 1) * d + 1
    out = math.ceil(size / s)
    total = max((out - 1) * s + eff - size, 0)
    return total // 2, total - total // 2


def window_pads(x_hw: tuple[int, int], k: tuple[int, int], s: list[int], d: list[int], padding: Any):
    if padding == "SAME":
        return [same_pads(x_hw[i], k[i], s[i], d[i]) for i in range(2)]
    if padding == "VALID":
        return [(0, 0), (0, 0)]
    return padding  # explicit [(top, bottom), (left, right)]


def conv2d_nhwc(x, w, strides, dilations, padding):
    (pt, pb), (pl, pr) = window_pads(x.shape[1:3], w.shape[:2], strides, dilations, padding)
    xp = np.pad(x, ((0, 0), (pt, pb), (pl, pr), (0, 0)))
    kh, kw = w.shape[:2]
    eh, ew = (kh - 1) * dilations[0] + 1, (kw - 1) * dilations[1] + 1
    oh = (xp.shape[1] - eh) // strides[0] + 1
    ow = (xp.shape[2] - ew) // strides[1] + 1
    out = np.zeros((x.shape[0], oh, ow, w.shape[3]), dtype=np.float64)
    for i in range(oh):
        for j in range(ow):
            patch = xp[:, i * strides[0]:i * strides[0] + eh:dilations[0], j * strides[1]:j * strides[1] + ew:dilations[1], :]
            out[:, i, j, :] = np.einsum("nhwc,hwco->no", patch, w)
    return out.astype(np.float32)


def pool_nhwc(x, k, strides, padding, kind):
    (pt, pb), (pl, pr) = window_pads(x.shape[1:3], k, strides, [1, 1], padding)
    fill = -np.inf if kind == "max" else 0.0
    xp = np.pad(x.astype(np.float64), ((0, 0), (pt, pb), (pl, pr), (0, 0)), constant_values=fill)
    ones = np.pad(np.ones(x.shape[1:3]), ((pt, pb), (pl, pr)))
    oh = (xp.shape[1] - k[0]) // strides[0] + 1
    ow = (xp.shape[2] - k[1]) // strides[1] + 1
    out = np.zeros((x.shape[0], oh, ow, x.shape[3]))
    for i in range(oh):
        for j in range(ow):
            win = xp[:, i * strides[0]:i * strides[0] + k[0], j * strides[1]:j * strides[1] + k[1], :]
            if kind == "max":
                out[:, i, j, :] = win.max(axis=(1, 2))
            else:
                count = ones[i * strides[0]:i * strides[0] + k[0], j * strides[1]:j * strides[1] + k[1]].sum()
                out[:, i, j, :] = win.sum(axis=(1, 2)) / count
    return out.astype(np.float32)


def nchw(fn):
    return lambda x, *a: np.transpose(fn(np.transpose(x, (0, 2, 3, 1)), *a), (0, 3, 1, 2))


# --- the cases -------------------------------------------------------------------------------------

def conv_case(id_, x, w, strides, padding, dilations=(1, 1, 1, 1), layout="NHWC", explicit=()):
    attrs = {"T": "float32", "strides": list(strides), "padding": padding, "data_format": layout,
             "dilations": list(dilations), "use_cudnn_on_gpu": True, "explicit_paddings": list(explicit)}
    s = [strides[1], strides[2]] if layout == "NHWC" else [strides[2], strides[3]]
    d = [dilations[1], dilations[2]] if layout == "NHWC" else [dilations[2], dilations[3]]
    pads = padding
    if padding == "EXPLICIT":
        e = np.asarray(explicit).reshape(4, 2)
        pads = [tuple(e[1]), tuple(e[2])] if layout == "NHWC" else [tuple(e[2]), tuple(e[3])]
    oracle = conv2d_nhwc if layout == "NHWC" else nchw(conv2d_nhwc)
    return Case(id_, [tf_op("Conv2D", "conv", ["input", "filter"], ["output"], **attrs)],
                [("x:output", "conv:input"), ("w:output", "conv:filter")], {"x": x, "w": w}, "conv:output",
                lambda f: oracle(f["x"], f["w"], s, d, pads), real_tf=layout == "NHWC", rtol=1e-4)


def pool_case(id_, type_, x, ksize, strides, padding, layout="NHWC"):
    kind = "max" if type_ == "MaxPool" else "avg"
    k = [ksize[1], ksize[2]] if layout == "NHWC" else [ksize[2], ksize[3]]
    s = [strides[1], strides[2]] if layout == "NHWC" else [strides[2], strides[3]]
    oracle = pool_nhwc if layout == "NHWC" else nchw(pool_nhwc)
    return Case(id_, [tf_op(type_, "pool", ["input" if type_ == "MaxPool" else "value"], ["output"], T="float32",
                            ksize=list(ksize), strides=list(strides), padding=padding, data_format=layout)],
                [("x:output", "pool:input" if type_ == "MaxPool" else "pool:value")], {"x": x}, "pool:output",
                lambda f: oracle(f["x"], k, s, padding, kind), real_tf=layout == "NHWC", rtol=1e-5)


def batch_norm_case(id_, type_, fetch="y", layout="NHWC"):
    x = f32(2, 3, 4, 5) if layout == "NHWC" else f32(2, 5, 3, 4)
    scale, offset, mean = f32(5), f32(5), f32(5)
    var = np.abs(f32(5)) + 0.5
    attrs = {"T": "float32", "epsilon": 0.001, "data_format": layout, "is_training": False}
    if type_ != "FusedBatchNorm":
        attrs["U"] = "float32"
    outs = ["y", "batch_mean", "batch_variance", "reserve_space_1", "reserve_space_2"]
    if type_ == "FusedBatchNormV3":
        outs.append("reserve_space_3")
    names = ["x", "scale", "offset", "mean", "variance"]
    feeds = dict(zip(["px", "ps", "po", "pm", "pv"], [x, scale, offset, mean, var]))
    edges = [(f"{p}:output", f"bn:{n}") for p, n in zip(feeds, names)]
    axis = (1, 1, 1, 5) if layout == "NHWC" else (1, 5, 1, 1)

    def oracle(f):
        if fetch == "batch_mean":
            return f["pm"]
        r = lambda v: v.reshape(axis)
        return (f["px"] - r(f["pm"])) / np.sqrt(r(f["pv"]) + 0.001) * r(f["ps"]) + r(f["po"])

    return Case(id_, [tf_op(type_, "bn", names, outs, **attrs)], edges, feeds, f"bn:{fetch}", oracle,
                real_tf=layout == "NHWC", rtol=1e-4)


def reduce_case(type_, axes, keep, fn):
    x = f32(2, 3, 4)
    ax = const("axes", axes, "int32")
    return Case(f"{type_.lower()}_{axes}_{keep}",
                [ax, tf_op(type_, "r", ["input", "reduction_indices"], ["output"], T="float32", Tidx="int32", keep_dims=keep)],
                [("x:output", "r:input"), ("axes:output", "r:reduction_indices")], {"x": x}, "r:output",
                lambda f: fn(f["x"], axis=tuple(np.atleast_1d(axes)), keepdims=keep) if np.size(axes) else f["x"])


def cases() -> list[Case]:
    x23, x4 = f32(2, 3), f32(1, 5, 6, 3)
    w = f32(3, 2)
    out = [
        unary("Relu", lambda x: np.maximum(x, 0)),
        unary("Relu6", lambda x: np.clip(x, 0, 6), x=f32(2, 3) * 5),
        unary("Sigmoid", lambda x: 1 / (1 + np.exp(-x))),
        unary("Tanh", np.tanh),
        unary("Softmax", softmax, x=f32(2, 3, 4)),
        unary("LogSoftmax", lambda x: np.log(softmax(x))),
        unary("Elu", lambda x: np.where(x > 0, x, np.exp(x) - 1)),
        unary("Selu", lambda x: 1.0507009873554805 * np.where(x > 0, x, 1.6732632423543772 * (np.exp(x) - 1))),
        unary("Softplus", lambda x: np.log1p(np.exp(x))),
        unary("Softsign", lambda x: x / (1 + np.abs(x))),
        unary("LeakyRelu", lambda x: np.where(x > 0, x, 0.3 * x), alpha=0.3),
        unary("Neg", np.negative), unary("Abs", np.abs), unary("Exp", np.exp),
        unary("Sqrt", np.sqrt, x=np.abs(x23) + 0.1), unary("Log", np.log, x=np.abs(x23) + 0.1),
        unary("Floor", np.floor), unary("Ceil", np.ceil), unary("Sign", np.sign),
        unary("Round", np.round, x=np.array([[0.5, 1.5, -2.5], [2.4, -0.6, 3.5]], np.float32)),
        unary("Reciprocal", lambda x: 1 / x, x=np.abs(x23) + 0.5),
        unary("Erf", lambda x: np.vectorize(math.erf)(x).astype(np.float32)),
        unary("Square", np.square), unary("Rsqrt", lambda x: 1 / np.sqrt(x), x=np.abs(x23) + 0.5),
        unary("Identity", lambda x: x), unary("StopGradient", lambda x: x),
        binary("Add", np.add), binary("AddV2", np.add), binary("Sub", np.subtract), binary("Mul", np.multiply),
        binary("RealDiv", np.divide, y=np.abs(f32(3)) + 0.5), binary("Maximum", np.maximum),
        binary("Minimum", np.minimum), binary("Pow", np.power, x=np.abs(x23) + 0.1),
    ]
    mm = lambda ta, tb: tf_op("MatMul", "mm", ["a", "b"], ["product"], T="float32", transpose_a=ta, transpose_b=tb)
    out += [
        Case("matmul", [mm(False, False)], [("x:output", "mm:a"), ("w:output", "mm:b")], {"x": x23, "w": w},
             "mm:product", lambda f: f["x"] @ f["w"]),
        Case("matmul_transposed", [mm(True, True)], [("x:output", "mm:a"), ("w:output", "mm:b")],
             {"x": f32(3, 2), "w": f32(4, 3)}, "mm:product", lambda f: f["x"].T @ f["w"].T),
        Case("batch_matmul_v2", [tf_op("BatchMatMulV2", "mm", ["x", "y"], ["output"], T="float32", adj_x=False, adj_y=False)],
             [("x:output", "mm:x"), ("w:output", "mm:y")], {"x": f32(2, 2, 3), "w": f32(3, 4)}, "mm:output",
             lambda f: f["x"] @ f["w"]),
        Case("dense", [mm(False, True), tf_op("BiasAdd", "b", ["value", "bias"], ["output"], T="float32", data_format="NHWC")],
             [("x:output", "mm:a"), ("w:output", "mm:b"), ("mm:product", "b:value"), ("bias:output", "b:bias")],
             {"x": x23, "w": f32(4, 3), "bias": f32(4)}, "b:output", lambda f: f["x"] @ f["w"].T + f["bias"]),
        Case("bias_add_nhwc", [tf_op("BiasAdd", "b", ["value", "bias"], ["output"], T="float32")],
             [("x:output", "b:value"), ("bias:output", "b:bias")], {"x": x4, "bias": f32(3)}, "b:output",
             lambda f: f["x"] + f["bias"]),
        Case("bias_add_nchw", [tf_op("BiasAdd", "b", ["value", "bias"], ["output"], T="float32", data_format="NCHW")],
             [("x:output", "b:value"), ("bias:output", "b:bias")], {"x": f32(2, 3, 4, 5), "bias": f32(3)}, "b:output",
             lambda f: f["x"] + f["bias"].reshape(1, 3, 1, 1), real_tf=False),
        Case("dense_relu", [mm(False, False), tf_op("Relu", "relu", ["features"], ["activations"], T="float32")],
             [("x:output", "mm:a"), ("var:kernel", "mm:b"), ("mm:product", "relu:features")],
             {"x": f32(1, 6), "var:kernel": f32(6, 4)}, "relu:activations",
             lambda f: np.maximum(f["x"] @ f["var:kernel"], 0)),
        Case("assign", [const("init", np.ones((2, 2), np.float32)),
                        tf_op("Assign", "assign", ["ref", "value"], ["output_ref"], T="float32", validate_shape=True, use_locking=True)],
             [("var:v", "assign:ref"), ("init:output", "assign:value")], {"var:v": f32(2, 2)}, "assign:output_ref",
             lambda f: np.ones((2, 2), np.float32)),
        Case("assign_add", [const("delta", np.full((2, 2), 3, np.float32)),
                            tf_op("AssignAdd", "inc", ["ref", "value"], ["output_ref"], T="float32", use_locking=False)],
             [("var:v", "inc:ref"), ("delta:output", "inc:value")], {"var:v": f32(2, 2)}, "inc:output_ref",
             lambda f: f["var:v"] + 3),
        Case("noop_control", [tf_op("Relu", "r", ["features"], ["activations"], T="float32"), tf_op("NoOp", "init", [], []),
                              tf_op("Identity", "read", ["input"], ["output"], T="float32")],
             [("x:output", "r:features"), ("r:-1", "init:-1"), ("init:-1", "read:-1"), ("r:activations", "read:input")],
             {"x": x23}, "read:output", lambda f: np.maximum(f["x"], 0)),
        Case("placeholder_with_default", [const("d", x23), tf_op("PlaceholderWithDefault", "p", ["input"], ["output"], dtype="float32", shape=[2, 3]),
                                          tf_op("Neg", "n", ["x"], ["y"], T="float32")],
             [("d:output", "p:input"), ("p:output", "n:x")], {}, "n:y", lambda f: -x23),
        Case("cast", [tf_op("Cast", "c", ["x"], ["y"], SrcT="float32", DstT="int32", Truncate=False)],
             [("x:output", "c:x")], {"x": x23 * 4}, "c:y", lambda f: f["x"].astype(np.int32)),
        Case("shape", [tf_op("Shape", "s", ["input"], ["output"], T="float32", out_type="int32")],
             [("x:output", "s:input")], {"x": x4}, "s:output", lambda f: np.array(f["x"].shape, np.int32)),
        Case("shape_int64", [tf_op("Shape", "s", ["input"], ["output"], T="float32", out_type="int64")],
             [("x:output", "s:input")], {"x": x4}, "s:output", lambda f: np.array(f["x"].shape, np.int64)),
        Case("reshape", [const("shape", [3, -1], "int32"), tf_op("Reshape", "r", ["tensor", "shape"], ["output"], T="float32", Tshape="int32")],
             [("x:output", "r:tensor"), ("shape:output", "r:shape")], {"x": x23}, "r:output", lambda f: f["x"].reshape(3, -1)),
        Case("transpose", [const("perm", [2, 0, 1], "int32"), tf_op("Transpose", "t", ["x", "perm"], ["y"], T="float32", Tperm="int32")],
             [("x:output", "t:x"), ("perm:output", "t:perm")], {"x": f32(2, 3, 4)}, "t:y", lambda f: f["x"].transpose(2, 0, 1)),
        Case("squeeze", [tf_op("Squeeze", "s", ["input"], ["output"], T="float32", squeeze_dims=[0, 2])],
             [("x:output", "s:input")], {"x": f32(1, 3, 1, 2)}, "s:output", lambda f: f["x"].reshape(3, 2)),
        Case("squeeze_all", [tf_op("Squeeze", "s", ["input"], ["output"], T="float32", squeeze_dims=[])],
             [("x:output", "s:input")], {"x": f32(1, 3, 1, 2)}, "s:output", lambda f: f["x"].reshape(3, 2)),
        Case("expand_dims", [const("dim", -1, "int32"), tf_op("ExpandDims", "e", ["input", "dim"], ["output"], T="float32", Tdim="int32")],
             [("x:output", "e:input"), ("dim:output", "e:dim")], {"x": x23}, "e:output", lambda f: f["x"][..., None]),
        Case("const", [const("k", [[1, 2, 3]], "float32"), tf_op("Mul", "m", ["x", "y"], ["z"], T="float32")],
             [("x:output", "m:x"), ("k:output", "m:y")], {"x": x23}, "m:z", lambda f: f["x"] * np.array([[1, 2, 3]], np.float32)),
        Case("concat", [const("axis", -1, "int32"),
                        tf_op("ConcatV2", "c", ["values_0", "values_1", "values_2", "axis"], ["output"], T="float32", N=3, Tidx="int32")],
             [("a:output", "c:values_0"), ("b:output", "c:values_1"), ("d:output", "c:values_2"), ("axis:output", "c:axis")],
             {"a": x23, "b": f32(2, 1), "d": f32(2, 2)}, "c:output", lambda f: np.concatenate([f["a"], f["b"], f["d"]], -1)),
        reduce_case("Mean", [1], False, np.mean), reduce_case("Mean", [0, 2], True, np.mean),
        reduce_case("Max", [-1], False, np.max), reduce_case("Min", [1], True, np.min),
        reduce_case("Prod", [0], False, np.prod), reduce_case("Mean", [], False, np.mean),
        Case("sum_const", [const("axes", 1, "int32"), tf_op("Sum", "s", ["input", "reduction_indices"], ["output"], T="float32", Tidx="int32", keep_dims=True)],
             [("x:output", "s:input"), ("axes:output", "s:reduction_indices")], {"x": f32(2, 3, 4)}, "s:output",
             lambda f: f["x"].sum(1, keepdims=True)),
        Case("sum_fed_axes", [tf_op("Sum", "s", ["input", "reduction_indices"], ["output"], T="float32", Tidx="int32", keep_dims=False)],
             [("x:output", "s:input"), ("ax:output", "s:reduction_indices")], {"x": f32(2, 3, 4), "ax": np.array([0, 2], np.int32)},
             "s:output", lambda f: f["x"].sum((0, 2))),
        Case("pad", [const("p", [[0, 1], [2, 0]], "int32"), tf_op("Pad", "pad", ["input", "paddings"], ["output"], T="float32", Tpaddings="int32")],
             [("x:output", "pad:input"), ("p:output", "pad:paddings")], {"x": x23}, "pad:output",
             lambda f: np.pad(f["x"], [[0, 1], [2, 0]])),
        Case("pad_v2", [const("p", [[1, 1], [0, 2]], "int32"), const("cv", 7.5, "float32"),
                        tf_op("PadV2", "pad", ["input", "paddings", "constant_values"], ["output"], T="float32", Tpaddings="int32")],
             [("x:output", "pad:input"), ("p:output", "pad:paddings"), ("cv:output", "pad:constant_values")], {"x": x23},
             "pad:output", lambda f: np.pad(f["x"], [[1, 1], [0, 2]], constant_values=7.5)),
        Case("mirror_pad_reflect", [const("p", [[1, 1], [2, 2]], "int32"),
                                    tf_op("MirrorPad", "pad", ["input", "paddings"], ["output"], T="float32", Tpaddings="int32", mode="REFLECT")],
             [("x:output", "pad:input"), ("p:output", "pad:paddings")], {"x": f32(3, 4)}, "pad:output",
             lambda f: np.pad(f["x"], [[1, 1], [2, 2]], mode="reflect")),
        conv_case("conv_same_stride2", x4, f32(3, 3, 3, 4), (1, 2, 2, 1), "SAME"),
        conv_case("conv_valid_dilated", f32(1, 7, 8, 2), f32(2, 3, 2, 3), (1, 1, 1, 1), "VALID", (1, 2, 2, 1)),
        conv_case("conv_explicit", f32(1, 5, 5, 2), f32(2, 2, 2, 3), (1, 1, 2, 1), "EXPLICIT",
                  explicit=(0, 0, 1, 0, 2, 1, 0, 0)),
        conv_case("conv_nchw", f32(1, 2, 6, 5), f32(3, 3, 2, 4), (1, 1, 1, 2), "SAME", layout="NCHW"),
        pool_case("maxpool_same", "MaxPool", x4, (1, 3, 3, 1), (1, 2, 2, 1), "SAME"),
        pool_case("maxpool_valid", "MaxPool", x4, (1, 2, 2, 1), (1, 2, 2, 1), "VALID"),
        pool_case("avgpool_same", "AvgPool", x4, (1, 3, 3, 1), (1, 2, 2, 1), "SAME"),
        pool_case("avgpool_valid", "AvgPool", x4, (1, 2, 3, 1), (1, 1, 2, 1), "VALID"),
        pool_case("avgpool_nchw", "AvgPool", f32(1, 2, 5, 5), (1, 1, 3, 3), (1, 1, 2, 2), "SAME", layout="NCHW"),
        batch_norm_case("fused_batch_norm", "FusedBatchNorm"),
        batch_norm_case("fused_batch_norm_v2", "FusedBatchNormV2"),
        batch_norm_case("fused_batch_norm_v3", "FusedBatchNormV3"),
        batch_norm_case("fused_batch_norm_v3_mean", "FusedBatchNormV3", fetch="batch_mean"),
        batch_norm_case("fused_batch_norm_nchw", "FusedBatchNormV3", layout="NCHW"),
        *keras_cases(),
        *recurrent_cases(),
    ]
    return out


def _depthwise_oracle(x: np.ndarray, w: np.ndarray, stride: int) -> np.ndarray:
    """Depthwise convolution, VALID, in numpy: out[..., c * M + m] = sum x[.., c] * w[.., c, m]."""
    h, wd, c, k = w.shape
    rows = (x.shape[1] - h) // stride + 1
    cols = (x.shape[2] - wd) // stride + 1
    out = np.zeros((x.shape[0], rows, cols, c * k), np.float64)
    for i in range(rows):
        for j in range(cols):
            patch = x[:, i * stride:i * stride + h, j * stride:j * stride + wd, :]
            out[:, i, j, :] = np.einsum("bhwc,hwcm->bcm", patch, w).reshape(x.shape[0], -1)
    return out.astype(np.float32)


def keras_cases() -> list[Case]:
    """What Keras 3 graphs hold: depthwise convolutions (filter read through Identity), attention's
    Einsum, layer norm's SquaredDifference, GatherV2, Pack, and Tensordot's folded permutation."""
    w = f32(2, 2, 3, 2)
    dw = [const("w", w), tf_op("Identity", "read", ["input"], ["output"], T="float32"),
          tf_op("DepthwiseConv2dNative", "dw", ["input", "filter"], ["output"], T="float32",
                strides=[1, 2, 2, 1], padding="VALID", data_format="NHWC", dilations=[1, 1, 1, 1])]
    x, q = f32(2, 5, 5, 3), f32(2, 3, 4)
    return [
        Case("depthwise_conv2d", dw, [("w:output", "read:input"), ("read:output", "dw:filter"), ("x:output", "dw:input")],
             {"x": x}, "dw:output", lambda f: _depthwise_oracle(f["x"], w, 2), rtol=1e-4),
        Case("einsum", [tf_op("Einsum", "e", ["inputs_0", "inputs_1"], ["output"], T="float32", N=2, equation="abc,adc->abd")],
             [("a:output", "e:inputs_0"), ("b:output", "e:inputs_1")], {"a": q, "b": f32(2, 5, 4)}, "e:output",
             lambda f: np.einsum("abc,adc->abd", f["a"], f["b"]), rtol=1e-4),
        Case("squared_difference", [tf_op("SquaredDifference", "d", ["x", "y"], ["z"], T="float32")],
             [("a:output", "d:x"), ("b:output", "d:y")], {"a": q, "b": f32(4)}, "d:z", lambda f: (f["a"] - f["b"]) ** 2),
        Case("gather_v2", [const("idx", [2, 0, 2], "int32"), const("axis", 1, "int32"),
                           tf_op("GatherV2", "g", ["params", "indices", "axis"], ["output"], Tparams="float32",
                                 Tindices="int32", Taxis="int32", batch_dims=0)],
             [("a:output", "g:params"), ("idx:output", "g:indices"), ("axis:output", "g:axis")], {"a": q}, "g:output",
             lambda f: f["a"][:, [2, 0, 2]]),
        Case("pack", [tf_op("Pack", "p", ["values_0", "values_1"], ["output"], T="float32", N=2, axis=-1)],
             [("a:output", "p:values_0"), ("b:output", "p:values_1")], {"a": q, "b": f32(2, 3, 4)}, "p:output",
             lambda f: np.stack([f["a"], f["b"]], -1)),
        Case("transpose_folded_perm", [const("free", [1, 2], "int32"), const("axes", [0], "int32"), const("axis", 0, "int32"),
                                       tf_op("ConcatV2", "perm", ["values_0", "values_1", "axis"], ["output"], T="int32", N=2, Tidx="int32"),
                                       tf_op("Transpose", "t", ["x", "perm"], ["y"], T="float32", Tperm="int32")],
             [("free:output", "perm:values_0"), ("axes:output", "perm:values_1"), ("axis:output", "perm:axis"),
              ("a:output", "t:x"), ("perm:output", "t:perm")], {"a": q}, "t:y", lambda f: f["a"].transpose(1, 2, 0)),
    ]


def recurrent_cases() -> list[Case]:
    """What Keras's LSTM and tf.while_loop graphs hold besides their loops: comparisons, SelectV2,
    Fill of computed dims and Range."""
    cond = RNG.standard_normal((2, 3)) > 0
    return [
        binary("Less", np.less),
        binary("Greater", np.greater),
        Case("select_v2", [tf_op("SelectV2", "s", ["condition", "t", "e"], ["output"], T="float32")],
             [("c:output", "s:condition"), ("a:output", "s:t"), ("b:output", "s:e")],
             {"c": cond, "a": f32(2, 3), "b": f32(3)}, "s:output", lambda f: np.where(f["c"], f["a"], f["b"])),
        Case("fill", [const("dims", [2, 3], "int32"),
                      tf_op("Fill", "f", ["dims", "value"], ["output"], T="float32", index_type="int32")],
             [("dims:output", "f:dims"), ("v:output", "f:value")], {"v": np.array(1.5, np.float32)}, "f:output",
             lambda f: np.full((2, 3), f["v"], np.float32)),
        Case("range", [const("start", 1.0, "float32"), const("delta", 1.5, "float32"),
                       tf_op("Range", "r", ["start", "limit", "delta"], ["output"], Tidx="float32")],
             [("start:output", "r:start"), ("l:output", "r:limit"), ("delta:output", "r:delta")],
             {"l": np.array(7.0, np.float32)}, "r:output", lambda f: np.arange(1.0, f["l"], 1.5, dtype=np.float32)),
        strided_slice_case("strided_slice_masks", (4, 5, 6), [1, 0, -1], [3, 0, 0], [1, 2, 1],
                           lambda x: x[1:3, ::2, -1], begin_mask=0b010, end_mask=0b010, shrink_axis_mask=0b100),
        strided_slice_case("strided_slice_reversed", (4, 5), [0, 0], [0, 1], [-1, 1],
                           lambda x: x[::-1, 0:1], begin_mask=0b01, end_mask=0b01),
        strided_slice_case("strided_slice_last", (4, 5), [-1, 1], [0, 4], [1, 2],
                           lambda x: x[-1, 1:4:2], shrink_axis_mask=0b01),
    ]


def strided_slice_case(id_: str, shape: tuple, begin: list, end: list, strides: list, fn: Callable,
                       **masks: int) -> Case:
    attrs = {"begin_mask": 0, "end_mask": 0, "ellipsis_mask": 0, "new_axis_mask": 0, "shrink_axis_mask": 0, **masks}
    ops = [const("begin", begin, "int32"), const("end", end, "int32"), const("strides", strides, "int32"),
           tf_op("StridedSlice", "s", ["input", "begin", "end", "strides"], ["output"], T="float32", Index="int32",
                 **attrs)]
    edges = [("x:output", "s:input"), ("begin:output", "s:begin"), ("end:output", "s:end"),
             ("strides:output", "s:strides")]
    return Case(id_, ops, edges, {"x": f32(*shape)}, "s:output", lambda f: fn(f["x"]))


CASES = cases()


def run_onnx(case: Case) -> tuple[np.ndarray, Container]:
    from amanda.io.onnx import to_onnx

    converted = convert(case.graph(), "amanda/onnx/17", outputs={"result": case.fetch})
    try:
        model = to_onnx(converted)
    except FormatError as error:  # a result of unknown rank: onnxruntime runs what the checker refuses
        assert "has no dtype or rank" in str(error)
        model = to_onnx(converted, check=False)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(["result"], case.onnx_feeds())[0], converted


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_rule_maps_and_computes_the_same_numbers(case):
    """The TensorFlow graph fits its vocabulary, converts to valid ONNX 17, and onnxruntime gives the oracle's numbers."""
    graph = case.graph()
    assert [str(p) for p in validate(graph)] == []
    got, converted = run_onnx(case)
    assert converted.namespace == "amanda/onnx/17"
    assert [str(p) for p in validate(converted)] == []
    want = case.oracle({**case.feeds})
    assert got.dtype == np.asarray(want).dtype or got.dtype.kind == np.asarray(want).dtype.kind
    np.testing.assert_allclose(got, want, rtol=case.rtol, atol=1e-5)


def test_every_shipped_tensorflow_rule_has_a_case():
    """Each rule of the shipped TensorFlow table fires in at least one of the cases above."""
    table = tensorflow_to_onnx()
    fired: set[str] = set()
    for case in CASES:
        for rule in table.ordered_rules():
            single = type(table)(table.source, table.target, [rule])
            before = case.graph()
            after = single.apply(before, on_unmatched="pass")
            if after is not before and amanda.dumps(after) != amanda.dumps(before):
                fired.add(rule.name)
    skips_only = {"reduce_dynamic"}  # it only explains why a computed axes cannot map
    in_other_tests = {"variable", "read_variable", "assign_sub", "assign_variable"}  # resource test below
    missing = set(table.rule_names) - fired - skips_only - (in_other_tests - {"variable"})
    assert missing == set()


def test_resource_variables_and_assign_sub():
    """VarHandleOp/ReadVariableOp read a graph input; AssignSub yields ref - value; AssignVariableOp goes."""
    from amanda.io.onnx import to_onnx

    v = np.arange(4, dtype=np.float32).reshape(2, 2)
    graph = Container(None, "g", attrs={"namespace": TF}, children=[
        tf_op("VarHandleOp", "h", [], ["resource"], dtype="float32", shape=[2, 2], container="", shared_name=""),
        tf_op("VariableV2", "w", [], ["ref"], dtype="float32", shape=[2, 2], container="", shared_name=""),
        tf_op("ReadVariableOp", "read", ["resource"], ["value"], dtype="float32"),
        const("d", np.ones((2, 2), np.float32)),
        tf_op("AssignVariableOp", "store", ["resource", "value"], [], dtype="float32"),
        tf_op("AssignSub", "dec", ["ref", "value"], ["output_ref"], T="float32", use_locking=False),
        tf_op("AddV2", "sum", ["x", "y"], ["z"], T="float32")],
        edges=[("h:resource", "read:resource"), ("h:resource", "store:resource"), ("d:output", "store:value"),
               ("w:ref", "dec:ref"), ("d:output", "dec:value"), ("read:value", "sum:x"), ("dec:output_ref", "sum:y"),
               ("store:-1", "sum:-1")])
    assert validate(graph) == []
    converted = convert(graph, "amanda/onnx/17", outputs={"result": "sum:z"})
    assert not any(c.type == "AssignVariableOp" for c in converted)
    session = ort.InferenceSession(to_onnx(converted).SerializeToString(), providers=["CPUExecutionProvider"])
    got = session.run(["result"], {"w": v, "h": v * 2})[0]
    np.testing.assert_allclose(got, v * 2 + v - 1)


def test_dense_graph_converts_exports_and_runs():
    """The example TensorFlow graph converts to ONNX 17 that validates and runs in onnxruntime."""
    from amanda.io.onnx import to_onnx

    graph = amanda.load("tests/fixtures/documents/tensorflow_dense_graph.yaml")
    converted, names = convert(graph, "amanda/onnx/17", with_names=True,
                               outputs={"logits": "dense/Relu:activations"})
    assert validate(converted) == [] and converted.namespace == "amanda/onnx/17"
    assert str(names.resolve("dense/kernel:ref")) == "SELF:dense/kernel"
    session = ort.InferenceSession(to_onnx(converted).SerializeToString(), providers=["CPUExecutionProvider"])
    x, w = f32(1, 784), f32(784, 10)
    got = session.run(["logits"], {"Placeholder": x, "dense/kernel": w})[0]
    np.testing.assert_allclose(got, np.maximum(x @ w, 0), rtol=1e-4, atol=1e-4)


def test_unmatched_tensorflow_ops_are_listed_with_reasons():
    """Ops no rule maps (training batch norm, computed Mean axes, SYMMETRIC MirrorPad) are listed by path with why."""
    graph = Container(None, "g", attrs={"namespace": TF}, children=[
        placeholder("x", f32(1, 2, 2, 3)), placeholder("ax", np.array([1], np.int32)),
        tf_op("FusedBatchNormV3", "bn", ["x", "scale", "offset", "mean", "variance"], ["y"], T="float32", U="float32"),
        tf_op("Mean", "m", ["input", "reduction_indices"], ["output"], T="float32", Tidx="int32"),
        tf_op("Unique", "u", ["x"], ["y", "idx"], T="float32")],
        edges=[("x:output", "bn:x"), ("x:output", "m:input"), ("ax:output", "m:reduction_indices")])
    with pytest.raises(UnmatchedOpsError) as info:
        convert(graph, "amanda/onnx/17")
    paths = {path: reasons for path, _, reasons in info.value.ops}
    assert set(paths) == {"bn", "m", "u"}
    assert "is_training" in " ".join(paths["bn"]) and "not a Const" in " ".join(paths["m"])
    passed = convert(graph, "amanda/onnx/17", on_unmatched="pass")
    assert passed.child("u").attrs["namespace"] == TF


# --- TensorFlow itself, where it is installed -----------------------------------------------------

def _graph_def(tf: Any, graph: Container) -> Any:
    """The amanda TensorFlow graph as a GraphDef: inputs in OpDef order, attrs typed by the vocabulary."""
    from tensorflow.python.framework import op_def_registry

    from amanda.namespaces import namespace

    vocabulary = namespace(graph.namespace)
    graph_def = tf.compat.v1.GraphDef()
    flat = amanda.flatten(graph)
    for path, node in flat.ops.items():
        nd = graph_def.node.add(name=node.name, op=node.type)
        fed = {e.dst.port: e.src for e in flat.edges if e.dst.op == path and e.dst.port != -1}
        opdef = op_def_registry.get(node.type)
        for arg in opdef.input_arg:
            if arg.number_attr or arg.type_list_attr:
                ports = sorted((p for p in fed if p.startswith(arg.name + "_")), key=lambda p: int(p.rsplit("_", 1)[1]))
            else:
                ports = [arg.name]
            for port in ports:
                src = fed[port]
                producer = flat.ops[src.op]
                index = list(producer.output_names).index(src.port)
                nd.input.append(f"{producer.name}:{index}")
        for e in flat.edges:
            if e.dst.op == path and e.dst.port == -1:
                nd.input.append("^" + flat.ops[e.src.op].name)
        schema = vocabulary.schema(node.type)
        for key, value in node.attrs.items():
            kind = schema.attr(key).type
            av = nd.attr[key]
            if kind == "dtype":
                av.type = tf.as_dtype(value).as_datatype_enum
            elif kind == "shape":
                av.shape.CopyFrom(tf.TensorShape(list(value)).as_proto())
            elif kind == "tensor":
                av.tensor.CopyFrom(tf.make_tensor_proto(np.asarray(value)))
            elif kind == "bool":
                av.b = bool(value)
            elif kind == "int":
                av.i = int(value)
            elif kind == "float":
                av.f = float(value)
            elif kind == "string":
                av.s = str(value).encode()
            elif kind == "ints":
                av.list.i.extend(int(v) for v in value)
            else:
                raise AssertionError(f"attr kind {kind}")
    return graph_def


@pytest.mark.parametrize("case", [c for c in CASES if c.real_tf], ids=lambda c: c.id)
def test_tensorflow_itself_agrees(case):
    """TensorFlow running the same graph (as a GraphDef) gives what onnxruntime gives for the converted one."""
    tf = pytest.importorskip("tensorflow")
    graph = case.graph()
    with tf.Graph().as_default() as g:
        tf.compat.v1.import_graph_def(_graph_def(tf, graph), name="")
        inits = [tf.compat.v1.assign(g.get_tensor_by_name(f"{n[4:]}:0"), v)
                 for n, v in case.feeds.items() if n.startswith("var:")]
        with tf.compat.v1.Session(graph=g) as session:
            session.run(inits)  # variables hold their values; placeholders are fed
            feeds = {g.get_tensor_by_name(f"{n}:0"): v for n, v in case.feeds.items() if not n.startswith("var:")}
            op_name, port = case.fetch.split(":")
            index = list(graph.child(op_name).output_names).index(port)
            want = session.run(g.get_tensor_by_name(f"{op_name}:{index}"), feeds)
    got, _ = run_onnx(case)
    np.testing.assert_allclose(got, want, rtol=max(case.rtol, 1e-5), atol=1e-5)


def test_tensorflow_builder_infers_types_and_sets_the_namespace():
    """The dense layer built with TensorFlow's ops needs no T: each op's T is its input's dtype
    (through ops no type rule covers), arrays become TF Consts, and the model is in
    amanda/tensorflow/1.13.1, so convert needs no source=; onnxruntime gives numpy's relu(x @ w + b)."""
    from amanda.build import Input, Ops, model
    from amanda.io.onnx import to_onnx

    tf = Ops("amanda/tensorflow/1.13.1")
    x = Input("x", "float32", (None, 4))
    w = tf.VariableV2(shape=[4, 3], dtype="float32", name="kernel")
    b = np.array([0.5, -1.0, 2.0], np.float32)
    hidden = tf.BiasAdd(tf.MatMul(x, w, name="mm"), b, name="bias")
    out = tf.Reshape(tf.Relu(hidden, name="relu"), np.array([-1], np.int32), name="flat")
    assert out.type.dtype == "float32"
    built = model([x], {"y": out})
    assert built.namespace == "amanda/tensorflow/1.13.1" and validate(built) == []
    ts = {c.name: c.attrs.get("T") for c in built.children if "T" in c.attrs}
    assert ts == {"mm": "float32", "bias": "float32", "relu": "float32", "flat": "float32"}
    assert {c.type for c in built.children} == {"VariableV2", "MatMul", "BiasAdd", "Relu", "Reshape", "Const"}
    session = ort.InferenceSession(to_onnx(convert(built, "amanda/onnx/17")).SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    xv, wv = f32(2, 4), f32(4, 3)
    got = session.run(["y"], {"x": xv, "kernel": wv})[0]
    np.testing.assert_allclose(got, np.maximum(xv @ wv + b, 0).reshape(-1), rtol=1e-5, atol=1e-5)


def test_tensorflow_builder_types_t_from_its_own_port():
    """T comes from the port it constrains: Reshape's T is its tensor's (int64), not its shape's."""
    from amanda.build import Input, Ops

    tf = Ops("amanda/tensorflow/2.21.0")
    flat = tf.Reshape(np.array([1, 2], np.int32), Input("x", "int64", (2,)))
    assert flat.producer.op.attrs["T"] == "int32" and flat.producer.op.attrs["Tshape"] == "int64"
