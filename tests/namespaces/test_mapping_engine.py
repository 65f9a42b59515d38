"""The mapping driver: update/remove/create semantics, ports, order, overlaps, fixed points,
unmatched ops, nesting, namespaces, sharing and name maps (tables in user namespaces)."""

import pytest

import amanda
from amanda import SELF, Container, op
from amanda.containers import Endpoint
from amanda.errors import MappingError
from amanda.rewrite.mapping import (
    RELABEL,
    MappingLoopError,
    MappingTable,
    NewOp,
    OpPattern,
    Pattern,
    Replacement,
    Rule,
    Skip,
    UnmatchedOpsError,
)

A, B = "user/a", "user/b"


def graph(children, edges=(), inputs=(), outputs=(), name="g", namespace=A):
    return Container(None, name, inputs=inputs, outputs=outputs, children=children, edges=edges, attrs={"namespace": namespace})


def chain3():
    """x -> f -> g -> h -> y, with a control edge f -> h."""
    return graph([op("F", "f", ["x"], ["y"]), op("G", "g", ["x"], ["y"]), op("H", "h", ["x"], ["y"])],
                 [("top:x", "f:x"), ("f:y", "g:x"), ("g:y", "h:x"), ("h:y", "top:y"), ("f:-1", "h:-1")],
                 ["x"], ["y"], name="top")


def relabel_all(m):
    return RELABEL


def edges_of(c):
    return sorted(f"{e.src}->{e.dst}" for e in c.edges)


def test_update_keeps_name_uid_and_edges():
    """An updated op keeps its name and uid and its edges follow same-named ports."""
    g = chain3()
    table = MappingTable(A, B, [(Pattern({"o": "G"}), lambda m: Replacement({"o": NewOp("G2")})),
                                (Pattern({"o": "*"}), relabel_all)])
    out = table.apply(g)
    assert out.child("g").type == "G2" and out.child("g").uid == g.child("g").uid
    assert edges_of(out) == edges_of(g)


def test_remove_with_forwarding_bypasses_the_op():
    """A removed op whose output is mapped to its own input is bypassed: consumers read its producer."""
    g = chain3()

    def drop(m):
        return Replacement({}, ports={"o.y": "o.x"})

    out = MappingTable(A, B, [(Pattern({"o": "G"}), drop), (Pattern({"o": "*"}), relabel_all)]).apply(g)
    assert [c.name for c in out.children] == ["f", "h"]
    assert "f:y->h:x" in edges_of(out)


def test_create_replaces_a_pair_and_reattaches_boundary_ports():
    """A created op replaces two matched ops; boundary edges follow the ports map."""
    g = chain3()

    def fuse(m):
        return Replacement({"fg": NewOp("FG", inputs=["in"], outputs=["out"], name="fused")},
                           ports={"a.x": "fg.in", "b.y": "fg.out"})

    rule = Rule("fuse", Pattern({"a": "F", "b": "G"}, ["a.y -> b.x"]), fuse)
    out = MappingTable(A, B, [rule, (Pattern({"o": "*"}), relabel_all)]).apply(g)
    assert [c.name for c in out.children] == ["fused", "h"]
    assert "SELF:x->fused:in" in edges_of(out) and "fused:out->h:x" in edges_of(out)
    assert "fused:-1->h:-1" in edges_of(out)  # f's control edge moved to the replacement


def test_positional_ports_when_all_names_change():
    """An updated op whose port names all changed is re-attached by position."""
    g = chain3()
    out = MappingTable(A, B, [(Pattern({"o": "G"}), lambda m: Replacement({"o": NewOp("G", inputs=["X"], outputs=["Y"])})),
                              (Pattern({"o": "*"}), relabel_all)]).apply(g)
    assert "f:y->g:X" in edges_of(out) and "g:Y->h:x" in edges_of(out)


def test_unmapped_boundary_input_is_an_error_naming_the_rule():
    """An input fed from outside that the replacement does not place is a MappingError."""
    g = chain3()
    table = MappingTable(A, B, [(Pattern({"o": "G"}), lambda m: Replacement({"n": NewOp("N", inputs=["i"], outputs=["y"])}, ports={"o.y": "n.y"}))])
    with pytest.raises(MappingError, match="<lambda>"):
        table.apply(g, on_unmatched="pass")


