"""to_dot, render and the display hooks, checked by parsing the DOT back with Graphviz itself."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import amanda
from amanda import RenderError
from amanda.viz import render, to_dot, tree_text
from tests.strategies import containers, snapshot

DOT = shutil.which("dot")
needs_dot = pytest.mark.skipif(DOT is None, reason="Graphviz's dot program is not installed")


def parsed(text: str) -> dict:
    """The graph as Graphviz's own parser reads it (dot -Tjson)."""
    out = subprocess.run([DOT, "-Tjson"], input=text.encode(), capture_output=True, check=True)
    return json.loads(out.stdout)


def boxes(graph: dict) -> dict[str, dict]:
    """Nodes (not clusters) by their first label line."""
    return {o["label"].split("\\n")[0]: o for o in graph["objects"] if "nodes" not in o and "label" in o}


def clusters(graph: dict) -> dict[str, dict]:
    return {o["label"]: o for o in graph["objects"] if o.get("name", "").startswith("cluster_")}


def skip_model() -> amanda.Container:
    body = amanda.chain(
        amanda.op("MatMul", "L1", ["x"], ["y"]),
        amanda.op("Relu", "L2", ["x"], ["y"]),
        amanda.op("Relu", "L3", ["x"], ["y"]),
        inputs=["x"], outputs=["y"], name="body",
    )
    return (
        amanda.edit(body)
        .remove_edge("body/L2:y", "body/L3:x")
        .add(amanda.op("Add", "skip", ["a", "b"], ["y"]))
        .connect("body/L1:y", "skip:a").connect("body/L2:y", "skip:b").connect("skip:y", "body/L3:x")
        .build(name="resnet")
    )


@needs_dot
def test_skip_connection_draws_clusters_boxes_and_a_struck_through_removed_edge() -> None:
    """The edited chain is a cluster of its three ops, the skip op sits outside it, and the
    tombstoned edge L2 -> L3 is drawn red and dashed with a struck-through label."""
    graph = parsed(to_dot(skip_model()))
    assert set(clusters(graph)) == {"body: Chain"}
    names = boxes(graph)
    assert {"L1", "L2", "L3", "skip"} <= set(names)
    inside = {graph["objects"][i]["label"].split("\\n")[0] for i in clusters(graph)["body: Chain"]["nodes"]}
    assert inside == {"L1", "L2", "L3"}
    by_id = {o["_gvid"]: o["label"].split("\\n")[0] for o in graph["objects"] if "label" in o}
    removed = [e for e in graph["edges"] if e.get("style") == "dashed"]
    assert [(by_id[e["tail"]], by_id[e["head"]]) for e in removed] == [("L2", "L3")]
    assert removed[0]["color"] == "#c0392b" and "<S>" in to_dot(skip_model())
    live = {(by_id[e["tail"]], by_id[e["head"]]) for e in graph["edges"] if e.get("style") != "dashed"}
    assert {("L1", "skip"), ("L2", "skip"), ("skip", "L3"), ("L1", "L2")} <= live
    assert ("L2", "L3") not in live


@needs_dot
def test_control_edges_are_dotted_and_types_label_edges() -> None:
    """A control edge is dotted; a data edge is labelled with its source port's dtype and shape."""
    a = amanda.op("Relu", "a", ["x"], [amanda.Port("y", attrs={"dtype": "float32", "shape": ("batch", 8)})])
    b = amanda.op("Relu", "b", ["x"], ["y"])
    c = amanda.op("Print", "c", [], [])
    g = amanda.Container(
        "G", "g", inputs=["x"], outputs=["y"], children=[a, b, c],
        edges=[("g:x", "a:x"), ("a:y", "b:x"), ("b:y", "g:y"), ("a:-1", "c:-1")],
    )
    graph = parsed(to_dot(g))
    by_id = {o["_gvid"]: o["label"].split("\\n")[0] for o in graph["objects"] if "label" in o}
    edges = {(by_id[e["tail"]], by_id[e["head"]]): e for e in graph["edges"]}
    assert edges[("a", "b")]["label"] == "float32[batch,8]"
    assert edges[("a", "c")]["style"] == "dotted"


@needs_dot
def test_depth_and_budget_collapse_containers_into_counted_boxes() -> None:
    """Past ``depth`` (or the box budget) a container is one box labelled with its op counts."""
    model = skip_model()
    graph = parsed(to_dot(model, depth=0))
    assert clusters(graph) == {}
    body = boxes(graph)["body"]
    assert "3 ops: Relu×2, MatMul×1" in body["label"]
    graph = parsed(to_dot(model, max_nodes=2))
    assert clusters(graph) == {} and "body" in boxes(graph)
    deep = model
    for i in range(30):
        deep = amanda.chain(deep, inputs=["x"], outputs=["y"], name=f"wrap{i}")
    assert len(clusters(parsed(to_dot(deep, depth=5)))) == 4


@needs_dot
def test_highlight_colours_selected_ops_and_names_survive_quoting() -> None:
    """Selected ops are filled; names with quotes, backslashes and line breaks stay intact."""
    odd = 'we"ird\\path\nline'
    g = amanda.chain(amanda.op("Relu", odd, ["x"], ["y"]), amanda.op("Tanh", "t", ["x"], ["y"]),
                     inputs=["x"], outputs=["y"], name="g")
    graph = parsed(to_dot(g, highlight=g.select("$..[?type=='Relu']")))
    names = boxes(graph)
    assert names['we"ird\\\\path']["fillcolor"] == "#f5b041"
    assert names["t"]["fillcolor"] == "#ffffff"


