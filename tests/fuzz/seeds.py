"""Valid inputs the fuzzers start from, built once per process (``warm`` builds them all).

Containers come from the shared hypothesis strategies (drawn derandomized, so every process
gets the same ones), the YAML fixtures and the ONNX fixture models; mapping tables from
``docs/mapping.md`` and the shipped TensorFlow -> ONNX table.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

import numpy as np

import amanda
from amanda import SELF, Container, op

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent


@functools.cache
def strategy_containers() -> tuple[Container, ...]:
    """Containers drawn (derandomized) from ``tests.strategies.containers``."""
    from hypothesis import HealthCheck, Phase, given, settings

    from tests.strategies import containers

    found: list[Container] = []

    @settings(max_examples=12, derandomize=True, database=None, deadline=None,
              phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(containers(max_ops=8))
    def collect(container: Container) -> None:
        found.append(container)

    collect()
    return tuple(found)


@functools.cache
def onnx_protos() -> dict[str, Any]:
    """The ONNX fixture models (``ModelProto``s), by builder name."""
    from tests.fixtures.onnx.onnx_models import BUILDERS

    return {name: build() for name, build in BUILDERS.items()}


@functools.cache
def onnx_containers() -> dict[str, Container]:
    """The ONNX fixture models imported."""
    from amanda.io.onnx import from_onnx

    return {name: from_onnx(proto) for name, proto in onnx_protos().items()}


def query_model() -> Container:
    """The model of ``docs/query.md``: a nested cell, a '/' name, a named control port."""
    cell = Container("LSTMCell", "cell", inputs=["x"], outputs=["y"],
                     children=[op("Dot", "w", ["a"], ["y"]), op("Tanh", "act", ["x"], ["y"])],
                     edges=[("cell:x", "w:a"), ("w:y", "act:x"), ("act:y", "cell:y")],
                     attrs={"rnn_cell": True})
    return Container(
        "Model", "model", inputs=["x"], outputs=["y"], controls=["inference"],
        children=[op("Const", "init", outputs=["w"], attrs={"initializer": True}), cell,
                  op("Dot", "dense/MatMul", ["a", "b"], ["y"]),
                  op("Print", "show", ["x"], [], attrs={"debug": True})],
        edges=[("model:x", "cell:x"), ("cell:y", "dense/MatMul:a"), ("init:w", "dense/MatMul:b"),
               ("dense/MatMul:y", "model:y"), ("dense/MatMul:y", "show:x"),
               ("show:-1", (SELF, "inference"))])


def tf_graph() -> Container:
    """The TensorFlow graph of ``docs/mapping.md``: Placeholder, Const, MatMul, Relu."""
    return Container(None, "g", attrs={"namespace": "amanda/tensorflow/1.13.1"}, children=[
        op("Placeholder", "x", [], ["output"], {"dtype": "float32", "shape": [1, 4]}),
        op("Const", "w", [], ["output"], {"value": np.ones((4, 2), np.float32), "dtype": "float32"}),
        op("MatMul", "mm", ["a", "b"], ["product"],
           {"T": "float32", "transpose_a": False, "transpose_b": False}),
        op("Relu", "relu", ["features"], ["activations"], {"T": "float32"}),
    ], edges=[("x:output", "mm:a"), ("w:output", "mm:b"), ("mm:product", "relu:features")])


@functools.cache
def fixture_texts() -> tuple[str, ...]:
    """The YAML documents in ``tests/fixtures/documents``."""
    return tuple(p.read_text() for p in sorted((TESTS / "fixtures" / "documents").glob("*.yaml")))


@functools.cache
def containers() -> tuple[Container, ...]:
    """Every seed container: strategies, fixtures, ONNX models, the query and TF graphs."""
    loaded = [amanda.loads(text) for text in fixture_texts()]
    return (*strategy_containers(), *loaded, *onnx_containers().values(), query_model(), tf_graph())


@functools.cache
def documents(format: str) -> tuple[str, ...]:
    """Every seed container as YAML or JSON text (plus the fixture files themselves)."""
    texts = tuple(amanda.dumps(c, format) for c in containers())
    return texts + fixture_texts() if format == "yaml" else texts


_MAPPING_HEAD = "mapping:\n  source: user/a\n  target: user/b\n  rules:\n"


@functools.cache
def mapping_texts() -> tuple[str, ...]:
    """Mapping tables: the shipped TF -> ONNX table, the YAML blocks of ``docs/mapping.md``
    that load, and tables over the user namespaces of :func:`user_graph`."""
    docs = (ROOT / "docs" / "mapping.md").read_text()
    blocks = re.findall(r'load_mapping\("""\n(.*?)"""\)', docs, re.DOTALL)
    shipped = ROOT / "amanda" / "rewrite" / "mapping" / "tables" / "tensorflow_onnx.yaml"
    dense = _MAPPING_HEAD + """\
    - name: dense
      tags: [fusion]
      match:
        ops: { $mm: MatMul, $b: BiasAdd }
        edges: ["$mm.product -> $b.value"]
        where: "${$mm.consumers.product == `1`}"
      map:
        ops:
          $g:
            type: Gemm
            name: "${$b.name}_gemm"
            inputs: [A, B, C]
            outputs: [Y]
            attrs: { transB: "${if($mm.attrs.transpose_b, `1`, `0`)}", note: "from ${$mm.name}" }
        ports: { $mm.a: $g.A, $mm.b: $g.B, $b.bias: $g.C, $b.output: $g.Y }
    - name: relu
      apply_after: [dense]
      match: { ops: { $r: { type: Relu, attrs: { alpha: 0.5 } } } }
      map: { ops: { $r: { type: Rectifier, keep_attrs: [alpha] } } }
"""
    shorthand = _MAPPING_HEAD + """\
    - { name: keep, match: { ops: { $o: [MatMul, BiasAdd] } }, map: relabel }
    - name: drop
      match: { ops: { $r: Relu } }
      map: { ops: {}, ports: { $r.activations: $r.features } }
    - name: grow
      match: { ops: { $o: '*' } }
      map:
        ops: { $o: {}, $k: { type: Constant, attrs: { value: "${tensor(range(`0`, `4`), 'int64')}" } } }
        inputs: [{ name: "${$o.name}_in", attrs: { dtype: float32 } }]
"""
    return (shipped.read_text(), *blocks, dense, shorthand)


def user_graph() -> Container:
    """A small graph in namespace ``user/a`` for the tables of :func:`mapping_texts`."""
    return Container(None, "g", attrs={"namespace": "user/a"}, children=[
        op("MatMul", "mm", ["a", "b"], ["product"], {"transpose_a": False, "transpose_b": True}),
        op("BiasAdd", "add", ["value", "bias"], ["output"]),
        op("Relu", "relu", ["features"], ["activations"], {"alpha": 0.5})],
        inputs=["x", "w", "bias"], outputs=["y"],
        edges=[("g:x", "mm:a"), ("g:w", "mm:b"), ("mm:product", "add:value"), ("g:bias", "add:bias"),
               ("add:output", "relu:features"), ("relu:activations", "g:y")])


def warm() -> None:
    """Build every seed pool now (before hypothesis or the worker loop starts)."""
    documents("yaml")
    documents("json")
    mapping_texts()
