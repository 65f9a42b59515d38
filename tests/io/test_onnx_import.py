"""ONNX import: ports, ops, attributes, initializers, value info, namespaces, bodies, metadata."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper

import amanda
from amanda import SELF, Endpoint
from amanda.io.onnx import from_onnx, load_onnx
from tests.fixtures.onnx import onnx_models as models

vi = helper.make_tensor_value_info


def _one_node(node, inputs, outputs, inits=(), opsets=None, **graph_fields):
    graph = helper.make_graph([node], "g", inputs, outputs, list(inits), **graph_fields)
    return models.model(graph, opsets)


def test_mlp_ports_ops_and_edges():
    """Graph inputs/outputs become the top ports with dtype and shape; nodes become ops wired by edges."""
    c = from_onnx(models.mlp())
    assert c.name == "mlp" and c.namespace == "amanda/onnx/17"
    assert c.inputs == (amanda.Port("x", attrs={"dtype": "float32", "shape": ("batch", 8)}),)
    assert c.outputs == (amanda.Port("probs", attrs={"dtype": "float32", "shape": ("batch", 4)}),)
    dense = c.child("dense0")
    assert dense.type == "Gemm" and dense.input_names == ("A", "B", "C")
    assert dense.attrs["alpha"] == 1.0 and isinstance(dense.attrs["alpha"], float)
    assert Endpoint(SELF, "x") in {e.src for e in c.edges if e.dst == Endpoint(("dense0",), "A")}
    assert [op.name for op in c.sorted()][-1] == "softmax"


def test_initializers_are_constant_ops_a_query_can_tell_apart():
    """Initializers become read-only ``Constant`` ops with ``initializer: true``; nodes do not."""
    c = from_onnx(models.mlp())
    w0 = c.child("W0")
    assert w0.type == "Constant" and w0.attrs["initializer"] is True
    assert w0.outputs == (amanda.Port("output", attrs={"onnx_name": "W0"}),)
    value = w0.attrs["value"]
    assert value.dtype == np.float32 and value.shape == (8, 16) and not value.flags.writeable
    expected = numpy_helper.to_array(models.mlp().graph.initializer[0])
    assert np.array_equal(value, expected)
    not_init = [op.name for op in c.children if not op.attrs.get("initializer")]
    assert not_init == ["dense0", "relu0", "dense1", "relu1", "dense2", "softmax"]


def test_value_info_types_go_on_the_producer_port():
    """value_info dtypes and shapes become attributes of the output port producing the value."""
    c = from_onnx(models.mlp())
    assert c.child("dense0").outputs[0] == amanda.Port(
        "Y", attrs={"onnx_name": "h0", "dtype": "float32", "shape": ("batch", 16)}
    )
    assert c.child("relu0").outputs[0] == amanda.Port("Y", attrs={"onnx_name": "a0"})


def test_model_fields_and_metadata_become_attrs():
    """Model fields and metadata_props go to the top's ``onnx`` attr, node metadata to ``metadata``."""
    c = from_onnx(models.mlp())
    info = c.attrs["onnx"]
    assert info["ir_version"] == models.IR_VERSION and info["producer_name"] == "tests"
    assert info["model_version"] == 3 and info["doc_string"] == "a small MLP"
    assert info["metadata_props"] == {"author": "amanda tests"}
    assert info["opset_import"] == {"": 17}
    assert c.child("dense0").attrs["metadata"] == {"layer": "first"}
    assert "metadata" not in c.child("dense1").attrs


def test_cnn_optional_inputs_and_variadic_ports():
    """An omitted middle input is a declared port without an edge; variadic values are numbered."""
    c = from_onnx(models.cnn())
    clip = c.child("relu6")
    assert clip.input_names == ("input", "min", "max")
    fed = {e.dst.port for e in c.edges if e.dst.op == ("relu6",)}
    assert fed == {"input", "max"}
    assert c.child("concat").input_names == ("inputs_0", "inputs_1")
    conv2 = c.child("conv2")
    assert conv2.input_names == ("X", "W")  # the omitted trailing bias is not declared
    assert conv2.attrs["pads"] == (1, 1, 1, 1)
    assert c.child("bn").attrs["epsilon"] == 1e-05  # the float32 attribute, as its shortest decimal


