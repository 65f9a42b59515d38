"""The usual JMESPath traps never select nothing silently: a field no view has (a double-quoted
or bare word, `true`) and a bare number are QueryErrors that show the literal meant, in both
engines, while comparisons between real fields of the view keep working."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import amanda
from amanda.errors import QueryError
from amanda.query import compile_selector
from amanda.query.traps import number_hint
from amanda.query.view import VIEW_KEYS
from tests.query.models import brute_select, four_queries_model

MODEL = four_queries_model()


@pytest.mark.parametrize("selector, fix, column", [
    ('$..[?type == "Conv"]', "'Conv'", 13),
    ("$..[?type == Conv]", "'Conv'", 13),
    ("$..[?Conv == type]", "'Conv'", 5),
    ('$..[?is_op && name != "it\'s"]', "'it\\'s'", 22),
    ("$..[?attrs.units > 4]", "`4`", 19),
    ("$..[?attrs.units >= -2.5]", "`-2.5`", 20),
    ("$..[?attrs.debug == true]", "`true`", 20),
    ("$..[?own_attrs.k == null]", "`null`", 20),
    ("$..[?typ == 'Dot']", "'type'", 5),
    ("$..[?contains(producer_types(), Dot)]", "'Dot'", 32),
])
@pytest.mark.parametrize("engine", ["compiled", "jmespath"])
def test_each_trap_is_a_query_error_showing_the_fix(selector, fix, column, engine):
    """The error points at the word or number and shows the literal to write instead."""
    with pytest.raises(QueryError) as info:
        compile_selector(selector, engine=engine).select(MODEL)
    assert fix in str(info.value)
    assert info.value.position == column  # type: ignore[attr-defined]


@pytest.mark.parametrize("expression", [
    "name == type", "inputs == outputs", "path == path", "namespace == uid", "controls == inputs",
    "inputs[?@ == 'x']", "sort_by(inputs, &@) == inputs", "attrs.missing == `null`", "@.name == 'w'",
    "length(keys(attrs)) > `0`", "[name, type][0] == 'w'", "{n: name}.n == 'w'", "attrs.*",
])
def test_fields_of_the_view_and_of_other_values_still_work(expression):
    """Comparisons between real view fields, and fields read from other values, select what a
    brute-force JMESPath scan selects, in both engines."""
    expected = tuple(brute_select(MODEL, [("descendant", "filter", expression)]))
    for engine in ("compiled", "jmespath"):
        assert compile_selector(f"$..[?{expression}]", engine=engine).select(MODEL).paths == expected


@given(st.sampled_from(VIEW_KEYS), st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True),
       st.booleans())
def test_a_comparison_with_a_missing_field_is_refused_and_a_view_field_is_not(field, word, quoted):
    """`field == word` is refused exactly when `word` is not a key of the view, whatever the
    quoting; the message shows the raw string to write."""
    shown = f'"{word}"' if quoted else word
    selector = f"$..[?{field} == {shown}]"
    if word in VIEW_KEYS:
        compile_selector(selector).select(MODEL)
        return
    with pytest.raises(QueryError) as info:
        compile_selector(selector)
    message = str(info.value)
    assert word in message and ("did you mean" in message or f"'{word}'" in message or f"`{word}`" in message)


def test_the_fix_shown_selects_what_was_meant():
    """Writing the literal the error shows gives the nodes the user wanted."""
    try:
        amanda.select(MODEL, '$..[?type == "Dot"]')
    except QueryError as error:
        assert "'Dot'" in str(error)
    fixed = amanda.select(MODEL, "$..[?type == 'Dot']")
    assert fixed.paths and all(node.type == "Dot" for node in fixed.containers)


def test_number_hint():
    """A bare number gets the backtick form; any other token gets no hint."""
    assert "`4`" in number_hint("number", "4]") and "`1.5`" in number_hint("number", "1.5 && x")
    assert number_hint("rbracket", "]") == ""
