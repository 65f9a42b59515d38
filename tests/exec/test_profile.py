"""Session(profile=True): per-op times, devices and bytes moved, totals up the container tree,
selection by selector, a summary table and a Chrome trace (amanda/exec/profile.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import amanda
from amanda import Container, op
from amanda.errors import ArgumentError, ExecutionError

NS = "amanda/onnx/17"


def _blocks(n=3, width=64):
    """n blocks (MatMul -> Tanh) in a chain, each block a container of type Block."""
    rng = np.random.default_rng(0)
    blocks, edges = [], []
    for i in range(n):
        w = rng.standard_normal((width, width)).astype(np.float32) / 8
        blocks.append(Container("Block", f"b{i}", inputs=["x"], outputs=["y"], children=[
            op("Constant", "w", [], ["output"], attrs={"value": w}), op("MatMul", "mm", ["A", "B"], ["Y"]),
            op("Tanh", "t", ["input"], ["output"])],
            edges=[(f"b{i}:x", "mm:A"), ("w:output", "mm:B"), ("mm:Y", "t:input"),
                   ("t:output", f"b{i}:y")]))
        edges.append(("g:x" if i == 0 else f"b{i - 1}:y", f"b{i}:x"))
    edges.append((f"b{n - 1}:y", "g:y"))
    return Container("G", "g", inputs=["x"], outputs=["y"], children=blocks, edges=edges, attrs={"namespace": NS})


def test_profile_times_add_up_the_tree_and_select_by_selector(tmp_path):
    model = _blocks()
    x = np.ones((256, 64), np.float32)
    session = amanda.Session(model, profile=True)
    assert session.profile is None
    (y,) = session.run(["y"], {"x": x})
    np.testing.assert_allclose(y, amanda.Session(model).run(["y"], {"x": x})[0], rtol=1e-6)
    profile = session.profile
    assert {e.path for e in profile.events} == {(f"b{i}", n) for i in range(3) for n in ("mm", "t")}  # constants are no steps
    assert {e.device for e in profile.events} == {"cpu:0"}
    totals = profile.totals()
    for i in range(3):
        assert totals[(f"b{i}",)][0] == pytest.approx(sum(e.seconds for e in profile.events if e.path[0] == f"b{i}"))
        assert totals[(f"b{i}",)][1] == 2
    assert totals[()][0] == pytest.approx(profile.total)
    assert 0 < profile.total <= profile.wall * 1.001  # measured figure: benchmarks/README.md
    assert profile.total >= 0.5 * profile.wall  # generous: per-op times cover the run
    chosen = profile.select("$..[?type=='Block']")
    assert sorted(chosen) == ["b0", "b1", "b2"] and chosen["b1"] == totals[("b1",)]
    table = profile.summary(depth=1)
    assert "b0" in table and "b2" in table
    trace = tmp_path / "trace.json"
    profile.chrome_trace(trace)
    events = [e for e in json.loads(trace.read_text())["traceEvents"] if e["ph"] == "X"]
    assert sorted(e["name"] for e in events) == sorted("/".join(e.path) for e in profile.events)
    assert all(e["dur"] >= 0 and e["args"]["device"] == "cpu:0" for e in events)


def test_profile_of_a_placed_run_names_devices_and_bytes_moved():
    pytest.importorskip("onnxruntime")
    model = _blocks()
    x = np.ones((8, 64), np.float32)
    session = amanda.Session(model, profile=True, placement={"$..[?name=='b1']": "onnxruntime:cpu"})
    (y,) = session.run(["y"], {"x": x})
    np.testing.assert_allclose(y, amanda.Session(model).run(["y"], {"x": x})[0], rtol=1e-5, atol=1e-6)
    profile = session.profile
    devices = {e.device for e in profile.events}
    assert devices == {"cpu:0", "onnxruntime:cpu"}
    ort_events = [e for e in profile.events if e.device == "onnxruntime:cpu"]
    assert [e.path for e in ort_events] == [("b1",)]  # the innermost container of its ops
    assert ort_events[0].moved == x.nbytes  # b0's output came from numpy
    assert profile.totals()[()][2] == 2 * x.nbytes  # there and back


def test_bad_profile_arguments_are_named():
    with pytest.raises(ExecutionError, match="profile"):
        amanda.Session(_blocks(), profile="yes")
    session = amanda.Session(_blocks(), profile=True)
    session.run(["y"], {"x": np.ones((1, 64), np.float32)})
    with pytest.raises(ArgumentError, match="depth"):
        session.profile.summary(depth=-1)