def test_attention_names_split_outputs_and_generated_names():
    """Unnamed nodes get ``<op_type>_<index>`` names; Split's variadic outputs keep their value names."""
    c = from_onnx(models.attention())
    split = c.child("split")
    assert split.output_names == ("outputs_0", "outputs_1", "outputs_2")
    assert [p.attrs["onnx_name"] for p in split.outputs] == ["q", "k", "v"]
    assert c.has_child("Reshape_2") and c.child("Reshape_2").attrs["onnx_node"] == {"name": ""}
    assert c.child("reshape").type == "Reshape"


def test_duplicate_and_clashing_names_are_renamed_and_remembered():
    """A node whose name is taken (by another node or the graph) gets a fresh name and keeps the old."""
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="n"),
        helper.make_node("Neg", ["a"], ["b"], name="n"),
        helper.make_node("Abs", ["b"], ["y"], name="g"),
    ]
    graph = helper.make_graph(
        nodes, "g", [vi("x", TensorProto.FLOAT, [2])], [vi("y", TensorProto.FLOAT, [2])]
    )
    c = from_onnx(models.model(graph))
    assert [op.name for op in c.children] == ["n", "Neg_1", "Abs_2"]
    assert c.child("Neg_1").attrs["onnx_node"] == {"name": "n"}
    assert c.child("Abs_2").attrs["onnx_node"] == {"name": "g"}


def test_if_and_loop_bodies_are_containers_with_captured_ports():
    """Bodies become containers in attrs; outer values they read are captured ports on body and op."""
    c = from_onnx(models.control_flow())
    if_op = c.child("if")
    then = if_op.attrs["then_branch"]
    assert isinstance(then, amanda.Container) and then.name == "then_branch"
    assert then.inputs == (
        amanda.Port("h", attrs={"captured": True}),
        amanda.Port("w", attrs={"captured": True}),
    )
    assert then.namespace == "amanda/onnx/17"
    assert if_op.input_names == ("cond", "h", "w")
    assert all(p.attrs.get("captured") for p in if_op.inputs[1:])
    producers = {e.dst.port: e.src for e in c.edges if e.dst.op == ("if",)}
    assert producers["h"] == Endpoint(("relu",), "Y") and producers["w"] == Endpoint(
        ("w",), "output"
    )
    loop = c.child("loop")
    assert loop.input_names == ("M", "cond", "v_initial_0", "w")
    body = loop.attrs["body"]
    assert body.input_names == ("iter", "cond_in", "state", "w")
    assert body.inputs[0].attrs == {"dtype": "int64", "shape": ()}
    assert [op.name for op in body.children] == ["body_add", "body_cond", "body_scan"]


def test_nested_bodies_capture_through_every_level():
    """A value read two bodies down is captured by the inner body, the outer body and both ops."""
    inner = helper.make_graph(
        [helper.make_node("Add", ["a", "w"], ["o"], name="inner_add")],
        "inner",
        [],
        [vi("o", TensorProto.FLOAT, [2])],
    )
    inner_else = helper.make_graph(
        [helper.make_node("Identity", ["a"], ["o2"], name="inner_id")],
        "inner_else",
        [],
        [vi("o2", TensorProto.FLOAT, [2])],
    )
    outer = helper.make_graph(
        [
            helper.make_node(
                "If", ["c"], ["r"], name="inner_if", then_branch=inner, else_branch=inner_else
            )
        ],
        "outer",
        [],
        [vi("r", TensorProto.FLOAT, [2])],
    )
    outer_else = helper.make_graph(
        [helper.make_node("Identity", ["a"], ["r2"], name="else_id")],
        "outer_else",
        [],
        [vi("r2", TensorProto.FLOAT, [2])],
    )
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="relu"),
        helper.make_node(
            "If", ["c"], ["y"], name="outer_if", then_branch=outer, else_branch=outer_else
        ),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [vi("x", TensorProto.FLOAT, [2]), vi("c", TensorProto.BOOL, [])],
        [vi("y", TensorProto.FLOAT, [2])],
        [numpy_helper.from_array(np.ones(2, np.float32), "w")],
    )
    c = from_onnx(models.model(graph))
    outer_if = c.child("outer_if")
    assert outer_if.input_names == (
        "cond",
        "a",
        "c",
        "w",
    )  # else_branch (a) comes first in the file
    body = outer_if.attrs["then_branch"]
    assert body.input_names == ("c", "a", "w")
    inner_if = body.child("inner_if")
    assert inner_if.input_names == ("cond", "a", "w")
    assert inner_if.attrs["then_branch"].input_names == ("a", "w")


