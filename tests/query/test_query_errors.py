"""Query errors: every failure is a QueryError that shows the selector with a caret."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from amanda import AmandaError, Container, QueryError, op
from amanda.query import compile_selector, select

MODEL = Container("G", "g", children=[
    op("Dot", "a", attrs={"i": 3, "tag": "x"}), op("Relu", "b", attrs={"i": "three"}),
])


def caret_column(error: QueryError) -> int:
    return str(error).splitlines()[2].index("^") - 2


def test_unknown_function_points_at_its_name():
    """An unknown function is refused when the selector is compiled, caret under its name."""
    text = "$..[?is_op && frobnicate(name)]"
    with pytest.raises(QueryError) as caught:
        compile_selector(text)
    assert "frobnicate" in str(caught.value) and caret_column(caught.value) == text.index("frobnicate")


def test_wrong_number_of_arguments_is_refused():
    """A call with the wrong number of arguments is refused at compile time."""
    text = "$[?in_computation()]"
    with pytest.raises(QueryError) as caught:
        compile_selector(text)
    assert caret_column(caught.value) == text.index("in_computation")
    with pytest.raises(QueryError):
        compile_selector("$[?contains(path)]")


@pytest.mark.parametrize("engine", ["compiled", "jmespath"])
def test_function_type_errors_name_the_node(engine):
    """A function given the wrong type fails with the node's path and a caret under the call
    (the type complaint itself is jmespath's wording, so it is not judged)."""
    text = "$[?abs(attrs.i) > `1`]"
    with pytest.raises(QueryError) as caught:
        compile_selector(text, engine=engine).select(MODEL)
    assert "node b" in str(caught.value)
    assert caret_column(caught.value) == text.index("abs")


@pytest.mark.parametrize("engine", ["compiled", "jmespath"])
def test_ordering_a_string_against_a_number_fails(engine):
    """Comparing a string with a number by order is a type error, caret under the operator."""
    text = "$[?attrs.i > `1`]"
    with pytest.raises(QueryError) as caught:
        compile_selector(text, engine=engine).select(MODEL)
    assert "node b" in str(caught.value) and caret_column(caught.value) == text.index(">")


def test_a_type_error_behind_a_false_conjunct_is_not_reached():
    """As in JMESPath, `&&` stops at a false operand, so the failing comparison never runs."""
    assert select(MODEL, "$[?type == 'Dot' && attrs.i > `1`]").paths == (("a",),)


def test_query_errors_are_amanda_errors():
    """QueryError is an AmandaError (one root for every error amanda raises)."""
    with pytest.raises(AmandaError):
        select(MODEL, "nope")


@given(st.text(alphabet="$.[]?*'\"`()&|!=<>:-0123456789abz_ @", max_size=24))
def test_any_text_gives_a_selection_or_a_query_error(text):
    """Whatever the text, select returns a Selection or raises QueryError, nothing else."""
    try:
        select(MODEL, text)
    except QueryError as error:
        assert "^" in str(error)
