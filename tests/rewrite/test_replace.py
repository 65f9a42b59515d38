"""The engine's one way to apply a replacement: ``WorkingLevel.splice`` on a level's working copy
(the optimiser's rule tables and namespace conversion both splice their replacements so)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amanda import Container, op
from amanda.containers.edge import SELF, Edge, Endpoint
from amanda.rewrite.replace import WorkingLevel, end_name
from tests.strategies import check_invariants, containers, dataflow, snapshot


def _renamed(end: Endpoint, old: str, new: str) -> Endpoint:
    return Endpoint((new,), end.port) if end.op is not SELF and end.op == (old,) else end


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(containers(max_ops=8), st.data())
def test_splicing_an_op_in_place_of_another_keeps_the_input_invariants_and_dataflow(model: Container, data: st.DataObject) -> None:
    """On random nested containers (control edges, tombstones, attributes), replacing one leaf
    op of the top level by a new op with its ports, its edges re-attached to the new op, leaves
    the input alone, gives a container whose every node passes the constructor's checks, keeps
    the new op at the old one's place and the dataflow with the old name replaced by the new."""
    leaves = [c.name for c in model.children if not c.children]
    if not leaves or model.tombstones:
        return
    old = data.draw(st.sampled_from(leaves))
    before = snapshot(model)
    work = WorkingLevel(model)
    node = model.child(old)
    new = op("Replaced", work.fresh_name(f"{old}_new"), list(node.input_names), list(node.output_names))
    touching = work.touching([old])
    moved = [Edge(_renamed(e.src, old, new.name), _renamed(e.dst, old, new.name), attrs=e.attrs or None) for e in touching]
    work.splice(touching, [old], [new], [work.pos[old]], moved)
    out = work.build()
    assert snapshot(model) == before
    check_invariants(out)
    assert [c.name for c in out.children] == [new.name if c.name == old else c.name for c in model.children]
    renamed = {(new.name if a == old else a, p, new.name if b == old else b, q) for a, p, b, q in dataflow(model)}
    assert dataflow(out) == renamed


def test_an_unchanged_level_builds_the_same_object_and_indexes_follow_changes() -> None:
    """Nothing spliced: ``build`` returns the container itself; after a splice the producer,
    consumer and type indexes answer for the new op, and names are fresh."""
    g = Container(None, "g", inputs=["x"], outputs=["y"], children=[op("Relu", "r", ["X"], ["Y"])],
                  edges=[("g:x", "r:X"), ("r:Y", "g:y")])
    assert WorkingLevel(g).build() is g
    work = WorkingLevel(g)
    assert work.fresh_name("r") == "r_1" and list(work.types()) == ["Relu"]
    work.splice(work.touching(["r"]), ["r"], [op("Tanh", "t", ["X"], ["Y"])], [work.pos["r"]],
                [Edge((SELF, "x"), (("t",), "X")), Edge((("t",), "Y"), (SELF, "y"))])
    assert work.producers("t", "X") == [(None, "x")] and work.consumers("t", "Y") == [(None, "y")]
    assert list(work.types()) == ["Tanh"] and work.names == ["t"]
    assert end_name(Endpoint(("a", "b"), "p")) == ("a", "b") and work.reaching_into("t") == []