def test_other_domains_carry_their_own_namespace():
    """Ops of ai.onnx.ml get ``amanda/onnx-ml/<v>``; unknown domains ``amanda/onnx/<domain>/<v>``."""
    c = from_onnx(models.custom_domains())
    assert c.child("norm").attrs["namespace"] == "amanda/onnx-ml/3"
    assert c.child("norm").input_names == ("X",)
    assert "namespace" not in c.child("relu").attrs
    node = helper.make_node(
        "Fancy", ["x", "x"], ["y", "z"], name="fancy", domain="com.example", level=2
    )
    m = _one_node(
        node,
        [vi("x", TensorProto.FLOAT, [2])],
        [vi("y", TensorProto.FLOAT, [2])],
        opsets={"": 17, "com.example": 1},
    )
    fancy = from_onnx(m).child("fancy")
    assert fancy.attrs["namespace"] == "amanda/onnx/com.example/1"
    assert fancy.input_names == ("input_0", "input_1") and fancy.output_names == (
        "output_0",
        "output_1",
    )
    assert fancy.attrs["level"] == 2


def test_every_attribute_kind_is_typed():
    """Attributes of every kind become plain Python values, arrays, containers or mappings."""
    tensor = numpy_helper.from_array(np.arange(4, dtype=np.int32).reshape(2, 2))
    body = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "body",
        [vi("x", TensorProto.FLOAT, [1])],
        [vi("y", TensorProto.FLOAT, [1])],
    )
    sparse = helper.make_sparse_tensor(
        numpy_helper.from_array(np.array([1.5], np.float32)),
        numpy_helper.from_array(np.array([3], np.int64)),
        [6],
    )
    node = helper.make_node(
        "Custom",
        ["x"],
        ["y"],
        name="custom",
        domain="com.example",
        f=0.1,
        i=3,
        s="text",
        raw=b"\xff\xfe",
        t=tensor,
        g=body,
        fs=[0.5, 2.0],
        is_=[1, 2],
        ss=["a", "b"],
        ts=[tensor],
        gs=[body],
        sp=sparse,
    )
    node.attribute.append(
        helper.make_attribute("empty_ints", [], attr_type=onnx.AttributeProto.INTS)
    )
    node.attribute.append(
        helper.make_attribute("empty_floats", [], attr_type=onnx.AttributeProto.FLOATS)
    )
    tp = onnx.AttributeProto(name="tp", type=onnx.AttributeProto.TYPE_PROTO)
    tp.tp.CopyFrom(
        helper.make_sequence_type_proto(helper.make_tensor_type_proto(TensorProto.INT64, ["n"]))
    )
    node.attribute.append(tp)
    m = _one_node(
        node,
        [vi("x", TensorProto.FLOAT, [1])],
        [vi("y", TensorProto.FLOAT, [1])],
        opsets={"": 17, "com.example": 1},
    )
    attrs = from_onnx(m).child("custom").attrs
    assert (
        attrs["f"] == 0.1
        and attrs["i"] == 3
        and attrs["s"] == "text"
        and attrs["raw"] == b"\xff\xfe"
    )
    assert attrs["t"].dtype == np.int32 and attrs["t"].tolist() == [[0, 1], [2, 3]]
    assert isinstance(attrs["g"], amanda.Container) and attrs["g"].input_names == ("x",)
    assert attrs["fs"] == (0.5, 2.0) and attrs["is_"] == (1, 2) and attrs["ss"] == ("a", "b")
    assert len(attrs["ts"]) == 1 and isinstance(attrs["gs"][0], amanda.Container)
    assert attrs["sp"]["dims"] == (6,) and attrs["sp"]["indices"].tolist() == [3]
    assert attrs["tp"] == {"sequence": {"tensor": {"dtype": "int64", "shape": ("n",)}}}
    assert attrs["empty_ints"] == () and attrs["empty_floats"] == ()
    assert attrs["onnx_node"]["attr_types"] == {"empty_ints": "ints", "empty_floats": "floats"}


