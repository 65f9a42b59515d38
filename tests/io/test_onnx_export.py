"""ONNX export: valid models onnxruntime runs with the same results, and lossless round trips."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper

import amanda
from amanda import Container, FormatError, Port, op
from amanda.io.onnx import DEFAULT_OPSET, MAX_IR_VERSION, dump_onnx, from_onnx, load_onnx, to_onnx
from tests.fixtures.onnx import onnx_models as models

vi = helper.make_tensor_value_info
F32 = {"dtype": "float32", "shape": (2, 3)}


def _check(proto):
    onnx.checker.check_model(proto, full_check=True)
    assert proto.ir_version <= MAX_IR_VERSION
    return proto


@pytest.mark.parametrize("name", sorted(models.BUILDERS))
def test_export_runs_in_onnxruntime_with_the_same_results(name):
    """export(import(m)) passes the full checker and onnxruntime gives exactly m's outputs."""
    original = models.BUILDERS[name]()
    exported = _check(to_onnx(from_onnx(original)))
    feeds = models.feeds(name)
    for want, got in zip(models.run(original, feeds), models.run(exported, feeds)):
        assert want.dtype == got.dtype and np.array_equal(want, got)


@pytest.mark.parametrize("name", sorted(models.BUILDERS))
def test_import_export_import_is_import(name):
    """import(export(import(x))) == import(x), and every op keeps its uid (weights pair up again)."""
    first = from_onnx(models.BUILDERS[name]())
    second = from_onnx(to_onnx(first))
    assert second == first
    uids = {path: node.uid for path, node, _ in amanda.walk(first)}
    assert {path: node.uid for path, node, _ in amanda.walk(second)} == uids
    assert second.uid == first.uid


def test_weights_pair_by_uid_after_a_file_round_trip(tmp_path):
    """Initializer values found by uid before a dump are found under the same uids after a load."""
    c = from_onnx(models.mlp())
    weights = {op.uid: op.attrs["value"] for op in c if op.attrs.get("initializer")}
    dump_onnx(c, tmp_path / "m.onnx")
    back = load_onnx(tmp_path / "m.onnx")
    again = {op.uid: op.attrs["value"] for op in back if op.attrs.get("initializer")}
    assert again.keys() == weights.keys()
    assert all(np.array_equal(again[u], weights[u]) for u in weights)


def test_dump_and_load_through_amanda_entry_points(tmp_path):
    """``amanda.dump(c, 'x.onnx')`` and ``amanda.load`` round-trip a container; the container is unchanged."""
    c = from_onnx(models.cnn())
    snapshot = amanda.dumps(c)
    amanda.dump(c, tmp_path / "cnn.onnx")
    assert amanda.dumps(c) == snapshot
    assert amanda.load(tmp_path / "cnn.onnx") == c
    _check(onnx.load(tmp_path / "cnn.onnx"))


def test_external_data_dump_and_reload(tmp_path):
    """``external_data=True`` writes tensors to a data file (replaced on a second dump) and loads back."""
    c = from_onnx(models.mlp((8, 64, 4)))
    path = tmp_path / "big.onnx"
    dump_onnx(c, path, external_data=True, size_threshold=64)
    data = tmp_path / "big.onnx.data"
    size = data.stat().st_size
    assert size >= 8 * 64 * 4
    dump_onnx(c, path, external_data=True, size_threshold=64)
    assert data.stat().st_size == size
    assert load_onnx(path, lazy=False) == c
    onnx.checker.check_model(str(path), full_check=True)


def test_model_fields_survive_and_ir_version_is_clamped():
    """Model fields and metadata come back; an IR version onnxruntime cannot load is lowered."""
    original = models.mlp()
    original.ir_version = 14
    exported = to_onnx(from_onnx(original))
    assert exported.ir_version == MAX_IR_VERSION
    assert exported.producer_name == "tests" and exported.model_version == 3
    assert {p.key: p.value for p in exported.metadata_props}["author"] == "amanda tests"
    old = models.mlp()
    old.ir_version = 8
    assert to_onnx(from_onnx(old)).ir_version == 8


def _nested() -> Container:
    """x -> block(matmul, relu) -> add(x) -> y, with a control edge the export drops."""
    w = op(
        "Constant",
        "w",
        outputs=["output"],
        attrs={"value": np.eye(3, dtype=np.float32) * 2, "initializer": True},
    )
    mm = op("MatMul", "mm", inputs=["A", "B"], outputs=["Y"])
    relu = op("Relu", "relu", inputs=["X"], outputs=["Y"])
    block = Container(
        "Block",
        "block",
        inputs=["x"],
        outputs=["y"],
        children=[w, mm, relu],
        edges=[
            ("block:x", "mm:A"),
            ("w:output", "mm:B"),
            ("mm:Y", "relu:X"),
            ("relu:Y", "block:y"),
        ],
        attrs={"debug": True},
    )
    add = op("Add", "add", inputs=["A", "B"], outputs=["C"], attrs={"debug": True})
    return Container(
        None,
        "net",
        inputs=[Port("x", attrs=F32)],
        outputs=[Port("y", attrs=F32)],
        children=[block, add],
        edges=[
            ("net:x", "block:x"),
            ("block:y", "add:A"),
            ("net:x", "add:B"),
            ("add:C", "net:y"),
            ("block:-1", "add:-1"),
        ],
        attrs={"namespace": "amanda/onnx/17"},
    )


