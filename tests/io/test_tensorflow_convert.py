"""TensorFlow fixtures run in amanda's Session and convert to ONNX with TensorFlow's outputs.

The expected outputs are TensorFlow 2.21's own, stored in each fixture's ``.npz`` by
tools/gen_tensorflow_fixtures.py; tolerance 1e-4. Graphs are imported flat (``hierarchy=False``),
and scoped (the default): the shipped table converts the scoped graph with its scopes kept (its
patterns follow values through container ports), and both compute the same.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import amanda
from amanda.io.tensorflow import endpoint
from amanda.io.tensorflow.files import load_graphdef
from amanda.rewrite.mapping.convert import convert

ort = pytest.importorskip("onnxruntime")

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tensorflow"
CONVERTED = ["dense", "mobilenet_v2", "resnet_small", "transformer_block", "control_flow", "lstm_classifier"]
ALL = [*CONVERTED, "tf1_variables"]


def _fixture(name: str, hierarchy: bool = False) -> tuple[dict, dict, amanda.Container]:
    spec = json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))
    data = dict(np.load(FIXTURES / f"{name}.npz"))
    graph = load_graphdef(FIXTURES / (spec.get("frozen") or spec["graphdef"]), hierarchy=hierarchy and "auto")
    return spec, data, graph


@pytest.mark.parametrize("name", CONVERTED)
def test_keras_cnns_run_in_the_session_as_in_tensorflow(name: str) -> None:
    """The dense model, MobileNetV2 (depthwise convolutions), the small ResNet, the transformer
    block (layer norms with StopGradient), the functional While/If graph and the LSTM (a While
    over tensor lists) give TensorFlow's outputs, imported flat or scoped."""
    for hierarchy in (False, True):
        spec, data, graph = _fixture(name, hierarchy)
        feeds = {str(endpoint(graph, i["tensor"])): data[i["key"]] for i in spec["inputs"]}
        fetches = [str(endpoint(graph, o["tensor"])) for o in spec["outputs"]]
        for got, out in zip(amanda.Session(graph).run(fetches, feeds), spec["outputs"], strict=True):
            np.testing.assert_allclose(got, data[out["key"]], rtol=1e-4, atol=1e-4)


def test_tf1_variables_run_in_the_session_as_in_tensorflow() -> None:
    """The TF1 graph runs as TensorFlow ran it: its ``init`` targets first, then ``y`` and ``z``
    fetched once (the AssignAdd under ``z``'s control dependency bumps the counter before it is
    read); flat or scoped, TensorFlow's outputs, and fetching before ``init`` is an error."""
    for hierarchy in (False, True):
        spec, data, graph = _fixture("tf1_variables", hierarchy)
        feeds = {str(endpoint(graph, i["tensor"])): data[i["key"]] for i in spec["inputs"]}
        fetches = [str(endpoint(graph, o["tensor"])) for o in spec["outputs"]]
        with pytest.raises(amanda.ExecutionError):
            amanda.Session(graph).run(fetches, feeds)
        session = amanda.Session(graph)
        assert session.run(spec["init"]) == [None] * len(spec["init"])
        for got, out in zip(session.run(fetches, feeds), spec["outputs"], strict=True):
            np.testing.assert_allclose(got, data[out["key"]], rtol=1e-4, atol=1e-4)


def _variables_as_fetched(graph: amanda.Container) -> dict[str, np.ndarray]:
    """Each VariableV2's value when TensorFlow fetched the outputs (numpy, from the graph's
    constants): its constant Assign initialiser, plus each AssignAdd's constant (run once)."""
    def const(node: str) -> np.ndarray:
        found = graph.child(node)
        assert found.type == "Const"
        return np.asarray(found.attrs["value"])

    def source(dst: str, port: str) -> str:
        (edge,) = [e for e in graph.edges if e.dst.op == (dst,) and e.dst.port == port]
        return edge.src.op[0]

    values: dict[str, np.ndarray] = {}
    for kind in ("Assign", "AssignAdd"):
        for node in (c for c in graph.children if c.type == kind):
            variable, value = source(node.name, "ref"), const(source(node.name, "value"))
            values[variable] = value if kind == "Assign" else np.asarray(values[variable] + value)
    return values


