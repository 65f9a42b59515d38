"""Wrong argument types to select, compile_selector and Selection methods raise AmandaError
subclasses naming what was found, never a bare TypeError, ValueError or IndexError."""

import pytest

import amanda
from amanda.containers import Container, op
from amanda.errors import PathError, QueryError
from amanda.query import compile_selector

MODEL = Container("G", "g", children=[op("Dot", "a"), op("Relu", "b")])


@pytest.mark.parametrize("selector", [3, None, ["$"], {"$": 1}, b"$", ("$",)])
def test_a_selector_that_is_not_a_string(selector):
    """select, compile_selector and Selection.select refuse a non-string selector with QueryError."""
    for call in (lambda: amanda.select(MODEL, selector), lambda: compile_selector(selector),
                 lambda: amanda.select(MODEL, "$.*").select(selector)):
        with pytest.raises(QueryError, match="a selector is a string"):
            call()


@pytest.mark.parametrize("container", ["g", None, 3, {"type": "Dot"}, [MODEL]])
def test_querying_something_that_is_not_a_container(container):
    """select and a compiled selector's select refuse a non-Container with QueryError naming its type."""
    for call in (lambda: amanda.select(container, "$.*"), lambda: compile_selector("$.*").select(container)):
        with pytest.raises(QueryError, match=f"found {type(container).__name__}"):
            call()


@pytest.mark.parametrize("kwargs, message", [
    ({"engine": "fast"}, "engine is one of"),
    ({"engine": ["compiled"]}, "engine is a string"),
    ({"relative": [True]}, "relative is True or False"),
    ({"relative": "yes"}, "relative is True or False"),
])
def test_compile_selector_options_of_the_wrong_type(kwargs, message):
    """A bad engine or relative flag (even an unhashable one) is a QueryError."""
    with pytest.raises(QueryError, match=message):
        compile_selector("$.*", **kwargs)


def test_selection_indexes():
    """A Selection takes int and slice indexes; another type is a QueryError, an index out of range a PathError."""
    selection = amanda.select(MODEL, "$.*")
    assert selection[0][0] == ("a",) and selection[-1][0] == ("b",)
    assert selection[0:1] == ((("a",),), (MODEL.children[0],))
    for bad in ("a", 1.0, None, True, ("a",)):
        with pytest.raises(QueryError, match="indexed by an int or a slice"):
            selection[bad]
    for out in (2, -3, 10**20):
        with pytest.raises(PathError, match="has 2 nodes"):
            selection[out]
    assert [1] not in selection and "a" not in selection
