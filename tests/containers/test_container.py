"""Container construction, invariants, identity and immutability."""

import numpy as np
import pytest
from hypothesis import given

import amanda
from amanda import SELF, Container, Edge, Endpoint, InvariantError, PathError, Port, op
from tests.strategies import containers


def h_subgraph() -> Container:
    f = op("F", "f", ["x", "y"], ["m", "n"])
    g = op("G", "g", ["z"], ["k"])
    return Container(
        "H", "h", inputs=["hx", "hy"], outputs=["hk"], children=[f, g],
        edges=[("f:m", "g:z"), ("h:hx", "f:x"), ("h:hy", "f:y"), ("g:k", "h:hk")],
    )


def test_edges_are_stored_normalised():
    """Endpoints naming the container itself become SELF; child names become paths."""
    h = h_subgraph()
    assert Edge((("f",), "m"), (("g",), "z")) in h.edges
    assert Edge((SELF, "hx"), (("f",), "x")) in h.edges


def test_index_endpoints_resolve_to_names():
    """Op and port indexes in edges resolve to names (docs/format.md: name or index)."""
    f = op("F", "f", ["x", "y"], ["m", "n"])
    g = op("G", "g", ["z"], ["k"])
    by_index = Container("H", "h", inputs=["hx"], outputs=["hk"], children=[f, g], edges=[Edge((0, 0), (1, 0)), Edge((SELF, 0), (0, 1)), Edge((1, 0), (SELF, 0))])
    by_name = Container("H", "h", inputs=["hx"], outputs=["hk"], children=[f, g], edges=[("f:m", "g:z"), ("h:hx", "f:y"), ("g:k", "h:hk")])
    assert by_index == by_name


def test_every_violation_is_reported_once():
    """A container with several bad edges raises one InvariantError listing each with its path."""
    f = op("F", "f", ["x"], ["m"])
    g = op("G", "g", ["z"], ["k"])
    with pytest.raises(InvariantError) as info:
        Container("H", "h", inputs=["a"], outputs=[], children=[f, g], edges=[("f:q", "g:z"), ("nope:m", "g:z"), ("f:m", "g:m")])
    problems = info.value.problems
    assert len(problems) == 3
    assert all(p.path[0] == "h" for p in problems)
    assert "'q'" in str(info.value) and "'nope'" in str(info.value)


def test_direction_of_data_edges_is_checked():
    """A data edge must run from an output (or SELF input) to an input (or SELF output)."""
    f = op("F", "f", ["x"], ["m"])
    g = op("G", "g", ["z"], ["k"])
    with pytest.raises(InvariantError, match="output port of 'g'"):
        Container("H", "h", children=[f, g], edges=[("g:z", "f:x")])
    with pytest.raises(InvariantError, match="input port of the container itself"):
        Container("H", "h", inputs=["a"], outputs=["b"], children=[f], edges=[("h:b", "f:x")])


def test_one_live_producer_per_input():
    """Two data edges into one input port are rejected, naming the port and both sources."""
    a, b = op("A", "a", [], ["y"]), op("B", "b", [], ["y"])
    c = op("C", "c", ["x"], [])
    with pytest.raises(InvariantError, match="c:x") as info:
        Container(children=[a, b, c], edges=[("a:y", "c:x"), ("b:y", "c:x")])
    assert "a:y" in str(info.value) and "b:y" in str(info.value)


def test_phase_tagged_producers_may_share_an_input():
    """Producers of one input are allowed when they belong to different phases."""
    a, b, c = op("A", "a", [], ["y"]), op("B", "b", [], ["y"]), op("C", "c", ["x"], [])
    both = Container(children=[a, b, c], edges=[Edge("a:y", "c:x", attrs={"phase": "train"}), Edge("b:y", "c:x", attrs={"phase": "inference"})])
    assert len(both.edges) == 2
    with pytest.raises(InvariantError):
        Container(children=[a, b, c], edges=[Edge("a:y", "c:x", attrs={"phase": "train"}), Edge("b:y", "c:x")])


def test_child_names_are_unique_and_differ_from_parent():
    """Duplicate child names and a child named like its parent are invariant violations."""
    with pytest.raises(InvariantError, match="unique child names"):
        Container(children=[op("A", "a"), op("B", "a")])
    with pytest.raises(InvariantError, match="named like its parent"):
        Container(name="a", children=[op("A", "a")])


def test_unnamed_children_get_stable_names():
    """An unnamed child is named from its type and position, deterministically."""
    c = Container(children=[op("Relu"), op("Relu")])
    assert [k.name for k in c.children] == ["Relu_0", "Relu_1"]


def test_tombstone_must_name_an_existing_inner_edge():
    """A tombstone naming no edge below the container is rejected."""
    body = h_subgraph()
    with pytest.raises(InvariantError, match="tombstones\\[0\\]"):
        Container("Wrap", "w", children=[body], tombstones=[("h/f:n", "h/g:z")])
    ok = Container("Wrap", "w", children=[body], tombstones=[("h/f:m", "h/g:z")])
    assert ok.tombstones[0] == Edge((("h", "f"), "m"), (("h", "g"), "z"))


