"""Attribute references of model-local functions: every call shares one body whose ops keep
the references, documents store them losslessly, and each call still computes with its own
values (checked against onnxruntime)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import AttributeProto, TensorProto, helper  # noqa: E402

import amanda  # noqa: E402
from amanda.containers.refs import AttrRef, resolve_references  # noqa: E402
from amanda.errors import FormatError, InvariantError  # noqa: E402
from amanda.io.onnx.export import to_onnx  # noqa: E402
from amanda.io.onnx.importer import from_onnx  # noqa: E402

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "onnx" / "from_torch" / "function_attributes.onnx"


def torch_calls() -> tuple[onnx.ModelProto, amanda.Container, list[amanda.Container]]:
    proto = onnx.load(FIXTURE)
    model = from_onnx(proto, hierarchy=False)  # the calls at the top, not in module containers
    return proto, model, [node for node in model.children if node.children]


def test_the_torch_calls_hold_the_identical_body() -> None:
    """The three calls of torch's ``Scaled`` (LeakyRelu slopes 0.1, 0.3, 0.1) hold the very
    same children and edges objects, and so do their copies loaded from YAML and JSON."""
    _, model, calls = torch_calls()
    assert [call.attrs["inferred::LeakyRelu_alpha"] for call in calls] == pytest.approx([0.1, 0.3, 0.1])
    assert calls[0].children is calls[1].children is calls[2].children
    assert calls[0].edges is calls[1].edges is calls[2].edges
    for fmt in ("yaml", "json"):
        again = amanda.loads(amanda.dumps(model, format=fmt), format=fmt)
        assert again == model
        kids = [node.children for node in again.children if node.children]
        assert kids[0] is kids[1] is kids[2]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_each_torch_call_computes_with_its_own_slope(seed: int) -> None:
    """Every call's output (not only the model's) equals onnxruntime's value of the same name,
    so the shared body runs with slope 0.1, 0.3 and 0.1 in turn; the slopes matter for these
    inputs (a slope of 0.1 in the second call gives another value)."""
    proto, model, calls = torch_calls()
    names = [call.outputs[0].attrs["onnx_name"] for call in calls]
    probe = onnx.ModelProto()
    probe.CopyFrom(proto)
    del probe.graph.output[:]
    probe.graph.output.extend(helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in names)
    x = np.random.default_rng(seed).standard_normal((2, 8)).astype(np.float32) * 3
    want = ort.InferenceSession(probe.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    fetches = [amanda.Endpoint((call.name,), call.output_names[0]) for call in calls]
    with amanda.Session(model, threads=1) as session:
        got = session.run(fetches, {"x": x})
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    same = amanda.replace(model, (calls[1].name,), lambda call: call.with_attrs(**{"inferred::LeakyRelu_alpha": 0.1}))
    with amanda.Session(same, threads=1) as session:
        other = session.run([fetches[1]], {"x": x})[0]
    assert not np.allclose(other, want[1], rtol=1e-5, atol=1e-6)


def test_types_and_validation_see_each_calls_values() -> None:
    """Type inference types every call's output through the shared body and ``validate``
    finds nothing wrong, although the body's LeakyRelu holds a reference, not a float."""
    _, model, calls = torch_calls()
    assert amanda.validate(model) == []
    types = amanda.infer_types(model)
    assert [str(types.output((call.name,), "y")) for call in calls] == ["float32[2,8]"] * 3


def test_references_survive_documents_as_markers() -> None:
    """A body op's reference is written as ``{__ref__: {name, type}}`` and reads back equal."""
    _, model, calls = torch_calls()
    (relu,) = (op for op in calls[0].children if op.type == "LeakyRelu")
    text = amanda.dumps(relu)
    assert "__ref__" in text and "inferred::LeakyRelu_alpha" in text
    assert amanda.loads(text).attrs["alpha"] == AttrRef("inferred::LeakyRelu_alpha", "float")
    assert amanda.loads(amanda.dumps(relu, format="json"), format="json") == relu


@pytest.mark.parametrize("body", [{"name": 3}, {"name": ""}, {"type": "float"}, {"name": "a", "kind": "float"}, "a"])
def test_a_malformed_reference_marker_is_a_format_error(body: object) -> None:
    """A ``__ref__`` marker without a non-empty string name (or with unknown keys) is refused
    with a FormatError naming where it is."""
    doc = {"op": {"type": "Elu", "name": "e", "attrs": {"alpha": {"__ref__": body}}}}
    with pytest.raises(FormatError, match="__ref__"):
        amanda.loads(json.dumps(doc), format="json")


def test_a_reference_outside_any_call_is_reported() -> None:
    """An op referring to a call attribute with no call around it is an InvariantError for
    the resolved view, a problem for ``validate`` and a FormatError for export."""
    model = amanda.Container(None, "g", inputs=[amanda.Port("x", attrs={"dtype": "float32", "shape": [3]})],
                             outputs=["y"], children=[amanda.op("Elu", "e", ["X"], ["Y"], {"alpha": AttrRef("a", "float")})],
                             edges=[("g:x", "e:X"), ("e:Y", "g:y")], attrs={"namespace": "amanda/onnx/17"})
    with pytest.raises(InvariantError, match="outside any call"):
        resolve_references(model)
    problems = amanda.validate(model)
    assert [p.path for p in problems] == [("e",)]
    with pytest.raises(FormatError, match="outside any function body"):
        to_onnx(model)


