"""The node table and its indexes: document order, subtree ranges, columns and caching."""

from hypothesis import given

import amanda
from amanda import Container, op
from amanda.query.indexes import IndexEntry, NodeTable, graph_items, table
from amanda.query.view import VIEW_KEYS
from tests.query.models import _entries, bodies_model, brute_view, four_queries_model, query_models

SPECS = [("name",), ("type",), ("segment",), ("is_op",), ("depth",), ("uid",), ("path",), ("inputs",),
         ("outputs",), ("controls",), ("attrs",), ("own_attrs",)]


@given(query_models())
def test_table_lists_nodes_in_document_order_with_subtree_ranges(model):
    """The table holds every node (held graphs included) in pre-order, and each node's
    descendants are exactly the positions up to end_of(p)."""
    t = table(model)
    expected = [(path, node) for path, node, _ in _entries(model)]
    assert list(t.paths) == [p for p, _ in expected]
    assert all(a is b for a, b in zip(t.nodes, (n for _, n in expected)))
    for p, path in enumerate(t.paths):
        below = [q for q, other in enumerate(t.paths) if len(other) > len(path) and other[: len(path)] == path]
        assert below == list(range(p + 1, t.end_of(p)))
        assert t.path(p) == path and t.position_of(path) == p
        if p:
            assert t.paths[t.parent[p]] == path[:-1] and t.segment(p) == path[-1]


@given(query_models())
def test_dense_columns_equal_per_node_values(model):
    """Every column built in bulk equals the values computed node by node, and the views
    equal the documented view built directly."""
    t = table(model)
    fresh = NodeTable(model)  # a second table whose values are computed one by one
    keys = sorted({k for _, _, attrs in _entries(model) for k in attrs} | {"missing", "namespace"})
    for spec in SPECS + [("attr", k) for k in keys] + [("own", k) for k in keys]:
        assert t.column(spec) == [fresh.value(spec, p) for p in range(len(t.nodes))], spec
    for p, (path, node, attrs) in enumerate(_entries(model)):
        assert fresh.view(p) == brute_view(path, node, attrs)
        assert set(fresh.view(p)) == set(VIEW_KEYS)


def test_nearest_owner_wins_even_for_explicit_nulls():
    """An effective attribute comes from the nearest node that sets it, even to null."""
    inner = Container("B", "b", children=[op("X", "x", attrs={"k": None}), op("Y", "y")], attrs={"k": 2})
    g = Container("G", "g", children=[inner, op("Z", "z")], attrs={"k": 1})
    assert table(g).column(("attr", "k")) == [1, 2, None, 2, 1]


def test_tables_and_indexes_are_cached_per_container_object():
    """The table, its columns and its indexes are built once per container object."""
    model = four_queries_model()
    t = table(model)
    assert table(model) is t
    assert t.index("type", "Dot") is t.index("type", "Dot")
    assert t.column(("type",)) is t.column(("type",))
    assert table(model.with_attrs(x=1)) is not t


def test_index_entries_materialise_once_and_slice():
    """An index entry gives its positions, bisects ranges and materialises paths once."""
    t = table(four_queries_model())
    entry = t.index("type", "Dot")
    assert isinstance(entry, IndexEntry)
    paths, nodes = entry.materialise(t)
    assert entry.materialise(t)[0] is paths and len(nodes) == len(entry.positions) == 5
    rnn2 = t.position_of(("rnn2",))
    a, b = entry.within(rnn2, t.end_of(rnn2))
    assert paths[a:b] == (("rnn2", "x_proj"), ("rnn2", "h_proj"))


def test_all_index_kinds():
    """Indexes by type, segment, name, op-ness, attribute key (effective and own) and computation."""
    t = table(four_queries_model())
    names = lambda entry: ["/".join(t.paths[p]) for p in entry.positions]
    assert names(t.index("segment", "probe")) == ["rnn1/probe", "rnn2/probe"]
    assert names(t.index("name", "dense/MatMul")) == ["dense/MatMul"]
    assert len(t.index("is_op").positions) == 18
    assert names(t.index("own", "rnn_cell")) == ["rnn1", "rnn2"]
    assert len(t.index("attr", "rnn_cell").positions) == 12
    assert "update" in names(t.index("computation", "train"))


