"""Export never hands out a model ONNX rejects, and a graph without outputs exports its results."""

from pathlib import Path

import numpy as np
import onnx
import pytest

import amanda
from amanda.errors import FormatError
from amanda.io.onnx import dump_onnx, to_onnx

ort = pytest.importorskip("onnxruntime")

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TF_GRAPH = next(FIXTURES.glob("*/tensorflow_dense_graph.yaml"))  # TensorFlow dense layer, no outputs


def ill_typed() -> amanda.Container:
    """Add(float32[32,32], float64[16,8]) inside a block: ONNX's type rules reject it."""
    add = amanda.op("Add", "add", inputs=["A", "B"], outputs=["C"])
    block = amanda.Container(None, "block", inputs=["a", "b"], outputs=["c"], children=[add],
                             edges=[("block:a", "add:A"), ("block:b", "add:B"), ("add:C", "block:c")])
    return amanda.Container(
        None, "g",
        inputs=[amanda.Port("a", attrs={"dtype": "float32", "shape": (32, 32)}),
                amanda.Port("b", attrs={"dtype": "float64", "shape": (16, 8)})],
        outputs=[amanda.Port("c", attrs={"dtype": "float32", "shape": (32, 32)})],
        children=[block], edges=[("g:a", "block:a"), ("g:b", "block:b"), ("block:c", "g:c")],
        attrs={"namespace": "amanda/onnx/17"})


def test_ill_typed_graph_is_refused_naming_the_op(tmp_path):
    """Exporting an Add of float32[32,32] and float64[16,8] raises FormatError with the op's path and writes no file."""
    target = tmp_path / "bad.onnx"
    with pytest.raises(FormatError, match="op block/add is rejected by the ONNX") as info:
        dump_onnx(ill_typed(), target)
    assert info.value.path == ("block", "add")
    assert not target.exists()
    with pytest.raises(FormatError, match="block/add"):
        to_onnx(ill_typed())
    assert to_onnx(ill_typed(), check=False).graph.node[0].op_type == "Add"  # the unchecked proto


def test_a_model_too_big_to_check_in_memory_is_checked_as_a_file(tmp_path, monkeypatch):
    """Above protobuf's in-memory limit the written file is checked, and removed when rejected."""
    import amanda.io.onnx as onnx_io
    import amanda.io.onnx.export as export

    monkeypatch.setattr(export, "PROTO_LIMIT", 0)
    monkeypatch.setattr(onnx_io, "PROTO_LIMIT", 0)
    target = tmp_path / "bad.onnx"
    with pytest.raises(FormatError, match="rejected by the ONNX checker"):
        dump_onnx(ill_typed(), target)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_tensorflow_graph_without_outputs_exports_the_values_no_op_reads(tmp_path):
    """Converted without outputs=, the TensorFlow dense graph exports its one unread value (the Relu), runnable."""
    onnx_graph = amanda.convert(amanda.load(TF_GRAPH), "amanda/onnx/17")
    assert onnx_graph.output_names == ()
    target = tmp_path / "dense.onnx"
    amanda.dump(onnx_graph, target)
    model = onnx.load(str(target))
    onnx.checker.check_model(model, full_check=True)
    assert [o.name for o in model.graph.output] == ["dense/Relu:Y"]
    x = np.linspace(-1, 1, 784, dtype=np.float32).reshape(1, 784)
    w = np.linspace(-1, 1, 7840, dtype=np.float32).reshape(784, 10)
    session = ort.InferenceSession(str(target), providers=["CPUExecutionProvider"])
    (got,) = session.run(None, {"Placeholder": x, "dense/kernel": w})
    np.testing.assert_allclose(got, np.maximum(x @ w, 0), rtol=1e-5, atol=1e-5)


def test_tensorflow_graph_with_outputs_exports_exactly_those(tmp_path):
    """convert(..., outputs=[...]) gives a checker-valid file with that output, which onnxruntime runs."""
    onnx_graph = amanda.convert(amanda.load(TF_GRAPH), "amanda/onnx/17", outputs=["dense/MatMul:product"])
    target = tmp_path / "dense.onnx"
    amanda.dump(onnx_graph, target)
    model = onnx.load(str(target))
    onnx.checker.check_model(model, full_check=True)
    assert [o.name for o in model.graph.output] == ["dense/MatMul:product"]
    x = np.linspace(-1, 1, 784, dtype=np.float32).reshape(1, 784)
    w = np.linspace(-1, 1, 7840, dtype=np.float32).reshape(784, 10)
    session = ort.InferenceSession(str(target), providers=["CPUExecutionProvider"])
    (got,) = session.run(None, {"Placeholder": x, "dense/kernel": w})
    np.testing.assert_allclose(got, x @ w, rtol=1e-5, atol=1e-5)