@pytest.mark.parametrize("name", ALL)
def test_fixtures_convert_to_onnx_with_tensorflows_outputs(name: str) -> None:
    """The converted model, in onnxruntime, gives what TensorFlow computed. The TF1 graph's
    variables are inputs of the model (ONNX has no state), fed the values TensorFlow's variables
    held when it fetched the outputs (after ``init`` and the AssignAdd), as a frozen graph would
    hold them."""
    from amanda.io.onnx import to_onnx

    spec, data, graph = _fixture(name)
    outputs = {o["key"]: str(endpoint(graph, o["tensor"])) for o in spec["outputs"]}
    converted = convert(graph, "amanda/onnx/17", outputs=outputs)
    assert amanda.validate(converted) == []
    session = ort.InferenceSession(to_onnx(converted).SerializeToString(), providers=["CPUExecutionProvider"])
    by_tensor = {str(endpoint(graph, i["tensor"])).split(":")[0]: data[i["key"]] for i in spec["inputs"]}
    by_tensor.update(_variables_as_fetched(graph))
    feeds = {port.name: by_tensor[port.name] for port in session.get_inputs()}
    for got, out in zip(session.run(list(outputs), feeds), spec["outputs"], strict=True):
        np.testing.assert_allclose(got, data[out["key"]], rtol=1e-4, atol=1e-4)


def _run_converted(graph: amanda.Container, outputs: dict[str, str], feeds_by_name: Any) -> list[np.ndarray]:
    from amanda.io.onnx import to_onnx

    converted = convert(graph, "amanda/onnx/17", outputs=outputs)
    assert amanda.validate(converted) == []
    session = ort.InferenceSession(to_onnx(converted).SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(list(outputs), {p.name: feeds_by_name(p) for p in session.get_inputs()})


@pytest.mark.parametrize("name", ALL)
def test_scoped_import_converts_to_the_flat_imports_model(name: str) -> None:
    """Converting the scoped import gives, in onnxruntime, what converting the flat one gives
    (and TensorFlow's outputs where the fixture records them for every input: the TF1 graph's
    variables are inputs of the ONNX model, fed the same random values to both)."""
    results = []
    for hierarchy in (False, True):
        spec, data, graph = _fixture(name, hierarchy)
        outputs = {o["key"]: str(endpoint(graph, o["tensor"])) for o in spec["outputs"]}
        by_tensor = {str(endpoint(graph, i["tensor"])).split(":")[0]: data[i["key"]] for i in spec["inputs"]}

        def feed(port: Any, by_tensor: dict = by_tensor) -> np.ndarray:
            if port.name in by_tensor:
                return by_tensor[port.name]
            dims = [d if isinstance(d, int) else 1 for d in port.shape]
            # one value per variable: flat 'layer/w', scoped 'w_' (its scope kept; the node is a scope too)
            seed = sum(map(ord, port.name.split("/")[-1].rstrip("_")))
            return np.random.default_rng(seed).standard_normal(dims).astype(np.float32)

        results.append(_run_converted(graph, outputs, feed))
        if name in CONVERTED:
            for got, out in zip(results[-1], spec["outputs"], strict=True):
                np.testing.assert_allclose(got, data[out["key"]], rtol=1e-4, atol=1e-4)
    for flat, scoped in zip(*results, strict=True):
        np.testing.assert_allclose(scoped, flat, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("hierarchy", [False, True])
def test_lowered_control_flow_is_raised_and_converts(hierarchy: bool) -> None:
    """The lowered graph (Switch/Merge/Enter/Exit/NextIteration) converts, via a raised While
    and If, to a model giving TensorFlow's outputs in onnxruntime and in the Session."""
    from amanda.rewrite.mapping.tables.tensorflow_onnx_lowered import raise_control_flow
    from amanda.rewrite.mapping.tables.tensorflow_onnx_scopes import flat_scopes

    spec = json.loads((FIXTURES / "control_flow.json").read_text(encoding="utf-8"))
    data = dict(np.load(FIXTURES / "control_flow.npz"))
    graph = load_graphdef(FIXTURES / spec["lowered"], hierarchy=hierarchy and "auto")
    raised, moved = raise_control_flow(flat_scopes(graph)[0])
    kinds = sorted(c.type or "" for c in raised.children)
    assert kinds.count("While") == 1 and kinds.count("If") == 1 and "Switch" not in kinds and "Merge" not in kinds
    assert len(moved) == 6  # five Exits and the conditional's Merge
    outputs = {o["key"]: str(endpoint(graph, o["tensor"])) for o in spec["outputs"]}
    by_tensor = {i["tensor"].split(":")[0]: data[i["key"]] for i in spec["inputs"]}
    got = _run_converted(graph, outputs, lambda port: by_tensor[port.name])
    np.testing.assert_allclose(got[0], data["output_0"], rtol=1e-4, atol=1e-4)
    feeds = {str(endpoint(graph, i["tensor"])): data[i["key"]] for i in spec["inputs"]}
    (session,) = amanda.Session(graph).run(list(outputs.values()), feeds)
    np.testing.assert_allclose(session, data["output_0"], rtol=1e-4, atol=1e-4)