def test_removed_op_still_read_outside_is_kept():
    """A matched op the replacement drops but that is still read outside the match stays."""
    k = op("K", "k", [], ["y"])
    g = graph([k, op("U", "u", ["x", "axis"], ["y"]), op("V", "v", ["x"], ["y"])],
              [("k:y", "u:axis"), ("k:y", "v:x")])

    def fold(m):
        return Replacement({"u": NewOp("U2", inputs=["x"], outputs=["y"], attrs={"axis": 1})})

    out = MappingTable(A, B, [(Pattern({"k": "K", "u": "U"}, ["k.y -> u.axis"]), fold)]).apply(g, on_unmatched="pass")
    assert out.has_child("k") and out.child("u").type == "U2"
    assert "k:y->v:x" in edges_of(out) and "k:y->u:axis" not in edges_of(out)


def test_removed_control_edges_are_bridged():
    """Removing an op with no replacement joins its control predecessors to its successors."""
    g = graph([op("A", "a"), op("N", "n"), op("C", "c")], [("a:-1", "n:-1"), ("n:-1", "c:-1")])
    out = MappingTable(A, B, [(Pattern({"n": "N"}), lambda m: Replacement({}))]).apply(g, on_unmatched="pass")
    assert edges_of(out) == ["a:-1->c:-1"]


def test_apply_after_orders_rules_and_cycles_are_rejected():
    """apply_after runs a rule after the rules it names; a cycle is an error when the table is made."""
    seen = []

    def note(name):
        def rule(m):
            seen.append(name)
        return rule

    rules = [Rule("late", Pattern({"o": "F"}), note("late"), apply_after=("early",)),
             Rule("early", Pattern({"o": "F"}), note("early"))]
    MappingTable(A, B, rules).apply(chain3(), on_unmatched="pass")
    assert seen == ["early", "late"]
    with pytest.raises(MappingError, match="cycle"):
        MappingTable(A, B, [Rule("a", Pattern({"o": "F"}), note("a"), apply_after=("b",)),
                            Rule("b", Pattern({"o": "F"}), note("b"), apply_after=("a",))])
    with pytest.raises(MappingError, match="names of rules"):
        MappingTable(A, B, [Rule("a", Pattern({"o": "F"}), note("a"), apply_after=("zz",))])


def test_overlapping_matches_first_in_document_order_wins():
    """Of two matches sharing an op, the one earlier in document order is applied; the other skipped."""
    g = graph([op("R", f"r{i}", ["x"], ["y"]) for i in range(3)], [("r0:y", "r1:x"), ("r1:y", "r2:x")])

    def pair(m):
        return Replacement({"p": NewOp("P", inputs=["x"], outputs=["y"])}, ports={"a.x": "p.x", "b.y": "p.y"})

    out = MappingTable(A, B, [(Pattern({"a": "R", "b": "R"}, ["a.y -> b.x"]), pair)]).apply(g, on_unmatched="pass")
    assert [c.type for c in out.children] == ["P", "R"]
    assert out.child(0).name == "r0/p"


def test_fixed_point_and_endless_loop():
    """fixed_point repeats until nothing changes; rules undoing each other raise MappingLoopError."""
    g = graph([op("R", f"r{i}", ["x"], ["y"]) for i in range(4)], [("r0:y", "r1:x"), ("r1:y", "r2:x"), ("r2:y", "r3:x")])

    def merge(m):  # R -> R merges into one R: only a fixed point merges all four
        return Replacement({"a": NewOp()}, ports={"b.y": "a.y"})

    merged = MappingTable(A, A, [(Pattern({"a": "R", "b": "R"}, ["a.y -> b.x"]), merge)], fixed_point=True).apply(g)
    assert [c.name for c in merged.children] == ["r0"]
    flip = MappingTable(A, A, [Rule("to_s", Pattern({"o": "R"}), lambda m: Replacement({"o": NewOp("S")})),
                               Rule("to_r", Pattern({"o": "S"}), lambda m: Replacement({"o": NewOp("R")}))],
                        fixed_point=True, max_iterations=5)
    with pytest.raises(MappingLoopError) as info:
        flip.apply(g)
    assert set(info.value.rules) == {"to_s", "to_r"}


