"""Edits by wrapping, stacked wrappers and consolidate."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amanda import SELF, AmandaError, chain, consolidate, edit, effective_attrs, flatten, op, walk
from tests.strategies import (
    ATTRS,
    build_nested,
    check_invariants,
    dataflow,
    groupings,
    plans,
    same_leaf_attrs,
    snapshot,
)


def three_layers():
    return chain(*(op("Dense", f"L{i}", ["x"], ["y"]) for i in (1, 2, 3)), name="body")


def skip_connection(body):
    return (
        edit(body)
        .remove_edge("body/L2:y", "body/L3:x")
        .add(op("Add", "add", ["a", "b"], ["y"]))
        .connect("body/L1:y", "add:a")
        .connect("body/L2:y", "add:b")
        .connect("add:y", "body/L3:x")
        .build(name="resnet")
    )


def flow(c):
    return {(str(e.src), str(e.dst)) for e in flatten(c).edges}


def test_skip_connection_wraps_the_model_untouched():
    """The wrapper holds the very same model object and the effective view has the skip."""
    body = three_layers()
    before = snapshot(body)
    res = skip_connection(body)
    assert res.child("body") is body and snapshot(body) == before
    assert flow(res) == {
        ("SELF:x", "body/L1:x"), ("body/L1:y", "body/L2:x"), ("body/L1:y", "add:a"),
        ("body/L2:y", "add:b"), ("add:y", "body/L3:x"), ("body/L3:y", "SELF:y"),
    }
    assert res.input_names == body.input_names and res.output_names == body.output_names


def test_edit_errors_name_the_edge_or_port():
    """Removing a missing edge, feeding a fed input or naming a missing port raise AmandaErrors."""
    body = three_layers()
    with pytest.raises(AmandaError, match="body/L1:y -> body/L3:x"):
        edit(body).remove_edge("body/L1:y", "body/L3:x")
    with pytest.raises(AmandaError, match="fed by body/L1:y"):
        edit(body).add(op("C", "c", [], ["y"])).connect("c:y", "body/L2:x")
    with pytest.raises(AmandaError, match="'nope'"):
        edit(body).connect("body/L1:nope", "body/L2:x")
    with pytest.raises(AmandaError, match="already removed"):
        edit(body).remove_edge("body/L1:y", "body/L2:x").remove_edge("body/L1:y", "body/L2:x")


def test_removing_an_added_edge_drops_it():
    """remove_edge on an edge this edit added takes it back instead of adding a tombstone."""
    body = three_layers()
    e = edit(body).add(op("Log", "log", ["x"], [])).connect("body/L1:y", "log:x").remove_edge("body/L1:y", "log:x")
    built = e.build()
    assert not built.tombstones and not any("log" in d for _, d in flow(built))


def test_edits_stack_and_consolidate():
    """An edit of an edit works; consolidate folds the stack into one tree with the same view."""
    body = three_layers()
    res = skip_connection(body)
    again = edit(res).remove_edge("resnet/add:y", "resnet/body/L3:x").connect("resnet/body/L2:y", "resnet/body/L3:x").build()
    assert ("resnet/body/L2:y", "resnet/body/L3:x") in flow(again)
    folded = consolidate(again)
    assert not folded.tombstones and folded.type == "Chain"
    names = lambda c: {(s.rsplit("/", 1)[-1], d.rsplit("/", 1)[-1]) for s, d in flow(c)}
    assert names(folded) == names(again)
    assert folded.child("L1") is body.child("L1")
    check_invariants(folded)


def test_consolidate_pushes_tombstones_into_the_owner():
    """A tombstone of a deeper edge becomes that edge's removal in its owner; siblings are shared."""
    inner = three_layers()
    model = chain(inner, op("Out", "out", ["x"], ["y"]), name="model")
    wrapped = edit(model).remove_edge("model/body/L2:y", "model/body/L3:x").connect("model/body/L1:y", "model/body/L3:x").build()
    folded = consolidate(wrapped)
    assert folded.child("out") is model.child("out")
    assert len(folded.child("body").edges) == len(inner.edges) - 1
    assert {(s.rsplit("/", 1)[-1], d.rsplit("/", 1)[-1]) for s, d in flow(folded)} == {
        (s.rsplit("/", 1)[-1], d.rsplit("/", 1)[-1]) for s, d in flow(wrapped)}


def test_consolidate_of_a_plain_container_is_itself():
    """consolidate returns containers that are not edit wrappers unchanged."""
    body = three_layers()
    assert consolidate(body) is body


def _live_inner_edges(model):
    """Data edges between children (no boundary face), anywhere in the model, in the
    coordinates of a wrapper around it: those a wrapper can both remove and re-create."""
    found = []
    for path, node, _ in walk(model):
        for e in node.edges:
            if not e.is_control and e.src.op is not SELF and e.dst.op is not SELF:
                ends = [(("m", *path) if end.op is SELF else ("m", *path, *end.op), end.port) for end in (e.src, e.dst)]
                found.append(tuple(ends))
    return found


