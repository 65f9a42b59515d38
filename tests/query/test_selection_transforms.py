"""Selections drive the pure transforms: replace, fuse and with_attrs take a Selection."""

from hypothesis import given, settings
from hypothesis import strategies as st

import amanda
from amanda.containers import fuse, replace, with_attrs
from amanda.query import select
from tests.query.models import bodies_model, four_queries_model, query_models


def test_with_attrs_on_a_selection_is_pure():
    """with_attrs(model, selection, ...) marks exactly the selected nodes and leaves the model as it was."""
    model = four_queries_model()
    before = amanda.dumps(model)
    dots = select(model, "$..[?type == 'Dot']")
    marked = with_attrs(model, dots, fast=True)
    assert amanda.dumps(model) == before
    assert select(marked, "$..[?own_attrs.fast]").paths == dots.paths
    assert marked.child("embed") is model.child("embed")  # untouched subtrees are shared


def test_replace_on_a_selection_is_pure():
    """replace(model, selection, fn) rewrites each selected op and keeps the dataflow."""
    model = four_queries_model()
    before = amanda.dumps(model)
    tanhs = select(model, "$..[?type == 'Tanh']")
    swapped = replace(model, tanhs, lambda node: amanda.op("Sigmoid", node.name, node.inputs, node.outputs))
    assert amanda.dumps(model) == before
    assert select(swapped, "$..[?type == 'Sigmoid']").paths == tanhs.paths
    assert select(swapped, "$..[?type == 'Tanh']").paths == ()
    assert len(amanda.flatten(swapped).edges) == len(amanda.flatten(model).edges)


def test_fuse_a_selection_is_pure():
    """fuse(model, selection, type) moves the selected sibling ops into one container that keeps them."""
    model = four_queries_model()
    before = amanda.dumps(model)
    projections = select(model, "$.rnn1[?type == 'Dot']")
    fused = fuse(model, projections, "FusedProjections")
    assert amanda.dumps(model) == before
    assert select(fused, "$.rnn1[?type == 'FusedProjections']..[?type == 'Dot']").paths == tuple(
        ("rnn1", "FusedProjections_0", name) for name in ("x_proj", "h_proj")
    )


@given(query_models(), st.sampled_from(["$..[?is_op]", "$..[?type == 'Dot']", "$.*", "$..[?attrs.debug]"]))
@settings(max_examples=30)
def test_selection_edits_touch_only_the_selection(model, selector):
    """Marking a random selection marks exactly it (graphs held in attributes included) and
    leaves the original model unchanged."""
    before = amanda.dumps(model)
    # graphs held in a tuple attribute (segments `name[i]`) are not addressable by the
    # transforms yet; single held graphs are
    chosen = tuple(p for p in select(model, selector).paths if not any(s.endswith("]") for s in p))
    marked = with_attrs(model, list(chosen), chosen_mark=True)
    assert amanda.dumps(model) == before
    assert select(marked, "$..[?own_attrs.chosen_mark]").paths == chosen


def test_edits_reach_into_held_graphs():
    """A node selected inside a graph held by an op's attribute can be edited in place."""
    g = bodies_model()
    inner = select(g, "$..then_branch.inner")
    marked = with_attrs(g, inner, hit=True)
    assert select(marked, "$..[?own_attrs.hit]").paths == (("block", "if_1", "then_branch", "inner"),)
    assert select(g, "$..[?own_attrs.hit]").paths == ()