def test_held_graphs_are_found_in_one_pass_block_by_block():
    """Graph-valued attributes are found wherever they are, with their segments and scopes."""
    g = bodies_model()
    t = table(g)
    loop = t.position_of(("block", "loop"))
    assert t.bodies[loop] == {"bodies[0]": loop + 1, "bodies[1]": loop + 3}
    inner = t.position_of(("block", "loop", "bodies[1]", "inner"))
    assert t.scope_of(inner) == loop + 3 and t.scope_of(loop) == 0
    assert t.child_named(loop, "bodies[1]") == loop + 3 and t.child_named(loop, "nope") is None
    assert [s for s, _ in graph_items(g.child("block").child("if_1"))] == ["else_branch", "then_branch"]
    assert graph_items(op("Relu", "r", attrs={"shape": (1, 2)})) == []


def test_a_graph_held_among_blocks_of_plain_ops_is_found():
    """Blocks whose ops hold only scalars are passed over by their maps' type; a block with one
    op holding a graph (beside plain ones) and one holding a tuple with a graph are still read."""
    body = Container("Body", "body", children=[op("Inner", "in1"), op("Inner", "in2")])
    plain = [Container("B", f"b{k}", children=[op("MatMul", f"m{j}", attrs={"i": j}) for j in range(3)])
             for k in range(3)]
    held = Container("B", "held", children=[op("MatMul", "m0", attrs={"i": 0}), op("If", "if", attrs={"then": body})])
    tupled = Container("B", "tupled", children=[op("Loop", "loop", attrs={"bodies": (body,), "shape": (1, 2)})])
    # an op of plain scalars given a graph afterwards (a transform's trusted assembly)
    later = Container("B", "later", children=[op("Scan", "scan", attrs={"n": 1}).with_attrs(then=body).with_name("s")])
    g = Container("G", "g", children=[plain[0], held, plain[1], tupled, later, plain[2]])
    assert amanda.query.select(g, "$..[?type=='Inner']").paths == (
        ("held", "if", "then", "in1"), ("held", "if", "then", "in2"),
        ("tupled", "loop", "bodies[0]", "in1"), ("tupled", "loop", "bodies[0]", "in2"),
        ("later", "s", "then", "in1"), ("later", "s", "then", "in2"))
    assert len(amanda.query.select(g, "$..[?type=='MatMul']")) == 10


def test_children_and_real_children():
    """children() lists a node's own children and then its held graphs; real_children() only the former."""
    t = table(bodies_model())
    if_1 = t.position_of(("block", "if_1"))
    assert len(t.children(if_1)) == 2 and len(t.real_children(if_1)) == 0
    block = t.position_of(("block",))
    assert [t.segment(q) for q in t.children(block)] == ["if_1", "loop"]


def test_getter_is_lazy_for_small_queries():
    """A query touching few nodes reads values one by one instead of building a column."""
    t = table(four_queries_model())
    few = t.getter(("attr", "initializer"), expected=1)
    assert not t.has_column(("attr", "initializer"))
    assert few[t.position_of(("w_init",))] is True
    assert t.getter(("attr", "initializer"), expected=len(t.nodes)) == t.column(("attr", "initializer"))


def test_paths_of_handles_every_kind_of_position():
    """paths_of gives the paths of leaves, inner nodes and held graphs alike."""
    g = bodies_model()
    t = NodeTable(g)
    everything = [p for p, _, _ in amanda.walk(g)]
    assert t.paths_of([0, 1, 2]) == tuple(everything[:3])
    assert t.paths_of(range(len(t.nodes))) == tuple(p for p, _, _ in _entries(g))