def test_unmatched_ops_listed_by_path_or_passed_through():
    """Unmatched source ops are all listed by path (with skip reasons), or kept in their namespace."""
    inner = Container("Block", "blk", inputs=["x"], outputs=["y"], children=[op("Q", "q", ["x"], ["y"])], edges=[("blk:x", "q:x"), ("q:y", "blk:y")])
    g = graph([op("P", "p", [], ["y"]), inner], [("p:y", "blk:x")])
    table = MappingTable(A, B, [(Pattern({"o": "P"}), lambda m: Skip("no P today"))])
    with pytest.raises(UnmatchedOpsError) as info:
        table.apply(g)
    assert [path for path, _, _ in info.value.ops] == ["blk/q", "p"]
    assert "no P today" in str(info.value)
    out = table.apply(g, on_unmatched="pass")
    assert out.namespace == B and amanda.walk(out)
    assert dict(amanda.effective_attrs(out, "blk/q"))["namespace"] == A


def test_nested_inputs_are_hoisted_to_the_root():
    """An input port a rule adds inside a nested container is fed from a new root input."""
    inner = Container("Dense", "fc", inputs=["x"], outputs=["y"], children=[op("Var", "w", [], ["ref"]), op("Mul", "m", ["a", "b"], ["c"])],
                      edges=[("fc:x", "m:a"), ("w:ref", "m:b"), ("m:c", "fc:y")])
    g = graph([inner], [("g:x", "fc:x"), ("fc:y", "g:y")], ["x"], ["y"])

    def var(m):
        return Replacement({}, ports={"v.ref": "SELF.kernel"}, inputs=[{"name": "kernel", "attrs": {"dtype": "float32"}}])

    out, names = MappingTable(A, B, [(Pattern({"v": "Var"}), var), (Pattern({"o": "*"}), relabel_all)]).apply(g, with_names=True)
    assert [p.name for p in out.inputs] == ["x", "kernel"]
    assert [p.name for p in out.child("fc").inputs] == ["x", "kernel"]
    assert names.resolve("fc/w:ref") == Endpoint(SELF, "kernel")
    flat = amanda.flatten(out)
    assert any(e.src.op is SELF and e.src.port == "kernel" and e.dst.port == "b" for e in flat.edges)


def test_result_namespace_and_structural_sharing():
    """The result carries the target namespace; untouched subtrees are the input's own objects."""
    inner = Container("Block", "blk", inputs=["x"], outputs=["y"], children=[op("Q", "q", ["x"], ["y"])], edges=[("blk:x", "q:x"), ("q:y", "blk:y")],
                      attrs={"namespace": "user/other"})
    g = graph([op("P", "p", [], ["y"]), inner], [("p:y", "blk:x")])
    out = MappingTable(A, B, [(Pattern({"o": "P"}), lambda m: Replacement({"o": NewOp("P2")}))]).apply(g)
    assert out.namespace == B and out.child("blk") is inner
    same = MappingTable(A, B, [(Pattern({"o": "*"}), relabel_all)]).apply(g)
    assert all(a is b for a, b in zip(same.children, g.children))


def test_name_map_follows_values_through_rules():
    """The name map gives each touched output's new endpoint, None for a fused-away value."""
    g = chain3()

    def fuse(m):
        return Replacement({"fg": NewOp("FG", inputs=["in"], outputs=["out"])}, ports={"a.x": "fg.in", "b.y": "fg.out"})

    table = MappingTable(A, B, [(Pattern({"a": "F", "b": "G"}, ["a.y -> b.x"]), fuse), (Pattern({"o": "*"}), relabel_all)])
    out, names = table.apply(g, with_names=True)
    assert out.has_child("f/fg")
    assert names.resolve("g:y") == Endpoint(("f/fg",), "out")
    assert names["f:y"] is None
    with pytest.raises(MappingError):
        names.resolve("f:y")
    assert names.resolve("h:y") == Endpoint(("h",), "y")


def test_tables_compose_with_plus_and_select_by_tags():
    """+ concatenates rules of tables with the same namespaces; select keeps rules by tag."""
    one = MappingTable(A, B, [Rule("r1", Pattern({"o": "F"}), relabel_all, tags=("x",))])
    two = MappingTable(A, B, [Rule("r2", Pattern({"o": "G"}), relabel_all, tags=("y",))])
    assert (one + two).rule_names == ["r1", "r2"]
    assert (one + two).select(["y"]).rule_names == ["r2"]
    assert (one + two).select(skip=["y"]).rule_names == ["r1"]
    with pytest.raises(MappingError, match="same namespaces"):
        one + MappingTable(A, "user/c")
    with pytest.raises(MappingError, match="unique rule names"):
        one + one