def test_a_graph_with_neither_outputs_nor_unread_values_is_refused():
    """A graph whose every value is read inside it and that declares no outputs cannot be exported."""
    g = amanda.Container(None, "g", inputs=[amanda.Port("x", attrs={"dtype": "float32", "shape": (2,)})],
                         attrs={"namespace": "amanda/onnx/17"})
    with pytest.raises(FormatError, match="declares no outputs"):
        to_onnx(g)


def test_an_output_of_unknown_rank_is_refused_with_the_fix():
    """A graph output whose rank neither its port nor shape inference gives is an error saying what to add."""
    relu = amanda.op("Relu", "relu", inputs=["X"], outputs=["Y"])
    g = amanda.Container(None, "g", inputs=[amanda.Port("x", attrs={"dtype": "float32"})], outputs=["y"],
                         children=[relu], edges=[("g:x", "relu:X"), ("relu:Y", "g:y")],
                         attrs={"namespace": "amanda/onnx/17"})
    with pytest.raises(FormatError, match="rank"):
        to_onnx(g)


def test_outputs_that_name_no_value_are_refused():
    """An outputs= endpoint that names no op output, or is not an endpoint, raises MappingError naming it."""
    graph = amanda.load(TF_GRAPH)
    with pytest.raises(amanda.MappingError, match="nope:x"):
        amanda.convert(graph, "amanda/onnx/17", outputs=["nope:x"])
    with pytest.raises(amanda.MappingError, match="endpoint"):
        amanda.convert(graph, "amanda/onnx/17", outputs=[3])
    with pytest.raises(amanda.MappingError, match="outputs"):
        amanda.convert(graph, "amanda/onnx/17", outputs="dense/Relu:activations")


def test_an_unfrozen_batchnorm_names_layers_freeze_and_following_it_exports():
    """Exporting a model with BatchNorm's running statistics (session variables) points to
    layers.freeze, not to a conversion (converting changes nothing and fails the same way), and
    the model frozen as the message says exports and runs in onnxruntime like the session."""
    from amanda import layers

    value = amanda.Input("x", "float32", ("batch", 4))
    model = amanda.model([value], {"y": (layers.Dense(4, 4, name="fc") >> layers.BatchNorm(4, name="bn"))(value)})
    with pytest.raises(FormatError, match=r"layers\.freeze") as info:
        to_onnx(model)
    assert "bn/moving_mean" in str(info.value) and "convert" not in str(info.value)
    with pytest.raises(FormatError, match=r"layers\.freeze"):
        to_onnx(amanda.convert(model, "amanda/onnx/17"))
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    with amanda.Session(model, threads=1) as session:
        session.run(["y", "train"], {"x": x}, phase="train")
        want = session.run(["y"], {"x": x}, phase="inference")[0]
        frozen = layers.freeze(model, session.state)
    runtime = ort.InferenceSession(to_onnx(frozen).SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(runtime.run(None, {"x": x})[0], want, rtol=1e-4, atol=1e-5)


def test_another_vocabulary_is_told_to_convert():
    """An op of a namespace that is not an ONNX opset (TensorFlow's) still gets the conversion hint."""
    graph = amanda.load(TF_GRAPH)
    with pytest.raises(FormatError, match=r"convert the model to amanda/onnx/<opset>"):
        to_onnx(graph)


@pytest.mark.parametrize("dim", [2**63, 10**20])
def test_a_dimension_beyond_int64_is_a_format_error(dim: int) -> None:
    """A declared dimension ONNX's int64 cannot hold is a FormatError naming the port, not
    protobuf's bare ValueError."""
    x = amanda.Input("x", "float32", [dim, 3])
    net = amanda.model([x], {"y": amanda.ops.Relu(x)}, name="net")
    with pytest.raises(FormatError, match=rf"input port 'x' of net .*a dimension {dim} outside ONNX's range"):
        to_onnx(net)
