"""Real models exported from torch (tools/export_fixture_models.py, committed so CI needs no
torch): an LSTM tagger, a two-layer bidirectional GRU and a torch.cond If and a scripted Loop with an If in its body run as onnxruntime
runs them, and survive YAML and ONNX round trips."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import amanda  # noqa: E402
from amanda.io.onnx.export import to_onnx  # noqa: E402
from amanda.io.onnx.importer import from_onnx  # noqa: E402

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "onnx" / "from_torch"
RUNNABLE = ["lstm_tagger", "bigru", "torch_if", "scripted_loop"]


def feeds(name: str, seed: int) -> dict[str, np.ndarray]:
    """Random inputs of the recorded shapes and dtypes (token ids below the vocabulary size)."""
    rng = np.random.default_rng(seed)
    spec = json.loads((FIXTURES / f"{name}.json").read_text())
    return {k: rng.integers(0, 50, v["shape"]).astype(v["dtype"]) if "int" in v["dtype"]
            else rng.standard_normal(v["shape"]).astype(v["dtype"]) for k, v in spec.items()}


@pytest.mark.parametrize("name", RUNNABLE)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_exported_model_runs_as_onnxruntime_runs_it(name: str, seed: int) -> None:
    """amanda's outputs equal onnxruntime's, before and after a YAML and an ONNX round trip."""
    proto = onnx.load(FIXTURES / f"{name}.onnx")
    inputs = feeds(name, seed)
    want = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, inputs)
    model = from_onnx(proto)
    again = amanda.loads(amanda.dumps(model))
    assert again == model
    exported = from_onnx(to_onnx(model))
    outputs = [o.name for o in proto.graph.output]
    for candidate in (model, again, exported):
        with amanda.Session(candidate, threads=1) as session:
            for got, expected in zip(session.run(outputs, inputs), want):
                np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


def test_torch_if_keeps_its_branches_and_types() -> None:
    """The torch.cond model imports as one If whose bodies are containers, with inferred types."""
    model = from_onnx(onnx.load(FIXTURES / "torch_if.onnx"))
    (branch,) = model.select("$..[?type=='If']").containers
    assert isinstance(branch.attrs["then_branch"], amanda.Container)
    types = amanda.infer_types(model)
    assert str(types.output((), "y")) == "float32[3,4]"
