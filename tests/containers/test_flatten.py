"""The effective view: lifted edges, tombstones, forwarding, control, cycles, traversal."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

import amanda
from amanda import SELF, Container, CycleError, Edge, flatten, op
from tests.strategies import (
    build_flat,
    build_nested,
    dataflow,
    groupings,
    nested_containers,
    plan_dataflow,
    plans,
)


def chain3() -> Container:
    layers = [op("Dense", f"L{i}", ["x"], ["y"]) for i in (1, 2, 3)]
    return Container(
        "Chain", "body", inputs=["x"], outputs=["y"], children=layers,
        edges=[("body:x", "L1:x"), ("L1:y", "L2:x"), ("L2:y", "L3:x"), ("L3:y", "body:y")],
    )


def test_subgraph_h_flattens_to_its_dataflow():
    """The h subgraph of docs/format.md: hx, hy reach f; f.m feeds g; g.k is hk."""
    h = amanda.load("tests/fixtures/documents/subgraph_h.yaml")
    flat = flatten(h)
    assert list(flat.ops) == [("f",), ("g",)]
    assert flat.inputs["hx"] == (amanda.Endpoint(("f",), "x"),)
    assert flat.outputs["hk"] == amanda.Endpoint(("g",), "k")
    assert flat.topological_order() == (("f",), ("g",))


def test_boundary_ports_forward_through_nesting():
    """Values pass through boundary ports of nested containers to the leaf ops."""
    body = chain3()
    top = Container("Model", "m", inputs=["image"], outputs=["label"], children=[body], edges=[("m:image", "body:x"), ("body:y", "m:label")])
    edges = {(str(e.src), str(e.dst)) for e in flatten(top).edges}
    assert edges == {
        ("SELF:image", "body/L1:x"), ("body/L1:y", "body/L2:x"),
        ("body/L2:y", "body/L3:x"), ("body/L3:y", "SELF:label"),
    }


def test_tombstones_remove_inner_edges_and_new_edges_reach_in():
    """A wrapper's tombstone removes an inner edge; its new edges reach descendants by path."""
    body = chain3()
    add = op("Add", "skip_add", ["a", "b"], ["y"])
    wrapper = Container(
        "Residual", "res", inputs=["x"], outputs=["y"], children=[body, add],
        edges=[("res:x", "body:x"), ("body/L1:y", "skip_add:a"), ("body/L2:y", "skip_add:b"),
               ("skip_add:y", "body/L3:x"), ("body:y", "res:y")],
        tombstones=[("body/L2:y", "body/L3:x")],
    )
    edges = {(str(e.src), str(e.dst)) for e in flatten(wrapper).edges}
    assert ("body/L2:y", "body/L3:x") not in edges
    assert ("skip_add:y", "body/L3:x") in edges
    assert ("body/L1:y", "body/L2:x") in edges
    assert flatten(body).edges != flatten(wrapper).edges  # the wrapped model is untouched
    assert len(flatten(body).edges) == 4


def test_control_edge_into_a_container_orders_every_op_inside():
    """A control edge into a container's -1 port precedes every leaf inside it."""
    init = op("Init", "init")
    top = Container(children=[init, chain3()], edges=[("init:-1", "body:-1")])
    control = {(str(e.src), str(e.dst)) for e in flatten(top).edges if e.is_control}
    assert control == {("init:-1", f"body/L{i}:-1") for i in (1, 2, 3)}


def test_control_edge_out_of_a_container_follows_every_op_inside():
    """A control edge out of a container's -1 port follows every leaf inside it."""
    after = op("Log", "log")
    top = Container(children=[chain3(), after], edges=[("body:-1", "log:-1")])
    control = {(str(e.src), str(e.dst)) for e in flatten(top).edges if e.is_control}
    assert control == {(f"body/L{i}:-1", "log:-1") for i in (1, 2, 3)}


