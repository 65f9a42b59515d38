"""Model-local functions: each call imports as a container holding the function's body (one
shared body object), typed, valid, queryable, runnable, and exports back as a FunctionProto plus
call nodes; every model here is checked against onnxruntime."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import AttributeProto, TensorProto, helper, numpy_helper  # noqa: E402

import amanda  # noqa: E402
from amanda.containers.refs import AttrRef, resolve_references  # noqa: E402
from amanda.errors import FormatError  # noqa: E402
from amanda.io.onnx.export import to_onnx  # noqa: E402
from amanda.io.onnx.importer import from_onnx  # noqa: E402

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "onnx" / "from_torch"
OPSETS = [helper.make_opsetid("", 17), helper.make_opsetid("local", 1)]
F = TensorProto.FLOAT


def tensor(name: str, shape: list, elem: int = F) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def ref(name: str, to: str, kind: int) -> AttributeProto:
    """An attribute of a body node that takes its value from the function attribute ``to``."""
    return helper.make_attribute_ref(name, kind, ref_attr_name=to)


def constant_from(attribute: str, output: str) -> onnx.NodeProto:
    node = helper.make_node("Constant", [], [output])
    node.attribute.append(ref("value_float", attribute, AttributeProto.FLOAT))
    return node


def model(nodes: list, inputs: list, outputs: list, functions: list, inits: list = ()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "main", inputs, outputs, list(inits))
    return helper.make_model(graph, opset_imports=OPSETS, functions=functions, ir_version=10)


AFFINE = helper.make_function(
    "local", "Affine", ["X", "W"], ["Y"],
    [helper.make_node("MatMul", ["X", "W"], ["t"], name="mm"), helper.make_node("Relu", ["t"], ["Y"], name="relu")],
    [helper.make_opsetid("", 17)],
)
# Scale(X) = X * alpha + beta; alpha defaults to 2, beta has no default
SCALE = helper.make_function(
    "local", "Scale", ["X"], ["Y"],
    [constant_from("alpha", "a"), helper.make_node("Mul", ["X", "a"], ["m"]),
     constant_from("beta", "b"), helper.make_node("Add", ["m", "b"], ["Y"])],
    [helper.make_opsetid("", 17)], attributes=["beta"],
    attribute_protos=[helper.make_attribute("alpha", 2.0)],
)
# Outer(X) = relu(Scale(X; alpha = k, beta = 0.25)): a function calling a function
_outer_call = helper.make_node("Scale", ["X"], ["s"], domain="local", name="inner", beta=0.25)
_outer_call.attribute.append(ref("alpha", "k", AttributeProto.FLOAT))
OUTER = helper.make_function(
    "local", "Outer", ["X"], ["Y"], [_outer_call, helper.make_node("Relu", ["s"], ["Y"])],
    [helper.make_opsetid("", 17), helper.make_opsetid("local", 1)], attributes=["k"],
)
# Pick(C, X) = C ? -X : X * X, the branches reading X from the function body
PICK = helper.make_function(
    "local", "Pick", ["C", "X"], ["Y"],
    [helper.make_node(
        "If", ["C"], ["Y"], name="choose",
        then_branch=helper.make_graph([helper.make_node("Neg", ["X"], ["n"])], "then", [], [tensor("n", [None])]),
        else_branch=helper.make_graph([helper.make_node("Mul", ["X", "X"], ["p"])], "else", [], [tensor("p", [None])]),
    )],
    [helper.make_opsetid("", 17)],
)


def three_affines() -> onnx.ModelProto:
    calls = [helper.make_node("Affine", [a, "w"], [b], domain="local", name=f"layer{i}")
             for i, (a, b) in enumerate([("x", "h0"), ("h0", "h1"), ("h1", "y")])]
    w = numpy_helper.from_array(np.linspace(-1, 1, 16, dtype=np.float32).reshape(4, 4), "w")
    return model(calls, [tensor("x", [2, 4])], [tensor("y", [2, 4])], [AFFINE], [w])


def scales() -> onnx.ModelProto:
    nodes = [helper.make_node("Scale", ["x"], ["a"], domain="local", name="s1", alpha=3.0, beta=1.0),
             helper.make_node("Scale", ["a"], ["b"], domain="local", name="s2", beta=0.5),
             helper.make_node("Scale", ["b"], ["y"], domain="local", name="s3", alpha=3.0, beta=1.0)]
    return model(nodes, [tensor("x", [3])], [tensor("y", [3])], [SCALE])


def nested() -> onnx.ModelProto:
    nodes = [helper.make_node("Outer", ["x"], ["a"], domain="local", name="o1", k=0.5),
             helper.make_node("Outer", ["a"], ["y"], domain="local", name="o2", k=-1.0)]
    return model(nodes, [tensor("x", [3])], [tensor("y", [3])], [SCALE, OUTER])


def unnamed_outputs() -> onnx.ModelProto:
    """Calls of a two-output function that each leave one output unnamed ("")."""
    two = helper.make_function("local", "Two", ["X"], ["N", "A"],
                               [helper.make_node("Neg", ["X"], ["N"]), helper.make_node("Abs", ["X"], ["A"])],
                               [helper.make_opsetid("", 17)])
    nodes = [helper.make_node("Two", ["x"], ["", "a"], domain="local", name="t1"),
             helper.make_node("Two", ["a"], ["y", ""], domain="local", name="t2")]
    return model(nodes, [tensor("x", [3])], [tensor("y", [3])], [two])


def picks() -> onnx.ModelProto:
    nodes = [helper.make_node("Pick", ["c", "x"], ["a"], domain="local", name="p1"),
             helper.make_node("Pick", ["c", "a"], ["y"], domain="local", name="p2")]
    return model(nodes, [tensor("c", [], TensorProto.BOOL), tensor("x", [3])], [tensor("y", [3])], [PICK])


def fixture() -> onnx.ModelProto:
    return onnx.load(FIXTURES / "local_functions.onnx")


def torch_attributes() -> onnx.ModelProto:
    return onnx.load(FIXTURES / "function_attributes.onnx")


def feeds_for(proto: onnx.ModelProto, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {}
    for vi in proto.graph.input:
        shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        if vi.type.tensor_type.elem_type == TensorProto.BOOL:
            out[vi.name] = np.array(seed % 2 == 0)
        else:
            out[vi.name] = rng.standard_normal(shape).astype(np.float32)
    return out


def ort_run(proto: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def amanda_run(container: amanda.Container, names: list[str], feeds: dict) -> list[np.ndarray]:
    with amanda.Session(container, threads=1) as session:
        return session.run(names, feeds)


MODELS = {"torch": fixture, "torch_attributes": torch_attributes, "three_affines": three_affines, "scales": scales, "nested": nested, "picks": picks,
          "unnamed_outputs": unnamed_outputs}


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("seed", [0, 1])
def test_calls_run_as_onnxruntime_runs_them(name: str, seed: int) -> None:
    """amanda's outputs equal onnxruntime's for the model, its YAML and JSON round trips and its
    ONNX export, and onnxruntime gives the same outputs for the exported model."""
    proto = MODELS[name]()
    feeds = feeds_for(proto, seed)
    want = ort_run(proto, feeds)
    c = from_onnx(proto)
    outputs = [o.name for o in proto.graph.output]
    exported = to_onnx(c)
    candidates = [c, amanda.loads(amanda.dumps(c)), amanda.loads(amanda.dumps(c, format="json"), format="json"),
                  from_onnx(exported)]
    for candidate in candidates:
        for got, expected in zip(amanda_run(candidate, outputs, feeds), want):
            np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    for got, expected in zip(ort_run(exported, feeds), want):
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_calls_round_trip_and_pass_the_checker(name: str) -> None:
    """import -> export -> import gives an equal container, the export passes the full ONNX
    checker, writes one FunctionProto per function and keeps the function domains' opsets."""
    proto = MODELS[name]()
    c = from_onnx(proto)
    exported = to_onnx(c)
    onnx.checker.check_model(exported, full_check=True)
    assert from_onnx(exported) == c
    assert sorted((f.domain, f.name) for f in exported.functions) == sorted((f.domain, f.name) for f in proto.functions)
    assert {(o.domain, o.version) for o in proto.opset_import} <= {(o.domain, o.version) for o in exported.opset_import}
    assert amanda.loads(amanda.dumps(c)) == c