def test_nested_containers_are_exported_flat():
    """Nested ops are named by their scope paths (as TorchScript names nodes); control edges
    vanish; the model computes the same thing and imports as the same tree."""
    exported = _check(to_onnx(_nested()))
    assert [n.name for n in exported.graph.node] == ["/block/mm", "/block/relu", "add"]
    assert [t.name for t in exported.graph.initializer] == ["block/w:output"]
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2
    (y,) = models.run(exported, {"x": x})
    assert np.allclose(y, np.maximum(x @ (np.eye(3) * 2), 0) + x)
    back = from_onnx(exported)
    assert (
        back.child("add").attrs["debug"] is True
    )  # kept in metadata_props, not as an ONNX attribute
    assert [a.name for a in exported.graph.node[2].attribute] == []


def test_ops_without_namespace_use_the_default_opset():
    """A container that names no namespace is exported in opset ``DEFAULT_OPSET`` of ai.onnx."""
    c = Container(
        None,
        "g",
        inputs=[Port("x", attrs=F32)],
        outputs=[Port("y", attrs=F32)],
        children=[op("Relu", "r", ["X"], ["Y"])],
        edges=[("g:x", "r:X"), ("r:Y", "g:y")],
    )
    exported = _check(to_onnx(c))
    assert [(o.domain, o.version) for o in exported.opset_import] == [("", DEFAULT_OPSET)]
    assert exported.producer_name == "amanda"


def test_untyped_outputs_are_inferred_and_renamed_outputs_get_identities():
    """An output port without dtype gets its type by shape inference; an output fed straight by an
    input of another name goes through an Identity node."""
    c = Container(
        None,
        "g",
        inputs=[Port("x", attrs=F32)],
        outputs=["y", Port("copy", attrs=F32)],
        children=[op("Relu", "r", ["X"], ["Y"])],
        edges=[("g:x", "r:X"), ("r:Y", "g:y"), ("g:x", "g:copy")],
        attrs={"namespace": "amanda/onnx/17"},
    )
    exported = _check(to_onnx(c))
    assert exported.graph.output[0].type.tensor_type.elem_type == TensorProto.FLOAT
    assert [n.op_type for n in exported.graph.node] == ["Relu", "Identity"]
    x = np.ones((2, 3), np.float32)
    y, copy = models.run(exported, {"x": x})
    assert np.array_equal(copy, x) and np.array_equal(y, x)


def test_a_graph_of_only_initializers_and_passthrough():
    """A model with no nodes (an output that is an input, one that is an initializer) round-trips."""
    graph = helper.make_graph(
        [],
        "g",
        [vi("x", TensorProto.FLOAT, [2])],
        [vi("x", TensorProto.FLOAT, [2]), vi("w", TensorProto.FLOAT, [2])],
        [numpy_helper.from_array(np.ones(2, np.float32), "w")],
    )
    first = from_onnx(models.model(graph))
    exported = _check(to_onnx(first))
    assert from_onnx(exported) == first
    x = np.array([1, 2], np.float32)
    assert [v.tolist() for v in models.run(exported, {"x": x})] == [[1, 2], [1, 1]]
    passthrough = Container(
        None, "p", inputs=[Port("x", attrs=F32)], outputs=[Port("x", attrs=F32)], edges=[("p:x", "p:x")]
    )
    assert [o.name for o in _check(to_onnx(passthrough)).graph.output] == ["x"]