def test_named_control_port_collects_its_ops():
    """Control edges into a named control port resolve to the ops linked to it."""
    upd = op("AssignAdd", "update", ["x"], [])
    read = op("Identity", "read", ["x"], ["y"])
    bn = Container("BN", "bn", inputs=["x"], outputs=["y"], children=[upd, read],
                   edges=[("bn:x", "update:x"), ("bn:x", "read:x"), ("read:y", "bn:y"), ("update:-1", "bn:train")],
                   controls=["train"])
    after = op("Step", "step")
    top = Container(children=[bn, after], edges=[("bn:train", "step:-1")])
    assert {(str(e.src), str(e.dst)) for e in flatten(top).edges if e.is_control} == {("bn/update:-1", "step:-1")}
    assert {(str(e.src), str(e.dst)) for e in flatten(bn).edges if e.is_control} == {("update:-1", "SELF:train")}


def test_cycle_is_reported_with_its_paths():
    """A data cycle raises a CycleError that prints the ops on the cycle."""
    a, b = op("A", "a", ["x"], ["y"]), op("B", "b", ["x"], ["y"])
    g = Container(children=[a, b], edges=[("a:y", "b:x"), ("b:y", "a:x")])
    with pytest.raises(CycleError, match="a -> b -> a|b -> a -> b") as info:
        flatten(g)
    assert set(info.value.cycle) == {("a",), ("b",)}


def test_flatten_is_cached_per_object():
    """flatten returns the same view for the same container object."""
    body = chain3()
    assert flatten(body) is flatten(body)


def test_sorted_with_opaque_containers():
    """sorted(skip=...) yields accepted containers whole, in topological order."""
    cell = chain3().with_attrs(rnn_cell=True)
    pre, post = op("Pre", "pre", [], ["y"]), op("Post", "post", ["x"], [])
    top = Container(children=[post, cell, pre], edges=[("pre:y", "body:x"), ("body:y", "post:x")])
    assert [c.name for c in top.sorted()] == ["pre", "L1", "L2", "L3", "post"]
    assert [c.name for c in top.sorted(skip=lambda c: c.attrs.get("rnn_cell"))] == ["pre", "body", "post"]
    assert [c.name for c in top] == ["post", "L1", "L2", "L3", "pre"]


def test_phase_edges_survive_flattening_separately():
    """Alternative producers tagged with phases both appear, each with its phase."""
    a, b, c = op("A", "a", [], ["y"]), op("B", "b", [], ["y"]), op("C", "c", ["x"], [])
    g = Container(children=[a, b, c], edges=[Edge("a:y", "c:x", attrs={"phase": "train"}), Edge("b:y", "c:x", attrs={"phase": "inference"})])
    assert sorted(e.phase for e in flatten(g).producers(("c",), "x")) == ["inference", "train"]


@given(plans(), st.data())
def test_dataflow_is_the_same_whatever_the_nesting(plan, data):
    """Any nesting of a plan flattens to exactly the plan's dataflow."""
    nested = build_nested(plan, data.draw(groupings([s["name"] for s in plan.ops])))
    assert dataflow(nested) == plan_dataflow(plan) == dataflow(build_flat(plan))


@given(nested_containers())
def test_each_leaf_input_has_at_most_one_producer(pair):
    """In the flattened view no leaf input port is fed by two data edges."""
    _, nested = pair
    seen = set()
    for edge in flatten(nested).edges:
        if not edge.is_control:
            assert edge.dst not in seen
            seen.add(edge.dst)


@given(nested_containers())
def test_topological_order_respects_every_edge(pair):
    """Every effective edge between ops goes forward in topological_order()."""
    _, nested = pair
    flat = flatten(nested)
    rank = {p: i for i, p in enumerate(flat.topological_order())}
    assert set(rank) == set(flat.ops)
    for edge in flat.edges:
        if edge.src.op is not SELF and edge.dst.op is not SELF:
            assert rank[edge.src.op] < rank[edge.dst.op]


def test_deep_nesting_does_not_hit_the_recursion_limit():
    """A container nested 3,000 levels deep flattens, hashes and compares."""
    node = op("Relu", "r", ["x"], ["y"])
    for level in range(3000):
        node = Container("Wrap", f"w{level}", inputs=["x"], outputs=["y"], children=[node], edges=[(f"w{level}:x", f"{node.name}:x"), (f"{node.name}:y", f"w{level}:y")])
    flat = flatten(node)
    assert len(flat.ops) == 1 and len(flat.edges) == 2
    assert hash(node) == hash(node) and node == node.with_attrs()
