"""frames: moving edges between nesting levels, routing them through ports, rebuilding one path."""

import ast
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import amanda
from amanda import SELF, Container, Edge, Endpoint, InvariantError, chain, consolidate, edit, op
from amanda.containers.frames import at, buried_above, find_buried, lift, lower, route, splice, split
from tests.strategies import build_flat, check_invariants, dataflow, nested_containers, plan_dataflow, plans, snapshot

NAMES = st.sampled_from(["a", "b", "c", "d"])
PATHS = st.lists(NAMES, min_size=1, max_size=3).map(tuple)
PORTS = st.sampled_from(["x", "y", 0, -1])
ENDS = st.tuples(st.one_of(st.just(SELF), PATHS), PORTS)
ATTRS = st.sampled_from([None, {"phase": "train"}, {"note": 1}])
EDGES = st.builds(Edge, ENDS, ENDS, attrs=ATTRS)


@given(EDGES, PATHS)
def test_lift_then_lower_is_the_identity(edge, prefix):
    """Lowering an edge lifted by a prefix gives the edge back, attributes included."""
    lifted = lift(edge, prefix)
    assert all(end.op != SELF and end.op[: len(prefix)] == prefix for end in lifted[:2])
    assert lower(lifted, prefix) == edge


@given(EDGES, PATHS)
def test_lower_keeps_exactly_the_edges_inside_and_lift_undoes_it(edge, prefix):
    """An edge lowers iff both its ends lie at or below the prefix, and lifting it back is the identity."""
    inside = all(end.op is not SELF and tuple(end.op[: len(prefix)]) == prefix for end in edge[:2])
    lowered = lower(edge, prefix)
    assert (lowered is not None) == inside
    if lowered is not None:
        assert lift(lowered, prefix) == edge


@given(st.one_of(st.just(SELF), PATHS.filter(lambda p: p[0] != "c")), PATHS, ATTRS, st.booleans())
def test_split_then_splice_gives_the_edge_back(outside, below, attrs, inward):
    """Splitting an edge at a child's port and splicing the halves back is the identity; the
    halves meet at that port and the attributes stay on the consumer's side."""
    far, near = (outside, "x"), (("c", *below), "y")
    edge = Edge(far, near, attrs=attrs) if inward else Edge(near, far, attrs=attrs)
    outer, inner = split(edge, "c", "p")
    if inward:
        assert outer.dst == Endpoint(("c",), "p") and inner.src == Endpoint(SELF, "p") and inner.attrs == edge.attrs
        assert splice(inner, "c", {"p": [outer]}, {}) == [edge]
    else:
        assert outer.src == Endpoint(("c",), "p") and inner.dst == Endpoint(SELF, "p") and outer.attrs == edge.attrs
        assert splice(inner, "c", {}, {"p": [outer]}) == [edge]


def test_split_rejects_an_edge_that_does_not_cross():
    """An edge with both ends inside the child (or none) cannot be routed through its port."""
    with pytest.raises(InvariantError, match="one end inside the child"):
        split(Edge((("c", "a"), "y"), (("c", "b"), "x")), "c", "p")
    with pytest.raises(InvariantError, match="one end inside the child"):
        split(Edge((("a",), "y"), (("b",), "x")), "c", "p")


@st.composite
def deep_containers(draw):
    """A random plan whose ops ``members`` sit in a portless child ``grp``: every value crossing
    its boundary is an edge of the top container reaching into it."""
    plan = draw(plans())
    flat = build_flat(plan)
    members = set(draw(st.lists(st.sampled_from([c.name for c in flat.children]), min_size=1, unique=True)))

    def inside(end):
        return end.op is not SELF and end.op[0] in members

    inner, outer = [], []
    for edge in flat.edges:
        if inside(edge.src) and inside(edge.dst):
            inner.append(edge)
        else:
            ends = [(("grp", *end.op), end.port) if inside(end) else end for end in edge[:2]]
            outer.append(Edge(ends[0], ends[1], attrs=edge.attrs))
    group = Container("Group", "grp", children=[c for c in flat.children if c.name in members], edges=inner)
    kids = [c for c in flat.children if c.name not in members]
    model = Container("Graph", "top", inputs=flat.inputs, outputs=flat.outputs, children=[group, *kids], edges=outer)
    return plan, model


@given(deep_containers())
def test_routing_keeps_the_effective_view(pair):
    """Routing every data edge that reaches into a child through a new port of that child
    leaves the flattened dataflow as the plan says, and the model valid."""
    plan, model = pair
    assert dataflow(model) == plan_dataflow(plan)
    before = snapshot(model)
    routed = model
    for edge in model.edges:
        if not edge.is_control and any(end.op is not SELF and len(end.op) > 1 for end in edge[:2]):
            routed = route(routed, edge)
    check_invariants(routed)
    assert dataflow(routed) == plan_dataflow(plan)
    assert all(e.is_control or all(end.op is SELF or len(end.op) == 1 for end in e[:2]) for e in routed.edges)
    assert snapshot(model) == before