def test_strings_functions_and_defaults_round_trip():
    """String tensors, local functions and inputs with defaults survive export and still run."""
    fn = helper.make_function(
        "local",
        "Double",
        ["a"],
        ["b"],
        [helper.make_node("Add", ["a", "a"], ["b"])],
        [helper.make_opsetid("", 17)],
    )
    nodes = [
        helper.make_node("Add", ["x", "bias"], ["s"], name="add"),
        helper.make_node("Double", ["s"], ["y"], name="double", domain="local"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [vi("x", TensorProto.FLOAT, [3]), vi("bias", TensorProto.FLOAT, [3])],
        [vi("y", TensorProto.FLOAT, [3]), vi("names", TensorProto.STRING, [2])],
        [
            numpy_helper.from_array(np.ones(3, np.float32), "bias"),
            numpy_helper.from_array(np.array([b"a", b"bc"], dtype=object), "names"),
        ],
    )
    original = models.model(graph, {"": 17, "local": 1})
    original.functions.append(fn)
    first = from_onnx(original)
    exported = _check(to_onnx(first))
    assert from_onnx(exported) == first
    assert [i.name for i in exported.graph.input] == ["x", "bias"]
    x = np.array([0, 1, 2], np.float32)
    for feeds in ({"x": x}, {"x": x, "bias": np.full(3, 0.5, np.float32)}):
        want, got = models.run(original, feeds), models.run(exported, feeds)
        assert all(np.array_equal(a, b) for a, b in zip(want, got))
    assert got[1].tolist() == ["a", "bc"]


def test_sparse_initializers_round_trip():
    """A sparse initializer is written back as a sparse initializer with its indices and dims."""
    sparse = helper.make_sparse_tensor(
        numpy_helper.from_array(np.array([2.0], np.float32), "sp"),
        numpy_helper.from_array(np.array([1], np.int64)),
        [3],
    )
    graph = helper.make_graph(
        [helper.make_node("Identity", ["sp"], ["y"], name="id")],
        "g",
        [],
        [vi("y", TensorProto.FLOAT, [3])],
        sparse_initializer=[sparse],
    )
    first = from_onnx(models.model(graph))
    exported = to_onnx(first, check=False)  # no opset-17 op reads a sparse tensor as this one does
    (written,) = exported.graph.sparse_initializer
    assert (
        written.values.name == "sp"
        and list(written.dims) == [3]
        and list(written.indices.int64_data or np.frombuffer(written.indices.raw_data, np.int64))
        == [1]
    )
    assert from_onnx(exported) == first


def test_custom_attributes_round_trip_with_type_hints():
    """An op of an unknown domain keeps its attributes, empty lists typed by the stored hint."""
    node = helper.make_node(
        "Fancy", ["x"], ["y"], name="fancy", domain="com.example", level=2, scale=0.5, names=["a"]
    )
    node.attribute.append(helper.make_attribute("empty", [], attr_type=onnx.AttributeProto.FLOATS))
    graph = helper.make_graph(
        [node], "g", [vi("x", TensorProto.FLOAT, [2])], [vi("y", TensorProto.FLOAT, [2])]
    )
    first = from_onnx(models.model(graph, {"": 17, "com.example": 1}))
    exported = to_onnx(first)
    attrs = {a.name: a for a in exported.graph.node[0].attribute}
    assert attrs["empty"].type == onnx.AttributeProto.FLOATS and attrs["level"].i == 2
    assert exported.graph.node[0].domain == "com.example"
    assert from_onnx(exported) == first


def test_export_errors_name_the_op():
    """Ops outside ONNX, mixed opsets, phase-dependent inputs and untyped inputs raise FormatError."""
    relu = op("Relu", "r", ["X"], ["Y"])
    base = {
        "inputs": [Port("x", attrs=F32)],
        "outputs": [Port("y", attrs=F32)],
        "edges": [("g:x", "r:X"), ("r:Y", "g:y")],
    }
    tf = Container(
        None, "g", children=[relu], attrs={"namespace": "amanda/tensorflow/1.13.1"}, **base
    )
    with pytest.raises(FormatError, match="r is in namespace 'amanda/tensorflow/1.13.1'"):
        to_onnx(tf)
    mixed = Container(
        None,
        "g",
        inputs=[Port("x", attrs=F32)],
        outputs=[Port("y", attrs=F32)],
        children=[relu, op("Neg", "n", ["X"], ["Y"], attrs={"namespace": "amanda/onnx/13"})],
        edges=[("g:x", "r:X"), ("r:Y", "n:X"), ("n:Y", "g:y")],
        attrs={"namespace": "amanda/onnx/17"},
    )
    with pytest.raises(FormatError, match="opsets 17 and 13"):
        to_onnx(mixed)
    phased = Container(
        None,
        "g",
        inputs=[Port("x", attrs=F32), Port("z", attrs=F32)],
        outputs=[Port("y", attrs=F32)],
        children=[relu],
        edges=[
            ("g:x", "r:X", {"phase": "train"}),
            ("g:z", "r:X", {"phase": "inference"}),
            ("r:Y", "g:y"),
        ],
    )
    with pytest.raises(FormatError, match="amanda.bind"):
        to_onnx(phased)
    untyped = Container(
        None,
        "g",
        inputs=["x"],
        outputs=[Port("y", attrs=F32)],
        children=[relu],
        edges=[("g:x", "r:X"), ("r:Y", "g:y")],
    )
    with pytest.raises(FormatError, match="input port 'x' of g has no dtype"):
        to_onnx(untyped)
    with pytest.raises(FormatError, match="expected a Container"):
        to_onnx("not a container")  # type: ignore[arg-type]


def test_the_effective_view_of_an_edited_wrapper_is_exported():
    """A wrapper that tombstones an inner edge and rewires around it exports its effective view:
    onnxruntime computes what the same edit made by hand on the ONNX model computes."""
    inner = from_onnx(models.mlp())
    wrapper = Container(
        None,
        "wrapper",
        inputs=[Port("x", attrs={"dtype": "float32", "shape": ("batch", 8)})],
        outputs=[Port("probs", attrs={"dtype": "float32", "shape": ("batch", 4)})],
        children=[inner],
        edges=[
            ("wrapper:x", "mlp:x"),
            ("mlp:probs", "wrapper:probs"),
            ((("mlp", "dense0"), "Y"), (("mlp", "dense1"), "A")),
        ],
        tombstones=[((("mlp", "relu0"), "Y"), (("mlp", "dense1"), "A"))],
    )
    exported = _check(to_onnx(wrapper))
    by_hand = models.mlp()
    by_hand.graph.node[2].input[0] = "h0"  # dense1 reads dense0's output, skipping relu0
    feeds = models.feeds("mlp")
    assert np.array_equal(models.run(exported, feeds)[0], models.run(by_hand, feeds)[0])
    dense0 = next(n for n in exported.graph.node if n.name == "/mlp/dense0")  # nested: named by scope path
    assert {p.key: p.value for p in dense0.metadata_props}["layer"] == "first"
    assert {p.key: p.value for p in exported.metadata_props}["amanda.uid"] == wrapper.uid


def test_attributes_a_schema_does_not_know_are_written_back_as_attributes():
    """An attribute the op's schema lacks, read from a file, is written back as an ONNX attribute;
    one set in amanda travels in metadata_props instead (so the model stays valid)."""
    node = helper.make_node("Relu", ["x"], ["y"], name="relu", legacy=3)
    graph = helper.make_graph(
        [node], "g", [vi("x", TensorProto.FLOAT, [2])], [vi("y", TensorProto.FLOAT, [2])]
    )
    first = from_onnx(models.model(graph))
    assert first.child("relu").attrs["onnx_node"] == {"attr_types": {"legacy": "int"}}
    exported = to_onnx(first, check=False)  # the checker refuses `legacy`, as ONNX would
    assert [(a.name, a.i) for a in exported.graph.node[0].attribute] == [("legacy", 3)]
    tagged = first.evolve(children=[first.child("relu").with_attrs(tag="mine")])
    written = to_onnx(tagged, check=False).graph.node[0]
    assert [a.name for a in written.attribute] == ["legacy"]
    assert {p.key: p.value for p in written.metadata_props}["amanda.attr.tag"] == '"mine"'
    assert from_onnx(to_onnx(tagged, check=False)).child("relu").attrs["tag"] == "mine"


def test_a_captured_value_named_like_a_formal_port():
    """An outer value called ``cond`` read by an If body becomes the op's port ``cond_captured``
    (remembering its name), and the export still reads the right value."""
    then = helper.make_graph(
        [helper.make_node("Neg", ["cond"], ["t"], name="neg")],
        "then",
        [],
        [vi("t", TensorProto.FLOAT, [2])],
    )
    other = helper.make_graph(
        [helper.make_node("Abs", ["cond"], ["e"], name="abs")],
        "else",
        [],
        [vi("e", TensorProto.FLOAT, [2])],
    )
    nodes = [
        helper.make_node("Relu", ["x"], ["cond"], name="relu"),
        helper.make_node("If", ["c"], ["y"], name="if", then_branch=then, else_branch=other),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [vi("x", TensorProto.FLOAT, [2]), vi("c", TensorProto.BOOL, [])],
        [vi("y", TensorProto.FLOAT, [2])],
    )
    original = models.model(graph)
    first = from_onnx(original)
    if_op = first.child("if")
    assert if_op.inputs[1] == Port("cond_captured", attrs={"captured": True, "onnx_name": "cond"})
    exported = _check(to_onnx(first))
    assert from_onnx(exported) == first
    for flag in (True, False):
        feeds = {"x": np.array([-1, 2], np.float32), "c": np.array(flag)}
        assert np.array_equal(models.run(original, feeds)[0], models.run(exported, feeds)[0])


def test_tags_on_initializers_survive():
    """Attributes added to an initializer op (a tag) travel in the tensor's metadata_props."""
    c = from_onnx(models.mlp())
    tagged = c.evolve(
        children=[ch.with_attrs(trainable=False) if ch.name == "W0" else ch for ch in c.children]
    )
    back = from_onnx(to_onnx(tagged))
    assert back.child("W0").attrs["trainable"] is False and back == tagged
