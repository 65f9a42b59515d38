"""select and Selection: steps, document order, the view, held graphs and the Selection API."""

import numpy as np
import pytest

import amanda
from amanda import Container, op
from amanda.errors import QueryError
from amanda.query import Selection, compile_selector, select
from tests.query.models import bodies_model, four_queries_model


@pytest.fixture(scope="module")
def model():
    return four_queries_model()


def paths(container, selector):
    return [("/".join(p) if p else "$") for p in select(container, selector).paths]


def test_dollar_is_the_root(model):
    """`$` alone selects the root, with the empty path."""
    found = select(model, "$")
    assert found.paths == ((),) and found.containers == (model,)


def test_child_by_name_and_quoted_name(model):
    """`.name` and `."name"` (or `['name']`) select a child; quoting allows `/` in names."""
    assert paths(model, "$.rnn1") == ["rnn1"]
    assert paths(model, '$."dense/MatMul"') == ["dense/MatMul"]
    assert paths(model, "$['dense/MatMul']") == ["dense/MatMul"]
    assert paths(model, "$.rnn1.x_proj") == ["rnn1/x_proj"]
    assert paths(model, "$.missing") == []


def test_child_by_index_and_slice(model):
    """`[n]` counts children from 0 (negative from the end); `[a:b:c]` slices them."""
    assert paths(model, "$[0]") == ["w_init"]
    assert paths(model, "$[-1]") == ["update"]
    assert paths(model, "$[99]") == []
    assert paths(model, "$.rnn1[1:3]") == ["rnn1/h_proj", "rnn1/add"]
    # a negative step picks from the end; the Selection is in document order all the same
    assert paths(model, "$.rnn1[::-2]") == ["rnn1/x_proj", "rnn1/add", "rnn1/probe"]


def test_star_selects_every_child_in_order(model):
    """`.*` and `[*]` select the children in their order."""
    names = [c.name for c in model.children]
    assert paths(model, "$.*") == names == paths(model, "$[*]")


def test_descendants_exclude_the_root(model):
    """`$..*` is every node below the root in document order (pre-order), not the root."""
    everything = paths(model, "$..*")
    assert "$" not in everything
    assert everything[:4] == ["w_init", "h0", "embed", "rnn1"]
    assert everything.index("rnn1/probe") < everything.index("rnn2")
    assert len(everything) == len([p for p, _, _ in amanda.walk(model)]) - 1


def test_descendant_name_and_filter(model):
    """`..name` finds that name at any depth; `..[?f]` filters every descendant."""
    assert paths(model, "$..probe") == ["rnn1/probe", "rnn2/probe"]
    assert paths(model, "$..[?type == 'Tanh']") == ["rnn1/act", "rnn2/act"]
    assert paths(model, "$.rnn2..[?is_op]") == [f"rnn2/{n}" for n in ("x_proj", "h_proj", "add", "act", "probe")]


def test_filter_applies_to_children(model):
    """`[?f]` keeps the children of the current nodes on which f is true."""
    assert paths(model, "$[?type == 'LSTMCell']") == ["rnn1", "rnn2"]
    assert paths(model, "$.*[?type == 'Dot']") == ["rnn1/x_proj", "rnn1/h_proj", "rnn2/x_proj", "rnn2/h_proj"]


def test_results_are_unique_and_in_document_order(model):
    """Overlapping steps (`$..*..*`) give each node once, in document order."""
    found = select(model, "$..*..[?is_op]").paths
    assert len(set(found)) == len(found)
    order = [p for p, _, _ in amanda.walk(model)]
    assert list(found) == sorted(found, key=order.index)


def test_view_fields(model):
    """The view has name, type, path, depth, attrs (effective), own_attrs, ports, is_op,
    namespace and uid."""
    probe = model.child("rnn2").child("probe")
    checks = [
        "name == 'probe'", "type == 'Print'", "path == ['rnn2', 'probe']", "depth == `2`",
        "attrs.rnn_cell && attrs.debug", "attrs.namespace == 'amanda/onnx/17'", "own_attrs.debug",
        "!(own_attrs.rnn_cell)", "inputs == ['x']", "outputs == `[]`", "is_op", f"uid == '{probe.uid}'",
        "namespace == 'amanda/onnx/17'", "controls == `[]`",
    ]
    for check in checks:
        assert paths(model, f"$.rnn2[?name == 'probe' && {check}]") == ["rnn2/probe"], check
    assert paths(model, "$[?controls == ['inference'] && !is_op]") == ["rnn1", "rnn2"]


