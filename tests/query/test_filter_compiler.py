"""The filter compiler: JMESPath's semantics kept exactly, indexes chosen safely, and the
jmespath library used for what is not compiled."""

import jmespath
import numpy as np
import pytest

from amanda import Container, QueryError, op
from amanda.query import compile_selector
from amanda.query.parse import parse_selector
from amanda.query.predicate import Predicate
from amanda.query.view import to_jmes
from tests.query.models import brute_select

VALUES = [0, 1, -1, 0.0, 2.5, True, False, "", "b", "abc", None, [], [0], [1, 2], {}, {"x": 1}]
NUMBERS = [v for v in VALUES if not isinstance(v, str)]  # ordering these never raises
STRINGS = [v for v in VALUES if isinstance(v, str) or v is None]
MODEL = Container("G", "g", children=[
    op("T", f"v{k}", attrs={
        "v": v, "w": VALUES[(k + 3) % len(VALUES)], "n": NUMBERS[k % len(NUMBERS)], "s": STRINGS[k % len(STRINGS)],
    }) for k, v in enumerate(VALUES)
] + [op("T", "none")], attrs={"top": 1})

EXPRESSIONS = [
    "attrs.v", "!(attrs.v)", "attrs.v == `0`", "attrs.v == `1`", "attrs.v == `true`", "attrs.v == `false`",
    "attrs.v != `0`", "attrs.v == `null`", "attrs.v == `[]`", "attrs.v == `{}`", "attrs.v == 'b'",
    "attrs.v > `0`", "attrs.v >= `0.0`", "attrs.v < 'c'", "attrs.v <= attrs.w", "attrs.v == attrs.w",
    "(attrs.v || attrs.w) == 'b'", "(attrs.v && attrs.w) == `1`", "!attrs.v", "!(attrs.v == `0`)",
    "attrs.v.x == `1`", "attrs.v[0] == `1`", "attrs.v[*] == `[1, 2]`", "length(attrs.v) > `0`",
    "contains(`[0, 1]`, attrs.v)", "type(attrs.v) == 'number'", "attrs.v | length(@) == `3`",
    "[attrs.v, attrs.w][0] == `1`", "{a: attrs.v}.a == 'b'", "@.attrs.v == `2.5`", "not_null(attrs.missing, attrs.v)",
    "max_by(`[{\"a\": 1}]`, &a).a == `1`", "own_attrs.v == attrs.v", "attrs.top == `1`", "`true`", "`0`", "''",
    "attrs.n > `0`", "attrs.n >= `0.0`", "`1` < attrs.n", "attrs.n <= attrs.n", "attrs.n < `2.5` && attrs.n",
    "attrs.s < 'c'", "attrs.s >= 'abc'", "attrs.s > attrs.s", "!(attrs.n > `0`)", "attrs.n > `0` || attrs.s",
    "depth", "!depth", "name", "attrs.v == attrs.v", "is_op || attrs.v", "name == type", "inputs == outputs",
]


@pytest.mark.parametrize("expression", EXPRESSIONS)
def test_compiled_filters_agree_with_jmespath(expression):
    """Each filter selects the same nodes (or fails the same way) in both engines and in the
    brute-force evaluator, on values chosen to hit JMESPath's corner cases."""
    text = f"$[?{expression}]"
    results = []
    for engine in ("compiled", "jmespath"):
        try:
            results.append(compile_selector(text, engine=engine).select(MODEL).paths)
        except QueryError:
            results.append("error")
    try:
        brute = tuple(brute_select(MODEL, [("child", "filter", expression)]))
    except (jmespath.exceptions.JMESPathError, TypeError, ValueError):
        brute = "error"
    assert results[0] == results[1] == brute


@pytest.mark.parametrize("expression", ["missing_field", "missing_field.deeper", "!missing_field",
                                        "attrs.v == missing_field"])
def test_a_field_no_view_has_is_refused_by_both_engines(expression):
    """A field no node's view has (always null in JMESPath) is a QueryError in either engine."""
    for engine in ("compiled", "jmespath"):
        with pytest.raises(QueryError, match="missing_field"):
            compile_selector(f"$[?{expression}]", engine=engine)


def predicate(text: str) -> Predicate:
    return Predicate(text, parse_selector(text)[0])


def test_the_common_subset_is_compiled_without_jmespath():
    """Comparisons, &&, ||, !, fields, literals and calls compile to Python; only other
    nodes (projections, indexes, pipes …) are handed to jmespath."""
    compiled = predicate("$[?is_op && attrs.i > `97` || !(name == 'x') && starts_with(type, 'M')]")
    assert compiled.fallbacks == 0 and compiled.calls == ("starts_with",)
    assert predicate("$[?inputs[0] == 'x']").fallbacks == 1


def test_indexes_are_chosen_only_where_safe():
    """A conjunct narrows the candidates only if nothing before it can raise; an exact one
    alone needs no evaluation at all."""
    assert predicate("$[?type == 'Dot']").prefilters == [("type", "Dot")]
    assert predicate("$[?type == 'Dot']").exact
    assert predicate("$[?is_op && attrs.k]").prefilters == [("attr", "k"), ("is_op", None)]
    assert not predicate("$[?is_op && attrs.k]").exact
    assert predicate("$[?attrs.i > `1` && type == 'Dot']").prefilters == [("attr", "i")]
    assert predicate("$[?abs(depth) > `1` && type == 'Dot']").prefilters == []
    assert predicate("$[?type == 'Dot' || is_op]").prefilters == []
    assert predicate("$[?attrs.k == `null` && own_attrs.j != `1`]").prefilters == []
    assert predicate("$[?in_computation('train') && own_attrs.j == 'x']").prefilters == [
        ("computation", "train"), ("own", "j")]


def test_to_jmes_converts_values_to_json():
    """to_jmes makes tuples lists, maps dicts, arrays lists or scalars, held graphs summaries."""
    from pyrsistent import pmap

    g = Container("Graph", "body")
    assert to_jmes((1, (2,))) == [1, [2]]
    assert to_jmes(pmap({"a": (1,)})) == {"a": [1]}
    assert to_jmes(np.array([[1.5]], dtype="float32")) == [[1.5]]
    assert to_jmes(np.array(True)) is True
    assert to_jmes(np.dtype("int8")) == "int8"
    assert to_jmes(g) == {"type": "Graph", "name": "body"}
    assert to_jmes(b"raw") == b"raw"


def test_filter_helpers():
    """truth follows JMESPath; field_chain recognises plain field chains; view_keys lists the
    view keys a fallback reads (None when it needs the whole view)."""
    from amanda.query.filters import field_chain, truth, view_keys

    assert [truth(v) for v in (0, "", [], {}, None, False, "a", [0])] == [True, False, False, False, False, False, True, True]
    assert field_chain(jmespath.compile("attrs.k.x").parsed) == ["attrs", "k", "x"]
    assert field_chain(jmespath.compile("attrs.k[0]").parsed) is None
    assert view_keys(jmespath.compile("inputs[0] == name").parsed) == {"inputs", "name"}
    assert view_keys(jmespath.compile("sort_by(inputs, &x)[0].y").parsed) == {"inputs"}
    assert view_keys(jmespath.compile("length(@)").parsed) is None
