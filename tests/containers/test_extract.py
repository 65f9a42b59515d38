"""``extract`` takes a block out of a model: constants the model feeds it move inside (keeping
their uids), data inputs stay, the block computes what it computed in place, and the model is
unchanged."""

from __future__ import annotations

import numpy as np
import pytest

import amanda
from amanda import Container, op


def _model() -> Container:
    w = op("Constant", "w", outputs=["output"], attrs={"value": np.arange(3, dtype=np.float32), "initializer": True})
    inner = Container("Scale", "scale", inputs=["x", "k"], outputs=["y"], children=[op("Mul", "mul", ["A", "B"], ["C"])],
                      edges=[("scale:x", "mul:A"), ("scale:k", "mul:B"), ("mul:C", "scale:y")])
    block = Container("Block", "block", inputs=["x", "k", "bias"], outputs=["y"],
                      children=[inner, op("Add", "add", ["A", "B"], ["C"])],
                      edges=[("block:x", "scale:x"), ("block:k", "scale:k"), ("scale:y", "add:A"),
                             ("block:bias", "add:B"), ("add:C", "block:y")])
    return Container(None, "m", inputs=[amanda.Port("x", attrs={"dtype": "float32", "shape": (3,)}),
                                        amanda.Port("bias", attrs={"dtype": "float32", "shape": (3,)})],
                     outputs=["y"], children=[w, block],
                     edges=[("m:x", "block:x"), ("w:output", "block:k"), ("m:bias", "block:bias"), ("block:y", "m:y")],
                     attrs={"namespace": "amanda/onnx/17"})


def test_constants_move_in_and_data_inputs_stay() -> None:
    """The weight feeding ``k`` is inside the extracted block (same uid), ``x`` and ``bias``
    (fed by the model's inputs) are still inputs, and the block computes x * w + bias."""
    model = _model()
    alone = amanda.extract(model, "block")
    assert alone.input_names == ("x", "bias")
    assert alone.child("k").uid == model.child("w").uid
    assert alone.namespace == "amanda/onnx/17"  # what it inherited, declared
    x, bias = np.ones(3, np.float32), np.full(3, 0.5, np.float32)
    (y,) = amanda.Session(alone).run(["y"], {"x": x, "bias": bias})
    np.testing.assert_allclose(y, x * np.arange(3) + bias)
    assert model.child("block").input_names == ("x", "k", "bias")  # the model's block is as it was


def test_an_op_path_is_refused() -> None:
    """Only a container can be extracted; naming an op is an ArgumentError."""
    with pytest.raises(amanda.ArgumentError, match="container"):
        amanda.extract(_model(), "w")
