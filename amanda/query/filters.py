"""JMESPath filter ASTs turned into Python predicates over table columns, by composing
closures (no code is generated or executed: a filter is a user's text).

:class:`Compiler` turns a filter into a *maker*: given the run's environment (the
table columns it reads, the function caller, the jmespath fallback) the maker returns
a test ``i -> bool`` that is true exactly where JMESPath finds the filter true on node
``i``'s view. Fields of the view read table columns (``attrs.k`` reads the effective
column of ``k``); literals, comparisons, ``&&``, ``||``, ``!`` and function calls become
Python closures; any other node is evaluated by the jmespath library on a view holding
just the keys it reads. Helpers below repeat jmespath's rules exactly (``0`` is true,
``1 == true`` is false, ordering compares numbers or strings and is null otherwise).

>>> import jmespath
>>> compiler = Compiler()
>>> make = compiler.truth(jmespath.compile("is_op && type == 'Dot'").parsed)
>>> compiler.specs
[('is_op',), ('type',)]
>>> test = make(Env([[True, True, False], ["Dot", "Add", "Dot"]], None, None))
>>> [i for i in range(3) if test(i)]
[0]
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from numbers import Number
from typing import Any

__all__ = ["FIELDS", "ORDER", "Compiler", "Env", "field_chain", "truth", "view_keys"]

FIELDS = {
    "name": ("name",), "type": ("type",), "path": ("path",), "depth": ("depth",),
    "attrs": ("attrs",), "own_attrs": ("own_attrs",), "inputs": ("inputs",), "outputs": ("outputs",),
    "controls": ("controls",), "is_op": ("is_op",), "namespace": ("attr", "namespace"), "uid": ("uid",),
}
# how each column's values turn into JMESPath truth: Python's own truth agrees with
# JMESPath for strings, lists, dicts, None and booleans, not for numbers (0 is true)
_PY_TRUTH = {"name", "type", "path", "attrs", "own_attrs", "inputs", "outputs", "controls", "uid"}
ORDER = {"lt": "<", "gt": ">", "lte": "<=", "gte": ">="}
_OPERATORS = {"lt": operator.lt, "gt": operator.gt, "lte": operator.le, "gte": operator.ge}


# -- JMESPath's semantics, as helpers for the generated code ----------------------------------


def _is_number(x: Any) -> bool:
    return isinstance(x, Number) and not isinstance(x, bool)


def truth(value: Any) -> bool:
    return not (value == "" or value == [] or value == {} or value is None or value is False)


def _not(value: Any) -> bool:
    if _is_number(value) and value == 0:
        return False
    return not value


def _eq(x: Any, y: Any) -> bool:
    if _is_number(x) and x in (0, 1):
        if isinstance(y, bool):
            return False
    elif _is_number(y) and y in (0, 1) and isinstance(x, bool):
        return False
    return x == y


def _ordered(op: str, x: Any, y: Any) -> Any:
    if not ((_is_number(x) or isinstance(x, str)) and (_is_number(y) or isinstance(y, str))):
        return None
    return _OPERATORS[op](x, y)


def _field(value: Any, key: str) -> Any:
    return value.get(key) if value.__class__ is dict else None


_NUM = frozenset({int, float})


# -- the compiler -------------------------------------------------------------------------------

Test = Callable[[int], Any]
Maker = Callable[["Env"], Test]


class Env:
    """What a compiled filter reads when it runs: ``cols[k]`` is the column of spec ``k``,
    ``call(i, name, args)`` calls a registered function, ``jm(i, node, keys)`` evaluates a
    node with the jmespath library."""

    __slots__ = ("call", "cols", "jm")

    def __init__(self, cols: Sequence[Any], call: Any, jm: Any) -> None:
        self.cols = cols
        self.call = call
        self.jm = jm


def _constant(value: Any) -> Maker:
    return lambda env: lambda i: value


class Compiler:
    """Builds makers for filter ASTs; ``specs`` lists the columns they read, in order,
    ``fallbacks`` counts nodes left to jmespath and ``calls`` the functions called."""

    def __init__(self) -> None:
        self.specs: list[tuple] = []
        self.fallbacks = 0
        self.calls: list[str] = []

    def column(self, spec: tuple) -> int:
        if spec not in self.specs:
            self.specs.append(spec)
        return self.specs.index(spec)

    def fallback(self, node: dict) -> tuple[Maker, str]:
        self.fallbacks += 1
        keys = view_keys(node)
        return (lambda env: lambda i: env.jm(i, node, keys)), "any"

    def value(self, node: dict) -> tuple[Maker, str]:
        """A maker of JMESPath's value of ``node`` on the view of node ``i``, and the kind of
        that value (for truth tests)."""
        kind = node["type"]
        if kind in ("field", "subexpression"):
            chain = field_chain(node)
            if chain is None:
                return self.fallback(node)
            return self.fields(chain)
        if kind == "literal":
            return _constant(node["value"]), "literal"
        if kind == "current":
            k = self.column(("view",))
            return (lambda env: env.cols[k].__getitem__), "py"
        if kind == "comparator":
            return self.comparator(node), "py"
        if kind in ("and_expression", "or_expression"):
            left, right = (self.value(c)[0] for c in node["children"])
            both = kind == "and_expression"

            def make(env: Env) -> Test:
                first, second = left(env), right(env)
                if both:
                    return lambda i: second(i) if truth(value := first(i)) else value
                return lambda i: value if truth(value := first(i)) else second(i)

            return make, "any"
        if kind == "not_expression":
            return self.negation(node["children"][0]), "bool"
        if kind == "function_expression":
            return self.call(node)
        return self.fallback(node)

    def fields(self, chain: list[str]) -> tuple[Maker, str]:
        head, rest = chain[0], chain[1:]
        if head in ("attrs", "own_attrs") and rest:
            spec: tuple | None = ("attr" if head == "attrs" else "own", rest[0])
            rest = rest[1:]
        else:
            spec = FIELDS.get(head)
        if spec is None:
            return _constant(None), "literal"
        k = self.column(spec)
        if rest:
            keys = tuple(rest)

            def make(env: Env) -> Test:
                column = env.cols[k]

                def walk(i: int) -> Any:
                    value = column[i]
                    for key in keys:
                        value = _field(value, key)
                    return value

                return walk

            return make, "any"
        make_column: Maker = lambda env: env.cols[k].__getitem__  # noqa: E731
        if spec[0] == "is_op":
            return make_column, "bool"
        if spec[0] == "depth":
            return make_column, "true"
        return make_column, "py" if spec[0] in _PY_TRUTH else "any"

    def comparator(self, node: dict) -> Maker:
        op = node["value"]
        left_node, right_node = node["children"]
        left, right = self.value(left_node)[0], self.value(right_node)[0]
        literal = _literal_of(right_node, left_node)
        if op in ("eq", "ne"):
            plain = literal is not _NONE and not isinstance(literal, bool) and not (
                _is_number(literal) and literal in (0, 1)
            )
            equal = operator.eq if plain else _eq
            negate = op == "ne"

            def make_eq(env: Env) -> Test:
                a, b = left(env), right(env)
                if negate:
                    return lambda i: not equal(a(i), b(i))
                return lambda i: equal(a(i), b(i))

            return make_eq
        compare = _OPERATORS[op]
        if right_node["type"] == "literal" and type(literal) in (int, float, str):
            # the usual case, a column against a number or string literal: test the class inline
            bound = literal
            numeric = type(literal) is not str

            def make_literal(env: Env) -> Test:
                a = left(env)

                def test(i: int) -> Any:
                    value = a(i)
                    if (value.__class__ in _NUM) if numeric else (value.__class__ is str):
                        return compare(value, bound)
                    return _ordered(op, value, bound)

                return test

            return make_literal

        def make_ordered(env: Env) -> Test:
            a, b = left(env), right(env)
            return lambda i: _ordered(op, a(i), b(i))

        return make_ordered

    def negation(self, child: dict) -> Maker:
        inner, kind = self.value(child)
        if kind == "bool":
            return lambda env: (lambda f: lambda i: not f(i))(inner(env))
        return lambda env: (lambda f: lambda i: _not(f(i)))(inner(env))

    def call(self, node: dict) -> tuple[Maker, str]:
        name, args = node["value"], node["children"]
        if any(a["type"] == "expref" for a in args):
            return self.fallback(node)
        self.calls.append(name)
        if name == "in_computation" and len(args) == 1 and args[0]["type"] == "literal" and isinstance(
            args[0]["value"], str
        ):
            k = self.column(("computation-set", args[0]["value"]))
            return (lambda env: env.cols[k].__contains__), "bool"
        makers = [self.value(a)[0] for a in args]

        def make(env: Env) -> Test:
            parts = [m(env) for m in makers]
            call = env.call
            return lambda i: call(i, name, [p(i) for p in parts])

        return make, "any"

    def truth(self, node: dict) -> Maker:
        """A maker of a test that is true exactly when JMESPath finds ``node`` true."""
        kind = node["type"]
        if kind in ("and_expression", "or_expression"):
            left, right = (self.truth(c) for c in node["children"])
            if kind == "and_expression":
                return lambda env: (lambda a, b: lambda i: a(i) and b(i))(left(env), right(env))
            return lambda env: (lambda a, b: lambda i: a(i) or b(i))(left(env), right(env))
        make, value_kind = self.value(node)
        if value_kind in ("bool", "py"):
            return make
        if value_kind == "true":
            return _constant(True)
        if value_kind == "literal":
            return _constant(truth(node["value"] if kind == "literal" else None))
        return lambda env: (lambda f: lambda i: truth(f(i)))(make(env))


_NONE = object()


def _literal_of(*nodes: dict) -> Any:
    for node in nodes:
        if node["type"] == "literal":
            return node["value"]
    return _NONE


def view_keys(node: dict) -> frozenset | None:
    """The view keys evaluating ``node`` on a view can read; None if it may need the whole
    view (``@``). A fallback then builds only those keys."""
    keys: set[str] = set()
    stack = [node]
    while stack:
        here = stack.pop()
        kind = here["type"]
        if kind == "current":
            return None
        if kind == "field":
            keys.add(here["value"])
            continue
        children = [c for c in here.get("children", ()) if isinstance(c, dict)]
        if kind in ("subexpression", "index_expression", "projection", "value_projection", "pipe",
                    "filter_projection"):
            # only the first child reads the view; the others read what it produced
            stack.append(children[0])
        elif kind != "expref":  # an expref reads the elements a function hands it
            stack.extend(children)
    return frozenset(keys)


def field_chain(node: dict) -> list[str] | None:
    """``["attrs", "k", …]`` for a plain chain of field accesses; None otherwise."""
    if node["type"] == "field":
        return [node["value"]]
    if node["type"] != "subexpression":
        return None
    head = field_chain(node["children"][0])
    if head is None:
        return None
    for child in node["children"][1:]:
        if child["type"] != "field":
            return None
        head.append(child["value"])
    return head