@given(plans(max_ops=8), st.data())
def test_edits_never_modify_input_and_consolidate_keeps_the_view(plan, data):
    """Removing and re-adding a random inner edge leaves the model as it was; consolidate keeps the view."""
    model = build_nested(plan, data.draw(groupings([s["name"] for s in plan.ops])), name="m")
    before = snapshot(model)
    candidates = _live_inner_edges(model)
    if not candidates:
        return
    src, dst = data.draw(st.sampled_from(candidates))
    wrapped = edit(model).remove_edge(src, dst).connect(src, dst).build()
    assert snapshot(model) == before
    check_invariants(wrapped)
    assert dataflow(wrapped) == dataflow(model)
    folded = consolidate(wrapped)
    check_invariants(folded)
    assert dataflow(folded) == dataflow(model)
    assert snapshot(model) == before


def test_consolidate_keeps_what_an_added_op_inherits():
    """An op a wrapper added does not inherit the model's own attributes after consolidation."""
    body = three_layers().with_attrs(debug=True)
    res = edit(body).add(op("Log", "log", ["x"], ["y"])).build(attrs={"tag": "w"})
    folded = consolidate(res)
    debug = lambda c: sorted(n.name for _, n, a in walk(c) if n.is_op and a.get("debug"))
    assert debug(res) == ["L1", "L2", "L3"] and debug(folded) == ["L1", "L2", "L3"]
    assert effective_attrs(folded, "log")["tag"] == "w"
    assert same_leaf_attrs(folded, res)


def test_consolidate_pins_the_wrappers_value_where_the_model_hides_it():
    """Where model and wrapper both set a key, an added op keeps the wrapper's value."""
    body = three_layers().with_attrs(scale=2)
    res = edit(body).add(op("Log", "log", ["x"], ["y"])).build(attrs={"scale": 1})
    folded = consolidate(res)
    assert effective_attrs(folded, "log")["scale"] == 1 and effective_attrs(folded, "L1")["scale"] == 2
    assert folded.child("L1") is body.child("L1")


def test_consolidate_leaves_a_wrapper_around_a_leaf_op():
    """A wrapper whose model is a leaf op has no tree to fold into and is returned as is."""
    wrapped = edit(op("Dense", "d", ["x"], ["y"])).add(op("Log", "log", ["x"], ["y"])).build()
    assert consolidate(wrapped) is wrapped


@settings(max_examples=60, deadline=None)
@given(plans(max_ops=6), st.data())
def test_consolidate_keeps_dataflow_and_effective_attributes(plan, data):
    """Folding a random stack of attributed wrappers keeps the dataflow and every leaf's
    effective attributes, never modifies its input and satisfies the invariants."""
    names = [s["name"] for s in plan.ops]
    group_attrs = {f"g{k}": data.draw(ATTRS) for k in range(1, 6)}
    model = build_nested(plan, data.draw(groupings(names)), name="m", group_attrs=group_attrs)
    stacked = model.with_attrs(**data.draw(ATTRS))
    for level in range(data.draw(st.integers(1, 3))):
        added = op("Relu", f"added{level}", ["x"], ["y"], data.draw(ATTRS))
        stacked = edit(stacked).add(added).build(attrs=data.draw(ATTRS))
    before = snapshot(stacked)
    folded = consolidate(stacked)
    assert snapshot(stacked) == before
    check_invariants(folded)
    assert dataflow(folded) == dataflow(stacked)
    assert same_leaf_attrs(folded, stacked)


def _message(build) -> str:
    with pytest.raises(AmandaError) as info:
        build()
    return str(info.value)


def test_an_endpoint_without_the_model_prefix_names_the_op_and_the_prefixed_endpoint():
    """remove_edge and connect with 'L2:y' (the model's op, unprefixed) name L2 and suggest
    'body/L2:y'; following the suggestion builds the skip connection."""
    body = three_layers()
    message = _message(lambda: edit(body).remove_edge("L2:y", "L3:x"))
    assert "'L2'" in message and "body/L2:y" in message and "body/L3:x" in message
    message = _message(lambda: edit(body).add(op("Add", "add", ["a", "b"], ["y"])).connect("L1:y", "add:a"))
    assert "'L1'" in message and "body/L1:y" in message
    assert flatten(skip_connection(body)).ops  # the suggested form is the documented one


def test_a_missing_op_port_or_edge_is_named_with_what_exists():
    """A missing op inside the model is named with its container's children (or a close name),
    a missing port with a close one or the side it is on, and an edge between existing ports
    that does not exist says what feeds the destination."""
    body = three_layers()
    message = _message(lambda: edit(body).remove_edge("body/L2:y", "body/L9:x"))
    assert "'L9'" in message and "L1, L2, L3" in message
    assert "did you mean 'body'" in _message(lambda: edit(body).remove_edge("bdy/L2:y", "body/L3:x"))
    assert "did you mean 'y'" in _message(lambda: edit(body).remove_edge("body/L2:yy", "body/L3:x"))
    message = _message(lambda: edit(body).add(op("Log", "log", ["x"], [])).connect("log:x", "body/L3:x"))
    assert "'x' is an input port of 'log'" in message
    message = _message(lambda: edit(body).remove_edge("body/L1:y", "body/L3:x"))
    assert "body/L3:x is fed by body/L2:y" in message