def test_route_rejects_control_edges_and_strangers():
    """Only a data edge of the container can be routed."""
    block = Container("Block", "b", children=[op("Relu", "r", ["x"], ["y"]), op("Exp", "e", ["x"], ["y"])])
    top = Container("Graph", "g", inputs=["x"], children=[block, op("Log", "l", ["x"], ["y"])],
                    edges=[("g:x", "b/r:x"), ("l:-1", "b/e:-1")])
    with pytest.raises(InvariantError, match="a control edge"):
        route(top, ("l:-1", "b/e:-1"))
    with pytest.raises(InvariantError, match="data edge of the container"):
        route(top, ("g:x", "l:x"))


@given(nested_containers(), st.data())
def test_at_rebuilds_one_path_and_keeps_everything_else(pair, data):
    """``at`` puts fn's result at the path, shares every subtree off it, never changes its input,
    and its result passes the container invariants with the same dataflow (a renamed leaf's
    edges following it)."""
    _, model = pair
    path = data.draw(st.sampled_from([p for p, _, _ in amanda.walk(model)]))
    rename = bool(path) and data.draw(st.booleans())
    before = snapshot(model)
    new = at(model, path, lambda n: n.with_name(f"{n.name}_renamed") if rename else n.with_attrs(at_tag=1))
    check_invariants(new)
    assert snapshot(model) == before
    new_path = (*path[:-1], f"{path[-1]}_renamed") if rename else path
    assert (new.descendant(new_path) if new_path else new).attrs.get("at_tag") == (None if rename else 1)
    old_node, new_node = model, new
    for part, new_part in zip(path, new_path):
        for sibling in old_node.children:
            if sibling.name != part:
                assert new_node.child(sibling.name) is sibling
        old_node, new_node = old_node.child(part), new_node.child(new_part)
    names = {path[-1]: new_path[-1]} if rename and old_node.is_op else {}
    assert dataflow(new) == {(names.get(a, a), p, names.get(b, b), q) for a, p, b, q in dataflow(model)}


def test_at_with_an_identity_function_returns_the_root():
    """Rebuilding a path with nothing changed returns the root itself."""
    model = chain(chain(op("Relu", "r", ["x"], ["y"]), name="inner"), op("Exp", "e", ["x"], ["y"]), name="m")
    assert at(model, ("inner", "r"), lambda n: n) is model


@given(nested_containers())
def test_find_buried_finds_every_edge_below(pair):
    """Every edge of every descendant, lifted to the root, is found there under the same key;
    an edge with a port nobody has is not."""
    _, model = pair
    for path, node, _ in amanda.walk(model):
        if not path or node.is_op:
            continue
        for edge in node.edges:
            lifted = lift(edge, path)
            assert find_buried(model, lifted).key == lifted.key
            assert find_buried(model, Edge(lifted.src, (lifted.dst.op, "no_such_port"))) is None


def test_buried_above_lowers_ancestors_tombstones():
    """The edge a wrapper deletes inside its model is reported in the model's frame."""
    body = chain(*(op("Dense", f"L{i}", ["x"], ["y"]) for i in (1, 2, 3)), name="body")
    wrapped = edit(body).remove_edge("body/L2:y", "body/L3:x").build(name="w")
    assert buried_above(wrapped, ("body",)) == {(Endpoint(("L2",), "y"), Endpoint(("L3",), "x"))}
    assert buried_above(wrapped, ()) == set()


def test_consolidate_folds_two_wrappers_deleting_the_same_edge():
    """When two stacked wrappers both delete one edge of the model, consolidate keeps the
    effective view (the outer tombstone names nothing once the inner one is folded)."""
    body = chain(*(op("Dense", f"L{i}", ["x"], ["y"]) for i in (1, 2, 3)), name="body")
    w1 = edit(body).remove_edge("body/L2:y", "body/L3:x").build(name="w1")
    w2 = edit(w1).remove_edge("w1/body/L2:y", "w1/body/L3:x").connect("w1/body/L1:y", "w1/body/L3:x").build(name="w2")
    folded = consolidate(w2)
    check_invariants(folded)
    assert dataflow(folded) == {("SELF", "x", "L1", "x"), ("L1", "y", "L2", "x"), ("L1", "y", "L3", "x"),
                                ("L3", "y", "SELF", "y")}


def test_no_module_imports_a_private_name_of_validate():
    """invariants.py's helpers are used through public names (frames.find_buried, frames.lift,
    invariants.normalise_edge), never as private imports."""
    root = Path(amanda.__file__).parent
    private = []
    for path in root.rglob("*.py"):
        text = path.read_text()
        if "containers.invariants import" not in text:
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ImportFrom) and node.module == "amanda.containers.invariants":
                private += [f"{path.name}: {a.name}" for a in node.names if a.name.startswith("_")]
    assert private == []


def test_replace_with_a_renamed_descendant_re_points_deep_references():
    """Renaming an op that an ancestor's edge reaches by path re-points that edge (it used to
    leave the ancestor naming an op that no longer exists)."""
    inner = chain(op("Relu", "r", ["x"], ["y"]), op("Exp", "e", ["x"], ["y"]), name="inner")
    top = Container("Graph", "top", children=[inner, op("Log", "l", ["x"], ["y"])], edges=[("l:-1", "inner/e:-1")])
    new = amanda.replace(top, ("inner", "e"), op("Exp", "exp", ["x"], ["y"]))
    assert [(str(e.src), str(e.dst)) for e in new.edges] == [("l:-1", "inner/exp:-1")]
    check_invariants(new)