@pytest.mark.parametrize("name", sorted(MODELS))
def test_calls_validate_and_are_typed(name: str) -> None:
    """``validate`` finds nothing wrong and type inference types every output of the model."""
    proto = MODELS[name]()
    c = from_onnx(proto)
    assert amanda.validate(c) == []
    types = amanda.infer_types(c)
    for vi in proto.graph.output:
        shape = tuple(d.dim_value for d in vi.type.tensor_type.shape.dim)
        assert str(types.output((), vi.name)) == f"float32[{','.join(map(str, shape))}]"


def test_a_function_called_three_times_is_one_body() -> None:
    """The three calls are containers of the function's type whose children and edges are the
    very same objects; with six calls there is still one body, and the exported file holds it
    once (one FunctionProto of two nodes, six call nodes)."""
    c = from_onnx(three_affines())
    calls = [c.child(f"layer{i}") for i in range(3)]
    assert {call.type for call in calls} == {"Affine"}
    assert all(call.input_names == ("X", "W") and call.output_names == ("Y",) for call in calls)
    assert calls[0].children is calls[1].children is calls[2].children
    assert calls[0].edges is calls[1].edges is calls[2].edges
    assert calls[0].child("mm") is calls[2].child("mm")
    assert calls[0].attrs["onnx_function"]["domain"] == "local"
    proto = three_affines()
    more = [helper.make_node("Affine", [a, "w"], [b], domain="local", name=f"more{i}")
            for i, (a, b) in enumerate([("y", "z0"), ("z0", "z1"), ("z1", "z")])]
    proto.graph.node.extend(more)
    proto.graph.output[0].name = "z"
    bigger = from_onnx(proto)
    assert len({id(node.children) for node in bigger.children if node.children}) == 1
    exported = to_onnx(bigger)
    assert [(f.name, len(f.node)) for f in exported.functions] == [("Affine", 2)]
    assert [n.op_type for n in exported.graph.node] == ["Affine"] * 6


