"""Mapping tables on the rewrite engine's matcher: a table's ``Pattern`` compiles to pattern ops
and its bindings are the ones a brute-force search over every assignment of ops to variables
finds, in document order of the ops in variable order; ``Output`` and inputs by port name work
in a model's tree view too."""

from __future__ import annotations

import itertools
import pickle
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from amanda import CONTROL, Container, op
from amanda.rewrite.mapping.pattern import OpPattern, Pattern, ScopeView, find_matches
from amanda.rewrite.mapping.scope import Scope
from amanda.rewrite.match import TreeView, bindings
from amanda.rewrite.pattern import Output, PatternOp

TYPES = ("A", "B", "C")
INPUTS, OUTPUTS = ("x", "y"), ("o", "p")


def random_level(rng: random.Random) -> Container:
    """A level of 2 to 6 ops, each input fed (or not) by an earlier op's output or the input,
    some control edges, and a ``k`` attribute on some ops."""
    names = [f"n{i}" for i in range(rng.randint(2, 6))]
    children = [op(rng.choice(TYPES), name, list(INPUTS), list(OUTPUTS), {"k": rng.randint(0, 1)})
                for name in names]
    edges = []
    for i, name in enumerate(names):
        for port in INPUTS:
            choice = rng.randint(-1, i)
            if choice == i and i > 0:
                edges.append((f"{names[rng.randrange(i)]}:{rng.choice(OUTPUTS)}", f"{name}:{port}"))
            elif choice == -1:
                edges.append(("g:i", f"{name}:{port}"))
        if i > 0 and rng.random() < 0.3:
            edges.append((f"{names[rng.randrange(i)]}:-1", f"{name}:-1"))
    return Container(None, "g", inputs=["i"], children=children, edges=edges)


def random_pattern(rng: random.Random, level: Container) -> Pattern:
    """1 to 3 variables (a type, alternatives or any, sometimes ``k == 1``) and up to 3 edges
    between them, data or control, in either direction; or, more often, the ops and ports of
    one or two edges the level has (so that multi-op patterns do match)."""
    inner = [e for e in level.edges if isinstance(e.src.op, tuple) and isinstance(e.dst.op, tuple)]
    if inner and rng.random() < 0.6:
        return _pattern_of(rng, level, rng.sample(inner, min(len(inner), rng.randint(1, 2))))
    variables = [f"v{i}" for i in range(rng.randint(1, 3))]
    ops = {}
    for var in variables:
        types = rng.choice([rng.choice(TYPES), tuple(rng.sample(TYPES, 2)), None])
        ops[var] = OpPattern(types, {"k": 1} if rng.random() < 0.3 else {})
    edges = []
    for _ in range(rng.randint(0, 3) if len(variables) > 1 else 0):
        src, dst = rng.sample(variables, 2)
        control = rng.random() < 0.2
        edges.append(f"{src}.-1 -> {dst}.-1" if control else f"{src}.{rng.choice(OUTPUTS)} -> {dst}.{rng.choice(INPUTS)}")
    return Pattern(ops, edges)


def _pattern_of(rng: random.Random, level: Container, edges: list) -> Pattern:
    """A pattern of the ops these edges join, typed as the ops are (or looser), with their edges."""
    ops: dict[str, OpPattern] = {}
    texts = []
    for edge in edges:
        ends = []
        for end in (edge.src, edge.dst):
            var = f"v_{end.op[0]}"
            found = level.child(end.op[0]).type
            ops.setdefault(var, OpPattern(rng.choice([found, (found, "Z"), None])))
            ends.append(f"{var}.{end.port}")
        texts.append(" -> ".join(ends))
    return Pattern(ops, texts)


