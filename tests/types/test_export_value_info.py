"""Export writes value_info for every intermediate value whose type amanda infers."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

onnx = pytest.importorskip("onnx")

from amanda.io.onnx import from_onnx, to_onnx
from amanda.io.onnx.values import type_to_value
from amanda.types import from_attrs
from tests.types.oracle import compare_one, onnx_types, strip_types

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))


def test_every_node_output_gets_value_info_that_onnx_agrees_with():
    """Each node output of an exported transformer has value_info, checked against onnx's inference."""
    from bench_onnx import transformer_encoder

    source = strip_types(transformer_encoder(layers=1))
    exported = to_onnx(from_onnx(source))
    onnx.checker.check_model(exported)
    infos = {vi.name: from_attrs({"type": type_to_value(vi.type)}) for vi in exported.graph.value_info}
    outputs = {vi.name for vi in exported.graph.output}
    produced = [n for node in exported.graph.node for n in node.output if n and n not in outputs]
    assert produced and all(name in infos for name in produced)
    theirs = onnx_types(strip_types(exported))
    verdicts = {compare_one(infos[name], theirs.get(name)) for name in produced}
    assert verdicts <= {"agree", "more"}


def test_inferred_value_info_is_not_read_back_as_declared():
    """import(export(c)) == c: value_info amanda inferred stays out of the port attributes."""
    from bench_onnx import transformer_encoder

    first = from_onnx(transformer_encoder(layers=1))  # typed graph outputs, as export needs
    exported = to_onnx(first)
    assert any(p.key == "amanda_inferred" for vi in exported.graph.value_info for p in vi.metadata_props)
    assert from_onnx(exported) == first