def test_deep_edge_needs_the_inner_edge_tombstoned():
    """An edge reaching into a descendant's fed input is rejected unless that edge is tombstoned."""
    body = h_subgraph()
    extra = op("E", "e", [], ["y"])
    with pytest.raises(InvariantError, match="tombstone the inner edge first"):
        Container("Wrap", "w", children=[body, extra], edges=[("e:y", "h/g:z")])
    fine = Container("Wrap", "w", children=[body, extra], edges=[("e:y", "h/g:z")], tombstones=[("h/f:m", "h/g:z")])
    assert len(fine.edges) == 1


def test_slash_names_resolve_whole_name_first():
    """A child whose name contains '/' wins over a split path (docs/design.md, addressing)."""
    mm = op("MatMul", "dense/MatMul", ["a", "b"], ["product"])
    relu = op("Relu", "dense/Relu", ["features"], ["activations"])
    g = Container(children=[mm, relu], edges=[("dense/MatMul:product", "dense/Relu:features")])
    assert g.edges[0].src.op == ("dense/MatMul",)
    outer = Container(name="top", children=[Container("B", "block", outputs=["y"], children=[mm], edges=[("dense/MatMul:product", "block:y")])])
    assert outer.descendant("block/dense/MatMul") is mm
    assert outer.descendant(("block", "dense/MatMul")) is mm


def test_missing_child_is_a_path_error():
    """Looking up a missing child raises PathError (an AmandaError and a LookupError)."""
    with pytest.raises(PathError):
        h_subgraph().child("zz")
    with pytest.raises(LookupError):
        h_subgraph().child(7)


def test_containers_are_immutable():
    """Fields cannot be set or deleted."""
    h = h_subgraph()
    with pytest.raises(AttributeError):
        h.name = "other"
    with pytest.raises(AttributeError):
        del h.attrs
    with pytest.raises(TypeError):
        h.attrs["x"] = 1  # type: ignore[index]


def test_equality_is_structural_and_ignores_uid():
    """Two containers built alike are equal and hash alike whatever their uids."""
    a, b = h_subgraph(), h_subgraph()
    assert a.uid != b.uid
    assert a == b and hash(a) == hash(b)
    assert a != a.with_attrs(debug=True)


def test_arrays_are_read_only_and_compared_by_value():
    """Array attributes are read-only copies; equality compares dtype, shape and values."""
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    a = op("Const", "c", attrs={"value": w})
    w[0, 0] = 99  # the container keeps its own copy
    assert a.attrs["value"][0, 0] == 0
    assert not a.attrs["value"].flags.writeable
    assert a == op("Const", "c", attrs={"value": np.arange(6, dtype=np.float32).reshape(2, 3)})
    assert a != op("Const", "c", attrs={"value": np.arange(6, dtype=np.float64).reshape(2, 3)})


def test_attributes_named_like_fields_are_plain_attributes():
    """In Python, attrs named `name` or `type` (ONNX's Optional has one) stay attributes;
    lifting `attrs: {name: g}` to the name belongs to the document format."""
    g = Container(name="g", attrs={"type": "float tensor"})
    assert (g.name, g.type, dict(g.attrs)) == ("g", None, {"type": "float tensor"})
    graph = Container(children=[g], attrs={"namespace": "amanda/onnx/17"})
    assert graph.namespace == "amanda/onnx/17"
    assert amanda.effective_attrs(graph, "g")["namespace"] == "amanda/onnx/17"
    with pytest.raises(InvariantError):
        Container(name=3)


def test_control_ports():
    """Every container has the -1 control ports; named control ports take control edges."""
    upd = op("Assign", "update", ["x"], [])
    bn = Container("BN", "bn", inputs=["x"], outputs=[], children=[upd], edges=[("bn:x", "update:x"), ("update:-1", "bn:train")], controls=["train"])
    assert bn.control_names == ("train",)
    with pytest.raises(InvariantError, match="both ends data ports or both control"):
        Container("BN", "bn", inputs=["x"], outputs=[], children=[upd], edges=[("bn:x", "update:-1")])


def test_with_attrs_that_changes_nothing_returns_self():
    """An update that changes nothing returns the same object."""
    h = h_subgraph().with_attrs(k=1)
    assert h.with_attrs(k=1) is h
    assert h.with_attrs() is h
    assert h.without_attrs("missing") is h
    assert h.evolve() is h and h.evolve(name=h.name) is h
    changed = h.with_attrs(k=2)
    assert changed.uid == h.uid and changed.children is h.children


def test_endpoint_forms():
    """Endpoints parse from strings and tuples; -1 is the control port."""
    assert Endpoint.parse("dense/MatMul:product") == Endpoint("dense/MatMul", "product")
    assert Endpoint.parse("f:-1").is_control
    assert Endpoint.of(("f", 0)) == Endpoint("f", 0)
    with pytest.raises(ValueError):
        Endpoint.parse("no-port")
    assert Port("x", attrs={"shape": [1, 2]}).attrs["shape"] == (1, 2)


def test_containers_refuse_pickle():
    """Containers are serialized as YAML/JSON, never pickled."""
    import pickle

    with pytest.raises(TypeError):
        pickle.dumps(h_subgraph())


@given(containers())
def test_random_containers_equal_their_rebuild(c):
    """Rebuilding a container from its own fields gives an equal container with the same hash."""
    again = Container(c.type, c.name, inputs=c.inputs, outputs=c.outputs, children=c.children, edges=c.edges, tombstones=c.tombstones, attrs=c.attrs, uid=None, controls=c.controls)
    assert again == c and hash(again) == hash(c)