def test_pattern_literal_attrs_and_namespace_choice():
    """An OpPattern's literal attrs must equal the op's; namespace='target' sees mapped ops only."""
    g = graph([op("F", "f", [], ["y"], attrs={"k": 1}), op("F", "f2", [], ["y"], attrs={"k": 2})])
    hit = MappingTable(A, B, [(Pattern({"o": OpPattern("F", {"k": 2})}), lambda m: Replacement({"o": NewOp("Two")})),
                              (Pattern({"o": "*"}), relabel_all),
                              (Pattern({"o": OpPattern("Two", namespace="target")}), lambda m: Replacement({"o": NewOp("Three")}))])
    out = hit.apply(g)
    assert [c.type for c in out.children] == ["F", "Three"]


def test_rule_errors_name_the_rule_and_op():
    """A rule function that raises is reported as a MappingError naming the rule and the op."""
    def broken(m):
        raise ZeroDivisionError("oops")

    with pytest.raises(MappingError, match="broken.*f"):
        MappingTable(A, B, [(Pattern({"o": "F"}), broken)]).apply(chain3(), on_unmatched="pass")
    with pytest.raises(MappingError, match="on_unmatched"):
        MappingTable(A, B).apply(chain3(), on_unmatched="maybe")


def test_edges_reaching_into_nested_containers_are_reattached():
    """An edge of an enclosing container that names a nested op follows that op's replacement."""
    inner = Container("Block", "blk", inputs=["x"], outputs=["y"], children=[op("Q", "q", ["x"], ["y"]), op("R", "r", ["x"], ["y"])],
                      edges=[("blk:x", "q:x"), ("q:y", "blk:y")])
    g = graph([op("P", "p", [], ["y"]), inner, op("S", "s", ["x", "z"], ["y"])],
              [("p:y", "blk:x"), ("blk:y", "s:x"), ((("blk", "q"), "y"), "s:z"),
               ("p:y", (("blk", "r"), "x")), ("p:-1", (("blk", "r"), -1)), ((("blk", "r"), -1), "s:-1")])

    def swap(m):
        return Replacement({"n": NewOp("Q2", inputs=["in"], outputs=["out"], name="q2")},
                           ports={"o.x": "n.in", "o.y": "n.out"})

    def bypass(m):
        return Replacement({}, ports={"o.y": "o.x"})

    table = MappingTable(A, B, [(Pattern({"o": "Q"}), swap), (Pattern({"o": "R"}), bypass),
                                (Pattern({"o": "*"}), relabel_all)])
    out = table.apply(g)
    flat = sorted(f"{e.src}->{e.dst}" for e in amanda.flatten(out).edges)
    # q's deep consumer follows q2; r is bypassed and its control edges are bridged
    assert flat == ["blk/q2:out->s:x", "blk/q2:out->s:z", "p:-1->s:-1", "p:y->blk/q2:in"]


def test_match_helpers_read_the_surroundings():
    """A rule function can read producers, constants, shapes, consumers, paths and namespaces."""
    import numpy as np

    seen = {}
    g = graph([op("Const", "k", [], ["output"], {"value": np.arange(3)}), op("Use", "u", ["x", "k"], ["y"]),
               op("Sink", "s", ["a", "b"], [])],
              [("g:x", "u:x"), ("k:output", "u:k"), ("u:y", "s:a"), ("u:y", "s:b")],
              inputs=[amanda.Port("x", attrs={"shape": [2, 5], "dtype": "float32"})])

    def look(m):
        seen.update(constant=m.constant("u", "k").tolist(), rank=m.input_rank("u", "x"),
                    producer=m.producer("u", "x")[1], fed_by_op=m.producer("u", "k")[0].name,
                    consumers=m.consumers("u", "y"), path=m.path("u"), namespace=m.namespace("u"),
                    view=m.view()["$u"]["consumers"], attrs=dict(m.input_attrs("u", "x")))

    MappingTable(A, B, [(Pattern({"u": "Use"}), look)]).apply(g, on_unmatched="pass")
    assert seen == {"constant": [0, 1, 2], "rank": 2, "producer": "x", "fed_by_op": "k", "consumers": 2,
                    "path": ("u",), "namespace": A, "view": {"y": 2},
                    "attrs": {"shape": (2, 5), "dtype": "float32"}}