def test_a_call_reached_by_an_edit_is_written_inline_with_its_values() -> None:
    """A call of the torch model that an ``amanda.edit`` wrapper rewires inside is written as
    plain nodes carrying that call's slope (0.3), not a reference; onnxruntime agrees with
    amanda on the edited model."""
    _, model, calls = torch_calls()
    (relu,) = (op for op in calls[1].children if op.type == "LeakyRelu")
    inside = (model.name, calls[1].name)
    feeding = next(e.src for e in calls[1].edges if e.dst.op == (relu.name,))
    src, dst = amanda.Endpoint((*inside, *feeding.op), feeding.port), amanda.Endpoint((*inside, relu.name), "X")
    edit = amanda.edit(model)
    edit.add(amanda.op("Neg", "neg", ["X"], ["Y"]))
    edit.remove_edge(src, dst)
    edit.connect(src, "neg:X")
    edit.connect("neg:Y", dst)
    wrapped = edit.build()
    proto = to_onnx(wrapped)
    onnx.checker.check_model(proto, full_check=True)
    (leaky,) = (n for n in proto.graph.node if n.op_type == "LeakyRelu")
    assert [(a.name, a.ref_attr_name, a.type) for a in leaky.attribute] == [("alpha", "", AttributeProto.FLOAT)]
    assert leaky.attribute[0].f == pytest.approx(0.3)
    x = np.random.default_rng(0).standard_normal((2, 8)).astype(np.float32)
    want = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    with amanda.Session(wrapped, threads=1) as session:
        got = session.run([o.name for o in proto.graph.output], {"x": x})
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)


def test_a_partitioned_run_gives_each_call_its_slope() -> None:
    """Ops of the shared body spread over two devices run, part by part, with each call's own
    slope: the partitioned run equals onnxruntime's output."""
    from amanda.exec.dist import partition, run_partitioned

    proto, model, _ = torch_calls()
    for i, path in enumerate(amanda.flatten(model).ops):
        model = amanda.with_attrs(model, [path], device=f"worker-{i % 2}")
    x = np.random.default_rng(3).standard_normal((2, 8)).astype(np.float32) * 3
    parts = partition(model, [o.name for o in proto.graph.output], ["x"])
    assert len(parts.parts) > 1
    want = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    np.testing.assert_allclose(run_partitioned(parts, {"x": x})[0], want[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("target", ["amanda/onnx/13", "amanda/onnx/20"])
def test_a_model_with_references_converts_between_opsets(target: str) -> None:
    """Opset conversion carries a body's reference through (its declared type fits the other
    opset's schema); the converted model and its export agree with onnxruntime on the original."""
    proto, model, _ = torch_calls()
    converted = amanda.convert(model, target)
    relus = [op for _, op, _ in amanda.walk(converted) if op.type == "LeakyRelu"]
    assert {op.attrs["alpha"] for op in relus} == {AttrRef("inferred::LeakyRelu_alpha", "float")}
    x = np.random.default_rng(4).standard_normal((2, 8)).astype(np.float32) * 3
    want = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    with amanda.Session(converted, threads=1) as session:
        np.testing.assert_allclose(session.run(["21"], {"x": x})[0], want[0], rtol=1e-5, atol=1e-6)
    exported = to_onnx(converted)
    assert [f.name for f in exported.functions] == ["Scaled"]
    got = ort.InferenceSession(exported.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)


def test_gradients_through_the_calls_use_each_calls_slope() -> None:
    """``amanda.grad`` of the torch model's output (summed) with respect to its input equals
    the gradient written out in numpy, each call y = 2 * leaky(x @ W.T + b, slope) with its
    own slope; the numpy forward pass equals onnxruntime's."""
    from onnx import numpy_helper

    proto, model, calls = torch_calls()
    inits = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in proto.graph.initializer}
    x = np.random.default_rng(5).standard_normal((2, 8)).astype(np.float32) * 3
    h, pre = x.astype(np.float64), []
    for prefix, slope in zip("abc", (0.1, 0.3, 0.1)):
        w, b = inits[f"{prefix}.linear.weight"], inits[f"{prefix}.linear.bias"]
        z = h @ w.T + b
        pre.append((w, z, slope))
        h = 2 * np.where(z > 0, z, slope * z)
    want = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(h, want, rtol=1e-5, atol=1e-5)
    g = np.ones_like(h)
    for w, z, slope in reversed(pre):
        g = (2 * g * np.where(z > 0, 1.0, slope)) @ w
    graded = amanda.grad(model, "21", ["x"])
    with amanda.Session(graded, threads=1) as session:
        got = session.run(["grad/x"], {"x": x})[0]
    np.testing.assert_allclose(got, g, rtol=1e-4, atol=1e-5)