def test_uids_come_back_from_metadata_props():
    """``amanda.uid`` in node, tensor and model metadata_props becomes the uid, not metadata."""
    m = models.mlp()
    m.graph.node[1].metadata_props.add(key="amanda.uid", value="relu-uid")
    m.graph.initializer[0].metadata_props.add(key="amanda.uid", value="w0-uid")
    m.metadata_props.add(key="amanda.uid", value="model-uid")
    c = from_onnx(m)
    assert (
        c.child("relu0").uid == "relu-uid"
        and c.child("W0").uid == "w0-uid"
        and c.uid == "model-uid"
    )
    assert "metadata" not in c.child("relu0").attrs
    assert c.attrs["onnx"]["metadata_props"] == {"author": "amanda tests"}
    assert from_onnx(models.mlp()).child("relu0").uid != from_onnx(models.mlp()).child("relu0").uid


def test_string_and_exotic_dtype_tensors():
    """String tensors become bytes arrays; bfloat16 and int4 keep their ml_dtypes dtypes."""
    strings = numpy_helper.from_array(np.array([b"ab", b"c"], dtype=object), "s")
    bf16 = helper.make_tensor("bf", TensorProto.BFLOAT16, [2], [1.0, 2.0])
    i4 = helper.make_tensor("i4", TensorProto.INT4, [3], [1, -2, 3])
    graph = helper.make_graph(
        [],
        "g",
        [],
        [
            vi("s", TensorProto.STRING, [2]),
            vi("bf", TensorProto.BFLOAT16, [2]),
            vi("i4", TensorProto.INT4, [3]),
        ],
        [strings, bf16, i4],
    )
    c = from_onnx(models.model(graph))
    assert c.child("s").attrs["value"].tolist() == [b"ab", b"c"]
    assert c.child("bf").attrs["value"].dtype.name == "bfloat16"
    assert c.child("i4").attrs["value"].astype(np.int8).tolist() == [1, -2, 3]
    assert c.outputs[1].attrs == {"dtype": "bfloat16", "shape": (2,)}


def test_sparse_initializer_and_input_with_default():
    """A sparse initializer is a Constant with ``sparse_value``; an initializer that is also a graph
    input is not a port but remembers it (``onnx_node.graph_input``)."""
    sparse = helper.make_sparse_tensor(
        numpy_helper.from_array(np.array([2.0], np.float32), "sp"),
        numpy_helper.from_array(np.array([1], np.int64)),
        [3],
    )
    dense = numpy_helper.from_array(np.ones(3, np.float32), "bias")
    nodes = [helper.make_node("Add", ["sp", "bias"], ["y"], name="add")]
    graph = helper.make_graph(
        nodes,
        "g",
        [vi("bias", TensorProto.FLOAT, [3])],
        [vi("y", TensorProto.FLOAT, [3])],
        [dense],
        sparse_initializer=[sparse],
    )
    c = from_onnx(models.model(graph))
    assert c.input_names == ()
    assert c.child("bias").attrs["onnx_node"] == {"graph_input": True}
    assert c.child("sp").attrs["sparse_value"]["values"].tolist() == [2.0]


