"""Properties of select: it agrees with a brute-force evaluator, its two engines agree,
and querying never changes the model."""

import jmespath
from hypothesis import given, settings
from hypothesis import strategies as st

import amanda
from amanda import QueryError
from amanda.query import compile_selector, select
from tests.query.models import brute_select, filters, node_at, query_models, selector_steps

FAILURES = (jmespath.exceptions.JMESPathError, TypeError, ValueError)


@given(query_models(), selector_steps())
def test_select_matches_brute_force(model, selector):
    """For random models and selectors, select returns exactly the brute-force paths, in order,
    and raises QueryError exactly when evaluating by definition fails."""
    text, steps = selector
    try:
        expected = brute_select(model, steps)
    except FAILURES:
        try:
            select(model, text)
        except QueryError:
            return
        raise AssertionError(f"{text} should have raised a QueryError") from None
    found = select(model, text)
    assert list(found.paths) == expected, text
    assert all(node is node_at(model, path) for path, node in found)


@given(query_models(), selector_steps())
def test_repeated_queries_agree(model, selector):
    """A repeated query (answered from the cached indexes) returns what the first one did."""
    text, _ = selector
    try:
        first = select(model, text)
    except QueryError:
        return
    again = select(model, text)
    assert again.paths == first.paths
    assert all(a is b for a, b in zip(again.containers, first.containers))


EXTRA_ATOMS = st.sampled_from([
    "in_computation('train')", "in_computation('inference')", "!in_computation('train')",
    "contains(producer_types(), 'Dot')", "length(consumer_types()) > `0`", "in_computation(name)",
    "attrs.i > `2` && in_computation('x')", "type == 'Relu' && contains(consumer_types(), 'Add')",
])


@given(query_models(), st.one_of(filters(), EXTRA_ATOMS), st.sampled_from(["$..[?{}]", "$[?{}]", "$.*..[?{}]"]))
def test_compiled_filters_match_jmespath(model, condition, shape):
    """The compiled filter selects exactly what jmespath on each node's view selects, and
    fails exactly when it fails."""
    text = shape.format(condition)
    outcomes = []
    for engine in ("compiled", "jmespath"):
        try:
            outcomes.append(compile_selector(text, engine=engine).select(model).paths)
        except QueryError:
            outcomes.append("QueryError")
    assert outcomes[0] == outcomes[1], text


@given(query_models(), selector_steps())
@settings(max_examples=30)
def test_select_is_pure(model, selector):
    """A query leaves the model equal to what it was (and its YAML unchanged)."""
    text, _ = selector
    before = amanda.dumps(model)
    try:
        select(model, text)
    except QueryError:
        pass
    assert amanda.dumps(model) == before


@given(query_models(), selector_steps(), selector_steps())
@settings(max_examples=40)
def test_relative_select_composes(model, first, second):
    """sel.select(rest) equals selecting the concatenated selector."""
    text, _ = first
    rest, _ = second
    try:
        whole = select(model, text + rest[1:]).paths
    except QueryError:
        return
    assert select(model, text).select(rest).paths == whole
