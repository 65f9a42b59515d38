"""The selector grammar: steps parsed from text, and filters found inside brackets."""

import pytest

from amanda import QueryError
from amanda.query.parse import Step, compile_filter, find_filter_end, parse_selector, query_error


def steps(text, relative=False):
    return [(s.axis, s.test, s.arg) for s in parse_selector(text, relative)]


def test_every_step_kind_parses():
    """Names, quoted names, `*`, indexes, slices, filters and `..` parse into steps."""
    assert steps("$") == []
    assert steps("$.a.b-c.x_1") == [("child", "name", "a"), ("child", "name", "b-c"), ("child", "name", "x_1")]
    assert steps('$."dense/MatMul".\'it\\\'s\'') == [("child", "name", "dense/MatMul"), ("child", "name", "it's")]
    assert steps("$.*[*][2][-1]") == [("child", "any", None), ("child", "any", None),
                                       ("child", "index", 2), ("child", "index", -1)]
    assert steps("$[1:][:-1][::2][ 1 : 3 : 1 ]") == [
        ("child", "slice", (1, None, None)), ("child", "slice", (None, -1, None)),
        ("child", "slice", (None, None, 2)), ("child", "slice", (1, 3, 1)),
    ]
    assert steps("$..a..*..[0]..[?is_op]..['x y']") == [
        ("descendant", "name", "a"), ("descendant", "any", None), ("descendant", "index", 0),
        ("descendant", "filter", "is_op"), ("descendant", "name", "x y"),
    ]


def test_filter_text_may_hold_brackets_and_quotes():
    """A filter ends at its own `]`, not at brackets or quotes inside it."""
    text = "$..[?inputs[0] == ']' && contains(path, `\"]\"`) && \"odd]key\" == `null`].x"
    (first, second) = parse_selector(text)
    assert first.arg == "inputs[0] == ']' && contains(path, `\"]\"`) && \"odd]key\" == `null`"
    assert text[first.offset:first.offset + len(first.arg)] == first.arg
    assert (second.axis, second.arg) == ("child", "x")


def test_find_filter_end():
    """find_filter_end gives the index of the closing bracket, or -1."""
    assert find_filter_end("[?a[0]]", 2) == 6
    assert find_filter_end("[?a == ']'", 2) == -1
    assert find_filter_end("[?(a]", 2) == -1


def test_whitespace_between_steps_is_allowed():
    """Spaces around steps and inside brackets are ignored."""
    assert steps("  $ .a [ 0 ]  ") == [("child", "name", "a"), ("child", "index", 0)]


def test_relative_selectors_may_omit_the_dollar():
    """With relative=True the leading `$` is optional."""
    assert steps("..[?is_op]", relative=True) == [("descendant", "filter", "is_op")]
    assert steps("$.a", relative=True) == [("child", "name", "a")]


def test_step_positions_point_into_the_text():
    """Each step records its column, and a filter the column where its text starts."""
    first, second = parse_selector("$.a..[?x]")
    assert (first.position, second.position, second.offset) == (1, 3, 7)
    assert isinstance(first, Step)


@pytest.mark.parametrize(
    "text, column",
    [
        ("a.b", 0), ("$.", 2), ("$..", 3), ("$.a[", 4), ("$[x]", 2), ("$[1", 3), ("$[?is_op", 1),
        ("$[?]", 3), ("$.'abc", 2), ("$[::0]", 2), ("$ a", 2), ("$.a/b", 3), ("$[1:2:3:4]", 7),
    ],
)
def test_malformed_selectors_raise_with_a_caret(text, column):
    """A malformed selector raises QueryError showing the selector and a caret under the fault."""
    with pytest.raises(QueryError) as caught:
        parse_selector(text)
    error = caught.value
    lines = str(error).splitlines()
    assert lines[1] == f"  {text}" and lines[2] == "  " + " " * column + "^"
    assert error.position == column and error.selector == text


def test_non_string_selectors_are_refused():
    """A selector that is not a string raises QueryError."""
    with pytest.raises(QueryError):
        parse_selector(["$"])  # type: ignore[arg-type]


def test_filter_syntax_errors_point_into_the_filter():
    """A JMESPath syntax error points at its column inside the selector."""
    text = "$..[?type = 'x']"
    step = parse_selector(text)[0]
    with pytest.raises(QueryError) as caught:
        compile_filter(text, step)
    assert caught.value.position == text.index("= 'x'")
    text = "$..[?is_op && ]"
    with pytest.raises(QueryError) as caught:
        compile_filter(text, parse_selector(text)[0])
    assert caught.value.position == text.index("]")
    text = "$[?a ~ b]"
    with pytest.raises(QueryError) as caught:
        compile_filter(text, parse_selector(text)[0])
    assert caught.value.position == text.index("~")


def test_query_error_format():
    """query_error shows the message, the selector and a caret, and keeps its fields."""
    error = query_error("$.a\tb", 3, "bad", expected="x", found="y")
    assert str(error).splitlines() == ["bad (column 3)", "  $.a b", "     ^"]
    assert (error.expected, error.found) == ("x", "y")