@needs_dot
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(containers(max_ops=8))
def test_every_leaf_op_is_drawn_once_and_the_model_is_unchanged(model: amanda.Container) -> None:
    """With room for every box, each leaf op is exactly one node; drawing changes nothing."""
    before = snapshot(model)
    graph = parsed(to_dot(model, max_nodes=10_000))
    leaf_nodes = [o for o in graph["objects"] if "nodes" not in o and o.get("shape") == "box"]
    assert len(leaf_nodes) == len(amanda.flatten(model).ops)
    assert snapshot(model) == before


def test_to_dot_rejects_bad_arguments_with_amanda_errors() -> None:
    """A non-container, a negative depth or a bad highlight is an ArgumentError."""
    with pytest.raises(amanda.ArgumentError, match="a Container"):
        to_dot(None)  # type: ignore[arg-type]
    with pytest.raises(amanda.ArgumentError, match="non-negative"):
        to_dot(skip_model(), depth=-1)
    with pytest.raises(amanda.ArgumentError, match="highlight"):
        to_dot(skip_model(), highlight=3)


@needs_dot
def test_render_writes_svg_and_png(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """render writes a real SVG document and a real PNG file, picked by suffix."""
    svg = render(skip_model(), tmp_path / "m.svg").read_text()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg and "L2" in svg
    png = render(skip_model(), tmp_path / "m.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(amanda.ArgumentError, match="ending in one of"):
        render(skip_model(), tmp_path / "m.gif")


def test_render_names_the_missing_program(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Without dot on PATH the error says so; the graphviz Python package is not needed."""
    if DOT is not None:
        monkeypatch.setitem(sys.modules, "graphviz", None)
        assert "<svg" in render(skip_model(), tmp_path / "m.svg").read_text()
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(RenderError, match="`dot` program"):
        render(skip_model(), tmp_path / "m.svg")


def test_tree_text_folds_long_models() -> None:
    """The text tree shows the first children and counts the rest by type."""
    ops = [amanda.op("Relu" if i % 2 else "Add", f"op{i}", ["x"], ["y"]) for i in range(40)]
    g = amanda.chain(*ops, inputs=["x"], outputs=["y"], name="long")
    text = tree_text(g, max_children=5)
    lines = text.splitlines()
    assert lines[0] == "long: Chain (x) -> (y)"
    assert lines[1] == "├─ op0: Add (x) -> (y)"
    assert lines[-1] == "└─ … 35 more (Relu×18, Add×17)"
    assert len(tree_text(g, max_lines=10).splitlines()) == 11


def test_ipython_display_hooks() -> None:
    """_repr_pretty_ prints the tree; _repr_svg_ gives SVG when dot exists (None otherwise)."""

    class Printer:
        text_out = ""

        def text(self, s: str) -> None:
            self.text_out += s

    p = Printer()
    skip_model()._repr_pretty_(p, False)
    assert p.text_out.startswith("resnet: Edit")
    svg = skip_model()._repr_svg_()
    assert (svg is None) if DOT is None else ("<svg" in svg)
    hits = skip_model().select("$..[?type=='Relu']")
    p = Printer()
    hits._repr_pretty_(p, False)
    assert p.text_out.splitlines()[1:] == ["  body/L2: Relu", "  body/L3: Relu"]


def test_array_attributes_do_not_leak_into_labels() -> None:
    """Labels hold names and types only, so a large weight does not bloat the text."""
    w = amanda.op("Constant", "w", [], ["y"], {"value": np.zeros((300, 300), np.float32)})
    assert len(to_dot(w)) < 1000


def test_summary_counts_parameters_per_layer_and_in_total() -> None:
    """Each row's parameters are the array elements in that subtree; the total covers all."""
    dense = amanda.Container("Dense", "dense", inputs=["x"], outputs=[amanda.Port("y", attrs={"dtype": "float32", "shape": ("batch", 4)})],
                             children=[amanda.op("Constant", "w", [], ["output"], {"value": np.zeros((3, 4), np.float32)}),
                                       amanda.op("Constant", "b", [], ["output"], {"value": np.zeros(4, np.float32)})])
    relu = amanda.op("Relu", "relu", ["x"], ["y"])
    model = amanda.Container("Net", "net", children=[dense, relu])
    table = amanda.summary(model)
    assert [(r.path, r.type, r.outputs, r.params) for r in table.rows] == [
        (("dense",), "Dense", "float32[batch,4]", 16), (("relu",), "Relu", "y", 0)]
    assert table.total == 16
    assert [r.path for r in amanda.summary(model, depth=2).rows] == [("dense",), ("dense", "w"), ("dense", "b"), ("relu",)]
    lines = str(table).splitlines()
    assert lines[0].split() == ["path", "type", "output", "params"] and lines[-1] == "total parameters: 16"
    with pytest.raises(amanda.ArgumentError):
        amanda.summary(model, depth=0)
