"""TensorFlow conversion keeps name scopes: the shipped table's patterns bind ops across
container boundaries, so a scoped import converts with its scopes as containers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amanda import Container, op
from amanda.containers.fusion import fuse
from amanda.rewrite.mapping.tables.tensorflow_onnx import tensorflow_to_onnx
from tests.strategies import check_invariants, snapshot

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("google.protobuf")
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tensorflow"
TF = "amanda/tensorflow/2.21.0"
SCOPES = ("transformer_block_1", "ffn_1_1", "Tensordot")


def _run(converted: Container, feeds: dict) -> list:
    from amanda.io.onnx import to_onnx

    session = ort.InferenceSession(to_onnx(converted).SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {p.name: feeds[p.name] for p in session.get_inputs()})


def test_transformer_block_converts_with_its_nested_scopes_and_tensorflows_outputs() -> None:
    """Keras's transformer block, imported with its name scopes (three levels deep where the
    Tensordot of a feed-forward layer reads its concat axis from a scope below it), converts
    with those scopes as containers, the ConcatV2 inside them an ONNX Concat, and computes what
    TensorFlow computed (its committed outputs)."""
    from amanda.io.tensorflow import endpoint
    from amanda.io.tensorflow.files import load_graphdef
    from amanda.rewrite.mapping.convert import convert

    spec = json.loads((FIXTURES / "transformer_block.json").read_text(encoding="utf-8"))
    data = dict(np.load(FIXTURES / "transformer_block.npz"))
    graph = load_graphdef(FIXTURES / spec["frozen"])
    assert graph.descendant(SCOPES).children
    outputs = {o["key"]: str(endpoint(graph, o["tensor"])) for o in spec["outputs"]}
    converted = convert(graph, "amanda/onnx/17", outputs=outputs)
    tensordot = converted.descendant(SCOPES)
    assert tensordot.type is None and tensordot.children  # still a scope, one level of three
    assert {c.type for c in tensordot.children} >= {"Concat", "MatMul"}
    assert "ConcatV2" not in {c.type for c in tensordot.children}
    feeds = {str(endpoint(graph, i["tensor"])).split(":")[0]: data[i["key"]] for i in spec["inputs"]}
    got = _run(converted, feeds)
    for value, out in zip(got, spec["outputs"], strict=True):
        np.testing.assert_allclose(value, data[out["key"]], rtol=1e-4, atol=1e-4)


def _const(name: str, value: object) -> Container:
    return op("Const", name, [], ["output"], {"value": np.asarray(value, np.int32), "dtype": "int32"})


@st.composite
def scoped_graphs(draw: st.DrawFn) -> tuple[Container, Container]:
    """A chain of TensorFlow Transposes and ConcatV2s whose perms and axes are Consts (flat), and
    the same graph with random runs of sibling ops grouped into scopes, some nested."""
    steps = draw(st.lists(st.sampled_from(["transpose", "concat"]), min_size=1, max_size=4))
    children = [op("Placeholder", "x", [], ["output"], {"dtype": "float32", "shape": [2, 3, 4]})]
    edges, last = [], "x:output"
    for i, step in enumerate(steps):
        if step == "transpose":
            children += [_const(f"p{i}", draw(st.permutations([0, 1, 2]))),
                         op("Transpose", f"t{i}", ["x", "perm"], ["y"], {"T": "float32", "Tperm": "int32"})]
            edges += [(last, f"t{i}:x"), (f"p{i}:output", f"t{i}:perm")]
            last = f"t{i}:y"
        else:
            children += [_const(f"a{i}", draw(st.integers(0, 2))),
                         op("ConcatV2", f"c{i}", ["values_0", "values_1", "axis"], ["output"], {"T": "float32", "N": 2})]
            edges += [(last, f"c{i}:values_0"), (last, f"c{i}:values_1"), (f"a{i}:output", f"c{i}:axis")]
            last = f"c{i}:output"
    flat = Container(None, "g", outputs=["y"], children=children, edges=[*edges, (last, "g:y")],
                     attrs={"namespace": TF})
    scoped = flat
    for depth in range(draw(st.integers(1, 3))):
        names = [c.name for c in scoped.children]
        start = draw(st.integers(0, len(names) - 1))
        stop = draw(st.integers(start + 1, len(names)))
        scoped = fuse(scoped, [(n,) for n in names[start:stop]], "Scope", name=f"scope{depth}")
        scoped = scoped.evolve(children=[c.evolve(type=None) if c.name == f"scope{depth}" else c
                                         for c in scoped.children])  # a name scope, as the importer makes
    return flat, scoped


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scoped_graphs())
def test_scoped_graphs_convert_keeping_scopes_and_computing_as_flat(graphs: tuple[Container, Container]) -> None:
    """Converting a graph with random scopes leaves the input alone, returns a container whose
    every node passes the constructor's checks, keeps every scope as a container, and computes
    in onnxruntime what the flat graph's conversion computes."""
    flat, scoped = graphs
    table = tensorflow_to_onnx()
    before = snapshot(scoped)
    converted = table.apply(scoped)
    assert snapshot(scoped) == before
    check_invariants(converted)
    scopes = [c.name for c in scoped.children if c.children]  # kept, even one its Placeholder left (now an input)
    assert [c.name for c in converted.children if c.type is None] == scopes
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    np.testing.assert_array_equal(_run(converted, {"x": x})[0], _run(table.apply(flat), {"x": x})[0])
