"""Identity removal as rewrite rules whose replacement passes a value on: an inference Dropout
goes like an Identity, but not when its mask is read or a training_mode input is connected."""

from __future__ import annotations

import numpy as np

from amanda import Container, Session, op
from amanda.passes import remove_identities

NS = {"namespace": "amanda/onnx/17"}


def _dropout(read_mask: bool = False, training_input: bool = False) -> Container:
    inputs = ["data", "ratio", "training_mode"] if training_input else ["data"]
    children = [op("Dropout", "d", inputs, ["output", "mask"]), op("Relu", "r", ["X"], ["Y"])]
    edges = [("g:x", "d:data"), ("d:output", "r:X"), ("r:Y", "g:y")]
    if training_input:
        children.append(op("Constant", "t", [], ["output"], {"value": np.bool_(False)}))
        edges.append(("t:output", "d:training_mode"))
    if read_mask:
        edges.append(("d:mask", "g:m"))
    return Container(None, "g", inputs=["x"], outputs=["y", "m"] if read_mask else ["y"], children=children, edges=edges,
                     attrs=NS)


def test_an_inference_dropout_is_removed_and_its_reader_reads_the_input() -> None:
    """The Relu reads x directly afterwards and computes max(x, 0) (numpy)."""
    out, report = remove_identities(_dropout())
    assert report.removed == ("d",) and [c.name for c in out.children] == ["r"]
    x = np.float32([-1.0, 2.0])
    np.testing.assert_array_equal(Session(out).run(["y"], {"x": x})[0], np.maximum(x, 0))


def test_a_dropout_whose_mask_is_read_or_that_takes_training_mode_stays() -> None:
    """A read mask, or a connected training_mode input, keeps the Dropout (and the model as it is)."""
    for model in (_dropout(read_mask=True), _dropout(training_input=True)):
        out, report = remove_identities(model)
        assert out is model and not report.changed