def test_calls_passing_different_attributes_share_one_body() -> None:
    """Calls passing different attribute values (one taking the default) hold the very same
    body, whose ops keep the references; the resolved view gives each call its own values
    (else the default), and export writes the references back."""
    c = from_onnx(scales())
    s1, s2, s3 = (c.child(n) for n in ("s1", "s2", "s3"))
    assert s1.children is s2.children is s3.children and s1.edges is s2.edges
    constants = [op for op in s2.children if op.type == "Constant"]
    assert [op.attrs["value_float"] for op in constants] == [AttrRef("alpha", "float"), AttrRef("beta", "float")]
    assert (s1.attrs["alpha"], s1.attrs["beta"]) == (3.0, 1.0)
    resolved = resolve_references(c)
    values = {n: [op.attrs["value_float"] for op in resolved.child(n).children if op.type == "Constant"]
              for n in ("s1", "s2", "s3")}
    assert values == {"s1": [3.0, 1.0], "s2": [2.0, 0.5], "s3": [3.0, 1.0]}  # s2: the default alpha
    assert resolve_references(c) is resolved and c.child("s2").children is s1.children  # cached; c untouched
    function = to_onnx(c).functions[0]
    refs = [(a.name, a.ref_attr_name) for n in function.node for a in n.attribute]
    assert refs == [("value_float", "alpha"), ("value_float", "beta")]
    assert [a.name for a in function.attribute_proto] == ["alpha"] and list(function.attribute) == ["beta"]


def test_nested_calls_are_containers_inside_containers() -> None:
    """A function calling a function gives a call container inside a call container, and the
    query ``$..[?type=='Mul']`` reaches the ops of the inner body."""
    c = from_onnx(nested())
    inner = c.child("o1").child("inner")
    assert inner.type == "Scale" and inner.children
    assert inner.attrs["alpha"] == AttrRef("k", "float") and inner.attrs["beta"] == 0.25
    found = list(c.select("$..[?type=='Mul']").paths)
    assert found == [("o1", "inner", "Mul_1"), ("o2", "inner", "Mul_1")]
    assert c.child("o1").children is c.child("o2").children  # k differs, the body is one all the same
    resolved = resolve_references(c)
    alphas = [resolved.child(o).child("inner").child("Constant_0").attrs["value_float"] for o in ("o1", "o2")]
    assert alphas == [0.5, -1.0]  # each outer call's k, passed on by the inner call