def test_nearest_attribute_wins():
    """An op's own attribute overrides the one it inherits."""
    inner = Container("B", "b", children=[op("X", "keep"), op("X", "override", attrs={"level": 2})], attrs={"level": 1})
    g = Container("G", "g", children=[inner], attrs={"level": 0})
    assert paths(g, "$..[?attrs.level == `2`]") == ["b/override"]
    assert paths(g, "$..[?attrs.level == `1`]") == ["b", "b/keep"]


def test_array_and_tuple_attributes_are_json_in_the_view():
    """Tuples are arrays and numpy arrays are (nested) lists or scalars in the view."""
    g = Container("G", "g", children=[
        op("Const", "c", attrs={"shape": (2, 3), "value": np.array([[1, 2]]), "scalar": np.array(2.5)}),
    ])
    assert paths(g, "$[?attrs.shape == `[2, 3]` && attrs.value[0][1] == `2` && attrs.scalar > `2`]") == ["c"]


def test_descends_into_graph_valued_attributes():
    """`..` walks into graphs held in attributes, with the attribute name as segment
    (`name[i]` for a tuple of graphs), after the op's own children."""
    g = bodies_model()
    assert paths(g, "$..[?type == 'Dot']") == ["block/if_1/then_branch/inner", "block/loop/bodies[0]/inner"]
    assert paths(g, "$.block.if_1.*") == ["block/if_1/else_branch", "block/if_1/then_branch"]
    assert paths(g, '$.block.loop."bodies[1]".inner') == ["block/loop/bodies[1]/inner"]
    assert paths(g, "$.block.if_1[0]") == []  # positions count own children only


def test_held_graphs_inherit_from_the_op_that_holds_them():
    """A node inside a held graph inherits the effective attributes of the op holding it."""
    g = bodies_model()
    found = paths(g, "$..[?is_op && attrs.debug && attrs.tag == 'then_g']")
    assert found == ["block/if_1/then_branch/inner"]


def test_selection_api(model):
    """A Selection has len, iteration of (path, container), indexing, paths, containers,
    root, containment, equality and a readable repr."""
    found = select(model, "$..[?type == 'Dot']")
    assert isinstance(found, Selection)
    assert len(found) == 5 and bool(found)
    assert list(found) == list(zip(found.paths, found.containers))
    assert found[0] == (("rnn1", "x_proj"), model.child("rnn1").child("x_proj"))
    assert ("dense/MatMul",) in found
    assert found.root is model
    assert found == select(model, "$..[?type=='Dot']") and hash(found) == hash(found.paths)
    assert repr(found).startswith("Selection([rnn1/x_proj, rnn1/h_proj")
    assert not select(model, "$.nothing")


def test_selection_is_immutable(model):
    """A Selection refuses attribute assignment."""
    found = select(model, "$.*")
    with pytest.raises(AttributeError):
        found.paths = ()  # type: ignore[misc]


def test_relative_select(model):
    """Selection.select continues from the selected nodes with full paths and inherited
    attributes; the leading `$` may be left out."""
    cells = select(model, "$..[?own_attrs.rnn_cell]")
    assert cells.select("..[?type == 'Dot']").paths == select(model, "$.*[?type == 'Dot']").paths
    assert cells.select("$[?attrs.rnn_cell && is_op]").paths == select(model, "$..[?is_op && attrs.rnn_cell]").paths
    assert cells.select("$").paths == cells.paths


def test_container_select_delegates(model):
    """container.select(selector) is amanda.query.select(container, selector)."""
    assert model.select("$..probe").paths == select(model, "$..probe").paths


def test_compile_selector_reuses_and_runs_anywhere(model):
    """A compiled selector is cached by text and runs on any container."""
    compiled = compile_selector("$..[?is_op && attrs.debug]")
    assert compiled is compile_selector("$..[?is_op && attrs.debug]")
    assert compiled.select(model).paths == select(model, "$..[?is_op && attrs.debug]").paths
    other = Container("G", "g", children=[op("P", "p", attrs={"debug": True})])
    assert compiled.select(other).paths == (("p",),)


def test_engines_must_be_known():
    """compile_selector refuses an unknown engine with a QueryError."""
    with pytest.raises(QueryError, match="engine is one of"):
        compile_selector("$", engine="fast")


def test_a_leaf_root_has_no_descendants():
    """Selecting below an op that holds nothing finds nothing."""
    leaf = op("Relu", "r")
    assert select(leaf, "$..*").paths == () and select(leaf, "$.*").paths == () and select(leaf, "$[0]").paths == ()


def test_only_containers_are_queried():
    """Querying something that is not a Container is a QueryError naming what was found."""
    with pytest.raises(QueryError, match="queries a Container, found dict"):
        select({"type": "Dot"}, "$")  # type: ignore[arg-type]
