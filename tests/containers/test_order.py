"""One topological sort: ties in document order, shared by flatten, sorted() and sorted(skip=)."""

import warnings

import pytest
from hypothesis import given
from hypothesis import strategies as st

from amanda import SELF, Container, CycleError, flatten, op
from amanda.containers.order import topological
from amanda.errors import ArgumentError
from tests.strategies import containers


def _greedy(container):
    """Oracle: repeatedly take the first op in document order whose producers are all taken."""
    flat = flatten(container)
    paths = list(flat.ops)
    preds = {p: set() for p in paths}
    for e in flat.edges:
        if e.src.op is not SELF and e.dst.op is not SELF:
            preds[e.dst.op].add(e.src.op)
    done, order = set(), []
    while len(order) < len(paths):
        nxt = next(p for p in paths if p not in done and preds[p] <= done)
        done.add(nxt)
        order.append(nxt)
    return order


@given(containers())
def test_every_order_is_the_earliest_ready_op_first(c):
    """flatten's order, sorted() and sorted(skip=) with a skip that accepts nothing all equal the
    greedy earliest-in-document-order oracle."""
    expected = _greedy(c)
    assert list(flatten(c).topological_order()) == expected
    paths = {id(node): path for path, node in flatten(c).ops.items()}
    assert [paths[id(o)] for o in c.sorted()] == expected
    assert [paths[id(o)] for o in c.sorted(skip=lambda _: False)] == expected


def test_ties_follow_document_order_not_discovery_order():
    """Among ops ready at once, the earliest in document order runs first (s1 before b)."""
    s0, s1, b = op("S", "s0", ["x"], ["y"]), op("S", "s1", ["x"], ["y"]), op("B", "b", ["x"], ["y"])
    g = Container(children=[s0, b, s1], edges=[("s0:y", "s1:x")])
    assert [o.name for o in g.sorted()] == ["s0", "b", "s1"]
    g = Container(children=[s0, s1, b], edges=[("s0:y", "s1:x")])
    assert [o.name for o in g.sorted()] == ["s0", "s1", "b"]
    assert [o.name for o in g.sorted(skip=lambda c: False)] == ["s0", "s1", "b"]


def test_a_cycle_names_its_nodes():
    """A cycle raises CycleError listing the nodes on it in edge order."""
    with pytest.raises(CycleError) as info:
        topological(["a", "b", "c", "d"], [("a", "b"), ("b", "c"), ("c", "b"), ("c", "d")])
    assert info.value.cycle == ("b", "c")


def test_skip_and_its_alias():
    """sorted(skip=f) yields accepted containers whole, as does its alias skip_containers=f
    (without a warning); both at once, or a skip that is not a function, are refused."""
    inner = Container("Cell", "cell", inputs=["x"], outputs=["y"], children=[op("A", "a", ["x"], ["y"])], edges=[("cell:x", "a:x"), ("a:y", "cell:y")])
    g = Container(children=[inner, op("H", "h", ["x"], [])], edges=[("cell:y", "h:x")])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [o.name for o in g.sorted(skip=lambda c: c.type == "Cell")] == ["cell", "h"]
        assert [o.name for o in g.sorted(skip_containers=lambda c: c.type == "Cell")] == ["cell", "h"]
    with pytest.raises(ArgumentError, match="skip_containers"):
        g.sorted(skip=bool, skip_containers=bool)
    with pytest.raises(TypeError, match="a function"):
        g.sorted(skip="Cell")


def test_a_cycle_with_ops_downstream_of_it_is_named() -> None:
    """Ops fed by a cycle are left over too; the error still names the cycle (it raised a bare
    StopIteration when the search started at such an op)."""
    g = Container(None, "g", children=[op("C", "c", ["x"], ["y"]), op("A", "a", ["x"], ["y"]),
                                       op("B", "b", ["x"], ["y"])],
                  edges=[("a:y", "b:x"), ("b:y", "a:x"), ("b:y", "c:x")])
    with pytest.raises(CycleError) as info:
        flatten(g)
    assert set(info.value.cycle) == {("a",), ("b",)}


@given(st.integers(1, 9).flatmap(lambda n: st.tuples(
    st.just(n), st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=15))))
def test_cyclic_components_are_the_nodes_that_reach_themselves(graph):
    """cyclic_components groups exactly the nodes on a cycle, by mutual reachability (checked
    against a transitive closure), and ordered says whether there is one."""
    from amanda.containers.order import cyclic_components, ordered

    n, edges = graph
    reach = [[False] * n for _ in range(n)]
    for a, b in edges:
        reach[a][b] = True
    for k in range(n):
        for i in range(n):
            for j in range(n):
                reach[i][j] = reach[i][j] or (reach[i][k] and reach[k][j])
    expected = sorted({tuple(j for j in range(n) if j == i or (reach[i][j] and reach[j][i]))
                       for i in range(n) if reach[i][i]})
    assert [tuple(c) for c in cyclic_components(list(range(n)), edges)] == expected
    assert ordered(list(range(n)), [(a, b) for a, b in edges if a != b],
                   looped=any(a == b for a, b in edges))[1] == bool(expected)