def test_query_finds_ops_inside_calls() -> None:
    """``$..[?type=='Gemm']`` finds the op inside each call of the torch model, and the
    If inside a function body is found with its branch ops."""
    c = from_onnx(fixture(), hierarchy=False)
    assert [p[-1] for p in c.select("$..[?type=='Gemm']").paths] == ["Gemm_0", "Gemm_0"]
    assert len(c.select("$[?type=='Block']").paths) == 2
    tree = from_onnx(fixture())  # each call sits in the container of its module
    assert [p[:-1] for p in tree.select("$..[?type=='Block']").paths] == [("first",), ("second",)]
    p = from_onnx(picks())
    assert list(p.select("$..[?type=='Neg']").paths) == [("p1", "choose", "then_branch", "Neg_0"),
                                                  ("p2", "choose", "then_branch", "Neg_0")]


def test_shared_bodies_stay_shared_through_documents() -> None:
    """After a YAML or JSON round trip the calls of one function share one body again."""
    c = from_onnx(three_affines())
    for fmt in ("yaml", "json"):
        again = amanda.loads(amanda.dumps(c, format=fmt), format=fmt)
        assert again == c
        assert again.child("layer0").children is again.child("layer2").children


def test_an_edited_call_becomes_a_function_of_its_own() -> None:
    """Replacing an op inside one call leaves the other calls alone; export writes the edited
    body as a second function, and onnxruntime agrees with amanda on the edited model."""
    c = from_onnx(three_affines())
    edited = amanda.replace(c, ("layer1", "relu"), lambda op: op.evolve(type="Sigmoid", inputs=["X"], outputs=["Y"]))
    assert edited.child("layer0").children is c.child("layer0").children
    proto = to_onnx(edited)
    onnx.checker.check_model(proto, full_check=True)
    assert sorted(f.name for f in proto.functions) == ["Affine", "Affine_1"]
    feeds = feeds_for(proto, 0)
    np.testing.assert_allclose(amanda_run(edited, ["y"], feeds)[0], ort_run(proto, feeds)[0], rtol=1e-5, atol=1e-6)


def test_recursive_functions_are_refused() -> None:
    """A function that calls itself is a FormatError naming the cycle, not a RecursionError."""
    loop = helper.make_function("local", "Loopy", ["X"], ["Y"],
                                [helper.make_node("Loopy", ["X"], ["Y"], domain="local")],
                                [helper.make_opsetid("", 17), helper.make_opsetid("local", 1)])
    proto = model([helper.make_node("Loopy", ["x"], ["y"], domain="local", name="l")],
                  [tensor("x", [3])], [tensor("y", [3])], [loop])
    with pytest.raises(FormatError, match="cycle"):
        from_onnx(proto)


def test_a_call_passing_too_many_inputs_is_refused() -> None:
    """A call with more inputs than its function takes is a FormatError naming the call."""
    proto = model([helper.make_node("Affine", ["x", "x", "x"], ["y"], domain="local", name="bad")],
                  [tensor("x", [4, 4])], [tensor("y", [4, 4])], [AFFINE])
    with pytest.raises(FormatError, match="'bad'.*3 inputs"):
        from_onnx(proto)


@pytest.mark.parametrize("name", ["local_functions", "function_attributes"])
def test_torch_fixture_inputs_are_recorded(name: str) -> None:
    """The torch fixtures' recorded input specs match the models' graph inputs."""
    spec = json.loads((FIXTURES / f"{name}.json").read_text())
    assert spec == {"x": {"shape": [2, 8], "dtype": "float32"}}
    assert [vi.name for vi in onnx.load(FIXTURES / f"{name}.onnx").graph.input] == ["x"]


def test_torch_function_attributes_share_one_body() -> None:
    """torch's three calls passing LeakyRelu slopes 0.1, 0.3 and 0.1 hold the identical body,
    whose LeakyRelu refers to the function attribute; the query finds that op in every call,
    the resolved view gives each call its slope, and the exported function refers to the
    attribute again."""
    c = from_onnx(torch_attributes(), hierarchy=False)
    a, b, c3 = (node for node in c.children if node.children)
    assert a.children is b.children is c3.children
    (relu,) = (op for op in a.children if op.type == "LeakyRelu")
    assert relu.attrs["alpha"] == AttrRef("inferred::LeakyRelu_alpha", "float")
    assert len(c.select("$..[?type=='LeakyRelu']").paths) == 3
    resolved = resolve_references(c)
    slopes = [resolved.child(call.name).child(relu.name).attrs["alpha"] for call in (a, b, c3)]
    assert slopes == pytest.approx([0.1, 0.3, 0.1])
    (function,) = to_onnx(c).functions
    assert [a.ref_attr_name for n in function.node for a in n.attribute if a.ref_attr_name] == [
        "inferred::LeakyRelu_alpha"]


