"""An input passed straight through as an output: the model is a graph without ops, which
builds, validates, runs, exports and round-trips; nested inside another model it is a wire."""

from __future__ import annotations

import numpy as np
import pytest

import amanda
from amanda import Container, Input, Port, model, ops

FEED = np.float32([[-1, 2, 3], [4, -5, 6]])


def passthrough() -> Container:
    x = Input("x", "float32", (2, 3))
    return model([x], {"y": x}, name="wire")


def outer() -> Container:
    z = Input("z", "float32", (2, 3))
    inner = passthrough()
    return model([z], {"relu": ops.Relu(inner(z)), "raw": inner(z)}, name="outer")


def test_a_model_that_passes_its_input_through_is_a_graph_without_ops():
    """It has no ops (iteration and the is_op query find none), no problems, and types its output."""
    m = passthrough()
    assert not m.is_op and list(m) == [] and amanda.select(m, "$..[?is_op]").paths == ()
    assert amanda.validate(m) == []
    assert str(amanda.infer_types(m).output((), "y")) == "float32[2,3]"
    assert amanda.loads(amanda.dumps(m)) == m


@pytest.mark.parametrize("threads", [None, 1, 2])
@pytest.mark.parametrize("optimize", [True, False])
def test_a_passthrough_model_runs_alone_and_nested(threads, optimize):
    """Session.run gives the fed values back, and inside another model the wire joins the Relu
    to the outer input (numpy's maximum is the oracle)."""
    with amanda.Session(passthrough(), threads=threads, optimize=optimize) as session:
        np.testing.assert_array_equal(session.run(["y"], {"x": FEED})[0], FEED)
    m = outer()
    assert amanda.validate(m) == [] and [o.type for o in m] == ["Relu"]
    with amanda.Session(m, threads=threads, optimize=optimize) as session:
        relu, raw = session.run(["relu", "raw"], {"z": FEED})
    np.testing.assert_array_equal(relu, np.maximum(FEED, 0))
    np.testing.assert_array_equal(raw, FEED)


@pytest.mark.parametrize("build", [passthrough, outer])
def test_a_passthrough_model_exports_and_onnxruntime_agrees(build):
    """to_onnx writes a model the ONNX checker accepts, with the model's opset; onnxruntime and
    the re-imported model compute what the Session computes."""
    ort = pytest.importorskip("onnxruntime")
    from amanda.io.onnx import from_onnx, to_onnx

    m = build()
    proto = to_onnx(m)
    assert {(o.domain, o.version) for o in proto.opset_import} == {("", 17)}
    names = list(m.output_names)
    feeds = {m.input_names[0]: FEED}
    with amanda.Session(m) as session:
        ours = session.run(names, feeds)
    theirs = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"]).run(names, feeds)
    with amanda.Session(from_onnx(proto)) as session:
        again = session.run(names, feeds)
    for a, b, c in zip(ours, theirs, again):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)


def test_a_hand_built_wire_without_a_namespace_runs():
    """A Container with only an edge from its input to its output runs too."""
    wire = Container(None, "w", inputs=[Port("a")], outputs=[Port("b")], edges=[("w:a", "w:b")])
    with amanda.Session(wire) as session:
        np.testing.assert_array_equal(session.run(["b"], {"a": FEED})[0], FEED)
