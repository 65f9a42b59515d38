"""fuse and unfuse: the kept ops, the unchanged dataflow, and the inverse."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

import amanda
from amanda import InvariantError, chain, edit, fuse, op, unfuse
from tests.strategies import check_invariants, dataflow, nested_containers, snapshot


def dense_relu():
    return chain(op("MatMul", "mm", ["x"], ["y"]), op("Add", "bias", ["x"], ["y"]), op("Relu", "relu", ["x"], ["y"]), name="m")


def test_fuse_keeps_the_ops_and_the_dataflow():
    """The fused container holds the very ops; the dataflow between leaves is unchanged."""
    m = dense_relu()
    fused = fuse(m, ["mm", "bias"], "FusedDense", name="fd")
    inner = fused.child("fd")
    assert inner.type == "FusedDense" and inner.child("mm") is m.child("mm")
    assert dataflow(fused) == dataflow(m)
    check_invariants(fused)


def test_unfuse_inverts_fuse():
    """unfuse(fuse(m)) has m's effective view and m's children."""
    m = dense_relu()
    back = unfuse(fuse(m, ["mm", "bias"], "FusedDense", name="fd"), "fd")
    assert dataflow(back) == dataflow(m)
    assert {c.name for c in back.children} == {c.name for c in m.children}


def test_fuse_rewrites_deep_references_of_wrappers():
    """Fusing inside a wrapped model keeps the wrapper's deep edges pointing at the moved ops."""
    m = dense_relu()
    w = edit(m).add(op("Log", "log", ["x"], [])).connect("m/bias:y", "log:x").build(name="w")
    fused = fuse(w, [("m", "mm"), ("m", "bias")], "FusedDense", name="fd")
    assert ("m/fd/bias:y", "log:x") in {(str(e.src), str(e.dst)) for e in fused.edges}
    assert dataflow(fused) == dataflow(w)


def test_fuse_needs_siblings():
    """Paths under different parents are rejected."""
    w = chain(dense_relu(), op("Out", "out", ["x"], ["y"]), name="top")
    with pytest.raises(InvariantError, match="share one parent"):
        fuse(w, [("m", "mm"), ("out",)], "F")


def test_fuse_into_a_control_flow_body_says_where_the_body_is():
    """A selector reaches the ops in an If's branches, but fuse moves children only: a path into
    a body (held in an attribute) is a PathError naming the body and how to fuse inside it."""
    branch = chain(op("Neg", "neg", ["x"], ["y"]), op("Abs", "abs", ["x"], ["y"]), name="then_branch")
    model = chain(op("If", "if", ["cond"], ["y"], {"then_branch": branch, "else_branch": branch}), name="m")
    for paths in (model.select("$.if.then_branch.*"), model.select("$.if.*"), ["if/then_branch"]):
        with pytest.raises(amanda.PathError, match="is a body of If 'if'.*work inside the body") as info:
            fuse(model, paths, "F")
        assert info.value.path == ("m", "if")


@given(nested_containers(), st.data())
def test_fuse_then_unfuse_keeps_the_view_and_never_mutates(pair, data):
    """For random sibling groups: fuse keeps the dataflow, unfuse restores it, inputs stay as they were."""
    _, model = pair
    parents = [(p, n) for p, n, _ in amanda.walk(model) if n.children]
    path, parent = data.draw(st.sampled_from(parents))
    names = data.draw(st.lists(st.sampled_from([c.name for c in parent.children]), min_size=1, unique=True))
    before = snapshot(model)
    fused = fuse(model, [(*path, n) for n in names], "Fused", name="fused_group")
    check_invariants(fused)
    assert dataflow(fused) == dataflow(model)
    back = unfuse(fused, (*path, "fused_group"))
    check_invariants(back)
    assert dataflow(back) == dataflow(model)
    assert snapshot(model) == before


def test_fusing_a_child_whose_inner_edge_the_parent_replaced_keeps_the_replacement_only():
    """A parent that deletes a child's inner edge (tombstone) and adds the same connection itself:
    fusing that child takes the tombstone inside with the edge, so the fused container is valid
    on its own and the dataflow is unchanged (found by the edit state machine)."""
    g = amanda.Container("Graph", "g", children=[op("Op", "n0", ["x"], ["y"]), op("Op", "n1", ["x"], ["y"])],
                  edges=[("n0:y", "n1:x")])
    cut = edit(g).remove_edge("g/n0:y", "g/n1:x").build(name="cut")
    again = unfuse(edit(cut).connect("cut/g/n0:y", "cut/g/n1:x").build(name="again"), ("cut",))
    fused = fuse(again, [("g",)], "Fused", name="f")
    assert amanda.validate(fused) == []
    assert [str(t) for t in fused.child("f").tombstones] == [str(t) for t in again.tombstones]
    assert list(fused.tombstones) == []
    assert dataflow(fused) == dataflow(again)
    assert dataflow(unfuse(fused, ("f",))) == dataflow(again)