def brute_force(level: Container, pattern: Pattern) -> list[dict[str, str]]:
    """Every injective assignment of the level's ops to the variables that fits, sorted by the
    ops' positions in variable order: what the driver's documentation promises."""
    position = {child.name: i for i, child in enumerate(level.children)}
    wired = {(e.src.op[0], e.src.port, e.dst.op[0], e.dst.port) for e in level.edges
             if isinstance(e.src.op, tuple) and isinstance(e.dst.op, tuple)}
    found = []
    for chosen in itertools.permutations(position, len(pattern.variables)):
        bound = dict(zip(pattern.variables, chosen, strict=True))
        ops = dict(pattern.ops)
        if not all(ops[v].accepts(level.child(n)) for v, n in bound.items()):
            continue
        if all((bound[e.src], e.src_port if e.src_port != -1 else CONTROL, bound[e.dst],
                e.dst_port if e.dst_port != -1 else CONTROL) in wired for e in pattern.edges):
            found.append(bound)
    return sorted(found, key=lambda b: [position[b[v]] for v in pattern.variables])


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_bindings_are_every_fitting_assignment_in_document_order(seed: int) -> None:
    """On random levels and patterns the matcher finds exactly the brute-force bindings, in order."""
    rng = random.Random(seed)
    level = random_level(rng)
    pattern = random_pattern(rng, level)
    scope = Scope(level, (), None, None)
    assert find_matches(scope, pattern, lambda name, choice: True) == brute_force(level, pattern)


def test_a_pattern_compiles_to_pattern_ops_with_inputs_by_port():
    """Each data edge becomes an input by port name of the op it feeds (``Output`` of the
    producer's port); the op no edge leaves is the root; control edges are checked after."""
    pattern = Pattern({"c": "Const", "o": ("Pad", "PadV2"), "d": "*"},
                      ["c.output -> o.paddings", "d.-1 -> o.-1"])
    roots, checked = pattern.compiled
    assert [r.capture for r in roots] == ["o", "d"]
    assert roots[0].type == ("Pad", "PadV2") and roots[1].type is None
    fed = roots[0].ports["paddings"]
    assert isinstance(fed, Output) and fed.port == "output" and fed.op.type == ("Const",)
    assert [(e.src, e.dst) for e in checked] == [("d", "o")]


def test_a_compiled_pattern_pickles_and_matches_the_same_after():
    """Patterns travel (tables are sent to worker processes): the compiled form pickles too."""
    level = Container(None, "g", children=[op("F", "a", [], ["y"], {"k": 1}), op("F", "b", [], ["y"], {"k": 2}),
                                           op("G", "c", ["x"], [])], edges=[("b:y", "c:x")])
    pattern = Pattern({"f": OpPattern("F", {"k": 2}), "g": "G"}, ["f.y -> g.x"])
    again = pickle.loads(pickle.dumps(pattern))
    scope = Scope(level, (), None, None)
    assert find_matches(scope, again, lambda n, c: True) == find_matches(scope, pattern, lambda n, c: True) == [
        {"f": "b", "g": "c"}]


def test_namespace_choice_admits_ops_through_the_view():
    """``ScopeView`` admits an op only when ``namespace_ok`` says its namespace fits the choice."""
    level = Container(None, "g", children=[op("A", "a", [], ["o"]), op("A", "b", [], ["o"])])
    scope = Scope(level, (), None, None)
    only_b = find_matches(scope, Pattern({"v": OpPattern("A", namespace="target")}), lambda n, c: n == "b" and c == "target")
    assert only_b == [{"v": "b"}]
    assert ScopeView(scope, lambda n, c: True).anchors(None) == ["a", "b"]


def test_output_and_ports_in_a_model_tree():
    """An input constrained by port name with ``Output`` reads the named output of an op in
    another container: the tree view follows it across the boundary."""
    inner = Container(None, "block", inputs=["x"], outputs=["y"], children=[op("G", "g", ["x"], ["y"])],
                      edges=[("block:x", "g:x"), ("g:y", "block:y")])
    model = Container(None, "m", inputs=["i"], outputs=["out"],
                      children=[op("F", "f", ["x"], ["y0", "y1"]), inner],
                      edges=[("m:i", "f:x"), ("f:y1", "block:x"), ("block:y", "m:out")])
    producer = PatternOp(("F", "H"), (), ports={})
    second = PatternOp("G", (), ports={"x": Output(producer, "y1")})
    first = PatternOp("G", (), ports={"x": Output(producer, "y0")})
    found = [sorted(key for _, key in ops.values()) for ops in bindings(TreeView(model), [second])]
    assert found == [[("block", "g"), ("f",)]]
    assert list(bindings(TreeView(model), [first])) == []
