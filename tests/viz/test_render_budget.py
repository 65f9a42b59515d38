"""Large models draw within the box budget: flat levels grouped by name scope, nested models
collapsed by container, a level past the budget refused with a message, ``dot`` stopped past
its time limit. Drawings are checked by parsing them back with Graphviz itself."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import amanda
from amanda import RenderError
from amanda.viz import render, to_dot
from amanda.viz.scopes import Scope, group_by_scope, scope_of
from tests.viz.large_models import flat_scoped, nested_scoped
from tests.viz.test_dot import needs_dot, parsed

BLOCK_OPS = 46  # ops of one block of the fixture models (tests/viz/large_models.py)


def _drawn_ops(graph: dict) -> tuple[int, int]:
    """(ops drawn as their own box, ops counted inside closed boxes' labels)."""
    own = counted = 0
    for obj in graph["objects"]:
        if "nodes" in obj or "label" not in obj or obj.get("shape") == "ellipse":
            continue
        found = re.search(r"\\n(\d+) ops?:", obj["label"])
        if found:
            counted += int(found.group(1))
        else:
            own += 1
    return own, counted


def _clusters(graph: dict) -> dict[str, dict]:
    return {o["label"]: o for o in graph["objects"] if o.get("name", "").startswith("cluster_")}


@needs_dot
def test_flat_ten_thousand_ops_draw_grouped_by_scope_within_the_budget(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A flat graph of 9,987 ops is drawn as at most 300 boxes, in scope clusters, with every op
    in exactly one box; render finishes and writes an SVG."""
    model = flat_scoped(217)
    graph = parsed(to_dot(model))
    own, counted = _drawn_ops(graph)
    assert own + counted == 217 * BLOCK_OPS + 5
    assert own + sum(1 for o in graph["objects"] if "nodes" not in o and re.search(r"\\n\d+ ops?:", o.get("label", ""))) <= 300
    assert {"patch_embed: scope", "blocks: scope", "head: scope"} <= set(_clusters(graph))
    svg = render(model, tmp_path / "flat.svg").read_text()
    assert "<svg" in svg and "blocks.216" in svg


@needs_dot
def test_nested_ten_thousand_ops_draw_collapsed_by_container(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The same network nested by module draws its containers as clusters and closed boxes, every
    op in one box; at depth 2 the blocks are closed boxes of 46 ops each."""
    model = nested_scoped(217)
    graph = parsed(to_dot(model))
    own, counted = _drawn_ops(graph)
    assert own + counted == 217 * BLOCK_OPS + 5
    assert "blocks: Blocks" in _clusters(graph)
    shallow = parsed(to_dot(model, depth=2))
    blocks = [o for o in shallow["objects"] if o.get("label", "").startswith("blocks.")]
    assert len(blocks) == 217 and all(f"\\n{BLOCK_OPS} ops:" in o["label"] for o in blocks)
    assert "<svg" in render(model, tmp_path / "nested.svg").read_text()


@needs_dot
def test_scope_clusters_hold_exactly_their_scopes_ops() -> None:
    """Inside an open scope cluster, the boxes are the ops whose names lie in that scope
    (their full names are the boxes' tooltips), and weights join their module's scope."""
    graph = parsed(to_dot(flat_scoped(3), max_nodes=60))
    assert {"blocks: scope", "blocks.0: scope", "norm1: scope"} <= set(_clusters(graph))
    norms = [[graph["objects"][i]["tooltip"] for i in o["nodes"]] for o in graph["objects"]
             if o.get("label") == "norm1: scope"]
    assert norms
    for names in norms:
        block = names[0].split("/")[2]
        assert len(names) == 9 and all(name.startswith(f"/blocks/{block}/norm1/") for name in names)
    graph = parsed(to_dot(flat_scoped(2), max_nodes=96))  # 97 ops: grouped, and nearly all open
    qkv = sorted(sorted(graph["objects"][i]["tooltip"] for i in o["nodes"]) for o in graph["objects"]
                 if o.get("label") == "qkv: scope")
    assert qkv == [[f"/blocks/blocks.{b}/attn/qkv/Add", f"/blocks/blocks.{b}/attn/qkv/MatMul",
                    f"blocks.{b}.attn.qkv.weight"] for b in range(2)]


@needs_dot
def test_depth_counts_scope_groups_as_levels() -> None:
    """At depth 1 a grouped flat graph shows its top scopes as closed boxes and no cluster."""
    graph = parsed(to_dot(flat_scoped(3), depth=1, max_nodes=100))  # 143 ops: grouped
    assert _clusters(graph) == {}
    labels = sorted(o["label"].split("\\n")[0] for o in graph["objects"] if o.get("shape") in ("box", "box3d"))
    assert labels == ["Identity_0", "blocks", "head", "patch_embed"]


def test_a_level_past_the_budget_is_refused_with_how_to_draw_it() -> None:
    """Without grouping, or with names that share no scope, a top level past ``max_nodes`` is a
    RenderError naming the count and the budget and saying what to change."""
    with pytest.raises(RenderError, match="9987 children.*max_nodes=300.*group=True") as info:
        to_dot(flat_scoped(217), group=False)
    assert info.value.found == "9987 children"
    loose = amanda.Container("G", "g", children=[amanda.op("Relu", f"op{i}") for i in range(500)]
                             + [amanda.Container("Block", "block", children=[amanda.op("Relu", "r")])])
    with pytest.raises(RenderError, match=r"501 children \(no two.*max_nodes=501.*select\('\$\.\"block\"'\)"):
        to_dot(loose)
    with pytest.raises(RenderError, match="4 boxes after grouping"):
        to_dot(flat_scoped(2), max_nodes=3)
    with pytest.raises(amanda.ArgumentError, match="group"):
        to_dot(flat_scoped(1), group="scope")  # type: ignore[arg-type]


@needs_dot
def test_an_edit_inside_a_grouped_level_draws_its_removed_edge(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A tombstone on an edge between two ops of a grouped flat model is drawn between their boxes."""
    model = flat_scoped(2)
    src, dst = "/blocks/blocks.0/norm1/Sub", "/blocks/blocks.0/norm1/Mul"
    e = amanda.edit(model)
    e.remove_edge(f"vit/{src}:y", f"vit/{dst}:x")
    e.add(amanda.op("Neg", "neg", ["x"], ["y"]))
    e.connect(f"vit/{src}:y", "neg:x").connect("neg:y", f"vit/{dst}:x")
    graph = parsed(to_dot(e.build(name="edited"), max_nodes=100))
    by_id = {o["_gvid"]: o.get("tooltip", o.get("label", "").split("\\n")[0]) for o in graph["objects"]}
    removed = [(by_id[x["tail"]], by_id[x["head"]]) for x in graph["edges"] if x.get("style") == "dashed"]
    assert removed == [(src, dst)]
    live = {(by_id[x["tail"]], by_id[x["head"]]) for x in graph["edges"] if x.get("style") != "dashed"}
    assert {(src, "neg"), ("neg", dst)} <= live


@needs_dot
def test_dot_past_its_time_limit_is_stopped_with_a_message(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A layout that takes longer than ``timeout`` stops with a RenderError; a bad timeout is an
    ArgumentError."""
    with pytest.raises(RenderError, match="did not finish within 0.001 s"):
        render(flat_scoped(22), tmp_path / "slow.svg", max_nodes=5000, timeout=0.001)
    assert not (tmp_path / "slow.svg").exists()
    for bad in (0, -1, float("nan"), float("inf"), "5", True):
        with pytest.raises(amanda.ArgumentError, match="timeout"):
            render(flat_scoped(1), tmp_path / "m.svg", timeout=bad)


def test_scope_of_reads_both_spellings() -> None:
    """Scope paths (``/a/b/op``, ``a/op``) and parameter names (``a.3.b.weight``) give the same
    scopes for the same module where a ``Sequential`` holds it; other names give none."""
    table = {
        "/transformer/h.0/attn/c_attn/Gemm": ("transformer", "h.0", "attn", "c_attn"),
        "transformer.h.0.attn.c_attn.weight": ("transformer", "h", "h.0", "attn", "c_attn"),
        "/features/features.10/block/block.0/block.0.0/Conv": ("features", "features.10", "block", "block.0", "block.0.0"),
        "features.10.block.0.0.weight": ("features", "features.10", "block", "block.0", "block.0.0"),
        "dense/kernel": ("dense",),
        "Constant_29": (),
        "onnx::MatMul_12": (),
        "a..b": (),
        "/Relu": (),
    }
    assert {name: scope_of(name) for name in table} == table


def test_a_weight_joins_the_scope_path_of_its_module() -> None:
    """Among siblings, a parameter goes to the group of the ops of its module, whether the
    exporter wrote a ModuleList's element without the list (GPT-2's ``h.0``) or with it
    (``features.10``); a weight of a module that has no op lands beside its module's ops' scope."""
    names = ["/transformer/h.0/attn/c_attn/Gemm", "transformer.h.0.attn.c_attn.weight", "/transformer/h.0/attn/Softmax",
             "/features/features.10/block/block.0/block.0.0/Conv", "features.10.block.0.0.weight",
             "/features/features.10/block/Relu", "features.10.block.1.weight", "transformer.wte.weight"]
    grouped = group_by_scope([amanda.op("Relu", n) for n in names])
    assert grouped is not None

    def members(item: object, above: tuple) -> dict:
        if not isinstance(item, Scope):
            return {item.name: above}  # type: ignore[attr-defined]
        found: dict = {}
        for child in item.children:
            found.update(members(child, above + tuple(item.name.split("/"))))
        return found

    where: dict = {}
    for item in grouped:
        where.update(members(item, ()))
    assert where["transformer.h.0.attn.c_attn.weight"] == where["/transformer/h.0/attn/c_attn/Gemm"] \
        == ("transformer", "h.0", "attn", "c_attn")
    assert where["features.10.block.0.0.weight"] == where["/features/features.10/block/block.0/block.0.0/Conv"] \
        == ("features", "features.10", "block", "block.0", "block.0.0")
    assert where["features.10.block.1.weight"] == ("features", "features.10", "block")  # block.1 alone: no group
    assert where["transformer.wte.weight"] == ("transformer",)


_PART = st.from_regex(r"[a-z_][a-z0-9_]{0,5}", fullmatch=True)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.lists(_PART, max_size=3), _PART), min_size=1, max_size=30, unique_by=lambda t: tuple(t[0]) + (t[1],)))
def test_grouping_keeps_every_child_once_under_its_own_scopes(specs: list) -> None:
    """Every child appears exactly once in the grouped tree, under groups whose names, joined,
    are its scopes; a group holds at least two members."""
    children = [amanda.op("Relu", "/".join(["", *scopes, own]) if scopes else own) for scopes, own in specs]
    grouped = group_by_scope(children)
    firsts = [scope_of(c.name)[0] for c in children if scope_of(c.name)]
    if grouped is None:  # only when no two children share their outermost scope
        assert len(firsts) == len(set(firsts))
        return
    assert len(firsts) > len(set(firsts))
    seen: list[tuple[str, tuple]] = []
    stack: list[tuple[object, tuple]] = [(item, ()) for item in grouped]
    while stack:
        item, above = stack.pop()
        if isinstance(item, Scope):
            assert len(item.children) >= 2
            stack.extend((child, above + tuple(item.name.split("/"))) for child in item.children)
        else:
            seen.append((item.name, above))  # type: ignore[attr-defined]
    assert sorted(n for n, _ in seen) == sorted(c.name for c in children)
    for name, above in seen:
        assert scope_of(name)[: len(above)] == above


def test_summary_of_a_nested_model_lists_its_blocks_down_to_depth() -> None:
    """summary collapses by container: at depth 2 the nested network lists its modules and each
    block as one row, and no op inside a block."""
    table = amanda.summary(nested_scoped(3), depth=2)
    assert [("/".join(r.path), r.type) for r in table.rows] == [
        ("patch_embed", "PatchEmbed"), ("patch_embed/Conv", "Conv"), ("patch_embed/Flatten", "Flatten"),
        ("blocks", "Blocks"), ("blocks/blocks.0", "Block"), ("blocks/blocks.1", "Block"), ("blocks/blocks.2", "Block"),
        ("head", "Head"), ("head/ReduceMean", "ReduceMean"), ("head/Gemm", "Gemm"), ("Identity_0", "Identity")]
