"""Filters nested past the nesting limits are refused with a QueryError at a column, never RecursionError."""

import re

import pytest

import amanda
from amanda.containers import Container, op
from amanda.errors import QueryError
from amanda.jmespath_nesting import MAX_NESTING, MAX_TREE_DEPTH
from amanda.query import compile_selector

TOO_DEEP = rf"nested deeper than {MAX_NESTING} levels|more than {MAX_TREE_DEPTH}"

MODEL = Container("G", "g", children=[op("Dot", "a", attrs={"k": 1}), op("Relu", "b")])

# each builds a filter of n nested constructs, one kind per entry: what jmespath parses or
# evaluates recursively, and the left-nested chains whose trees grow one level per operator
SHAPES = {
    "parentheses": lambda n: "(" * n + "is_op" + ")" * n,
    "lists": lambda n: "[" * n + "is_op" + "]" * n,
    "hashes": lambda n: "{a:" * n + "is_op" + "}" * n,
    "nots": lambda n: "!" * n + "is_op",
    "exprefs": lambda n: "sort_by(`[1]`, &" * n + "@" + ")" * n,
    "functions": lambda n: "not_null(" * n + "is_op" + ")" * n,
    "ors": lambda n: " || ".join(["is_op"] * n),
    "ands": lambda n: " && ".join(["is_op"] * n),
    "pipes": lambda n: " | ".join(["is_op"] * n),
    "comparisons": lambda n: " == ".join(["name"] * n),
    "projections": lambda n: "attrs.k" + "[*]" * n,
    "flattens": lambda n: "attrs.k" + "[]" * n,
    "filters": lambda n: "attrs.k" + "[?@]" * n,
    "nested_filters": lambda n: "attrs[?" * n + "@" + "]" * n,
    "star_chains": lambda n: "attrs" + ".*" * n,
    "indexes": lambda n: "attrs.k" + "[0]" * n,
    # JSON literals are decoded by Python's recursive json module while the filter is lexed
    "json_arrays": lambda n: "`" + "[" * n + "]" * n + "`",
    "json_objects": lambda n: "`" + '{"a": ' * n + "1" + "}" * n + "`",
    "json_in_a_comparison": lambda n: "type == `" + "[" * n + '"]"' + "]" * n + "`",
}


def deepest_allowed(shape):
    """The largest n whose filter compiles (n + 1 is refused for its depth)."""
    n = 1
    while True:
        try:
            compile_selector(f"$..[?{shape(n + 1)}]")
        except QueryError as error:
            assert re.search(TOO_DEEP, str(error)), error
            return n
        n += 1


@pytest.mark.parametrize("kind", sorted(SHAPES))
@pytest.mark.parametrize("engine", ["compiled", "jmespath"])
def test_deepest_allowed_filter_runs_and_one_more_is_refused(kind, engine):
    """At the limit a filter compiles and runs in both engines; one level more is a QueryError naming its column."""
    shape = SHAPES[kind]
    n = deepest_allowed(shape)
    try:
        compile_selector(f"$..[?{shape(n)}]", engine=engine).select(MODEL)
    except QueryError as error:  # a type error of jmespath's is fine; recursion is not
        assert not re.search(TOO_DEEP, str(error))
    assert n >= min(MAX_NESTING, MAX_TREE_DEPTH) // 3  # the limits are not met by accident earlier
    selector = f"$..[?{shape(n + 1)}]"
    with pytest.raises(QueryError, match=TOO_DEEP) as info:
        compile_selector(selector, engine=engine)
    column = info.value.position
    assert 5 <= column < len(selector)


@pytest.mark.parametrize("kind", sorted(SHAPES))
def test_thousands_of_levels_are_a_query_error(kind):
    """A filter nested 5000 deep raises QueryError, not RecursionError, from amanda.select."""
    with pytest.raises(QueryError, match=TOO_DEEP):
        amanda.select(MODEL, f"$[?{SHAPES[kind](5000)}]")


def test_the_column_points_at_the_first_token_past_the_limit():
    """For `!!!…x` the error column is that of the (MAX_NESTING+1)-th `!`."""
    selector = "$[?" + "!" * (MAX_NESTING + 5) + "is_op]"
    with pytest.raises(QueryError) as info:
        amanda.select(MODEL, selector)
    assert info.value.position == 3 + MAX_NESTING


def test_wide_filters_are_not_deep():
    """Many siblings at one level, or 150 alternatives `name == 'x' || ...`, stay allowed."""
    names = ", ".join(f"'n{i}'" for i in range(300))
    assert amanda.select(MODEL, f"$[?contains([{names}, 'a'], name)]").paths == (("a",),)
    alternatives = " || ".join(f"name == 'n{i}'" for i in range(150))
    assert amanda.select(MODEL, f"$[?{alternatives} || name == 'b']").paths == (("b",),)
