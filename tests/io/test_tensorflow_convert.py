"""TensorFlow fixtures run in amanda's Session and convert to ONNX with TensorFlow's outputs.

The expected outputs are TensorFlow 2.21's own, stored in each fixture's ``.npz`` by
tools/gen_tensorflow_fixtures.py; tolerance 1e-4. Graphs are imported flat (``hierarchy=False``)
so that rules folding a Const see it at the op's level.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import amanda
from amanda.io.tensorflow import endpoint
from amanda.io.tensorflow.files import load_graphdef
from amanda.rewrite.mapping.convert import convert

ort = pytest.importorskip("onnxruntime")

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tensorflow"
CONVERTED = ["dense", "mobilenet_v2", "resnet_small", "transformer_block"]


def _fixture(name: str) -> tuple[dict, dict, amanda.Container]:
    spec = json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))
    data = dict(np.load(FIXTURES / f"{name}.npz"))
    graph = load_graphdef(FIXTURES / (spec.get("frozen") or spec["graphdef"]), hierarchy=False)
    return spec, data, graph


@pytest.mark.parametrize("name", ["mobilenet_v2", "resnet_small"])
def test_keras_cnns_run_in_the_session_as_in_tensorflow(name: str) -> None:
    """MobileNetV2 (depthwise convolutions) and the small ResNet give TensorFlow's outputs."""
    spec, data, graph = _fixture(name)
    feeds = {str(endpoint(graph, i["tensor"])): data[i["key"]] for i in spec["inputs"]}
    fetches = [str(endpoint(graph, o["tensor"])) for o in spec["outputs"]]
    for got, out in zip(amanda.Session(graph).run(fetches, feeds), spec["outputs"], strict=True):
        np.testing.assert_allclose(got, data[out["key"]], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", CONVERTED)
def test_fixtures_convert_to_onnx_with_tensorflows_outputs(name: str) -> None:
    """The converted model, in onnxruntime, gives what TensorFlow computed."""
    from amanda.io.onnx import to_onnx

    spec, data, graph = _fixture(name)
    outputs = {o["key"]: str(endpoint(graph, o["tensor"])) for o in spec["outputs"]}
    converted = convert(graph, "amanda/onnx/17", outputs=outputs)
    assert amanda.validate(converted) == []
    session = ort.InferenceSession(to_onnx(converted).SerializeToString(), providers=["CPUExecutionProvider"])
    by_tensor = {str(endpoint(graph, i["tensor"])).split(":")[0]: data[i["key"]] for i in spec["inputs"]}
    feeds = {port.name: by_tensor[port.name] for port in session.get_inputs()}
    for got, out in zip(session.run(list(outputs), feeds), spec["outputs"], strict=True):
        np.testing.assert_allclose(got, data[out["key"]], rtol=1e-4, atol=1e-4)