def test_non_tensor_value_types_become_type_attrs():
    """Sequence-typed inputs keep their type as a nested ``type`` port attribute."""
    seq = helper.make_tensor_sequence_value_info("xs", TensorProto.FLOAT, None)
    node = helper.make_node("SequenceLength", ["xs"], ["n"], name="len")
    c = from_onnx(_one_node(node, [seq], [vi("n", TensorProto.INT64, [])]))
    assert c.inputs[0].attrs == {"type": {"sequence": {"tensor": {"dtype": "float32"}}}}


def test_functions_are_kept_for_export():
    """A call of a model-local function is a container holding the body (the function lives in
    its calls, not in the ``onnx`` attr); a function no node calls is kept serialized there."""
    fn = helper.make_function(
        "local",
        "Double",
        ["a"],
        ["b"],
        [helper.make_node("Add", ["a", "a"], ["b"])],
        [helper.make_opsetid("", 17)],
    )
    node = helper.make_node("Double", ["x"], ["y"], name="double", domain="local")
    m = _one_node(
        node,
        [vi("x", TensorProto.FLOAT, [2])],
        [vi("y", TensorProto.FLOAT, [2])],
        opsets={"": 17, "local": 1},
    )
    m.functions.append(fn)
    c = from_onnx(m)
    assert "functions" not in c.attrs["onnx"]
    double = c.child("double")
    assert (double.type, double.input_names, double.output_names) == ("Double", ("a",), ("b",))
    assert [op.type for op in double.children] == ["Add"]
    assert "namespace" not in double.attrs and double.attrs["onnx_function"]["domain"] == "local"
    m.functions.append(helper.make_function("local", "Unused", ["a"], ["b"], [], [helper.make_opsetid("", 17)]))
    assert from_onnx(m).attrs["onnx"]["functions"] == (m.functions[1].SerializeToString(),)


def test_load_reads_external_data(tmp_path):
    """``amanda.load`` reads tensors kept in external data files next to the model (lazily: equal
    only to a model naming the same bytes; ``lazy=False`` reads them into memory)."""
    m = models.mlp()
    path = tmp_path / "mlp.onnx"
    onnx.save_model(
        m,
        path,
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location="weights.bin",
        size_threshold=0,
    )
    assert (tmp_path / "weights.bin").exists()
    c = amanda.load(path)
    expected = numpy_helper.to_array(models.mlp().graph.initializer[0])
    assert np.array_equal(c.child("W0").attrs["value"], expected)
    assert c == amanda.load(path) and c != from_onnx(models.mlp())
    assert load_onnx(path, lazy=False) == from_onnx(models.mlp())


def test_load_onnx_matches_from_onnx(tmp_path):
    """``load_onnx(path)`` gives the same container as ``from_onnx`` of the parsed file."""
    path = tmp_path / "cnn.onnx"
    onnx.save(models.cnn(), path)
    assert load_onnx(path) == from_onnx(models.cnn())


def test_a_query_reaches_ops_and_bodies():
    """``walk`` finds every top-level op that is not an initializer; bodies are reachable containers."""
    c = from_onnx(models.control_flow())
    top = [
        path
        for path, node, attrs in amanda.walk(c)
        if len(path) == 1 and not attrs.get("initializer")
    ]
    assert [p[0] for p in top] == ["relu", "total", "positive", "if", "loop"]
    bodies = [v for op in c.children for v in op.attrs.values() if isinstance(v, amanda.Container)]
    assert {b.name for b in bodies} == {"then_branch", "else_branch", "loop_body"}


def test_the_four_queries_work_on_imported_models():
    """``$[?is_op && !(attrs.initializer)]`` finds the nodes; ``$..`` reaches into bodies."""
    select = pytest.importorskip("amanda.query").select
    c = from_onnx(models.control_flow())
    assert select(c, "$[?is_op && !(attrs.initializer)]").paths == (
        ("relu",),
        ("total",),
        ("positive",),
        ("if",),
        ("loop",),
    )
    assert select(c, "$..[?type == 'Mul']").paths == (("if", "then_branch", "then_mul"),)
