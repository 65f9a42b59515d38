"""The graph functions filters can call: in_computation, producer_types, consumer_types."""

from hypothesis import given

from amanda import SELF, Container, Edge, flatten, op
from amanda.query import select
from amanda.query.analysis import computation, neighbour_types
from amanda.query.functions import FUNCTION_NAMES, QueryFunctions, arity
from amanda.query.indexes import table
from tests.query.models import bodies_model, four_queries_model, query_models


def names(container, selector):
    return ["/".join(p) for p in select(container, selector).paths]


def test_outputs_and_their_ancestors_are_in_every_computation():
    """Producers of the root's outputs and everything upstream run in every computation;
    containers holding such ops are in it too; an op linked to no computation is in none."""
    model = four_queries_model()
    for name in ("train", "inference"):
        found = names(model, f"$..[?in_computation('{name}')]")
        assert "softmax" in found and "dense/MatMul" in found and "rnn1/x_proj" in found and "rnn1" in found
        assert "rnn1/probe" not in found


def test_named_control_ports_pull_their_sources_in():
    """Control edges into a control port named like the computation add their sources and
    ancestors; other ports' sources stay out."""
    model = four_queries_model()
    train = names(model, "$..[?is_op && in_computation('train')]")
    assert "grad_check" in train and "update" in train and "print_logits" not in train
    inference = names(model, "$..[?is_op && in_computation('inference')]")
    assert "print_logits" in inference and "rnn2/probe" in inference and "update" not in inference


def test_edges_of_other_phases_are_ignored():
    """An edge tagged with another phase does not pull its source into the computation."""
    bn = Container(
        "BN", "bn", inputs=["x"], outputs=["y"],
        children=[op("BatchStats", "batch", ["x"], ["y"]), op("RunningStats", "running", ["x"], ["y"])],
        edges=[("bn:x", "batch:x"), ("bn:x", "running:x"),
         Edge("batch:y", "bn:y", attrs={"phase": "train"}), Edge("running:y", "bn:y", attrs={"phase": "inference"})],
    )
    assert names(bn, "$[?in_computation('train')]") == ["batch"]
    assert names(bn, "$[?in_computation('inference')]") == ["running"]


def test_control_sources_may_be_containers_or_other_control_ports():
    """A container as a control source brings all its ops; a named port feeding a named
    port brings that port's sources."""
    inner = Container("Block", "blk", children=[op("A", "a"), op("B", "b")])
    bn = Container("BN", "bn", controls=["update"], children=[op("Assign", "assign")],
                   edges=[("assign:-1", (SELF, "update"))])
    top = Container("G", "g", controls=["train"], children=[inner, bn, op("C", "c")],
                    edges=[("blk:-1", (SELF, "train")), ("bn:update", (SELF, "train"))])
    assert names(top, "$..[?is_op && in_computation('train')]") == ["blk/a", "blk/b", "bn/assign"]


def test_held_graphs_follow_their_op():
    """Nodes inside a graph held by an op in the computation are in it too."""
    g = bodies_model()
    g = g.evolve(controls=["inference"], children=[*g.children, op("Print", "show")],
                  edges=[*g.edges, ("show:-1", (SELF, "inference"))])
    found = names(g, "$..[?in_computation('inference')]")
    assert "block/if_1/then_branch/inner" in found and "block/loop/bodies[1]" in found


def test_producer_and_consumer_types():
    """producer_types()/consumer_types() give the sorted distinct types across data edges;
    for a container, across its boundary."""
    model = four_queries_model()
    fed_by_const = ["rnn1/h_proj", "rnn2/h_proj", "dense/MatMul"]
    assert names(model, "$..[?contains(producer_types(), 'Const') && type == 'Dot']") == fed_by_const
    assert names(model, "$[?consumer_types() == ['Dot'] && !is_op]") == ["rnn1", "rnn2"]
    assert names(model, "$[?consumer_types() == ['AssignSub', 'Print']]") == ["softmax"]
    assert names(model, "$..[?producer_types() == `[]` && is_op]")[:2] == ["w_init", "h0"]


def test_producer_types_inside_held_graphs():
    """In a held graph, producers and consumers come from that graph's own dataflow."""
    body = Container("Graph", "body", inputs=["x"], outputs=["y"],
                     children=[op("Exp", "e", ["x"], ["y"]), op("Log", "l", ["x"], ["y"])],
                     edges=[("body:x", "e:x"), ("e:y", "l:x"), ("l:y", "body:y")])
    g = Container("G", "g", children=[op("Loop", "loop", attrs={"body": body})])
    assert names(g, "$..[?contains(producer_types(), 'Exp')]") == ["loop/body/l"]


@given(query_models())
def test_computation_matches_a_reverse_search(model):
    """The ops of a computation are the ancestors of the root's outputs in the effective
    view, found here by a plain reverse search (these models have no control ports), plus the
    op linked to the computation's control port (a model has to name a computation to be asked
    about it)."""
    model = Container("Wrap", "wrap", inputs=model.input_names, outputs=model.output_names, controls=["any"],
                      children=[model, op("Print", "linked")],
                      edges=[*((f"wrap:{x}", f"{model.name}:{x}") for x in model.input_names),
                             *((f"{model.name}:{y}", f"wrap:{y}") for y in model.output_names),
                             ("linked:-1", (SELF, "any"))])
    flat = flatten(model)
    wanted = {e.src.op for e in flat.edges if e.dst.op is SELF and e.src.op is not SELF}
    frontier = list(wanted)
    while frontier:
        here = frontier.pop()
        for e in flat.edges:
            if e.dst.op == here and e.src.op is not SELF and e.src.op not in wanted:
                wanted.add(e.src.op)
                frontier.append(e.src.op)
    found = {p for p in select(model, "$..[?is_op && in_computation('any')]").paths if p in flat.ops}
    assert found == wanted | {("linked",)}


def test_analysis_functions_directly():
    """computation() gives positions and neighbour_types() sorted types."""
    t = table(four_queries_model())
    members = computation(t, "train")
    assert t.position_of(("update",)) in members
    assert neighbour_types(t, t.position_of(("softmax",)), "consumers") == ["AssignSub", "Print"]


def test_function_table():
    """The function table has JMESPath's built-ins and ours, with their arities."""
    assert {"in_computation", "producer_types", "consumer_types", "length", "contains"} <= FUNCTION_NAMES
    assert arity("producer_types") == (0, False) and arity("contains") == (2, False)
    fns = QueryFunctions(table(four_queries_model()))
    fns.position = 0
    assert fns.call_function("in_computation", ["train"]) is True
