"""Each optimisation pass on hand-built graphs, against numpy and onnxruntime, and its purity on random containers."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import amanda
from amanda import SELF, Container, op
from amanda.errors import ArgumentError
from amanda.passes import (
    PASSES,
    eliminate_common_subexpressions,
    eliminate_dead_code,
    fold_constants,
    fuse_conv_batchnorm,
    fuse_gelu,
    fuse_matmul_add,
    optimize,
    remove_identities,
    specialize,
)
from tests.strategies import check_invariants, containers, snapshot

NS = {"namespace": "amanda/onnx/17"}
RNG = np.random.default_rng(3)


def const(name: str, value: object, dtype: object = np.float32) -> Container:
    return op("Constant", name, [], ["output"], {"value": np.asarray(value, dtype)})


def run(model: Container, feeds: dict, fetches: tuple = ("y",)) -> list:
    with amanda.Session(model) as session:
        return session.run(list(fetches), feeds)


def shape_chain() -> Container:
    """x -> Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)), [-1])) -> Relu: a torch-style shape chain."""
    return Container(None, "g", inputs=["x"], outputs=["y"], children=[
        op("Shape", "shape", ["data"], ["shape"]), const("zero", 0, np.int64), const("axes", [0], np.int64),
        const("rest", [-1], np.int64), op("Gather", "gather", ["data", "indices"], ["output"], {"axis": 0}),
        op("Unsqueeze", "unsq", ["data", "axes"], ["expanded"]), op("Concat", "cat", ["a", "b"], ["concat_result"], {"axis": 0}),
        op("Reshape", "reshape", ["data", "shape"], ["reshaped"]), op("Relu", "relu", ["X"], ["Y"]),
    ], edges=[("g:x", "shape:data"), ("shape:shape", "gather:data"), ("zero:output", "gather:indices"),
        ("gather:output", "unsq:data"), ("axes:output", "unsq:axes"), ("unsq:expanded", "cat:a"),
        ("rest:output", "cat:b"), ("g:x", "reshape:data"), ("cat:concat_result", "reshape:shape"),
        ("reshape:reshaped", "relu:X"), ("relu:Y", "g:y")], attrs=NS)


def test_shape_chain_folds_to_one_constant_once_the_input_shape_is_known() -> None:
    """Specialised to (3, 4, 5), the Shape->Gather->Unsqueeze->Concat chain becomes one constant [3, -1] and the result is unchanged."""
    model = shape_chain()
    x = RNG.standard_normal((3, 4, 5)).astype(np.float32)
    result = optimize(model, inputs={"x": x})
    kept = {c.name: c for c in result.model.children}
    assert set(kept) == {"cat", "reshape", "relu"}
    assert kept["cat"].type == "Constant" and kept["cat"].attrs["value"].tolist() == [3, -1]
    assert kept["reshape"] is model.child("reshape") and kept["relu"] is model.child("relu")
    np.testing.assert_array_equal(run(result.model, {"x": x})[0], np.maximum(x.reshape(3, -1), 0))


def test_without_known_shapes_the_shape_chain_stays() -> None:
    """Without specialisation the input shape is unknown, so Shape is not folded and the chain still runs per feed."""
    model = shape_chain()
    folded, report = fold_constants(model)
    assert "shape" in {c.name for c in folded.children} and not report.changed
    x = np.ones((2, 6), np.float32)
    np.testing.assert_array_equal(run(folded, {"x": x})[0], x)


def test_fold_constants_evaluates_constant_subgraphs_and_keeps_the_rest() -> None:
    """A constant subgraph (Mul of two constants) is replaced by its value; the ops reading feeds keep their objects and uids."""
    model = Container(None, "g", inputs=["x"], outputs=["y"], children=[
        const("a", [1, 2]), const("b", [3, 4]), op("Mul", "m", ["A", "B"], ["C"]), op("Add", "add", ["A", "B"], ["C"]),
    ], edges=[("a:output", "m:A"), ("b:output", "m:B"), ("g:x", "add:A"), ("m:C", "add:B"), ("add:C", "g:y")], attrs=NS)
    out, report = fold_constants(model)
    assert report.replaced == ("m",) and report.added == ("m",)
    assert out.child("m").attrs["value"].tolist() == [3.0, 8.0]
    assert out.child("add") is model.child("add") and out.child("add").uid == model.child("add").uid
    cleaned, dead = eliminate_dead_code(out)
    assert set(dead.removed) == {"a", "b"}
    np.testing.assert_array_equal(run(cleaned, {"x": np.ones(2, np.float32)})[0], [4.0, 9.0])


def test_random_ops_are_never_folded() -> None:
    """RandomUniformLike of a constant stays an op: folding it would freeze one sample."""
    model = Container(None, "g", inputs=[], outputs=["y"], children=[const("c", np.zeros(3)), op("RandomUniformLike", "r", ["input"], ["output"])],
                      edges=[("c:output", "r:input"), ("r:output", "g:y")], attrs=NS)
    assert fold_constants(model).model is model


def test_dead_code_keeps_what_outputs_and_control_edges_need() -> None:
    """Ops feeding no output are removed unless a control edge pins them; the model without dead ops is unchanged otherwise."""
    model = Container(None, "g", inputs=["x"], outputs=["y"], children=[
        op("Relu", "r", ["X"], ["Y"]), op("Neg", "dead", ["X"], ["Y"]), op("Abs", "pinned", ["X"], ["Y"]),
        op("Exp", "tail", ["input"], ["output"]),
    ], edges=[("g:x", "r:X"), ("g:x", "dead:X"), ("g:x", "pinned:X"), ("pinned:Y", "tail:input"),
        ("pinned:-1", "r:-1"), ("r:Y", "g:y")], attrs=NS)
    out, report = eliminate_dead_code(model)
    assert set(report.removed) == {"dead", "tail"}
    assert {c.name for c in out.children} == {"r", "pinned"}
    assert eliminate_dead_code(out).model is out


def test_identity_removal_rewires_readers_to_the_source() -> None:
    """Identity chains vanish and readers read the original source; an input passed straight to an output keeps its Identity."""
    model = Container(None, "g", inputs=["x"], outputs=["y", "z"], children=[
        op("Identity", "i1", ["input"], ["output"]), op("Identity", "i2", ["input"], ["output"]),
        op("Relu", "r", ["X"], ["Y"]), op("Identity", "passthrough", ["input"], ["output"]),
    ], edges=[("g:x", "i1:input"), ("i1:output", "i2:input"), ("i2:output", "r:X"), ("r:Y", "g:y"),
        ("g:x", "passthrough:input"), ("passthrough:output", "g:z")], attrs=NS)
    out, report = remove_identities(model)
    assert set(report.removed) == {"i1", "i2"}
    x = RNG.standard_normal(4).astype(np.float32)
    y, z = run(out, {"x": x}, ("y", "z"))
    np.testing.assert_array_equal(y, np.maximum(x, 0))
    np.testing.assert_array_equal(z, x)


def test_cse_merges_equal_ops_and_equal_constants() -> None:
    """Two equal constants and the two equal Adds reading them merge into one of each; the sum is unchanged."""
    model = Container(None, "g", inputs=["x"], outputs=["y"], children=[
        const("c1", [1, 2]), const("c2", [1, 2]), op("Add", "a1", ["A", "B"], ["C"]), op("Add", "a2", ["A", "B"], ["C"]),
        op("Mul", "m", ["A", "B"], ["C"]),
    ], edges=[("g:x", "a1:A"), ("c1:output", "a1:B"), ("g:x", "a2:A"), ("c2:output", "a2:B"),
        ("a1:C", "m:A"), ("a2:C", "m:B"), ("m:C", "g:y")], attrs=NS)
    out, report = eliminate_common_subexpressions(model)
    assert set(report.removed) == {"c2", "a2"}
    x = np.array([0.5, -1], np.float32)
    np.testing.assert_allclose(run(out, {"x": x})[0], (x + [1, 2]) ** 2)


def test_cse_keeps_ops_with_different_attributes() -> None:
    """Softmax over different axes are different computations and both stay."""
    model = Container(None, "g", inputs=["x"], outputs=["y", "z"], children=[
        op("Softmax", "s0", ["input"], ["output"], {"axis": 0}), op("Softmax", "s1", ["input"], ["output"], {"axis": 1}),
    ], edges=[("g:x", "s0:input"), ("g:x", "s1:input"), ("s0:output", "g:y"), ("s1:output", "g:z")], attrs=NS)
    assert eliminate_common_subexpressions(model).model is model


def test_conv_batchnorm_folding_matches_onnxruntime() -> None:
    """Conv followed by inference BatchNormalization, folded into one Conv, computes what onnxruntime computes on the original."""
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper, numpy_helper

    from amanda.io.onnx.importer import from_onnx
    from tests.fixtures.onnx.onnx_models import run as ort_run

    inits = [numpy_helper.from_array(v.astype(np.float32), n) for n, v in {
        "w": RNG.standard_normal((4, 3, 3, 3)), "b": RNG.standard_normal(4), "s": RNG.random(4) + 0.5,
        "bb": RNG.standard_normal(4), "m": RNG.standard_normal(4), "v": RNG.random(4) + 0.1}.items()]
    graph = helper.make_graph([
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "s", "bb", "m", "v"], ["y"], epsilon=1e-3),
    ], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 6, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4, 6, 6])], initializer=inits)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(proto)
    x = RNG.standard_normal((2, 3, 6, 6)).astype(np.float32)
    model = from_onnx(proto)
    out, report = fuse_conv_batchnorm(model)
    conv_name = next(c.name for c in model.children if c.type == "Conv")
    assert conv_name in report.replaced and not any(c.type == "BatchNormalization" for c in out.children)
    assert out.child(conv_name).uid == model.child(conv_name).uid
    np.testing.assert_allclose(run(eliminate_dead_code(out).model, {"x": x})[0], ort_run(proto, {"x": x})[0],
                               rtol=1e-4, atol=1e-4)


def test_matmul_add_becomes_gemm_only_for_known_2d_operands() -> None:
    """A 2-D MatMul+bias becomes one Gemm (same result as numpy); with an unknown rank it stays."""
    w, b = RNG.standard_normal((4, 3)).astype(np.float32), RNG.standard_normal(3).astype(np.float32)

    def model(shape: object) -> Container:
        x = amanda.Port("x", attrs={"dtype": "float32", "shape": shape}) if shape else "x"
        return Container(None, "g", inputs=[x], outputs=["y"], children=[const("w", w), const("b", b), op("MatMul", "mm", ["A", "B"], ["Y"]),
                                                 op("Add", "add", ["A", "B"], ["C"])],
                         edges=[("g:x", "mm:A"), ("w:output", "mm:B"), ("mm:Y", "add:A"), ("b:output", "add:B"),
                          ("add:C", "g:y")], attrs=NS)

    out, report = fuse_matmul_add(model((5, 4)))
    assert out.child("add").type == "Gemm" and set(report.replaced) == {"mm", "add"}
    x = RNG.standard_normal((5, 4)).astype(np.float32)
    np.testing.assert_allclose(run(out, {"x": x})[0], x @ w + b, rtol=1e-5)
    assert fuse_matmul_add(model(None)).model.child("add").type == "Add"


def gelu_graph(opset: int) -> Container:
    return Container(None, "g", inputs=["x"], outputs=["y"], children=[
        const("root", 2 ** 0.5), const("one", 1.0), const("half", 0.5), op("Div", "div", ["A", "B"], ["C"]),
        op("Erf", "erf", ["input"], ["output"]), op("Add", "add", ["A", "B"], ["C"]), op("Mul", "mul", ["A", "B"], ["C"]),
        op("Mul", "half_mul", ["A", "B"], ["C"]),
    ], edges=[("g:x", "div:A"), ("root:output", "div:B"), ("div:C", "erf:input"), ("erf:output", "add:A"),
        ("one:output", "add:B"), ("g:x", "mul:A"), ("add:C", "mul:B"), ("mul:C", "half_mul:A"),
        ("half:output", "half_mul:B"), ("half_mul:C", "g:y")], attrs={"namespace": f"amanda/onnx/{opset}"})


def test_gelu_pattern_becomes_one_gelu_where_the_opset_has_it() -> None:
    """At opset 20 the erf form of GELU becomes one Gelu op with the same values (numpy oracle); at 17 it stays."""
    import math

    out, report = fuse_gelu(gelu_graph(20))
    assert out.child("half_mul").type == "Gelu" and len(report.replaced) == 5
    x = np.linspace(-4, 4, 17, dtype=np.float32)
    expected = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x.astype(np.float64)])
    np.testing.assert_allclose(run(eliminate_dead_code(out).model, {"x": x})[0], expected, rtol=1e-5, atol=1e-6)
    assert fuse_gelu(gelu_graph(17)).model == gelu_graph(17)


def test_specialize_rejects_unknown_inputs_and_bad_types() -> None:
    """Naming an input the model lacks, or giving a type that is not an array, TensorType or pair, raises ArgumentError."""
    model = shape_chain()
    with pytest.raises(ArgumentError, match="input names"):
        specialize(model, {"nope": ("float32", (1,))})
    with pytest.raises(ArgumentError, match="inputs.x"):
        specialize(model, {"x": 3})
    with pytest.raises(ArgumentError, match="shape of integers"):
        specialize(model, {"x": ("float32", ("n", 2))})
    with pytest.raises(ArgumentError, match="pass names"):
        optimize(model, passes=["no_such_pass"])


def test_nested_levels_are_optimised_in_place() -> None:
    """An Identity inside a nested container is removed there; the outer container keeps its other children."""
    inner = Container("Block", "block", inputs=["x"], outputs=["y"], children=[op("Identity", "i", ["input"], ["output"]), op("Relu", "r", ["X"], ["Y"])],
                      edges=[("block:x", "i:input"), ("i:output", "r:X"), ("r:Y", "block:y")])
    outer = Container(None, "g", inputs=["x"], outputs=["y"], children=[inner], edges=[("g:x", "block:x"), ("block:y", "g:y")], attrs=NS)
    out, report = remove_identities(outer)
    assert report.removed == ("block/i",)
    assert [c.name for c in out.child("block").children] == ["r"]
    assert out.child("block").uid == inner.uid


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(containers(max_ops=8))
def test_passes_never_modify_their_input_and_keep_invariants(model: Container) -> None:
    """Every pass (and the fusions into amanda's own ops a Session adds) leaves its input unchanged and
    returns a container whose every node passes the full constructor checks."""
    from amanda.passes.fuse import fuse_gelu_internal, fuse_matmul_add_internal, fuse_swish_internal

    before = snapshot(model)
    internal = {fn.__name__: fn for fn in (fuse_gelu_internal, fuse_swish_internal, fuse_matmul_add_internal)}
    for name, fn in {**PASSES, **internal}.items():
        out, report = fn(model)
        assert snapshot(model) == before, name
        check_invariants(out)
        assert (out is model) == (not report.changed) or out == model, name
    assert SELF is amanda.SELF