def test_an_edit_reaching_inside_a_call_writes_that_call_inline() -> None:
    """An ``amanda.edit`` wrapper that rewires ops inside one call exports that call's ops as
    plain nodes and the other calls as calls; onnxruntime agrees with amanda on the result."""
    c = from_onnx(three_affines())
    edit = amanda.edit(c)
    edit.add(amanda.op("Neg", "neg", ["X"], ["Y"]))
    edit.remove_edge("main/layer1/mm:Y", "main/layer1/relu:X")
    edit.connect("main/layer1/mm:Y", "neg:X")
    edit.connect("neg:Y", "main/layer1/relu:X")
    wrapped = edit.build()
    proto = to_onnx(wrapped)
    onnx.checker.check_model(proto, full_check=True)
    assert [n.op_type for n in proto.graph.node] == ["Affine", "MatMul", "Neg", "Relu", "Affine"]
    feeds = feeds_for(proto, 0)
    np.testing.assert_allclose(amanda_run(wrapped, ["y"], feeds)[0], ort_run(proto, feeds)[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("info", ["local", {"domain": 3}, {"domain": "local", "version": "1"}])
def test_a_malformed_onnx_function_attr_is_a_format_error(info) -> None:
    """A call whose ``onnx_function`` attr is not ``{domain: str, version: int}`` is refused on
    export with a FormatError naming the call."""
    c = from_onnx(three_affines())
    broken = amanda.replace(c, ("layer0",), lambda call: call.with_attrs(onnx_function=info))
    with pytest.raises(FormatError, match="call layer0: onnx_function"):
        to_onnx(broken)


def test_outputs_a_call_leaves_unnamed_stay_unnamed() -> None:
    """A call has a port for every output of its function; the ones it leaves unnamed carry
    ``onnx_name: ''`` and are written back as "" in their positions."""
    c = from_onnx(unnamed_outputs())
    t1 = c.child("t1")
    assert t1.output_names == ("N", "A") and [p.attrs["onnx_name"] for p in t1.outputs] == ["", "a"]
    assert [list(n.output) for n in to_onnx(c).graph.node] == [["", "a"], ["y", ""]]


def test_references_inside_a_branch_of_a_body_resolve_per_call() -> None:
    """An attribute reference inside an If branch of a function body takes each call's value;
    amanda and onnxruntime agree, and the export refers to the attribute again."""
    then_g = helper.make_graph([constant_from("shift", "s"), helper.make_node("Add", ["X", "s"], ["r"])],
                               "then", [], [tensor("r", [3])])
    else_g = helper.make_graph([helper.make_node("Neg", ["X"], ["n"])], "else", [], [tensor("n", [3])])
    shifted = helper.make_function(
        "local", "Shift", ["C", "X"], ["Y"],
        [helper.make_node("If", ["C"], ["Y"], name="branch", then_branch=then_g, else_branch=else_g)],
        [helper.make_opsetid("", 17)], attributes=["shift"])
    nodes = [helper.make_node("Shift", ["c", "x"], ["a"], domain="local", name="one", shift=1.0),
             helper.make_node("Shift", ["c", "a"], ["y"], domain="local", name="ten", shift=10.0)]
    proto = model(nodes, [tensor("c", [], TensorProto.BOOL), tensor("x", [3])], [tensor("y", [3])], [shifted])
    c = from_onnx(proto)
    assert c.child("one").children is c.child("ten").children
    branch = c.child("ten").child("branch").attrs["then_branch"]
    assert branch.child("Constant_0").attrs["value_float"] == AttrRef("shift", "float")
    resolved = resolve_references(c).child("ten").child("branch").attrs["then_branch"]
    assert resolved.child("Constant_0").attrs["value_float"] == 10.0
    exported = to_onnx(c)
    onnx.checker.check_model(exported, full_check=True)
    assert from_onnx(exported) == c
    for seed in (0, 1):  # both branches
        feeds = feeds_for(proto, seed)
        want = ort_run(proto, feeds)[0]
        np.testing.assert_allclose(amanda_run(c, ["y"], feeds)[0], want, rtol=1e-6)
        np.testing.assert_allclose(ort_run(exported, feeds)[0], want, rtol=1e-6)
