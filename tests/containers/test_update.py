"""Pure updates: replace and with_attrs share every untouched subtree and re-check what changed."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

import amanda
from amanda import Container, InvariantError, chain, op, replace, with_attrs
from tests.strategies import check_invariants, nested_containers, snapshot


def blocks(n_blocks=4, n_ops=5):
    return chain(*(chain(*(op("Relu", f"op{i}", ["x"], ["y"]) for i in range(n_ops)), name=f"b{b}") for b in range(n_blocks)), name="model")


def test_replace_shares_untouched_subtrees():
    """Replacing one deep op rebuilds only its ancestors; every sibling subtree is the same object."""
    model = blocks()
    new = replace(model, ("b2", "op3"), op("Tanh", "op3", ["x"], ["y"]))
    assert new.child("b2").child("op3").type == "Tanh"
    assert all(new.child(f"b{i}") is model.child(f"b{i}") for i in (0, 1, 3))
    assert all(new.child("b2").child(f"op{i}") is model.child("b2").child(f"op{i}") for i in (0, 1, 2, 4))
    assert new.edges is model.edges
    assert model.child("b2").child("op3").type == "Relu"


def test_unchanged_update_returns_the_same_object():
    """An update that changes nothing returns the container itself."""
    model = blocks()
    assert replace(model, "b1/op2", model.child("b1").child("op2")) is model
    assert replace(model, "b1", lambda c: c) is model


def test_replace_rechecks_ports_the_edges_use():
    """A replacement that drops a port an edge uses is rejected, naming the edge."""
    model = blocks()
    with pytest.raises(InvariantError, match="'x'"):
        replace(model, ("b1", "op2"), op("Relu", "op2", ["z"], ["y"]))


def test_replace_with_a_renamed_child_rewrites_references():
    """A replacement with another name keeps its edges, now under the new name."""
    model = blocks()
    new = replace(model, ("b1", "op2"), op("Relu", "renamed", ["x"], ["y"]))
    assert new.child("b1").has_child("renamed")
    assert len(amanda.flatten(new).edges) == len(amanda.flatten(model).edges)


def test_with_attrs_on_paths():
    """with_attrs sets attributes at each target path."""
    model = blocks()
    new = with_attrs(model, [("b0", "op0"), "b3"], debug=True)
    assert new.child("b0").child("op0").attrs["debug"] and new.child("b3").attrs["debug"]
    assert "debug" not in model.child("b3").attrs
    assert amanda.effective_attrs(new, ("b3", "op1"))["debug"] is True


def test_replacing_the_root():
    """Replacing the empty path replaces the whole container."""
    model = blocks()
    other = op("Relu", "r")
    assert replace(model, (), other) is other


@given(nested_containers(), st.data())
def test_random_with_attrs_is_pure_and_valid(pair, data):
    """with_attrs at a random path leaves the input unchanged and gives a valid container."""
    _, model = pair
    paths = [p for p, _, _ in amanda.walk(model) if p]
    path = data.draw(st.sampled_from(paths))
    before = snapshot(model)
    new = with_attrs(model, [path], tag="x")
    assert snapshot(model) == before
    check_invariants(new)
    node = new
    for part in path:
        node = node.child(part)
    assert node.attrs["tag"] == "x"


def test_deep_update_cost_does_not_grow_with_model_size():
    """A deep update touches O(depth) containers: the number of rebuilt nodes is the path length."""
    small, large = blocks(4, 5), blocks(200, 5)
    for model in (small, large):
        new = replace(model, ("b1", "op2"), op("Tanh", "op2", ["x"], ["y"]))
        old_ids = {id(n) for _, n, _ in amanda.walk(model)}
        rebuilt = [n for _, n, _ in amanda.walk(new) if id(n) not in old_ids]
        assert len(rebuilt) == 3  # the op, its block, the model


def test_replace_inside_graphs_held_in_attributes():
    """Paths may pass through subgraphs held in attributes, single (`body`) or in a tuple (`branches[1]`)."""
    inner = Container("Body", None, children=[op("Add", "add")])
    other = Container("Body", None, children=[op("Mul", "mul")])
    loop = op("Loop", "loop", attrs={"body": inner, "branches": (inner, other)})
    model = Container(children=[loop])
    a = replace(model, ("loop", "body", "add"), op("Sub", "add"))
    assert a.child("loop").attrs["body"].child("add").type == "Sub"
    b = with_attrs(model, [("loop", "branches[1]", "mul")], debug=True)
    assert b.child("loop").attrs["branches"][1].child("mul").attrs["debug"] is True
    assert b.child("loop").attrs["branches"][0] is inner
    assert "debug" not in other.child("mul").attrs
