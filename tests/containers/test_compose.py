"""chain and named_merge: wiring, exposure of unbound ports, sugar, associativity."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from amanda import SELF, CompositionError, Container, chain, flatten, named_merge, op
from tests.strategies import chains, check_invariants, snapshot


def leaf_flow(c: Container) -> set:
    """Leaf-to-leaf and boundary dataflow by leaf name, top port names ignored."""
    out = set()
    for e in flatten(c).edges:
        src = "IN" if e.src.op is SELF else (e.src.op[-1], e.src.port)
        dst = "OUT" if e.dst.op is SELF else (e.dst.op[-1], e.dst.port)
        out.add((src, dst))
    return out


def test_chain_wires_one_to_one_and_renames_boundary():
    """chain connects outputs to inputs and renames the parent's ports as asked."""
    a, b = op("Dense", "a", ["x"], ["y"]), op("Tanh", "b", ["x"], ["y"])
    parent = chain(a, b, inputs=["image"], outputs=["class_label"], name="net")
    assert parent.input_names == ("image",) and parent.output_names == ("class_label",)
    assert parent.children[0] is a and parent.children[1] is b
    assert {(str(e.src), str(e.dst)) for e in flatten(parent).edges} == {
        ("SELF:image", "a:x"), ("a:y", "b:x"), ("b:y", "SELF:class_label")}


def test_chain_by_names_exposes_unbound_outputs():
    """Matching names wire by name; outputs nobody consumes are exposed as child.port."""
    a = op("Split", "a", ["x"], ["left", "right", "aux"])
    b = op("Join", "b", ["left", "right"], ["y"])
    parent = chain(a, b)
    assert parent.output_names == ("y", "a.aux")
    assert parent.port("a.aux").attrs["unbound"] is True


def test_chain_mismatch_lists_both_port_lists():
    """Ports that line up neither by position nor by name raise a CompositionError naming them."""
    with pytest.raises(CompositionError, match=r"\['y1', 'y2'\].*\['x'\]"):
        chain(op("A", "a", ["x"], ["y1", "y2"]), op("B", "b", ["x"], ["z"]))


def test_call_and_rshift_are_chain():
    """b(a) and a >> b mean chain(a, b)."""
    a, b = op("A", "a", ["x"], ["y"]), op("B", "b", ["x"], ["y"])
    assert b(a) == chain(a, b) == (a >> b)


def test_reused_container_gets_a_unique_name_and_keeps_its_uid():
    """A layer used twice is renamed in its second place and keeps its uid (shared weights)."""
    a = op("Dense", "dense", ["x"], ["y"])
    parent = chain(a, a)
    assert [c.name for c in parent.children] == ["dense", "dense_1"]
    assert parent.children[1].uid == a.uid


def diagram_layers():
    layer_1 = op("L1", "layer_1", ["i1"], ["o1", "o2", "o3"])
    layer_2 = op("L2", "layer_2", ["i1"], ["o1"])
    layer_3 = op("L3", "layer_3", ["i1", "i2"], ["o1"])
    return layer_1, layer_2, layer_3


def test_named_merge_three_child_diagram():
    """The three-child diagram of docs/challenges.md (C1): two patches, CI1/CI2 and CO1..CO3 exposed."""
    merged = named_merge(list(diagram_layers()), patches=[("layer_1:o1", "layer_2:i1"), ("layer_1:o3", "layer_3:i1")])
    assert merged.input_names == ("layer_1.i1", "layer_3.i2")
    assert merged.output_names == ("layer_1.o2", "layer_2.o1", "layer_3.o1")
    assert ((("layer_1", "o1")), ("layer_2", "i1")) in leaf_flow(merged)
    check_invariants(merged)


def test_named_merge_renames_and_resolves_slash_names():
    """Patches use endpoint strings (whole names with '/' win); renames map qualified names."""
    mm = op("MatMul", "dense/MatMul", ["a", "b"], ["product"])
    relu = op("Relu", "dense/Relu", ["features"], ["activations"])
    merged = named_merge([mm, relu], [("dense/MatMul:product", "dense/Relu:features")],
                         inputs={"dense/MatMul.a": "x"}, outputs={"dense/Relu.activations": "y"})
    assert merged.input_names == ("x", "dense/MatMul.b") and merged.output_names == ("y",)


def test_named_merge_errors():
    """Bad patches name the offending endpoint."""
    a, b, c = diagram_layers()
    with pytest.raises(CompositionError, match="nope"):
        named_merge([a, b], [("nope:o1", "layer_2:i1")])
    with pytest.raises(CompositionError, match="'o9'"):
        named_merge([a, b], [("layer_1:o9", "layer_2:i1")])
    with pytest.raises(CompositionError, match="twice"):
        named_merge([a, b, c], [("layer_1:o1", "layer_2:i1"), ("layer_1:o2", "layer_2:i1")])


@given(chains(min_layers=3, max_layers=6), st.data())
def test_chain_is_associative_in_the_effective_view(layers, data):
    """chain(chain(a, b), c), chain(a, chain(b, c)) and chain(a, b, c) have one dataflow."""
    cut = data.draw(st.integers(1, len(layers) - 1))
    flat = chain(*layers)
    left = chain(chain(*layers[:cut]), *layers[cut:])
    right = chain(*layers[:cut], chain(*layers[cut:]))
    assert leaf_flow(flat) == leaf_flow(left) == leaf_flow(right)


@given(chains(min_layers=2))
def test_composition_never_modifies_its_inputs(layers):
    """chain and named_merge leave their arguments as they were and produce valid containers."""
    before = [snapshot(layer) for layer in layers]
    result = chain(*layers)
    merged = named_merge(layers, [(f"{layers[0].name}:y", f"{layers[1].name}:x")])
    assert [snapshot(layer) for layer in layers] == before
    check_invariants(result)
    check_invariants(merged)
    assert all(a is b for a, b in zip(result.children, layers))
