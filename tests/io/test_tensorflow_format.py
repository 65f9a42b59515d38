"""TensorFlow's encodings read without TensorFlow: tensors and attributes, input syntax, port
names, the vocabulary chosen by producer, checkpoints, and every malformed input reported as an
AmandaError that names where (never a bare protobuf or Python exception)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("google.protobuf")

import amanda  # noqa: E402
from amanda.errors import AmandaError, ArgumentError, FormatError  # noqa: E402
from amanda.io.tensorflow import dump_graphdef, load_graphdef, load_saved_model  # noqa: E402
from amanda.io.tensorflow.bundle import Bundle  # noqa: E402
from amanda.io.tensorflow.protos import message, require_protobuf  # noqa: E402
from amanda.io.tensorflow.read_graph import from_graph_def  # noqa: E402
from amanda.io.tensorflow.tensors import attr_from_proto, attr_to_proto, tensor_from_proto  # noqa: E402

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "tensorflow"
DT_FLOAT, DT_INT32, DT_STRING, DT_INT64, DT_BOOL, DT_BFLOAT16, DT_HALF = 1, 3, 7, 9, 10, 14, 19


def tensor(dtype: int, shape: list[int], **fields: object) -> object:
    proto = message("tensorflow.TensorProto")(dtype=dtype, **fields)
    for size in shape:
        proto.tensor_shape.dim.add(size=size)
    return proto


def graph(*nodes: tuple, producer: int = 2474) -> object:
    gd = message("tensorflow.GraphDef")()
    gd.versions.producer = producer
    for name, op, inputs in nodes:
        node = gd.node.add(name=name, op=op, input=inputs)
        node.attr["T"].type = DT_FLOAT
    return gd


def test_typed_values_broadcast_the_last_one() -> None:
    assert tensor_from_proto(tensor(DT_FLOAT, [2, 2], float_val=[1.5]), "c").tolist() == [[1.5, 1.5]] * 2
    assert tensor_from_proto(tensor(DT_INT32, [3], int_val=[1, 2]), "c").tolist() == [1, 2, 2]
    assert tensor_from_proto(tensor(DT_INT64, [2]), "c").tolist() == [0, 0]
    assert tensor_from_proto(tensor(DT_BOOL, [2], bool_val=[True]), "c").tolist() == [True, True]
    assert tensor_from_proto(tensor(DT_STRING, [2], string_val=[b"a", b"bc"]), "c").tolist() == [b"a", b"bc"]
    half = np.array([0.5, -2.0], np.float16).view(np.uint16).tolist()
    assert tensor_from_proto(tensor(DT_HALF, [2], half_val=half), "c").tolist() == [0.5, -2.0]
    bf16 = (np.array([1.0, -3.5], np.float32).view(np.uint32) >> 16).tolist()
    assert tensor_from_proto(tensor(DT_BFLOAT16, [2], half_val=bf16), "c").tolist() == [1.0, -3.5]
    raw = np.arange(6, dtype="<f4")
    value = tensor_from_proto(tensor(DT_FLOAT, [2, 3], tensor_content=raw.tobytes()), "c")
    assert value.tolist() == raw.reshape(2, 3).tolist() and not value.flags.writeable


@pytest.mark.parametrize("proto, where", [
    (lambda: tensor(DT_FLOAT, [3], tensor_content=b"\0" * 8), "c.tensor_content"),
    (lambda: tensor(DT_FLOAT, [-1]), "c.tensor_shape"),
    (lambda: tensor(DT_FLOAT, [1 << 20, 1 << 20], float_val=[0.0]), "c.tensor_shape"),
    (lambda: tensor(DT_INT32, [1], int_val=[1, 2]), "c.int_val"),
    (lambda: tensor(20, []), "c.dtype"),
    (lambda: tensor(999, []), "c.dtype"),
])
def test_bad_tensors_name_the_field(proto: object, where: str) -> None:
    with pytest.raises(FormatError) as caught:
        tensor_from_proto(proto(), "c")  # type: ignore[operator]
    assert caught.value.path == where


@pytest.mark.parametrize("build, kind, value", [
    (lambda a: setattr(a, "type", DT_FLOAT), "type", "float32"),
    (lambda a: setattr(a, "s", b"SAME"), "s", "SAME"),
    (lambda a: setattr(a, "s", b"\xff\xfe"), "s", b"\xff\xfe"),
    (lambda a: a.list.i.extend([1, 2]), "list(i)", (1, 2)),
    (lambda a: a.list.type.extend([DT_FLOAT, 20]), "list(type)", ("float32", "resource")),
    (lambda a: a.shape.dim.add(size=-1), "shape", (None,)),
    (lambda a: setattr(a.shape, "unknown_rank", True), "shape", None),
    (lambda a: a.shape.SetInParent(), "shape", ()),
    (lambda a: a.list.SetInParent(), "list", ()),
    (lambda a: setattr(a, "f", 0.1), "f", 0.1),
    (lambda a: setattr(a.func, "name", "body_fn"), "func", "body_fn"),
])
def test_attr_values_read_and_write_back(build: object, kind: str, value: object) -> None:
    proto = message("tensorflow.AttrValue")()
    build(proto)  # type: ignore[operator]
    got, got_kind = attr_from_proto(proto, "n.a")
    assert (got, got_kind) == (value, kind)
    assert attr_to_proto(got, got_kind, "n.a") == proto


def test_input_syntax_ports_and_order() -> None:
    """``x:1`` is the second flat output; ConcatV2's list arg comes first in TensorFlow's order
    (the vocabulary lists it last) and keeps its place on export."""
    gd = graph(("x", "Placeholder", []), ("parts", "Unpack", ["x"]), ("axis", "Const", []),
               ("cat", "ConcatV2", ["parts:1", "parts", "axis", "^x"]))
    g = from_graph_def(gd, "g")
    cat = g.child("cat")
    assert cat.input_names == ("values_0", "values_1", "axis")
    assert g.child("parts").output_names == ("output_0", "output_1")
    edges = {(e.dst.op, e.dst.port): (e.src.op, e.src.port) for e in g.edges}
    assert edges[(("cat",), "values_0")] == (("parts",), "output_1")
    assert edges[(("cat",), -1)] == (("x",), -1)
    out = message("tensorflow.GraphDef")()
    from amanda.io.tensorflow.write_graph import to_graph_def

    out = to_graph_def(g)
    assert [list(n.input) for n in out.node if n.name == "cat"] == [["parts:1", "parts", "axis", "^x"]]


def test_vocabulary_follows_the_producer() -> None:
    old = from_graph_def(graph(("x", "Placeholder", [])), "g", attrs=None)
    assert old.namespace == "amanda/tensorflow/2.21.0"
    tf1 = from_graph_def(graph(("x", "Placeholder", []), producer=26), "g")
    assert tf1.namespace == "amanda/tensorflow/1.13.1" and tf1.attrs["tensorflow"]["producer"] == 26


@pytest.mark.parametrize("nodes, where, hint", [
    ((("kernel", "Placeholder", []), ("r", "Relu", ["kernal"])), "g/r.input[0]", "did you mean 'kernel'?"),
    ((("x", "Placeholder", []), ("x", "Relu", [])), "g/x", ""),
    ((("x", "Placeholder", []), ("r", "Relu", ["x:a"])), "g/r.input[0]", ""),
    ((("x", "Placeholder", []), ("r", "Relu", ["x:3"])), "g/x", ""),
    ((("", "Placeholder", []),), "g.node[0].name", ""),
])
def test_bad_graphs_name_the_node(nodes: tuple, where: str, hint: str) -> None:
    with pytest.raises(FormatError) as caught:
        from_graph_def(graph(*nodes), "g")
    assert caught.value.path == where
    assert hint in str(caught.value)


def test_missing_and_recursive_functions() -> None:
    gd = graph(("x", "Placeholder", []))
    node = gd.node.add(name="w", op="While", input=["x"])
    node.attr["body"].func.name = "bodyy"
    node.attr["cond"].func.name = "body"
    fn = gd.library.function.add()
    fn.signature.name = "body"
    with pytest.raises(FormatError, match="did you mean 'body'"):
        from_graph_def(gd, "g")
    node.attr["body"].func.name = "body"
    call = fn.node_def.add(name="again", op="PartitionedCall")
    call.attr["f"].func.name = "body"
    with pytest.raises(FormatError, match="body -> body"):
        from_graph_def(gd, "g")


def test_bodies_take_the_ops_inputs() -> None:
    gd = graph(("x", "Placeholder", []))
    _function(gd, "fn")
    node = gd.node.add(name="w", op="While", input=["x", "x"])
    node.attr["body"].func.name = node.attr["cond"].func.name = "fn"
    with pytest.raises(FormatError, match="a function of 2 arguments") as caught:
        from_graph_def(gd, "g")
    assert caught.value.path == "g/w.attr.cond"  # the first body attr of While


def test_body_inputs_name_real_outputs() -> None:
    gd = graph(("x", "Placeholder", []))
    _function(gd, "fn")
    gd.library.function[0].ret["y"] = "scope/relu:activations:1"
    gd.node.add(name="call", op="PartitionedCall", input=["x"]).attr["f"].func.name = "fn"
    with pytest.raises(FormatError, match="single output 'activations'"):
        from_graph_def(gd, "g")
    gd.library.function[0].ret["y"] = "scope/relu:activation:0"
    with pytest.raises(FormatError, match="did you mean 'activations'"):
        from_graph_def(gd, "g")


def test_deep_scopes_are_refused_unless_flat() -> None:
    from amanda.io.tensorflow.read_graph import MAX_SCOPE_DEPTH

    gd = graph()
    gd.node.add(name="/".join(f"s{i}" for i in range(MAX_SCOPE_DEPTH + 400)) + "/x", op="NoOp")
    with pytest.raises(FormatError, match="hierarchy=False"):
        from_graph_def(gd, "g")
    assert len(from_graph_def(gd, "g", hierarchy=False).children) == 1


def test_deeply_nested_functions_are_refused() -> None:
    from amanda.io.tensorflow.functions import MAX_DEPTH

    gd = graph(("x", "Placeholder", []))
    gd.node.add(name="call", op="PartitionedCall", input=["x"]).attr["f"].func.name = "f0"
    for i in range(MAX_DEPTH + 5):
        fn = gd.library.function.add()
        fn.signature.name = f"f{i}"
        fn.signature.input_arg.add(name="a", type=DT_FLOAT)
        fn.signature.output_arg.add(name="b", type=DT_FLOAT)
        inner = fn.node_def.add(name="c", op="PartitionedCall", input=["a"])
        inner.attr["f"].func.name = f"f{i + 1}"
        fn.ret["b"] = "c:output:0"
    with pytest.raises(FormatError, match=f"nested at most {MAX_DEPTH}"):
        from_graph_def(gd, "g")


def test_corrupt_files_raise_format_errors(tmp_path: Path) -> None:
    """Truncations and flipped bytes of a real graph: a FormatError (or, where the bytes still
    parse, a graph), never protobuf's or Python's own exception."""
    data = (FIXTURES / "control_flow.pb").read_bytes()
    rng = np.random.default_rng(0)
    cases = [data[:n] for n in (1, 7, len(data) // 3, len(data) // 2, len(data) - 1)]
    for _ in range(20):
        flipped = bytearray(data)
        for at in rng.integers(0, len(data), 3):
            flipped[at] = int(rng.integers(0, 256))
        cases.append(bytes(flipped))
    errors = 0
    for i, case in enumerate(cases):
        path = tmp_path / f"c{i}.pb"
        path.write_bytes(case)
        try:
            amanda.load(path)
        except AmandaError:
            errors += 1
    assert errors >= 5  # every truncation at least
    (tmp_path / "bad.pbtxt").write_text('node { name: "x" op: "Placeholder" }\nnode { nme: "y" }\n')
    with pytest.raises(FormatError) as caught:
        amanda.load(tmp_path / "bad.pbtxt")
    assert caught.value.line == 2


@pytest.mark.parametrize("target", ["saved_model.pb", "variables/variables.index",
                                    "variables/variables.data-00000-of-00001"])
def test_corrupt_saved_models_raise_format_errors(target: str, tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    source = FIXTURES / "control_flow.savedmodel"
    data = (source / target).read_bytes()
    for i in range(8):
        copy = tmp_path / f"m{i}.savedmodel"
        shutil.copytree(source, copy)
        case = bytearray(data[: int(rng.integers(0, len(data)))] if i % 2 else data)
        for at in rng.integers(0, len(case), 3) if case and not i % 2 else ():
            case[at] = int(rng.integers(0, 256))
        (copy / target).write_bytes(bytes(case))
        try:
            amanda.validate(amanda.load(copy))
        except AmandaError:
            pass


def test_saved_model_pb_named_directly_loads_its_folder() -> None:
    folder = FIXTURES / "dense.savedmodel"
    assert amanda.load(folder / "saved_model.pb") == amanda.load(folder)


def test_saved_model_errors(tmp_path: Path) -> None:
    with pytest.raises(FormatError, match="did you mean 'serving_default'"):
        load_saved_model(FIXTURES / "dense.savedmodel", signature="serving_defualt")
    with pytest.raises(FormatError, match="meta graph tagged"):
        load_saved_model(FIXTURES / "dense.savedmodel", tags=("train",))
    with pytest.raises(ArgumentError):
        load_saved_model(tmp_path)
    copy = tmp_path / "m.savedmodel"
    shutil.copytree(FIXTURES / "control_flow.savedmodel", copy)
    index = copy / "variables" / "variables.index"
    index.write_bytes(index.read_bytes()[:-9])
    with pytest.raises(FormatError, match="magic"):
        amanda.load(copy)
    index.write_bytes(b"")
    with pytest.raises(FormatError, match="footer"):
        amanda.load(copy)
    index.unlink()
    with pytest.raises(FormatError, match="cannot read"):
        amanda.load(copy)


def test_bundle_reads_every_tensor_within_bounds(tmp_path: Path) -> None:
    bundle = Bundle(FIXTURES / "dense.savedmodel" / "variables" / "variables")
    assert bundle.keys() == ["dense/bias", "dense/kernel"]
    assert bundle.tensor("dense/kernel").shape == (4, 3)
    with pytest.raises(FormatError, match="did you mean 'dense/bias'"):
        bundle.tensor("dense/bais")
    copy = tmp_path / "variables"
    shutil.copytree(FIXTURES / "dense.savedmodel" / "variables", copy)
    data = copy / "variables.data-00000-of-00001"
    data.write_bytes(data.read_bytes()[:10])
    with pytest.raises(FormatError, match="inside the shard"):
        Bundle(copy / "variables").tensor("dense/kernel")


def test_dump_errors(tmp_path: Path) -> None:
    onnx_graph = amanda.Container(None, "g", attrs={"namespace": "amanda/onnx/17"})
    with pytest.raises(FormatError, match="amanda/tensorflow"):
        dump_graphdef(onnx_graph, tmp_path / "g.pb")
    loose = amanda.Container(None, "g", children=[amanda.op("Relu", "r", ["features"], ["activations"])],
                             attrs={"namespace": "amanda/tensorflow/2.21.0"})
    with pytest.raises(FormatError) as caught:
        amanda.dump(loose, tmp_path / "g.pb")
    assert caught.value.path == "g/r:features"
    with pytest.raises(FormatError, match="SavedModel"):
        amanda.dump(loose, tmp_path, format="saved_model")


def test_missing_protobuf_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m.startswith("google.protobuf")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "google.protobuf", None)
    with pytest.raises(ArgumentError, match=r"amanda\[tensorflow\]"):
        require_protobuf()


def test_hierarchy_off_keeps_full_names(tmp_path: Path) -> None:
    flat = load_graphdef(FIXTURES / "dense.pb", hierarchy=False)
    assert "dense/MatMul" in [c.name for c in flat.children]
    back = load_graphdef(dump_graphdef(flat, tmp_path / "dense.pb"), hierarchy=False)
    assert back == flat
    assert load_graphdef(tmp_path / "dense.pb") == amanda.load(FIXTURES / "dense.pb")


WRONG = ("", 3, -1, 2.5, True, None, object(), [object()], {"k": object()}, b"x", np.zeros((2, 2)))


@pytest.mark.parametrize("bad", WRONG)
def test_wrong_arguments_raise_amanda_errors(bad: object, tmp_path: Path) -> None:
    g = load_graphdef(FIXTURES / "dense.pb")
    calls = [lambda: load_graphdef(bad), lambda: load_graphdef(FIXTURES / "dense.pb", hierarchy=bad),
             lambda: load_saved_model(bad), lambda: dump_graphdef(bad, tmp_path / "g.pb"),
             lambda: dump_graphdef(g, bad),
             lambda: load_saved_model(FIXTURES / "dense.savedmodel", signature=bad),
             lambda: load_saved_model(FIXTURES / "dense.savedmodel", tags=bad),
             lambda: load_saved_model(FIXTURES / "dense.savedmodel", hierarchy=bad)]
    for call in calls:
        try:
            call()
        except AmandaError:
            pass


def _function(gd: object, name: str) -> None:
    """``name(x) -> y``: y = Relu(x), with a NoOp as control output."""
    fn = gd.library.function.add()  # type: ignore[attr-defined]
    fn.signature.name = name
    fn.signature.input_arg.add(name="x", type=DT_FLOAT)
    fn.signature.output_arg.add(name="y", type=DT_FLOAT)
    fn.signature.control_output.append("done")
    relu = fn.node_def.add(name="scope/relu", op="Relu", input=["x", "^done"])
    relu.attr["T"].type = DT_FLOAT
    fn.node_def.add(name="done", op="NoOp")
    fn.ret["y"] = "scope/relu:activations:0"
    fn.control_ret["done"] = "done"


@pytest.mark.parametrize("op, attrs", [("If", ("then_branch", "else_branch")),
                                       ("StatelessIf", ("then_branch", "else_branch")),
                                       ("While", ("cond", "body")), ("StatelessWhile", ("cond", "body")),
                                       ("PartitionedCall", ("f",))])
def test_function_bodies_of_every_kind(op: str, attrs: tuple, tmp_path: Path) -> None:
    gd = graph(("x", "Placeholder", []), ("p", "Placeholder", []))
    _function(gd, "fn")
    node = gd.node.add(name="ctl/op", op=op, input=(["p", "x"] if "If" in op else ["x"]))
    for key in attrs:
        node.attr[key].func.name = "fn"
    gd.node.add(name="out", op="Identity", input=["ctl/op:0"]).attr["T"].type = DT_FLOAT
    g = from_graph_def(gd, "g")
    found = g.child("ctl").child("op")
    bodies = [found.children[0]] if op == "PartitionedCall" else [found.attrs[k] for k in attrs]
    for body in bodies:
        assert body.name == "fn" and body.input_names == ("x",) and body.output_names == ("y",)
        assert body.child("scope").child("relu").type == "Relu"
        assert {(e.src.op, e.dst.op) for e in body.edges if e.dst.port == -1} == {
            (("done",), ("scope", "relu")), (("done",), amanda.SELF)}
    assert len({id(b) for b in bodies}) == 1  # one function, one shared container
    path = dump_graphdef(g, tmp_path / "g.pbtxt")
    assert load_graphdef(path) == g
    text = path.read_text()
    assert 'ret {\n      key: "y"\n      value: "scope/relu:activations:0"' in text
    assert text.count("signature {") == 1


def test_edited_attributes_are_written_by_their_type(tmp_path: Path) -> None:
    """An attribute set after import (no recorded field) is written as the vocabulary types it,
    else as its value suggests; an empty list given items is written as a list of them."""
    gd = graph(("x", "Placeholder", []))
    gd.node[0].attr["_empty"].list.SetInParent()
    g = from_graph_def(gd, "g")
    x = g.child("x")
    node = dict(x.attrs["tf_node"])
    node["attr"] = {"_empty": (1, 2)}
    edited = amanda.Container(None, "g", children=[x.with_attrs(dtype="int64", shape=(2, None), tf_node=node)],
                              attrs=dict(g.attrs))
    back = load_graphdef(dump_graphdef(edited, tmp_path / "g.pb")).child("x")
    assert back.attrs["dtype"] == "int64" and back.attrs["shape"] == (2, None)
    assert back.attrs["tf_node"]["attr"]["_empty"] == (1, 2)
