"""Cycles are reported by validate and infer_types (one problem per op on a cycle), across
nesting levels, through tombstones and new edges of an edit, and inside held graphs."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

import amanda
from amanda import Container, CycleError, op
from amanda.containers.cycles import cycle_problems, held_graphs
from tests.strategies import build_nested, groupings, plans

NS = {"namespace": "amanda/onnx/17"}


def _loop() -> Container:
    return Container(None, "g", inputs=["x"], outputs=["y"], attrs=NS, children=[
        op("Add", "a", ["A", "B"], ["C"]), op("Relu", "r", ["X"], ["Y"]), op("Neg", "after", ["X"], ["Y"])],
        edges=[("g:x", "a:A"), ("r:Y", "a:B"), ("a:C", "r:X"), ("r:Y", "after:X"), ("after:Y", "g:y")])


def _cycle_paths(problems: list) -> list:
    return [p.path for p in problems if p.expected == "an acyclic dataflow"]


def test_a_cycle_is_built_and_validate_names_every_op_on_it():
    """A graph with a cycle can be built (constructors stay cheap), and validate reports each
    op on the cycle with its path and the cycle, not the op downstream of it."""
    g = _loop()
    problems = amanda.validate(g)
    assert _cycle_paths(problems) == [("a",), ("r",)]
    assert [p.found for p in problems[:2]] == ["the cycle a -> r -> a", "the cycle r -> a -> r"]


def test_infer_types_reports_the_same_cycle_as_validate():
    """infer_types lists the cycle among its problems, exactly as validate does."""
    g = _loop()
    assert [str(p) for p in amanda.infer_types(g).problems] == [str(p) for p in amanda.validate(g)]
    assert _cycle_paths(amanda.infer_types(g).problems) == [("a",), ("r",)]


def test_a_cycle_made_by_an_edit_across_levels_is_reported():
    """An edit that buries the edge into a chain's first op and feeds it from the last one
    closes a cycle only in the effective view; validate names the three ops by full path."""
    body = Container("Chain", "body", inputs=["x"], outputs=["y"], children=[op("Relu", f"L{i}", ["X"], ["Y"]) for i in (1, 2, 3)],
                     edges=[("body:x", "L1:X"), ("L1:Y", "L2:X"), ("L2:Y", "L3:X"), ("L3:Y", "body:y")], attrs=NS)
    looped = amanda.edit(body).remove_edge("body:x", "body/L1:X").connect("body/L3:Y", "body/L1:X").build("w")
    assert amanda.validate(body) == []
    assert _cycle_paths(amanda.validate(looped)) == [("body", "L1"), ("body", "L2"), ("body", "L3")]
    assert "body/L1 -> body/L2 -> body/L3 -> body/L1" in amanda.validate(looped)[0].found


def test_a_cycle_through_container_ports_alone_is_reported():
    """A container whose output is wired back to its input, with a pass-through inside and no
    op on the loop, is reported at the container's path when something reads the loop."""
    inner = Container("Pass", "p", inputs=["x"], outputs=["y"], children=[op("Relu", "r", ["X"], ["Y"])],
                      edges=[("p:x", "p:y")], attrs=NS)
    g = Container(None, "g", children=[inner, op("Relu", "use", ["X"], ["Y"])],
                  edges=[("p:y", "p:x"), ("p:y", "use:X")], attrs=NS)
    problems = cycle_problems(g)
    assert problems and {p.path for p in problems} == {("p",)}
    assert len(problems) == 1 and "boundary ports of p" in problems[0].found


def test_a_cycle_inside_a_held_graph_has_the_attribute_in_its_path():
    """A cycle in an If branch is reported with the path (if, then_branch, op)."""
    body = Container(None, "then", outputs=["y"], children=[
        op("Add", "a", ["A", "B"], ["C"]), op("Relu", "r", ["X"], ["Y"])],
        edges=[("r:Y", "a:A"), ("a:C", "r:X"), ("a:C", "then:y")])
    branch = op("If", "if", ["cond"], ["y"], attrs={"then_branch": body})
    g = Container(None, "g", children=[branch])
    assert [p.path for p in cycle_problems(g)] == [("if", "then_branch", "a"), ("if", "then_branch", "r")]
    assert [label for label, _ in held_graphs(branch)] == ["then_branch"]


def test_a_self_loop_and_a_second_cycle_are_both_reported():
    """An op feeding itself and a separate two-op cycle give three problems."""
    g = Container(None, "g", children=[op("Relu", "s", ["X"], ["Y"]), op("Relu", "a", ["X"], ["Y"]),
                                       op("Relu", "b", ["X"], ["Y"])],
                  edges=[("s:Y", "s:X"), ("a:Y", "b:X"), ("b:Y", "a:X")])
    problems = cycle_problems(g)
    assert [p.path for p in problems] == [("s",), ("a",), ("b",)]
    assert problems[0].found == "the cycle s -> s"


def test_a_long_cycle_is_shown_shortened():
    """A cycle of 40 ops names each op once as a problem and shows a shortened cycle."""
    names = [f"n{i}" for i in range(40)]
    edges = [(f"{a}:Y", f"{b}:X") for a, b in zip(names, names[1:] + names[:1])]
    g = Container(None, "g", children=[op("Relu", n, ["X"], ["Y"]) for n in names], edges=edges)
    problems = cycle_problems(g)
    assert len(problems) == 40 and "more ops" in problems[0].found
    assert problems[0].found.endswith("-> n39 -> n0")


def _on_cycles(names: list[str], pairs: list[tuple[str, str]]) -> set[str]:
    """Brute force: the ops from which a path of edges leads back to themselves."""
    reach = {n: {b for a, b in pairs if a == n} for n in names}
    changed = True
    while changed:
        changed = False
        for n in names:
            more = set().union(*(reach[m] for m in reach[n])) - reach[n] if reach[n] else set()
            if more:
                reach[n] |= more
                changed = True
    return {n for n in names if n in reach[n]}


@settings(max_examples=120, deadline=None)
@given(st.data())
def test_reported_ops_are_exactly_the_ops_on_cycles(data):
    """On random nested graphs with random backward control edges, the ops validate reports on
    cycles are exactly those a brute-force search finds, and flatten fails exactly then."""
    plan = data.draw(plans(8))
    names = [s["name"] for s in plan.ops]
    extra = data.draw(st.lists(st.tuples(st.integers(0, len(names) - 1), st.integers(0, len(names) - 1)),
                               max_size=3))
    for b, a in extra:
        if a <= b and (names[b], names[a]) not in plan.controls:
            plan.controls.append((names[b], names[a]))
    model = build_nested(plan, data.draw(groupings(names)))
    pairs = [(a, b) for a, _, b, _ in plan.edges] + list(plan.controls)
    expected = _on_cycles(names, pairs)
    found = cycle_problems(model)
    assert {p.path[-1] for p in found} == expected
    assert len(found) == len(expected)
    assert {p.path[-1] for p in amanda.infer_types(model).problems if p.expected == "an acyclic dataflow"} == expected
    try:
        amanda.flatten(model)
    except CycleError:
        assert expected
    else:
        assert not expected
